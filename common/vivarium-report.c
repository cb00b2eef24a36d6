/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-error.h"
#include "vivarium-report.h"

/* The model and its JSON. The text rendering is in vivarium-report-render.c,
 * the signed file in vivarium-report-signed.c. */

struct _VivariumReport {
  GObject parent_instance;

  gchar           *id;
  gchar           *task_id;
  gchar           *session_id;
  gchar           *image_name;
  gchar           *image_digest;
  gchar           *project;
  gint64           started_at;
  gint64           ended_at;
  gchar           *host;
  gchar           *daemon_version;
  VivariumOutcome  outcome;
  gchar           *outcome_reason;
  GPtrArray       *commands;          /* of VivariumReportCommand, by number */
  guint64          commands_omitted;
  guint64          commands_failed_omitted;
  guint64          commands_seen;     /* the last number given */
  guint            commands_failed_kept;
  gboolean         commands_numbered; /* FALSE: a report from before the numbers */
  gchar           *command_log_digest; /* NULL: no "command-log" */
  guint64          command_log_entries;
  guint64          command_log_not_kept;
  GPtrArray       *files;             /* of VivariumReportFile */
  guint64          files_omitted;
  gchar           *commit;
  gchar           *verify_command;
  VivariumVerifyWhose verify_whose;
  gint             verify_exit_status;
  VivariumVerdict  verify_verdict;
  gchar           *verify_session_id;
  gchar           *verify_reason;     /* why inconclusive, or NULL */
  guint64          guard_packets;
  guint64          guard_bytes;
  gboolean         has_model;       /* an agent task: the gateway's counts */
  gchar           *egress_mode;     /* NULL: the report predates egress by name */
  gchar           *egress_policy;
  gchar           *egress_summary;
  guint64          model_usage[VIVARIUM_REPORT_MODEL_N];
  gchar           *summary;
  gboolean         summary_truncated;
  guint64          summary_size;
  gchar           *question;
  GPtrArray       *not_committed;     /* of VivariumReportSkipped */
  guint64          not_committed_omitted;
  gboolean         has_dataset;
  guint64          dataset_used;
  guint64          dataset_quota;
  gboolean         dataset_full;
  gboolean         has_timings;
  gint64           timings[4];        /* session-start, worker, commit, verification */
};

/* Members a report may lack (added after format 1's first reports, which
 * must still read and verify): written only when set. */
static const gchar *const timing_names[] = { "work-session-start", "worker", "commit", "verification", NULL };

G_DEFINE_TYPE (VivariumReport, vivarium_report, G_TYPE_OBJECT)

/* --- enum strings: the one place that spells them --------------------- */

static const gchar *const file_changes[] = {
  [VIVARIUM_FILE_CHANGE_ADDED]      = "added",
  [VIVARIUM_FILE_CHANGE_MODIFIED]   = "modified",
  [VIVARIUM_FILE_CHANGE_DELETED]    = "deleted",
  [VIVARIUM_FILE_CHANGE_TYPECHANGE] = "typechange",
};

static const gchar *const file_kinds[] = {
  [VIVARIUM_FILE_KIND_FILE]    = "file",
  [VIVARIUM_FILE_KIND_SYMLINK] = "symlink",
  [VIVARIUM_FILE_KIND_SPECIAL] = "special",
};

static const gchar *const verify_whose[] = {
  [VIVARIUM_VERIFY_WHOSE_NONE]   = "none",
  [VIVARIUM_VERIFY_WHOSE_CALLER] = "caller",
  [VIVARIUM_VERIFY_WHOSE_WORKER] = "worker",
};

static gboolean
lookup_string (const gchar *const *table, guint n, const gchar *str, guint *value)
{
  for (guint i = 0; i < n; i++) {
    if (g_strcmp0 (table[i], str) == 0) {
      *value = i;
      return TRUE;
    }
  }
  return FALSE;
}

#define DEFINE_ENUM_STRINGS(prefix, Type, table)                               \
  const gchar *                                                                \
  prefix##_to_string (Type value)                                              \
  {                                                                            \
    g_return_val_if_fail ((guint) value < G_N_ELEMENTS (table), NULL);         \
    return table[value];                                                       \
  }                                                                            \
  gboolean                                                                     \
  prefix##_from_string (const gchar *str, Type *value)                         \
  {                                                                            \
    guint v = 0;                                                               \
    if (!lookup_string (table, G_N_ELEMENTS (table), str, &v))                 \
      return FALSE;                                                            \
    *value = (Type) v;                                                         \
    return TRUE;                                                               \
  }

DEFINE_ENUM_STRINGS (vivarium_file_change, VivariumFileChange, file_changes)
DEFINE_ENUM_STRINGS (vivarium_file_kind, VivariumFileKind, file_kinds)
DEFINE_ENUM_STRINGS (vivarium_verify_whose, VivariumVerifyWhose, verify_whose)

/* --- the object ---------------------------------------------------------- */

static void
report_command_free (VivariumReportCommand *c)
{
  g_free (c->kind);
  g_strfreev (c->argv);
  g_free (c->error);
  g_free (c->stderr_head);
  g_free (c);
}

static void
report_skipped_free (VivariumReportSkipped *k)
{
  g_free (k->path);
  g_free (k->kind);
  g_free (k->reason);
  g_free (k);
}

static void
report_file_free (VivariumReportFile *f)
{
  g_free (f->path);
  g_free (f);
}

static void
vivarium_report_finalize (GObject *object)
{
  VivariumReport *self = VIVARIUM_REPORT (object);

  g_free (self->id);
  g_free (self->egress_mode);
  g_free (self->egress_policy);
  g_free (self->egress_summary);
  g_free (self->task_id);
  g_free (self->session_id);
  g_free (self->image_name);
  g_free (self->image_digest);
  g_free (self->project);
  g_free (self->host);
  g_free (self->daemon_version);
  g_free (self->outcome_reason);
  g_ptr_array_unref (self->commands);
  g_free (self->command_log_digest);
  g_ptr_array_unref (self->files);
  g_free (self->commit);
  g_free (self->verify_command);
  g_free (self->verify_session_id);
  g_free (self->verify_reason);
  g_free (self->summary);
  g_free (self->question);
  g_ptr_array_unref (self->not_committed);
  G_OBJECT_CLASS (vivarium_report_parent_class)->finalize (object);
}

static void
vivarium_report_class_init (VivariumReportClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vivarium_report_finalize;
}

static void
vivarium_report_init (VivariumReport *self)
{
  self->commands = g_ptr_array_new_with_free_func ((GDestroyNotify) report_command_free);
  self->files = g_ptr_array_new_with_free_func ((GDestroyNotify) report_file_free);
  self->not_committed = g_ptr_array_new_with_free_func ((GDestroyNotify) report_skipped_free);
  self->daemon_version = g_strdup (PACKAGE_VERSION);
  self->outcome = VIVARIUM_OUTCOME_IN_PROGRESS;
  self->verify_whose = VIVARIUM_VERIFY_WHOSE_NONE;
  self->verify_exit_status = -1;
  self->verify_verdict = VIVARIUM_VERDICT_NEVER_RUN;
  self->summary = g_strdup ("");
  self->commands_numbered = TRUE;
}

VivariumReport *
vivarium_report_new (void)
{
  return g_object_new (VIVARIUM_TYPE_REPORT, NULL);
}

/* --- capping ------------------------------------------------------------ */

/* Valid UTF-8 (NULs and invalid bytes become U+FFFD, so the text survives
 * JSON and C strings), cut on a character boundary at @max bytes. */
static gchar *
cap_text (const gchar *text, gssize len, gsize max, gboolean *truncated)
{
  g_autofree gchar *valid = NULL;
  const gchar *end;

  if (text == NULL) {
    if (truncated != NULL)
      *truncated = FALSE;
    return NULL;
  }
  valid = g_utf8_make_valid (text, len);
  if (truncated != NULL)
    *truncated = strlen (valid) > max;
  if (strlen (valid) <= max)
    return g_steal_pointer (&valid);
  end = valid + max;
  /* Back off to the start of the character that crosses the cap. */
  while (end > valid && ((guchar) *end & 0xc0) == 0x80)
    end--;
  return g_strndup (valid, (gsize) (end - valid));
}

static void
replace (gchar **field, const gchar *text, gsize max)
{
  g_free (*field);
  *field = cap_text (text, -1, max, NULL);
}

static guint64
clamp_u64 (guint64 v)
{
  return MIN (v, (guint64) G_MAXINT64);
}

/* --- setters -------------------------------------------------------------- */

void
vivarium_report_set_id (VivariumReport *self, const gchar *id)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->id, id, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_task_id (VivariumReport *self, const gchar *task_id)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->task_id, task_id, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_session_id (VivariumReport *self, const gchar *session_id)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->session_id, session_id, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_image (VivariumReport *self, const gchar *name, const gchar *digest)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->image_name, name, VIVARIUM_REPORT_ID_MAX);
  replace (&self->image_digest, digest, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_project (VivariumReport *self, const gchar *project)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->project, project, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_times (VivariumReport *self, gint64 started_at, gint64 ended_at)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  self->started_at = MAX (started_at, 0);
  self->ended_at = MAX (ended_at, 0);
}

void
vivarium_report_set_host (VivariumReport *self, const gchar *host)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->host, host, VIVARIUM_REPORT_HOST_MAX);
}

void
vivarium_report_set_daemon_version (VivariumReport *self, const gchar *version)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->daemon_version, version, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_outcome (VivariumReport *self, VivariumOutcome outcome, const gchar *reason)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (vivarium_outcome_to_string (outcome) != NULL);
  self->outcome = outcome;
  replace (&self->outcome_reason, reason, VIVARIUM_REPORT_REASON_MAX);
}

/* Keeps the first arguments up to the count and byte caps; an argument that
 * crosses the byte cap is cut, and the command is marked truncated. */
static GStrv
cap_argv (const gchar * const *argv, gboolean *truncated)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  gsize budget = VIVARIUM_REPORT_ARGV_BYTES_MAX;

  *truncated = FALSE;
  for (guint i = 0; argv != NULL && argv[i] != NULL; i++) {
    gboolean cut = FALSE;
    g_autofree gchar *arg = NULL;

    if (i >= VIVARIUM_REPORT_ARGV_MAX || budget == 0) {
      *truncated = TRUE;
      break;
    }
    arg = cap_text (argv[i], -1, budget, &cut);
    *truncated = *truncated || cut;
    budget -= strlen (arg);
    g_strv_builder_add (builder, arg);
  }
  return g_strv_builder_end (builder);
}

gboolean
vivarium_report_command_failed (const VivariumReportCommand *c)
{
  return c->exit_status != 0 || (c->error != NULL && c->error[0] != '\0');
}

/* The list keeps the first and the last edge of each class (failed or
 * not): when a class holds more, the oldest of its last ones goes, i.e.
 * the (edge + 1)-th of that class, and is counted as left out. */
static void
keep_edges (VivariumReport *self, gboolean failed)
{
  guint edge = failed ? VIVARIUM_REPORT_COMMANDS_FAILED_EDGE : VIVARIUM_REPORT_COMMANDS_EDGE;
  guint kept = failed ? self->commands_failed_kept : self->commands->len - self->commands_failed_kept;
  guint seen = 0;

  if (kept <= 2 * edge)
    return;
  for (guint i = 0; i < self->commands->len; i++) {
    const VivariumReportCommand *c = g_ptr_array_index (self->commands, i);
    if (vivarium_report_command_failed (c) != failed || ++seen <= edge)
      continue;
    g_ptr_array_remove_index (self->commands, i);
    break;
  }
  self->commands_omitted++;
  if (failed) {
    self->commands_failed_kept--;
    self->commands_failed_omitted++;
  }
}

static void
add_numbered_command (VivariumReport *self, guint64 number, const gchar *kind, const gchar * const *argv,
                      gint64 started_at, gint64 duration, gint exit_status, guint64 stdout_size,
                      guint64 stderr_size, const gchar *error, const gchar *stderr_head)
{
  VivariumReportCommand *c = g_new0 (VivariumReportCommand, 1);
  gboolean failed;

  /* Numbers only grow: the list is in the log's order. */
  self->commands_seen = MAX (number, self->commands_seen + 1);
  c->number = self->commands_seen;
  c->kind = cap_text (kind, -1, VIVARIUM_REPORT_KIND_MAX, NULL);
  c->argv = cap_argv (argv, &c->argv_truncated);
  c->started_at = MAX (started_at, 0);
  c->duration = MAX (duration, 0);
  c->exit_status = exit_status;
  c->stdout_size = clamp_u64 (stdout_size);
  c->stderr_size = clamp_u64 (stderr_size);
  c->error = cap_text (error != NULL ? error : "", -1, VIVARIUM_REPORT_ERROR_MAX, NULL);
  if (stderr_head != NULL && stderr_head[0] != '\0')
    c->stderr_head = cap_text (stderr_head, -1, VIVARIUM_REPORT_STDERR_HEAD_MAX, NULL);
  failed = vivarium_report_command_failed (c);
  g_ptr_array_add (self->commands, c);
  if (failed)
    self->commands_failed_kept++;
  keep_edges (self, failed);
}

void
vivarium_report_add_command (VivariumReport *self, const gchar *kind, const gchar * const *argv,
                             gint64 started_at, gint64 duration, gint exit_status,
                             guint64 stdout_size, guint64 stderr_size, const gchar *error)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (kind != NULL);
  add_numbered_command (self, 0, kind, argv, started_at, duration, exit_status, stdout_size, stderr_size, error,
                        NULL);
}

void
vivarium_report_set_command_log (VivariumReport *self, const gchar *digest, guint64 entries, guint64 not_kept)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (digest != NULL);
  replace (&self->command_log_digest, digest, VIVARIUM_REPORT_ID_MAX);
  self->command_log_entries = clamp_u64 (entries);
  /* Run, and neither listed nor in the file: said, not hidden. */
  self->commands_omitted += clamp_u64 (not_kept) - self->command_log_not_kept;
  self->command_log_not_kept = clamp_u64 (not_kept);
}

gboolean
vivarium_report_get_command_log (VivariumReport *self, const gchar **digest, guint64 *entries, guint64 *not_kept)
{
  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), FALSE);
  if (digest != NULL)
    *digest = self->command_log_digest;
  if (entries != NULL)
    *entries = self->command_log_entries;
  if (not_kept != NULL)
    *not_kept = self->command_log_not_kept;
  return self->command_log_digest != NULL;
}

gboolean
vivarium_report_get_commands_numbered (VivariumReport *self)
{
  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), FALSE);
  return self->commands_numbered;
}

guint64
vivarium_report_get_commands_failed_omitted (VivariumReport *self)
{
  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), 0);
  return self->commands_failed_omitted;
}

static gboolean
lookup_log_entry (GVariantDict *d, const gchar **kind, const gchar ***argv, guint64 *started_at,
                  guint64 *duration, gint32 *exit_status, guint64 *out_size, guint64 *err_size)
{
  return g_variant_dict_lookup (d, "kind", "&s", kind) &&
         g_variant_dict_lookup (d, "argv", "^a&s", argv) &&
         g_variant_dict_lookup (d, "started-at", "t", started_at) &&
         g_variant_dict_lookup (d, "duration", "t", duration) &&
         g_variant_dict_lookup (d, "exit-status", "i", exit_status) &&
         g_variant_dict_lookup (d, "stdout-size", "t", out_size) &&
         g_variant_dict_lookup (d, "stderr-size", "t", err_size);
}

gboolean
vivarium_report_add_command_from_log (VivariumReport *self, GVariant *entry, GError **error)
{
  g_autoptr(GVariantDict) d = NULL;
  const gchar *kind = NULL;
  const gchar *message = "";
  const gchar *stderr_head = NULL;
  g_autofree const gchar **argv = NULL;
  guint64 started_at = 0, duration = 0, out_size = 0, err_size = 0, seq = 0;
  gboolean has_seq;
  gint32 exit_status = -1;

  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), FALSE);
  if (entry == NULL || !g_variant_is_of_type (entry, G_VARIANT_TYPE_VARDICT)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "A command log entry must be a dictionary (a{sv})");
    return FALSE;
  }
  d = g_variant_dict_new (entry);
  if (!lookup_log_entry (d, &kind, &argv, &started_at, &duration, &exit_status, &out_size,
                         &err_size)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "A command log entry lacks one of kind (s), argv (as), started-at (t), "
                         "duration (t), exit-status (i), stdout-size (t), stderr-size (t)");
    return FALSE;
  }
  g_variant_dict_lookup (d, "error", "&s", &message);
  g_variant_dict_lookup (d, "stderr-head", "&s", &stderr_head);
  has_seq = g_variant_dict_lookup (d, "seq", "t", &seq);
  add_numbered_command (self, has_seq && seq < G_MAXINT64 ? seq + 1 : 0, kind, argv,
                        (gint64) clamp_u64 (started_at), (gint64) clamp_u64 (duration), exit_status,
                        out_size, err_size, message, stderr_head);
  return TRUE;
}

void
vivarium_report_add_file (VivariumReport *self, const gchar *path, VivariumFileChange change,
                          VivariumFileKind kind, gint64 lines_added, gint64 lines_removed)
{
  VivariumReportFile *f;

  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (path != NULL);
  g_return_if_fail (vivarium_file_change_to_string (change) != NULL);
  g_return_if_fail (vivarium_file_kind_to_string (kind) != NULL);
  if (self->files->len >= VIVARIUM_REPORT_FILES_MAX) {
    self->files_omitted++;
    return;
  }
  f = g_new0 (VivariumReportFile, 1);
  f->path = cap_text (path, -1, VIVARIUM_REPORT_PATH_MAX, NULL);
  f->change = change;
  f->kind = kind;
  f->lines_added = MAX (lines_added, -1);
  f->lines_removed = MAX (lines_removed, -1);
  g_ptr_array_add (self->files, f);
}

void
vivarium_report_add_not_committed (VivariumReport *self, const gchar *path, const gchar *kind,
                                   const gchar *reason)
{
  VivariumReportSkipped *k;

  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (path != NULL && kind != NULL);
  if (self->not_committed->len >= VIVARIUM_REPORT_FILES_MAX) {
    self->not_committed_omitted++;
    return;
  }
  k = g_new0 (VivariumReportSkipped, 1);
  k->path = cap_text (path, -1, VIVARIUM_REPORT_PATH_MAX, NULL);
  k->kind = cap_text (kind, -1, VIVARIUM_REPORT_KIND_MAX, NULL);
  k->reason = cap_text (reason != NULL ? reason : "", -1, VIVARIUM_REPORT_REASON_MAX, NULL);
  g_ptr_array_add (self->not_committed, k);
}

void
vivarium_report_set_dataset (VivariumReport *self, guint64 used_bytes, guint64 quota_bytes)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  self->has_dataset = TRUE;
  self->dataset_used = clamp_u64 (used_bytes);
  self->dataset_quota = clamp_u64 (quota_bytes);
  self->dataset_full = quota_bytes > 0 &&
                       (used_bytes >= quota_bytes ||
                        quota_bytes - used_bytes < quota_bytes / VIVARIUM_REPORT_DATASET_FULL_DIVISOR);
}

void
vivarium_report_set_timings (VivariumReport *self, gint64 session_start, gint64 worker, gint64 commit,
                             gint64 verification)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  self->has_timings = TRUE;
  self->timings[0] = MAX (session_start, 0);
  self->timings[1] = MAX (worker, 0);
  self->timings[2] = MAX (commit, 0);
  self->timings[3] = MAX (verification, 0);
}

GPtrArray *
vivarium_report_get_not_committed (VivariumReport *self)
{
  return self->not_committed;
}

guint64
vivarium_report_get_not_committed_omitted (VivariumReport *self)
{
  return self->not_committed_omitted;
}

gboolean
vivarium_report_get_dataset (VivariumReport *self, guint64 *used_bytes, guint64 *quota_bytes, gboolean *full)
{
  if (used_bytes != NULL)
    *used_bytes = self->dataset_used;
  if (quota_bytes != NULL)
    *quota_bytes = self->dataset_quota;
  if (full != NULL)
    *full = self->dataset_full;
  return self->has_dataset;
}

gboolean
vivarium_report_get_timings (VivariumReport *self, gint64 *session_start, gint64 *worker, gint64 *commit,
                             gint64 *verification)
{
  gint64 *outs[] = { session_start, worker, commit, verification };

  for (guint i = 0; i < G_N_ELEMENTS (outs); i++) {
    if (outs[i] != NULL)
      *outs[i] = self->timings[i];
  }
  return self->has_timings;
}

void
vivarium_report_set_commit (VivariumReport *self, const gchar *commit)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->commit, commit, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_verification (VivariumReport *self, const gchar *command,
                                  VivariumVerifyWhose whose, gint exit_status,
                                  VivariumVerdict verdict, const gchar *session_id)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_return_if_fail (vivarium_verify_whose_to_string (whose) != NULL);
  g_return_if_fail (vivarium_verdict_to_string (verdict) != NULL);
  replace (&self->verify_command, command, VIVARIUM_REPORT_VERIFY_CMD_MAX);
  self->verify_whose = whose;
  self->verify_exit_status = exit_status;
  self->verify_verdict = verdict;
  replace (&self->verify_session_id, session_id, VIVARIUM_REPORT_ID_MAX);
}

void
vivarium_report_set_verify_reason (VivariumReport *self, const gchar *reason)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  replace (&self->verify_reason, reason, VIVARIUM_REPORT_REASON_MAX);
}

void
vivarium_report_set_guard_drops (VivariumReport *self, guint64 packets, guint64 bytes)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  self->guard_packets = clamp_u64 (packets);
  self->guard_bytes = clamp_u64 (bytes);
}

void
vivarium_report_set_model_usage (VivariumReport *self, guint64 requests, guint64 refused, guint64 prompt_tokens,
                                 guint64 completion_tokens)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  self->has_model = TRUE;
  self->model_usage[VIVARIUM_REPORT_MODEL_REQUESTS] = clamp_u64 (requests);
  self->model_usage[VIVARIUM_REPORT_MODEL_REFUSED] = clamp_u64 (refused);
  self->model_usage[VIVARIUM_REPORT_MODEL_PROMPT_TOKENS] = clamp_u64 (prompt_tokens);
  self->model_usage[VIVARIUM_REPORT_MODEL_COMPLETION_TOKENS] = clamp_u64 (completion_tokens);
}

void
vivarium_report_set_egress (VivariumReport *self, const gchar *mode, const gchar *policy, const gchar *summary)
{
  g_free (self->egress_mode);
  g_free (self->egress_policy);
  g_free (self->egress_summary);
  self->egress_mode = g_utf8_make_valid (mode, MIN (strlen (mode), VIVARIUM_REPORT_EGRESS_MAX));
  self->egress_policy = g_utf8_make_valid (policy, MIN (strlen (policy), VIVARIUM_REPORT_EGRESS_MAX));
  self->egress_summary = g_utf8_make_valid (summary, MIN (strlen (summary), VIVARIUM_REPORT_EGRESS_MAX));
}

gboolean
vivarium_report_get_egress (VivariumReport *self, const gchar **mode, const gchar **policy, const gchar **summary)
{
  *mode = self->egress_mode;
  *policy = self->egress_policy;
  *summary = self->egress_summary;
  return self->egress_mode != NULL;
}

gboolean
vivarium_report_get_model_usage (VivariumReport *self, guint64 out[VIVARIUM_REPORT_MODEL_N])
{
  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), FALSE);
  for (guint i = 0; i < VIVARIUM_REPORT_MODEL_N; i++)
    out[i] = self->model_usage[i];
  return self->has_model;
}

void
vivarium_report_set_summary (VivariumReport *self, const gchar *text, gssize len)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  if (text == NULL) {
    text = "";
    len = 0;
  }
  if (len < 0)
    len = (gssize) strlen (text);
  g_free (self->summary);
  self->summary = cap_text (text, len, VIVARIUM_REPORT_SUMMARY_MAX, &self->summary_truncated);
  /* The size received, so the reader sees how much was cut. */
  self->summary_size = (guint64) len;
}

void
vivarium_report_set_question (VivariumReport *self, const gchar *text, gssize len)
{
  g_return_if_fail (VIVARIUM_IS_REPORT (self));
  g_free (self->question);
  self->question = cap_text (text, len, VIVARIUM_REPORT_QUESTION_MAX, NULL);
}

/* --- getters -------------------------------------------------------------- */

#define DEFINE_GETTER(Type, name, field)                                        \
  Type                                                                         \
  vivarium_report_get_##name (VivariumReport *self)                            \
  {                                                                            \
    g_return_val_if_fail (VIVARIUM_IS_REPORT (self), (Type) 0);                \
    return self->field;                                                        \
  }

DEFINE_GETTER (const gchar *, id, id)
DEFINE_GETTER (const gchar *, task_id, task_id)
DEFINE_GETTER (const gchar *, session_id, session_id)
DEFINE_GETTER (const gchar *, image_name, image_name)
DEFINE_GETTER (const gchar *, image_digest, image_digest)
DEFINE_GETTER (const gchar *, project, project)
DEFINE_GETTER (gint64, started_at, started_at)
DEFINE_GETTER (gint64, ended_at, ended_at)
DEFINE_GETTER (const gchar *, host, host)
DEFINE_GETTER (const gchar *, daemon_version, daemon_version)
DEFINE_GETTER (VivariumOutcome, outcome, outcome)
DEFINE_GETTER (const gchar *, outcome_reason, outcome_reason)
DEFINE_GETTER (GPtrArray *, commands, commands)
DEFINE_GETTER (guint64, commands_omitted, commands_omitted)
DEFINE_GETTER (GPtrArray *, files, files)
DEFINE_GETTER (guint64, files_omitted, files_omitted)
DEFINE_GETTER (const gchar *, commit, commit)
DEFINE_GETTER (const gchar *, verify_command, verify_command)
DEFINE_GETTER (VivariumVerifyWhose, verify_whose, verify_whose)
DEFINE_GETTER (gint, verify_exit_status, verify_exit_status)
DEFINE_GETTER (VivariumVerdict, verify_verdict, verify_verdict)
DEFINE_GETTER (const gchar *, verify_session_id, verify_session_id)
DEFINE_GETTER (const gchar *, verify_reason, verify_reason)
DEFINE_GETTER (guint64, guard_dropped_packets, guard_packets)
DEFINE_GETTER (guint64, guard_dropped_bytes, guard_bytes)
DEFINE_GETTER (const gchar *, summary, summary)
DEFINE_GETTER (gboolean, summary_truncated, summary_truncated)
DEFINE_GETTER (guint64, summary_size, summary_size)
DEFINE_GETTER (const gchar *, question, question)

/* --- to JSON: the canonical member order is the order of these calls ---- */

static void
add_string_or_null (JsonBuilder *b, const gchar *name, const gchar *value)
{
  json_builder_set_member_name (b, name);
  if (value != NULL)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

static void
add_int (JsonBuilder *b, const gchar *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, value);
}

static void
add_lines (JsonBuilder *b, const gchar *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  if (value < 0)
    json_builder_add_null_value (b);
  else
    json_builder_add_int_value (b, value);
}

static void
add_command_json (JsonBuilder *b, const VivariumReportCommand *c, gboolean numbered)
{
  json_builder_begin_object (b);
  if (numbered)
    add_int (b, "number", (gint64) c->number);
  add_string_or_null (b, "kind", c->kind);
  json_builder_set_member_name (b, "argv");
  json_builder_begin_array (b);
  for (guint i = 0; c->argv[i] != NULL; i++)
    json_builder_add_string_value (b, c->argv[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "argv-truncated");
  json_builder_add_boolean_value (b, c->argv_truncated);
  add_int (b, "started-at", c->started_at);
  add_int (b, "duration", c->duration);
  add_int (b, "exit-status", c->exit_status);
  add_int (b, "stdout-size", (gint64) c->stdout_size);
  add_int (b, "stderr-size", (gint64) c->stderr_size);
  add_string_or_null (b, "error", c->error);
  if (c->stderr_head != NULL)
    add_string_or_null (b, "stderr-head", c->stderr_head);
  json_builder_end_object (b);
}

static void
add_skipped_json (JsonBuilder *b, const VivariumReportSkipped *k)
{
  json_builder_begin_object (b);
  add_string_or_null (b, "path", k->path);
  add_string_or_null (b, "kind", k->kind);
  add_string_or_null (b, "reason", k->reason);
  json_builder_end_object (b);
}

static void
add_file_json (JsonBuilder *b, const VivariumReportFile *f)
{
  json_builder_begin_object (b);
  add_string_or_null (b, "path", f->path);
  add_string_or_null (b, "change", vivarium_file_change_to_string (f->change));
  add_string_or_null (b, "kind", vivarium_file_kind_to_string (f->kind));
  add_lines (b, "lines-added", f->lines_added);
  add_lines (b, "lines-removed", f->lines_removed);
  json_builder_end_object (b);
}

static void
add_identity_json (JsonBuilder *b, VivariumReport *self)
{
  add_int (b, "version", VIVARIUM_REPORT_FORMAT_VERSION);
  add_string_or_null (b, "id", self->id);
  add_string_or_null (b, "task", self->task_id);
  add_string_or_null (b, "session", self->session_id);
  json_builder_set_member_name (b, "image");
  json_builder_begin_object (b);
  add_string_or_null (b, "name", self->image_name);
  add_string_or_null (b, "digest", self->image_digest);
  json_builder_end_object (b);
  add_string_or_null (b, "project", self->project);
  add_int (b, "started-at", self->started_at);
  add_int (b, "ended-at", self->ended_at);
  add_string_or_null (b, "host", self->host);
  add_string_or_null (b, "daemon-version", self->daemon_version);
  add_string_or_null (b, "outcome", vivarium_outcome_to_string (self->outcome));
  add_string_or_null (b, "outcome-reason", self->outcome_reason);
}

static void
add_work_json (JsonBuilder *b, VivariumReport *self)
{
  json_builder_set_member_name (b, "commands");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->commands->len; i++)
    add_command_json (b, g_ptr_array_index (self->commands, i), self->commands_numbered);
  json_builder_end_array (b);
  add_int (b, "commands-omitted", (gint64) self->commands_omitted);
  json_builder_set_member_name (b, "files");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->files->len; i++)
    add_file_json (b, g_ptr_array_index (self->files, i));
  json_builder_end_array (b);
  add_int (b, "files-omitted", (gint64) self->files_omitted);
  add_string_or_null (b, "commit", self->commit);
  if (self->not_committed->len > 0 || self->not_committed_omitted > 0) {
    json_builder_set_member_name (b, "not-committed");
    json_builder_begin_array (b);
    for (guint i = 0; i < self->not_committed->len; i++)
      add_skipped_json (b, g_ptr_array_index (self->not_committed, i));
    json_builder_end_array (b);
    add_int (b, "not-committed-omitted", (gint64) self->not_committed_omitted);
  }
  if (self->has_dataset) {
    json_builder_set_member_name (b, "dataset");
    json_builder_begin_object (b);
    add_int (b, "used-bytes", (gint64) self->dataset_used);
    add_int (b, "quota-bytes", (gint64) self->dataset_quota);
    json_builder_set_member_name (b, "full");
    json_builder_add_boolean_value (b, self->dataset_full);
    json_builder_end_object (b);
  }
  if (self->has_timings) {
    json_builder_set_member_name (b, "timings");
    json_builder_begin_object (b);
    for (guint i = 0; timing_names[i] != NULL; i++)
      add_int (b, timing_names[i], self->timings[i]);
    json_builder_end_object (b);
  }
  if (self->commands_failed_omitted > 0)
    add_int (b, "commands-failed-omitted", (gint64) self->commands_failed_omitted);
  if (self->command_log_digest != NULL) {
    json_builder_set_member_name (b, "command-log");
    json_builder_begin_object (b);
    add_string_or_null (b, "digest", self->command_log_digest);
    add_int (b, "entries", (gint64) self->command_log_entries);
    add_int (b, "not-kept", (gint64) self->command_log_not_kept);
    json_builder_end_object (b);
  }
}

static void
add_checks_json (JsonBuilder *b, VivariumReport *self)
{
  json_builder_set_member_name (b, "verification");
  json_builder_begin_object (b);
  add_string_or_null (b, "command", self->verify_command);
  add_string_or_null (b, "whose", vivarium_verify_whose_to_string (self->verify_whose));
  add_int (b, "exit-status", self->verify_exit_status);
  add_string_or_null (b, "verdict", vivarium_verdict_to_string (self->verify_verdict));
  add_string_or_null (b, "session", self->verify_session_id);
  if (self->verify_reason != NULL)
    add_string_or_null (b, "reason", self->verify_reason);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "guard");
  json_builder_begin_object (b);
  add_int (b, "dropped-packets", (gint64) self->guard_packets);
  add_int (b, "dropped-bytes", (gint64) self->guard_bytes);
  json_builder_end_object (b);
}

/* Only an agent task's report has it: every other report is unchanged. */
static const gchar *const model_members[] = { "requests", "refused", "prompt-tokens", "completion-tokens", NULL };

static const gchar *const egress_members[] = { "mode", "policy", "summary", NULL };

static void
add_egress_json (JsonBuilder *b, VivariumReport *self)
{
  if (self->egress_mode == NULL)
    return;
  json_builder_set_member_name (b, "egress");
  json_builder_begin_object (b);
  add_string_or_null (b, "mode", self->egress_mode);
  add_string_or_null (b, "policy", self->egress_policy);
  add_string_or_null (b, "summary", self->egress_summary);
  json_builder_end_object (b);
}

static void
add_model_json (JsonBuilder *b, VivariumReport *self)
{
  if (!self->has_model)
    return;
  json_builder_set_member_name (b, "model");
  json_builder_begin_object (b);
  for (guint i = 0; i < VIVARIUM_REPORT_MODEL_N; i++)
    add_int (b, model_members[i], (gint64) self->model_usage[i]);
  json_builder_end_object (b);
}

static void
add_claims_json (JsonBuilder *b, VivariumReport *self)
{
  json_builder_set_member_name (b, "summary");
  json_builder_begin_object (b);
  add_string_or_null (b, "text", self->summary);
  json_builder_set_member_name (b, "truncated");
  json_builder_add_boolean_value (b, self->summary_truncated);
  add_int (b, "size", (gint64) self->summary_size);
  json_builder_end_object (b);
  add_string_or_null (b, "question", self->question);
}

JsonNode *
vivarium_report_to_json (VivariumReport *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), NULL);
  json_builder_begin_object (b);
  add_identity_json (b, self);
  add_work_json (b, self);
  add_checks_json (b, self);
  add_model_json (b, self);
  add_egress_json (b, self);
  add_claims_json (b, self);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* --- from JSON: strict, every member required, nothing unknown --------- */

/* A member the reader does not know is named by the file: shown escaped
 * (printable ASCII only, as the text shows untrusted words) and cut, so no
 * byte of it reaches a terminal or a log as it came (tests/fuzz found the
 * raw bytes in the sentence). */
#define REFUSE_NAME_SHOWN 64

static gboolean
refuse (GError **error, const gchar *where, const gchar *name, const gchar *what)
{
  const gchar *dot = where[0] != '\0' && name[0] != '\0' ? "." : "";
  g_autofree gchar *shown = vivarium_report_escape_untrusted (name, FALSE);
  gboolean cut = strlen (shown) > REFUSE_NAME_SHOWN;

  if (cut)
    shown[REFUSE_NAME_SHOWN] = '\0';
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
               "The report's member “%s%s%s%s” %s", where, dot, shown, cut ? "…" : "", what);
  return FALSE;
}

/* Unknown members are refused: the signature covers the canonical form of
 * what was read, so anything ignored here would ride along unsigned. */
static const gchar *const optional_members[] = {
  "not-committed", "not-committed-omitted", "dataset", "timings", "stderr-head", "number",
  "commands-failed-omitted", "command-log",
  /* by its place: a not-committed entry's "reason" is required */
  "verification.reason", NULL
};

static gboolean
is_optional (const gchar *where, const gchar *name)
{
  g_autofree gchar *placed = g_strconcat (where, ".", name, NULL);

  return g_strv_contains (optional_members, name) || g_strv_contains (optional_members, placed);
}

/* The optional members are optional only where they belong (@allowed). */
static gboolean
check_members (JsonObject *obj, const gchar *where, const gchar * const *allowed, GError **error)
{
  g_autoptr(GList) names = json_object_get_members (obj);

  for (GList *l = names; l != NULL; l = l->next) {
    if (!g_strv_contains (allowed, l->data))
      return refuse (error, where, l->data, "is not a member a report has");
  }
  for (guint i = 0; allowed[i] != NULL; i++) {
    if (!json_object_has_member (obj, allowed[i]) && !is_optional (where, allowed[i]))
      return refuse (error, where, allowed[i], "is missing");
  }
  return TRUE;
}

static gboolean
is_type (JsonNode *node, GType type)
{
  return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type;
}

static gboolean
get_string (JsonObject *obj, const gchar *where, const gchar *name, gboolean nullable, gsize max,
            gchar **out, GError **error)
{
  JsonNode *node = json_object_get_member (obj, name);
  const gchar *s;

  if (nullable && JSON_NODE_HOLDS_NULL (node)) {
    *out = NULL;
    return TRUE;
  }
  if (!is_type (node, G_TYPE_STRING))
    return refuse (error, where, name, nullable ? "must be a string or null" : "must be a string");
  s = json_node_get_string (node);
  if (strlen (s) > max) {
    g_autofree gchar *what = g_strdup_printf ("is longer than %" G_GSIZE_FORMAT " bytes", max);
    return refuse (error, where, name, what);
  }
  *out = g_strdup (s);
  return TRUE;
}

static gboolean
get_int (JsonObject *obj, const gchar *where, const gchar *name, gint64 min, gint64 max,
         gint64 *out, GError **error)
{
  JsonNode *node = json_object_get_member (obj, name);
  gint64 v;

  if (!is_type (node, G_TYPE_INT64))
    return refuse (error, where, name, "must be an integer");
  v = json_node_get_int (node);
  if (v < min || v > max)
    return refuse (error, where, name, "is out of range");
  *out = v;
  return TRUE;
}

static gboolean
get_lines (JsonObject *obj, const gchar *where, const gchar *name, gint64 *out, GError **error)
{
  if (JSON_NODE_HOLDS_NULL (json_object_get_member (obj, name))) {
    *out = -1;
    return TRUE;
  }
  return get_int (obj, where, name, 0, G_MAXINT64, out, error);
}

static gboolean
get_bool (JsonObject *obj, const gchar *where, const gchar *name, gboolean *out, GError **error)
{
  JsonNode *node = json_object_get_member (obj, name);

  if (!is_type (node, G_TYPE_BOOLEAN))
    return refuse (error, where, name, "must be true or false");
  *out = json_node_get_boolean (node);
  return TRUE;
}

static gboolean
get_object (JsonObject *obj, const gchar *where, const gchar *name,
            const gchar * const *members, JsonObject **out, GError **error)
{
  JsonNode *node = json_object_get_member (obj, name);
  g_autofree gchar *inner = g_strdup_printf ("%s%s%s", where, where[0] != '\0' ? "." : "", name);

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return refuse (error, where, name, "must be an object");
  *out = json_node_get_object (node);
  return check_members (*out, inner, members, error);
}

static gboolean
get_array (JsonObject *obj, const gchar *where, const gchar *name, guint max, JsonArray **out,
           GError **error)
{
  JsonNode *node = json_object_get_member (obj, name);

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return refuse (error, where, name, "must be an array");
  *out = json_node_get_array (node);
  if (json_array_get_length (*out) > max) {
    g_autofree gchar *what = g_strdup_printf ("has more than %u entries", max);
    return refuse (error, where, name, what);
  }
  return TRUE;
}

/* An enum member: the table's strings are the only values. */
typedef gboolean (*FromStringFunc) (const gchar *str, gpointer value);

static gboolean
get_enum (JsonObject *obj, const gchar *where, const gchar *name, FromStringFunc from_string,
          gpointer value, GError **error)
{
  g_autofree gchar *s = NULL;

  if (!get_string (obj, where, name, FALSE, VIVARIUM_REPORT_KIND_MAX, &s, error))
    return FALSE;
  if (!from_string (s, value))
    return refuse (error, where, name, "has a value a report cannot have");
  return TRUE;
}

/* Ids, digests, commit ids and versions are the daemon's tokens: printable
 * ASCII without spaces, so a trusted line can show them as they are. */
static gboolean
get_token (JsonObject *obj, const gchar *where, const gchar *name, gboolean nullable,
           gchar **out, GError **error)
{
  if (!get_string (obj, where, name, nullable, VIVARIUM_REPORT_ID_MAX, out, error))
    return FALSE;
  if (*out == NULL)
    return TRUE;
  if ((*out)[0] == '\0')
    return refuse (error, where, name, "is empty");
  for (const gchar *p = *out; *p != '\0'; p++) {
    if (!g_ascii_isalnum (*p) && strchr ("._:+-", *p) == NULL)
      return refuse (error, where, name, "holds a character an id cannot have");
  }
  return TRUE;
}

/* A command's kind is a word the daemon chose: lowercase letters and '-'. */
static gboolean
get_word (JsonObject *obj, const gchar *where, const gchar *name, gchar **out, GError **error)
{
  if (!get_string (obj, where, name, FALSE, VIVARIUM_REPORT_KIND_MAX, out, error))
    return FALSE;
  if ((*out)[0] == '\0')
    return refuse (error, where, name, "is empty");
  for (const gchar *p = *out; *p != '\0'; p++) {
    if (!g_ascii_islower (*p) && *p != '-')
      return refuse (error, where, name, "holds a character a kind cannot have");
  }
  return TRUE;
}

static const gchar *const report_members[] = {
  "version", "id", "task", "session", "image", "project", "started-at", "ended-at", "host",
  "daemon-version", "outcome", "outcome-reason", "commands", "commands-omitted", "files",
  "files-omitted", "commit", "verification", "guard", "summary", "question",
  "not-committed", "not-committed-omitted", "dataset", "timings", "commands-failed-omitted", "command-log", NULL
};
static const gchar *const command_log_members[] = { "digest", "entries", "not-kept", NULL };
static const gchar *const skipped_members[] = { "path", "kind", "reason", NULL };
static const gchar *const dataset_members[] = { "used-bytes", "quota-bytes", "full", NULL };
static const gchar *const image_members[] = { "name", "digest", NULL };
static const gchar *const command_members[] = {
  "number", "kind", "argv", "argv-truncated", "started-at", "duration", "exit-status", "stdout-size",
  "stderr-size", "error", "stderr-head", NULL
};
static const gchar *const file_members[] = {
  "path", "change", "kind", "lines-added", "lines-removed", NULL
};
static const gchar *const verification_members[] = {
  "command", "whose", "exit-status", "verdict", "session", "reason", NULL
};
static const gchar *const guard_members[] = { "dropped-packets", "dropped-bytes", NULL };
static const gchar *const summary_members[] = { "text", "truncated", "size", NULL };

static gboolean
read_argv (JsonObject *obj, const gchar *where, VivariumReportCommand *c, GError **error)
{
  JsonArray *array = NULL;
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  gsize total = 0;

  if (!get_array (obj, where, "argv", VIVARIUM_REPORT_ARGV_MAX, &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++) {
    JsonNode *node = json_array_get_element (array, i);

    if (!is_type (node, G_TYPE_STRING))
      return refuse (error, where, "argv", "must be an array of strings");
    total += strlen (json_node_get_string (node));
    if (total > VIVARIUM_REPORT_ARGV_BYTES_MAX)
      return refuse (error, where, "argv", "holds more bytes than a report keeps");
    g_strv_builder_add (builder, json_node_get_string (node));
  }
  c->argv = g_strv_builder_end (builder);
  return TRUE;
}

/* Numbered lists (every report since the list skips commands) grow
 * strictly; a list from before has no numbers at all. */
static gboolean
read_number (JsonObject *obj, const gchar *where, VivariumReport *self, VivariumReportCommand *c,
             GError **error)
{
  gboolean numbered = json_object_has_member (obj, "number");
  gint64 number = 0;

  if (self->commands->len == 0)
    self->commands_numbered = numbered;
  else if (numbered != self->commands_numbered)
    return refuse (error, where, "number", "is on some commands of the list but not on all");
  if (!numbered) {
    c->number = self->commands_seen + 1;
  } else {
    if (!get_int (obj, where, "number", 1, G_MAXINT64, &number, error))
      return FALSE;
    if ((guint64) number <= self->commands_seen)
      return refuse (error, where, "number", "does not follow the number before it");
    c->number = (guint64) number;
  }
  self->commands_seen = c->number;
  return TRUE;
}

static gboolean
read_command (JsonNode *node, const gchar *where, VivariumReport *self, GError **error)
{
  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func ((GDestroyNotify) report_command_free);
  VivariumReportCommand *c = g_new0 (VivariumReportCommand, 1);
  JsonObject *obj;
  gint64 exit_status = 0, out = 0, err = 0;

  g_ptr_array_add (holder, c);
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return refuse (error, where, "", "must be an object");
  obj = json_node_get_object (node);
  if (!check_members (obj, where, command_members, error) ||
      !get_word (obj, where, "kind", &c->kind, error) ||
      !read_argv (obj, where, c, error) ||
      !get_bool (obj, where, "argv-truncated", &c->argv_truncated, error) ||
      !get_int (obj, where, "started-at", 0, G_MAXINT64, &c->started_at, error) ||
      !get_int (obj, where, "duration", 0, G_MAXINT64, &c->duration, error) ||
      !get_int (obj, where, "exit-status", G_MININT32, G_MAXINT32, &exit_status, error) ||
      !get_int (obj, where, "stdout-size", 0, G_MAXINT64, &out, error) ||
      !get_int (obj, where, "stderr-size", 0, G_MAXINT64, &err, error) ||
      !get_string (obj, where, "error", FALSE, VIVARIUM_REPORT_ERROR_MAX, &c->error, error))
    return FALSE;
  if (json_object_has_member (obj, "stderr-head") &&
      !get_string (obj, where, "stderr-head", FALSE, VIVARIUM_REPORT_STDERR_HEAD_MAX, &c->stderr_head, error))
    return FALSE;
  c->exit_status = (gint) exit_status;
  c->stdout_size = (guint64) out;
  c->stderr_size = (guint64) err;
  if (!read_number (obj, where, self, c, error))
    return FALSE;
  if (vivarium_report_command_failed (c))
    self->commands_failed_kept++;
  g_ptr_array_add (self->commands, g_ptr_array_steal_index (holder, 0));
  return TRUE;
}

static gboolean
read_file (JsonNode *node, const gchar *where, VivariumReport *self, GError **error)
{
  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func ((GDestroyNotify) report_file_free);
  VivariumReportFile *f = g_new0 (VivariumReportFile, 1);
  JsonObject *obj;

  g_ptr_array_add (holder, f);
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return refuse (error, where, "", "must be an object");
  obj = json_node_get_object (node);
  if (!check_members (obj, where, file_members, error) ||
      !get_string (obj, where, "path", FALSE, VIVARIUM_REPORT_PATH_MAX, &f->path, error) ||
      !get_enum (obj, where, "change", (FromStringFunc) vivarium_file_change_from_string,
                 &f->change, error) ||
      !get_enum (obj, where, "kind", (FromStringFunc) vivarium_file_kind_from_string,
                 &f->kind, error) ||
      !get_lines (obj, where, "lines-added", &f->lines_added, error) ||
      !get_lines (obj, where, "lines-removed", &f->lines_removed, error))
    return FALSE;
  if (f->path[0] == '\0')
    return refuse (error, where, "path", "is empty");
  g_ptr_array_add (self->files, g_ptr_array_steal_index (holder, 0));
  return TRUE;
}

typedef gboolean (*ReadEntryFunc) (JsonNode *node, const gchar *where, VivariumReport *self,
                                   GError **error);

static gboolean
read_list (JsonObject *obj, const gchar *name, guint max, ReadEntryFunc read_entry,
           VivariumReport *self, GError **error)
{
  JsonArray *array = NULL;

  if (!get_array (obj, "", name, max, &array, error))
    return FALSE;
  for (guint i = 0; i < json_array_get_length (array); i++) {
    g_autofree gchar *where = g_strdup_printf ("%s[%u]", name, i);

    if (!read_entry (json_array_get_element (array, i), where, self, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
read_identity (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *image = NULL;
  gint64 version = 0;
  g_autofree gchar *daemon_version = NULL;

  if (!get_int (obj, "", "version", 0, G_MAXINT64, &version, error))
    return FALSE;
  if (version != VIVARIUM_REPORT_FORMAT_VERSION)
    return refuse (error, "", "version", "is not a format version this program reads");
  if (!get_token (obj, "", "id", FALSE, &self->id, error) ||
      !get_token (obj, "", "task", FALSE, &self->task_id, error) ||
      !get_token (obj, "", "session", TRUE, &self->session_id, error) ||
      !get_object (obj, "", "image", image_members, &image, error) ||
      !get_token (image, "image", "name", TRUE, &self->image_name, error) ||
      !get_token (image, "image", "digest", TRUE, &self->image_digest, error) ||
      !get_token (obj, "", "project", TRUE, &self->project, error) ||
      !get_int (obj, "", "started-at", 0, G_MAXINT64, &self->started_at, error) ||
      !get_int (obj, "", "ended-at", 0, G_MAXINT64, &self->ended_at, error) ||
      !get_string (obj, "", "host", TRUE, VIVARIUM_REPORT_HOST_MAX, &self->host, error) ||
      !get_token (obj, "", "daemon-version", FALSE, &daemon_version, error) ||
      !get_enum (obj, "", "outcome", (FromStringFunc) vivarium_outcome_from_string,
                 &self->outcome, error) ||
      !get_string (obj, "", "outcome-reason", TRUE, VIVARIUM_REPORT_REASON_MAX,
                   &self->outcome_reason, error))
    return FALSE;
  g_free (self->daemon_version);
  self->daemon_version = g_steal_pointer (&daemon_version);
  return TRUE;
}

static gboolean
read_skipped (JsonNode *node, const gchar *where, VivariumReport *self, GError **error)
{
  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func ((GDestroyNotify) report_skipped_free);
  VivariumReportSkipped *k = g_new0 (VivariumReportSkipped, 1);
  JsonObject *obj;

  g_ptr_array_add (holder, k);
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return refuse (error, where, "", "must be an object");
  obj = json_node_get_object (node);
  if (!check_members (obj, where, skipped_members, error) ||
      !get_string (obj, where, "path", FALSE, VIVARIUM_REPORT_PATH_MAX, &k->path, error) ||
      !get_word (obj, where, "kind", &k->kind, error) ||
      !get_string (obj, where, "reason", FALSE, VIVARIUM_REPORT_REASON_MAX, &k->reason, error))
    return FALSE;
  g_ptr_array_add (self->not_committed, g_ptr_array_steal_index (holder, 0));
  return TRUE;
}

/* Both or neither: the writer puts them together. */
static gboolean
read_not_committed (JsonObject *obj, VivariumReport *self, GError **error)
{
  gint64 omitted = 0;
  gboolean has_list = json_object_has_member (obj, "not-committed");

  if (has_list != json_object_has_member (obj, "not-committed-omitted"))
    return refuse (error, "", "not-committed", "comes without not-committed-omitted, or the other way round");
  if (!has_list)
    return TRUE;
  if (!read_list (obj, "not-committed", VIVARIUM_REPORT_FILES_MAX, read_skipped, self, error) ||
      !get_int (obj, "", "not-committed-omitted", 0, G_MAXINT64, &omitted, error))
    return FALSE;
  if (self->not_committed->len == 0 && omitted == 0)
    return refuse (error, "", "not-committed", "is empty (the writer leaves it out then)");
  self->not_committed_omitted = (guint64) omitted;
  return TRUE;
}

static gboolean
read_dataset (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *d = NULL;
  gint64 used = 0, quota = 0;
  gboolean full = FALSE;

  if (!json_object_has_member (obj, "dataset"))
    return TRUE;
  if (!get_object (obj, "", "dataset", dataset_members, &d, error) ||
      !get_int (d, "dataset", "used-bytes", 0, G_MAXINT64, &used, error) ||
      !get_int (d, "dataset", "quota-bytes", 0, G_MAXINT64, &quota, error) ||
      !get_bool (d, "dataset", "full", &full, error))
    return FALSE;
  vivarium_report_set_dataset (self, (guint64) used, (guint64) quota);
  /* "full" follows from the numbers; a file that says otherwise is not ours. */
  if (full != self->dataset_full)
    return refuse (error, "dataset", "full", "does not follow from used-bytes and quota-bytes");
  return TRUE;
}

static gboolean
read_timings (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *t = NULL;
  gint64 v[4] = { 0 };

  if (!json_object_has_member (obj, "timings"))
    return TRUE;
  if (!get_object (obj, "", "timings", timing_names, &t, error))
    return FALSE;
  for (guint i = 0; timing_names[i] != NULL; i++) {
    if (!get_int (t, "timings", timing_names[i], 0, G_MAXINT64, &v[i], error))
      return FALSE;
  }
  vivarium_report_set_timings (self, v[0], v[1], v[2], v[3]);
  return TRUE;
}

/* The optional command-log fact and the count of failed commands left
 * out, which cannot exceed the count of all left out. */
static gboolean
read_command_log (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *l = NULL;
  gint64 failed = 0, entries = 0, not_kept = 0;

  if (json_object_has_member (obj, "commands-failed-omitted")) {
    if (!get_int (obj, "", "commands-failed-omitted", 1, G_MAXINT64, &failed, error))
      return FALSE;
    if ((guint64) failed > self->commands_omitted)
      return refuse (error, "", "commands-failed-omitted", "is more than commands-omitted");
    self->commands_failed_omitted = (guint64) failed;
  }
  if (!json_object_has_member (obj, "command-log"))
    return TRUE;
  if (!get_object (obj, "", "command-log", command_log_members, &l, error) ||
      !get_token (l, "command-log", "digest", FALSE, &self->command_log_digest, error) ||
      !get_int (l, "command-log", "entries", 0, G_MAXINT64, &entries, error) ||
      !get_int (l, "command-log", "not-kept", 0, G_MAXINT64, &not_kept, error))
    return FALSE;
  if ((guint64) not_kept > self->commands_omitted)
    return refuse (error, "command-log", "not-kept", "is more than commands-omitted");
  self->command_log_entries = (guint64) entries;
  self->command_log_not_kept = (guint64) not_kept;
  return TRUE;
}

static gboolean
read_work (JsonObject *obj, VivariumReport *self, GError **error)
{
  gint64 commands_omitted = 0, files_omitted = 0;

  if (!read_list (obj, "commands", VIVARIUM_REPORT_COMMANDS_MAX, read_command, self, error) ||
      !get_int (obj, "", "commands-omitted", 0, G_MAXINT64, &commands_omitted, error) ||
      !read_list (obj, "files", VIVARIUM_REPORT_FILES_MAX, read_file, self, error) ||
      !get_int (obj, "", "files-omitted", 0, G_MAXINT64, &files_omitted, error) ||
      !get_token (obj, "", "commit", TRUE, &self->commit, error))
    return FALSE;
  self->commands_omitted = (guint64) commands_omitted;
  self->files_omitted = (guint64) files_omitted;
  return read_not_committed (obj, self, error) && read_dataset (obj, self, error) &&
         read_timings (obj, self, error) && read_command_log (obj, self, error);
}

static gboolean
read_checks (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *v = NULL;
  JsonObject *g = NULL;
  gint64 exit_status = 0, packets = 0, bytes = 0;

  if (!get_object (obj, "", "verification", verification_members, &v, error) ||
      !get_string (v, "verification", "command", TRUE, VIVARIUM_REPORT_VERIFY_CMD_MAX,
                   &self->verify_command, error) ||
      !get_enum (v, "verification", "whose", (FromStringFunc) vivarium_verify_whose_from_string,
                 &self->verify_whose, error) ||
      !get_int (v, "verification", "exit-status", G_MININT32, G_MAXINT32, &exit_status, error) ||
      !get_enum (v, "verification", "verdict", (FromStringFunc) vivarium_verdict_from_string,
                 &self->verify_verdict, error) ||
      !get_token (v, "verification", "session", TRUE, &self->verify_session_id, error) ||
      (json_object_has_member (v, "reason") &&
       !get_string (v, "verification", "reason", FALSE, VIVARIUM_REPORT_REASON_MAX, &self->verify_reason, error)) ||
      !get_object (obj, "", "guard", guard_members, &g, error) ||
      !get_int (g, "guard", "dropped-packets", 0, G_MAXINT64, &packets, error) ||
      !get_int (g, "guard", "dropped-bytes", 0, G_MAXINT64, &bytes, error))
    return FALSE;
  self->verify_exit_status = (gint) exit_status;
  self->guard_packets = (guint64) packets;
  self->guard_bytes = (guint64) bytes;
  return TRUE;
}

static gboolean
read_claims (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *s = NULL;
  g_autofree gchar *text = NULL;
  gint64 size = 0;

  if (!get_object (obj, "", "summary", summary_members, &s, error) ||
      !get_string (s, "summary", "text", FALSE, VIVARIUM_REPORT_SUMMARY_MAX, &text, error) ||
      !get_bool (s, "summary", "truncated", &self->summary_truncated, error) ||
      !get_int (s, "summary", "size", 0, G_MAXINT64, &size, error) ||
      !get_string (obj, "", "question", TRUE, VIVARIUM_REPORT_QUESTION_MAX, &self->question,
                   error))
    return FALSE;
  g_free (self->summary);
  self->summary = g_steal_pointer (&text);
  self->summary_size = (guint64) size;
  return TRUE;
}

/* The optional "model" object (an agent task's). */
static gboolean
read_model (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *m = NULL;

  if (!json_object_has_member (obj, "model"))
    return TRUE;
  if (!get_object (obj, "", "model", model_members, &m, error))
    return FALSE;
  for (guint i = 0; i < VIVARIUM_REPORT_MODEL_N; i++) {
    gint64 v = 0;
    if (!get_int (m, "model", model_members[i], 0, G_MAXINT64, &v, error))
      return FALSE;
    self->model_usage[i] = (guint64) v;
  }
  self->has_model = TRUE;
  return TRUE;
}

/* The optional "egress" object (reports since egress by name). */
static gboolean
read_egress (JsonObject *obj, VivariumReport *self, GError **error)
{
  JsonObject *e = NULL;

  if (!json_object_has_member (obj, "egress"))
    return TRUE;
  return get_object (obj, "", "egress", egress_members, &e, error) &&
         get_string (e, "egress", "mode", FALSE, VIVARIUM_REPORT_EGRESS_MAX, &self->egress_mode, error) &&
         get_string (e, "egress", "policy", FALSE, VIVARIUM_REPORT_EGRESS_MAX, &self->egress_policy, error) &&
         get_string (e, "egress", "summary", FALSE, VIVARIUM_REPORT_EGRESS_MAX, &self->egress_summary, error);
}

/* The optional members, read; then the rest is checked without them. */
static gboolean
read_optional (JsonObject *obj, VivariumReport *self, JsonObject **rest, GError **error)
{
  const gchar *optional[] = { "model", "egress", NULL };
  g_autoptr(GList) names = NULL;

  if (!read_model (obj, self, error) || !read_egress (obj, self, error))
    return FALSE;
  *rest = json_object_new ();
  names = json_object_get_members (obj);
  for (GList *l = names; l != NULL; l = l->next)
    if (!g_strv_contains (optional, l->data))
      json_object_set_member (*rest, l->data, json_node_copy (json_object_get_member (obj, l->data)));
  return TRUE;
}

VivariumReport *
vivarium_report_from_json (JsonNode *node, GError **error)
{
  g_autoptr(VivariumReport) self = vivarium_report_new ();
  g_autoptr(JsonObject) rest = NULL;
  JsonObject *obj;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "A report must be a JSON object");
    return NULL;
  }
  if (!read_optional (json_node_get_object (node), self, &rest, error))
    return NULL;
  obj = rest;
  if (!check_members (obj, "", report_members, error) ||
      !read_identity (obj, self, error) ||
      !read_work (obj, self, error) ||
      !read_checks (obj, self, error) ||
      !read_claims (obj, self, error))
    return NULL;
  return g_steal_pointer (&self);
}

GBytes *
vivarium_report_to_canonical (VivariumReport *self, GError **error)
{
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(VivariumReport) back = NULL;
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  gsize len = 0;
  gchar *text;

  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), NULL);
  root = vivarium_report_to_json (self);
  /* What the daemon signs must be what any reader accepts. */
  back = vivarium_report_from_json (root, error);
  if (back == NULL)
    return NULL;
  json_generator_set_pretty (generator, FALSE);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, &len);
  return g_bytes_new_take (text, len);
}
