/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-worker-grants.h"

#define SESSION "org.vivarium.Vivarium1.Session"
#define TASK    "org.vivarium.Vivarium1.Task"

/* A worker is admitted for exactly what it was allowed: the method, on that
 * interface, on that object; nothing once it is removed. A uid that is no
 * worker is not judged here at all (polkit decides for it). */
static void
test_exact (void)
{
  g_autoptr(VdWorkerGrants) g = vd_worker_grants_new ();

  g_assert_false (vd_worker_grants_is_worker (g, 1000));
  vd_worker_grants_allow (g, 5000, SESSION, "Exec", "/s/a");
  vd_worker_grants_allow (g, 5000, TASK, "Finish", "/t/a");
  g_assert_true (vd_worker_grants_is_worker (g, 5000));
  g_assert_true (vd_worker_grants_allows (g, 5000, SESSION, "Exec", "/s/a"));
  g_assert_true (vd_worker_grants_allows (g, 5000, TASK, "Finish", "/t/a"));
  g_assert_false (vd_worker_grants_allows (g, 5000, SESSION, "Exec", "/s/b"));       /* another session */
  g_assert_false (vd_worker_grants_allows (g, 5000, SESSION, "Stop", "/s/a"));       /* another method */
  g_assert_false (vd_worker_grants_allows (g, 5000, TASK, "Exec", "/s/a"));          /* another interface */
  g_assert_false (vd_worker_grants_allows (g, 5000, TASK, "Finish", "/t/b"));        /* another task */
  g_assert_false (vd_worker_grants_allows (g, 5001, SESSION, "Exec", "/s/a"));       /* another uid */
  /* The key joins with '\n', which no D-Bus name or path may hold: no
   * splice of one grant's parts can make another. */
  g_assert_false (vd_worker_grants_allows (g, 5000, SESSION "\nExec", "", "/s/a"));
  vd_worker_grants_remove (g, 5000);
  g_assert_false (vd_worker_grants_is_worker (g, 5000));
  g_assert_false (vd_worker_grants_allows (g, 5000, SESSION, "Exec", "/s/a"));
}

/* Marked a worker with nothing allowed: judged here, and refused everything. */
static void
test_worker_without_grants (void)
{
  g_autoptr(VdWorkerGrants) g = vd_worker_grants_new ();

  vd_worker_grants_add_worker (g, 7000);
  g_assert_true (vd_worker_grants_is_worker (g, 7000));
  g_assert_false (vd_worker_grants_allows (g, 7000, "org.vivarium.Vivarium1.Manager", "ListSessions",
                                           "/org/vivarium/Vivarium1"));
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/worker-grants/exact", test_exact);
  g_test_add_func ("/worker-grants/worker-without-grants", test_worker_without_grants);
  return g_test_run ();
}
