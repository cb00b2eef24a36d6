/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-command-log.h"
#include "vd-fs.h"
#include "vd-report-store.h"

/* The report store on a real private bus (GTestDBus): files written whole
 * and 0600, read back verified at load, a tampered file skipped, bounded
 * retention, GetJson returning the file byte for byte. */

typedef struct {
  GTestDBus       *bus;
  GDBusConnection *service;
  GDBusConnection *client;
  gchar           *dir;
  gchar           *reports_dir;
  gchar           *keys_dir;
} Fixture;

static gboolean
export_on_bus (GDBusInterfaceSkeleton *skeleton, const gchar *path, gpointer user_data, GError **error)
{
  Fixture *f = user_data;

  return g_dbus_interface_skeleton_export (skeleton, f->service, path, error);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *address = NULL;

  f->bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (f->bus);
  address = g_strdup (g_test_dbus_get_bus_address (f->bus));
  f->service = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                       G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                       NULL, NULL, &error);
  g_assert_no_error (error);
  f->client = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                      G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                      NULL, NULL, &error);
  g_assert_no_error (error);
  f->dir = g_dir_make_tmp ("vd-report-store-XXXXXX", &error);
  g_assert_no_error (error);
  f->reports_dir = g_build_filename (f->dir, "reports", NULL);
  f->keys_dir = g_build_filename (f->dir, "keys", NULL);
  g_assert_cmpint (g_mkdir (f->keys_dir, 0700), ==, 0);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_fs_rm_rf (f->dir, &error));
  g_clear_object (&f->client);
  g_dbus_connection_close_sync (f->service, NULL, NULL);
  g_clear_object (&f->service);
  g_test_dbus_down (f->bus);
  g_clear_object (&f->bus);
  g_free (f->dir);
  g_free (f->reports_dir);
  g_free (f->keys_dir);
}

static VivariumReport *
make_report (const gchar *id, gint64 ended_at)
{
  VivariumReport *r = vivarium_report_new ();
  const gchar *cmd[] = { "sh", "-c", "true", NULL };

  vivarium_report_set_id (r, id);
  vivarium_report_set_task_id (r, id);
  vivarium_report_set_session_id (r, "s1");
  vivarium_report_set_image (r, "tiny", "sha256:00");
  vivarium_report_set_project (r, "demo");
  vivarium_report_set_times (r, ended_at - 1000, ended_at);
  vivarium_report_set_host (r, "host");
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_DONE, NULL);
  vivarium_report_add_command (r, "exec", cmd, ended_at - 900, 5, 0, 1, 2, NULL);
  vivarium_report_set_verification (r, "true", VIVARIUM_VERIFY_WHOSE_CALLER, 0, VIVARIUM_VERDICT_PASS, "s2");
  vivarium_report_set_summary (r, "Verification: pass\n\x1b[2Jdone\n", -1);
  return r;
}

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GVariant **out = user_data;
  g_autoptr(GError) error = NULL;

  *out = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  g_assert_no_error (error);
}

/* The service answers from this thread's main context: iterate it. */
static gchar *
call_string (Fixture *f, const gchar *path, const gchar *method)
{
  GVariant *reply = NULL;
  gchar *text = NULL;

  g_dbus_connection_call (f->client, g_dbus_connection_get_unique_name (f->service), path,
                          VIVARIUM_DBUS_IFACE_PREFIX ".Report", method, NULL, G_VARIANT_TYPE ("(s)"),
                          G_DBUS_CALL_FLAGS_NONE, 10000, NULL, call_done_cb, &reply);
  while (reply == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_variant_get (reply, "(s)", &text);
  g_variant_unref (reply);
  return text;
}

static VdReportStore *
new_store (Fixture *f, guint max)
{
  g_autoptr(GError) error = NULL;
  VdReportStore *store = vd_report_store_new (f->reports_dir, f->keys_dir, max, export_on_bus, f);

  g_assert_true (vd_report_store_load (store, &error));
  g_assert_no_error (error);
  return store;
}

static void
test_store_and_reload (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 10);
  g_autoptr(VivariumReport) report = make_report ("r1", 2000000);
  g_autofree gchar *file = g_build_filename (f->reports_dir, "r1.json", NULL);
  g_autofree gchar *contents = NULL;
  g_autofree gchar *json = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *path = NULL;
  g_autofree const gchar **paths = NULL;
  GStatBuf st;

  g_assert_cmpstr (vd_report_store_get_fingerprint (store), !=, "");
  path = g_strdup (vd_report_store_add (store, report, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (path, ==, VIVARIUM_DBUS_PATH_REPORTS "/r1");
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_null (vd_report_store_add (store, report, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS);
  g_clear_error (&error);

  g_assert_true (g_file_get_contents (file, &contents, NULL, NULL));
  json = call_string (f, path, "GetJson");
  g_assert_cmpstr (json, ==, contents);
  g_assert_nonnull (vivarium_signed_report_verify (json, strlen (json), vd_report_store_get_fingerprint (store),
                                                   NULL, &error));
  g_assert_no_error (error);
  text = call_string (f, path, "GetText");
  g_assert_true (strstr (text, "\x1b") == NULL);
  g_assert_true (strstr (text, "\nVerification: pass") == NULL || strstr (text, "\n> Verification: pass") != NULL);

  g_clear_object (&store);
  store = new_store (f, 10);
  g_assert_cmpuint (vd_report_store_count (store), ==, 1);
  paths = vd_report_store_list_paths (store);
  g_assert_cmpstr (paths[0], ==, VIVARIUM_DBUS_PATH_REPORTS "/r1");
}

static void
test_tampered_skipped (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 10);
  g_autoptr(VivariumReport) a = make_report ("ra", 1000000);
  g_autoptr(VivariumReport) b = make_report ("rb", 2000000);
  g_autofree gchar *file = g_build_filename (f->reports_dir, "rb.json", NULL);
  g_autofree gchar *contents = NULL;
  gchar *p;

  g_assert_nonnull (vd_report_store_add (store, a, &error));
  g_assert_nonnull (vd_report_store_add (store, b, &error));
  g_clear_object (&store);
  g_assert_true (g_file_get_contents (file, &contents, NULL, NULL));
  p = strstr (contents, "\"demo\"");
  g_assert_nonnull (p);
  p[1] = 'D';   /* one byte */
  g_assert_true (g_file_set_contents (file, contents, -1, NULL));
  g_test_expect_message ("VdReportStore", G_LOG_LEVEL_WARNING, "skipping the report file rb.json*");
  store = new_store (f, 10);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (vd_report_store_count (store), ==, 1);
  g_assert_true (g_file_test (file, G_FILE_TEST_EXISTS));   /* left for the operator */
}

/* What a daemon killed while it wrote a report leaves (write_durably's
 * NAME.XXXXXX, never renamed into place) goes at the next load; nothing
 * else is touched. */
static void
test_temporaries_removed (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 10);
  g_autoptr(VivariumReport) report = make_report ("r1", 2000000);
  const gchar *stray[] = { "r2.commands.jsonl.AB12CD", "r2.json.XYZ123" };
  const gchar *kept[] = { "r1.json", "notes.txt", "r3.json.bak" };

  g_assert_nonnull (vd_report_store_add (store, report, &error));
  g_clear_object (&store);
  for (gsize i = 0; i < G_N_ELEMENTS (stray); i++) {
    g_autofree gchar *file = g_build_filename (f->reports_dir, stray[i], NULL);
    g_assert_true (g_file_set_contents (file, "{\"half", -1, NULL));
  }
  for (gsize i = 1; i < G_N_ELEMENTS (kept); i++) {
    g_autofree gchar *file = g_build_filename (f->reports_dir, kept[i], NULL);
    g_assert_true (g_file_set_contents (file, "x", -1, NULL));
  }
  store = new_store (f, 10);
  g_assert_cmpuint (vd_report_store_count (store), ==, 1);
  for (gsize i = 0; i < G_N_ELEMENTS (stray); i++) {
    g_autofree gchar *file = g_build_filename (f->reports_dir, stray[i], NULL);
    g_assert_false (g_file_test (file, G_FILE_TEST_EXISTS));
  }
  for (gsize i = 0; i < G_N_ELEMENTS (kept); i++) {
    g_autofree gchar *file = g_build_filename (f->reports_dir, kept[i], NULL);
    g_assert_true (g_file_test (file, G_FILE_TEST_EXISTS));
  }
}

static void
test_retention (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 3);
  g_autofree const gchar **paths = NULL;
  g_autofree gchar *oldest = g_build_filename (f->reports_dir, "r0.json", NULL);

  for (guint i = 0; i < 5; i++) {
    g_autofree gchar *id = g_strdup_printf ("r%u", i);
    g_autoptr(VivariumReport) r = make_report (id, 1000000 + i);
    g_assert_nonnull (vd_report_store_add (store, r, &error));
    g_assert_no_error (error);
  }
  g_assert_cmpuint (vd_report_store_count (store), ==, 3);
  paths = vd_report_store_list_paths (store);
  g_assert_cmpstr (paths[0], ==, VIVARIUM_DBUS_PATH_REPORTS "/r2");
  g_assert_cmpstr (paths[2], ==, VIVARIUM_DBUS_PATH_REPORTS "/r4");
  g_assert_false (g_file_test (oldest, G_FILE_TEST_EXISTS));
}


/* A real session command log of @n commands, each with @arg, the last
 * failing; its entries as the task runner pages them. */
static GPtrArray *
command_log_entries (guint n, const gchar *arg, guint64 *dropped)
{
  g_autoptr(VdCommandLog) log = vd_command_log_new ("s1");
  GPtrArray *entries = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  const gchar *argv[] = { "sh", "-c", arg, NULL };
  guint64 offset = 0;

  for (guint i = 0; i < n; i++) {
    g_autoptr(VdCommandEntry) e = vd_command_log_begin (log, "exec", argv, "/project");
    vd_command_log_update (log, e, VD_COMMAND_STATE_FINISHED, i + 1 == n ? 7 : 0, 1, 0, NULL);
  }
  for (;;) {
    guint64 next = offset;
    g_autoptr(GVariant) page = vd_command_log_get_page (log, offset, VIVARIUM_LOG_PAGE_MAX, &next, NULL);
    GVariantIter iter;
    GVariant *entry;

    if (page == NULL || g_variant_n_children (page) == 0 || next == offset)
      break;
    g_variant_iter_init (&iter, page);
    while ((entry = g_variant_iter_next_value (&iter)) != NULL)
      g_ptr_array_add (entries, entry);
    offset = next;
  }
  *dropped = vd_command_log_get_dropped (log);
  return entries;
}

static VivariumReport *
report_of_log (const gchar *id, GPtrArray *entries)
{
  VivariumReport *r = vivarium_report_new ();
  vivarium_report_set_id (r, id);
  vivarium_report_set_task_id (r, id);
  for (guint i = 0; i < entries->len; i++)
    g_assert_true (vivarium_report_add_command_from_log (r, g_ptr_array_index (entries, i), NULL));
  return r;
}

/* The full log beside the report: root's own, its digest signed, its
 * lines the entries; bounded; removed with its report. */
static void
test_command_log (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 1);
  guint64 dropped = 0;
  g_autoptr(GPtrArray) entries = command_log_entries (1200, "true", &dropped);
  g_autoptr(VivariumReport) report = report_of_log ("rl", entries);
  g_autofree gchar *file = g_build_filename (f->reports_dir, "rl" VIVARIUM_REPORT_COMMAND_LOG_SUFFIX, NULL);
  g_autofree gchar *contents = NULL;
  g_autofree gchar *digest = NULL;
  g_autofree gchar *json = NULL;
  g_autofree gchar *text = NULL;
  g_autoptr(VivariumReport) back = NULL;
  g_auto(GStrv) lines = NULL;
  const gchar *signed_digest = NULL;
  guint64 n = 0, not_kept = 0;
  gsize len = 0;
  GStatBuf st;

  g_assert_cmpuint (entries->len, ==, VIVARIUM_LOG_ENTRIES_MAX);
  g_assert_cmpuint (dropped, ==, 200);
  g_assert_nonnull (vd_report_store_add_with_log (store, report, entries, dropped, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  g_assert_true (g_file_get_contents (file, &contents, &len, NULL));
  digest = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) contents, len);
  lines = g_strsplit (contents, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, VIVARIUM_LOG_ENTRIES_MAX + 1);
  g_assert_cmpstr (lines[VIVARIUM_LOG_ENTRIES_MAX], ==, "");
  g_assert_nonnull (strstr (lines[0], "\"seq\":200"));

  /* What the signature covers says so, on the bus too. */
  json = call_string (f, VIVARIUM_DBUS_PATH_REPORTS "/rl", "GetJson");
  back = vivarium_signed_report_verify (json, strlen (json), vd_report_store_get_fingerprint (store), NULL, &error);
  g_assert_no_error (error);
  g_assert_true (vivarium_report_get_command_log (back, &signed_digest, &n, &not_kept));
  g_assert_true (g_str_has_prefix (signed_digest, "sha256:"));
  g_assert_cmpstr (signed_digest + strlen ("sha256:"), ==, digest);
  g_assert_cmpuint (n, ==, VIVARIUM_LOG_ENTRIES_MAX);
  g_assert_cmpuint (not_kept, ==, 200);
  /* 1200 run: the failed last one, the first and last 32 of the rest listed. */
  g_assert_cmpuint (vivarium_report_get_commands (back)->len + vivarium_report_get_commands_omitted (back), ==, 1200);
  g_assert_cmpuint (((const VivariumReportCommand *) g_ptr_array_index (vivarium_report_get_commands (back), 0))->number,
                    ==, 201);
  text = call_string (f, VIVARIUM_DBUS_PATH_REPORTS "/rl", "GetText");
  g_assert_nonnull (strstr (text, "\nCommand: 1200 exec, exit 7 (the guest agent's word), "));
  g_assert_nonnull (strstr (text, "\nCommand log: 1000 commands in rl.commands.jsonl beside the report, sha256:"));

  /* Retention takes the log with its report. */
  {
    g_autoptr(GPtrArray) small = command_log_entries (3, "true", &dropped);
    g_autoptr(VivariumReport) next = report_of_log ("rm", small);
    g_assert_nonnull (vd_report_store_add_with_log (store, next, small, dropped, &error));
    g_assert_no_error (error);
  }
  g_assert_false (g_file_test (file, G_FILE_TEST_EXISTS));
}

/* However the worker floods (1000 commands of 4 KiB of control bytes,
 * 24 KiB each as JSON), the file stays within its bound and says how many
 * of the oldest it left out. */
static void
test_command_log_bound (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdReportStore) store = new_store (f, 10);
  g_autofree gchar *arg = g_strnfill (VIVARIUM_LOG_ARGV_BYTES_MAX - 8, '\x01');
  guint64 dropped = 0;
  g_autoptr(GPtrArray) entries = command_log_entries (1000, arg, &dropped);
  g_autoptr(VivariumReport) report = report_of_log ("rb", entries);
  g_autofree gchar *file = g_build_filename (f->reports_dir, "rb" VIVARIUM_REPORT_COMMAND_LOG_SUFFIX, NULL);
  guint64 n = 0, not_kept = 0;
  GStatBuf st;

  g_assert_nonnull (vd_report_store_add_with_log (store, report, entries, dropped, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  g_test_message ("command log file: %" G_GINT64_FORMAT " bytes", (gint64) st.st_size);
  g_assert_cmpint (st.st_size, <=, VD_REPORT_COMMAND_LOG_BYTES_MAX);
  g_assert_cmpint (st.st_size, >, VD_REPORT_COMMAND_LOG_BYTES_MAX / 2);
  g_assert_true (vivarium_report_get_command_log (report, NULL, &n, &not_kept));
  g_assert_cmpuint (n + not_kept, ==, 1000);
  g_assert_cmpuint (not_kept, >, 0);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/report-store/store-and-reload", Fixture, NULL, fixture_set_up, test_store_and_reload, fixture_tear_down);
  g_test_add ("/report-store/tampered-skipped", Fixture, NULL, fixture_set_up, test_tampered_skipped, fixture_tear_down);
  g_test_add ("/report-store/temporaries-removed", Fixture, NULL, fixture_set_up, test_temporaries_removed,
              fixture_tear_down);
  g_test_add ("/report-store/retention", Fixture, NULL, fixture_set_up, test_retention, fixture_tear_down);
  g_test_add ("/report-store/command-log", Fixture, NULL, fixture_set_up, test_command_log, fixture_tear_down);
  g_test_add ("/report-store/command-log-bound", Fixture, NULL, fixture_set_up, test_command_log_bound, fixture_tear_down);
  return g_test_run ();
}
