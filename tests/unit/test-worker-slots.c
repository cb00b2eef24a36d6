/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdlib.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-worker-slots.h"

/* A /proc of our own: one directory per "process", each with its status. */
static gchar *
fake_proc (void)
{
  g_autoptr(GError) error = NULL;
  gchar *dir = g_dir_make_tmp ("vivarium-proc-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
add_process (const gchar *proc, const gchar *pid, const gchar *uid_line)
{
  g_autofree gchar *dir = g_build_filename (proc, pid, NULL);
  g_autofree gchar *path = g_build_filename (dir, "status", NULL);
  g_autofree gchar *status = g_strdup_printf ("Name:\tsh\nState:\tS (sleeping)\nUid:\t%s\nGid:\t0\t0\t0\t0\n",
                                              uid_line);

  g_assert_cmpint (g_mkdir (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, status, -1, NULL));
}

static void
remove_tree (const gchar *path)
{
  g_autofree gchar *command = g_strdup_printf ("rm -rf '%s'", path);
  g_assert_cmpint (system (command), ==, 0);
}

/* Any of real, effective, saved and filesystem uid counts: a process that
 * changed one of them is still the worker's. Other uids, other prefixes of
 * the number and the Gid line do not. */
static void
test_uid_has_processes (void)
{
  g_autofree gchar *proc = fake_proc ();

  g_assert_false (vd_worker_slots_uid_has_processes (proc, 5000));
  add_process (proc, "12", "0\t0\t0\t0");
  add_process (proc, "13", "500\t500\t500\t500");
  add_process (proc, "self", "5000\t5000\t5000\t5000");   /* not a pid: skipped */
  g_assert_false (vd_worker_slots_uid_has_processes (proc, 5000));
  g_assert_false (vd_worker_slots_uid_has_processes (proc, 50));
  add_process (proc, "14", "1000\t1000\t5000\t1000");
  g_assert_true (vd_worker_slots_uid_has_processes (proc, 5000));
  g_assert_true (vd_worker_slots_uid_has_processes (proc, 1000));
  g_assert_true (vd_worker_slots_uid_has_processes ("/nonexistent/proc", 5000));   /* cannot tell: busy */
  remove_tree (proc);
}

/* A slot whose uid still has a process is not given out; every slot taken
 * or dirty is Busy, with a sentence. */
static void
test_claim_skips_dirty (void)
{
  g_autofree gchar *proc = fake_proc ();
  g_autoptr(VdWorkerSlots) slots = vd_worker_slots_new (NULL, proc, 7000, 3);
  g_autoptr(GError) error = NULL;
  guint32 a = 0, b = 0, c = 0;

  add_process (proc, "40", "7000\t7000\t7000\t7000");   /* a leftover of an earlier daemon's worker */
  g_assert_true (vd_worker_slots_claim (slots, "u1.service", &a, &error));
  g_assert_true (vd_worker_slots_claim (slots, "u2.service", &b, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (a, !=, 7000);
  g_assert_cmpuint (b, !=, 7000);
  g_assert_cmpuint (a, !=, b);
  g_assert_false (vd_worker_slots_claim (slots, "u3.service", &c, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY);
  g_clear_error (&error);
  remove_tree (proc);
}

/* Without a systemd to ask whether its last unit is over, a released slot
 * is never given out again: no answer is not "gone". */
static void
test_released_needs_its_unit_over (void)
{
  g_autofree gchar *proc = fake_proc ();
  g_autoptr(VdWorkerSlots) slots = vd_worker_slots_new (NULL, proc, 7000, 1);
  g_autoptr(GError) error = NULL;
  guint32 uid = 0;

  g_assert_true (vd_worker_slots_claim (slots, "u1.service", &uid, &error));
  vd_worker_slots_release (slots, uid);
  g_assert_false (vd_worker_slots_claim (slots, "u2.service", &uid, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY);
  remove_tree (proc);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/worker-slots/uid-has-processes", test_uid_has_processes);
  g_test_add_func ("/worker-slots/claim-skips-dirty", test_claim_skips_dirty);
  g_test_add_func ("/worker-slots/released-needs-its-unit-over", test_released_needs_its_unit_over);
  return g_test_run ();
}
