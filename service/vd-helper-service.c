/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdHelperService"

#include "config.h"

#include <gio/gunixfdlist.h>
#include <json-glib/json-glib.h>
#include <unistd.h>

#include "vivarium-error.h"
#include "vd-agent-client.h"
#include "vd-helper-dbus-generated.h"
#include "vd-helper-service.h"
#include "vd-json-stream.h"
#include "vd-qmp-client.h"

/* QEMU creates its socket a moment after exec(): retried, 5 ms doubling
 * to 100, until the caller's deadline. */
#define QMP_RETRY_FIRST_MS 5
#define QMP_RETRY_MAX_MS   100
#define QMP_TRY_MS         2000
#define MIGRATE_STATUS_MAX 64
#define MIGRATE_REASON_MAX 300

struct _VdHelperService {
  GObject                    parent_instance;
  GDBusConnection           *connection;
  VdHelperDBusSessionHelper *skeleton;
  gchar                     *qmp_socket;
  gchar                     *agent_socket;
  VdQmpClient               *qmp;
  VdAgentClient             *agent;
  gboolean                   io_error_told;  /* since the last RESUME */
};

G_DEFINE_TYPE (VdHelperService, vd_helper_service, G_TYPE_OBJECT)

/* Every handler holds the service and its invocation until the reply. */
typedef struct {
  VdHelperService       *self;
  GDBusMethodInvocation *invocation;
  gint64                 deadline;
  guint                  retry_ms;
} Call;

static Call *
call_new (VdHelperService *self, GDBusMethodInvocation *invocation)
{
  Call *call = g_new0 (Call, 1);

  call->self = g_object_ref (self);
  /* the handler's reference, given back by the reply */
  call->invocation = invocation;
  return call;
}

static void
call_free (Call *call)
{
  g_object_unref (call->self);
  g_clear_object (&call->invocation);
  g_free (call);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Call, call_free)

static void
call_fail (Call *call, GError *error)
{
  vivarium_error_convert (&error);
  g_dbus_method_invocation_take_error (g_steal_pointer (&call->invocation), error);
}

static gboolean
require_qmp (VdHelperService *self, GDBusMethodInvocation *invocation)
{
  if (self->qmp != NULL && !vd_qmp_client_is_closed (self->qmp))
    return TRUE;
  g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                                 "QEMU's control socket is not connected");
  return FALSE;
}

static gboolean
require_agent (VdHelperService *self, GDBusMethodInvocation *invocation)
{
  if (self->agent != NULL && !vd_agent_client_is_closed (self->agent))
    return TRUE;
  g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                                 "The guest agent is not connected");
  return FALSE;
}

/* --- QMP ----------------------------------------------------------------- */

static void
qmp_closed_cb (VdQmpClient *qmp, gpointer user_data)
{
  VdHelperService *self = user_data;

  vd_helper_dbus_session_helper_emit_qmp_closed (self->skeleton);
}

static void
qmp_block_io_error_cb (VdQmpClient *qmp, const gchar *reason, gboolean nospace, gpointer user_data)
{
  VdHelperService *self = user_data;

  /* Every request in flight fails with the first (werror=stop): one is
   * the cause, and the daemon's signal budget is not spent on the rest. */
  if (self->io_error_told)
    return;
  self->io_error_told = TRUE;
  vd_helper_dbus_session_helper_emit_block_io_error (self->skeleton, reason, nospace);
}

static void
qmp_guest_stopped_cb (VdQmpClient *qmp, gpointer user_data)
{
  vd_helper_dbus_session_helper_emit_guest_stopped (VD_HELPER_SERVICE (user_data)->skeleton);
}

static void
qmp_guest_resumed_cb (VdQmpClient *qmp, gpointer user_data)
{
  VdHelperService *self = user_data;

  self->io_error_told = FALSE;
  vd_helper_dbus_session_helper_emit_guest_resumed (self->skeleton);
}

static void try_connect_qmp (Call *call);

static gboolean
retry_qmp_cb (gpointer user_data)
{
  try_connect_qmp (user_data);
  return G_SOURCE_REMOVE;
}

static void
qmp_connected_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Call *call = user_data;
  VdHelperService *self = call->self;
  GError *error = NULL;
  VdQmpClient *qmp = vd_qmp_client_connect_finish (res, &error);

  if (qmp == NULL) {
    if (g_get_monotonic_time () < call->deadline) {
      g_error_free (error);
      g_timeout_add (call->retry_ms, retry_qmp_cb, call);
      call->retry_ms = MIN (call->retry_ms * 2, QMP_RETRY_MAX_MS);
      return;
    }
    call_fail (call, error);
    call_free (call);
    return;
  }
  g_clear_object (&self->qmp);
  self->qmp = qmp;
  g_signal_connect (qmp, "closed", G_CALLBACK (qmp_closed_cb), self);
  g_signal_connect (qmp, "block-io-error", G_CALLBACK (qmp_block_io_error_cb), self);
  g_signal_connect (qmp, "guest-stopped", G_CALLBACK (qmp_guest_stopped_cb), self);
  g_signal_connect (qmp, "guest-resumed", G_CALLBACK (qmp_guest_resumed_cb), self);
  vd_helper_dbus_session_helper_complete_connect_qmp (self->skeleton, g_steal_pointer (&call->invocation));
  call_free (call);
}

static void
try_connect_qmp (Call *call)
{
  gint64 left_ms = (call->deadline - g_get_monotonic_time ()) / 1000;

  vd_qmp_client_connect_async (call->self->qmp_socket, (guint) CLAMP (left_ms, 1, QMP_TRY_MS), NULL,
                               qmp_connected_cb, call);
}

static gboolean
handle_connect_qmp (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, guint timeout_ms,
                    VdHelperService *self)
{
  Call *call = call_new (self, invocation);

  call->deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  call->retry_ms = QMP_RETRY_FIRST_MS;
  try_connect_qmp (call);
  return TRUE;
}

static void
query_kvm_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(JsonNode) reply = vd_qmp_client_execute_finish (VD_QMP_CLIENT (source), res, &error);
  gboolean enabled = FALSE;

  if (reply == NULL) {
    call_fail (call, error);
    return;
  }
  if (JSON_NODE_HOLDS_OBJECT (reply))
    enabled = json_object_get_boolean_member_with_default (json_node_get_object (reply), "enabled", FALSE);
  vd_helper_dbus_session_helper_complete_query_kvm (call->self->skeleton, g_steal_pointer (&call->invocation), enabled);
}

static gboolean
handle_query_kvm (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, VdHelperService *self)
{
  if (require_qmp (self, invocation))
    vd_qmp_client_execute_async (self->qmp, "query-kvm", NULL, 10000, NULL, query_kvm_cb, call_new (self, invocation));
  return TRUE;
}

static void
qmp_command_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(JsonNode) reply = vd_qmp_client_execute_finish (VD_QMP_CLIENT (source), res, &error);

  if (reply == NULL) {
    call_fail (call, error);
    return;
  }
  g_dbus_method_invocation_return_value (g_steal_pointer (&call->invocation), NULL);
}

/* The commands the daemon sends; getfd goes with its descriptor (PassFd). */
static gboolean
qmp_command_allowed (const gchar *command)
{
  const gchar *allowed[] = { "stop", "cont", "screendump", "migrate-set-parameters", "migrate",
                             "migrate-incoming", NULL };

  return g_strv_contains (allowed, command);
}

static gboolean
handle_qmp_command (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, const gchar *command,
                    GVariant *arguments, guint timeout_ms, VdHelperService *self)
{
  g_autoptr(JsonNode) node = NULL;

  if (!qmp_command_allowed (command)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "The session helper does not send QMP command %s", command);
    return TRUE;
  }
  if (!require_qmp (self, invocation))
    return TRUE;
  node = json_gvariant_serialize (arguments);
  vd_qmp_client_execute_async (self->qmp, command,
                               g_variant_n_children (arguments) > 0 ? json_node_get_object (node) : NULL,
                               timeout_ms, NULL, qmp_command_cb, call_new (self, invocation));
  return TRUE;
}

static gchar *
capped_escaped (const gchar *text, gsize max)
{
  g_autofree gchar *capped = g_utf8_make_valid (text, MIN (strlen (text), max));

  return vd_json_escape_untrusted (capped);
}

static void
query_migrate_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(JsonNode) reply = vd_qmp_client_execute_finish (VD_QMP_CLIENT (source), res, &error);
  g_autofree gchar *status = NULL;
  g_autofree gchar *why = NULL;
  JsonObject *object;

  if (reply == NULL) {
    call_fail (call, error);
    return;
  }
  object = JSON_NODE_HOLDS_OBJECT (reply) ? json_node_get_object (reply) : NULL;
  status = capped_escaped (object != NULL ? json_object_get_string_member_with_default (object, "status", "") : "",
                           MIGRATE_STATUS_MAX);
  why = capped_escaped (object != NULL ? json_object_get_string_member_with_default (object, "error-desc", "") : "",
                        MIGRATE_REASON_MAX);
  vd_helper_dbus_session_helper_complete_query_migrate (call->self->skeleton, g_steal_pointer (&call->invocation), status, why);
}

static gboolean
handle_query_migrate (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, VdHelperService *self)
{
  if (require_qmp (self, invocation))
    vd_qmp_client_execute_async (self->qmp, "query-migrate", NULL, 10000, NULL, query_migrate_cb,
                                 call_new (self, invocation));
  return TRUE;
}

static gboolean
handle_pass_fd (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, GUnixFDList *fds,
                GVariant *handle, const gchar *name, VdHelperService *self)
{
  g_autoptr(JsonObject) args = json_object_new ();
  GError *error = NULL;
  gint index = g_variant_get_handle (handle);
  int fd;

  if (!require_qmp (self, invocation))
    return TRUE;
  if (fds == NULL || index < 0 || index >= g_unix_fd_list_get_length (fds)) {
    g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                                   "No descriptor came with PassFd");
    return TRUE;
  }
  fd = g_unix_fd_list_get (fds, index, &error);
  if (fd < 0 || !vd_qmp_client_send_fd (self->qmp, fd, &error)) {
    if (fd >= 0)
      close (fd);
    vivarium_error_convert (&error);
    g_dbus_method_invocation_take_error (invocation, error);
    return TRUE;
  }
  close (fd);
  json_object_set_string_member (args, "fdname", name);
  vd_qmp_client_execute_async (self->qmp, "getfd", args, 10000, NULL, qmp_command_cb, call_new (self, invocation));
  return TRUE;
}

/* --- the guest agent ---------------------------------------------------- */

static void
agent_closed_cb (VdAgentClient *agent, gpointer user_data)
{
  VdHelperService *self = user_data;

  vd_helper_dbus_session_helper_emit_agent_closed (self->skeleton, "The guest agent's connection closed");
}

static void
agent_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  VdHelperService *self = call->self;
  GError *error = NULL;
  VdAgentClient *agent = vd_agent_client_wait_ready_finish (res, &error);

  if (agent == NULL) {
    call_fail (call, error);
    return;
  }
  if (self->agent != NULL)
    g_signal_handlers_disconnect_by_data (self->agent, self);
  g_clear_object (&self->agent);
  self->agent = agent;
  g_signal_connect (agent, "closed", G_CALLBACK (agent_closed_cb), self);
  vd_helper_dbus_session_helper_complete_connect_agent (self->skeleton, g_steal_pointer (&call->invocation));
}

static gboolean
handle_connect_agent (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, guint timeout_ms,
                      VdHelperService *self)
{
  vd_agent_client_wait_ready_async (self->agent_socket, timeout_ms, NULL, agent_ready_cb,
                                    call_new (self, invocation));
  return TRUE;
}

static GVariant *
bytes_variant (GBytes *bytes)
{
  return g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, bytes, TRUE);
}

static void
exec_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  g_autoptr(VdAgentExecResult) result = NULL;
  g_autoptr(GBytes) empty = g_bytes_new (NULL, 0);
  GError *error = NULL;
  gint64 pid = -1;

  result = vd_agent_client_exec_finish (VD_AGENT_CLIENT (source), res, &pid, &error);
  /* A command that outlives its timeout is not a failure: the daemon may
   * watch it (ExecWait), so its pid goes back. */
  if (result == NULL && pid >= 0 && g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT)) {
    g_error_free (error);
    vd_helper_dbus_session_helper_complete_exec (call->self->skeleton, g_steal_pointer (&call->invocation), pid, TRUE, -1, FALSE,
                                                 bytes_variant (empty), bytes_variant (empty), FALSE, FALSE);
    return;
  }
  if (result == NULL) {
    call_fail (call, error);
    return;
  }
  vd_helper_dbus_session_helper_complete_exec (call->self->skeleton, g_steal_pointer (&call->invocation), pid, FALSE,
                                               result->exit_status, result->signaled, bytes_variant (result->out),
                                               bytes_variant (result->err), result->out_truncated,
                                               result->err_truncated);
}

static gboolean
handle_exec (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, const gchar * const *argv,
             const gchar * const *env, const gchar *cwd, guint timeout_ms, guint64 output_cap, VdHelperService *self)
{
  if (require_agent (self, invocation))
    vd_agent_client_exec_async (self->agent, argv, env, cwd, timeout_ms, (gsize) MIN (output_cap, G_MAXSIZE), NULL,
                                exec_done_cb, call_new (self, invocation));
  return TRUE;
}

static void
exec_wait_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(VdAgentExecResult) result = vd_agent_client_exec_wait_finish (VD_AGENT_CLIENT (source), res, &error);

  if (result == NULL) {
    call_fail (call, error);
    return;
  }
  vd_helper_dbus_session_helper_complete_exec_wait (call->self->skeleton, g_steal_pointer (&call->invocation), result->exit_status,
                                                    result->signaled, bytes_variant (result->out),
                                                    bytes_variant (result->err), result->out_truncated,
                                                    result->err_truncated);
}

static gboolean
handle_exec_wait (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, gint64 pid,
                  guint timeout_ms, guint64 output_cap, VdHelperService *self)
{
  if (require_agent (self, invocation))
    vd_agent_client_exec_wait_async (self->agent, pid, timeout_ms, (gsize) MIN (output_cap, G_MAXSIZE), NULL,
                                     exec_wait_done_cb, call_new (self, invocation));
  return TRUE;
}

static void
read_file_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(GBytes) data = vd_agent_client_read_file_finish (VD_AGENT_CLIENT (source), res, &error);

  if (data == NULL) {
    call_fail (call, error);
    return;
  }
  vd_helper_dbus_session_helper_complete_read_file (call->self->skeleton, g_steal_pointer (&call->invocation), bytes_variant (data));
}

static gboolean
handle_read_file (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, const gchar *path,
                  guint64 max_size, guint timeout_ms, VdHelperService *self)
{
  if (require_agent (self, invocation))
    vd_agent_client_read_file_async (self->agent, path, (gsize) MIN (max_size, G_MAXSIZE), timeout_ms, NULL,
                                     read_file_done_cb, call_new (self, invocation));
  return TRUE;
}

static void
write_file_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;

  if (!vd_agent_client_write_file_finish (VD_AGENT_CLIENT (source), res, &error)) {
    call_fail (call, error);
    return;
  }
  vd_helper_dbus_session_helper_complete_write_file (call->self->skeleton, g_steal_pointer (&call->invocation));
}

static gboolean
handle_write_file (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, const gchar *path,
                   GVariant *data, guint timeout_ms, VdHelperService *self)
{
  g_autoptr(GBytes) bytes = g_variant_get_data_as_bytes (data);

  if (require_agent (self, invocation))
    vd_agent_client_write_file_async (self->agent, path, bytes, timeout_ms, NULL, write_file_done_cb,
                                      call_new (self, invocation));
  return TRUE;
}

static void
set_time_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(JsonNode) reply = vd_agent_client_command_finish (VD_AGENT_CLIENT (source), res, &error);

  if (reply == NULL) {
    call_fail (call, error);
    return;
  }
  vd_helper_dbus_session_helper_complete_set_time (call->self->skeleton, g_steal_pointer (&call->invocation));
}

static gboolean
handle_set_time (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, gint64 time_ns,
                 VdHelperService *self)
{
  JsonObject *args;

  if (!require_agent (self, invocation))
    return TRUE;
  args = json_object_new ();
  json_object_set_int_member (args, "time", time_ns);
  vd_agent_client_command_async (self->agent, "guest-set-time", args, 30000, NULL, set_time_done_cb,
                                 call_new (self, invocation));
  json_object_unref (args);
  return TRUE;
}

static void
get_time_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Call) call = user_data;
  GError *error = NULL;
  g_autoptr(JsonNode) reply = vd_agent_client_command_finish (VD_AGENT_CLIENT (source), res, &error);
  gint64 time_ns = 0;

  if (reply == NULL) {
    call_fail (call, error);
    return;
  }
  if (!vd_json_node_get_int (reply, &time_ns)) {
    call_fail (call, g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                          "guest-get-time returned no integer"));
    return;
  }
  vd_helper_dbus_session_helper_complete_get_time (call->self->skeleton, g_steal_pointer (&call->invocation), time_ns);
}

static gboolean
handle_get_time (VdHelperDBusSessionHelper *skeleton, GDBusMethodInvocation *invocation, VdHelperService *self)
{
  if (require_agent (self, invocation))
    vd_agent_client_command_async (self->agent, "guest-get-time", NULL, 30000, NULL, get_time_done_cb,
                                   call_new (self, invocation));
  return TRUE;
}

/* --- object --------------------------------------------------------------- */

static void
vd_helper_service_dispose (GObject *object)
{
  VdHelperService *self = VD_HELPER_SERVICE (object);

  if (self->qmp != NULL)
    g_signal_handlers_disconnect_by_data (self->qmp, self);
  if (self->agent != NULL)
    g_signal_handlers_disconnect_by_data (self->agent, self);
  g_clear_object (&self->qmp);
  g_clear_object (&self->agent);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->connection);
  G_OBJECT_CLASS (vd_helper_service_parent_class)->dispose (object);
}

static void
vd_helper_service_finalize (GObject *object)
{
  VdHelperService *self = VD_HELPER_SERVICE (object);

  g_free (self->qmp_socket);
  g_free (self->agent_socket);
  G_OBJECT_CLASS (vd_helper_service_parent_class)->finalize (object);
}

static void
vd_helper_service_class_init (VdHelperServiceClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vd_helper_service_dispose;
  object_class->finalize = vd_helper_service_finalize;
}

static void
vd_helper_service_init (VdHelperService *self)
{
}

VdHelperService *
vd_helper_service_new (GDBusConnection *connection, const gchar *qmp_socket, const gchar *agent_socket)
{
  VdHelperService *self = g_object_new (VD_TYPE_HELPER_SERVICE, NULL);
  VdHelperDBusSessionHelper *s = vd_helper_dbus_session_helper_skeleton_new ();

  self->connection = g_object_ref (connection);
  self->qmp_socket = g_strdup (qmp_socket);
  self->agent_socket = g_strdup (agent_socket);
  self->skeleton = s;
  g_signal_connect (s, "handle-connect-qmp", G_CALLBACK (handle_connect_qmp), self);
  g_signal_connect (s, "handle-query-kvm", G_CALLBACK (handle_query_kvm), self);
  g_signal_connect (s, "handle-qmp-command", G_CALLBACK (handle_qmp_command), self);
  g_signal_connect (s, "handle-query-migrate", G_CALLBACK (handle_query_migrate), self);
  g_signal_connect (s, "handle-pass-fd", G_CALLBACK (handle_pass_fd), self);
  g_signal_connect (s, "handle-connect-agent", G_CALLBACK (handle_connect_agent), self);
  g_signal_connect (s, "handle-exec", G_CALLBACK (handle_exec), self);
  g_signal_connect (s, "handle-exec-wait", G_CALLBACK (handle_exec_wait), self);
  g_signal_connect (s, "handle-read-file", G_CALLBACK (handle_read_file), self);
  g_signal_connect (s, "handle-write-file", G_CALLBACK (handle_write_file), self);
  g_signal_connect (s, "handle-set-time", G_CALLBACK (handle_set_time), self);
  g_signal_connect (s, "handle-get-time", G_CALLBACK (handle_get_time), self);
  return self;
}

gboolean
vd_helper_service_export (VdHelperService *self, GError **error)
{
  return g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (self->skeleton), self->connection,
                                           VD_HELPER_OBJECT_PATH, error);
}
