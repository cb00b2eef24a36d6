/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdTaskRunner"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vd-fs.h"
#include "vd-egress-log.h"
#include "vd-egress-options.h"
#include "vd-ssh-key-store.h"
#include "vd-gateway-client.h"
#include "vd-log.h"
#include "vd-progress.h"
#include "vd-record.h"
#include "vd-task-runner.h"
#include "vivarium-ssh-key.h"
#include "vd-transcript.h"
#include "vd-worker.h"
#include "vd-worker-slots.h"

/* The file reads in the order a task runs: start (SubmitTask), the work
 * session, the worker, the commit, the verification session, the
 * verification, the report, its signature, the teardown; then what a
 * restarted daemon finds. */

/* --- the declaration: a task's steps, in the order it runs ---------------- */

typedef enum {
  STEP_QUEUED,          /* it waits for a session ([Sessions] MaxSessions in use) */
  STEP_WORK_SESSION,    /* the work session boots with the project shared */
  STEP_WORKER,          /* the worker acts, only through its task */
  STEP_COMMIT,          /* the work session stops; the daemon commits the tree */
  STEP_VERIFY_SESSION,  /* a fresh session boots with the committed tree */
  STEP_VERIFY,          /* the verification command runs in it */
  STEP_REPORT,          /* the daemon assembles the report */
  STEP_SIGN,            /* and signs and stores it */
  STEP_TEARDOWN,        /* everything the task held goes back */
  N_STEPS
} RunStep;

/* Each step enters by its id, forward only (a VdProgress holds the order).
 * Task.Step is the step's name in the Task's words; Timings times the
 * phase that ends with a step that names one, from the end of the one
 * before. The weights are a task's usual shares of its time. */
static const struct {
  VdTaskStep   shown;
  guint        weight;
  const gchar *timing;
} run_steps[] = {
  [STEP_QUEUED]         = { VD_TASK_STEP_QUEUED,  1, "queued" },
  [STEP_WORK_SESSION]   = { VD_TASK_STEP_WORK,   10, "work-session-start" },
  [STEP_WORKER]         = { VD_TASK_STEP_WORK,   60, "worker" },
  [STEP_COMMIT]         = { VD_TASK_STEP_COMMIT,  5, "commit" },
  [STEP_VERIFY_SESSION] = { VD_TASK_STEP_VERIFY, 10, NULL },
  [STEP_VERIFY]         = { VD_TASK_STEP_VERIFY, 10, "verification" },
  [STEP_REPORT]         = { VD_TASK_STEP_REPORT,  1, NULL },
  [STEP_SIGN]           = { VD_TASK_STEP_REPORT,  1, "report" },
  [STEP_TEARDOWN]       = { VD_TASK_STEP_REPORT,  3, NULL },
};
G_STATIC_ASSERT (G_N_ELEMENTS (run_steps) == N_STEPS);

#define I(x) VIVARIUM_DBUS_IFACE_PREFIX "." x

/* The worker's verbs, by their option names, and the calls each admits. */
static const struct {
  const gchar *tool;
  const gchar *interface_name;
  const gchar *method;
} tool_calls[] = {
  { "exec",       I ("Session"), "Exec" },
  { "read-file",  I ("Session"), "ReadFile" },
  { "write-file", I ("Session"), "WriteFile" },
  { "screenshot", I ("Session"), "Screenshot" },
  { "ask",        I ("Task"),    "Ask" },
};

struct _VdTaskRunner {
  GObject         parent_instance;
  VdConfig       *config;
  VdSystemd      *systemd;
  VdSessionPool  *pool;
  VdGuard        *guard;
  VdProjectStore *projects;
  VdReportStore  *reports;
  VdWorkerGrants *grants;
  VdSecretStore  *secrets;
  VdIdle         *idle;
  VdExportFunc    export_func;
  gpointer        export_data;
  GHashTable     *tasks;   /* id → VdTask */
  GHashTable     *runs;    /* id → Run, while it runs */
  GQueue          queue;   /* of Run: waiting for a session, oldest first */
  guint           drain_id;
  VdWorkerSlots  *slots;   /* the worker uids */
};

G_DEFINE_TYPE (VdTaskRunner, vd_task_runner, G_TYPE_OBJECT)

enum { SIGNAL_TASK_ADDED, SIGNAL_TASK_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* One running task: what was asked, what was started, what the end found. */
typedef struct {
  VdTaskRunner       *runner;
  VdTask             *task;
  VdProgress         *progress;       /* the declared steps; the current one */
  gchar              *project;
  VdImage            *image;
  gchar              *instructions;
  GBytes             *script;
  gchar              *caller_verify;
  guint               timeout_sec;
  VdSessionOptions    session_options;
  VdEgressOptions     egress;         /* session_options points into it */
  GStrv               tools;
  gchar              *base_commit;
  gint64              started_at;
  /* Monotonic times: the submission, and when each step's phase ended
   * (0: not reached), for the timings. */
  gint64              mono_submitted;
  gint64              ended[N_STEPS];
  gboolean            has_dataset;
  guint64             dataset_used;
  guint64             dataset_quota;
  guint               inhibit;
  VdSession          *session;
  gchar              *session_id;
  guint32             session_uid;
  VdWorker           *worker;
  gboolean            agent;          /* worker "agent": vivarium-agent */
  VdTranscript       *transcript;
  guint32             worker_uid;     /* its slot's; 0 until it has one */
  guint               timeout_id;
  gboolean            winding_down;
  gboolean            session_starting;  /* the work session's start is under way */
  VivariumOutcome     end_outcome;
  gchar              *end_reason;
  gchar              *summary;
  gchar              *worker_verify;
  GPtrArray          *log;          /* of GVariant a{sv}: the work session's commands */
  guint64             log_dropped;  /* its oldest, dropped from the session's memory */
  guint64             drop_packets;
  guint64             drop_bytes;
  gchar              *commit_id;
  GPtrArray          *changes;      /* of VdChange */
  GCancellable       *commit_cancel; /* while the commit runs: Cancel stops it */
  VdSession          *verify_session;
  gchar              *verify_command;
  VivariumVerifyWhose verify_whose;
  gint                verify_exit;
  VivariumVerdict     verdict;
  gchar              *verify_reason;  /* why inconclusive, for the report */
  gchar              *verify_session_id;
} Run;

/* The run, step by step; each step's callbacks follow it below. */
static gboolean admit_or_queue     (Run *run, GError **error);
static void     pool_session_ended_cb (VdSessionPool *pool, VdSession *session, gpointer user_data);
static gboolean start_work_session (Run *run, VdProject *project, GError **error);
static void     start_worker       (Run *run);
static void     wind_down          (Run *run, VivariumOutcome outcome, const gchar *reason);
static void     stop_work          (Run *run);
static void     commit_work        (Run *run);
static void     start_verification (Run *run);
static void     run_verification   (Run *run);
static void     end_run            (Run *run);

static gboolean parse_options      (VdTaskRunner *self, Run *run, GVariant *options, GError **error);
static gboolean write_record       (VdTaskRunner *self, Run *run, GError **error);
static void     remove_record      (VdTaskRunner *self, const gchar *id);
static void     write_done_record  (VdTaskRunner *self, VdTask *task);
static void     prune_tasks        (VdTaskRunner *self);

static void
run_free (Run *run)
{
  /* The task outlives the run on the bus, and a stopped worker's unit
   * still reports its end: neither may reach a freed run. */
  if (run->task != NULL)
    g_signal_handlers_disconnect_by_data (run->task, run);
  if (run->worker != NULL)
    g_signal_handlers_disconnect_by_data (run->worker, run);
  if (run->session != NULL)
    g_signal_handlers_disconnect_by_data (run->session, run);
  g_clear_object (&run->task);
  g_clear_object (&run->progress);
  vd_egress_options_clear (&run->egress);
  g_free (run->project);
  g_clear_object (&run->image);
  g_free (run->instructions);
  g_clear_pointer (&run->script, g_bytes_unref);
  g_free (run->caller_verify);
  g_strfreev (run->tools);
  g_free (run->base_commit);
  g_clear_object (&run->session);
  g_free (run->session_id);
  g_clear_object (&run->worker);
  g_clear_object (&run->transcript);
  g_free (run->end_reason);
  g_free (run->summary);
  g_free (run->worker_verify);
  g_clear_pointer (&run->log, g_ptr_array_unref);
  g_free (run->commit_id);
  g_clear_pointer (&run->changes, g_ptr_array_unref);
  g_clear_object (&run->commit_cancel);
  g_clear_object (&run->verify_session);
  g_free (run->verify_command);
  g_free (run->verify_session_id);
  g_free (run->verify_reason);
  g_free (run);
}

static void
vd_task_runner_finalize (GObject *object)
{
  VdTaskRunner *self = VD_TASK_RUNNER (object);

  g_clear_handle_id (&self->drain_id, g_source_remove);
  g_queue_clear (&self->queue);   /* its runs are the table's */
  g_hash_table_unref (self->runs);
  g_hash_table_unref (self->tasks);
  g_clear_object (&self->slots);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_object (&self->pool);
  g_clear_object (&self->guard);
  g_clear_object (&self->projects);
  g_clear_object (&self->reports);
  g_clear_object (&self->grants);
  g_clear_object (&self->secrets);
  g_clear_object (&self->idle);
  G_OBJECT_CLASS (vd_task_runner_parent_class)->finalize (object);
}

static void
vd_task_runner_class_init (VdTaskRunnerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_task_runner_finalize;
  signals[SIGNAL_TASK_ADDED] = g_signal_new ("task-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                             NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_TASK_REMOVED] = g_signal_new ("task-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                               NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_task_runner_init (VdTaskRunner *self)
{
  self->tasks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->runs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) run_free);
}

void
vd_task_runner_set_secret_store (VdTaskRunner *self, VdSecretStore *store)
{
  g_set_object (&self->secrets, store);
}

VdTaskRunner *
vd_task_runner_new (VdConfig *config, VdSystemd *systemd, VdSessionPool *pool, VdGuard *guard,
                    VdProjectStore *projects, VdReportStore *reports, VdWorkerGrants *grants, VdIdle *idle,
                    VdExportFunc export_func, gpointer export_data)
{
  VdTaskRunner *self = g_object_new (VD_TYPE_TASK_RUNNER, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->pool = g_object_ref (pool);
  self->guard = g_object_ref (guard);
  self->projects = g_object_ref (projects);
  self->reports = g_object_ref (reports);
  self->grants = g_object_ref (grants);
  self->slots = vd_worker_slots_new (systemd, "/proc", VIVARIUM_WORKER_UID_BASE, VIVARIUM_SESSION_UID_COUNT);
  self->idle = g_object_ref (idle);
  self->export_func = export_func;
  self->export_data = export_data;
  g_signal_connect_object (pool, "session-ended", G_CALLBACK (pool_session_ended_cb), self, 0);
  return self;
}

/* --- steps: entering one, timing them -------------------------------------- */

static VdProgress *
declare_steps (void)
{
  VdProgress *progress = vd_progress_new ();

  for (guint i = 0; i < N_STEPS; i++)
    vd_progress_add_step_id (progress, i, vd_task_step_to_string (run_steps[i].shown), run_steps[i].weight);
  return progress;
}

/* Task.Step follows: the only place it is set while the task runs. */
static void
enter (Run *run, RunStep step)
{
  guint now;

  if (!vd_progress_step_to (run->progress, step))
    g_warning ("task %s: step %u entered after step %u, against the declared order", vd_task_get_id (run->task),
               step, vd_progress_get_step_id (run->progress));
  now = vd_progress_get_step_id (run->progress);
  if (now < N_STEPS)
    vd_task_set_step (run->task, run_steps[now].shown);
}

static void
mark_end (Run *run, RunStep step)
{
  run->ended[step] = g_get_monotonic_time ();
}

/* A phase that never began or never ended took no time. */
static gint64
phase (gint64 from, gint64 to)
{
  return from > 0 && to >= from ? to - from : 0;
}

/* The timed phase that ends with @step, from the end of the timed one
 * before it (the first from the submission). */
static gint64
phase_of (Run *run, RunStep step)
{
  gint64 from = run->mono_submitted;

  for (guint i = 0; i < step; i++) {
    if (run_steps[i].timing != NULL)
      from = run->ended[i];
  }
  return phase (from, run->ended[step]);
}

static void
publish_timings (Run *run)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{st}"));
  for (guint i = 0; i < N_STEPS; i++) {
    if (run_steps[i].timing != NULL)
      g_variant_builder_add (&b, "{st}", run_steps[i].timing, (guint64) phase_of (run, i));
  }
  g_variant_builder_add (&b, "{st}", "total", (guint64) phase (run->mono_submitted, run->ended[STEP_SIGN]));
  vd_task_set_timings (run->task, g_variant_builder_end (&b));
}

/* --- the queue: a session slot for each running task ------------------------ */

/* A running task holds its slot of [Sessions] MaxSessions from the start
 * of its work session to its teardown, also between its two sessions (the
 * work session stopped, the verification one not yet started), so that a
 * task once admitted always gets its verification session. */
static guint
count_between_sessions (VdTaskRunner *self)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->runs);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Run *run = value;
    gboolean holds_one = (run->session != NULL && vd_session_is_active (run->session)) ||
                         (run->verify_session != NULL && vd_session_is_active (run->verify_session));

    if (vd_progress_get_step_id (run->progress) != STEP_QUEUED && !holds_one)
      n++;
  }
  return n;
}

guint
vd_task_runner_count_slots_in_use (VdTaskRunner *self)
{
  return vd_session_pool_count_active (self->pool) + count_between_sessions (self);
}

guint
vd_task_runner_count_queued (VdTaskRunner *self)
{
  return self->queue.length;
}

static gboolean
has_free_slot (VdTaskRunner *self)
{
  return vd_task_runner_count_slots_in_use (self) < vd_config_get_max_sessions (self->config);
}

/* Before anything is published: a task that would wait where the queue is
 * full is refused, and says why. */
static gboolean
check_room (VdTaskRunner *self, GError **error)
{
  guint max = vd_config_get_max_queued_tasks (self->config);

  if (has_free_slot (self) || self->queue.length < max)
    return TRUE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
               "%u sessions are in use, the configured maximum, and %u tasks are already waiting for one "
               "([Tasks] MaxQueuedTasks)", vd_config_get_max_sessions (self->config), self->queue.length);
  return FALSE;
}

static gboolean
begin_work (Run *run, GError **error)
{
  VdProject *project = vd_project_store_lookup (run->runner->projects, run->project, error);

  enter (run, STEP_WORK_SESSION);
  return project != NULL && start_work_session (run, project, error);
}

/* Now if a slot is free and nobody waits before it; else at the end of
 * the queue, Task.Step "queued", until a session ends. */
static gboolean
admit_or_queue (Run *run, GError **error)
{
  VdTaskRunner *self = run->runner;

  /* Not queued: its wait ends where it began, and the work session's
   * start is timed from the submission. */
  if (self->queue.length == 0 && has_free_slot (self)) {
    run->ended[STEP_QUEUED] = run->mono_submitted;
    return begin_work (run, error);
  }
  enter (run, STEP_QUEUED);
  g_queue_push_tail (&self->queue, run);
  vd_log_task (G_LOG_LEVEL_INFO, vd_task_get_id (run->task), "task %s waits for a session (%u waiting)",
               vd_task_get_id (run->task), self->queue.length);
  return TRUE;
}

/* A cancelled task leaves the queue: it ends as one whose work session
 * never started. */
static gboolean
leave_queue (Run *run)
{
  return g_queue_remove (&run->runner->queue, run);
}

static gboolean
drain_cb (gpointer user_data)
{
  VdTaskRunner *self = user_data;

  self->drain_id = 0;
  while (self->queue.length > 0 && has_free_slot (self)) {
    Run *run = g_queue_pop_head (&self->queue);
    g_autoptr(GError) error = NULL;

    mark_end (run, STEP_QUEUED);
    if (!begin_work (run, &error)) {
      g_autofree gchar *reason = g_strdup_printf ("the work session did not start: %s", error->message);
      wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
    }
  }
  return G_SOURCE_REMOVE;
}

/* A slot may be free: a session ended, or a task let go of its slot. From
 * the main loop, never inside the emission that freed it. */
static void
schedule_drain (VdTaskRunner *self)
{
  if (self->drain_id == 0 && self->queue.length > 0)
    self->drain_id = g_idle_add (drain_cb, self);
}

static void
pool_session_ended_cb (VdSessionPool *pool, VdSession *session, gpointer user_data)
{
  schedule_drain (VD_TASK_RUNNER (user_data));
}

/* --- start: SubmitTask ------------------------------------------------------ */

static gchar *
new_task_id (VdTaskRunner *self)
{
  gchar *id = NULL;

  do {
    g_autofree gchar *uuid = g_uuid_string_random ();
    g_free (id);
    id = g_strndup (uuid, 8);
  } while (g_hash_table_contains (self->tasks, id));
  return id;
}

static gboolean
check_instructions (const gchar *instructions, GError **error)
{
  if (strlen (instructions) > VIVARIUM_TASK_INSTRUCTIONS_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The instructions are %zu bytes; at most %u are accepted", strlen (instructions),
                 VIVARIUM_TASK_INSTRUCTIONS_MAX);
    return FALSE;
  }
  return TRUE;
}

static Run *
run_new (VdTaskRunner *self, const gchar *project_name, VdImage *image, const gchar *instructions)
{
  Run *run = g_new0 (Run, 1);

  run->runner = self;
  run->progress = declare_steps ();
  run->image = g_object_ref (image);
  run->project = g_strdup (project_name);
  run->instructions = g_strdup (instructions);
  run->started_at = g_get_real_time ();
  run->mono_submitted = g_get_monotonic_time ();
  return run;
}

/* On the bus and on disk before anything starts: a daemon killed from
 * here on reports the task FAILED at its next start. */
static gboolean
publish_task (VdTaskRunner *self, Run *run, const gchar *id, GError **error)
{
  run->task = vd_task_new (id, run->project, vd_image_get_name (run->image), run->agent ? "agent" : "script");
  run->transcript = vd_transcript_new (vd_task_get_skeleton (run->task));
  return self->export_func (vd_task_get_skeleton (run->task), vd_task_get_object_path (run->task),
                            self->export_data, error) &&
         write_record (self, run, error);
}

static void finish_requested_cb (VdTask *task, const gchar *summary, const gchar *verify, gpointer user_data);
static void cancel_requested_cb (VdTask *task, gpointer user_data);

VdTask *
vd_task_runner_submit (VdTaskRunner *self, const gchar *project_name, VdImage *image, const gchar *instructions,
                       GVariant *options, GError **error)
{
  g_autofree gchar *id = new_task_id (self);
  g_autofree gchar *holder = g_strdup_printf ("task %s", id);
  Run *run = run_new (self, project_name, image, instructions);
  g_autoptr(GError) start_error = NULL;
  VdProject *project;

  if (!check_instructions (instructions, error) || !parse_options (self, run, options, error) ||
      !check_room (self, error) ||
      (project = vd_project_store_lookup (self->projects, project_name, error)) == NULL ||
      !vd_project_store_acquire (self->projects, project_name, holder, error)) {
    run_free (run);
    return NULL;
  }
  run->base_commit = vd_project_get_head (project, NULL);
  if (!publish_task (self, run, id, error)) {
    vd_project_store_release (self->projects, project_name);
    run_free (run);
    return NULL;
  }
  g_hash_table_insert (self->tasks, g_strdup (id), g_object_ref (run->task));
  g_hash_table_insert (self->runs, g_strdup (id), run);
  run->inhibit = vd_idle_inhibit (self->idle, holder);
  g_signal_connect (run->task, "finish-requested", G_CALLBACK (finish_requested_cb), run);
  g_signal_connect (run->task, "cancel-requested", G_CALLBACK (cancel_requested_cb), run);
  vd_log_task (G_LOG_LEVEL_INFO, id, "task %s submitted (project %s, image %s)", id, project_name,
               vd_image_get_name (image));
  g_signal_emit (self, signals[SIGNAL_TASK_ADDED], 0, vd_task_get_object_path (run->task));
  if (!admit_or_queue (run, &start_error)) {
    g_autofree gchar *reason = g_strdup_printf ("the work session did not start: %s", start_error->message);
    wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
  }
  return g_hash_table_lookup (self->tasks, id);
}

/* start: the options ---------------------------------------------------------- */

static gboolean
opt_fail (GError **error, const gchar *key, const gchar *why)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The task option “%s” %s", key, why);
  return FALSE;
}

static gboolean
opt_uint (GVariant *v, const gchar *key, guint min, guint max, guint *out, GError **error)
{
  g_autofree gchar *why = NULL;

  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32))
    return opt_fail (error, key, "must be an unsigned 32-bit number (type u)");
  *out = g_variant_get_uint32 (v);
  if (*out < min || *out > max) {
    why = g_strdup_printf ("is %u; it must be between %u and %u", *out, min, max);
    return opt_fail (error, key, why);
  }
  return TRUE;
}

static gboolean
opt_tools (Run *run, GVariant *v, GError **error)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_autofree const gchar **tools = NULL;

  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_STRING_ARRAY))
    return opt_fail (error, "tools", "must be a list of strings (type as)");
  tools = g_variant_get_strv (v, NULL);
  for (guint i = 0; tools[i] != NULL; i++) {
    gboolean known = FALSE;
    for (gsize j = 0; j < G_N_ELEMENTS (tool_calls); j++)
      known = known || g_str_equal (tools[i], tool_calls[j].tool);
    if (!known)
      return opt_fail (error, "tools", "names an unknown tool (known: exec, read-file, write-file, screenshot, ask)");
    g_strv_builder_add (b, tools[i]);
  }
  g_strfreev (run->tools);
  run->tools = g_strv_builder_end (b);
  return TRUE;
}

static gboolean
opt_string (GVariant *v, const gchar *key, gsize max, gchar **out, GError **error)
{
  gsize len;
  const gchar *s;

  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_STRING))
    return opt_fail (error, key, "must be a string");
  s = g_variant_get_string (v, &len);
  if (len == 0 || len > max)
    return opt_fail (error, key, "is empty or too long");
  g_free (*out);
  *out = g_strdup (s);
  return TRUE;
}

static gboolean
opt_script (Run *run, const gchar *key, GVariant *v, GError **error)
{
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_BYTESTRING))
    return opt_fail (error, key, "must be bytes (type ay)");
  if (g_variant_get_size (v) == 0 || g_variant_get_size (v) > VIVARIUM_TASK_SCRIPT_MAX)
    return opt_fail (error, key, "is empty or larger than 1 MiB");
  g_clear_pointer (&run->script, g_bytes_unref);
  run->script = g_variant_get_data_as_bytes (v);
  return TRUE;
}

static gboolean
opt_one (VdTaskRunner *self, Run *run, const gchar *key, GVariant *v, gchar **worker, GError **error)
{
  if (g_str_equal (key, "worker"))
    return opt_string (v, key, 32, worker, error);
  if (g_str_equal (key, "script"))
    return opt_script (run, key, v, error);
  if (g_str_equal (key, "verify"))
    return opt_string (v, key, VIVARIUM_REPORT_VERIFY_CMD_MAX, &run->caller_verify, error);
  if (g_str_equal (key, "timeout"))
    return opt_uint (v, key, 1, VIVARIUM_TIMEOUT_MAX_SEC, &run->timeout_sec, error);
  if (g_str_equal (key, "memory"))
    return opt_uint (v, key, VIVARIUM_MEMORY_MIN_MIB, VIVARIUM_MEMORY_MAX_MIB, &run->session_options.memory_mib, error);
  if (g_str_equal (key, "cpus"))
    return opt_uint (v, key, 1, VIVARIUM_CPUS_MAX, &run->session_options.cpus, error);
  if (g_str_equal (key, "tools"))
    return opt_tools (run, v, error);
  /* Checked together, after the loop. */
  if (g_str_equal (key, "egress") || g_str_equal (key, "egress_groups") || g_str_equal (key, "egress_allow") ||
      g_str_equal (key, "secrets") || g_str_equal (key, "ssh_keys"))
    return TRUE;
  return opt_fail (error, key, "is unknown (known: worker, script, verify, timeout, memory, cpus, tools, egress, "
                   "egress_groups, egress_allow, secrets, ssh_keys)");
}

/* The work session and the verification re-run get the same egress. */
static gboolean
parse_egress (VdTaskRunner *self, Run *run, GVariant *options, GError **error)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  VdProject *project = vd_project_store_lookup (self->projects, run->project, NULL);

  if (!vd_egress_options_parse (self->config, project, dict, VD_EGRESS_FOR_TASK, &run->egress, error) ||
      !vd_egress_options_parse_secrets (self->config, self->secrets, project, dict, &run->egress, error) ||
      !vd_egress_options_parse_ssh_keys (self->config, project, dict, &run->egress, error))
    return FALSE;
  run->session_options.egress_mode = run->egress.mode;
  run->session_options.egress_groups = (const gchar * const *) run->egress.groups;
  run->session_options.egress_allow = (const gchar * const *) run->egress.allow;
  run->session_options.secrets = run->egress.secrets;
  run->session_options.ssh_keys = run->egress.ssh_keys;
  return TRUE;
}

static gboolean
check_worker (Run *run, const gchar *worker, GError **error)
{
  if (g_str_equal (worker, "agent")) {
    run->agent = TRUE;
    if (run->script != NULL)
      return opt_fail (error, "script", "is for a script worker; an agent worker runs vivarium-agent");
    return TRUE;
  }
  if (!g_str_equal (worker, "script"))
    return opt_fail (error, "worker", "must be “script” or “agent”");
  if (run->script == NULL)
    return opt_fail (error, "script", "is required for a script worker");
  return TRUE;
}

static gboolean
parse_options (VdTaskRunner *self, Run *run, GVariant *options, GError **error)
{
  g_autofree gchar *worker = g_strdup ("script");
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  run->timeout_sec = VD_TASK_DEFAULT_TIMEOUT;
  run->session_options.memory_mib = vd_config_get_default_memory_mib (self->config);
  run->session_options.cpus = vd_config_get_default_cpus (self->config);
  run->session_options.guard_layer1 = TRUE;
  run->session_options.guard_layer2 = TRUE;
  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_autoptr(GVariant) v = value;
    if (!opt_one (self, run, key, v, &worker, error))
      return FALSE;
  }
  return parse_egress (self, run, options, error) && check_worker (run, worker, error);
}

/* start: the record a killed daemon leaves ------------------------------------ */

static gchar *
tasks_dir (VdTaskRunner *self, gboolean done)
{
  return vd_config_build_state_path (self->config, "tasks", done ? "done" : NULL, NULL);
}

static gboolean
write_record (VdTaskRunner *self, Run *run, GError **error)
{
  g_autofree gchar *dir = tasks_dir (self, FALSE);
  g_autofree gchar *name = g_strconcat (vd_task_get_id (run->task), ".json", NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, vd_task_get_id (run->task));
  json_builder_set_member_name (b, "project");
  json_builder_add_string_value (b, run->project);
  json_builder_set_member_name (b, "image");
  json_builder_add_string_value (b, vd_image_get_name (run->image));
  json_builder_set_member_name (b, "image-digest");
  json_builder_add_string_value (b, vd_image_get_digest (run->image));
  json_builder_set_member_name (b, "submitted-at");
  json_builder_add_int_value (b, run->started_at);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return vd_record_write (dir, name, root, error);
}

/* --- the work session ------------------------------------------------------- */

static void work_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void work_started_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void work_session_ended_cb (VdSession *session, gpointer user_data);
static void work_egress_died_cb (VdSession *session, const gchar *how, gpointer user_data);

static gboolean
start_work_session (Run *run, VdProject *project, GError **error)
{
  VdTaskRunner *self = run->runner;

  run->session = vd_session_pool_create (self->pool, run->image, &run->session_options, 0, run->project,
                                         vd_project_get_work_path (project), error);
  if (run->session == NULL)
    return FALSE;
  run->session_id = g_strdup (vd_session_get_id (run->session));
  run->session_uid = vd_session_get_uid (run->session);
  g_signal_connect (run->session, "ended", G_CALLBACK (work_session_ended_cb), run);
  g_signal_connect (run->session, "egress-died", G_CALLBACK (work_egress_died_cb), run);
  /* From here the start is under way: a Cancel waits for its end. */
  run->session_starting = TRUE;
  vd_project_grant_async (project, run->session_uid, work_granted_cb, run);
  return TRUE;
}

static void
work_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error)) {
    g_autofree gchar *reason = g_strdup_printf ("the work session did not start: %s", error->message);
    /* Never started: nothing of it to stop but its files; the commit
     * path gives the tree back to root. */
    g_signal_handlers_disconnect_by_data (run->session, run);
    vd_session_stop_async (run->session, NULL, NULL);
    g_clear_object (&run->session);
    run->session_starting = FALSE;
    if (run->winding_down)
      stop_work (run);
    else
      wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
    return;
  }
  if (run->winding_down) {
    run->session_starting = FALSE;
    stop_work (run);
    return;
  }
  vd_task_set_session (run->task, vd_session_get_object_path (run->session));
  vd_session_start_async (run->session, NULL, work_started_cb, run);
}

static void
work_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;
  gboolean started = vd_session_pool_start_finish (run->runner->pool, VD_SESSION (source), res, &error);

  run->session_starting = FALSE;
  if (started && run->ended[STEP_WORK_SESSION] == 0)
    mark_end (run, STEP_WORK_SESSION);
  if (run->winding_down) {
    stop_work (run);
    return;
  }
  if (!started) {
    g_autofree gchar *reason = g_strdup_printf ("the work session did not start: %s", error->message);
    wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
    return;
  }
  start_worker (run);
}

/* The work session's machine went away under the worker (killed, crashed,
 * powered off): the worker can do nothing more, and the task says so now,
 * in the machine's words, instead of when the worker's next call fails
 * (and the worker is blamed for it). */
static gchar *
machine_death_reason (VdSession *session)
{
  g_autofree gchar *how = vd_session_describe_death (session);

  return g_strdup_printf ("the work session's machine died (%s)", how);
}

static void
work_session_ended_cb (VdSession *session, gpointer user_data)
{
  Run *run = user_data;
  g_autofree gchar *reason = NULL;

  g_signal_handlers_disconnect_by_func (session, work_session_ended_cb, run);
  if (run->winding_down || run->session_starting)
    return;
  if (vd_session_died (session))
    reason = machine_death_reason (session);
  else
    reason = g_strdup_printf ("the work session ended before the worker: %s", vd_session_get_state_reason (session));
  vd_log_task (G_LOG_LEVEL_INFO, vd_task_get_id (run->task), "task %s: %s", vd_task_get_id (run->task), reason);
  wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
}

/* The allowlist session's proxy died: the guest has no way out, and nothing
 * falls back to another. The worker would go on against a machine cut off
 * and its task end DONE as if nothing happened: the task ends now, saying
 * so, with what was done so far committed. */
static void
work_egress_died_cb (VdSession *session, const gchar *how, gpointer user_data)
{
  Run *run = user_data;
  g_autofree gchar *reason = NULL;

  g_signal_handlers_disconnect_by_func (session, work_egress_died_cb, run);
  /* During the boot too: a session still booting is stopped once its start returns. */
  if (run->winding_down)
    return;
  reason = g_strdup_printf ("the work session's way out is gone: %s", how);
  vd_log_task (G_LOG_LEVEL_INFO, vd_task_get_id (run->task), "task %s: %s", vd_task_get_id (run->task), reason);
  wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
}

/* --- the worker ------------------------------------------------------------- */

static void worker_exited_cb (VdWorker *worker, gboolean success, gpointer user_data);
static gboolean hard_limit_cb (gpointer user_data);

static gboolean
tool_allowed (Run *run, const gchar *tool)
{
  return run->tools == NULL || g_strv_contains ((const gchar * const *) run->tools, tool);
}

/* Before the unit starts: the worker's first call already finds them. */
static void
grant_worker (Run *run, guint32 uid)
{
  VdWorkerGrants *grants = run->runner->grants;

  vd_worker_grants_add_worker (grants, uid, vd_worker_get_unit (run->worker));
  for (gsize i = 0; i < G_N_ELEMENTS (tool_calls); i++) {
    const gchar *path = g_str_equal (tool_calls[i].interface_name, I ("Task"))
                        ? vd_task_get_object_path (run->task) : vd_session_get_object_path (run->session);
    if (tool_allowed (run, tool_calls[i].tool))
      vd_worker_grants_allow (grants, uid, tool_calls[i].interface_name, tool_calls[i].method, path);
  }
  vd_worker_grants_allow (grants, uid, I ("Task"), "Finish", vd_task_get_object_path (run->task));
  if (run->agent)
    vd_worker_grants_allow (grants, uid, I ("Task"), "Record", vd_task_get_object_path (run->task));
}

static gboolean
open_model_socket (Run *run, guint32 uid, GError **error)
{
  VdConfig *config = run->runner->config;
  g_autofree gchar *program = g_build_filename (vd_config_get_libexec_dir (config), "vivarium-agent", NULL);
  g_autofree gchar *socket = vd_gateway_task_open (vd_config_get_runtime_dir (config), vd_task_get_id (run->task),
                                                   uid, error);

  if (socket == NULL)
    return FALSE;
  vd_worker_set_agent (run->worker, program, socket);
  return TRUE;
}

/* A worker in its slot's uid, its grants in place, the hard limit set;
 * a failure on the way says which part failed. */
static gboolean
launch_worker (Run *run, guint32 uid, GError **error)
{
  VdTaskRunner *self = run->runner;
  g_autoptr(GError) local = NULL;

  run->worker = vd_worker_new (self->systemd, self->config, vd_task_get_id (run->task), uid);
  if (run->agent && !open_model_socket (run, uid, &local)) {
    g_set_error (error, local->domain, local->code, "the agent's model socket could not be made: %s", local->message);
    return FALSE;
  }
  grant_worker (run, uid);
  g_signal_connect (run->worker, "exited", G_CALLBACK (worker_exited_cb), run);
  if (!vd_worker_start (run->worker, run->script, run->instructions, vd_task_get_object_path (run->task),
                        vd_session_get_object_path (run->session), 512, &local)) {
    g_set_error (error, local->domain, local->code, "the worker did not start: %s", local->message);
    return FALSE;
  }
  run->timeout_id = g_timeout_add_seconds (run->timeout_sec, hard_limit_cb, run);
  return TRUE;
}

static void
start_worker (Run *run)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *unit = vd_worker_unit_for (vd_task_get_id (run->task));
  guint32 uid;

  enter (run, STEP_WORKER);
  if (!vd_worker_slots_claim (run->runner->slots, unit, &uid, &error)) {
    wind_down (run, VIVARIUM_OUTCOME_FAILED, error->message);
    return;
  }
  run->worker_uid = uid;
  if (!launch_worker (run, uid, &error)) {
    wind_down (run, VIVARIUM_OUTCOME_FAILED, error->message);
    return;
  }
  vd_log_task (G_LOG_LEVEL_INFO, vd_task_get_id (run->task), "task %s: worker started as uid %u in %s",
               vd_task_get_id (run->task), uid, vd_worker_get_unit (run->worker));
}

static void
finish_requested_cb (VdTask *task, const gchar *summary, const gchar *verify, gpointer user_data)
{
  Run *run = user_data;

  run->summary = g_strdup (summary);
  run->worker_verify = verify[0] != '\0' ? g_strdup (verify) : NULL;
  wind_down (run, VIVARIUM_OUTCOME_DONE, NULL);
}

static void
cancel_requested_cb (VdTask *task, gpointer user_data)
{
  Run *run = user_data;

  if (leave_queue (run)) {
    mark_end (run, STEP_QUEUED);
    wind_down (run, VIVARIUM_OUTCOME_FAILED, "cancelled while it waited for a session");
    return;
  }
  /* Once the work is over, a Cancel stops the commit itself, also when it
   * comes while the work session is still stopping. */
  if (run->winding_down && run->commit_cancel == NULL)
    run->commit_cancel = g_cancellable_new ();
  if (run->commit_cancel != NULL)
    g_cancellable_cancel (run->commit_cancel);
  wind_down (run, VIVARIUM_OUTCOME_FAILED, "cancelled");
}

/* An agent ends by Task.Finish; one that exits without it gave up, and
 * its own last "failed" entry in the transcript says why better than its
 * exit status does. An agent that could not reach its gateway says "Could
 * not connect"; systemd knows why the gateway is not there. */
static gchar *
agent_stop_reason (Run *run, const gchar *failure)
{
  g_autofree gchar *why = vd_transcript_dup_failure (run->transcript);
  g_autofree gchar *gateway = vd_gateway_dup_down_reason (run->runner->systemd);

  return g_strdup_printf ("the agent stopped without finishing: %s",
                          gateway != NULL ? gateway : why != NULL ? why :
                          failure != NULL ? failure : "it exited without saying why");
}

static void
worker_exited_cb (VdWorker *worker, gboolean success, gpointer user_data)
{
  Run *run = user_data;
  const gchar *failure = vd_worker_get_failure (worker);
  g_autofree gchar *reason = NULL;

  g_signal_handlers_disconnect_by_data (worker, run);
  /* The machine died under the worker, and the worker's end came first
   * (the session's teardown waits for its units: the egress proxy's stop
   * runs the main loop): the machine is to blame, not the worker. */
  if (run->session != NULL && vd_session_died (run->session) && !run->winding_down) {
    reason = machine_death_reason (run->session);
    vd_log_task (G_LOG_LEVEL_INFO, vd_task_get_id (run->task), "task %s: %s", vd_task_get_id (run->task), reason);
    wind_down (run, VIVARIUM_OUTCOME_FAILED, reason);
    return;
  }
  /* Without Finish, only a clean exit of a script is DONE; the rest says
   * what went wrong. */
  if (run->agent)
    reason = agent_stop_reason (run, failure);
  else if (failure != NULL)
    reason = g_strdup (failure);
  wind_down (run, reason != NULL ? VIVARIUM_OUTCOME_FAILED : VIVARIUM_OUTCOME_DONE, reason);
}

static gboolean
hard_limit_cb (gpointer user_data)
{
  Run *run = user_data;
  g_autofree gchar *reason = g_strdup_printf ("the task reached its hard limit of %u s; the work so far is committed",
                                              run->timeout_sec);

  run->timeout_id = 0;
  wind_down (run, VIVARIUM_OUTCOME_IN_PROGRESS, reason);
  return G_SOURCE_REMOVE;
}

/* The worker finished, exited, was cancelled or hit the hard limit: from
 * here on it gets nothing, and the daemon does the rest. */
static void
wind_down (Run *run, VivariumOutcome outcome, const gchar *reason)
{
  if (run->winding_down)
    return;
  run->winding_down = TRUE;
  mark_end (run, STEP_WORKER);
  run->end_outcome = outcome;
  run->end_reason = g_strdup (reason);
  if (run->timeout_id != 0)
    g_source_remove (run->timeout_id);
  run->timeout_id = 0;
  vd_task_close_worker (run->task);
  vd_transcript_close (run->transcript);
  enter (run, STEP_COMMIT);
  if (run->worker != NULL) {
    vd_worker_grants_remove (run->runner->grants, vd_worker_get_uid (run->worker));
    vd_worker_stop (run->worker);
  }
  /* A session still booting is stopped once its start returns. */
  if (!run->session_starting)
    stop_work (run);
}

/* --- the commit ------------------------------------------------------------- */

static void session_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void tree_returned_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void committed_cb (GObject *source, GAsyncResult *res, gpointer user_data);

static void
collect_log (Run *run)
{
  VdCommandLog *log = vd_session_get_command_log (run->session);
  guint64 offset = 0;

  run->log = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  run->log_dropped = vd_command_log_get_dropped (log);
  /* All the memory holds (bounded by VIVARIUM_LOG_ENTRIES_MAX): the report
   * picks its list from it, and the whole goes beside the report. */
  while (run->log->len < VIVARIUM_LOG_ENTRIES_MAX) {
    g_autoptr(GError) error = NULL;
    guint64 next = offset;
    g_autoptr(GVariant) page = vd_command_log_get_page (log, offset, VIVARIUM_LOG_PAGE_MAX, &next, &error);
    GVariantIter iter;
    GVariant *entry;

    if (page == NULL || g_variant_n_children (page) == 0 || next == offset)
      break;
    g_variant_iter_init (&iter, page);
    while ((entry = g_variant_iter_next_value (&iter)) != NULL)
      g_ptr_array_add (run->log, entry);
    offset = next;
  }
}

/* What the work session did, read before it goes. */
static void
stop_work (Run *run)
{
  if (run->session == NULL) {
    commit_work (run);
    return;
  }
  collect_log (run);
  vd_guard_get_counters (run->runner->guard, run->session_uid, &run->drop_packets, &run->drop_bytes);
  vd_task_set_session (run->task, NULL);
  vd_session_stop_async (run->session, session_stopped_cb, run);
}

static void return_tree (Run *run);

/* The work session stopped: the commit. The verification session
 * stopped: its tree goes back to root, then the report. */
static void
session_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;

  vd_session_stop_finish (VD_SESSION (source), res, NULL);
  if (vd_progress_get_step_id (run->progress) == STEP_COMMIT)
    commit_work (run);
  else
    return_tree (run);
}

static void
commit_work (Run *run)
{
  VdProject *project = vd_project_store_lookup (run->runner->projects, run->project, NULL);

  if (project == NULL) {
    start_verification (run);
    return;
  }
  /* The tree is root's again before the daemon reads it. */
  vd_project_revoke_async (project, tree_returned_cb, run);
}

/* After the work session, before the commit: how full the worker left it. */
static void
measure_dataset (Run *run, VdProject *project)
{
  g_autoptr(GError) error = NULL;

  run->dataset_quota = vd_project_get_quota (project);
  run->has_dataset = vd_project_get_used_bytes (project, &run->dataset_used, &error);
  if (!run->has_dataset)
    g_warning ("task %s: cannot measure the dataset: %s", vd_task_get_id (run->task), error->message);
}

static void
commit_tree (Run *run, VdProject *project)
{
  g_autofree gchar *message = NULL;

  measure_dataset (run, project);
  message = g_strdup_printf ("Task %s\n\nCommitted by vivariumd for the task's worker (%s outcome: %s).\n",
                             vd_task_get_id (run->task), run->project, vivarium_outcome_to_string (run->end_outcome));
  if (run->commit_cancel == NULL)
    run->commit_cancel = g_cancellable_new ();
  vd_project_commit_async (project, message, vd_config_get_commit_file_max (run->runner->config),
                           vd_config_get_commit_timeout_sec (run->runner->config), run->commit_cancel,
                           committed_cb, run);
}

/* The tree is root's again: before the commit reads it, or after the
 * verification session had it (then the report). */
static void
tree_returned_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error))
    g_warning ("task %s: %s", vd_task_get_id (run->task), error->message);
  if (vd_progress_get_step_id (run->progress) == STEP_COMMIT)
    commit_tree (run, VD_PROJECT (source));
  else
    end_run (run);
}

static void
committed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;

  mark_end (run, STEP_COMMIT);
  g_clear_object (&run->commit_cancel);
  if (!vd_project_commit_finish (VD_PROJECT (source), res, &run->commit_id, &run->changes, &error)) {
    g_free (run->end_reason);
    run->end_reason = g_strdup_printf ("the daemon could not commit the work: %s", error->message);
    run->end_outcome = VIVARIUM_OUTCOME_FAILED;
  }
  start_verification (run);
}

/* --- the verification session ---------------------------------------------- */

static void verify_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void verify_started_cb (GObject *source, GAsyncResult *res, gpointer user_data);

/* The caller's command, else the worker's; none, or no commit (it
 * failed): nothing to verify. */
static gboolean
choose_verification (Run *run)
{
  run->verify_command = g_strdup (run->caller_verify != NULL ? run->caller_verify : run->worker_verify);
  run->verify_whose = run->caller_verify != NULL ? VIVARIUM_VERIFY_WHOSE_CALLER
                    : run->worker_verify != NULL ? VIVARIUM_VERIFY_WHOSE_WORKER : VIVARIUM_VERIFY_WHOSE_NONE;
  run->verify_exit = -1;
  run->verdict = VIVARIUM_VERDICT_NEVER_RUN;
  return run->verify_command != NULL && run->commit_id != NULL;
}

/* No verdict: @what happened to the verification, and why, goes to the
 * journal and into the signed report (verification.reason). */
static void
verification_inconclusive (Run *run, const gchar *what, const GError *error)
{
  g_warning ("task %s: %s: %s", vd_task_get_id (run->task), what, error->message);
  g_free (run->verify_reason);
  run->verify_reason = g_strdup_printf ("%s: %s", what, error->message);
  run->verdict = VIVARIUM_VERDICT_INCONCLUSIVE;
}

static void
start_verification (Run *run)
{
  VdTaskRunner *self = run->runner;
  VdProject *project = vd_project_store_lookup (self->projects, run->project, NULL);
  VdSessionOptions opts = run->session_options;
  g_autoptr(GError) error = NULL;

  /* The verification judges the tree, not the hosts: no secrets. */
  opts.secrets = NULL;
  opts.ssh_keys = NULL;
  if (!choose_verification (run) || project == NULL) {
    end_run (run);
    return;
  }
  enter (run, STEP_VERIFY_SESSION);
  opts.project_readonly = TRUE;
  opts.timeout_sec = VD_TASK_VERIFY_TIMEOUT + 300;
  run->verify_session = vd_session_pool_create (self->pool, run->image, &opts, 0, run->project,
                                                vd_project_get_work_path (project), &error);
  if (run->verify_session == NULL) {
    verification_inconclusive (run, "no verification session", error);
    end_run (run);
    return;
  }
  vd_project_grant_async (project, vd_session_get_uid (run->verify_session), verify_granted_cb, run);
}

static void
verify_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error)) {
    verification_inconclusive (run, "no verification session", error);
    vd_session_stop_async (run->verify_session, NULL, NULL);
    g_clear_object (&run->verify_session);
    vd_project_revoke_async (VD_PROJECT (source), tree_returned_cb, run);
    return;
  }
  run->verify_session_id = g_strdup (vd_session_get_id (run->verify_session));
  vd_session_start_async (run->verify_session, NULL, verify_started_cb, run);
}

static void
verify_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_session_pool_start_finish (run->runner->pool, VD_SESSION (source), res, &error)) {
    verification_inconclusive (run, "the verification session did not start", error);
    run->verify_exit = -1;
    vd_session_stop_async (run->verify_session, session_stopped_cb, run);
    return;
  }
  run_verification (run);
}

/* --- the verification ------------------------------------------------------- */

static void verify_ran_cb (GObject *source, GAsyncResult *res, gpointer user_data);

static void
run_verification (Run *run)
{
  /* In /project, like the worker saw it; the command is the caller's or
   * the worker's text, run only inside the guest. */
  g_autofree gchar *script = g_strconcat ("cd /project && ", run->verify_command, NULL);
  const gchar *argv[] = { "/bin/sh", "-c", script, NULL };

  enter (run, STEP_VERIFY);
  vd_session_exec_async (run->verify_session, argv, VD_TASK_VERIFY_TIMEOUT, NULL, verify_ran_cb, run);
}

static void
verify_ran_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) result = vd_session_exec_finish (VD_SESSION (source), res, &error);

  if (result == NULL) {
    verification_inconclusive (run, "the verification did not run", error);
    run->verify_exit = -1;
  } else {
    run->verify_exit = result->exit_status;
    run->verdict = result->exit_status == 0 && !result->signaled ? VIVARIUM_VERDICT_PASS : VIVARIUM_VERDICT_FAIL;
  }
  vd_session_stop_async (run->verify_session, session_stopped_cb, run);
}

/* The verification session is gone: the tree is root's again. */
static void
return_tree (Run *run)
{
  VdProject *project = vd_project_store_lookup (run->runner->projects, run->project, NULL);

  if (project == NULL) {
    end_run (run);
    return;
  }
  vd_project_revoke_async (project, tree_returned_cb, run);
}

/* --- the report ------------------------------------------------------------- */

static VivariumReport *assemble_report (Run *run);
static void add_model_usage (Run *run, VivariumReport *report);
static void sign_report (Run *run, VivariumReport *report);
static void teardown (Run *run);

/* Whatever happened before, the task ends here: reported, signed, and
 * everything it held given back. */
static void
end_run (Run *run)
{
  g_autoptr(VivariumReport) report = NULL;

  enter (run, STEP_REPORT);
  mark_end (run, STEP_VERIFY);
  /* No commit ran: its phase lasted until now. */
  if (run->ended[STEP_COMMIT] == 0)
    run->ended[STEP_COMMIT] = run->ended[STEP_VERIFY];
  report = assemble_report (run);
  if (run->agent)
    add_model_usage (run, report);
  sign_report (run, report);
  teardown (run);
}

static VivariumFileChange
file_change_of (VdChangeStatus status)
{
  switch (status) {
  case VD_CHANGE_ADDED:    return VIVARIUM_FILE_CHANGE_ADDED;
  case VD_CHANGE_DELETED:  return VIVARIUM_FILE_CHANGE_DELETED;
  case VD_CHANGE_TYPECHANGE: return VIVARIUM_FILE_CHANGE_TYPECHANGE;
  default:                 return VIVARIUM_FILE_CHANGE_MODIFIED;
  }
}

static VivariumFileKind
file_kind_of (VdChangeKind kind)
{
  switch (kind) {
  case VD_CHANGE_KIND_SYMLINK: return VIVARIUM_FILE_KIND_SYMLINK;
  case VD_CHANGE_KIND_SPECIAL: return VIVARIUM_FILE_KIND_SPECIAL;
  default:                     return VIVARIUM_FILE_KIND_FILE;
  }
}

/* "groups debian, github; allow example.org" */
static gchar *
egress_policy_words (Run *run)
{
  g_autoptr(GString) s = g_string_new (NULL);
  g_autofree gchar *groups = run->egress.groups != NULL ? g_strjoinv (", ", run->egress.groups) : NULL;
  g_autofree gchar *allow = run->egress.allow != NULL ? g_strjoinv (", ", run->egress.allow) : NULL;

  if (run->egress.mode != VD_EGRESS_MODE_ALLOWLIST)
    return g_strdup ("");
  g_string_append_printf (s, "groups %s", groups != NULL && groups[0] != '\0' ? groups : "none");
  if (allow != NULL && allow[0] != '\0')
    g_string_append_printf (s, "; allow %s", allow);
  /* Names and hosts only: the guest held placeholders, the proxy put the
   * values in for these hosts. */
  for (guint i = 0; run->egress.secrets != NULL && i < run->egress.secrets->len; i++) {
    VivariumSecret *secret = run->egress.secrets->pdata[i];
    g_autofree gchar *hosts = g_strjoinv (", ", secret->hosts);
    g_string_append_printf (s, "%s%s for %s", i == 0 ? "; secrets " : ", ", secret->name, hosts);
  }
  /* The keys the session's agent signed with, by name and fingerprint. */
  for (guint i = 0; run->egress.ssh_keys != NULL && i < run->egress.ssh_keys->len; i++) {
    VivariumSshKey *key = run->egress.ssh_keys->pdata[i];
    g_string_append_printf (s, "%s%s (%s)", i == 0 ? "; ssh keys " : ", ", key->name, key->fingerprint);
  }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

/* What the work session's proxy decided, from its kept log. */
static void
add_egress (Run *run, VivariumReport *r)
{
  g_autofree gchar *policy = egress_policy_words (run);
  g_autofree gchar *log = NULL;
  g_autofree gchar *summary = NULL;

  if (run->egress.mode == VD_EGRESS_MODE_ALLOWLIST && run->session_id != NULL) {
    log = vd_egress_kept_log_path (run->runner->config, run->session_id);
    summary = vd_egress_log_summarize (log);
    vd_task_set_egress_log (run->task, log);
  }
  vivarium_report_set_egress (r, vd_egress_mode_to_string (run->egress.mode), policy,
                              summary != NULL ? summary : "");
}

static VivariumReport *
assemble_report (Run *run)
{
  VivariumReport *r = vivarium_report_new ();
  const gchar *id = vd_task_get_id (run->task);

  vivarium_report_set_id (r, id);
  vivarium_report_set_task_id (r, id);
  /* Ids are tokens or absent, never "": the report's reader refuses "". */
  vivarium_report_set_session_id (r, run->session_id);
  vivarium_report_set_image (r, vd_image_get_name (run->image), vd_image_get_digest (run->image));
  vivarium_report_set_project (r, run->project);
  vivarium_report_set_times (r, run->started_at, g_get_real_time ());
  vivarium_report_set_host (r, g_get_host_name ());
  vivarium_report_set_daemon_version (r, PACKAGE_VERSION);
  vivarium_report_set_outcome (r, run->end_outcome, run->end_reason);
  for (guint i = 0; run->log != NULL && i < run->log->len; i++) {
    g_autoptr(GError) error = NULL;
    if (!vivarium_report_add_command_from_log (r, g_ptr_array_index (run->log, i), &error))
      g_warning ("task %s: a command log entry left out: %s", id, error->message);
  }
  for (guint i = 0; run->changes != NULL && i < run->changes->len; i++) {
    VdChange *c = g_ptr_array_index (run->changes, i);
    if (c->status == VD_CHANGE_SKIPPED) {
      vivarium_report_add_not_committed (r, c->path, vd_change_kind_to_string (c->kind), c->reason);
      continue;
    }
    gboolean text = c->kind == VD_CHANGE_KIND_FILE && !c->binary;
    vivarium_report_add_file (r, c->path, file_change_of (c->status), file_kind_of (c->kind),
                              text ? (gint64) c->lines_added : -1, text ? (gint64) c->lines_removed : -1);
  }
  vivarium_report_set_commit (r, run->commit_id);
  vivarium_report_set_verification (r, run->verify_command, run->verify_whose, run->verify_exit, run->verdict,
                                    run->verify_session_id);
  if (run->verdict == VIVARIUM_VERDICT_INCONCLUSIVE)
    vivarium_report_set_verify_reason (r, run->verify_reason);
  vivarium_report_set_guard_drops (r, run->drop_packets, run->drop_bytes);
  add_egress (run, r);
  if (run->has_dataset)
    vivarium_report_set_dataset (r, run->dataset_used, run->dataset_quota);
  vivarium_report_set_timings (r, phase_of (run, STEP_WORK_SESSION), phase_of (run, STEP_WORKER),
                               phase_of (run, STEP_COMMIT), phase_of (run, STEP_VERIFY));
  if (run->summary != NULL)
    vivarium_report_set_summary (r, run->summary, -1);
  return r;
}

/* The gateway's counts go into the report (and the transcript); its
 * socket directory goes. */
static void
add_model_usage (Run *run, VivariumReport *report)
{
  const gchar *runtime = vd_config_get_runtime_dir (run->runner->config);
  const gchar *id = vd_task_get_id (run->task);
  guint64 u[4];

  if (vd_gateway_task_read_usage (runtime, id, u)) {
    g_autofree gchar *note = g_strdup_printf ("The gateway forwarded %" G_GUINT64_FORMAT " model requests (%"
                                              G_GUINT64_FORMAT " refused); the model reported %" G_GUINT64_FORMAT
                                              " prompt and %" G_GUINT64_FORMAT " completion tokens.",
                                              u[0], u[1], u[2], u[3]);
    vd_transcript_add (run->transcript, "note", note);
    vivarium_report_set_model_usage (report, u[0], u[1], u[2], u[3]);
  } else {
    vivarium_report_set_model_usage (report, 0, 0, 0, 0);
  }
  vd_gateway_task_close (runtime, id);
}

/* --- the signature ---------------------------------------------------------- */

/* A report that cannot be signed or stored makes the task FAILED. */
static void
sign_report (Run *run, VivariumReport *report)
{
  g_autoptr(GError) error = NULL;
  const gchar *path;

  enter (run, STEP_SIGN);
  path = vd_report_store_add_with_log (run->runner->reports, report, run->log, run->log_dropped, &error);
  if (path == NULL) {
    g_warning ("task %s: no report: %s", vd_task_get_id (run->task), error->message);
    g_free (run->end_reason);
    run->end_reason = g_strdup_printf ("the report could not be signed or stored: %s", error->message);
    run->end_outcome = VIVARIUM_OUTCOME_FAILED;
  }
  vd_task_set_report (run->task, path);
  mark_end (run, STEP_SIGN);
  publish_timings (run);
}

/* --- the teardown ----------------------------------------------------------- */

static void
release_held (Run *run, const gchar *id)
{
  VdTaskRunner *self = run->runner;
  VdProject *project = vd_project_store_lookup (self->projects, run->project, NULL);
  g_autoptr(GError) error = NULL;

  if (project != NULL && !vd_project_set_last_task (project, id, &error))
    g_warning ("task %s: cannot record the last task: %s", id, error->message);
  vd_project_store_release (self->projects, run->project);
  if (run->worker != NULL)
    vd_worker_cleanup (run->worker);
  if (run->worker_uid != 0)
    vd_worker_slots_release (self->slots, run->worker_uid);
  remove_record (self, id);
  vd_idle_uninhibit (self->idle, run->inhibit);
}

/* The run goes; the task stays on the bus, finished, and on disk. */
static void
teardown (Run *run)
{
  VdTaskRunner *self = run->runner;
  g_autofree gchar *id = g_strdup (vd_task_get_id (run->task));

  enter (run, STEP_TEARDOWN);
  release_held (run, id);
  vd_log_task (G_LOG_LEVEL_INFO, id, "task %s ended: %s%s%s", id, vivarium_outcome_to_string (run->end_outcome),
               run->end_reason != NULL ? ", " : "", run->end_reason != NULL ? run->end_reason : "");
  vd_progress_finish (run->progress);
  vd_task_finish (run->task, run->end_outcome, run->end_reason);
  write_done_record (self, run->task);
  g_hash_table_remove (self->runs, id);
  prune_tasks (self);
  /* Its slot is free. */
  schedule_drain (self);
}

static void
remove_file (const gchar *path)
{
  if (g_unlink (path) != 0 && errno != ENOENT)
    g_warning ("cannot remove the task record %s: %s", path, g_strerror (errno));
}

static void
remove_record (VdTaskRunner *self, const gchar *id)
{
  g_autofree gchar *name = g_strconcat (id, ".json", NULL);
  g_autofree gchar *path = vd_config_build_state_path (self->config, "tasks", name, NULL);

  remove_file (path);
}

/* The record of a finished task: ListTasks across restarts. */
static void
write_done_record (VdTaskRunner *self, VdTask *task)
{
  g_autofree gchar *dir = tasks_dir (self, TRUE);
  g_autofree gchar *name = g_strconcat (vd_task_get_id (task), ".json", NULL);
  g_autoptr(JsonNode) root = vd_task_to_record (task);
  g_autoptr(GError) error = NULL;

  if (!vd_record_write (dir, name, root, &error))
    g_warning ("task %s: its record will not survive a restart: %s", vd_task_get_id (task), error->message);
}

static void
remove_done_record (VdTaskRunner *self, const gchar *id)
{
  g_autofree gchar *name = g_strconcat (id, ".json", NULL);
  g_autofree gchar *path = vd_config_build_state_path (self->config, "tasks", "done", name, NULL);

  remove_file (path);
}

static gint
by_submission (gconstpointer a, gconstpointer b)
{
  gint64 x = vd_task_get_submitted_at (*(VdTask * const *) a);
  gint64 y = vd_task_get_submitted_at (*(VdTask * const *) b);

  return x < y ? -1 : x > y;
}

/* At most [Tasks] MaxFinishedTasks= finished tasks stay; the oldest leave
 * the bus and the disk. */
static void
prune_tasks (VdTaskRunner *self)
{
  guint history = vd_config_get_max_finished_tasks (self->config);
  g_autoptr(GPtrArray) finished = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->tasks);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    if (vd_task_is_finished (value))
      g_ptr_array_add (finished, value);
  }
  g_ptr_array_sort (finished, by_submission);
  for (guint i = 0; i + history < finished->len; i++) {
    VdTask *oldest = g_ptr_array_index (finished, i);
    g_autofree gchar *object_path = g_strdup (vd_task_get_object_path (oldest));
    g_autofree gchar *id = g_strdup (vd_task_get_id (oldest));

    remove_done_record (self, id);
    g_hash_table_remove (self->tasks, id);
    g_signal_emit (self, signals[SIGNAL_TASK_REMOVED], 0, object_path);
  }
}

/* --- a restarted daemon: the records of killed and of finished tasks --------- */

static const gchar *
token_or_null (const gchar *s)
{
  return s != NULL && s[0] != '\0' ? s : NULL;
}

static void
recover_one (VdTaskRunner *self, const gchar *id, JsonObject *o)
{
  g_autoptr(VivariumReport) r = vivarium_report_new ();
  g_autoptr(GError) error = NULL;
  const gchar *project = json_object_get_string_member_with_default (o, "project", "");
  VdProject *p = vd_project_store_lookup (self->projects, project, NULL);
  const gchar *report_path;

  vivarium_report_set_id (r, id);
  vivarium_report_set_task_id (r, id);
  vivarium_report_set_session_id (r, token_or_null (json_object_get_string_member_with_default (o, "session", "")));
  vivarium_report_set_image (r, token_or_null (json_object_get_string_member_with_default (o, "image", "")),
                             token_or_null (json_object_get_string_member_with_default (o, "image-digest", "")));
  vivarium_report_set_project (r, token_or_null (project));
  vivarium_report_set_times (r, json_object_get_int_member_with_default (o, "submitted-at", 0), g_get_real_time ());
  vivarium_report_set_host (r, g_get_host_name ());
  vivarium_report_set_daemon_version (r, PACKAGE_VERSION);
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_FAILED, "the daemon stopped while it ran");
  vivarium_report_set_verification (r, NULL, VIVARIUM_VERIFY_WHOSE_NONE, -1, VIVARIUM_VERDICT_NEVER_RUN, NULL);
  report_path = vd_report_store_add (self->reports, r, &error);
  if (report_path == NULL)
    g_warning ("task %s: no report of the interrupted task: %s", id, error->message);
  {
    /* Listed again, FAILED, like any finished task. */
    g_autoptr(VdTask) t = vd_task_new (id, project, json_object_get_string_member_with_default (o, "image", ""),
                                       json_object_get_string_member_with_default (o, "worker", "script"));
    vd_task_set_report (t, report_path);
    vd_task_finish (t, VIVARIUM_OUTCOME_FAILED, "the daemon stopped while it ran");
    write_done_record (self, t);
  }
  if (p != NULL && !vd_project_set_last_task (p, id, NULL))
    g_warning ("task %s: cannot record the last task", id);
  if (p != NULL)
    vd_project_store_refresh (self->projects, project);
  vd_log_task (G_LOG_LEVEL_WARNING, id, "task %s was interrupted by the daemon's end: reported FAILED", id);
}

static void
load_one_done (VdTaskRunner *self, const gchar *dir, const gchar *name)
{
  g_autofree gchar *id = g_strndup (name, strlen (name) - strlen (".json"));
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(VdTask) task = NULL;
  GStatBuf st;

  /* A record is small; a big one is not ours. */
  if (g_stat (path, &st) != 0 || st.st_size > 64 * 1024 || !vivarium_name_validate ("task", id, &error) ||
      g_hash_table_contains (self->tasks, id) || !json_parser_load_from_file (parser, path, &error) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)) ||
      (task = vd_task_new_from_record (id, json_node_get_object (json_parser_get_root (parser)), &error)) == NULL ||
      !self->export_func (vd_task_get_skeleton (task), vd_task_get_object_path (task), self->export_data, &error)) {
    g_warning ("task record %s left out: %s", path, error != NULL ? error->message : "too large, or a duplicate");
    return;
  }
  g_hash_table_insert (self->tasks, g_strdup (id), g_steal_pointer (&task));
}

/* The finished tasks of earlier runs, back on the bus. */
static void
load_done (VdTaskRunner *self)
{
  g_autofree gchar *dir = tasks_dir (self, TRUE);
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    if (names[i][0] != '.' && g_str_has_suffix (names[i], ".json"))
      load_one_done (self, dir, names[i]);
  }
  prune_tasks (self);
}

void
vd_task_runner_recover (VdTaskRunner *self)
{
  g_autofree gchar *dir = tasks_dir (self, FALSE);
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *id = NULL;
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.' || !g_str_has_suffix (names[i], ".json"))
      continue;
    id = g_strndup (names[i], strlen (names[i]) - strlen (".json"));
    if (!vivarium_name_validate ("task", id, &error) || !json_parser_load_from_file (parser, path, &error) ||
        !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
      g_warning ("task record %s unreadable: %s", path, error != NULL ? error->message : "not an object");
    else
      recover_one (self, id, json_node_get_object (json_parser_get_root (parser)));
    remove_record (self, id);
  }
  load_done (self);
}

/* --- the rest of the runner's face ------------------------------------------ */

const gchar **
vd_task_runner_list_paths (VdTaskRunner *self)
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->tasks);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, (gpointer) vd_task_get_object_path (value));
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

void
vd_task_runner_stop_all (VdTaskRunner *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->runs);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Run *run = value;
    if (run->worker != NULL)
      vd_systemd_stop_unit_sync (self->systemd, vd_worker_get_unit (run->worker), 15000, NULL);
  }
}

/* The daemon lost the bus (@connection NULL) or got a new one: no task may
 * keep a caller's call from the old one. */
void
vd_task_runner_set_connection (VdTaskRunner *self, GDBusConnection *connection)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->tasks);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    vd_task_forget_connection (VD_TASK (value), connection);
}
