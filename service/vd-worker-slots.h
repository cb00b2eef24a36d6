/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-systemd.h"

G_BEGIN_DECLS

/* The reserved worker uids, one per slot, and who may have one next. A
 * slot is given out again only when the unit of its last tenant is no
 * longer active and no process of its uid is left anywhere on the host (so
 * the unit's cgroup is empty too: a worker cannot change its uid). Free
 * slots rotate: the one released longest ago (or never used) goes first,
 * so a uid is seldom handed on at all. Whatever a worker leaves behind
 * therefore never shares a uid with a later worker; the grants bind each
 * uid to its unit on top of that (vd-worker-grants.h). */

#define VD_TYPE_WORKER_SLOTS (vd_worker_slots_get_type ())
G_DECLARE_FINAL_TYPE (VdWorkerSlots, vd_worker_slots, VD, WORKER_SLOTS, GObject)

VdWorkerSlots *vd_worker_slots_new     (VdSystemd   *systemd,
                                        const gchar *proc_dir,
                                        guint32      first_uid,
                                        guint        count);
/* The uid of a free, clean slot, least recently used first; FALSE with
 * VIVARIUM_ERROR_BUSY when every slot is taken or still being cleaned up.
 * @unit: the new tenant's unit. */
gboolean       vd_worker_slots_claim   (VdWorkerSlots *self,
                                        const gchar   *unit,
                                        guint32       *uid,
                                        GError       **error);
/* The tenant of @uid is done; its slot waits until nothing of it is left. */
void           vd_worker_slots_release (VdWorkerSlots *self,
                                        guint32        uid);
/* Whether a process with @uid as any of its uids runs in @proc_dir (/proc). */
gboolean       vd_worker_slots_uid_has_processes (const gchar *proc_dir,
                                                  guint32      uid);

G_END_DECLS
