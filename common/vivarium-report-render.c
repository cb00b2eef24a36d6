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
  "Egress",
  "Commands",
  "Command",
  "Commands omitted",
  "Command log",
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
/* One character (or one byte that is not UTF-8) of @p, escaped: the unit
 * a wrapped line is never split inside. Returns where the next one starts. */
static const gchar *
append_escaped_char (GString *out, const gchar *p, const gchar *end, gboolean quoted)
{
  gunichar c = g_utf8_get_char_validated (p, end - p);

  if (c == (gunichar) -1 || c == (gunichar) -2) {
    g_string_append_printf (out, "\\x{%02X}", (guchar) *p);
    return p + 1;
  }
  if (c == '\\')
    g_string_append (out, "\\\\");
  else if (quoted && c == '"')
    g_string_append (out, "\\\"");
  else if (c >= 0x20 && c < 0x7f)
    g_string_append_c (out, (gchar) c);
  else
    g_string_append_printf (out, "\\u{%04X}", c);
  return g_utf8_next_char (p);
}

static void
append_escaped (GString *out, const gchar *text, gboolean quoted)
{
  const gchar *p = text != NULL ? text : "";
  const gchar *end = p + strlen (p);

  while (p < end)
    p = append_escaped_char (out, p, end, quoted);
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

/* One line of the worker's text behind the quote marker, in pieces of at
 * most VIVARIUM_REPORT_TEXT_QUOTE_WIDTH columns (the escaped text is
 * printable ASCII: a byte is a column), each escape whole, each piece
 * that goes on ending with the continuation mark '\\'. However long the
 * worker's line, none of it reaches column 0 of an 80-column terminal. */
static void
quote_line (GString *out, const gchar *line)
{
  const gchar *p = line;
  const gchar *end = line + strlen (line);
  g_autoptr(GString) piece = g_string_new (NULL);
  g_autoptr(GString) unit = g_string_new (NULL);

  do {
    g_string_truncate (unit, 0);
    if (p < end)
      p = append_escaped_char (unit, p, end, FALSE);
    /* Room for the mark if anything follows this unit. */
    if (piece->len > 0 && piece->len + unit->len + 1 > VIVARIUM_REPORT_TEXT_QUOTE_WIDTH) {
      g_string_append_printf (out, VIVARIUM_REPORT_TEXT_QUOTE "%s\\\n", piece->str);
      g_string_truncate (piece, 0);
    }
    g_string_append_len (piece, unit->str, (gssize) unit->len);
  } while (p < end);
  g_string_append_printf (out, VIVARIUM_REPORT_TEXT_QUOTE "%s\n", piece->str);
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
  for (guint i = 0; i < n; i++)
    quote_line (out, lines[i]);
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

/* A command's exit status is what the guest agent said, never more. */
static gchar *
format_guest_status (gint status)
{
  if (status < 0)
    return g_strdup ("the guest agent reported no exit status");
  return g_strdup_printf ("exit %d (the guest agent's word)", status);
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
    /* The worker chose what to check: its pass proves what it chose. */
    return "the worker's own command";
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
  if (vivarium_report_get_verify_reason (self) != NULL)
    detail_line (out, "reason", vivarium_report_get_verify_reason (self));
  trusted_line (out, "Verification session",
                or_none (vivarium_report_get_verify_session_id (self)));
  trusted_linef (out, "Guard", "%" G_GUINT64_FORMAT " packets, %" G_GUINT64_FORMAT
                 " bytes dropped", vivarium_report_get_guard_dropped_packets (self),
                 vivarium_report_get_guard_dropped_bytes (self));
  render_timings (out, self);
  {
    const gchar *mode, *policy, *summary;
    if (vivarium_report_get_egress (self, &mode, &policy, &summary)) {
      trusted_linef (out, "Egress", "%s%s%s%s", mode, policy[0] != '\0' ? " (" : "", policy,
                     policy[0] != '\0' ? ")" : "");
      if (summary[0] != '\0')
        detail_line (out, "decisions", summary);
    }
  }
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
render_command (GString *out, const VivariumReportCommand *c)
{
  g_autofree gchar *duration = format_duration (c->duration);
  g_autofree gchar *status = format_guest_status (c->exit_status);

  trusted_linef (out, "Command", "%" G_GUINT64_FORMAT " %s, %s, %s, stdout %" G_GUINT64_FORMAT
                 " bytes, stderr %" G_GUINT64_FORMAT " bytes%s", c->number, c->kind, status, duration,
                 c->stdout_size, c->stderr_size, vivarium_report_command_failed (c) ? ", FAILED" : "");
  detail_argv (out, (const gchar * const *) c->argv, c->argv_truncated);
  if (c->error != NULL && c->error[0] != '\0')
    detail_line (out, "error", c->error);
  if (c->stderr_head != NULL)
    detail_line (out, "stderr", c->stderr_head);
}

static void
render_commands_omitted (GString *out, VivariumReport *self)
{
  guint64 omitted = vivarium_report_get_commands_omitted (self);
  guint64 failed = vivarium_report_get_commands_failed_omitted (self);

  if (omitted == 0)
    return;
  /* A report from before the numbers listed the first ones only. */
  if (!vivarium_report_get_commands_numbered (self))
    trusted_linef (out, "Commands omitted", "%" G_GUINT64_FORMAT " (a report lists the first %u)",
                   omitted, vivarium_report_get_commands (self)->len);
  else
    trusted_linef (out, "Commands omitted", "%" G_GUINT64_FORMAT " left out of the list, %" G_GUINT64_FORMAT
                   " of them failed (it lists every failed command up to the first and last %u, and the "
                   "first and last %u of the rest)", omitted, failed, VIVARIUM_REPORT_COMMANDS_FAILED_EDGE,
                   VIVARIUM_REPORT_COMMANDS_EDGE);
}

/* The full log is a file beside the report; the signature covers its
 * digest, so it is as checkable as the list. */
static void
render_command_log (GString *out, VivariumReport *self)
{
  const gchar *digest = NULL;
  guint64 entries = 0, not_kept = 0;

  if (!vivarium_report_get_command_log (self, &digest, &entries, &not_kept))
    return;
  trusted_linef (out, "Command log", "%" G_GUINT64_FORMAT " commands in %s" VIVARIUM_REPORT_COMMAND_LOG_SUFFIX
                 " beside the report, %s%s", entries, vivarium_report_get_id (self), digest,
                 not_kept > 0 ? "; the session's oldest commands before them were not kept" : "");
}

static void
render_commands (GString *out, VivariumReport *self)
{
  GPtrArray *commands = vivarium_report_get_commands (self);
  guint64 omitted = vivarium_report_get_commands_omitted (self);

  g_string_append_c (out, '\n');
  trusted_linef (out, "Commands", "%" G_GUINT64_FORMAT " run", commands->len + omitted);
  for (guint i = 0; i < commands->len; i++)
    render_command (out, g_ptr_array_index (commands, i));
  render_commands_omitted (out, self);
  render_command_log (out, self);
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
claim_warning (VivariumVerdict verdict, VivariumVerifyWhose whose)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS:
    if (whose == VIVARIUM_VERIFY_WHOSE_WORKER)
      return "the verification that passed was the worker's own command, not the caller's: it checks "
             "what the worker chose to check; the worker's summary below is a claim, not a finding";
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
  const gchar *warning = claim_warning (vivarium_report_get_verify_verdict (self),
                                       vivarium_report_get_verify_whose (self));
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
