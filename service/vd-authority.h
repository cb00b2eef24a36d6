/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-worker-grants.h"

G_BEGIN_DECLS

#define VD_TYPE_AUTHORITY (vd_authority_get_type ())
G_DECLARE_FINAL_TYPE (VdAuthority, vd_authority, VD, AUTHORITY, GObject)

VdAuthority *vd_authority_new               (void);
const gchar *vd_authority_action_for        (const gchar *interface_name,
                                             const gchar *method_name);
void         vd_authority_protect           (VdAuthority            *self,
                                             GDBusInterfaceSkeleton *skeleton);
guint        vd_authority_get_call_count    (VdAuthority *self);
/* Consulted before polkit for every call (vd-worker-grants.h). */
void         vd_authority_set_worker_grants (VdAuthority    *self,
                                             VdWorkerGrants *grants);

G_END_DECLS
