/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-state.h"
#include "vd-config.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

#define VD_TYPE_GUARD (vd_guard_get_type ())
G_DECLARE_FINAL_TYPE (VdGuard, vd_guard, VD, GUARD, GObject)

VdGuard     *vd_guard_new                 (VdConfig  *config,
                                           VdSystemd *systemd);
void         vd_guard_start               (VdGuard   *self);
GDBusInterfaceSkeleton *vd_guard_get_skeleton (VdGuard *self);
GPtrArray   *vd_guard_get_deny_list       (VdGuard   *self);
guint32      vd_guard_get_uncovered_uid   (VdGuard   *self);
gboolean     vd_guard_check_can_start     (VdGuard   *self,
                                           GError   **error);
gboolean     vd_guard_add_session         (VdGuard   *self,
                                           guint32    uid,
                                           GError   **error);
void         vd_guard_remove_session      (VdGuard   *self,
                                           guint32    uid);
/* The unit denies every IPv4 and IPv6 address (IPAddressDeny=any). */
gboolean     vd_guard_check_unit_closed   (VdGuard     *self,
                                           const gchar *unit,
                                           GError     **error);
gboolean     vd_guard_check_unit          (VdGuard     *self,
                                           const gchar *unit,
                                           GError     **error);
gboolean     vd_guard_get_counters        (VdGuard   *self,
                                           guint32    uid,
                                           guint64   *packets,
                                           guint64   *bytes);

gboolean     vd_guard_verify_table        (VdGuard   *self,
                                           GError   **error);

void         vd_guard_set_self_test_result (VdGuard        *self,
                                            const gchar    *json,
                                            VivariumVerdict verdict,
                                            gint64          finished_at);

G_END_DECLS
