/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-worker-grants.h"

#define SESSION "org.vivarium.Vivarium1.Session"
#define TASK    "org.vivarium.Vivarium1.Task"
#define UNIT_A  "vivarium-worker-aaaaaaaa.service"
#define UNIT_B  "vivarium-worker-bbbbbbbb.service"

/* A worker is admitted for exactly what it was allowed: the method, on that
 * interface, on that object, from its own unit; nothing once it is removed. */
static void
test_exact (void)
{
  g_autoptr(VdWorkerGrants) g = vd_worker_grants_new (5000, 4);

  vd_worker_grants_add_worker (g, 5000, UNIT_A);
  vd_worker_grants_allow (g, 5000, SESSION, "Exec", "/s/a");
  vd_worker_grants_allow (g, 5000, TASK, "Finish", "/t/a");
  g_assert_true (vd_worker_grants_is_worker (g, 5000));
  g_assert_true (vd_worker_grants_allows (g, 5000, UNIT_A, SESSION, "Exec", "/s/a"));
  g_assert_true (vd_worker_grants_allows (g, 5000, UNIT_A, TASK, "Finish", "/t/a"));
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, SESSION, "Exec", "/s/b"));  /* another session */
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, SESSION, "Stop", "/s/a"));  /* another method */
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, TASK, "Exec", "/s/a"));     /* another interface */
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, TASK, "Finish", "/t/b"));   /* another task */
  g_assert_false (vd_worker_grants_allows (g, 5001, UNIT_A, SESSION, "Exec", "/s/a"));  /* another uid */
  /* The key joins with '\n', which no D-Bus name or path may hold: no
   * splice of one grant's parts can make another. */
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, SESSION "\nExec", "", "/s/a"));
  vd_worker_grants_remove (g, 5000);
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, SESSION, "Exec", "/s/a"));
}

/* The same uid from anywhere but the worker's own unit gets nothing: a
 * process the slot's last tenant left behind, one with no unit, one in
 * another task's unit. */
static void
test_bound_to_unit (void)
{
  g_autoptr(VdWorkerGrants) g = vd_worker_grants_new (5000, 4);

  vd_worker_grants_add_worker (g, 5000, UNIT_B);
  vd_worker_grants_allow (g, 5000, TASK, "Finish", "/t/b");
  g_assert_true (vd_worker_grants_allows (g, 5000, UNIT_B, TASK, "Finish", "/t/b"));
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, TASK, "Finish", "/t/b"));
  g_assert_false (vd_worker_grants_allows (g, 5000, NULL, TASK, "Finish", "/t/b"));
  g_assert_false (vd_worker_grants_allows (g, 5000, "vivariumd.service", TASK, "Finish", "/t/b"));
  /* A new tenant of the uid replaces the old one's unit and calls. */
  vd_worker_grants_add_worker (g, 5000, UNIT_A);
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_B, TASK, "Finish", "/t/b"));
  g_assert_false (vd_worker_grants_allows (g, 5000, UNIT_A, TASK, "Finish", "/t/b"));
}

/* Every uid of the reserved range is a worker's, granted or not: judged
 * here and refused everything, never handed to polkit. Outside the range
 * a uid is polkit's to judge. */
static void
test_reserved_range (void)
{
  g_autoptr(VdWorkerGrants) g = vd_worker_grants_new (7000, 2);

  g_assert_false (vd_worker_grants_is_worker (g, 1000));
  g_assert_false (vd_worker_grants_is_worker (g, 6999));
  g_assert_true (vd_worker_grants_is_worker (g, 7000));
  g_assert_true (vd_worker_grants_is_worker (g, 7001));
  g_assert_false (vd_worker_grants_is_worker (g, 7002));
  g_assert_false (vd_worker_grants_allows (g, 7001, UNIT_A, "org.vivarium.Vivarium1.Manager", "ListSessions",
                                           "/org/vivarium/Vivarium1"));
  vd_worker_grants_add_worker (g, 7000, UNIT_A);
  g_assert_false (vd_worker_grants_allows (g, 7000, UNIT_A, "org.vivarium.Vivarium1.Manager", "ListSessions",
                                           "/org/vivarium/Vivarium1"));
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/worker-grants/exact", test_exact);
  g_test_add_func ("/worker-grants/bound-to-unit", test_bound_to_unit);
  g_test_add_func ("/worker-grants/reserved-range", test_reserved_range);
  return g_test_run ();
}
