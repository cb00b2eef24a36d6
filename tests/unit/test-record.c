/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "vd-fs.h"
#include "vd-record.h"

/* The one writer of the tasks' and the jobs' records: the directory made
 * (with its parents) and kept 0700, the record 0600 and whole, nothing
 * left behind, a failure that leaves the old record and names the file. */

static JsonNode *
record_of (const gchar *state)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, state);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gchar *
state_in (const gchar *path)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (json_parser_load_from_file (parser, path, &error));
  g_assert_no_error (error);
  return g_strdup (json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "state"));
}

static guint
mode_of (const gchar *path)
{
  GStatBuf st;

  g_assert_cmpint (g_stat (path, &st), ==, 0);
  return st.st_mode & 07777;
}

static void
test_write (void)
{
  g_autofree gchar *top = g_dir_make_tmp ("test-record-XXXXXX", NULL);
  g_autofree gchar *dir = g_build_filename (top, "tasks", "done", NULL);
  g_autofree gchar *path = g_build_filename (dir, "abcd1234.json", NULL);
  g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);
  g_autoptr(JsonNode) first = record_of ("running");
  g_autoptr(JsonNode) second = record_of ("done");
  g_autoptr(GError) error = NULL;
  g_autofree gchar *state = NULL;
  g_autofree gchar *again = NULL;

  g_assert_true (vd_record_write (dir, "abcd1234.json", first, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (mode_of (dir), ==, 0700);
  g_assert_cmpuint (mode_of (path), ==, 0600);
  state = state_in (path);
  g_assert_cmpstr (state, ==, "running");
  /* Someone's chmod is undone at the next write. */
  g_assert_cmpint (g_chmod (dir, 0755), ==, 0);
  g_assert_true (vd_record_write (dir, "abcd1234.json", second, &error));
  g_assert_cmpuint (mode_of (dir), ==, 0700);
  again = state_in (path);
  g_assert_cmpstr (again, ==, "done");
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  g_assert_true (vd_fs_rm_rf (top, NULL));
}

/* The rename cannot happen (a directory holds the record's name): the
 * error names the record, no temporary file stays. */
static void
test_failure_names_the_file (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("test-record-XXXXXX", NULL);
  g_autofree gchar *path = g_build_filename (dir, "cafe0001.json", NULL);
  g_autofree gchar *inside = g_build_filename (path, "x", NULL);
  g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);
  g_autoptr(JsonNode) root = record_of ("failed");
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  g_assert_true (g_file_set_contents (inside, "", 0, NULL));
  g_assert_false (vd_record_write (dir, "cafe0001.json", root, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (inside, G_FILE_TEST_EXISTS));
  g_assert_true (vd_fs_rm_rf (dir, NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/record/write", test_write);
  g_test_add_func ("/record/failure-names-the-file", test_failure_names_the_file);
  return g_test_run ();
}
