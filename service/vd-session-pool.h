/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-dns-relay.h"
#include "vd-guard.h"
#include "vd-idle.h"
#include "vd-image.h"
#include "vd-session.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* How an object goes on the bus: the one function above (the manager's
 * export_protected()) that authorizes and exports it. Handed down so that
 * nothing below the manager learns the connection's life cycle. */
typedef gboolean (*VdExportFunc) (GDBusInterfaceSkeleton  *skeleton,
                                  const gchar             *object_path,
                                  gpointer                 user_data,
                                  GError                 **error);

/* The sessions: their table, their uids, their guard entries and idle
 * inhibitors, and how long a stopped one stays visible.
 * signal "session-added" (VdSession *), "session-ended" (VdSession *: no
 * longer active, its uid given back), "session-removed" (const gchar *path) */

#define VD_TYPE_SESSION_POOL (vd_session_pool_get_type ())
G_DECLARE_FINAL_TYPE (VdSessionPool, vd_session_pool, VD, SESSION_POOL, GObject)

VdSessionPool *vd_session_pool_new          (VdConfig        *config,
                                             VdSystemd       *systemd,
                                             VdGuard         *guard,
                                             VdDnsRelay      *dns_relay,
                                             VdIdle          *idle,
                                             GDBusConnection *connection,
                                             VdExportFunc     export_func,
                                             gpointer         export_data);
/* @project_name, @project_dir: the dataset to share (virtio-9p), or NULL. */
VdSession   *vd_session_pool_create         (VdSessionPool          *self,
                                             VdImage                *image,
                                             const VdSessionOptions *options,
                                             guint32                 uid,
                                             const gchar            *project_name,
                                             const gchar            *project_dir,
                                             GError                **error);
gboolean     vd_session_pool_start_finish   (VdSessionPool *self,
                                             VdSession     *session,
                                             GAsyncResult  *result,
                                             GError       **error);
guint        vd_session_pool_count_active   (VdSessionPool *self);
const gchar **vd_session_pool_list_paths    (VdSessionPool *self);
VdSession   *vd_session_pool_lookup_running (VdSessionPool *self,
                                             const gchar   *id,
                                             GError       **error);
void         vd_session_pool_stop_all_sync  (VdSessionPool *self);

/* @egress_allow: NULL for egress open; else an allowlist session whose
 * policy is exactly these rules (no groups). */
void         vd_session_pool_start_scratch_async  (VdSessionPool      *self,
                                                   VdImage            *image,
                                                   gboolean            layer1,
                                                   gboolean            layer2,
                                                   const gchar * const *egress_allow,
                                                   GCancellable       *cancellable,
                                                   GAsyncReadyCallback callback,
                                                   gpointer            user_data);
VdSession   *vd_session_pool_start_scratch_finish (VdSessionPool *self,
                                                   GAsyncResult  *result,
                                                   GError       **error);

void         vd_session_pool_take_boot_snapshot_async  (VdSessionPool      *self,
                                                        VdImage            *image,
                                                        GCancellable       *cancellable,
                                                        GAsyncReadyCallback callback,
                                                        gpointer            user_data);
gboolean     vd_session_pool_take_boot_snapshot_finish (VdSessionPool *self,
                                                        GAsyncResult  *result,
                                                        GError       **error);

G_END_DECLS
