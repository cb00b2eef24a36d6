/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Who a task's worker is, and the only calls it may make: uid → its unit
 * and a set of (interface, method, object path). The authority consults it
 * before polkit: a caller whose uid is a worker's — any uid of the reserved
 * worker range, granted or not — is judged here alone, admitted for exactly
 * its set and only from a process of its own unit, and polkit is never
 * asked about it. The unit is what tells a task's worker from anything else
 * of the same uid: a process an earlier tenant of the slot left behind
 * cannot be in the new tenant's unit (and the slots make sure no such
 * process is left when a uid is given out again, vd-worker-slots.h).
 * Thread-safe (the authority checks from GDBus' worker thread). */

#define VD_TYPE_WORKER_GRANTS (vd_worker_grants_get_type ())
G_DECLARE_FINAL_TYPE (VdWorkerGrants, vd_worker_grants, VD, WORKER_GRANTS, GObject)

/* Every uid in [first_uid, first_uid + count) is a worker's. */
VdWorkerGrants *vd_worker_grants_new         (guint32 first_uid,
                                              guint   count);
/* Gives @uid to the worker in @unit (with nothing allowed yet). */
void            vd_worker_grants_add_worker  (VdWorkerGrants *self,
                                              guint32         uid,
                                              const gchar    *unit);
/* Allows one more call to the worker @uid was given to; nothing if none. */
void            vd_worker_grants_allow       (VdWorkerGrants *self,
                                              guint32         uid,
                                              const gchar    *interface_name,
                                              const gchar    *method,
                                              const gchar    *object_path);
/* Forgets the uid's worker and everything it was allowed. */
void            vd_worker_grants_remove      (VdWorkerGrants *self,
                                              guint32         uid);
/* Whether calls from @uid are judged here (not by polkit). */
gboolean        vd_worker_grants_is_worker   (VdWorkerGrants *self,
                                              guint32         uid);
/* @unit: the caller's process's systemd unit, NULL if it has none. */
gboolean        vd_worker_grants_allows      (VdWorkerGrants *self,
                                              guint32         uid,
                                              const gchar    *unit,
                                              const gchar    *interface_name,
                                              const gchar    *method,
                                              const gchar    *object_path);

G_END_DECLS
