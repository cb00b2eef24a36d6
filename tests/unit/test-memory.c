/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <malloc.h>

#include "vd-memory.h"

/* VdMemory: glibc's thresholds really held (a block over the threshold is
 * still mmap'd after a bigger one was freed, which glibc's dynamic
 * threshold would have moved to the heap), and trims on the main loop
 * after big messages only, one per burst, also when noted from another
 * thread (GDBus's filter runs in its worker). Waits are bounded above by
 * a generous bound and never measured. */
#define BOUND_MS   5000
#define QUIET_MS   1000   /* longer than VdMemory's delay: nothing more came */

static gboolean
wake_cb (gpointer user_data)
{
  return G_SOURCE_CONTINUE;
}

/* Runs the main loop for @ms, or until @memory has made @n_trims trims. */
static void
run_until (VdMemory *memory, guint n_trims, guint ms)
{
  g_autoptr(GSource) wake = g_timeout_source_new (50);   /* so that the loop looks at the clock */
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;

  g_source_set_callback (wake, wake_cb, NULL, NULL);
  g_source_attach (wake, NULL);
  while (vd_memory_get_n_trims (memory) < n_trims && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_source_destroy (wake);
}

static void
test_thresholds_held (void)
{
  gpointer big, mid;
  gsize mapped;

  if (!VD_MEMORY_GLIBC_MALLOC) {
    /* Said in the TAP output; the plain build (the unit suite's first run
     * in .ci/run) tests them. */
    vd_memory_hold_thresholds ();
    g_test_skip ("AddressSanitizer's allocator replaces glibc's malloc: its thresholds are tested in the plain build");
    return;
  }
  vd_memory_hold_thresholds ();
  big = g_malloc (8 * 1024 * 1024);
  g_assert_cmpuint (mallinfo2 ().hblkhd, >=, 8 * 1024 * 1024);
  /* Under the dynamic threshold this free raises it to 8 MiB. */
  g_free (big);
  mapped = mallinfo2 ().hblkhd;
  mid = g_malloc (4 * 1024 * 1024);
  g_assert_cmpuint (mallinfo2 ().hblkhd, >=, mapped + 4 * 1024 * 1024);
  g_free (mid);
  g_assert_cmpuint (mallinfo2 ().hblkhd, ==, mapped);
}

static void
test_small_messages_no_trim (void)
{
  g_autoptr(VdMemory) memory = vd_memory_new ();

  for (guint i = 0; i < 100; i++)
    vd_memory_note (memory, VD_MEMORY_TRIM_AFTER_BYTES - 1);
  run_until (memory, 1, QUIET_MS);
  g_assert_cmpuint (vd_memory_get_n_trims (memory), ==, 0);
}

static void
test_burst_one_trim (void)
{
  g_autoptr(VdMemory) memory = vd_memory_new ();

  for (guint i = 0; i < 10; i++)
    vd_memory_note (memory, 16 * 1024 * 1024);
  run_until (memory, 1, BOUND_MS);
  g_assert_cmpuint (vd_memory_get_n_trims (memory), ==, 1);
  run_until (memory, 2, QUIET_MS);
  g_assert_cmpuint (vd_memory_get_n_trims (memory), ==, 1);
  /* A later big message gets a trim of its own. */
  vd_memory_note (memory, VD_MEMORY_TRIM_AFTER_BYTES);
  run_until (memory, 2, BOUND_MS);
  g_assert_cmpuint (vd_memory_get_n_trims (memory), ==, 2);
}

static gpointer
note_big (gpointer user_data)
{
  vd_memory_note (VD_MEMORY (user_data), 4 * 1024 * 1024);
  return NULL;
}

static void
test_noted_from_another_thread (void)
{
  g_autoptr(VdMemory) memory = vd_memory_new ();
  GThread *thread = g_thread_new ("note", note_big, memory);

  g_thread_join (thread);
  run_until (memory, 1, BOUND_MS);
  g_assert_cmpuint (vd_memory_get_n_trims (memory), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/memory/thresholds-held", test_thresholds_held);
  g_test_add_func ("/memory/small-messages-no-trim", test_small_messages_no_trim);
  g_test_add_func ("/memory/burst-one-trim", test_burst_one_trim);
  g_test_add_func ("/memory/noted-from-another-thread", test_noted_from_another_thread);
  return g_test_run ();
}
