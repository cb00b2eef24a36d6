/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSessionHelper"

#include "config.h"

#include <errno.h>
#include <gio/gunixfdlist.h>
#include <gio/gunixsocketaddress.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-helper-protocol.h"
#include "vd-session-helper.h"
#include "vd-unit-sandbox.h"

/* The helper's own allowance on top of the guest's: its reply must come
 * this long after the deadline it was given, or it is taken as hung. */
#define CALL_SLACK_MS      5000
#define QUICK_CALL_MS      10000
/* From StartTransientUnit to an authenticated connection. */
#define CONNECT_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS    6000
/* Every string the helper sends is the guest's as far as the daemon goes. */
#define REASON_MAX         1024
/* QEMU's STOP/RESUME come a few at a time, and the helper tells one
 * BLOCK_IO_ERROR a pause; a helper sending more than this in one second
 * is flooding the daemon's loop. */
#define SIGNALS_PER_SECOND_MAX 1000
/* Its largest reply is an Exec's two capped streams; the parse of a guest
 * agent reply of 48 MiB needs a few copies of it. */
#define HELPER_MEMORY_MAX  (G_GUINT64_CONSTANT (256) * 1024 * 1024)

struct _VdSessionHelper {
  GObject          parent_instance;
  VdSystemd       *systemd;
  gchar           *session_id;
  gchar           *unit;
  GDBusConnection *connection;
  guint            subscription;
  guint            unit_watch;     /* what systemd says of its unit's end */
  gboolean         has_agent;
  gboolean         closing;
  gboolean         died;
  gint64           signal_window;  /* the second being counted (monotonic µs / 1e6) */
  guint            signals_in_window;
};

enum {
  SIGNAL_QMP_CLOSED,
  SIGNAL_AGENT_CLOSED,
  SIGNAL_BLOCK_IO_ERROR,
  SIGNAL_GUEST_STOPPED,
  SIGNAL_GUEST_RESUMED,
  SIGNAL_DIED,
  SIGNAL_LAST
};
static guint signals[SIGNAL_LAST] = { 0 };

G_DEFINE_TYPE (VdSessionHelper, vd_session_helper, G_TYPE_OBJECT)

static gchar *
untrusted_text (const gchar *text)
{
  return vivarium_escape_untrusted (text, strlen (text), REASON_MAX, NULL);
}

static GError *
gone_error (VdSessionHelper *self)
{
  return g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST, "The session helper of session %s is gone",
                      self->session_id);
}

/* The helper's error, made the daemon's: the remote prefix gone, the text
 * capped and escaped, the domain Vivarium's. A connection that broke is
 * said as the helper's end, not as an I/O error. */
static GError *
helper_error (VdSessionHelper *self, GError *error)
{
  g_autofree gchar *text = NULL;
  GError *out;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CLOSED) || self->died) {
    g_error_free (error);
    return gone_error (self);
  }
  if (g_dbus_error_is_remote_error (error))
    g_dbus_error_strip_remote_error (error);
  vivarium_error_convert (&error);
  text = untrusted_text (error->message);
  out = g_error_new_literal (VIVARIUM_ERROR, error->code, text);
  g_error_free (error);
  return out;
}

/* --- calls ----------------------------------------------------------------- */

static void helper_gone (VdSessionHelper *self, gchar *reason);

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionHelper *self = g_task_get_source_object (task);
  const gchar *method = g_task_get_name (task);
  GError *error = NULL;
  GVariant *reply = g_dbus_connection_call_with_unix_fd_list_finish (G_DBUS_CONNECTION (source), NULL, res, &error);

  /* GDBus's own deadline (the helper's answers come as remote errors):
   * the helper let a call outlive the guest's deadline and its slack. */
  if (reply == NULL && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
    g_error_free (error);
    helper_gone (self, g_strdup_printf ("the session helper (%s) did not answer %s in time", self->unit, method));
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST,
                             "The session helper of session %s did not answer %s in time", self->session_id, method);
    return;
  }
  if (reply == NULL) {
    g_task_return_error (task, helper_error (self, error));
    return;
  }
  g_task_return_pointer (task, reply, (GDestroyNotify) g_variant_unref);
}

static void
helper_call (VdSessionHelper *self, gpointer tag, const gchar *method, GVariant *parameters,
             const gchar *reply_type, GUnixFDList *fds, guint timeout_ms, GCancellable *cancellable,
             GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  guint64 wait_ms = (guint64) timeout_ms + CALL_SLACK_MS;

  g_task_set_source_tag (task, tag);
  g_task_set_name (task, method);
  if (self->connection == NULL || g_dbus_connection_is_closed (self->connection)) {
    if (parameters != NULL)
      g_variant_unref (g_variant_ref_sink (parameters));
    g_task_return_error (task, gone_error (self));
    return;
  }
  g_dbus_connection_call_with_unix_fd_list (self->connection, NULL, VD_HELPER_OBJECT_PATH, VD_HELPER_INTERFACE, method, parameters,
                                            G_VARIANT_TYPE (reply_type), G_DBUS_CALL_FLAGS_NO_AUTO_START,
                                            (gint) MIN (wait_ms, G_MAXINT), fds, cancellable, call_done_cb,
                                            g_steal_pointer (&task));
}

static GVariant *
call_reply (VdSessionHelper *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

gboolean
vd_session_helper_call_finish (VdSessionHelper *self, GAsyncResult *result, GError **error)
{
  g_autoptr(GVariant) reply = call_reply (self, result, error);

  return reply != NULL;
}

void
vd_session_helper_connect_qmp_async (VdSessionHelper *self, guint timeout_ms, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  helper_call (self, vd_session_helper_connect_qmp_async, "ConnectQmp", g_variant_new ("(u)", timeout_ms), "()",
               NULL, timeout_ms, cancellable, callback, user_data);
}

void
vd_session_helper_query_kvm_async (VdSessionHelper *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                   gpointer user_data)
{
  helper_call (self, vd_session_helper_query_kvm_async, "QueryKvm", NULL, "(b)", NULL, QUICK_CALL_MS, cancellable,
               callback, user_data);
}

gboolean
vd_session_helper_query_kvm_finish (VdSessionHelper *self, GAsyncResult *result, gboolean *enabled, GError **error)
{
  g_autoptr(GVariant) reply = call_reply (self, result, error);

  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(b)", enabled);
  return TRUE;
}

void
vd_session_helper_qmp_async (VdSessionHelper *self, const gchar *command, GVariant *arguments, guint timeout_ms,
                             GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GVariant *args = arguments != NULL ? arguments : g_variant_new ("a{sv}", NULL);

  helper_call (self, vd_session_helper_qmp_async, "QmpCommand", g_variant_new ("(s@a{sv}u)", command, args,
               timeout_ms), "()", NULL, timeout_ms, cancellable, callback, user_data);
}

void
vd_session_helper_query_migrate_async (VdSessionHelper *self, GCancellable *cancellable,
                                       GAsyncReadyCallback callback, gpointer user_data)
{
  helper_call (self, vd_session_helper_query_migrate_async, "QueryMigrate", NULL, "(ss)", NULL, QUICK_CALL_MS,
               cancellable, callback, user_data);
}

gboolean
vd_session_helper_query_migrate_finish (VdSessionHelper *self, GAsyncResult *result, gchar **status,
                                        gchar **error_desc, GError **error)
{
  g_autoptr(GVariant) reply = call_reply (self, result, error);
  const gchar *s, *why;

  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(&s&s)", &s, &why);
  *status = untrusted_text (s);
  *error_desc = untrusted_text (why);
  return TRUE;
}

void
vd_session_helper_pass_fd_async (VdSessionHelper *self, int fd, const gchar *name, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  GError *error = NULL;
  gint index = g_unix_fd_list_append (fds, fd, &error);

  if (index < 0) {
    g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
    vivarium_error_convert (&error);
    g_task_return_error (task, error);
    return;
  }
  helper_call (self, vd_session_helper_pass_fd_async, "PassFd", g_variant_new ("(hs)", index, name), "()", fds,
               QUICK_CALL_MS, cancellable, callback, user_data);
}

static void
agent_connected_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionHelper *self = g_task_get_source_object (task);
  GError *error = NULL;
  g_autoptr(GVariant) reply = call_reply (self, res, &error);

  if (reply == NULL) {
    g_task_return_error (task, error);
    return;
  }
  self->has_agent = TRUE;
  g_task_return_pointer (task, g_variant_ref (reply), (GDestroyNotify) g_variant_unref);
}

void
vd_session_helper_connect_agent_async (VdSessionHelper *self, guint timeout_ms, GCancellable *cancellable,
                                       GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, vd_session_helper_connect_agent_async);
  helper_call (self, vd_session_helper_connect_agent_async, "ConnectAgent", g_variant_new ("(u)", timeout_ms), "()",
               NULL, timeout_ms, cancellable, agent_connected_cb, task);
}

gboolean
vd_session_helper_has_agent (VdSessionHelper *self)
{
  return self->has_agent && !vd_session_helper_is_closed (self);
}

/* --- exec and files -------------------------------------------------------- */

/* The streams are the guest's: cut again at the cap the daemon asked for,
 * whatever the helper sent. */
static VdAgentExecResult *
exec_result_from (GVariant *reply, gsize offset, gsize output_cap)
{
  VdAgentExecResult *r = g_new0 (VdAgentExecResult, 1);
  g_autoptr(GVariant) out = NULL;
  g_autoptr(GVariant) err = NULL;
  g_autoptr(GBytes) out_bytes = NULL;
  g_autoptr(GBytes) err_bytes = NULL;
  g_autoptr(GVariant) status = g_variant_get_child_value (reply, offset);
  g_autoptr(GVariant) signaled = g_variant_get_child_value (reply, offset + 1);
  g_autoptr(GVariant) out_cut = g_variant_get_child_value (reply, offset + 4);
  g_autoptr(GVariant) err_cut = g_variant_get_child_value (reply, offset + 5);

  out = g_variant_get_child_value (reply, offset + 2);
  err = g_variant_get_child_value (reply, offset + 3);
  out_bytes = g_variant_get_data_as_bytes (out);
  err_bytes = g_variant_get_data_as_bytes (err);
  r->exit_status = g_variant_get_int32 (status);
  r->signaled = g_variant_get_boolean (signaled);
  r->out_truncated = g_variant_get_boolean (out_cut) || g_bytes_get_size (out_bytes) > output_cap;
  r->err_truncated = g_variant_get_boolean (err_cut) || g_bytes_get_size (err_bytes) > output_cap;
  r->out = g_bytes_new_from_bytes (out_bytes, 0, MIN (g_bytes_get_size (out_bytes), output_cap));
  r->err = g_bytes_new_from_bytes (err_bytes, 0, MIN (g_bytes_get_size (err_bytes), output_cap));
  return r;
}

typedef struct {
  gint64 pid;
  gsize  output_cap;
} ExecData;

static void
exec_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionHelper *self = g_task_get_source_object (task);
  ExecData *data = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(GVariant) reply = call_reply (self, res, &error);
  gboolean timed_out = FALSE;

  if (reply == NULL) {
    g_task_return_error (task, error);
    return;
  }
  g_variant_get_child (reply, 0, "x", &data->pid);
  g_variant_get_child (reply, 1, "b", &timed_out);
  data->pid = MAX (data->pid, -1);
  if (timed_out) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                             "The command did not finish in time");
    return;
  }
  g_task_return_pointer (task, exec_result_from (reply, 2, data->output_cap),
                         (GDestroyNotify) vd_agent_exec_result_free);
}

void
vd_session_helper_exec_async (VdSessionHelper *self, const gchar * const *argv, const gchar * const *env,
                              const gchar *cwd, guint timeout_ms, gsize output_cap, GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  ExecData *data = g_new0 (ExecData, 1);
  const gchar *none[] = { NULL };

  data->pid = -1;
  data->output_cap = output_cap;
  g_task_set_source_tag (task, vd_session_helper_exec_async);
  g_task_set_task_data (task, data, g_free);
  helper_call (self, vd_session_helper_exec_async, "Exec",
               g_variant_new ("(^as^assut)", argv, env != NULL ? env : none, cwd != NULL ? cwd : "", timeout_ms,
                              (guint64) output_cap),
               "(xbibayaybb)", NULL, timeout_ms, cancellable, exec_done_cb, task);
}

VdAgentExecResult *
vd_session_helper_exec_finish (VdSessionHelper *self, GAsyncResult *result, gint64 *pid, GError **error)
{
  ExecData *data;

  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  data = g_task_get_task_data (G_TASK (result));
  if (pid != NULL)
    *pid = data->pid;
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
exec_wait_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionHelper *self = g_task_get_source_object (task);
  ExecData *data = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(GVariant) reply = call_reply (self, res, &error);

  if (reply == NULL) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, exec_result_from (reply, 0, data->output_cap),
                         (GDestroyNotify) vd_agent_exec_result_free);
}

void
vd_session_helper_exec_wait_async (VdSessionHelper *self, gint64 pid, guint timeout_ms, gsize output_cap,
                                   GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  ExecData *data = g_new0 (ExecData, 1);

  data->pid = pid;
  data->output_cap = output_cap;
  g_task_set_source_tag (task, vd_session_helper_exec_wait_async);
  g_task_set_task_data (task, data, g_free);
  helper_call (self, vd_session_helper_exec_wait_async, "ExecWait",
               g_variant_new ("(xut)", pid, timeout_ms, (guint64) output_cap), "(ibayaybb)", NULL, timeout_ms,
               cancellable, exec_wait_done_cb, task);
}

VdAgentExecResult *
vd_session_helper_exec_wait_finish (VdSessionHelper *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
read_file_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionHelper *self = g_task_get_source_object (task);
  gsize max_size = GPOINTER_TO_SIZE (g_task_get_task_data (task));
  GError *error = NULL;
  g_autoptr(GVariant) reply = call_reply (self, res, &error);
  g_autoptr(GVariant) data = NULL;

  if (reply == NULL) {
    g_task_return_error (task, error);
    return;
  }
  data = g_variant_get_child_value (reply, 0);
  if (g_variant_get_size (data) > max_size) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                             "The file is larger than %" G_GSIZE_FORMAT " bytes", max_size);
    return;
  }
  g_task_return_pointer (task, g_variant_get_data_as_bytes (data), (GDestroyNotify) g_bytes_unref);
}

void
vd_session_helper_read_file_async (VdSessionHelper *self, const gchar *path, gsize max_size, guint timeout_ms,
                                   GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, vd_session_helper_read_file_async);
  g_task_set_task_data (task, GSIZE_TO_POINTER (max_size), NULL);
  helper_call (self, vd_session_helper_read_file_async, "ReadFile",
               g_variant_new ("(stu)", path, (guint64) max_size, timeout_ms), "(ay)", NULL, timeout_ms, cancellable,
               read_file_done_cb, task);
}

GBytes *
vd_session_helper_read_file_finish (VdSessionHelper *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
vd_session_helper_write_file_async (VdSessionHelper *self, const gchar *path, GBytes *data, guint timeout_ms,
                                    GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GVariant *bytes = g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, data, TRUE);

  helper_call (self, vd_session_helper_write_file_async, "WriteFile", g_variant_new ("(s@ayu)", path, bytes,
               timeout_ms), "()", NULL, timeout_ms, cancellable, callback, user_data);
}

void
vd_session_helper_set_time_async (VdSessionHelper *self, gint64 time_ns, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  helper_call (self, vd_session_helper_set_time_async, "SetTime", g_variant_new ("(x)", time_ns), "()", NULL,
               30000, cancellable, callback, user_data);
}

void
vd_session_helper_get_time_async (VdSessionHelper *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                  gpointer user_data)
{
  helper_call (self, vd_session_helper_get_time_async, "GetTime", NULL, "(x)", NULL, 30000, cancellable, callback,
               user_data);
}

gboolean
vd_session_helper_get_time_finish (VdSessionHelper *self, GAsyncResult *result, gint64 *time_ns, GError **error)
{
  g_autoptr(GVariant) reply = call_reply (self, result, error);

  if (reply == NULL)
    return FALSE;
  g_variant_get (reply, "(x)", time_ns);
  return TRUE;
}

/* --- signals and the connection's end -------------------------------------- */

static void
helper_signal_cb (GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *interface,
                  const gchar *member, GVariant *parameters, gpointer user_data)
{
  VdSessionHelper *self = VD_SESSION_HELPER (user_data);
  gint64 second = g_get_monotonic_time () / G_USEC_PER_SEC;

  if (self->died || self->closing)
    return;
  if (second != self->signal_window) {
    self->signal_window = second;
    self->signals_in_window = 0;
  }
  if (++self->signals_in_window > SIGNALS_PER_SECOND_MAX) {
    helper_gone (self, g_strdup_printf ("the session helper (%s) sent more than %u signals in a second", self->unit,
                                        SIGNALS_PER_SECOND_MAX));
    return;
  }

  if (g_strcmp0 (member, "QmpClosed") == 0) {
    g_signal_emit (self, signals[SIGNAL_QMP_CLOSED], 0);
  } else if (g_strcmp0 (member, "AgentClosed") == 0 && g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(s)"))) {
    const gchar *text;
    g_autofree gchar *reason = NULL;

    g_variant_get (parameters, "(&s)", &text);
    reason = untrusted_text (text);
    self->has_agent = FALSE;
    g_signal_emit (self, signals[SIGNAL_AGENT_CLOSED], 0, reason);
  } else if (g_strcmp0 (member, "BlockIoError") == 0 && g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sb)"))) {
    const gchar *text;
    gboolean nospace;
    g_autofree gchar *reason = NULL;

    g_variant_get (parameters, "(&sb)", &text, &nospace);
    reason = untrusted_text (text);
    g_signal_emit (self, signals[SIGNAL_BLOCK_IO_ERROR], 0, reason, nospace);
  } else if (g_strcmp0 (member, "GuestStopped") == 0) {
    g_signal_emit (self, signals[SIGNAL_GUEST_STOPPED], 0);
  } else if (g_strcmp0 (member, "GuestResumed") == 0) {
    g_signal_emit (self, signals[SIGNAL_GUEST_RESUMED], 0);
  }
}

/* A helper that exits, hangs or floods is as good as gone: said once (the
 * session ends on it), and every later call fails at once. @reason is
 * taken. */
static void
helper_gone (VdSessionHelper *self, gchar *reason)
{
  g_autofree gchar *owned = reason;

  if (self->closing || self->died)
    return;
  self->died = TRUE;
  self->has_agent = FALSE;
  g_signal_emit (self, signals[SIGNAL_DIED], 0, owned);
}

static void
connection_closed_cb (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error, gpointer user_data)
{
  VdSessionHelper *self = VD_SESSION_HELPER (user_data);

  /* GIO's words for it ("returned 0 bytes on an async read") say nothing
   * to an operator; the helper's journal and its unit's end say the rest. */
  helper_gone (self, g_strdup_printf ("the session helper (%s) exited or closed its connection", self->unit));
}

gboolean
vd_session_helper_is_closed (VdSessionHelper *self)
{
  return self->closing || self->died || self->connection == NULL || g_dbus_connection_is_closed (self->connection);
}

void
vd_session_helper_close (VdSessionHelper *self)
{
  if (self->closing)
    return;
  self->closing = TRUE;
  self->has_agent = FALSE;
  if (self->connection != NULL) {
    if (self->subscription != 0)
      g_dbus_connection_signal_unsubscribe (self->connection, self->subscription);
    self->subscription = 0;
    g_signal_handlers_disconnect_by_data (self->connection, self);
    g_dbus_connection_close (self->connection, NULL, NULL, NULL);
  }
  if (self->systemd != NULL)
    vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, NULL, NULL);
}

/* For a teardown that must leave no unit behind: the helper exits when
 * the daemon hangs up, so this is quick; bounded all the same. */
void
vd_session_helper_stop_sync (VdSessionHelper *self)
{
  g_autoptr(GError) error = NULL;

  vd_session_helper_close (self);
  if (self->systemd != NULL && vd_systemd_unit_is_loaded (self->systemd, self->unit) &&
      !vd_systemd_stop_unit_sync (self->systemd, self->unit, STOP_TIMEOUT_MS, &error))
    g_debug ("stopping %s: %s", self->unit, error->message);
}

gchar *
vd_session_helper_describe_end (VdSessionHelper *self)
{
  if (self->systemd == NULL || self->unit_watch == 0)
    return NULL;
  return vd_systemd_describe_unit_end (self->systemd, self->unit_watch);
}

const gchar *
vd_session_helper_get_unit (VdSessionHelper *self)
{
  return self->unit;
}

gchar *
vd_session_helper_unit_for (const gchar *session_id)
{
  return g_strdup_printf ("vivarium-helper-%s.service", session_id);
}

/* --- start ------------------------------------------------------------------ */

/* The helper needs its session's sockets and nothing else: no network, no
 * other session's directory, no privilege, no code it writes itself. */
static GVariant *
unit_properties (VdSessionHelper *self, const VdSessionHelperOptions *options)
{
  g_autofree gchar *description = g_strdup_printf ("Vivarium session helper %s", options->session_id);
  g_autofree gchar *helper = g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium-session-helper", NULL);
  const gchar *argv[] = { helper, "--qmp", options->qmp_socket, "--agent", options->agent_socket, NULL };
  const gchar *families[] = { "AF_UNIX", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@privileged", "@resources", NULL };
  const gchar *binds[] = { options->runtime_dir, NULL };
  VdUnitSandbox sandbox = {
    .address_families = families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .runtime_dir = options->runtime_root,
    .binds = binds,
  };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  vd_unit_sandbox_add_session_service (&b, description, options->uid, argv);
  g_variant_builder_add (&b, "(sv)", "StandardInputFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "StandardOutput", g_variant_new_string ("journal"));
  g_variant_builder_add (&b, "(sv)", "StandardError", g_variant_new_string ("journal"));
  g_variant_builder_add (&b, "(sv)", "DevicePolicy", g_variant_new_string ("closed"));
  g_variant_builder_add (&b, "(sv)", "PrivateDevices", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "PrivateNetwork", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "IPAddressDeny", vd_unit_sandbox_ip_deny_all ());
  g_variant_builder_add (&b, "(sv)", "MemoryMax", g_variant_new_uint64 (HELPER_MEMORY_MAX));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (16));
  g_variant_builder_add (&b, "(sv)", "TimeoutStopUSec", g_variant_new_uint64 (5 * G_USEC_PER_SEC));
  vd_unit_sandbox_add (&b, &sandbox);
  return g_variant_builder_end (&b);
}

typedef struct {
  VdSessionHelper *self;
  GCancellable    *timeout;
  guint            timeout_id;
  guint            pending;     /* the unit and the connection */
  GError          *error;
} StartData;

static void
start_data_free (StartData *data)
{
  if (data->timeout_id != 0)
    g_source_remove (data->timeout_id);
  g_clear_object (&data->timeout);
  g_clear_object (&data->self);
  g_clear_error (&data->error);
  g_free (data);
}

static void
start_step_done (GTask *task, GError *error)
{
  StartData *data = g_task_get_task_data (task);
  VdSessionHelper *self = data->self;

  if (error != NULL && data->error == NULL) {
    data->error = error;
    g_cancellable_cancel (data->timeout);
  } else if (error != NULL) {
    g_error_free (error);
  }
  if (--data->pending > 0) {
    g_object_unref (task);
    return;
  }
  if (data->error != NULL) {
    vd_session_helper_close (self);
    g_task_return_error (task, g_steal_pointer (&data->error));
  } else {
    g_dbus_connection_start_message_processing (self->connection);
    g_task_return_pointer (task, g_object_ref (self), g_object_unref);
  }
  g_object_unref (task);
}

static void
unit_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GError *error = NULL;

  if (!vd_systemd_start_transient_finish (VD_SYSTEMD (source), res, &error))
    g_prefix_error (&error, "Cannot start the session helper: ");
  start_step_done (G_TASK (user_data), error);
}

/* The socketpair is the credential: its other end went to the helper's
 * unit and nowhere else. The kernel's peer credentials of a socketpair
 * are its creator's (the daemon's own), so EXTERNAL could only fail;
 * ANONYMOUS is the one mechanism offered. */
static gboolean
allow_mechanism_cb (GDBusAuthObserver *observer, const gchar *mechanism, gpointer user_data)
{
  return g_strcmp0 (mechanism, "ANONYMOUS") == 0;
}

static void
watch_connection (VdSessionHelper *self)
{
  g_dbus_connection_set_exit_on_close (self->connection, FALSE);
  g_signal_connect (self->connection, "closed", G_CALLBACK (connection_closed_cb), self);
  self->subscription = g_dbus_connection_signal_subscribe (self->connection, NULL, VD_HELPER_INTERFACE, NULL,
                                                           VD_HELPER_OBJECT_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                                           helper_signal_cb, self, NULL);
}

/* For tests: a helper already at the other end of @connection (no unit).
 * Starts the connection's message processing. */
VdSessionHelper *
vd_session_helper_new_for_connection (GDBusConnection *connection, const gchar *session_id)
{
  VdSessionHelper *self = g_object_new (VD_TYPE_SESSION_HELPER, NULL);

  self->session_id = g_strdup (session_id);
  self->unit = vd_session_helper_unit_for (session_id);
  self->connection = g_object_ref (connection);
  watch_connection (self);
  g_dbus_connection_start_message_processing (connection);
  return self;
}

static void
connected_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  StartData *data = g_task_get_task_data (task);
  VdSessionHelper *self = data->self;
  GError *error = NULL;

  self->connection = g_dbus_connection_new_finish (res, &error);
  if (self->connection == NULL) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) && data->error == NULL) {
      g_clear_error (&error);
      error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                           "The session helper did not answer within %u s", CONNECT_TIMEOUT_MS / 1000);
    } else if (error != NULL) {
      g_prefix_error (&error, "The session helper did not connect: ");
      vivarium_error_convert (&error);
    }
    start_step_done (task, error);
    return;
  }
  watch_connection (self);
  start_step_done (task, NULL);
}

static gboolean
connect_timeout_cb (gpointer user_data)
{
  StartData *data = user_data;

  data->timeout_id = 0;
  g_cancellable_cancel (data->timeout);
  return G_SOURCE_REMOVE;
}

static gboolean
make_socketpair (int fds[2], GError **error)
{
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0)
    return TRUE;
  return vd_fs_set_error_errno (error, errno, "Cannot make the session helper's socket");
}

static void
connect_server_side (GTask *task, int fd)
{
  StartData *data = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(GSocket) socket = g_socket_new_from_fd (fd, &error);
  g_autoptr(GSocketConnection) stream = NULL;
  g_autoptr(GDBusAuthObserver) observer = g_dbus_auth_observer_new ();
  g_autofree gchar *guid = g_dbus_generate_guid ();

  if (socket == NULL) {
    close (fd);
    vivarium_error_convert (&error);
    start_step_done (task, error);
    return;
  }
  stream = g_socket_connection_factory_create_connection (socket);
  g_signal_connect (observer, "allow-mechanism", G_CALLBACK (allow_mechanism_cb), NULL);
  g_dbus_connection_new (G_IO_STREAM (stream), guid,
                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_SERVER |
                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_ALLOW_ANONYMOUS |
                         G_DBUS_CONNECTION_FLAGS_DELAY_MESSAGE_PROCESSING,
                         observer, data->timeout, connected_cb, task);
}

void
vd_session_helper_start_async (VdSystemd *systemd, const VdSessionHelperOptions *options, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  StartData *data = g_new0 (StartData, 1);
  VdSessionHelper *self = g_object_new (VD_TYPE_SESSION_HELPER, NULL);
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  GError *error = NULL;
  int pair[2];

  self->systemd = g_object_ref (systemd);
  self->session_id = g_strdup (options->session_id);
  self->unit = vd_session_helper_unit_for (options->session_id);
  data->self = self;
  data->timeout = g_cancellable_new ();
  g_task_set_source_tag (task, vd_session_helper_start_async);
  g_task_set_task_data (task, data, (GDestroyNotify) start_data_free);
  if (!make_socketpair (pair, &error) || g_unix_fd_list_append (fds, pair[1], &error) < 0) {
    self->closing = TRUE;
    vivarium_error_convert (&error);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  close (pair[1]);
  /* Before the start: systemd's word on its end may come and go (the unit
   * is collected) before anyone asks. */
  self->unit_watch = vd_systemd_watch_unit (systemd, self->unit);
  data->timeout_id = g_timeout_add (CONNECT_TIMEOUT_MS, connect_timeout_cb, data);
  data->pending = 2;
  g_object_ref (task);
  connect_server_side (task, pair[0]);
  vd_systemd_start_transient_async (systemd, self->unit, unit_properties (self, options), fds, cancellable,
                                    unit_started_cb, task);
}

VdSessionHelper *
vd_session_helper_start_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* --- object ------------------------------------------------------------------ */

static void
vd_session_helper_dispose (GObject *object)
{
  VdSessionHelper *self = VD_SESSION_HELPER (object);

  if (self->connection != NULL && !self->closing)
    vd_session_helper_close (self);
  if (self->systemd != NULL && self->unit_watch != 0)
    vd_systemd_unwatch_unit (self->systemd, self->unit_watch);
  self->unit_watch = 0;
  g_clear_object (&self->connection);
  g_clear_object (&self->systemd);
  G_OBJECT_CLASS (vd_session_helper_parent_class)->dispose (object);
}

static void
vd_session_helper_finalize (GObject *object)
{
  VdSessionHelper *self = VD_SESSION_HELPER (object);

  g_free (self->session_id);
  g_free (self->unit);
  G_OBJECT_CLASS (vd_session_helper_parent_class)->finalize (object);
}

static void
vd_session_helper_class_init (VdSessionHelperClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vd_session_helper_dispose;
  object_class->finalize = vd_session_helper_finalize;
  signals[SIGNAL_QMP_CLOSED] = g_signal_new ("qmp-closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                             NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_AGENT_CLOSED] = g_signal_new ("agent-closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                               NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_BLOCK_IO_ERROR] = g_signal_new ("block-io-error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                 NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_BOOLEAN);
  signals[SIGNAL_GUEST_STOPPED] = g_signal_new ("guest-stopped", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_GUEST_RESUMED] = g_signal_new ("guest-resumed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_DIED] = g_signal_new ("died", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                       G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_session_helper_init (VdSessionHelper *self)
{
}
