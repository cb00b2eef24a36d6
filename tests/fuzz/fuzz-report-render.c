/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The report renderer (common/vivarium-report-render.c) with worker and
 * guest text in every place a report holds some: the summary, the question,
 * the outcome's reason, the verification command, the egress summary,
 * commands' argv, errors and stderr, changed and uncommitted paths.
 *
 * The input: a flags byte, then fields separated by NUL bytes (summary,
 * question, reason, verification command, egress summary, then groups of
 * argv (items split by 0x1f), error, stderr, path). Checked: the text reads
 * back by its grammar and gives back every untrusted string exactly
 * (fuzz-report-text.c), and its trusted lines are the same, key by key, as
 * those of the same report with every untrusted string replaced by "x":
 * no text can add, remove or move a line that reads as the daemon's. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "fuzz-report-text.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

typedef struct {
  GPtrArray *fields;   /* of GBytes: the input cut at NUL bytes */
  guint8     flags;
} Input;

/* Field @i as a string, "" when absent; @twin: "x" for a non-empty one. */
static gchar *
field (const Input *in, guint i, gboolean twin)
{
  GBytes *b = i < in->fields->len ? g_ptr_array_index (in->fields, i) : NULL;
  gsize len = b != NULL ? g_bytes_get_size (b) : 0;

  if (twin)
    return g_strdup (len > 0 ? "x" : "");
  return len > 0 ? g_strndup (g_bytes_get_data (b, NULL), len) : g_strdup ("");
}

/* A command as the session's log has it: its strings are D-Bus strings
 * (UTF-8) there, the guest's stderr already made valid. */
static void
add_logged_command (VivariumReport *r, guint n, const gchar *argv_text, const gchar *err, const gchar *stderr_head)
{
  g_autofree gchar *argv_valid = g_utf8_make_valid (argv_text, -1);
  g_autofree gchar *err_valid = g_utf8_make_valid (err, -1);
  g_autofree gchar *stderr_valid = g_utf8_make_valid (stderr_head, -1);
  g_auto(GStrv) argv = g_strsplit (argv_valid, "\x1f", 80);
  g_autoptr(GVariant) entry = NULL;
  g_autoptr(GError) error = NULL;
  GVariantDict d;

  g_variant_dict_init (&d, NULL);
  g_variant_dict_insert (&d, "seq", "t", (guint64) n);
  g_variant_dict_insert (&d, "kind", "s", n % 3 == 0 ? "exec" : "read-file");
  g_variant_dict_insert_value (&d, "argv", g_variant_new_strv ((const gchar * const *) argv, -1));
  g_variant_dict_insert (&d, "started-at", "t", (guint64) 1764583200000000 + n);
  g_variant_dict_insert (&d, "duration", "t", (guint64) n * 1000);
  g_variant_dict_insert (&d, "exit-status", "i", (gint32) (n % 4) - 1);
  g_variant_dict_insert (&d, "stdout-size", "t", (guint64) n);
  g_variant_dict_insert (&d, "stderr-size", "t", (guint64) strlen (stderr_head));
  g_variant_dict_insert (&d, "error", "s", err_valid);
  if (stderr_head[0] != '\0')
    g_variant_dict_insert (&d, "stderr-head", "s", stderr_valid);
  entry = g_variant_ref_sink (g_variant_dict_end (&d));
  g_assert_true (vivarium_report_add_command_from_log (r, entry, &error));
  g_assert_no_error (error);
}

static VivariumReport *
build (const Input *in, gboolean twin)
{
  VivariumReport *r = vivarium_report_new ();
  g_autofree gchar *summary = field (in, 0, twin);
  g_autofree gchar *question = field (in, 1, twin);
  g_autofree gchar *reason = field (in, 2, twin);
  g_autofree gchar *verify = field (in, 3, twin);
  g_autofree gchar *egress = field (in, 4, twin);
  GBytes *raw_summary = in->fields->len > 0 ? g_ptr_array_index (in->fields, 0) : NULL;

  vivarium_report_set_id (r, "r-fuzz");
  vivarium_report_set_task_id (r, "t-fuzz");
  vivarium_report_set_session_id (r, "s-fuzz");
  vivarium_report_set_image (r, "tiny", "sha256:00");
  vivarium_report_set_times (r, 1764583200000000, 1764583290000000);
  vivarium_report_set_host (r, "host");
  vivarium_report_set_outcome (r, (VivariumOutcome) (in->flags % 4), reason[0] != '\0' ? reason : NULL);
  vivarium_report_set_verification (r, (in->flags & 0x10) ? verify : NULL,
                                    (VivariumVerifyWhose) ((in->flags >> 2) % 3),
                                    (in->flags & 0x20) ? 1 : 0,
                                    (VivariumVerdict) ((in->flags >> 4) % 4), "s-fresh");
  if (in->flags & 0x40)
    vivarium_report_set_egress (r, "allowlist", "default", egress);
  /* The summary arrives with a length: a NUL in it is the worker's too. */
  if (!twin && raw_summary != NULL)
    vivarium_report_set_summary (r, g_bytes_get_data (raw_summary, NULL), (gssize) g_bytes_get_size (raw_summary));
  else
    vivarium_report_set_summary (r, summary, -1);
  if (in->flags & 0x80)
    vivarium_report_set_question (r, question, -1);
  for (guint i = 5, n = 0; i < in->fields->len; i += 4, n++) {
    g_autofree gchar *argv = field (in, i, twin);
    g_autofree gchar *err = field (in, i + 1, twin);
    g_autofree gchar *stderr_head = field (in, i + 2, twin);
    g_autofree gchar *path = field (in, i + 3, twin);
    add_logged_command (r, n, argv, err, stderr_head);
    if (n % 2 == 0)
      vivarium_report_add_file (r, path, (VivariumFileChange) (n % 4), VIVARIUM_FILE_KIND_FILE, n, -1);
    else
      vivarium_report_add_not_committed (r, path, stderr_head, err);
  }
  return r;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Input in = { g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref), 0 };
  g_autoptr(VivariumReport) report = NULL;
  g_autoptr(VivariumReport) twin = NULL;
  FuzzReportText text = { 0 }, twin_text = { 0 };
  const uint8_t *p, *end = data + size;

  if (size == 0) {
    g_ptr_array_unref (in.fields);
    return 0;
  }
  in.flags = data[0];
  for (p = data + 1; p <= end && in.fields->len < 64;) {
    const uint8_t *nul = memchr (p, '\0', (size_t) (end - p));
    const uint8_t *stop = nul != NULL ? nul : end;
    g_ptr_array_add (in.fields, g_bytes_new (p, (gsize) (stop - p)));
    p = stop + 1;
  }
  report = build (&in, FALSE);
  twin = build (&in, TRUE);
  fuzz_report_text_check (report, (in.flags & 1) ? "sha256:ab" : NULL, &text);
  fuzz_report_text_check (twin, (in.flags & 1) ? "sha256:ab" : NULL, &twin_text);
  g_assert_cmpuint (text.keys->len, ==, twin_text.keys->len);
  for (guint i = 0; i < text.keys->len; i++)
    g_assert_cmpstr (g_ptr_array_index (text.keys, i), ==, g_ptr_array_index (twin_text.keys, i));
  fuzz_report_text_clear (&text);
  fuzz_report_text_clear (&twin_text);
  g_ptr_array_unref (in.fields);
  return 0;
}
