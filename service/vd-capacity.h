/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Manager.GetCapacity: how much room this host has for one more session,
 * for a client that picks among several hosts. The slots and the queue
 * are the daemon's own counts; memory, load and CPUs are read from the
 * kernel at the call. */

typedef struct {
  guint   slots;              /* [Sessions] MaxSessions */
  guint   slots_in_use;       /* sessions, and tasks between their two */
  guint   max_queued;         /* [Tasks] MaxQueuedTasks */
  guint   queued;             /* tasks waiting for a slot */
} VdCapacitySlots;

typedef struct {
  guint64 memory_total;       /* bytes, MemTotal */
  guint64 memory_available;   /* bytes, MemAvailable */
  gdouble load;               /* the 1-minute load average */
  guint   cpus;               /* CPUs this process may run on */
} VdCapacityHost;

/* /proc/meminfo's text → MemTotal and MemAvailable in bytes. FALSE when
 * either is missing or is no number. */
gboolean  vd_capacity_parse_meminfo (const gchar    *text,
                                     guint64        *total,
                                     guint64        *available);
/* /proc/loadavg's text → its first figure. */
gboolean  vd_capacity_parse_loadavg (const gchar    *text,
                                     gdouble        *load);
/* Reads the kernel's figures for this host. */
gboolean  vd_capacity_read_host     (VdCapacityHost *host,
                                     GError        **error);
/* The a{sv} GetCapacity answers with (floating). */
GVariant *vd_capacity_to_variant    (const VdCapacitySlots *slots,
                                     const VdCapacityHost  *host);

G_END_DECLS
