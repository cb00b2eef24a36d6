/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The session's command log (service/vd-command-log.c) and its readers:
 * GetCommandLog's pages, the file beside the report, and the report's
 * reader of an entry (vivarium_report_add_command_from_log). What a command
 * carries is the caller's argv and cwd (D-Bus strings: UTF-8, no NUL), an
 * error (the daemon's sentence quoting the guest) and the guest's stderr
 * bytes as they came. The input, cut at NUL bytes, is groups of four
 * fields: argv (items split by 0x1f), cwd, error, stderr; lengths pick each
 * command's state and exit status.
 *
 * Checked: every line of the file is a UTF-8 JSON object; the last line of
 * each seq is exactly that entry as GetCommandLog gives it; pages cover
 * every entry once, in order, each under the reply budget; every entry
 * keeps its bounds (argv items and bytes, error, stderr head, cwd); the
 * report takes every entry, re-serialises, and renders it by the grammar
 * with its strings intact (fuzz-report-text.c). */

#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "fuzz-common.h"
#include "fuzz-report-text.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vd-command-log.h"

static gchar *log_dir;

/* A replay by hand (HARNESS FILE) leaves nothing behind either. */
static void
remove_log_dir (void)
{
  g_autofree gchar *path = g_build_filename (log_dir, "s-fuzz.jsonl", NULL);
  g_autofree gchar *root = g_path_get_dirname (log_dir);

  g_unlink (path);
  g_rmdir (log_dir);
  g_rmdir (root);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *root = g_dir_make_tmp ("vivarium-fuzz-log-XXXXXX", &error);

  fuzz_setup ();
  g_assert_no_error (error);
  log_dir = g_build_filename (root, "sessions", NULL);
  atexit (remove_log_dir);
  return 0;
}

static gchar *
field (GPtrArray *fields, guint i)
{
  GBytes *b = i < fields->len ? g_ptr_array_index (fields, i) : NULL;
  gsize len = b != NULL ? g_bytes_get_size (b) : 0;

  return len > 0 ? g_utf8_make_valid (g_bytes_get_data (b, NULL), (gssize) len) : g_strdup ("");
}

static void
run_commands (VdCommandLog *log, GPtrArray *fields)
{
  for (guint i = 0; i < fields->len; i += 4) {
    g_autofree gchar *argv_text = field (fields, i);
    g_autofree gchar *cwd = field (fields, i + 1);
    g_autofree gchar *error = field (fields, i + 2);
    GBytes *err = i + 3 < fields->len ? g_ptr_array_index (fields, i + 3) : NULL;
    g_auto(GStrv) argv = g_strsplit (argv_text, "\x1f", -1);
    g_autoptr(VdCommandEntry) entry = vd_command_log_begin (log, i % 8 == 0 ? "exec" : "read-file",
                                                            (const gchar * const *) argv, cwd);
    VdCommandState state = (VdCommandState) (strlen (error) % 7);

    if (err != NULL)
      vd_command_log_set_stderr_head (log, entry, err);
    vd_command_log_update (log, entry, state, (gint) (strlen (argv_text) % 5) - 1, strlen (cwd),
                           err != NULL ? g_bytes_get_size (err) : 0, error);
  }
}

static void
check_bounds (GVariant *entry)
{
  g_autofree const gchar **argv = NULL;
  const gchar *s = NULL;
  gsize bytes = 0;
  guint n;

  g_assert_true (g_variant_lookup (entry, "argv", "^a&s", &argv));
  n = g_strv_length ((gchar **) argv);
  g_assert_cmpuint (n, <=, VIVARIUM_LOG_ARGV_ITEMS_MAX);
  for (guint i = 0; i < n; i++)
    bytes += strlen (argv[i]);
  g_assert_cmpuint (bytes, <=, VIVARIUM_LOG_ARGV_BYTES_MAX);
  g_assert_true (g_variant_lookup (entry, "error", "&s", &s));
  g_assert_cmpuint (strlen (s), <=, VIVARIUM_LOG_ERROR_BYTES_MAX);
  g_assert_true (g_variant_lookup (entry, "cwd", "&s", &s));
  g_assert_cmpuint (strlen (s), <=, VIVARIUM_PATH_MAX);
  if (g_variant_lookup (entry, "stderr-head", "&s", &s)) {
    g_assert_cmpuint (strlen (s), <=, VD_COMMAND_STDERR_HEAD_MAX);
    g_assert_cmpuint (strlen (s), >, 0);
  }
}

/* Every entry through the pages; each page under the budget. */
static GPtrArray *
read_pages (VdCommandLog *log)
{
  GPtrArray *all = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  guint64 offset = 0, next = 0;

  while (offset < vd_command_log_get_total (log)) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) page = vd_command_log_get_page (log, offset, VIVARIUM_LOG_PAGE_MAX, &next, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (next, >, offset);
    g_assert_cmpuint (g_variant_get_size (page), <=, VIVARIUM_LIST_REPLY_BYTES_MAX);
    for (gsize i = 0; i < g_variant_n_children (page); i++) {
      GVariant *entry = g_variant_get_child_value (page, i);
      guint64 seq = 0;
      g_assert_true (g_variant_lookup (entry, "seq", "t", &seq));
      g_assert_cmpuint (seq, ==, all->len);
      check_bounds (entry);
      g_ptr_array_add (all, entry);
    }
    offset = next;
  }
  return all;
}

/* The file: one object a line; the last line of a seq is its entry. */
static void
check_file (VdCommandLog *log, GPtrArray *entries)
{
  g_autofree gchar *contents = NULL;
  gsize len = 0;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GPtrArray) last = g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);

  g_assert_true (g_file_get_contents (vd_command_log_get_path (log), &contents, &len, NULL));
  g_assert_cmpuint (len, <=, VIVARIUM_LOG_FILE_BYTES_MAX);
  g_assert_true (g_utf8_validate_len (contents, len, NULL));
  g_assert_true (len == 0 || contents[len - 1] == '\n');
  g_ptr_array_set_size (last, entries->len);
  lines = g_strsplit (contents, "\n", -1);
  for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *o;
    gint64 seq;
    g_assert_true (json_parser_load_from_data (parser, lines[i], -1, NULL));
    g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
    o = json_node_get_object (json_parser_get_root (parser));
    g_assert_cmpstr (json_object_get_string_member (o, "session"), ==, "s-fuzz");
    seq = json_object_get_int_member (o, "seq");
    g_assert_cmpint (seq, >=, 0);
    g_assert_cmpint (seq, <, entries->len);
    if (g_ptr_array_index (last, seq) != NULL)
      json_node_unref (g_ptr_array_index (last, seq));
    last->pdata[seq] = json_node_copy (json_parser_get_root (parser));
  }
  for (guint i = 0; i < entries->len; i++) {
    g_autoptr(JsonNode) want = json_gvariant_serialize (g_ptr_array_index (entries, i));
    json_object_set_string_member (json_node_get_object (want), "session", "s-fuzz");
    g_assert_nonnull (g_ptr_array_index (last, i));
    g_assert_true (json_node_equal (want, g_ptr_array_index (last, i)));
  }
}

static void
check_report (GPtrArray *entries)
{
  g_autoptr(VivariumReport) report = vivarium_report_new ();
  g_autoptr(GBytes) canonical = NULL;
  g_autoptr(GError) error = NULL;
  FuzzReportText text = { 0 };

  vivarium_report_set_id (report, "r-fuzz");
  vivarium_report_set_task_id (report, "t-fuzz");
  for (guint i = 0; i < entries->len; i++) {
    g_assert_true (vivarium_report_add_command_from_log (report, g_ptr_array_index (entries, i), &error));
    g_assert_no_error (error);
  }
  canonical = vivarium_report_to_canonical (report, &error);
  g_assert_no_error (error);
  g_assert_nonnull (canonical);
  fuzz_report_text_check (report, NULL, &text);
  fuzz_report_text_clear (&text);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GPtrArray) fields = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s-fuzz");
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *path = g_build_filename (log_dir, "s-fuzz.jsonl", NULL);
  const uint8_t *p, *end = data + size;

  for (p = data; p < end && fields->len < 64 * 4;) {
    const uint8_t *nul = memchr (p, '\0', (size_t) (end - p));
    const uint8_t *stop = nul != NULL ? nul : end;
    g_ptr_array_add (fields, g_bytes_new (p, (gsize) (stop - p)));
    p = stop + 1;
  }
  g_unlink (path);
  g_assert_true (vd_command_log_persist_to (log, log_dir, &error));
  g_assert_no_error (error);
  run_commands (log, fields);
  entries = read_pages (log);
  g_assert_cmpuint (entries->len, ==, vd_command_log_get_total (log));
  check_file (log, entries);
  check_report (entries);
  return 0;
}
