/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-agent-client"

#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-deadline.h"
#include "vd-json-stream.h"
#include "vd-agent-client.h"

/* How long opening a unix socket may take: it is local, so it either works
 * at once or not at all. */
#define VD_AGENT_CONNECT_TIMEOUT_MS 5000
/* guest-exec-status is asked every 5 ms for the first 40 ms, then 10, 20,
 * … ms apart, at most 200: most commands (a first exec, the restore's
 * reseed script) end within a few tens of milliseconds, and a first poll
 * at 50 ms, doubling, made each wait up to twice its time. A poll is one
 * short round trip to qemu-ga. */
#define VD_AGENT_POLL_FIRST_MS      5
#define VD_AGENT_POLL_FAST_COUNT    8
#define VD_AGENT_POLL_MAX_MS        200
/* A command that outlived its caller's timeout is polled at a leisurely
 * pace: nobody waits on it, and it must not crowd the agent. */
#define VD_AGENT_REAP_POLL_FIRST_MS 500
#define VD_AGENT_REAP_POLL_MAX_MS   5000
#define VD_AGENT_FILE_CHUNK         (512 * 1024)
/* Closing a guest file after a failure gets its own short allowance. */
#define VD_AGENT_CLOSE_TIMEOUT_MS   1000
/* wait_ready: the guest is booting, so each try is short and the pause
 * between failed connects is small; the caller's timeout bounds the rest. */
#define VD_AGENT_TRY_FIRST_MS       250
#define VD_AGENT_TRY_MAX_MS         2000
#define VD_AGENT_RETRY_PAUSE_MS     100

struct _VdAgentClient {
  GObject       parent_instance;
  VdJsonStream *stream;
  GQueue        queue;          /* of GTask, requests not yet sent */
  GTask        *current;        /* the one request on the wire */
  gboolean      need_resync;
  gboolean      closed;
};

enum {
  SIGNAL_CLOSED,
  SIGNAL_LAST
};
static guint signals[SIGNAL_LAST] = { 0 };

G_DEFINE_TYPE (VdAgentClient, vd_agent_client, G_TYPE_OBJECT)

/* Requests: one at a time on the wire -------------------------------------- */

typedef enum {
  VD_AGENT_PHASE_QUEUED,
  VD_AGENT_PHASE_SYNC,
  VD_AGENT_PHASE_REPLY,
} VdAgentPhase;

typedef struct {
  JsonObject   *request;        /* NULL: the request is the sync itself */
  gint64        sync_id;
  VdAgentPhase  phase;
  VdDeadline   *deadline;
} VdAgentRequest;

static void
vd_agent_request_free (VdAgentRequest *req)
{
  vd_deadline_free (req->deadline);
  g_clear_pointer (&req->request, json_object_unref);
  g_free (req);
}

static void vd_agent_client_pump (VdAgentClient *self);

/* Detaches @task before returning it, since its callback may queue the next
 * request right away. */
static void
vd_agent_client_finish_request (VdAgentClient *self, GTask *task, JsonNode *result, GError *error)
{
  g_autoptr(GTask) keep = g_object_ref (task);
  VdAgentRequest *req = g_task_get_task_data (task);

  if (req->deadline != NULL)
    vd_deadline_stop (req->deadline);
  if (self->current == task) {
    g_clear_object (&self->current);
  } else if (g_queue_remove (&self->queue, task)) {
    g_object_unref (task);
  }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, json_node_copy (result), (GDestroyNotify) json_node_unref);
  vd_agent_client_pump (self);
}

static void
vd_agent_client_finish_request_new_error (VdAgentClient *self, GTask *task, gint code, const gchar *message)
{
  vd_agent_client_finish_request (self, task, NULL, g_error_new_literal (VIVARIUM_ERROR, code, message));
}

static void
vd_agent_request_on_deadline (gint code, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdAgentClient *self = g_task_get_source_object (task);

  /* Its answer may still come: the next request starts with a resync. */
  if (self->current == task)
    self->need_resync = TRUE;
  vd_agent_client_finish_request_new_error (self, task, code,
                                            code == VIVARIUM_ERROR_TIMED_OUT ?
                                            "The guest agent did not answer in time" :
                                            "The guest agent request was cancelled");
}

static void
vd_agent_client_send_sync (VdAgentClient *self, VdAgentRequest *req)
{
  g_autoptr(JsonObject) request = json_object_new ();
  g_autoptr(JsonObject) args = json_object_new ();

  req->phase = VD_AGENT_PHASE_SYNC;
  req->sync_id = g_random_int_range (1, G_MAXINT32);
  json_object_set_int_member (args, "id", req->sync_id);
  json_object_set_string_member (request, "execute", "guest-sync-delimited");
  json_object_set_object_member (request, "arguments", g_steal_pointer (&args));
  /* Anything the agent said before our delimiter is stale. */
  vd_json_stream_skip_to_delimiter (self->stream);
  vd_json_stream_send_object (self->stream, TRUE, request);
}

static void
vd_agent_client_pump (VdAgentClient *self)
{
  while (self->current == NULL && !self->closed && !g_queue_is_empty (&self->queue)) {
    VdAgentRequest *req;

    self->current = g_queue_pop_head (&self->queue);
    req = g_task_get_task_data (self->current);
    if (req->request == NULL || self->need_resync) {
      vd_agent_client_send_sync (self, req);
    } else {
      req->phase = VD_AGENT_PHASE_REPLY;
      vd_json_stream_send_object (self->stream, FALSE, req->request);
    }
  }
}

static void
vd_agent_client_request_async (VdAgentClient *self, JsonObject *request, gint64 deadline_us,
                               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  VdAgentRequest *req = g_new0 (VdAgentRequest, 1);
  gint64 left_us = deadline_us - g_get_monotonic_time ();

  g_task_set_source_tag (task, vd_agent_client_request_async);
  g_task_set_check_cancellable (task, FALSE);
  g_task_set_task_data (task, req, (GDestroyNotify) vd_agent_request_free);
  if (request != NULL)
    req->request = json_object_ref (request);

  if (self->closed) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                             "The guest agent connection is closed");
    return;
  }
  if (g_cancellable_is_cancelled (cancellable)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                             "The guest agent request was cancelled");
    return;
  }
  if (left_us <= 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                             "The guest agent did not answer in time");
    return;
  }
  req->deadline = vd_deadline_new_at (deadline_us, cancellable, g_task_get_context (task),
                                      vd_agent_request_on_deadline, task);
  g_queue_push_tail (&self->queue, g_steal_pointer (&task));
  vd_agent_client_pump (self);
}

static JsonNode *
vd_agent_client_request_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static JsonObject *
vd_agent_request_new (const gchar *command, JsonObject *arguments)
{
  JsonObject *request = json_object_new ();

  json_object_set_string_member (request, "execute", command);
  if (arguments != NULL)
    json_object_set_object_member (request, "arguments", json_object_ref (arguments));
  return request;
}

/* One plain command (guest-set-time, guest-get-time): the "return" value,
 * which is the guest's statement. */
void
vd_agent_client_command_async (VdAgentClient *self, const gchar *command, JsonObject *arguments, guint timeout_ms,
                               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(JsonObject) request = vd_agent_request_new (command, arguments);

  vd_agent_client_request_async (self, request, g_get_monotonic_time () + (gint64) timeout_ms * 1000,
                                 cancellable, callback, user_data);
}

JsonNode *
vd_agent_client_command_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  return vd_agent_client_request_finish (self, result, error);
}

static GError *
vd_agent_error_from_reply (JsonObject *message)
{
  g_autoptr(GError) error = NULL;
  JsonObject *obj = vd_json_get_object (message, "error", &error);
  const gchar *desc;
  g_autofree gchar *desc_safe = NULL;

  if (obj == NULL)
    return g_steal_pointer (&error);
  desc = vd_json_get_string (obj, "desc", &error);
  if (desc == NULL)
    return g_steal_pointer (&error);
  desc_safe = vd_json_escape_untrusted (desc);
  return g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST, "Guest agent: %s", desc_safe);
}

static void
vd_agent_client_on_sync_reply (VdAgentClient *self, JsonObject *message)
{
  VdAgentRequest *req = g_task_get_task_data (self->current);
  gint64 id = 0;

  if (message == NULL ||
      !vd_json_node_get_int (json_object_get_member (message, "return"), &id) ||
      id != req->sync_id) {
    /* A late answer to an older sync, or noise: look for the next delimiter. */
    vd_json_stream_skip_to_delimiter (self->stream);
    return;
  }
  self->need_resync = FALSE;
  if (req->request == NULL) {
    g_autoptr(JsonNode) ok = json_node_new (JSON_NODE_NULL);
    vd_agent_client_finish_request (self, self->current, ok, NULL);
    return;
  }
  req->phase = VD_AGENT_PHASE_REPLY;
  vd_json_stream_send_object (self->stream, FALSE, req->request);
}

static void
vd_agent_client_on_message (JsonObject *message, const GError *error, gpointer user_data)
{
  VdAgentClient *self = VD_AGENT_CLIENT (user_data);
  VdAgentRequest *req;

  if (self->current == NULL) {
    g_debug ("ignoring agent output with no request in flight");
    self->need_resync = TRUE;
    return;
  }
  req = g_task_get_task_data (self->current);
  if (req->phase == VD_AGENT_PHASE_SYNC) {
    vd_agent_client_on_sync_reply (self, message);
    return;
  }
  if (error != NULL) {
    self->need_resync = TRUE;
    vd_agent_client_finish_request (self, self->current, NULL, g_error_copy (error));
    return;
  }
  if (json_object_has_member (message, "error")) {
    vd_agent_client_finish_request (self, self->current, NULL, vd_agent_error_from_reply (message));
    return;
  }
  if (!json_object_has_member (message, "return")) {
    self->need_resync = TRUE;
    vd_agent_client_finish_request_new_error (self, self->current, VIVARIUM_ERROR_PROTOCOL,
                                              "Guest agent reply has neither a return value nor an error");
    return;
  }
  vd_agent_client_finish_request (self, self->current, json_object_get_member (message, "return"), NULL);
}

static void
vd_agent_client_close_with_error (VdAgentClient *self, const GError *error)
{
  g_autoptr(VdAgentClient) keep = g_object_ref (self);
  g_autoptr(GList) tasks = NULL;

  if (self->closed)
    return;
  self->closed = TRUE;
  vd_json_stream_close (self->stream);
  /* Steal everything first: callbacks may try to queue more. */
  tasks = g_queue_peek_head_link (&self->queue);
  g_queue_init (&self->queue);
  if (self->current != NULL)
    tasks = g_list_prepend (tasks, g_steal_pointer (&self->current));
  for (GList *l = tasks; l != NULL; l = l->next) {
    g_autoptr(GTask) task = l->data;
    VdAgentRequest *req = g_task_get_task_data (task);
    if (req->deadline != NULL)
      vd_deadline_stop (req->deadline);
    g_task_return_error (task, g_error_copy (error));
  }
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0);
}

static void
vd_agent_client_on_stream_closed (const GError *error, gpointer user_data)
{
  vd_agent_client_close_with_error (VD_AGENT_CLIENT (user_data), error);
}

void
vd_agent_client_close (VdAgentClient *self)
{
  g_autoptr(GError) error = NULL;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));
  error = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                               "The guest agent connection was closed");
  vd_agent_client_close_with_error (self, error);
}

gboolean
vd_agent_client_is_closed (VdAgentClient *self)
{
  g_return_val_if_fail (VD_IS_AGENT_CLIENT (self), TRUE);
  return self->closed;
}

void
vd_agent_client_set_max_response_size (VdAgentClient *self, gsize max_size)
{
  g_return_if_fail (VD_IS_AGENT_CLIENT (self));
  vd_json_stream_set_max_message_size (self->stream, max_size);
}

/* Operations: one task each, a chain of requests ------------------------- */

typedef struct {
  gint64          deadline_us;
  /* exec */
  gsize           output_cap;
  gint64          pid;          /* the guest's, once guest-exec answered; else -1 */
  guint           poll_ms;
  guint           poll_max_ms;
  guint           poll_fast;     /* polls left at poll_ms before it grows */
  /* files */
  gchar          *path;
  gint64          handle;
  gboolean        has_handle;
  gsize           max_size;
  GByteArray     *content;
  GBytes         *data;
  gsize           offset;       /* write: bytes done; read: bytes asked for */
  GError         *error;        /* kept while the guest file is being closed */
  /* wait_ready */
  gchar          *socket_path;
  VdAgentClient  *client;
  guint           try_ms;
} VdAgentOp;

static void
vd_agent_op_free (VdAgentOp *op)
{
  g_free (op->path);
  g_clear_pointer (&op->content, g_byte_array_unref);
  g_clear_pointer (&op->data, g_bytes_unref);
  g_clear_error (&op->error);
  g_free (op->socket_path);
  g_clear_object (&op->client);
  g_free (op);
}

static GTask *
vd_agent_op_new (gpointer source_object, gpointer source_tag, guint timeout_ms,
                 GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (source_object, cancellable, callback, user_data);
  VdAgentOp *op = g_new0 (VdAgentOp, 1);

  g_task_set_source_tag (task, source_tag);
  g_task_set_check_cancellable (task, FALSE);
  op->deadline_us = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_task_set_task_data (task, op, (GDestroyNotify) vd_agent_op_free);
  return task;
}

static guint
vd_agent_op_remaining_ms (VdAgentOp *op)
{
  return vd_deadline_ms_until (op->deadline_us);
}

/* Sends one request for @task's operation; @args is consumed. */
static void
vd_agent_op_call (GTask *task, const gchar *command, JsonObject *args, GAsyncReadyCallback callback)
{
  VdAgentClient *self = g_task_get_source_object (task);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(JsonObject) arguments = args;
  g_autoptr(JsonObject) request = vd_agent_request_new (command, arguments);

  vd_agent_client_request_async (self, request, op->deadline_us, g_task_get_cancellable (task),
                                 callback, g_object_ref (task));
}

static void
vd_agent_op_schedule (GTask *task, guint delay_ms, GSourceFunc func)
{
  g_autoptr(GSource) source = g_timeout_source_new (delay_ms);

  g_source_set_callback (source, func, g_object_ref (task), g_object_unref);
  g_source_attach (source, g_task_get_context (task));
}

/* sync ------------------------------------------------------------------ */

static void
vd_agent_client_on_sync (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);

  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_boolean (task, TRUE);
}

void
vd_agent_client_sync_async (VdAgentClient *self, guint timeout_ms, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  VdAgentOp *op;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));

  task = vd_agent_op_new (self, vd_agent_client_sync_async, timeout_ms, cancellable, callback, user_data);
  op = g_task_get_task_data (task);
  vd_agent_client_request_async (self, NULL, op->deadline_us, cancellable,
                                 vd_agent_client_on_sync, g_object_ref (task));
}

gboolean
vd_agent_client_sync_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* exec ------------------------------------------------------------------ */

static gboolean vd_agent_exec_poll (gpointer user_data);

static void
vd_agent_exec_on_status (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);
  g_autoptr(VdAgentExecResult) result = NULL;
  JsonObject *status;
  gboolean exited = FALSE;

  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (!JSON_NODE_HOLDS_OBJECT (ret)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                             "guest-exec-status returned no object");
    return;
  }
  status = json_node_get_object (ret);
  if (!vd_json_get_bool (status, "exited", &exited, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (!exited) {
    guint delay = MIN (op->poll_ms, vd_agent_op_remaining_ms (op));
    if (op->poll_fast > 0)
      op->poll_fast--;
    else
      op->poll_ms = MIN (op->poll_ms * 2, op->poll_max_ms);
    vd_agent_op_schedule (task, delay, vd_agent_exec_poll);
    return;
  }
  result = vd_agent_exec_parse_status (status, op->output_cap, &error);
  if (result == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_pointer (task, g_steal_pointer (&result), (GDestroyNotify) vd_agent_exec_result_free);
}

static gboolean
vd_agent_exec_poll (gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  JsonObject *args = json_object_new ();

  json_object_set_int_member (args, "pid", op->pid);
  vd_agent_op_call (task, "guest-exec-status", args, vd_agent_exec_on_status);
  return G_SOURCE_REMOVE;
}

static void
vd_agent_exec_on_started (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);

  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (!JSON_NODE_HOLDS_OBJECT (ret)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                             "guest-exec returned no object");
    return;
  }
  if (!vd_json_get_int (json_node_get_object (ret), "pid", 0, G_MAXINT64, &op->pid, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  op->poll_ms = VD_AGENT_POLL_FIRST_MS;
  op->poll_fast = VD_AGENT_POLL_FAST_COUNT - 1;
  vd_agent_op_schedule (task, MIN (op->poll_ms, vd_agent_op_remaining_ms (op)), vd_agent_exec_poll);
}

static JsonArray *
vd_agent_strv_to_array (const gchar * const *strv)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; strv != NULL && strv[i] != NULL; i++)
    json_array_add_string_element (array, strv[i]);
  return array;
}

/* guest-exec has no working-directory argument in every agent version, so
 * the guest's shell changes directory first. The wrapper is ours: the
 * limits apply to the caller's argv, checked before it is wrapped. */
static GStrv
vd_agent_wrap_cwd (const gchar * const *argv, const gchar *cwd)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();

  if (cwd == NULL || cwd[0] == '\0')
    return g_strdupv ((gchar **) argv);
  g_strv_builder_add_many (b, "/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", cwd, NULL);
  g_strv_builder_addv (b, (const gchar **) argv);
  return g_strv_builder_end (b);
}

static gboolean
vd_agent_exec_validate (const gchar * const *argv, const gchar * const *env, const gchar *cwd, GError **error)
{
  if (!vivarium_argv_validate (argv, error) || !vivarium_env_validate (env, error))
    return FALSE;
  return cwd == NULL || cwd[0] == '\0' || vivarium_guest_path_validate (cwd, error);
}

void
vd_agent_client_exec_async (VdAgentClient *self, const gchar * const *argv, const gchar * const *env,
                            const gchar *cwd, guint timeout_ms, gsize output_cap, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) wrapped = NULL;
  JsonObject *args;
  VdAgentOp *op;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));

  task = vd_agent_op_new (self, vd_agent_client_exec_async, timeout_ms, cancellable, callback, user_data);
  op = g_task_get_task_data (task);
  op->output_cap = output_cap;
  op->pid = -1;
  op->poll_max_ms = VD_AGENT_POLL_MAX_MS;
  if (!vd_agent_exec_validate (argv, env, cwd, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  wrapped = vd_agent_wrap_cwd (argv, cwd);
  args = json_object_new ();
  json_object_set_string_member (args, "path", wrapped[0]);
  json_object_set_array_member (args, "arg", vd_agent_strv_to_array ((const gchar * const *) wrapped + 1));
  if (env != NULL && env[0] != NULL)
    json_object_set_array_member (args, "env", vd_agent_strv_to_array (env));
  json_object_set_boolean_member (args, "capture-output", TRUE);
  vd_agent_op_call (task, "guest-exec", args, vd_agent_exec_on_started);
}

VdAgentExecResult *
vd_agent_client_exec_finish (VdAgentClient *self, GAsyncResult *result, gint64 *pid, GError **error)
{
  VdAgentOp *op;

  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  op = g_task_get_task_data (G_TASK (result));
  if (pid != NULL)
    *pid = op->pid;
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* Picks up a command that is already running in the guest (one whose exec
 * timed out) and waits for it, polling slowly: nobody is waiting on it. */
void
vd_agent_client_exec_wait_async (VdAgentClient *self, gint64 pid, guint timeout_ms, gsize output_cap,
                                 GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  VdAgentOp *op;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));

  task = vd_agent_op_new (self, vd_agent_client_exec_wait_async, timeout_ms, cancellable, callback, user_data);
  op = g_task_get_task_data (task);
  op->output_cap = output_cap;
  op->pid = pid;
  op->poll_ms = VD_AGENT_REAP_POLL_FIRST_MS;
  op->poll_max_ms = VD_AGENT_REAP_POLL_MAX_MS;
  if (pid < 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "No guest process to wait for");
    return;
  }
  vd_agent_exec_poll (task);
}

VdAgentExecResult *
vd_agent_client_exec_wait_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* files ----------------------------------------------------------------- */

static void
vd_agent_file_on_closed (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);

  if (op->error != NULL) {
    g_task_return_error (task, g_steal_pointer (&op->error));
    return;
  }
  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (op->content != NULL) {
    g_task_return_pointer (task, g_byte_array_free_to_bytes (g_steal_pointer (&op->content)),
                           (GDestroyNotify) g_bytes_unref);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

/* Ends a file operation by closing the guest handle, success or not; a
 * failure's handle close gets its own short allowance. */
static void
vd_agent_file_finish (GTask *task, GError *error)
{
  VdAgentOp *op = g_task_get_task_data (task);
  JsonObject *args;

  if (!op->has_handle) {
    if (error == NULL)
      error = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "No guest file is open");
    g_task_return_error (task, error);
    return;
  }
  op->has_handle = FALSE;
  op->error = error;
  if (error != NULL)
    op->deadline_us = g_get_monotonic_time () + VD_AGENT_CLOSE_TIMEOUT_MS * 1000;
  args = json_object_new ();
  json_object_set_int_member (args, "handle", op->handle);
  vd_agent_op_call (task, "guest-file-close", args, vd_agent_file_on_closed);
}

static gboolean
vd_agent_file_got_handle (GTask *task, GAsyncResult *res)
{
  VdAgentOp *op = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (g_task_get_source_object (task), res, &error);

  if (ret == NULL) {
    vd_agent_file_finish (task, error);
    return FALSE;
  }
  if (!vd_json_node_get_int (ret, &op->handle) || op->handle < 0) {
    vd_agent_file_finish (task, g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                                     "guest-file-open returned no handle"));
    return FALSE;
  }
  op->has_handle = TRUE;
  return TRUE;
}

static void vd_agent_read_next (GTask *task);

static gboolean
vd_agent_read_chunk (VdAgentOp *op, JsonNode *ret, gsize asked, gboolean *eof, GError **error)
{
  JsonObject *obj;
  const gchar *b64;
  gint64 count = 0;
  gboolean too_long = FALSE;
  g_autoptr(GBytes) chunk = NULL;

  if (!JSON_NODE_HOLDS_OBJECT (ret)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "guest-file-read returned no object");
    return FALSE;
  }
  obj = json_node_get_object (ret);
  if (!vd_json_get_int (obj, "count", 0, (gint64) asked, &count, error) ||
      !vd_json_get_bool (obj, "eof", eof, error))
    return FALSE;
  b64 = vd_json_get_string (obj, "buf-b64", error);
  if (b64 == NULL)
    return FALSE;
  chunk = vd_base64_decode_capped (b64, asked, &too_long, error);
  if (chunk == NULL)
    return FALSE;
  if (too_long || g_bytes_get_size (chunk) != (gsize) count) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "guest-file-read data does not match its count");
    return FALSE;
  }
  g_byte_array_append (op->content, g_bytes_get_data (chunk, NULL), (guint) count);
  return TRUE;
}

static void
vd_agent_read_on_data (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);
  gboolean eof = FALSE;

  if (ret == NULL || !vd_agent_read_chunk (op, ret, op->offset, &eof, &error)) {
    vd_agent_file_finish (task, error);
    return;
  }
  if (op->content->len > op->max_size) {
    vd_agent_file_finish (task, g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                                             "The guest file is larger than %" G_GSIZE_FORMAT " bytes",
                                             op->max_size));
    return;
  }
  if (eof) {
    vd_agent_file_finish (task, NULL);
    return;
  }
  vd_agent_read_next (task);
}

/* Never asks for more than one byte past the limit, so an oversized file is
 * refused without being read into memory. */
static void
vd_agent_read_next (GTask *task)
{
  VdAgentOp *op = g_task_get_task_data (task);
  JsonObject *args = json_object_new ();

  op->offset = MIN ((gsize) VD_AGENT_FILE_CHUNK, op->max_size + 1 - op->content->len);
  json_object_set_int_member (args, "handle", op->handle);
  json_object_set_int_member (args, "count", (gint64) op->offset);
  vd_agent_op_call (task, "guest-file-read", args, vd_agent_read_on_data);
}

static void
vd_agent_read_on_open (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);

  if (vd_agent_file_got_handle (task, res))
    vd_agent_read_next (task);
}

static void
vd_agent_file_open (GTask *task, const gchar *mode, GAsyncReadyCallback callback)
{
  VdAgentOp *op = g_task_get_task_data (task);
  JsonObject *args = json_object_new ();

  json_object_set_string_member (args, "path", op->path);
  json_object_set_string_member (args, "mode", mode);
  vd_agent_op_call (task, "guest-file-open", args, callback);
}

void
vd_agent_client_read_file_async (VdAgentClient *self, const gchar *path, gsize max_size,
                                 guint timeout_ms, GCancellable *cancellable,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(GError) error = NULL;
  VdAgentOp *op;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));

  task = vd_agent_op_new (self, vd_agent_client_read_file_async, timeout_ms, cancellable, callback, user_data);
  if (!vivarium_guest_path_validate (path, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  op = g_task_get_task_data (task);
  op->path = g_strdup (path);
  op->max_size = MIN (max_size, (gsize) G_MAXUINT - 1);
  op->content = g_byte_array_new ();
  vd_agent_file_open (task, "r", vd_agent_read_on_open);
}

GBytes *
vd_agent_client_read_file_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void vd_agent_write_next (GTask *task);

static void
vd_agent_write_on_written (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  GError *error = NULL;
  g_autoptr(JsonNode) ret = vd_agent_client_request_finish (VD_AGENT_CLIENT (source), res, &error);
  gsize chunk = MIN ((gsize) VD_AGENT_FILE_CHUNK, g_bytes_get_size (op->data) - op->offset);
  gint64 count = 0;

  if (ret == NULL) {
    vd_agent_file_finish (task, error);
    return;
  }
  if (!JSON_NODE_HOLDS_OBJECT (ret) ||
      !vd_json_get_int (json_node_get_object (ret), "count", 0, G_MAXINT64, &count, &error)) {
    vd_agent_file_finish (task, error != NULL ? error :
                          g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                               "guest-file-write returned no object"));
    return;
  }
  if ((gsize) count != chunk) {
    vd_agent_file_finish (task, g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                                     "The guest wrote less than it was sent"));
    return;
  }
  op->offset += chunk;
  vd_agent_write_next (task);
}

static void
vd_agent_write_next (GTask *task)
{
  VdAgentOp *op = g_task_get_task_data (task);
  gsize size = 0;
  const guint8 *data = g_bytes_get_data (op->data, &size);
  gsize chunk = MIN ((gsize) VD_AGENT_FILE_CHUNK, size - op->offset);
  g_autofree gchar *b64 = NULL;
  JsonObject *args;

  if (chunk == 0) {
    vd_agent_file_finish (task, NULL);
    return;
  }
  b64 = g_base64_encode (data + op->offset, chunk);
  args = json_object_new ();
  json_object_set_int_member (args, "handle", op->handle);
  json_object_set_string_member (args, "buf-b64", b64);
  json_object_set_int_member (args, "count", (gint64) chunk);
  vd_agent_op_call (task, "guest-file-write", args, vd_agent_write_on_written);
}

static void
vd_agent_write_on_open (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);

  if (vd_agent_file_got_handle (task, res))
    vd_agent_write_next (task);
}

void
vd_agent_client_write_file_async (VdAgentClient *self, const gchar *path, GBytes *data,
                                  guint timeout_ms, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  g_autoptr(GError) error = NULL;
  VdAgentOp *op;

  g_return_if_fail (VD_IS_AGENT_CLIENT (self));
  g_return_if_fail (data != NULL);

  task = vd_agent_op_new (self, vd_agent_client_write_file_async, timeout_ms, cancellable, callback, user_data);
  if (!vivarium_guest_path_validate (path, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  op = g_task_get_task_data (task);
  op->path = g_strdup (path);
  op->data = g_bytes_ref (data);
  vd_agent_file_open (task, "w", vd_agent_write_on_open);
}

gboolean
vd_agent_client_write_file_finish (VdAgentClient *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* connecting ------------------------------------------------------------ */

static void
vd_agent_client_on_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) stream = vd_unix_connect_finish (res, &error);

  if (stream == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_pointer (task, vd_agent_client_new_for_stream (stream), g_object_unref);
}

void
vd_agent_client_connect_async (const gchar *socket_path, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, vd_agent_client_connect_async);
  g_task_set_check_cancellable (task, FALSE);
  vd_unix_connect_async (socket_path, VD_AGENT_CONNECT_TIMEOUT_MS, cancellable,
                         vd_agent_client_on_connected, g_steal_pointer (&task));
}

VdAgentClient *
vd_agent_client_connect_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void vd_agent_wait_try (GTask *task);

static gboolean
vd_agent_wait_retry (gpointer user_data)
{
  vd_agent_wait_try (G_TASK (user_data));
  return G_SOURCE_REMOVE;
}

/* A failed try: give up at the deadline, else try again shortly. */
static void
vd_agent_wait_failed (GTask *task, GError *error)
{
  VdAgentOp *op = g_task_get_task_data (task);
  guint left = vd_agent_op_remaining_ms (op);

  if (g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED) ||
      g_cancellable_is_cancelled (g_task_get_cancellable (task))) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                             "Waiting for the guest agent was cancelled");
    return;
  }
  if (left == 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                             "The guest agent did not become ready in time: %s", error->message);
    return;
  }
  if (g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT) &&
      op->client != NULL && !vd_agent_client_is_closed (op->client)) {
    vd_agent_wait_try (task);
    return;
  }
  g_clear_object (&op->client);
  vd_agent_op_schedule (task, MIN (VD_AGENT_RETRY_PAUSE_MS, left), vd_agent_wait_retry);
}

static void
vd_agent_wait_on_sync (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!vd_agent_client_sync_finish (VD_AGENT_CLIENT (source), res, &error)) {
    vd_agent_wait_failed (task, error);
    return;
  }
  g_task_return_pointer (task, g_steal_pointer (&op->client), g_object_unref);
}

static void
vd_agent_wait_sync (GTask *task)
{
  VdAgentOp *op = g_task_get_task_data (task);
  guint try_ms = MIN (op->try_ms, vd_agent_op_remaining_ms (op));

  /* QEMU accepts the connection before the guest opened its end, and drops
   * what we write meanwhile: short tries, growing, until one is answered. */
  op->try_ms = MIN (op->try_ms * 2, VD_AGENT_TRY_MAX_MS);
  vd_agent_client_sync_async (op->client, MAX (try_ms, 1), g_task_get_cancellable (task),
                              vd_agent_wait_on_sync, g_object_ref (task));
}

static void
vd_agent_wait_on_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAgentOp *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) stream = vd_unix_connect_finish (res, &error);

  if (stream == NULL) {
    vd_agent_wait_failed (task, error);
    return;
  }
  op->client = vd_agent_client_new_for_stream (stream);
  vd_agent_wait_sync (task);
}

static void
vd_agent_wait_try (GTask *task)
{
  VdAgentOp *op = g_task_get_task_data (task);
  guint left = vd_agent_op_remaining_ms (op);

  if (op->client != NULL) {
    vd_agent_wait_sync (task);
    return;
  }
  vd_unix_connect_async (op->socket_path, MAX (MIN (left, VD_AGENT_CONNECT_TIMEOUT_MS), 1),
                         g_task_get_cancellable (task), vd_agent_wait_on_connected, g_object_ref (task));
}

void
vd_agent_client_wait_ready_async (const gchar *socket_path, guint timeout_ms, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = vd_agent_op_new (NULL, vd_agent_client_wait_ready_async, timeout_ms,
                                           cancellable, callback, user_data);
  VdAgentOp *op = g_task_get_task_data (task);

  op->socket_path = g_strdup (socket_path);
  op->try_ms = VD_AGENT_TRY_FIRST_MS;
  vd_agent_wait_try (task);
}

VdAgentClient *
vd_agent_client_wait_ready_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* object ---------------------------------------------------------------- */

static void
vd_agent_client_dispose (GObject *object)
{
  VdAgentClient *self = VD_AGENT_CLIENT (object);

  /* Requests hold a reference on us, so none is in flight any more. */
  self->closed = TRUE;
  if (self->stream != NULL)
    vd_json_stream_close (self->stream);
  G_OBJECT_CLASS (vd_agent_client_parent_class)->dispose (object);
}

static void
vd_agent_client_finalize (GObject *object)
{
  VdAgentClient *self = VD_AGENT_CLIENT (object);

  g_clear_object (&self->stream);
  G_OBJECT_CLASS (vd_agent_client_parent_class)->finalize (object);
}

static void
vd_agent_client_class_init (VdAgentClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vd_agent_client_dispose;
  object_class->finalize = vd_agent_client_finalize;

  signals[SIGNAL_CLOSED] = g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
vd_agent_client_init (VdAgentClient *self)
{
  g_queue_init (&self->queue);
  /* Whatever the guest wrote before we came is not ours to read. */
  self->need_resync = TRUE;
}

VdAgentClient *
vd_agent_client_new_for_stream (GIOStream *stream)
{
  VdAgentClient *self;

  g_return_val_if_fail (G_IS_IO_STREAM (stream), NULL);

  self = g_object_new (VD_TYPE_AGENT_CLIENT, NULL);
  self->stream = vd_json_stream_new (stream, VD_AGENT_CLIENT_DEFAULT_MAX_RESPONSE);
  vd_json_stream_start (self->stream, vd_agent_client_on_message,
                        vd_agent_client_on_stream_closed, self);
  return self;
}
