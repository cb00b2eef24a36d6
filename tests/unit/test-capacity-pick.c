/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium_capacity_pick: which host `vivariumctl host pick` hands a task
 * to, from Manager.GetCapacity replies built here as the daemon sends them. */
#include "config.h"

#include <glib.h>

#include "vivarium-capacity-pick.h"

#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* One a{sv} like vd-capacity.c's: slots and queue from [Sessions] and
 * [Tasks], memory and load from /proc. */
static GVariant *
capacity (guint32 slots_free, guint32 queued, guint32 queue_free, guint64 memory, gdouble load, guint32 cpus)
{
  g_auto(GVariantDict) d = G_VARIANT_DICT_INIT (NULL);

  g_variant_dict_insert (&d, "slots", "u", MAX (slots_free, 4u));
  g_variant_dict_insert (&d, "slots-free", "u", slots_free);
  g_variant_dict_insert (&d, "queued", "u", queued);
  g_variant_dict_insert (&d, "queue-free", "u", queue_free);
  g_variant_dict_insert (&d, "memory-total", "t", memory * 2);
  g_variant_dict_insert (&d, "memory-available", "t", memory);
  g_variant_dict_insert (&d, "load", "d", load);
  g_variant_dict_insert (&d, "cpus", "u", cpus);
  return g_variant_ref_sink (g_variant_dict_end (&d));
}

static gint
pick (GVariant **hosts, guint n, VivariumPickKind *kind)
{
  gint i = vivarium_capacity_pick (hosts, n, kind);

  for (guint j = 0; j < n; j++)
    g_clear_pointer (&hosts[j], g_variant_unref);
  return i;
}

static void
test_free_slot_first (void)
{
  /* More memory and an idle CPU do not beat a free slot. */
  GVariant *hosts[] = { capacity (0, 0, 10, 20 * GIB, 0.0, 8), capacity (1, 0, 10, 1 * GIB, 1.9, 2) };
  VivariumPickKind kind;

  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), &kind), ==, 1);
  g_assert_cmpint (kind, ==, VIVARIUM_PICK_FREE_SLOT);
}

static void
test_most_slots_then_memory_then_load (void)
{
  GVariant *slots[] = { capacity (1, 0, 10, 8 * GIB, 0.1, 2), capacity (3, 0, 10, 2 * GIB, 1.5, 2) };
  GVariant *memory[] = { capacity (2, 0, 10, 2 * GIB, 0.1, 2), capacity (2, 0, 10, 8 * GIB, 1.5, 2) };
  /* Load 3.0 on 8 CPUs is quieter than 1.0 on 2. */
  GVariant *load[] = { capacity (2, 0, 10, 4 * GIB, 1.0, 2), capacity (2, 0, 10, 4 * GIB, 3.0, 8) };

  g_assert_cmpint (pick (slots, 2, NULL), ==, 1);
  g_assert_cmpint (pick (memory, 2, NULL), ==, 1);
  g_assert_cmpint (pick (load, 2, NULL), ==, 1);
}

static void
test_tie_keeps_the_order_given (void)
{
  GVariant *hosts[] = { capacity (2, 0, 10, 4 * GIB, 0.5, 2), capacity (2, 0, 10, 4 * GIB, 0.5, 2),
                        capacity (2, 0, 10, 4 * GIB, 0.5, 2) };

  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), NULL), ==, 0);
}

static void
test_all_full_shortest_queue (void)
{
  GVariant *hosts[] = { capacity (0, 5, 11, 8 * GIB, 0.0, 2), capacity (0, 2, 14, 1 * GIB, 2.0, 2),
                        capacity (0, 2, 1, 1 * GIB, 2.0, 2) };
  VivariumPickKind kind;

  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), &kind), ==, 1);
  g_assert_cmpint (kind, ==, VIVARIUM_PICK_QUEUED);
}

static void
test_nothing_can_take (void)
{
  /* Full with a full queue, a host that did not answer, a reply of the wrong type. */
  GVariant *hosts[] = { capacity (0, 16, 0, 8 * GIB, 0.0, 2), NULL, g_variant_ref_sink (g_variant_new_string ("x")) };
  VivariumPickKind kind = VIVARIUM_PICK_FREE_SLOT;

  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), &kind), ==, -1);
  g_assert_cmpint (kind, ==, VIVARIUM_PICK_NONE);
  g_assert_cmpint (vivarium_capacity_pick (NULL, 0, &kind), ==, -1);
}

static void
test_unanswered_skipped (void)
{
  GVariant *hosts[] = { NULL, capacity (0, 0, 3, GIB, 0.0, 0), capacity (1, 0, 3, GIB, 0.0, 0) };
  VivariumPickKind kind;

  /* cpus 0 (a daemon that could not tell) must not divide by zero. */
  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), &kind), ==, 2);
  g_assert_cmpint (kind, ==, VIVARIUM_PICK_FREE_SLOT);
}

static void
test_missing_keys_count_as_zero (void)
{
  GVariant *empty = g_variant_ref_sink (g_variant_new ("a{sv}", NULL));
  GVariant *hosts[] = { empty, capacity (0, 0, 1, GIB, 0.0, 1) };
  VivariumPickKind kind;

  /* {} has no slot and no queue: it cannot take a task. */
  g_assert_cmpint (pick (hosts, G_N_ELEMENTS (hosts), &kind), ==, 1);
  g_assert_cmpint (kind, ==, VIVARIUM_PICK_QUEUED);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/capacity-pick/free-slot-first", test_free_slot_first);
  g_test_add_func ("/capacity-pick/slots-memory-load", test_most_slots_then_memory_then_load);
  g_test_add_func ("/capacity-pick/tie-keeps-order", test_tie_keeps_the_order_given);
  g_test_add_func ("/capacity-pick/all-full-shortest-queue", test_all_full_shortest_queue);
  g_test_add_func ("/capacity-pick/nothing-can-take", test_nothing_can_take);
  g_test_add_func ("/capacity-pick/unanswered-skipped", test_unanswered_skipped);
  g_test_add_func ("/capacity-pick/missing-keys", test_missing_keys_count_as_zero);
  return g_test_run ();
}
