/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-authority.h"
#include "vd-config.h"
#include "vd-idle.h"

G_BEGIN_DECLS

/* The engine below the bus. It is handed the connection to export its
 * objects on and a VdIdle to keep the daemon on the bus while work runs;
 * it never includes the daemon. */

#define VD_TYPE_MANAGER (vd_manager_get_type ())
G_DECLARE_FINAL_TYPE (VdManager, vd_manager, VD, MANAGER, GObject)

VdManager *vd_manager_new        (VdConfig         *config,
                                  VdAuthority      *authority,
                                  VdIdle           *idle,
                                  GDBusConnection  *connection);
gboolean   vd_manager_start      (VdManager        *self,
                                  GError          **error);
void       vd_manager_shutdown   (VdManager        *self);
gboolean   vd_manager_set_connection (VdManager       *self,
                                      GDBusConnection *connection,
                                      GError         **error);

G_END_DECLS
