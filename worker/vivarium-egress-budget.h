/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A session's bytes up (guest → internet) and down, counted by every
 * connection of its proxy against the session's limits (0 = none). The
 * chunk that would cross a limit is not forwarded: the session never gets
 * more than its limit. Thread-safe. */
typedef struct _VivariumEgressBudget VivariumEgressBudget;

VivariumEgressBudget *vivarium_egress_budget_new    (guint64 limit_up,
                                                     guint64 limit_down);
void                  vivarium_egress_budget_free   (VivariumEgressBudget *budget);

/* Counts up/down bytes; FALSE (nothing counted, the limit now spent) when
 * they would cross a limit, with *reason for the cut connection's log. */
gboolean              vivarium_egress_budget_charge (VivariumEgressBudget  *budget,
                                                     guint64                up,
                                                     guint64                down,
                                                     gchar                **reason);

/* NULL while the session may open connections; else why not. */
gchar                *vivarium_egress_budget_spent  (VivariumEgressBudget *budget);

void                  vivarium_egress_budget_totals (VivariumEgressBudget *budget,
                                                     guint64              *up,
                                                     guint64              *down);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressBudget, vivarium_egress_budget_free)

G_END_DECLS
