/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-capacity-pick.h"

typedef struct {
  guint32 slots_free;
  guint32 queued;
  guint32 queue_free;
  guint64 memory_available;
  gdouble load_per_cpu;
} Room;

static void
room_read (GVariant *capacity, Room *room)
{
  guint32 cpus = 0;
  gdouble load = 0;

  *room = (Room) { 0 };
  g_variant_lookup (capacity, "slots-free", "u", &room->slots_free);
  g_variant_lookup (capacity, "queued", "u", &room->queued);
  g_variant_lookup (capacity, "queue-free", "u", &room->queue_free);
  g_variant_lookup (capacity, "memory-available", "t", &room->memory_available);
  g_variant_lookup (capacity, "load", "d", &load);
  g_variant_lookup (capacity, "cpus", "u", &cpus);
  /* A daemon that does not know its CPUs counts as one: never a division by 0. */
  room->load_per_cpu = load / MAX (cpus, 1);
}

static gboolean
can_take (const Room *room)
{
  return room->slots_free > 0 || room->queue_free > 0;
}

/* TRUE when @a is the better host than @b (strictly: a tie keeps @b, the earlier). */
static gboolean
room_better (const Room *a, const Room *b)
{
  if ((a->slots_free > 0) != (b->slots_free > 0))
    return a->slots_free > 0;
  if (a->slots_free == 0) {
    /* Both full: the task queues. */
    if (a->queued != b->queued)
      return a->queued < b->queued;
    return a->queue_free > b->queue_free;
  }
  if (a->slots_free != b->slots_free)
    return a->slots_free > b->slots_free;
  if (a->memory_available != b->memory_available)
    return a->memory_available > b->memory_available;
  return a->load_per_cpu < b->load_per_cpu;
}

gint
vivarium_capacity_pick (GVariant * const *capacities, guint n_capacities, VivariumPickKind *kind)
{
  Room best = { 0 };
  gint pick = -1;

  for (guint i = 0; i < n_capacities; i++) {
    Room room;

    if (capacities[i] == NULL || !g_variant_is_of_type (capacities[i], G_VARIANT_TYPE_VARDICT))
      continue;
    room_read (capacities[i], &room);
    if (!can_take (&room))
      continue;
    if (pick < 0 || room_better (&room, &best)) {
      best = room;
      pick = (gint) i;
    }
  }
  if (kind != NULL)
    *kind = pick < 0 ? VIVARIUM_PICK_NONE : best.slots_free > 0 ? VIVARIUM_PICK_FREE_SLOT : VIVARIUM_PICK_QUEUED;
  return pick;
}
