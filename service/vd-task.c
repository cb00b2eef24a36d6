/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdTask"

#include "config.h"

#include <string.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-egress-log.h"
#include "vd-task.h"

#include <json-glib/json-glib.h>

typedef struct {
  VdTask                *task;
  GDBusMethodInvocation *invocation;
  guint                  timeout_id;
} Wait;

struct _VdTask {
  GObject                parent_instance;
  gchar                 *id;
  gchar                 *path;
  VivariumDBusTask      *skeleton;
  VivariumOutcome        outcome;
  VdTaskStep             step;
  gboolean               finished;
  gboolean               worker_closed;   /* Ask/Finish no longer accepted */
  GDBusMethodInvocation *ask;             /* the worker's pending Ask */
  GPtrArray             *waits;           /* of Wait */
  gchar            *egress_log;      /* the work session's kept decision log, or NULL */
};

G_DEFINE_TYPE (VdTask, vd_task, G_TYPE_OBJECT)

/* By VdTaskStep; the names are Task.Step's, as the XML lists them. */
static const gchar * const step_names[] = { "queued", "work", "commit", "verify", "report", "done" };

const gchar *
vd_task_step_to_string (VdTaskStep step)
{
  g_return_val_if_fail ((guint) step < G_N_ELEMENTS (step_names), "work");
  return step_names[step];
}

enum { SIGNAL_FINISH_REQUESTED, SIGNAL_CANCEL_REQUESTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
wait_free (Wait *wait)
{
  if (wait->timeout_id != 0)
    g_source_remove (wait->timeout_id);
  g_clear_object (&wait->invocation);
  g_free (wait);
}

static void
vd_task_finalize (GObject *object)
{
  VdTask *self = VD_TASK (object);

  g_ptr_array_unref (self->waits);
  g_free (self->egress_log);
  if (self->ask != NULL)
    g_dbus_method_invocation_return_error (g_steal_pointer (&self->ask), VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                                           "The task was forgotten");
  g_clear_object (&self->skeleton);
  g_free (self->id);
  g_free (self->path);
  G_OBJECT_CLASS (vd_task_parent_class)->finalize (object);
}

static void
vd_task_class_init (VdTaskClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_task_finalize;
  signals[SIGNAL_FINISH_REQUESTED] = g_signal_new ("finish-requested", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                   0, NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  signals[SIGNAL_CANCEL_REQUESTED] = g_signal_new ("cancel-requested", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                   0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
vd_task_init (VdTask *self)
{
  self->skeleton = vivarium_dbus_task_skeleton_new ();
  self->waits = g_ptr_array_new_with_free_func ((GDestroyNotify) wait_free);
}

/* --- outcome and waits ---------------------------------------------------- */

static void
return_wait (Wait *wait, VivariumOutcome outcome)
{
  g_dbus_method_invocation_return_value (g_steal_pointer (&wait->invocation),
                                         g_variant_new ("(s)", vivarium_outcome_to_string (outcome)));
}

static void
release_waits (VdTask *self)
{
  g_autoptr(GPtrArray) waits = g_steal_pointer (&self->waits);

  self->waits = g_ptr_array_new_with_free_func ((GDestroyNotify) wait_free);
  for (guint i = 0; i < waits->len; i++)
    return_wait (g_ptr_array_index (waits, i), self->outcome);
}

static void
set_outcome (VdTask *self, VivariumOutcome outcome)
{
  const gchar *name = vivarium_outcome_to_string (outcome);

  if (self->outcome == outcome)
    return;
  self->outcome = outcome;
  vivarium_dbus_task_set_outcome (self->skeleton, name);
  vivarium_dbus_task_emit_outcome_changed (self->skeleton, name);
  /* NEEDS_INPUT and the end are what a waiter waits for. */
  if (outcome != VIVARIUM_OUTCOME_IN_PROGRESS)
    release_waits (self);
}

static gboolean
wait_timeout_cb (gpointer user_data)
{
  Wait *wait = user_data;
  VdTask *self = wait->task;

  wait->timeout_id = 0;
  return_wait (wait, self->outcome);
  g_ptr_array_remove (self->waits, wait);
  return G_SOURCE_REMOVE;
}

/* A caller is its unique bus name: one of them may hold only a few of the
 * task's wait slots, so no single caller fills them for everyone else. */
static guint
count_waits_of (VdTask *self, const gchar *sender)
{
  guint n = 0;

  for (guint i = 0; i < self->waits->len; i++) {
    Wait *wait = g_ptr_array_index (self->waits, i);
    if (g_strcmp0 (g_dbus_method_invocation_get_sender (wait->invocation), sender) == 0)
      n++;
  }
  return n;
}

static gboolean
handle_wait (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, guint timeout, VdTask *self)
{
  Wait *wait;

  if (timeout > VIVARIUM_TASK_WAIT_MAX_SEC) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "Wait takes 0 to %u seconds, not %u", VIVARIUM_TASK_WAIT_MAX_SEC, timeout);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (timeout == 0 || self->finished || self->outcome != VIVARIUM_OUTCOME_IN_PROGRESS) {
    vivarium_dbus_task_complete_wait (iface, invocation, vivarium_outcome_to_string (self->outcome));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (count_waits_of (self, g_dbus_method_invocation_get_sender (invocation)) >= VD_TASK_WAITS_PER_CALLER) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "You are already waiting for this task %u times at once; "
                                           "wait again when one of them returns", VD_TASK_WAITS_PER_CALLER);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (self->waits->len >= VD_TASK_WAITS_MAX) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "%u callers are already waiting for this task", VD_TASK_WAITS_MAX);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  wait = g_new0 (Wait, 1);
  wait->task = self;
  /* The handler owns the call's reference; the reply gives it back. */
  wait->invocation = invocation;
  wait->timeout_id = g_timeout_add_seconds (timeout, wait_timeout_cb, wait);
  g_ptr_array_add (self->waits, wait);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- Ask and Answer -------------------------------------------------------- */

static gboolean
refuse_closed (VdTask *self, GDBusMethodInvocation *invocation)
{
  if (!self->worker_closed && !self->finished)
    return FALSE;
  g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                         "The task %s is finishing or finished", self->id);
  return TRUE;
}

static gboolean
handle_ask (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, const gchar *question, VdTask *self)
{
  g_autofree gchar *shown = NULL;

  if (refuse_closed (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  if (self->ask != NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "The worker has a question pending already");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (strlen (question) > VIVARIUM_TASK_QUESTION_MAX || question[0] == '\0') {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "A question is 1 to %u bytes", VIVARIUM_TASK_QUESTION_MAX);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  /* The worker's words: escaped before anyone's screen shows them. */
  shown = vivarium_escape_untrusted (question, strlen (question), VIVARIUM_TASK_QUESTION_MAX, NULL);
  self->ask = invocation;   /* the call's own reference, as for a Wait */
  vivarium_dbus_task_set_question (iface, shown);
  set_outcome (self, VIVARIUM_OUTCOME_NEEDS_INPUT);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_answer (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, const gchar *text, VdTask *self)
{
  if (self->ask == NULL || self->outcome != VIVARIUM_OUTCOME_NEEDS_INPUT) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The task %s is not waiting for an answer", self->id);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (strlen (text) > VIVARIUM_TASK_ANSWER_MAX) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "An answer is at most %u bytes", VIVARIUM_TASK_ANSWER_MAX);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_dbus_method_invocation_return_value (g_steal_pointer (&self->ask), g_variant_new ("(s)", text));
  vivarium_dbus_task_set_question (iface, "");
  set_outcome (self, VIVARIUM_OUTCOME_IN_PROGRESS);
  vivarium_dbus_task_complete_answer (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- Finish and Cancel: the runner's business ------------------------------- */

static gboolean
handle_finish (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, const gchar *summary,
               const gchar *verify_command, VdTask *self)
{
  if (refuse_closed (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  if (strlen (summary) > VIVARIUM_TASK_SUMMARY_MAX || strlen (verify_command) > 4096) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                                           "The summary is at most %u bytes, the verification command 4096",
                                           VIVARIUM_TASK_SUMMARY_MAX);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_task_complete_finish (iface, invocation);
  g_signal_emit (self, signals[SIGNAL_FINISH_REQUESTED], 0, summary, verify_command);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* The work session's decisions, kept after it is gone; a task whose
 * session had no proxy has an empty log. */
static gboolean
handle_get_egress_log (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, guint64 offset, guint limit,
                       VdTask *self)
{
  g_autoptr(GBytes) none = g_bytes_new (NULL, 0);
  guint64 next = 0, total = 0;
  GError *error = NULL;
  GVariant *entries;

  /* One reader, one bound on @limit, with or without a log. */
  entries = self->egress_log != NULL ? vd_egress_log_read (self->egress_log, offset, limit, &next, &total, &error)
                                     : vd_egress_log_read_bytes (none, offset, limit, &next, &total, &error);
  if (entries == NULL)
    g_dbus_method_invocation_take_error (invocation, error);
  else
    vivarium_dbus_task_complete_get_egress_log (iface, invocation, entries, next, total);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_cancel (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, VdTask *self)
{
  /* The commit may be long (a big tree): a Cancel stops it too. */
  gboolean committing = self->step == VD_TASK_STEP_COMMIT && !self->finished;

  if (!committing && refuse_closed (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  vivarium_dbus_task_complete_cancel (iface, invocation);
  g_signal_emit (self, signals[SIGNAL_CANCEL_REQUESTED], 0);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- public ----------------------------------------------------------------- */

VdTask *
vd_task_new (const gchar *id, const gchar *project, const gchar *image, const gchar *worker)
{
  VdTask *self = g_object_new (VD_TYPE_TASK, NULL);
  VivariumDBusTask *s = self->skeleton;

  self->id = g_strdup (id);
  self->path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_TASKS, id);
  self->outcome = VIVARIUM_OUTCOME_IN_PROGRESS;
  vivarium_dbus_task_set_id (s, id);
  vivarium_dbus_task_set_project (s, project);
  vivarium_dbus_task_set_image (s, image);
  vivarium_dbus_task_set_worker (s, worker);
  vivarium_dbus_task_set_outcome (s, vivarium_outcome_to_string (self->outcome));
  vd_task_set_step (self, VD_TASK_STEP_WORK);
  vivarium_dbus_task_set_question (s, "");
  vivarium_dbus_task_set_reason (s, "");
  vivarium_dbus_task_set_session (s, "/");
  vivarium_dbus_task_set_report (s, "/");
  vivarium_dbus_task_set_submitted_at (s, (guint64) g_get_real_time ());
  vivarium_dbus_task_set_finished_at (s, 0);
  vivarium_dbus_task_set_timings (s, g_variant_new_array (G_VARIANT_TYPE ("{st}"), NULL, 0));
  g_signal_connect (s, "handle-wait", G_CALLBACK (handle_wait), self);
  g_signal_connect (s, "handle-ask", G_CALLBACK (handle_ask), self);
  g_signal_connect (s, "handle-answer", G_CALLBACK (handle_answer), self);
  g_signal_connect (s, "handle-finish", G_CALLBACK (handle_finish), self);
  g_signal_connect (s, "handle-cancel", G_CALLBACK (handle_cancel), self);
  g_signal_connect (s, "handle-get-egress-log", G_CALLBACK (handle_get_egress_log), self);
  return self;
}

const gchar *
vd_task_get_id (VdTask *self)
{
  return self->id;
}

const gchar *
vd_task_get_object_path (VdTask *self)
{
  return self->path;
}

GDBusInterfaceSkeleton *
vd_task_get_skeleton (VdTask *self)
{
  return G_DBUS_INTERFACE_SKELETON (self->skeleton);
}

VivariumOutcome
vd_task_get_outcome (VdTask *self)
{
  return self->outcome;
}

gboolean
vd_task_is_finished (VdTask *self)
{
  return self->finished;
}

gint64
vd_task_get_submitted_at (VdTask *self)
{
  return (gint64) vivarium_dbus_task_get_submitted_at (self->skeleton);
}

void
vd_task_set_step (VdTask *self, VdTaskStep step)
{
  self->step = step;
  vivarium_dbus_task_set_step (self->skeleton, vd_task_step_to_string (step));
}

VdTaskStep
vd_task_get_step (VdTask *self)
{
  return self->step;
}

void
vd_task_set_session (VdTask *self, const gchar *session_path)
{
  vivarium_dbus_task_set_session (self->skeleton, session_path != NULL ? session_path : "/");
}

void
vd_task_set_egress_log (VdTask *self, const gchar *path)
{
  g_free (self->egress_log);
  self->egress_log = g_strdup (path);
}

void
vd_task_set_timings (VdTask *self, GVariant *timings)
{
  vivarium_dbus_task_set_timings (self->skeleton, timings);
}

void
vd_task_set_report (VdTask *self, const gchar *report_path)
{
  vivarium_dbus_task_set_report (self->skeleton, report_path != NULL ? report_path : "/");
}

void
vd_task_close_worker (VdTask *self)
{
  self->worker_closed = TRUE;
  if (self->ask != NULL) {
    g_dbus_method_invocation_return_error (g_steal_pointer (&self->ask), VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                                           "The task ended before the question was answered");
    vivarium_dbus_task_set_question (self->skeleton, "");
    set_outcome (self, VIVARIUM_OUTCOME_IN_PROGRESS);
  }
}

void
vd_task_finish (VdTask *self, VivariumOutcome outcome, const gchar *reason)
{
  vd_task_close_worker (self);
  self->finished = TRUE;
  vivarium_dbus_task_set_reason (self->skeleton, reason != NULL ? reason : "");
  vivarium_dbus_task_set_finished_at (self->skeleton, (guint64) g_get_real_time ());
  vd_task_set_step (self, VD_TASK_STEP_DONE);
  vivarium_dbus_task_set_session (self->skeleton, "/");
  /* IN_PROGRESS at the hard limit is an end too: waiters learn it now. */
  if (self->outcome == outcome)
    release_waits (self);
  else
    set_outcome (self, outcome);
  if (outcome == VIVARIUM_OUTCOME_IN_PROGRESS)
    release_waits (self);
}

/* The daemon lost the bus: a waiter's or the worker's call that came over
 * another connection than @keep can never be answered (its caller got an
 * error from the bus already) and would only keep the closed connection
 * alive. The waiters are let go of; an unanswerable question is taken back,
 * so that the worker, whose Ask failed, may ask it again. */
void
vd_task_forget_connection (VdTask *self, GDBusConnection *keep)
{
  for (guint i = self->waits->len; i > 0; i--) {
    Wait *wait = g_ptr_array_index (self->waits, i - 1);
    if (g_dbus_method_invocation_get_connection (wait->invocation) != keep)
      g_ptr_array_remove_index (self->waits, i - 1);
  }
  if (self->ask != NULL && g_dbus_method_invocation_get_connection (self->ask) != keep) {
    g_clear_object (&self->ask);
    vivarium_dbus_task_set_question (self->skeleton, "");
    set_outcome (self, VIVARIUM_OUTCOME_IN_PROGRESS);
  }
}

/* --- the record of a finished task (it outlives the daemon) ----------------- */

static void
add_member (JsonBuilder *b, const gchar *name, const gchar *value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_string_value (b, value);
}

JsonNode *
vd_task_to_record (VdTask *self)
{
  VivariumDBusTask *s = self->skeleton;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  GVariantIter iter;
  const gchar *key;
  guint64 value;

  json_builder_begin_object (b);
  add_member (b, "id", self->id);
  add_member (b, "project", vivarium_dbus_task_get_project (s));
  add_member (b, "image", vivarium_dbus_task_get_image (s));
  add_member (b, "worker", vivarium_dbus_task_get_worker (s));
  add_member (b, "outcome", vivarium_outcome_to_string (self->outcome));
  add_member (b, "reason", vivarium_dbus_task_get_reason (s));
  add_member (b, "report", vivarium_dbus_task_get_report (s));
  if (self->egress_log != NULL)
    add_member (b, "egress-log", self->egress_log);
  json_builder_set_member_name (b, "submitted-at");
  json_builder_add_int_value (b, (gint64) vivarium_dbus_task_get_submitted_at (s));
  json_builder_set_member_name (b, "finished-at");
  json_builder_add_int_value (b, (gint64) vivarium_dbus_task_get_finished_at (s));
  json_builder_set_member_name (b, "timings");
  json_builder_begin_object (b);
  g_variant_iter_init (&iter, vivarium_dbus_task_get_timings (s));
  while (g_variant_iter_next (&iter, "{&st}", &key, &value)) {
    json_builder_set_member_name (b, key);
    json_builder_add_int_value (b, (gint64) MIN (value, (guint64) G_MAXINT64));
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gboolean
record_refuse (GError **error, const gchar *id, const gchar *what)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The record of task %s: %s", id, what);
  return FALSE;
}

static const gchar *
record_string (JsonObject *o, const gchar *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING ||
      strlen (json_node_get_string (n)) > VD_TASK_RECORD_STRING_MAX)
    return NULL;
  return json_node_get_string (n);
}

static GVariant *
record_timings (JsonObject *o)
{
  JsonNode *n = json_object_get_member (o, "timings");
  GVariantBuilder b;
  g_autoptr(GList) names = NULL;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{st}"));
  if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
    return g_variant_builder_end (&b);
  names = json_object_get_members (json_node_get_object (n));
  for (GList *l = names; l != NULL && g_list_position (names, l) < 16; l = l->next) {
    gint64 v = json_object_get_int_member_with_default (json_node_get_object (n), l->data, -1);
    if (v >= 0 && strlen (l->data) <= 32)
      g_variant_builder_add (&b, "{st}", (const gchar *) l->data, (guint64) v);
  }
  return g_variant_builder_end (&b);
}

/* A finished task as its record has it: refused when anything is off. */
VdTask *
vd_task_new_from_record (const gchar *id, JsonObject *o, GError **error)
{
  const gchar *project = record_string (o, "project"), *image = record_string (o, "image");
  const gchar *worker = record_string (o, "worker"), *outcome_s = record_string (o, "outcome");
  const gchar *reason = record_string (o, "reason"), *report = record_string (o, "report");
  const gchar *rid = record_string (o, "id");
  gint64 submitted = json_object_get_int_member_with_default (o, "submitted-at", -1);
  gint64 finished = json_object_get_int_member_with_default (o, "finished-at", -1);
  VivariumOutcome outcome;
  VdTask *self;

  if (rid == NULL || g_strcmp0 (rid, id) != 0)
    return record_refuse (error, id, "its id is not its file's name"), NULL;
  if (project == NULL || image == NULL || worker == NULL || reason == NULL || report == NULL ||
      outcome_s == NULL || !vivarium_outcome_from_string (outcome_s, &outcome) || submitted < 0 || finished < 0)
    return record_refuse (error, id, "a member is missing, of the wrong type or too long"), NULL;
  if (!g_variant_is_object_path (report))
    return record_refuse (error, id, "its report is not an object path"), NULL;
  self = vd_task_new (id, project, image, worker);
  vd_task_set_report (self, report);
  vd_task_set_timings (self, record_timings (o));
  {
    const gchar *egress_log = record_string (o, "egress-log");
    /* Root wrote it; still, only a plain absolute path is taken. */
    if (egress_log != NULL && g_path_is_absolute (egress_log) && strstr (egress_log, "/..") == NULL)
      vd_task_set_egress_log (self, egress_log);
  }
  vd_task_finish (self, outcome, reason[0] != '\0' ? reason : NULL);
  vivarium_dbus_task_set_submitted_at (self->skeleton, (guint64) submitted);
  vivarium_dbus_task_set_finished_at (self->skeleton, (guint64) finished);
  return self;
}
