/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The check the report harnesses share: the rendered text read back by its
 * grammar (common/vivarium-report.h, docs/report-format.md), independently
 * of the renderer. Every line is a trusted line with a known key, a detail
 * line or a quote line; every untrusted string comes back, unescaped,
 * exactly as the report holds it, in a detail or quote line and nowhere
 * else. So no worker text can make a line that reads as the daemon's, and
 * none of it is lost or altered on the way. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "fuzz-report-text.h"

/* One escaped unit at *p: appends what it stands for to @out. FALSE at a
 * lone '\' that ends the piece (a continuation mark), which sets *mark. */
static gboolean
unescape_unit (const gchar **p, GString *out, gboolean *mark)
{
  const gchar *s = *p;
  gchar *end = NULL;
  guint64 v;

  if (*s != '\\') {
    g_assert_true (*s >= 0x20 && *s < 0x7f);
    g_string_append_c (out, *s);
    *p = s + 1;
    return TRUE;
  }
  if (s[1] == '\0') {
    *mark = TRUE;
    *p = s + 1;
    return FALSE;
  }
  if (s[1] == '\\' || s[1] == '"') {
    g_string_append_c (out, s[1]);
    *p = s + 2;
    return TRUE;
  }
  g_assert_true ((s[1] == 'u' || s[1] == 'x') && s[2] == '{');
  v = g_ascii_strtoull (s + 3, &end, 16);
  g_assert_true (end != NULL && *end == '}' && end > s + 3);
  if (s[1] == 'x') {
    /* Only a byte that is not UTF-8 is spelt so. */
    g_assert_cmpuint (end - (s + 3), ==, 2);
    g_assert_cmpuint (v, >=, 0x80);
    g_string_append_c (out, (gchar) v);
  } else {
    g_assert_cmpuint (end - (s + 3), >=, 4);
    g_assert_true (g_unichar_validate ((gunichar) v));
    /* Printable ASCII other than '\' is never escaped. */
    g_assert_true (v < 0x20 || v >= 0x7f);
    g_string_append_unichar (out, (gunichar) v);
  }
  *p = end + 1;
  return TRUE;
}

/* The escaped text from @p up to an unescaped '"' (@quoted) or the end. */
static gchar *
unescape (const gchar **p, gboolean quoted, gboolean *mark)
{
  GString *out = g_string_new (NULL);
  gboolean m = FALSE;

  while (**p != '\0' && !(quoted && **p == '"')) {
    g_assert_false (m);
    if (!unescape_unit (p, out, &m))
      break;
  }
  if (quoted) {
    g_assert_cmpint (**p, ==, '"');
    (*p)++;
  }
  if (mark != NULL)
    *mark = m;
  else
    g_assert_false (m);
  return g_string_free (out, FALSE);
}

static gboolean
is_key (const gchar *line, const gchar **key)
{
  const gchar * const *keys = vivarium_report_text_keys ();

  for (guint i = 0; keys[i] != NULL; i++) {
    gsize n = strlen (keys[i]);
    if (strncmp (line, keys[i], n) == 0 && line[n] == ':' && (line[n + 1] == '\0' || line[n + 1] == ' ')) {
      *key = keys[i];
      return TRUE;
    }
  }
  return FALSE;
}

/* "  label: "value"" or the argv line: label and values, unescaped. */
static void
read_detail (const gchar *line, GPtrArray *details)
{
  const gchar *p = line + strlen (VIVARIUM_REPORT_TEXT_DETAIL);
  const gchar *colon = strchr (p, ':');
  GString *entry;

  g_assert_nonnull (colon);
  for (const gchar *c = p; c < colon; c++)
    g_assert_true (g_ascii_islower (*c) || *c == '-');
  g_assert_true (colon > p);
  entry = g_string_new_len (p, colon - p);
  p = colon + 1;
  while (*p == ' ' && p[1] == '"') {
    g_autofree gchar *value = NULL;
    p += 2;
    value = unescape (&p, TRUE, NULL);
    g_string_append_c (entry, '\x01');
    g_string_append (entry, value);
  }
  if (g_str_equal (p, " (truncated)")) {
    g_string_append (entry, "\x01(truncated)");
    p += strlen (p);
  }
  g_assert_cmpstr (p, ==, "");
  g_ptr_array_add (details, g_string_free (entry, FALSE));
}

void
fuzz_report_text_parse (const gchar *text, FuzzReportText *parsed)
{
  g_auto(GStrv) lines = NULL;
  const gchar *key = NULL;
  GString *quote = NULL;
  gboolean continued = FALSE;
  guint n;

  parsed->keys = g_ptr_array_new ();
  parsed->details = g_ptr_array_new_with_free_func (g_free);
  parsed->claim = NULL;
  parsed->question = NULL;
  for (const gchar *c = text; *c != '\0'; c++)
    g_assert_true (*c == '\n' || (*c >= 0x20 && *c < 0x7f));
  g_assert_true (g_str_has_suffix (text, "\n"));
  lines = g_strsplit (text, "\n", -1);
  n = g_strv_length (lines) - 1;   /* the text ends with a newline */
  for (guint i = 0; i < n; i++) {
    const gchar *line = lines[i];
    if (g_str_has_prefix (line, VIVARIUM_REPORT_TEXT_QUOTE)) {
      const gchar *p = line + strlen (VIVARIUM_REPORT_TEXT_QUOTE);
      g_autofree gchar *piece = NULL;
      gboolean mark = FALSE;
      g_assert_true (g_strcmp0 (key, "Worker's claim (unverified)") == 0 ||
                     g_strcmp0 (key, "Worker's question (unverified)") == 0);
      /* A piece is at most the width, its marker and mark included. */
      g_assert_cmpuint (strlen (p), <=, VIVARIUM_REPORT_TEXT_QUOTE_WIDTH);
      piece = unescape (&p, FALSE, &mark);
      if (quote == NULL)
        quote = g_string_new (NULL);
      else if (!continued)
        g_string_append_c (quote, '\n');
      g_string_append (quote, piece);
      continued = mark;
      continue;
    }
    g_assert_false (continued);   /* a continued piece goes on in the next line */
    if (quote != NULL) {
      g_assert_null (g_str_equal (key, "Worker's claim (unverified)") ? parsed->claim : parsed->question);
      if (g_str_equal (key, "Worker's claim (unverified)"))
        parsed->claim = g_string_free (quote, FALSE);
      else
        parsed->question = g_string_free (quote, FALSE);
      quote = NULL;
    }
    if (line[0] == '\0')
      continue;
    if (g_str_has_prefix (line, VIVARIUM_REPORT_TEXT_DETAIL)) {
      g_assert_nonnull (key);
      read_detail (line, parsed->details);
      continue;
    }
    /* Column 0: only the daemon's keys. */
    g_assert_true (is_key (line, &key));
    g_ptr_array_add (parsed->keys, (gpointer) key);
  }
  g_assert_false (continued);
  if (quote != NULL) {
    if (g_str_equal (key, "Worker's claim (unverified)"))
      parsed->claim = g_string_free (quote, FALSE);
    else
      parsed->question = g_string_free (quote, FALSE);
  }
}

void
fuzz_report_text_clear (FuzzReportText *parsed)
{
  g_clear_pointer (&parsed->keys, g_ptr_array_unref);
  g_clear_pointer (&parsed->details, g_ptr_array_unref);
  g_clear_pointer (&parsed->claim, g_free);
  g_clear_pointer (&parsed->question, g_free);
}

static void
expect (GPtrArray *want, const gchar *label, const gchar *value)
{
  g_ptr_array_add (want, g_strdup_printf ("%s\x01%s", label, value));
}

/* The detail lines the report's untrusted strings must make, in order. */
static GPtrArray *
expected_details (VivariumReport *report)
{
  GPtrArray *want = g_ptr_array_new_with_free_func (g_free);
  GPtrArray *commands = vivarium_report_get_commands (report);
  GPtrArray *files = vivarium_report_get_files (report);
  GPtrArray *skipped = vivarium_report_get_not_committed (report);
  const gchar *mode, *policy, *summary;

  if (vivarium_report_get_outcome_reason (report) != NULL)
    expect (want, "reason", vivarium_report_get_outcome_reason (report));
  if (vivarium_report_get_verify_command (report) != NULL)
    expect (want, "command", vivarium_report_get_verify_command (report));
  if (vivarium_report_get_egress (report, &mode, &policy, &summary) && summary[0] != '\0')
    expect (want, "decisions", summary);
  for (guint i = 0; i < commands->len; i++) {
    const VivariumReportCommand *c = g_ptr_array_index (commands, i);
    GString *argv = g_string_new ("argv");
    for (guint j = 0; c->argv[j] != NULL; j++)
      g_string_append_printf (argv, "\x01%s", c->argv[j]);
    if (c->argv_truncated)
      g_string_append (argv, "\x01(truncated)");
    g_ptr_array_add (want, g_string_free (argv, FALSE));
    if (c->error != NULL && c->error[0] != '\0')
      expect (want, "error", c->error);
    if (c->stderr_head != NULL)
      expect (want, "stderr", c->stderr_head);
  }
  for (guint i = 0; i < files->len; i++)
    expect (want, "path", ((const VivariumReportFile *) g_ptr_array_index (files, i))->path);
  for (guint i = 0; i < skipped->len; i++) {
    const VivariumReportSkipped *k = g_ptr_array_index (skipped, i);
    expect (want, "path", k->path);
    expect (want, "kind", k->kind);
    expect (want, "reason", k->reason);
  }
  return want;
}

/* What the quote lines of @text must give back: its lines, a final newline
 * ending the last one rather than starting another. */
static void
check_quoted (const gchar *got, const gchar *text)
{
  g_autofree gchar *want = g_strdup (text);

  if (g_str_has_suffix (want, "\n"))
    want[strlen (want) - 1] = '\0';
  /* The empty text has no quote line at all; "\n" has one, empty. */
  if (text[0] == '\0')
    g_assert_null (got);
  else
    g_assert_cmpstr (got != NULL ? got : "", ==, want);
}

void
fuzz_report_text_check (VivariumReport *report, const gchar *fingerprint, FuzzReportText *parsed)
{
  g_autofree gchar *text = vivarium_report_render_text (report, fingerprint);
  g_autoptr(GPtrArray) want = NULL;

  fuzz_report_text_parse (text, parsed);
  want = expected_details (report);
  g_assert_cmpuint (parsed->details->len, ==, want->len);
  for (guint i = 0; i < want->len; i++)
    g_assert_cmpstr (g_ptr_array_index (parsed->details, i), ==, g_ptr_array_index (want, i));
  check_quoted (parsed->claim, vivarium_report_get_summary (report));
  if (vivarium_report_get_question (report) != NULL)
    check_quoted (parsed->question, vivarium_report_get_question (report));
  else
    g_assert_null (parsed->question);
  /* The signature line says what the caller checked, nothing else. */
  g_assert_cmpstr (g_ptr_array_index (parsed->keys, 1), ==, "Signature");
  g_assert_true (g_str_has_prefix (strstr (text, "\nSignature: ") + 12,
                                   fingerprint != NULL ? "valid, made with the key " : "NOT VERIFIED\n"));
}
