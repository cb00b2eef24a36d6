/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Who a task's worker is, and the only calls it may make: uid → a set of
 * (interface, method, object path). The authority consults it before
 * polkit: a uid known here is admitted for exactly its set and refused for
 * everything else, and polkit is never asked about it. Thread-safe (the
 * authority checks from GDBus' worker thread). */

#define VD_TYPE_WORKER_GRANTS (vd_worker_grants_get_type ())
G_DECLARE_FINAL_TYPE (VdWorkerGrants, vd_worker_grants, VD, WORKER_GRANTS, GObject)

VdWorkerGrants *vd_worker_grants_new         (void);
/* Marks @uid a worker (with nothing allowed yet): from now on every call
 * it makes is judged here. */
void            vd_worker_grants_add_worker  (VdWorkerGrants *self,
                                              guint32         uid);
void            vd_worker_grants_allow       (VdWorkerGrants *self,
                                              guint32         uid,
                                              const gchar    *interface_name,
                                              const gchar    *method,
                                              const gchar    *object_path);
/* Forgets the uid and everything it was allowed. */
void            vd_worker_grants_remove      (VdWorkerGrants *self,
                                              guint32         uid);
gboolean        vd_worker_grants_is_worker   (VdWorkerGrants *self,
                                              guint32         uid);
gboolean        vd_worker_grants_allows      (VdWorkerGrants *self,
                                              guint32         uid,
                                              const gchar    *interface_name,
                                              const gchar    *method,
                                              const gchar    *object_path);

G_END_DECLS
