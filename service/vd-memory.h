/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Gives memory back to the system after big messages: glibc's thresholds
 * held fixed for the whole process (vd_memory_hold_thresholds(), once, at
 * start), and a malloc_trim() on the main loop shortly after a message of
 * VD_MEMORY_TRIM_AFTER_BYTES or more went through (vd_memory_note(), from
 * any thread: it never blocks and never trims there). */

/* A message this size or larger is followed by a trim. */
#define VD_MEMORY_TRIM_AFTER_BYTES   (1024 * 1024)
/* AddressSanitizer's allocator replaces glibc's malloc (the sanitized test
 * build): glibc's thresholds do not exist there to be held. */
#if defined(__SANITIZE_ADDRESS__)
#define VD_MEMORY_GLIBC_MALLOC 0
#else
#define VD_MEMORY_GLIBC_MALLOC 1
#endif

#define VD_TYPE_MEMORY (vd_memory_get_type ())
G_DECLARE_FINAL_TYPE (VdMemory, vd_memory, VD, MEMORY, GObject)

void      vd_memory_hold_thresholds (void);

VdMemory *vd_memory_new             (void);
void      vd_memory_note            (VdMemory *self,
                                     gsize     message_bytes);
guint     vd_memory_get_n_trims     (VdMemory *self);

G_END_DECLS
