/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-egress-budget.h"

struct _VivariumEgressBudget {
  GMutex   lock;
  guint64  up, down;
  guint64  limit_up, limit_down;
  gboolean spent_up, spent_down;
};

VivariumEgressBudget *
vivarium_egress_budget_new (guint64 limit_up, guint64 limit_down)
{
  VivariumEgressBudget *budget = g_new0 (VivariumEgressBudget, 1);

  g_mutex_init (&budget->lock);
  budget->limit_up = limit_up;
  budget->limit_down = limit_down;
  return budget;
}

void
vivarium_egress_budget_free (VivariumEgressBudget *budget)
{
  g_mutex_clear (&budget->lock);
  g_free (budget);
}

static gboolean
crosses (guint64 total, guint64 more, guint64 limit)
{
  return limit != 0 && (more > limit || total > limit - more);
}

gboolean
vivarium_egress_budget_charge (VivariumEgressBudget *budget, guint64 up, guint64 down, gchar **reason)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&budget->lock);

  if (crosses (budget->up, up, budget->limit_up)) {
    budget->spent_up = TRUE;
    *reason = g_strdup_printf ("the session's upload limit of %" G_GUINT64_FORMAT " bytes was reached: "
                               "the connection was cut", budget->limit_up);
    return FALSE;
  }
  if (crosses (budget->down, down, budget->limit_down)) {
    budget->spent_down = TRUE;
    *reason = g_strdup_printf ("the session's download limit of %" G_GUINT64_FORMAT " bytes was reached: "
                               "the connection was cut", budget->limit_down);
    return FALSE;
  }
  budget->up += up;
  budget->down += down;
  return TRUE;
}

gchar *
vivarium_egress_budget_spent (VivariumEgressBudget *budget)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&budget->lock);

  if (budget->spent_up)
    return g_strdup_printf ("the session's upload limit of %" G_GUINT64_FORMAT " bytes is used up", budget->limit_up);
  if (budget->spent_down)
    return g_strdup_printf ("the session's download limit of %" G_GUINT64_FORMAT " bytes is used up",
                            budget->limit_down);
  return NULL;
}

void
vivarium_egress_budget_totals (VivariumEgressBudget *budget, guint64 *up, guint64 *down)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&budget->lock);

  *up = budget->up;
  *down = budget->down;
}
