/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-report.h"

/* The rendered text. Its grammar is in vivarium-report.h and
 * docs/report-format.md; it is not translated, so that anyone (and a test)
 * can tell the daemon's lines from the worker's words in any locale. */

/* Every key a trusted line may start with. The renderer writes column 0
 * only through trusted_line(), which refuses any other key. */
static const gchar *const text_keys[] = {
  "Report",
  "Signature",
  "Task",
  "Session",
  "Image",
  "Image digest",
  "Project",
  "Started",
  "Ended",
  "Host",
  "Daemon",
  "Outcome",
  "Commit",
  "Verification",
  "Verification session",
  "Guard",
  "Model",
  "Commands",
  "Command",
  "Commands omitted",
  "Files changed",
  "File",
  "Files omitted",
  "Not committed",
  "Not committed omitted",
  "Dataset",
  "Timings",
  "Warning",
  "Summary size",
  "Worker's claim (unverified)",
  "Worker's question (unverified)",
  NULL
};

const gchar * const *
vivarium_report_text_keys (void)
{
  return text_keys;
}

/* --- escaping ------------------------------------------------------------ */

/* One rule for every untrusted string: printable ASCII stays (but '\\',
 * and '"' when quoted), everything else (controls, ESC, DEL, C1, bidi
 * controls, zero-width and format characters, separators, and every other
 * non-ASCII character, so no look-alike can imitate a key) becomes
 * \u{XXXX}. Bytes that are not UTF-8 become \x{XX}. */
static void
append_escaped (GString *out, const gchar *text, gboolean quoted)
{
  const gchar *p = text != NULL ? text : "";
  const gchar *end = p + strlen (p);

  while (p < end) {
    gunichar c = g_utf8_get_char_validated (p, end - p);

    if (c == (gunichar) -1 || c == (gunichar) -2) {
      g_string_append_printf (out, "\\x{%02X}", (guchar) *p);
      p++;
      continue;
    }
    if (c == '\\')
      g_string_append (out, "\\\\");
    else if (quoted && c == '"')
      g_string_append (out, "\\\"");
    else if (c >= 0x20 && c < 0x7f)
      g_string_append_c (out, (gchar) c);
    else
      g_string_append_printf (out, "\\u{%04X}", c);
    p = g_utf8_next_char (p);
  }
}

gchar *
vivarium_report_escape_untrusted (const gchar *text, gboolean quoted)
{
  GString *out = g_string_new (quoted ? "\"" : "");

  append_escaped (out, text, quoted);
  if (quoted)
    g_string_append_c (out, '"');
  return g_string_free (out, FALSE);
}

/* --- lines --------------------------------------------------------------- */

/* @value is the daemon's (numbers, enum words, tokens, times); it is still
 * escaped, so not even a daemon string can break the line. */
static void
trusted_line (GString *out, const gchar *key, const gchar *value)
{
  g_return_if_fail (g_strv_contains (text_keys, key));
  g_string_append (out, key);
  g_string_append_c (out, ':');
  if (value != NULL && value[0] != '\0') {
    g_string_append_c (out, ' ');
    append_escaped (out, value, FALSE);
  }
  g_string_append_c (out, '\n');
}

G_GNUC_PRINTF (3, 4)
static void
trusted_linef (GString *out, const gchar *key, const gchar *format, ...)
{
  va_list args;
  g_autofree gchar *value = NULL;

  va_start (args, format);
  value = g_strdup_vprintf (format, args);
  va_end (args);
  trusted_line (out, key, value);
}

/* Untrusted strings only ever appear here, indented and quoted. */
static void
detail_line (GString *out, const gchar *label, const gchar *value)
{
  g_string_append (out, VIVARIUM_REPORT_TEXT_DETAIL);
  g_string_append (out, label);
  g_string_append (out, ": \"");
  append_escaped (out, value, TRUE);
  g_string_append (out, "\"\n");
}

static void
detail_argv (GString *out, const gchar * const *argv, gboolean truncated)
{
  g_string_append (out, VIVARIUM_REPORT_TEXT_DETAIL "argv:");
  for (guint i = 0; argv[i] != NULL; i++) {
    g_string_append (out, " \"");
    append_escaped (out, argv[i], TRUE);
    g_string_append_c (out, '"');
  }
  if (truncated)
    g_string_append (out, " (truncated)");
  g_string_append_c (out, '\n');
}

/* The worker's text, line by line, behind the quote marker. */
static void
quote_block (GString *out, const gchar *text)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  guint n = g_strv_length (lines);

  /* A final newline ends the last line; it does not start another. */
  if (n > 0 && lines[n - 1][0] == '\0')
    n--;
  for (guint i = 0; i < n; i++) {
    g_string_append (out, VIVARIUM_REPORT_TEXT_QUOTE);
    append_escaped (out, lines[i], FALSE);
    g_string_append_c (out, '\n');
  }
}

static const gchar *
or_none (const gchar *s)
{
  return s != NULL && s[0] != '\0' ? s : "none";
}

static gchar *
format_time (gint64 usec)
{
  g_autoptr(GDateTime) t = NULL;

  if (usec <= 0)
    return g_strdup ("unknown");
  t = g_date_time_new_from_unix_utc (usec / G_USEC_PER_SEC);
  if (t == NULL)
    return g_strdup ("unknown");
  return g_date_time_format (t, "%Y-%m-%dT%H:%M:%SZ");
}

static gchar *
format_duration (gint64 usec)
{
  return g_strdup_printf ("%" G_GINT64_FORMAT ".%03" G_GINT64_FORMAT " s",
                          usec / G_USEC_PER_SEC, (usec / 1000) % 1000);
}

static gchar *
format_exit_status (gint status)
{
  if (status < 0)
    return g_strdup ("none reported");
  return g_strdup_printf ("%d", status);
}

/* --- sections ------------------------------------------------------------ */

static void
render_identity (GString *out, VivariumReport *self, const gchar *fingerprint)
{
  g_autofree gchar *started = format_time (vivarium_report_get_started_at (self));
  g_autofree gchar *ended = format_time (vivarium_report_get_ended_at (self));
  const gchar *reason = vivarium_report_get_outcome_reason (self);

  trusted_line (out, "Report", vivarium_report_get_id (self));
  if (fingerprint != NULL)
    trusted_linef (out, "Signature", "valid, made with the key %s", fingerprint);
  else
    trusted_line (out, "Signature", "NOT VERIFIED");
  trusted_line (out, "Task", vivarium_report_get_task_id (self));
  trusted_line (out, "Session", or_none (vivarium_report_get_session_id (self)));
  trusted_line (out, "Image", or_none (vivarium_report_get_image_name (self)));
  trusted_line (out, "Image digest", or_none (vivarium_report_get_image_digest (self)));
  trusted_line (out, "Project", or_none (vivarium_report_get_project (self)));
  trusted_line (out, "Started", started);
  trusted_line (out, "Ended", ended);
  trusted_line (out, "Host", or_none (vivarium_report_get_host (self)));
  trusted_linef (out, "Daemon", "vivariumd %s", vivarium_report_get_daemon_version (self));
  trusted_line (out, "Outcome", vivarium_outcome_to_string (vivarium_report_get_outcome (self)));
  if (reason != NULL)
    detail_line (out, "reason", reason);
  trusted_line (out, "Commit", or_none (vivarium_report_get_commit (self)));
}

static const gchar *
whose_words (VivariumVerifyWhose whose)
{
  switch (whose) {
  case VIVARIUM_VERIFY_WHOSE_CALLER:
    return "the caller's command";
  case VIVARIUM_VERIFY_WHOSE_WORKER:
    return "the worker's command";
  case VIVARIUM_VERIFY_WHOSE_NONE:
  default:
    return "no command was given";
  }
}

static void render_timings (GString *out, VivariumReport *self);

static void
render_verification (GString *out, VivariumReport *self)
{
  VivariumVerdict verdict = vivarium_report_get_verify_verdict (self);
  g_autofree gchar *status = format_exit_status (vivarium_report_get_verify_exit_status (self));
  const gchar *command = vivarium_report_get_verify_command (self);
  const gchar *commit = vivarium_report_get_commit (self);

  g_string_append_c (out, '\n');
  if (verdict == VIVARIUM_VERDICT_NEVER_RUN)
    trusted_linef (out, "Verification", "not run (%s)",
                   whose_words (vivarium_report_get_verify_whose (self)));
  else
    trusted_linef (out, "Verification", "%s (%s, exit status %s in a fresh session)%s%s",
                   vivarium_verdict_to_string (verdict),
                   whose_words (vivarium_report_get_verify_whose (self)), status,
                   /* It ran on exactly the commit: the daemon removed what was not committed. */
                   commit != NULL ? ", verified: commit " : "", commit != NULL ? commit : "");
  if (command != NULL)
    detail_line (out, "command", command);
  trusted_line (out, "Verification session",
                or_none (vivarium_report_get_verify_session_id (self)));
  trusted_linef (out, "Guard", "%" G_GUINT64_FORMAT " packets, %" G_GUINT64_FORMAT
                 " bytes dropped", vivarium_report_get_guard_dropped_packets (self),
                 vivarium_report_get_guard_dropped_bytes (self));
  render_timings (out, self);
  {
    guint64 m[VIVARIUM_REPORT_MODEL_N];
    if (vivarium_report_get_model_usage (self, m))
      trusted_linef (out, "Model", "%" G_GUINT64_FORMAT " requests through the gateway (%" G_GUINT64_FORMAT
                     " refused); %" G_GUINT64_FORMAT " prompt and %" G_GUINT64_FORMAT
                     " completion tokens as the model server reported", m[VIVARIUM_REPORT_MODEL_REQUESTS],
                     m[VIVARIUM_REPORT_MODEL_REFUSED], m[VIVARIUM_REPORT_MODEL_PROMPT_TOKENS],
                     m[VIVARIUM_REPORT_MODEL_COMPLETION_TOKENS]);
  }
}

static void
render_command (GString *out, guint n, const VivariumReportCommand *c)
{
  g_autofree gchar *duration = format_duration (c->duration);
  g_autofree gchar *status = format_exit_status (c->exit_status);

  trusted_linef (out, "Command", "%u %s, exit status %s, %s, stdout %" G_GUINT64_FORMAT
                 " bytes, stderr %" G_GUINT64_FORMAT " bytes", n, c->kind, status, duration,
                 c->stdout_size, c->stderr_size);
  detail_argv (out, (const gchar * const *) c->argv, c->argv_truncated);
  if (c->error != NULL && c->error[0] != '\0')
    detail_line (out, "error", c->error);
  if (c->stderr_head != NULL)
    detail_line (out, "stderr", c->stderr_head);
}

static void
render_commands (GString *out, VivariumReport *self)
{
  GPtrArray *commands = vivarium_report_get_commands (self);
  guint64 omitted = vivarium_report_get_commands_omitted (self);

  g_string_append_c (out, '\n');
  trusted_linef (out, "Commands", "%" G_GUINT64_FORMAT " run", commands->len + omitted);
  for (guint i = 0; i < commands->len; i++)
    render_command (out, i + 1, g_ptr_array_index (commands, i));
  if (omitted > 0)
    trusted_linef (out, "Commands omitted", "%" G_GUINT64_FORMAT " (a report lists the first %u)",
                   omitted, commands->len);
}

/* What the daemon refused to commit: the worker's tampering, said. */
static void
render_not_committed (GString *out, VivariumReport *self)
{
  GPtrArray *skipped = vivarium_report_get_not_committed (self);
  guint64 omitted = vivarium_report_get_not_committed_omitted (self);

  if (skipped->len == 0 && omitted == 0)
    return;
  trusted_linef (out, "Not committed", "%" G_GUINT64_FORMAT " (removed from the tree, never in the repository)",
                 skipped->len + omitted);
  for (guint i = 0; i < skipped->len; i++) {
    const VivariumReportSkipped *k = g_ptr_array_index (skipped, i);
    detail_line (out, "path", k->path);
    detail_line (out, "kind", k->kind);
    detail_line (out, "reason", k->reason);
  }
  if (omitted > 0)
    trusted_linef (out, "Not committed omitted", "%" G_GUINT64_FORMAT " (a report lists the first %u)",
                   omitted, skipped->len);
}

static void
render_dataset (GString *out, VivariumReport *self)
{
  guint64 used = 0, quota = 0;
  gboolean full = FALSE;

  if (!vivarium_report_get_dataset (self, &used, &quota, &full))
    return;
  trusted_linef (out, "Dataset", "%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " bytes used%s", used, quota,
                 full ? ", FULL: the quota was reached, writes past it failed in the guest" : "");
}

static void
render_timings (GString *out, VivariumReport *self)
{
  gint64 t[4];

  if (!vivarium_report_get_timings (self, &t[0], &t[1], &t[2], &t[3]))
    return;
  trusted_linef (out, "Timings", "work session start %" G_GINT64_FORMAT " ms, worker %" G_GINT64_FORMAT
                 " ms, commit %" G_GINT64_FORMAT " ms, verification %" G_GINT64_FORMAT " ms",
                 t[0] / 1000, t[1] / 1000, t[2] / 1000, t[3] / 1000);
}

static void
render_files (GString *out, VivariumReport *self)
{
  GPtrArray *files = vivarium_report_get_files (self);
  guint64 omitted = vivarium_report_get_files_omitted (self);

  g_string_append_c (out, '\n');
  trusted_linef (out, "Files changed", "%" G_GUINT64_FORMAT, files->len + omitted);
  for (guint i = 0; i < files->len; i++) {
    const VivariumReportFile *f = g_ptr_array_index (files, i);
    g_autofree gchar *lines = NULL;

    if (f->lines_added >= 0 && f->lines_removed >= 0)
      lines = g_strdup_printf (", +%" G_GINT64_FORMAT " -%" G_GINT64_FORMAT, f->lines_added,
                               f->lines_removed);
    trusted_linef (out, "File", "%u %s %s%s", i + 1, vivarium_file_change_to_string (f->change),
                   vivarium_file_kind_to_string (f->kind), lines != NULL ? lines : "");
    detail_line (out, "path", f->path);
  }
  if (omitted > 0)
    trusted_linef (out, "Files omitted", "%" G_GUINT64_FORMAT " (a report lists the first %u)",
                   omitted, files->len);
  render_not_committed (out, self);
  render_dataset (out, self);
}

static const gchar *
claim_warning (VivariumVerdict verdict)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS:
    return NULL;
  case VIVARIUM_VERDICT_FAIL:
    return "the verification re-run FAILED; the worker's summary below is a claim, not a finding";
  case VIVARIUM_VERDICT_INCONCLUSIVE:
    return "the verification re-run was inconclusive; the worker's summary below is a claim, "
           "not a finding";
  case VIVARIUM_VERDICT_NEVER_RUN:
  default:
    return "no verification re-run took place; the worker's summary below is a claim, "
           "not a finding";
  }
}

static void
render_claims (GString *out, VivariumReport *self)
{
  const gchar *warning = claim_warning (vivarium_report_get_verify_verdict (self));
  const gchar *summary = vivarium_report_get_summary (self);
  const gchar *question = vivarium_report_get_question (self);

  g_string_append_c (out, '\n');
  if (warning != NULL)
    trusted_line (out, "Warning", warning);
  if (vivarium_report_get_summary_truncated (self))
    trusted_linef (out, "Summary size", "%" G_GUINT64_FORMAT " bytes received, truncated to "
                   "the first %" G_GSIZE_FORMAT, vivarium_report_get_summary_size (self),
                   strlen (summary));
  else
    trusted_linef (out, "Summary size", "%" G_GUINT64_FORMAT " bytes",
                   vivarium_report_get_summary_size (self));
  trusted_line (out, "Worker's claim (unverified)", summary[0] == '\0' ? "none given" : NULL);
  quote_block (out, summary);
  if (question != NULL) {
    trusted_line (out, "Worker's question (unverified)", question[0] == '\0' ? "empty" : NULL);
    quote_block (out, question);
  }
}

gchar *
vivarium_report_render_text (VivariumReport *self, const gchar *key_fingerprint)
{
  GString *out = g_string_new (NULL);

  g_return_val_if_fail (VIVARIUM_IS_REPORT (self), NULL);
  render_identity (out, self, key_fingerprint);
  render_verification (out, self);
  render_commands (out, self);
  render_files (out, self);
  render_claims (out, self);
  return g_string_free (out, FALSE);
}
