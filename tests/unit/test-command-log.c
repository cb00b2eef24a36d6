/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-command-log"

#include "config.h"

#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-command-log.h"
#include "vd-fs.h"

/* Issue 7, defect 1: ['echo'] + ['C' * 65536] * 255, the biggest argv a
 * caller may send (16 MiB). */
static GStrv
huge_argv (void)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_autofree gchar *big = g_strnfill (VIVARIUM_ARG_LEN_MAX, 'C');

  g_strv_builder_add (b, "echo");
  for (guint i = 1; i < VIVARIUM_ARGV_MAX; i++)
    g_strv_builder_add (b, big);
  return g_strv_builder_end (b);
}

static GVariant *
lookup (GVariant *entry, const gchar *key)
{
  GVariant *v = g_variant_lookup_value (entry, key, NULL);
  g_assert_nonnull (v);
  return v;
}

static void
test_argv_capped (void)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  g_auto(GStrv) argv = huge_argv ();
  g_autoptr(VdCommandEntry) entry = vd_command_log_begin (log, "exec", (const gchar * const *) argv, "/root");
  g_autoptr(GVariant) v = g_variant_ref_sink (vd_command_entry_to_variant (entry));
  g_autoptr(GVariant) kept = lookup (v, "argv");
  g_autoptr(GVariant) truncated = lookup (v, "argv-truncated");
  g_autoptr(GVariant) items = lookup (v, "argv-items");
  g_autoptr(GVariant) bytes = lookup (v, "argv-bytes");
  g_autoptr(GVariant) cwd = lookup (v, "cwd");
  g_autoptr(GVariant) state = lookup (v, "state");
  g_autofree const gchar **strv = g_variant_get_strv (kept, NULL);
  gsize kept_bytes = 0;

  for (guint i = 0; strv[i] != NULL; i++)
    kept_bytes += strlen (strv[i]);
  g_assert_cmpuint (g_strv_length ((gchar **) strv), <=, VIVARIUM_LOG_ARGV_ITEMS_MAX);
  g_assert_cmpuint (kept_bytes, <=, VIVARIUM_LOG_ARGV_BYTES_MAX);
  g_assert_cmpstr (strv[0], ==, "echo");
  g_assert_true (g_variant_get_boolean (truncated));
  g_assert_cmpuint (g_variant_get_uint32 (items), ==, VIVARIUM_ARGV_MAX);
  g_assert_cmpuint (g_variant_get_uint64 (bytes), ==, 4 + (guint64) (VIVARIUM_ARGV_MAX - 1) * VIVARIUM_ARG_LEN_MAX);
  g_assert_cmpstr (g_variant_get_string (cwd, NULL), ==, "/root");
  g_assert_cmpstr (g_variant_get_string (state, NULL), ==, "running");
  /* The whole entry is small, whatever was sent. */
  g_assert_cmpuint (g_variant_get_size (v), <, 16 * 1024);
}

static void
test_small_argv_whole (void)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  const gchar *argv[] = { "uname", "-r", NULL };
  g_autoptr(VdCommandEntry) entry = vd_command_log_begin (log, "exec", argv, "");
  g_autoptr(GVariant) v = NULL;
  g_autoptr(GVariant) truncated = NULL;
  g_autoptr(GVariant) status = NULL;

  vd_command_log_update (log, entry, VD_COMMAND_STATE_FINISHED, 0, 6, 0, NULL);
  v = g_variant_ref_sink (vd_command_entry_to_variant (entry));
  truncated = lookup (v, "argv-truncated");
  status = lookup (v, "exit-status");
  g_assert_false (g_variant_get_boolean (truncated));
  g_assert_cmpint (g_variant_get_int32 (status), ==, 0);
}

/* The 32 MiB bus limit is never approached, however many huge commands. */
static void
test_pages_bounded (void)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  g_auto(GStrv) argv = huge_argv ();
  guint64 next = 0;
  guint64 seen = 0;

  for (guint i = 0; i < 300; i++) {
    g_autoptr(VdCommandEntry) e = vd_command_log_begin (log, "exec", (const gchar * const *) argv, "");
    vd_command_log_update (log, e, VD_COMMAND_STATE_FINISHED, 0, VIVARIUM_OUTPUT_CAP, 0, NULL);
  }
  g_assert_cmpuint (vd_command_log_get_total (log), ==, 300);
  while (next < vd_command_log_get_total (log)) {
    g_autoptr(GError) error = NULL;
    guint64 before = next;
    g_autoptr(GVariant) page = g_variant_ref_sink (vd_command_log_get_page (log, next, VIVARIUM_LOG_PAGE_MAX,
                                                                            &next, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (g_variant_get_size (page), <=, VIVARIUM_LIST_REPLY_BYTES_MAX);
    g_assert_cmpuint (g_variant_n_children (page), ==, next - before);
    g_assert_cmpuint (next, >, before);
    seen += g_variant_n_children (page);
  }
  g_assert_cmpuint (seen, ==, 300);
}

static void
test_page_arguments (void)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  const gchar *argv[] = { "true", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) page = NULL;
  g_autoptr(GVariant) empty = NULL;
  GVariant *bad;
  guint64 next = 0;

  for (guint i = 0; i < 5; i++)
    vd_command_entry_unref (vd_command_log_begin (log, "exec", argv, ""));
  bad = vd_command_log_get_page (log, 0, 0, &next, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_assert_null (bad);
  g_clear_error (&error);
  bad = vd_command_log_get_page (log, 0, VIVARIUM_LOG_PAGE_MAX + 1, &next, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  bad = vd_command_log_get_page (log, 6, 10, &next, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  page = g_variant_ref_sink (vd_command_log_get_page (log, 1, 2, &next, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (page), ==, 2);
  g_assert_cmpuint (next, ==, 3);
  empty = g_variant_ref_sink (vd_command_log_get_page (log, 5, 10, &next, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (empty), ==, 0);
  g_assert_cmpuint (next, ==, 5);
}

/* The oldest go first, and they are counted. */
static void
test_entries_capped (void)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  const gchar *argv[] = { "true", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) page = NULL;
  g_autoptr(GVariant) first = NULL;
  g_autoptr(GVariant) seq = NULL;
  guint64 next = 0;

  for (guint i = 0; i < VIVARIUM_LOG_ENTRIES_MAX + 10; i++)
    vd_command_entry_unref (vd_command_log_begin (log, "exec", argv, ""));
  g_assert_cmpuint (vd_command_log_get_dropped (log), ==, 10);
  g_assert_cmpuint (vd_command_log_get_total (log), ==, VIVARIUM_LOG_ENTRIES_MAX + 10);
  page = g_variant_ref_sink (vd_command_log_get_page (log, 0, 1, &next, &error));
  g_assert_no_error (error);
  first = g_variant_get_child_value (page, 0);
  seq = lookup (first, "seq");
  g_assert_cmpuint (g_variant_get_uint64 (seq), ==, 10);
  g_assert_cmpuint (next, ==, 11);
}

static gchar **
read_lines (const gchar *path)
{
  g_autofree gchar *contents = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_get_contents (path, &contents, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_str_has_suffix (contents, "\n"));
  contents[strlen (contents) - 1] = '\0';
  return g_strsplit (contents, "\n", -1);
}

static JsonObject *
parse_line (const gchar *line)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (json_parser_load_from_data (parser, line, -1, &error));
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Issue 7, defect 7: what a restarted daemon (or the operator) reads back. */
static void
test_persisted (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("vd-log-XXXXXX", &error);
  g_autofree gchar *dir = g_build_filename (tmp, "logs", "sessions", NULL);
  g_autoptr(VdCommandLog) log = vd_command_log_new ("abc123");
  const gchar *argv[] = { "sleep", "100", NULL };
  g_autoptr(VdCommandEntry) e = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(JsonObject) first = NULL;
  g_autoptr(JsonObject) last = NULL;
  GStatBuf st;

  g_assert_true (vd_command_log_persist_to (log, dir, &error));
  g_assert_no_error (error);
  e = vd_command_log_begin (log, "exec", argv, "/tmp");
  vd_command_log_update (log, e, VD_COMMAND_STATE_TIMED_OUT_RUNNING, -1, 0, 0, "timed out");
  vd_command_log_update (log, e, VD_COMMAND_STATE_FINISHED_LATE, 3, 10, 0, NULL);
  lines = read_lines (vd_command_log_get_path (log));
  g_assert_cmpuint (g_strv_length (lines), ==, 3);
  first = parse_line (lines[0]);
  last = parse_line (lines[2]);
  g_assert_cmpstr (json_object_get_string_member (first, "session"), ==, "abc123");
  g_assert_cmpstr (json_object_get_string_member (first, "state"), ==, "running");
  g_assert_cmpint (json_object_get_int_member (last, "seq"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (last, "state"), ==, "finished-late");
  g_assert_cmpint (json_object_get_int_member (last, "exit-status"), ==, 3);
  g_assert_cmpint (g_stat (vd_command_log_get_path (log), &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 0777, ==, 0600);
  g_assert_true (vd_fs_rm_rf (tmp, &error));
  g_assert_no_error (error);
}

/* An ended session's log closes its file and goes on from memory: the
 * file keeps what was written, nothing after, and pages still read all. */
static void
test_closed_file (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("vd-log-XXXXXX", &error);
  g_autofree gchar *dir = g_build_filename (tmp, "logs", "sessions", NULL);
  g_autoptr(VdCommandLog) log = vd_command_log_new ("ended");
  const gchar *argv[] = { "true", NULL };
  g_autoptr(VdCommandEntry) e = NULL;
  g_autoptr(VdCommandEntry) late = NULL;
  g_autoptr(GVariant) page = NULL;
  g_auto(GStrv) lines = NULL;
  guint64 next = 0;

  g_assert_true (vd_command_log_persist_to (log, dir, &error));
  e = vd_command_log_begin (log, "exec", argv, "/");
  vd_command_log_update (log, e, VD_COMMAND_STATE_FINISHED, 0, 0, 0, NULL);
  vd_command_log_close_file (log);
  vd_command_log_close_file (log);  /* idempotent */
  late = vd_command_log_begin (log, "exec", argv, "/");
  lines = read_lines (vd_command_log_get_path (log));
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  page = g_variant_ref_sink (vd_command_log_get_page (log, 0, 10, &next, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (page), ==, 2);
  g_assert_cmpuint (next, ==, 2);
  g_assert_true (vd_fs_rm_rf (tmp, &error));
}

/* The file stops at its cap and says so in its last line. */
static void
test_file_capped (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("vd-log-XXXXXX", &error);
  g_autofree gchar *dir = g_build_filename (tmp, "logs", "sessions", NULL);
  g_autoptr(VdCommandLog) log = vd_command_log_new ("full");
  g_auto(GStrv) argv = huge_argv ();
  g_auto(GStrv) lines = NULL;
  g_autoptr(JsonObject) last = NULL;
  GStatBuf st;
  guint n;

  g_assert_true (vd_command_log_persist_to (log, dir, &error));
  for (guint i = 0; i < 3000; i++) {
    g_autoptr(VdCommandEntry) e = vd_command_log_begin (log, "exec", (const gchar * const *) argv, "");
    vd_command_log_update (log, e, VD_COMMAND_STATE_FINISHED, 0, 0, 0, NULL);
  }
  g_assert_cmpint (g_stat (vd_command_log_get_path (log), &st), ==, 0);
  g_assert_cmpuint ((guint64) st.st_size, <=, VIVARIUM_LOG_FILE_BYTES_MAX);
  lines = read_lines (vd_command_log_get_path (log));
  n = g_strv_length (lines);
  last = parse_line (lines[n - 1]);
  g_assert_true (json_object_get_boolean_member (last, "log-full"));
  g_assert_true (vd_fs_rm_rf (tmp, &error));
}

/* Retention: the directory keeps the newest files only. */
static void
test_retention (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *tmp = g_dir_make_tmp ("vd-log-XXXXXX", &error);
  g_autofree gchar *dir = g_build_filename (tmp, "logs", "sessions", NULL);
  g_auto(GStrv) names = NULL;

  for (guint i = 0; i < VIVARIUM_LOG_FILES_MAX + 5; i++) {
    g_autofree gchar *id = g_strdup_printf ("s%04u", i);
    g_autoptr(VdCommandLog) log = vd_command_log_new (id);
    g_assert_true (vd_command_log_persist_to (log, dir, &error));
    g_assert_no_error (error);
  }
  names = vd_fs_list_dir (dir);
  g_assert_cmpuint (g_strv_length (names), ==, VIVARIUM_LOG_FILES_MAX);
  g_assert_true (vd_fs_rm_rf (tmp, &error));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/command-log/argv-capped", test_argv_capped);
  g_test_add_func ("/command-log/small-argv-whole", test_small_argv_whole);
  g_test_add_func ("/command-log/pages-bounded", test_pages_bounded);
  g_test_add_func ("/command-log/page-arguments", test_page_arguments);
  g_test_add_func ("/command-log/entries-capped", test_entries_capped);
  g_test_add_func ("/command-log/persisted", test_persisted);
  g_test_add_func ("/command-log/closed-file", test_closed_file);
  g_test_add_func ("/command-log/file-capped", test_file_capped);
  g_test_add_func ("/command-log/retention", test_retention);
  return g_test_run ();
}
