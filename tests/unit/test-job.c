/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vd-fs.h"
#include "vd-job.h"

/* A job's record on disk, read back as a restarted daemon would (defect 7:
 * a crash lost the state and the log). No bus: the skeleton is read
 * directly. */

typedef struct {
  gchar *dir;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("test-job-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_assert_true (vd_fs_rm_rf (f->dir, NULL));
  g_free (f->dir);
}

static VivariumDBusJob *
iface (VdJob *job)
{
  return VIVARIUM_DBUS_JOB (vd_job_get_skeleton (job));
}

static void
test_finished_survives (Fixture *f, gconstpointer data)
{
  g_autoptr(VdJob) job = vd_job_new ("build-image", "abc12345", f->dir, TRUE);
  g_autoptr(VdJob) back = NULL;
  g_autoptr(GError) cause = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "No space left on device");
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (vd_job_get_state (job), ==, VIVARIUM_JOB_STATE_RUNNING);
  vd_job_progress (job, 40, "Converting the disk to qcow2");
  vd_job_append_log (job, "line one");
  vd_job_append_log (job, "line two");
  vd_job_fail (job, cause);
  g_assert_cmpint (vd_job_get_state (job), ==, VIVARIUM_JOB_STATE_FAILED);

  back = vd_job_load (f->dir, "abc12345", &error);
  g_assert_no_error (error);
  g_assert_cmpint (vd_job_get_state (back), ==, VIVARIUM_JOB_STATE_FAILED);
  g_assert_cmpstr (vivarium_dbus_job_get_state (iface (back)), ==, "failed");
  g_assert_cmpstr (vivarium_dbus_job_get_operation (iface (back)), ==, "build-image");
  g_assert_cmpstr (vivarium_dbus_job_get_error_message (iface (back)), ==, "No space left on device");
  g_assert_cmpstr (vivarium_dbus_job_get_log (iface (back)), ==, "line one\nline two\n");
  g_assert_cmpstr (vivarium_dbus_job_get_step (iface (back)), ==, "Converting the disk to qcow2");
  g_assert_cmpstr (vd_job_get_object_path (back), ==, "/org/vivarium/Vivarium1/jobs/abc12345");
  g_assert_false (vivarium_dbus_job_get_cancelable (iface (back)));
  g_assert_cmpuint (vivarium_dbus_job_get_finished_at (iface (back)), !=, 0);
}

/* The daemon died (no finish, no flush by a timeout): the record says
 * running, the log has what was flushed; read back it is failed, with the
 * reason, and the record on disk says so too. */
static void
test_running_becomes_failed (Fixture *f, gconstpointer data)
{
  g_autoptr(VdJob) job = vd_job_new ("build-image", "dead0001", f->dir, TRUE);
  g_autoptr(VdJob) back = NULL;
  g_autoptr(VdJob) again = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *big = g_strnfill (70 * 1024, 'x');

  vd_job_append_log (job, big);   /* past the batch size: written now */
  back = vd_job_load (f->dir, "dead0001", &error);
  g_assert_no_error (error);
  g_assert_cmpint (vd_job_get_state (back), ==, VIVARIUM_JOB_STATE_FAILED);
  g_assert_cmpstr (vivarium_dbus_job_get_error_message (iface (back)), ==, "the daemon stopped while it ran");
  g_assert_cmpuint (strlen (vivarium_dbus_job_get_log (iface (back))), ==, 70 * 1024 + 1);
  again = vd_job_load (f->dir, "dead0001", &error);
  g_assert_no_error (error);
  g_assert_cmpint (vd_job_get_state (again), ==, VIVARIUM_JOB_STATE_FAILED);
  g_object_run_dispose (G_OBJECT (job));
}

static void
test_succeeded_and_cancel (Fixture *f, gconstpointer data)
{
  g_autoptr(VdJob) job = vd_job_new ("self-test", "5e1f7e57", f->dir, FALSE);
  g_autoptr(VdJob) back = NULL;
  g_autoptr(GError) cancelled = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED, "Cancelled");
  g_autoptr(GError) error = NULL;

  vd_job_set_progress (job, 0.5, "both: probing");
  g_assert_cmpfloat (vivarium_dbus_job_get_progress (iface (job)), ==, 0.5);
  g_assert_cmpuint (vivarium_dbus_job_get_percent (iface (job)), ==, 50);
  vd_job_succeed (job, NULL);
  vd_job_fail (job, cancelled);   /* too late: the first end stands */
  back = vd_job_load (f->dir, "5e1f7e57", &error);
  g_assert_no_error (error);
  g_assert_cmpint (vd_job_get_state (back), ==, VIVARIUM_JOB_STATE_SUCCEEDED);
  g_assert_cmpfloat (vivarium_dbus_job_get_progress (iface (back)), ==, 1.0);
  g_assert_cmpstr (vivarium_dbus_job_get_result (iface (back)), ==, "/");
  g_assert_true (vd_job_delete_files (back, &error));
  g_assert_no_error (error);
  g_assert_null (vd_job_load (f->dir, "5e1f7e57", &error));
  g_assert_nonnull (error);
}

static void
test_cancelled_state (Fixture *f, gconstpointer data)
{
  g_autoptr(VdJob) job = vd_job_new ("build-image", "cafe0001", f->dir, TRUE);
  g_autoptr(GError) cancelled = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED, "The build was cancelled");

  vd_job_fail (job, cancelled);
  g_assert_cmpint (vd_job_get_state (job), ==, VIVARIUM_JOB_STATE_CANCELLED);
  g_assert_cmpstr (vivarium_dbus_job_get_state (iface (job)), ==, "cancelled");
}

/* The jobs' directory is the daemon's alone (builders' logs), whatever
 * made it first: the tasks' record writer keeps it 0700, the record 0600. */
static void
test_record_private (Fixture *f, gconstpointer data)
{
  g_autofree gchar *record = g_build_filename (f->dir, "b0b0b0b0.json", NULL);
  g_autoptr(VdJob) job = NULL;
  GStatBuf st;

  g_assert_cmpint (g_chmod (f->dir, 0755), ==, 0);
  job = vd_job_new ("build-image", "b0b0b0b0", f->dir, TRUE);
  g_assert_cmpint (g_stat (f->dir, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpint (g_stat (record, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, 0600);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/job/finished-survives", Fixture, NULL, fixture_setup, test_finished_survives, fixture_teardown);
  g_test_add ("/job/running-becomes-failed", Fixture, NULL, fixture_setup, test_running_becomes_failed, fixture_teardown);
  g_test_add ("/job/succeeded", Fixture, NULL, fixture_setup, test_succeeded_and_cancel, fixture_teardown);
  g_test_add ("/job/cancelled", Fixture, NULL, fixture_setup, test_cancelled_state, fixture_teardown);
  g_test_add ("/job/record-private", Fixture, NULL, fixture_setup, test_record_private, fixture_teardown);
  return g_test_run ();
}
