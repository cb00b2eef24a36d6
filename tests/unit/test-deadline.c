/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-deadline"

#include "config.h"

#include "vivarium-error.h"
#include "vd-deadline.h"
#include "fake-peer.h"

typedef struct {
  guint    calls;
  gint     code;
  gboolean done;
} Fired;

static void
on_deadline (gint code, gpointer user_data)
{
  Fired *f = user_data;

  f->calls++;
  f->code = code;
  f->done = TRUE;
}

static gboolean
set_flag (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the loop a while longer, to see that nothing else fires. */
static void
settle (guint ms)
{
  gboolean flag = FALSE;

  g_timeout_add (ms, set_flag, &flag);
  test_run_until (&flag);
}

static void
test_times_out_once (void)
{
  Fired f = { 0 };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(VdDeadline) d = vd_deadline_new (20, cancellable, NULL, on_deadline, &f);

  test_run_until (&f.done);
  g_assert_cmpint (f.code, ==, VIVARIUM_ERROR_TIMED_OUT);
  g_assert_cmpuint (vd_deadline_remaining_ms (d), ==, 0);
  /* A cancel after the end is not a second end. */
  g_cancellable_cancel (cancellable);
  settle (50);
  g_assert_cmpuint (f.calls, ==, 1);
}

static void
test_cancelled (void)
{
  Fired f = { 0 };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(VdDeadline) d = vd_deadline_new (60000, cancellable, NULL, on_deadline, &f);

  g_assert_cmpuint (vd_deadline_remaining_ms (d), >, 0);
  g_cancellable_cancel (cancellable);
  test_run_until (&f.done);
  g_assert_cmpint (f.code, ==, VIVARIUM_ERROR_CANCELLED);
  g_assert_cmpuint (f.calls, ==, 1);
}

static void
test_stopped (void)
{
  Fired f = { 0 };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(VdDeadline) d = vd_deadline_new (10, cancellable, NULL, on_deadline, &f);

  vd_deadline_stop (d);
  g_cancellable_cancel (cancellable);
  settle (50);
  g_assert_cmpuint (f.calls, ==, 0);
}

static void
test_past_deadline (void)
{
  Fired f = { 0 };
  g_autoptr(VdDeadline) d = vd_deadline_new_at (g_get_monotonic_time () - 1000000, NULL, NULL, on_deadline, &f);

  g_assert_cmpuint (vd_deadline_ms_until (vd_deadline_get_us (d)), ==, 0);
  /* Still reported through the loop, never from inside the constructor. */
  g_assert_cmpuint (f.calls, ==, 0);
  test_run_until (&f.done);
  g_assert_cmpint (f.code, ==, VIVARIUM_ERROR_TIMED_OUT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/deadline/times-out-once", test_times_out_once);
  g_test_add_func ("/deadline/cancelled", test_cancelled);
  g_test_add_func ("/deadline/stopped", test_stopped);
  g_test_add_func ("/deadline/past-deadline", test_past_deadline);
  return g_test_run ();
}
