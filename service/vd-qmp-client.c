/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-qmp-client"

#include "config.h"

#include <gio/gunixfdmessage.h>

#include "vivarium-error.h"
#include "vd-deadline.h"
#include "vd-json-stream.h"
#include "vd-qmp-client.h"

struct _VdQmpClient {
  GObject       parent_instance;
  VdJsonStream *stream;
  GIOStream    *io;             /* for passing descriptors (getfd) */
  GHashTable   *calls;          /* id → GTask, in flight */
  GTask        *handshake;      /* waiting for the greeting, or NULL */
  guint64       next_id;
  gboolean      greeting_seen;
  gboolean      negotiating;
  gboolean      ready;
  gboolean      closed;
};

enum {
  SIGNAL_EVENT,
  SIGNAL_BLOCK_IO_ERROR,
  SIGNAL_GUEST_STOPPED,
  SIGNAL_GUEST_RESUMED,
  SIGNAL_CLOSED,
  SIGNAL_LAST
};
static guint signals[SIGNAL_LAST] = { 0 };

G_DEFINE_TYPE (VdQmpClient, vd_qmp_client, G_TYPE_OBJECT)

/* Per-call state, the task's data: a call ends by its reply, its timeout,
 * its cancellable or the connection's end, whichever comes first. */
typedef struct {
  gchar      *id;
  VdDeadline *deadline;
} VdQmpCall;

static void
vd_qmp_call_free (VdQmpCall *call)
{
  vd_deadline_free (call->deadline);
  g_free (call->id);
  g_free (call);
}

/* Detaches @task from the client before returning it: the caller's callback
 * may run right away and call back into us. */
static void
vd_qmp_client_finish_call (VdQmpClient *self, GTask *task, JsonNode *result, const GError *error)
{
  g_autoptr(GTask) keep = g_object_ref (task);
  VdQmpCall *call = g_task_get_task_data (task);

  vd_deadline_stop (call->deadline);
  if (self->handshake == task)
    g_clear_object (&self->handshake);
  else if (call->id != NULL)
    g_hash_table_remove (self->calls, call->id);

  if (error != NULL)
    g_task_return_error (task, g_error_copy (error));
  else if (result != NULL)
    g_task_return_pointer (task, json_node_copy (result), (GDestroyNotify) json_node_unref);
  else
    g_task_return_boolean (task, TRUE);
}

static void
vd_qmp_client_finish_call_new_error (VdQmpClient *self, GTask *task, gint code, const gchar *message)
{
  g_autoptr(GError) error = g_error_new_literal (VIVARIUM_ERROR, code, message);
  vd_qmp_client_finish_call (self, task, NULL, error);
}

static void
vd_qmp_call_on_deadline (gint code, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdQmpClient *self = g_task_get_source_object (task);

  vd_qmp_client_finish_call_new_error (self, task, code,
                                       code == VIVARIUM_ERROR_TIMED_OUT ? "QEMU did not answer in time" :
                                       "The QMP call was cancelled");
}

static GTask *
vd_qmp_client_new_call (VdQmpClient *self, gpointer source_tag, guint timeout_ms,
                        GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  VdQmpCall *call = g_new0 (VdQmpCall, 1);

  g_task_set_source_tag (task, source_tag);
  /* Cancellation is reported in our own error domain, like everything else. */
  g_task_set_check_cancellable (task, FALSE);
  g_task_set_task_data (task, call, (GDestroyNotify) vd_qmp_call_free);
  call->deadline = vd_deadline_new (timeout_ms, cancellable, g_task_get_context (task),
                                    vd_qmp_call_on_deadline, task);
  return task;
}

/* Fails everything in flight; each task is detached before its callback. */
static void
vd_qmp_client_fail_all (VdQmpClient *self, const GError *error)
{
  g_autoptr(GList) tasks = g_hash_table_get_values (self->calls);

  for (GList *l = tasks; l != NULL; l = l->next)
    g_object_ref (l->data);
  if (self->handshake != NULL)
    tasks = g_list_prepend (tasks, g_object_ref (self->handshake));
  for (GList *l = tasks; l != NULL; l = l->next) {
    g_autoptr(GTask) task = l->data;
    if (!g_task_get_completed (task))
      vd_qmp_client_finish_call (self, task, NULL, error);
  }
}

static void
vd_qmp_client_close_with_error (VdQmpClient *self, const GError *error)
{
  g_autoptr(VdQmpClient) keep = g_object_ref (self);

  if (self->closed)
    return;
  self->closed = TRUE;
  self->ready = FALSE;
  vd_json_stream_close (self->stream);
  vd_qmp_client_fail_all (self, error);
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
}

void
vd_qmp_client_close (VdQmpClient *self)
{
  g_autoptr(GError) error = NULL;

  g_return_if_fail (VD_IS_QMP_CLIENT (self));
  error = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                               "The QMP connection was closed");
  vd_qmp_client_close_with_error (self, error);
}

gboolean
vd_qmp_client_is_closed (VdQmpClient *self)
{
  g_return_val_if_fail (VD_IS_QMP_CLIENT (self), TRUE);
  return self->closed;
}

static void
vd_qmp_client_protocol_error (VdQmpClient *self, const gchar *what)
{
  g_autoptr(GError) error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                         "QMP protocol error: %s", what);
  g_debug ("%s", error->message);
  vd_qmp_client_close_with_error (self, error);
}

static void vd_qmp_client_send_capabilities (VdQmpClient *self);

static void
vd_qmp_client_handle_greeting (VdQmpClient *self, JsonObject *message)
{
  JsonNode *qmp = json_object_get_member (message, "QMP");

  if (self->greeting_seen || !JSON_NODE_HOLDS_OBJECT (qmp)) {
    vd_qmp_client_protocol_error (self, "unexpected greeting");
    return;
  }
  self->greeting_seen = TRUE;
  if (self->handshake != NULL)
    vd_qmp_client_send_capabilities (self);
}

/* QEMU's BLOCK_IO_ERROR, as a sentence: "reason" is QEMU's strerror() of
 * the failed request, but it comes over the wire, so it is checked and
 * escaped like anything else QEMU says. */
gchar *
vd_qmp_block_io_error_describe (JsonObject *data, gboolean *nospace)
{
  const gchar *operation = NULL;
  const gchar *reason = NULL;
  g_autofree gchar *reason_safe = NULL;

  *nospace = FALSE;
  if (data == NULL)
    return g_strdup ("a disk I/O error");
  if (json_object_has_member (data, "nospace") &&
      !vd_json_get_bool (data, "nospace", nospace, NULL))
    *nospace = FALSE;
  if (json_object_has_member (data, "operation"))
    operation = vd_json_get_string (data, "operation", NULL);
  if (json_object_has_member (data, "reason"))
    reason = vd_json_get_string (data, "reason", NULL);
  if (reason != NULL)
    reason_safe = vd_json_escape_untrusted (reason);
  if (*nospace)
    return g_strdup_printf ("the disk ran out of space (%s)",
                            reason_safe != NULL ? reason_safe : "No space left on device");
  return g_strdup_printf ("a disk %s error (%s)",
                          g_strcmp0 (operation, "read") == 0 ? "read" : "write",
                          reason_safe != NULL ? reason_safe : "no reason given");
}

/* The events the session acts on get a signal of their own. */
static void
vd_qmp_client_dispatch_event (VdQmpClient *self, const gchar *name, JsonObject *data)
{
  if (g_str_equal (name, "BLOCK_IO_ERROR")) {
    gboolean nospace = FALSE;
    g_autofree gchar *reason = vd_qmp_block_io_error_describe (data, &nospace);
    g_signal_emit (self, signals[SIGNAL_BLOCK_IO_ERROR], 0, reason, nospace);
  } else if (g_str_equal (name, "STOP")) {
    g_signal_emit (self, signals[SIGNAL_GUEST_STOPPED], 0);
  } else if (g_str_equal (name, "RESUME")) {
    g_signal_emit (self, signals[SIGNAL_GUEST_RESUMED], 0);
  }
}

static void
vd_qmp_client_handle_event (VdQmpClient *self, JsonObject *message)
{
  g_autoptr(GError) error = NULL;
  const gchar *name = vd_json_get_string (message, "event", &error);
  JsonNode *data = json_object_get_member (message, "data");

  if (name == NULL) {
    vd_qmp_client_protocol_error (self, error->message);
    return;
  }
  if (data != NULL && !JSON_NODE_HOLDS_OBJECT (data)) {
    vd_qmp_client_protocol_error (self, "event data is not an object");
    return;
  }
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, name,
                 data != NULL ? json_node_get_object (data) : NULL);
  vd_qmp_client_dispatch_event (self, name, data != NULL ? json_node_get_object (data) : NULL);
}

static GError *
vd_qmp_error_from_reply (JsonObject *message)
{
  g_autoptr(GError) error = NULL;
  JsonObject *obj = vd_json_get_object (message, "error", &error);
  const gchar *klass;
  const gchar *desc;
  g_autofree gchar *klass_safe = NULL;
  g_autofree gchar *desc_safe = NULL;

  if (obj == NULL)
    return g_steal_pointer (&error);
  klass = vd_json_get_string (obj, "class", &error);
  if (klass == NULL)
    return g_steal_pointer (&error);
  desc = vd_json_get_string (obj, "desc", &error);
  if (desc == NULL)
    return g_steal_pointer (&error);
  klass_safe = vd_json_escape_untrusted (klass);
  desc_safe = vd_json_escape_untrusted (desc);
  return g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST, "QEMU: %s: %s", klass_safe, desc_safe);
}

static void
vd_qmp_client_handle_reply (VdQmpClient *self, JsonObject *message)
{
  JsonNode *id = json_object_get_member (message, "id");
  gboolean has_return = json_object_has_member (message, "return");
  gboolean has_error = json_object_has_member (message, "error");
  GTask *task = NULL;

  if (id != NULL && JSON_NODE_HOLDS_VALUE (id) && json_node_get_value_type (id) == G_TYPE_STRING)
    task = g_hash_table_lookup (self->calls, json_node_get_string (id));
  if (task == NULL) {
    /* A late answer to a call that timed out or was cancelled. */
    g_debug ("ignoring a reply that matches no call in flight");
    return;
  }
  if (has_return && has_error) {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_PROTOCOL,
                                         "QMP reply has both a return value and an error");
    return;
  }
  if (has_error) {
    g_autoptr(GError) error = vd_qmp_error_from_reply (message);
    vd_qmp_client_finish_call (self, task, NULL, error);
    return;
  }
  vd_qmp_client_finish_call (self, task, json_object_get_member (message, "return"), NULL);
}

static void
vd_qmp_client_on_message (JsonObject *message, const GError *error, gpointer user_data)
{
  VdQmpClient *self = VD_QMP_CLIENT (user_data);

  /* QEMU never sends a broken line: the stream cannot be trusted after one. */
  if (error != NULL) {
    vd_qmp_client_close_with_error (self, error);
    return;
  }
  if (json_object_has_member (message, "QMP")) {
    vd_qmp_client_handle_greeting (self, message);
    return;
  }
  if (!self->greeting_seen) {
    vd_qmp_client_protocol_error (self, "message before the greeting");
    return;
  }
  if (json_object_has_member (message, "event")) {
    vd_qmp_client_handle_event (self, message);
    return;
  }
  if (json_object_has_member (message, "return") || json_object_has_member (message, "error")) {
    vd_qmp_client_handle_reply (self, message);
    return;
  }
  vd_qmp_client_protocol_error (self, "message of unknown kind");
}

static void
vd_qmp_client_on_stream_closed (const GError *error, gpointer user_data)
{
  vd_qmp_client_close_with_error (VD_QMP_CLIENT (user_data), error);
}

void
vd_qmp_client_set_max_response_size (VdQmpClient *self, gsize max_size)
{
  g_return_if_fail (VD_IS_QMP_CLIENT (self));
  vd_json_stream_set_max_message_size (self->stream, max_size);
}

/* Passing a descriptor -------------------------------------------------- */

/* QEMU keeps the descriptors that arrive with any bytes on the monitor
 * socket until a "getfd" names them; one space (which the JSON parser
 * skips) carries it. The caller sends this only while no command is being
 * written, so the space never lands inside another message. */
gboolean
vd_qmp_client_send_fd (VdQmpClient *self, int fd, GError **error)
{
  g_autoptr(GSocketControlMessage) msg = NULL;
  GOutputVector vec = { " ", 1 };
  GSocket *socket;

  g_return_val_if_fail (VD_IS_QMP_CLIENT (self), FALSE);
  if (self->closed || !G_IS_SOCKET_CONNECTION (self->io)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The QMP connection cannot pass a descriptor");
    return FALSE;
  }
  socket = g_socket_connection_get_socket (G_SOCKET_CONNECTION (self->io));
  msg = g_unix_fd_message_new ();
  if (!g_unix_fd_message_append_fd (G_UNIX_FD_MESSAGE (msg), fd, error) ||
      g_socket_send_message (socket, NULL, &vec, 1, &msg, 1, G_SOCKET_MSG_NONE, NULL, error) != 1) {
    g_prefix_error (error, "Cannot pass a descriptor to QEMU: ");
    vivarium_error_convert (error);
    return FALSE;
  }
  return TRUE;
}

/* Executing ------------------------------------------------------------- */

static void
vd_qmp_client_send_command (VdQmpClient *self, GTask *task, const gchar *command, JsonObject *arguments)
{
  VdQmpCall *call = g_task_get_task_data (task);
  g_autoptr(JsonObject) request = json_object_new ();

  call->id = g_strdup_printf ("vd-%" G_GUINT64_FORMAT, ++self->next_id);
  json_object_set_string_member (request, "execute", command);
  if (arguments != NULL)
    json_object_set_object_member (request, "arguments", json_object_ref (arguments));
  json_object_set_string_member (request, "id", call->id);
  g_hash_table_insert (self->calls, g_strdup (call->id), g_object_ref (task));
  vd_json_stream_send_object (self->stream, FALSE, request);
}

static void
vd_qmp_client_execute_internal (VdQmpClient *self, gpointer source_tag, const gchar *command,
                                JsonObject *arguments, guint timeout_ms, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = vd_qmp_client_new_call (self, source_tag, timeout_ms, cancellable,
                                                  callback, user_data);

  if (self->closed) {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_FAILED,
                                         "The QMP connection is closed");
    return;
  }
  if (command == NULL || !g_utf8_validate (command, -1, NULL) || command[0] == '\0') {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                         "Invalid QMP command name");
    return;
  }
  if (g_cancellable_is_cancelled (cancellable)) {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_CANCELLED,
                                         "The QMP call was cancelled");
    return;
  }
  vd_qmp_client_send_command (self, task, command, arguments);
}

void
vd_qmp_client_execute_async (VdQmpClient *self, const gchar *command, JsonObject *arguments,
                             guint timeout_ms, GCancellable *cancellable,
                             GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (VD_IS_QMP_CLIENT (self));

  if (!self->ready && !self->closed) {
    g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
    g_task_set_source_tag (task, vd_qmp_client_execute_async);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                             "The QMP handshake has not completed");
    return;
  }
  vd_qmp_client_execute_internal (self, vd_qmp_client_execute_async, command, arguments,
                                  timeout_ms, cancellable, callback, user_data);
}

JsonNode *
vd_qmp_client_execute_finish (VdQmpClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* Handshake ------------------------------------------------------------- */

static void
vd_qmp_client_on_capabilities (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VdQmpClient *self = VD_QMP_CLIENT (source);
  g_autoptr(GTask) task = G_TASK (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = g_task_propagate_pointer (G_TASK (res), &error);

  self->negotiating = FALSE;
  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  self->ready = !self->closed;
  g_task_return_boolean (task, TRUE);
}

static void
vd_qmp_client_send_capabilities (VdQmpClient *self)
{
  g_autoptr(GTask) task = g_steal_pointer (&self->handshake);
  VdQmpCall *call = g_task_get_task_data (task);
  guint remaining = vd_deadline_remaining_ms (call->deadline);

  /* From here on the qmp_capabilities call carries the timeout. */
  vd_deadline_stop (call->deadline);
  self->negotiating = TRUE;
  vd_qmp_client_execute_internal (self, vd_qmp_client_handshake_async, "qmp_capabilities", NULL,
                                  MAX (remaining, 1), g_task_get_cancellable (task),
                                  vd_qmp_client_on_capabilities, g_object_ref (task));
}

void
vd_qmp_client_handshake_async (VdQmpClient *self, guint timeout_ms, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (VD_IS_QMP_CLIENT (self));

  task = vd_qmp_client_new_call (self, vd_qmp_client_handshake_async, timeout_ms, cancellable,
                                 callback, user_data);
  if (self->closed) {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_FAILED,
                                         "The QMP connection is closed");
    return;
  }
  if (self->ready) {
    vd_qmp_client_finish_call (self, task, NULL, NULL);
    return;
  }
  if (self->handshake != NULL || self->negotiating) {
    vd_qmp_client_finish_call_new_error (self, task, VIVARIUM_ERROR_BUSY,
                                         "A QMP handshake is already in progress");
    return;
  }
  self->handshake = g_steal_pointer (&task);
  /* The greeting may have arrived before anyone asked for the handshake. */
  if (self->greeting_seen)
    vd_qmp_client_send_capabilities (self);
}

gboolean
vd_qmp_client_handshake_finish (VdQmpClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* Connecting ------------------------------------------------------------ */

static void
vd_qmp_client_on_connect_handshake (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VdQmpClient *client = VD_QMP_CLIENT (source);
  g_autoptr(GTask) task = G_TASK (user_data);
  g_autoptr(GError) error = NULL;

  if (!vd_qmp_client_handshake_finish (client, res, &error)) {
    vd_qmp_client_close (client);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_pointer (task, g_object_ref (client), g_object_unref);
}

static void
vd_qmp_client_on_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  gint64 *deadline_us = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) stream = vd_unix_connect_finish (res, &error);
  g_autoptr(VdQmpClient) client = NULL;

  if (stream == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  client = vd_qmp_client_new_for_stream (stream);
  vd_qmp_client_handshake_async (client, MAX (vd_deadline_ms_until (*deadline_us), 1),
                                 g_task_get_cancellable (task),
                                 vd_qmp_client_on_connect_handshake, g_object_ref (task));
}

void
vd_qmp_client_connect_async (const gchar *socket_path, guint timeout_ms, GCancellable *cancellable,
                             GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  gint64 *deadline_us = g_new (gint64, 1);

  g_task_set_source_tag (task, vd_qmp_client_connect_async);
  g_task_set_check_cancellable (task, FALSE);
  *deadline_us = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_task_set_task_data (task, deadline_us, g_free);
  vd_unix_connect_async (socket_path, timeout_ms, cancellable,
                         vd_qmp_client_on_connected, g_steal_pointer (&task));
}

VdQmpClient *
vd_qmp_client_connect_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* Object ---------------------------------------------------------------- */

static void
vd_qmp_client_dispose (GObject *object)
{
  VdQmpClient *self = VD_QMP_CLIENT (object);

  /* Tasks hold a reference on us, so nothing is in flight any more. */
  self->closed = TRUE;
  if (self->stream != NULL)
    vd_json_stream_close (self->stream);
  G_OBJECT_CLASS (vd_qmp_client_parent_class)->dispose (object);
}

static void
vd_qmp_client_finalize (GObject *object)
{
  VdQmpClient *self = VD_QMP_CLIENT (object);

  g_clear_object (&self->handshake);
  g_hash_table_unref (self->calls);
  g_clear_object (&self->stream);
  g_clear_object (&self->io);
  G_OBJECT_CLASS (vd_qmp_client_parent_class)->finalize (object);
}

static void
vd_qmp_client_class_init (VdQmpClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vd_qmp_client_dispose;
  object_class->finalize = vd_qmp_client_finalize;

  signals[SIGNAL_EVENT] = g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                        0, NULL, NULL, NULL, G_TYPE_NONE, 2,
                                        G_TYPE_STRING, JSON_TYPE_OBJECT);
  /* (const gchar *reason, gboolean nospace): QEMU's words, escaped */
  signals[SIGNAL_BLOCK_IO_ERROR] = g_signal_new ("block-io-error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
                                                 G_TYPE_STRING, G_TYPE_BOOLEAN);
  signals[SIGNAL_GUEST_STOPPED] = g_signal_new ("guest-stopped", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_GUEST_RESUMED] = g_signal_new ("guest-resumed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  signals[SIGNAL_CLOSED] = g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
vd_qmp_client_init (VdQmpClient *self)
{
  self->calls = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
}

VdQmpClient *
vd_qmp_client_new_for_stream (GIOStream *stream)
{
  VdQmpClient *self;

  g_return_val_if_fail (G_IS_IO_STREAM (stream), NULL);

  self = g_object_new (VD_TYPE_QMP_CLIENT, NULL);
  self->io = g_object_ref (stream);
  self->stream = vd_json_stream_new (stream, VD_QMP_CLIENT_DEFAULT_MAX_RESPONSE);
  /* The stream only holds a borrowed pointer to us: dispose closes it,
   * which drops the callbacks, before we go away. */
  vd_json_stream_start (self->stream, vd_qmp_client_on_message,
                        vd_qmp_client_on_stream_closed, self);
  return self;
}
