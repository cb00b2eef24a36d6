/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-idle.h"

/* VdIdle on a real main loop with a short timeout. Times are only bounded
 * below by the timeout ("did not exit before") and above by a generous
 * bound ("did exit after"), so a loaded machine slows the test, never
 * fails it. */
#define TIMEOUT_MS 300
#define BOUND_MS   3000

typedef struct {
  GMainLoop *loop;
  gint64     fired_at;   /* µs, monotonic; 0: not fired */
  guint      n_fired;
} Fixture;

static void
timeout_cb (VdIdle *idle, gpointer user_data)
{
  Fixture *f = user_data;

  f->fired_at = g_get_monotonic_time ();
  f->n_fired++;
  g_main_loop_quit (f->loop);
}

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

/* Runs the loop until the idle fires or BOUND_MS pass. */
static void
run (Fixture *f)
{
  guint guard = g_timeout_add (BOUND_MS, quit_cb, f->loop);

  g_main_loop_run (f->loop);
  if (f->fired_at != 0)
    g_source_remove (guard);
}

static void
spin (Fixture *f, guint ms)
{
  g_timeout_add (ms, quit_cb, f->loop);
  g_main_loop_run (f->loop);
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->loop = g_main_loop_new (NULL, FALSE);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_main_loop_unref (f->loop);
}

static void
test_fires_after_timeout (Fixture *f, gconstpointer data)
{
  gint64 start = g_get_monotonic_time ();
  g_autoptr(VdIdle) idle = vd_idle_new (TIMEOUT_MS);

  g_signal_connect (idle, "timeout", G_CALLBACK (timeout_cb), f);
  vd_idle_reset (idle);
  run (f);
  g_assert_cmpuint (f->n_fired, ==, 1);
  g_assert_cmpint (f->fired_at - start, >=, TIMEOUT_MS * 1000);
  g_assert_cmpint (f->fired_at - start, <, (TIMEOUT_MS + BOUND_MS) * 1000);
}

/* Defect 10: the exit is one timeout after the last call, not a whole
 * quiet period between two polls (up to two timeouts). */
static void
test_reset_restarts_clock (Fixture *f, gconstpointer data)
{
  g_autoptr(VdIdle) idle = vd_idle_new (TIMEOUT_MS);
  gint64 last_call;

  g_signal_connect (idle, "timeout", G_CALLBACK (timeout_cb), f);
  for (guint i = 0; i < 4; i++) {
    spin (f, TIMEOUT_MS / 2);
    vd_idle_reset (idle);
  }
  g_assert_cmpuint (f->n_fired, ==, 0);
  last_call = g_get_monotonic_time ();
  run (f);
  g_assert_cmpuint (f->n_fired, ==, 1);
  g_assert_cmpint (f->fired_at - last_call, >=, TIMEOUT_MS * 1000);
  g_assert_cmpint (f->fired_at - last_call, <, (TIMEOUT_MS + BOUND_MS) * 1000);
}

static void
test_inhibit_holds (Fixture *f, gconstpointer data)
{
  g_autoptr(VdIdle) idle = vd_idle_new (TIMEOUT_MS);
  guint a, b;
  gint64 released;

  g_signal_connect (idle, "timeout", G_CALLBACK (timeout_cb), f);
  vd_idle_reset (idle);
  a = vd_idle_inhibit (idle, "a session");
  b = vd_idle_inhibit (idle, "a job");
  g_assert_cmpuint (a, !=, 0);
  g_assert_cmpuint (a, !=, b);
  g_assert_cmpuint (vd_idle_get_n_inhibitors (idle), ==, 2);
  spin (f, TIMEOUT_MS * 3);
  vd_idle_uninhibit (idle, a);
  spin (f, TIMEOUT_MS * 2);
  g_assert_cmpuint (f->n_fired, ==, 0);
  released = g_get_monotonic_time ();
  vd_idle_uninhibit (idle, b);
  run (f);
  g_assert_cmpuint (f->n_fired, ==, 1);
  g_assert_cmpint (f->fired_at - released, >=, TIMEOUT_MS * 1000);
  g_assert_cmpint (f->fired_at - released, <, (TIMEOUT_MS + BOUND_MS) * 1000);
}

static void
test_zero_never_fires (Fixture *f, gconstpointer data)
{
  g_autoptr(VdIdle) idle = vd_idle_new (0);

  g_signal_connect (idle, "timeout", G_CALLBACK (timeout_cb), f);
  vd_idle_reset (idle);
  vd_idle_uninhibit (idle, vd_idle_inhibit (idle, "x"));
  spin (f, TIMEOUT_MS * 2);
  g_assert_cmpuint (f->n_fired, ==, 0);
}

/* Nothing counts before the daemon serves its name. */
static void
test_not_started (Fixture *f, gconstpointer data)
{
  g_autoptr(VdIdle) idle = vd_idle_new (TIMEOUT_MS);

  g_signal_connect (idle, "timeout", G_CALLBACK (timeout_cb), f);
  vd_idle_uninhibit (idle, vd_idle_inhibit (idle, "start-up"));
  spin (f, TIMEOUT_MS * 2);
  g_assert_cmpuint (f->n_fired, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/idle/fires-after-timeout", Fixture, NULL, fixture_setup, test_fires_after_timeout, fixture_teardown);
  g_test_add ("/idle/reset-restarts-clock", Fixture, NULL, fixture_setup, test_reset_restarts_clock, fixture_teardown);
  g_test_add ("/idle/inhibit-holds", Fixture, NULL, fixture_setup, test_inhibit_holds, fixture_teardown);
  g_test_add ("/idle/not-started", Fixture, NULL, fixture_setup, test_not_started, fixture_teardown);
  g_test_add ("/idle/zero-never-fires", Fixture, NULL, fixture_setup, test_zero_never_fires, fixture_teardown);
  return g_test_run ();
}
