/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Which of several hosts to hand a task to, from each one's reply to
 * Manager.GetCapacity (a{sv}: slots-free, queued, queue-free,
 * memory-available, load, cpus; a missing key counts as 0). NULL stands
 * for a host that could not be asked; it is never picked.
 *
 * A host with a free session slot comes first: then the most free slots,
 * then the most memory available, then the lowest load per CPU. When no
 * host has a free slot, the task will wait in a queue: then the shortest
 * queue with room left wins. Ties go to the earlier host, so that the
 * order an operator lists them in is the order of preference.
 *
 * Returns the index of the host to use, or -1 when none can take a task
 * (none answered, or every queue is full). */
typedef enum {
  VIVARIUM_PICK_NONE,       /* -1: nothing can take the task */
  VIVARIUM_PICK_FREE_SLOT,  /* it starts at once */
  VIVARIUM_PICK_QUEUED,     /* it waits for a slot there */
} VivariumPickKind;

gint vivarium_capacity_pick (GVariant * const *capacities,
                             guint             n_capacities,
                             VivariumPickKind *kind);

G_END_DECLS
