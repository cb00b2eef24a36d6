/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdMemory"

#include "config.h"

#include <malloc.h>

#include "vd-memory.h"

/* Why the daemon stayed at ~100 MiB after three 16 MiB Execs (issue 18):
 *
 * glibc's mmap threshold is dynamic. It starts at 128 KiB, and the first
 * time a mmap'd block is freed it rises to that block's size (up to
 * 32 MiB), the trim threshold to twice that. After one 22 MiB guest-exec
 * reply the next buffers of that size come from the heap and from the
 * threads' arenas (GDBus's worker thread reads and writes every message),
 * and freeing them gives nothing back: the heap's top is only cut past
 * 44 MiB of free space, and free space in the middle of a heap or an arena
 * never is. A fixed threshold (mallopt, which also switches the dynamic
 * raise off) keeps every block over it mmap'd, so free() unmaps it.
 *
 * What the smaller allocations of a big message leave free in the middle
 * of the arenas (json-glib's nodes, GVariant pieces) only malloc_trim()
 * returns, by walking every arena. It runs on the main loop, a moment after
 * the message, when its buffers have been freed: never in GDBus's thread,
 * whose filter must not block. Measured in system-memory, the thresholds
 * and VdJsonStream's buffer do all of the work there (the same figures
 * with the trim switched off); the trim is for what a flood of many
 * medium-sized pieces leaves, and costs one walk after a big message. */

/* glibc's own starting value, held: a block this big or bigger is mmap'd. */
#define VD_MEMORY_MMAP_THRESHOLD   (128 * 1024)
/* Free space kept at the top of the heap before it is cut: small against
 * the 16 MiB a flood may leave, large enough that ordinary calls do not
 * move the break back and forth. */
#define VD_MEMORY_TRIM_THRESHOLD   (1024 * 1024)
/* The reply is written and freed by GDBus's thread after the filter saw
 * it; the trim waits that long so that it finds the buffers free. */
#define VD_MEMORY_TRIM_DELAY_MS    250

struct _VdMemory {
  GObject       parent_instance;
  GMainContext *context;     /* the main loop's: where trims run */
  gint          scheduled;   /* atomic: a trim is on its way */
  guint         n_trims;     /* main loop only */
};

G_DEFINE_TYPE (VdMemory, vd_memory, G_TYPE_OBJECT)

void
vd_memory_hold_thresholds (void)
{
  if (!VD_MEMORY_GLIBC_MALLOC) {
    g_info ("AddressSanitizer's allocator replaces glibc's malloc: no thresholds to hold");
    return;
  }
  if (mallopt (M_MMAP_THRESHOLD, VD_MEMORY_MMAP_THRESHOLD) != 1 ||
      mallopt (M_TRIM_THRESHOLD, VD_MEMORY_TRIM_THRESHOLD) != 1)
    g_warning ("glibc refused fixed malloc thresholds: memory from big messages may stay held");
}

static void
vd_memory_finalize (GObject *object)
{
  VdMemory *self = VD_MEMORY (object);

  g_main_context_unref (self->context);
  G_OBJECT_CLASS (vd_memory_parent_class)->finalize (object);
}

static void
vd_memory_class_init (VdMemoryClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_memory_finalize;
}

static void
vd_memory_init (VdMemory *self)
{
  self->context = g_main_context_ref_thread_default ();
}

/* Trims on the thread that made it, the main loop's. */
VdMemory *
vd_memory_new (void)
{
  return g_object_new (VD_TYPE_MEMORY, NULL);
}

static gboolean
trim_cb (gpointer user_data)
{
  VdMemory *self = VD_MEMORY (user_data);
  int released;

  /* Cleared first: a big message noted while we trim gets its own trim. */
  g_atomic_int_set (&self->scheduled, 0);
  released = malloc_trim (0);
  self->n_trims++;
  g_debug ("malloc_trim after a big message: %s", released ? "memory given back" : "nothing to give back");
  return G_SOURCE_REMOVE;
}

static void
schedule_trim (VdMemory *self)
{
  g_autoptr(GSource) source = g_timeout_source_new (VD_MEMORY_TRIM_DELAY_MS);

  g_source_set_priority (source, G_PRIORITY_LOW);
  g_source_set_callback (source, trim_cb, g_object_ref (self), g_object_unref);
  g_source_set_static_name (source, "[vivariumd] malloc_trim");
  g_source_attach (source, self->context);
}

/* Safe from any thread (GDBus's filter calls it from its worker): only
 * notes the size and, the first time, attaches a source to the main
 * context; the trims of a burst of big messages come as one. */
void
vd_memory_note (VdMemory *self, gsize message_bytes)
{
  g_return_if_fail (VD_IS_MEMORY (self));

  if (message_bytes < VD_MEMORY_TRIM_AFTER_BYTES)
    return;
  if (g_atomic_int_compare_and_exchange (&self->scheduled, 0, 1))
    schedule_trim (self);
}

guint
vd_memory_get_n_trims (VdMemory *self)
{
  g_return_val_if_fail (VD_IS_MEMORY (self), 0);
  return self->n_trims;
}
