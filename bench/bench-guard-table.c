/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "bench-guard-table"

#include "config.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "vd-guard-table.h"

/* Time to install the guard table (one batch, then the read-back verify)
 * with 1, 100 and 1000 registered session uids, and to add and remove one
 * session at runtime on top. Runs in a private network namespace of its
 * own, so the host's ruleset is never touched. Needs root. */

#define UID_FIRST 2147000000u
#define UID_LAST  2147065534u
#define ROUNDS    5

static gint
compare_double (gconstpointer a, gconstpointer b)
{
  gdouble da = *(const gdouble *) a;
  gdouble db = *(const gdouble *) b;
  return da < db ? -1 : da > db ? 1 : 0;
}

static gboolean
bench_one (guint n_sessions, gdouble *install_ms, gdouble *session_ms, GError **error)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  gint64 start;

  for (guint i = 0; i < n_sessions; i++) {
    if (!vd_guard_table_add_session (table, UID_FIRST + i, error))
      return FALSE;
  }
  start = g_get_monotonic_time ();
  if (!vd_guard_table_install (table, error))
    return FALSE;
  *install_ms = (gdouble) (g_get_monotonic_time () - start) / 1000.0;

  start = g_get_monotonic_time ();
  if (!vd_guard_table_add_session (table, UID_LAST, error) ||
      !vd_guard_table_remove_session (table, UID_LAST, error))
    return FALSE;
  *session_ms = (gdouble) (g_get_monotonic_time () - start) / 1000.0;
  vd_guard_table_uninstall (table);
  return TRUE;
}

int
main (int argc, char **argv)
{
  const guint sizes[] = { 1, 100, 1000 };

  if (geteuid () != 0) {
    g_printerr ("bench-guard-table needs root (CAP_NET_ADMIN)\n");
    return 1;
  }
  if (unshare (CLONE_NEWNET) < 0) {
    g_printerr ("cannot enter a private network namespace: %s\n", g_strerror (errno));
    return 1;
  }
  g_print ("%-9s %-22s %-22s\n", "sessions", "install+verify ms", "add+remove one ms");
  g_print ("%-9s %-22s %-22s\n", "", "(median/min/max)", "(median)");
  for (guint s = 0; s < G_N_ELEMENTS (sizes); s++) {
    gdouble install[ROUNDS], session[ROUNDS];

    for (guint r = 0; r < ROUNDS; r++) {
      g_autoptr(GError) error = NULL;
      if (!bench_one (sizes[s], &install[r], &session[r], &error)) {
        g_printerr ("%u sessions: %s\n", sizes[s], error->message);
        return 1;
      }
    }
    qsort (install, ROUNDS, sizeof (gdouble), compare_double);
    qsort (session, ROUNDS, sizeof (gdouble), compare_double);
    g_print ("%-9u %7.2f / %6.2f / %6.2f   %7.3f\n", sizes[s], install[ROUNDS / 2], install[0],
             install[ROUNDS - 1], session[ROUNDS / 2]);
  }
  return 0;
}
