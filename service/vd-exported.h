/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-authority.h"

G_BEGIN_DECLS

#define VD_TYPE_EXPORTED (vd_exported_get_type ())
G_DECLARE_FINAL_TYPE (VdExported, vd_exported, VD, EXPORTED, GObject)

VdExported   *vd_exported_new             (VdAuthority             *authority,
                                           GDBusConnection         *connection);
/* How long a peer keeps hearing signals of an action polkit allowed it
 * before it is asked again (default VIVARIUM_READ_GRANT_SEC). */
void          vd_exported_set_read_grant_sec (VdExported         *self,
                                           guint                    seconds);
gboolean      vd_exported_add             (VdExported              *self,
                                           const gchar             *path,
                                           GDBusInterfaceSkeleton  *skeleton,
                                           GError                 **error);
void          vd_exported_remove          (VdExported              *self,
                                           const gchar             *path);
gboolean      vd_exported_has             (VdExported              *self,
                                           const gchar             *path);
gboolean      vd_exported_set_connection  (VdExported              *self,
                                           GDBusConnection         *connection,
                                           GError                 **error);

G_END_DECLS
