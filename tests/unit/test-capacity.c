/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <gio/gio.h>

#include "vd-capacity.h"

/* The kernel's own text, and the ways it could be other than expected. */
static void
test_meminfo (void)
{
  const gchar *real = "MemTotal:       24591036 kB\nMemFree:         1203300 kB\n"
                      "MemAvailable:   20998412 kB\nBuffers:          514000 kB\n";
  guint64 total = 0, available = 0;

  g_assert_true (vd_capacity_parse_meminfo (real, &total, &available));
  g_assert_cmpuint (total, ==, G_GUINT64_CONSTANT (24591036) * 1024);
  g_assert_cmpuint (available, ==, G_GUINT64_CONSTANT (20998412) * 1024);

  /* A key is matched whole at a line's start, not inside another. */
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: 10 kB\nXMemAvailable: 5 kB\n", &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: 10 kB\n", &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: ten kB\nMemAvailable: 5 kB\n", &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: 10 MB\nMemAvailable: 5 kB\n", &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: 99999999999999999999 kB\nMemAvailable: 5 kB\n",
                                             &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("MemTotal: 18014398509481984 kB\nMemAvailable: 5 kB\n",
                                             &total, &available));
  g_assert_false (vd_capacity_parse_meminfo ("", &total, &available));
}

static void
test_loadavg (void)
{
  gdouble load = -1;

  g_assert_true (vd_capacity_parse_loadavg ("0.52 0.61 0.70 2/345 12345\n", &load));
  g_assert_cmpfloat_with_epsilon (load, 0.52, 1e-9);
  g_assert_true (vd_capacity_parse_loadavg ("12.00", &load));
  g_assert_cmpfloat_with_epsilon (load, 12.0, 1e-9);
  g_assert_false (vd_capacity_parse_loadavg ("", &load));
  g_assert_false (vd_capacity_parse_loadavg ("-1.0 0 0", &load));
  g_assert_false (vd_capacity_parse_loadavg ("1.0x 0 0", &load));
  g_assert_false (vd_capacity_parse_loadavg ("nan 0 0", &load));
}

/* Free counts never wrap when more are in use than allowed (a bound
 * lowered by a reload while sessions run). */
static void
test_variant (void)
{
  VdCapacitySlots slots = { .slots = 2, .slots_in_use = 3, .max_queued = 4, .queued = 1 };
  VdCapacityHost host = { .memory_total = 100, .memory_available = 40, .load = 0.5, .cpus = 2 };
  g_autoptr(GVariant) v = g_variant_ref_sink (vd_capacity_to_variant (&slots, &host));
  guint32 u = 99;
  guint64 t = 0;
  gdouble d = 0;

  g_assert_true (g_variant_lookup (v, "slots", "u", &u) && u == 2);
  g_assert_true (g_variant_lookup (v, "slots-free", "u", &u) && u == 0);
  g_assert_true (g_variant_lookup (v, "queued", "u", &u) && u == 1);
  g_assert_true (g_variant_lookup (v, "queue-free", "u", &u) && u == 3);
  g_assert_true (g_variant_lookup (v, "memory-total", "t", &t) && t == 100);
  g_assert_true (g_variant_lookup (v, "memory-available", "t", &t) && t == 40);
  g_assert_true (g_variant_lookup (v, "load", "d", &d) && d == 0.5);
  g_assert_true (g_variant_lookup (v, "cpus", "u", &u) && u == 2);
}

/* This machine's own figures read back: present and consistent. */
static void
test_read_host (void)
{
  VdCapacityHost host = { 0 };
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_capacity_read_host (&host, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (host.memory_total, >, 0);
  g_assert_cmpuint (host.memory_available, <=, host.memory_total);
  g_assert_cmpuint (host.cpus, >=, 1);
  g_assert_cmpuint (host.cpus, <=, g_get_num_processors ());
  g_assert_cmpfloat (host.load, >=, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/capacity/meminfo", test_meminfo);
  g_test_add_func ("/capacity/loadavg", test_loadavg);
  g_test_add_func ("/capacity/variant", test_variant);
  g_test_add_func ("/capacity/read-host", test_read_host);
  return g_test_run ();
}
