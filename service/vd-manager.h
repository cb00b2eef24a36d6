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

typedef struct _VdSession VdSession;
typedef struct _VdGuard VdGuard;
typedef struct _VdSystemd VdSystemd;

void       vd_manager_start_scratch_session_async  (VdManager          *self,
                                                    const gchar        *image,
                                                    gboolean            layer1,
                                                    gboolean            layer2,
                                                    GCancellable       *cancellable,
                                                    GAsyncReadyCallback callback,
                                                    gpointer            user_data);
VdSession *vd_manager_start_scratch_session_finish (VdManager     *self,
                                                    GAsyncResult  *result,
                                                    GError       **error);
VdGuard   *vd_manager_get_guard                    (VdManager *self);
VdSession *vd_manager_lookup_running_session       (VdManager     *self,
                                                    const gchar   *id,
                                                    GError       **error);
void       vd_manager_hold                         (VdManager *self);
void       vd_manager_release                      (VdManager *self);
VdSystemd *vd_manager_get_systemd                  (VdManager *self);

G_END_DECLS
