/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-authority.h"
#include "vd-config.h"

G_BEGIN_DECLS

typedef struct _VdDaemon VdDaemon;

#define VD_TYPE_MANAGER (vd_manager_get_type ())
G_DECLARE_FINAL_TYPE (VdManager, vd_manager, VD, MANAGER, GObject)

VdManager *vd_manager_new        (VdDaemon         *daemon,
                                  VdConfig         *config,
                                  VdAuthority      *authority,
                                  GDBusConnection  *connection);
gboolean   vd_manager_start      (VdManager        *self,
                                  GError          **error);
void       vd_manager_shutdown   (VdManager        *self);

G_END_DECLS
