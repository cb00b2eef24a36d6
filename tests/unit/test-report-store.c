/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
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

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/report-store/store-and-reload", Fixture, NULL, fixture_set_up, test_store_and_reload, fixture_tear_down);
  g_test_add ("/report-store/tampered-skipped", Fixture, NULL, fixture_set_up, test_tampered_skipped, fixture_tear_down);
  g_test_add ("/report-store/retention", Fixture, NULL, fixture_set_up, test_retention, fixture_tear_down);
  return g_test_run ();
}
