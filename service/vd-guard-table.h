/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/* Layer 2 of the network guard: the nftables table `inet vivarium_guard`,
 * owned by this object's netlink socket so that it lives exactly as long as
 * the daemon and nobody else can change it meanwhile. */
#define VD_TYPE_GUARD_TABLE (vd_guard_table_get_type ())
G_DECLARE_FINAL_TYPE (VdGuardTable, vd_guard_table, VD, GUARD_TABLE, GObject)

VdGuardTable *vd_guard_table_new             (guint32        uid_first,
                                              guint32        uid_last);
gboolean      vd_guard_table_add_extra       (VdGuardTable  *self,
                                              const gchar   *cidr,
                                              GError       **error);
gchar        *vd_guard_table_describe_batch  (VdGuardTable  *self,
                                              GError       **error);
gboolean      vd_guard_table_install         (VdGuardTable  *self,
                                              GError       **error);
gboolean      vd_guard_table_verify          (VdGuardTable  *self,
                                              GError       **error);
gboolean      vd_guard_table_add_session     (VdGuardTable  *self,
                                              guint32        uid,
                                              GError       **error);
gboolean      vd_guard_table_remove_session  (VdGuardTable  *self,
                                              guint32        uid,
                                              GError       **error);
gboolean      vd_guard_table_get_counters    (VdGuardTable  *self,
                                              guint32        uid,
                                              guint64       *packets,
                                              guint64       *bytes,
                                              GError       **error);
gboolean      vd_guard_table_is_installed    (VdGuardTable  *self);
void          vd_guard_table_uninstall       (VdGuardTable  *self);

G_END_DECLS
