/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-progress.h"

typedef struct {
  guint   n_changed;
  gdouble last;
  gchar  *message;
} Seen;

static void
changed_cb (VdProgress *progress, gdouble fraction, const gchar *message, gpointer user_data)
{
  Seen *seen = user_data;

  g_assert_cmpfloat (fraction, >=, seen->last);   /* never goes back */
  seen->n_changed++;
  seen->last = fraction;
  g_free (seen->message);
  seen->message = g_strdup (message);
}

static void
test_weights (void)
{
  g_autoptr(VdProgress) p = vd_progress_new ();
  Seen seen = { 0 };

  g_signal_connect (p, "changed", G_CALLBACK (changed_cb), &seen);
  vd_progress_add_step (p, "setup", 1);
  vd_progress_add_step (p, "work", 8);
  vd_progress_add_step (p, "teardown", 1);
  g_assert_cmpuint (vd_progress_get_n_steps (p), ==, 3);
  g_assert_cmpstr (vd_progress_get_message (p), ==, "setup");
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 0);
  vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 10);
  g_assert_cmpstr (seen.message, ==, "work");
  vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 90);
  vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 100);
  g_assert_cmpfloat (vd_progress_get_fraction (p), ==, 1.0);
  g_assert_cmpuint (seen.n_changed, ==, 3);
  g_free (seen.message);
}

static void
test_child (void)
{
  g_autoptr(VdProgress) p = vd_progress_new ();
  VdProgress *child;
  Seen seen = { 0 };

  g_signal_connect (p, "changed", G_CALLBACK (changed_cb), &seen);
  vd_progress_add_step (p, "phase one", 1);
  vd_progress_add_step (p, "phase two", 1);
  child = vd_progress_get_child (p);
  vd_progress_add_step (child, "boot", 3);
  vd_progress_add_step (child, "probe", 1);
  g_assert_cmpstr (vd_progress_get_message (p), ==, "boot");
  vd_progress_set_message (child, "boot: layer 1 on");
  g_assert_cmpstr (seen.message, ==, "boot: layer 1 on");
  vd_progress_step_done (child);
  /* 3/4 of the first half */
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 37);
  g_assert_cmpstr (seen.message, ==, "probe");
  vd_progress_step_done (child);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 50);
  vd_progress_step_done (p);
  g_assert_cmpstr (vd_progress_get_message (p), ==, "phase two");
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 50);
  vd_progress_finish (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 100);
  g_free (seen.message);
}

/* Rounded up to 100 only when it really finished. */
static void
test_never_100_early (void)
{
  g_autoptr(VdProgress) p = vd_progress_new ();

  for (guint i = 0; i < 1000; i++)
    vd_progress_add_step (p, "tiny", 1);
  for (guint i = 0; i < 999; i++)
    vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 99);
  vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 100);
}

/* Typed steps: asked for by id, moved to by id, forward only. */
enum { STEP_BOOT = 10, STEP_RUN = 20, STEP_CHECK = 30, STEP_END = 40 };

static void
test_ids (void)
{
  g_autoptr(VdProgress) p = vd_progress_new ();
  Seen seen = { 0 };

  g_signal_connect (p, "changed", G_CALLBACK (changed_cb), &seen);
  vd_progress_add_step_id (p, STEP_BOOT, "work", 1);
  vd_progress_add_step_id (p, STEP_RUN, "work", 5);
  vd_progress_add_step_id (p, STEP_CHECK, "verify", 2);
  vd_progress_add_step_id (p, STEP_END, "report", 2);
  g_assert_cmpuint (vd_progress_get_step_id (p), ==, STEP_BOOT);
  g_assert_true (vd_progress_step_to (p, STEP_BOOT));        /* already there: no change */
  g_assert_cmpuint (seen.n_changed, ==, 0);
  g_assert_true (vd_progress_step_to (p, STEP_RUN));
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 10);
  vd_progress_set_message (p, "the worker said hello");
  /* The message is for people; the step's name stays the step's. */
  g_assert_cmpstr (vd_progress_get_message (p), ==, "the worker said hello");
  g_assert_cmpstr (vd_progress_get_step_name (p), ==, "work");
  /* Nothing to check: straight to the end, the check counts as done. */
  g_assert_true (vd_progress_step_to (p, STEP_END));
  g_assert_cmpuint (vd_progress_get_step_id (p), ==, STEP_END);
  g_assert_cmpstr (vd_progress_get_message (p), ==, "report");
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 80);
  g_assert_cmpuint (seen.n_changed, ==, 3);
  /* Back, or to a step never declared: refused, nothing moves. */
  g_assert_false (vd_progress_step_to (p, STEP_CHECK));
  g_assert_false (vd_progress_step_to (p, 99));
  g_assert_cmpuint (vd_progress_get_step_id (p), ==, STEP_END);
  g_assert_cmpuint (seen.n_changed, ==, 3);
  vd_progress_step_done (p);
  g_assert_cmpuint (vd_progress_get_step_id (p), ==, VD_PROGRESS_NO_STEP);
  g_assert_null (vd_progress_get_step_name (p));
  g_assert_false (vd_progress_step_to (p, STEP_END));
  g_assert_cmpuint (vd_progress_get_percent (p), ==, 100);
  g_free (seen.message);
}

/* Without ids, a step's id is its place. */
static void
test_index_ids (void)
{
  g_autoptr(VdProgress) p = vd_progress_new ();

  vd_progress_add_step (p, "a", 1);
  vd_progress_add_step (p, "b", 1);
  vd_progress_add_step (p, "c", 1);
  g_assert_true (vd_progress_step_to (p, 2));
  g_assert_cmpstr (vd_progress_get_step_name (p), ==, "c");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/progress/weights", test_weights);
  g_test_add_func ("/progress/child", test_child);
  g_test_add_func ("/progress/never-100-early", test_never_100_early);
  g_test_add_func ("/progress/ids", test_ids);
  g_test_add_func ("/progress/index-ids", test_index_ids);
  return g_test_run ();
}
