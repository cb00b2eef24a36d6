/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "vd-session-helper.h"

G_BEGIN_DECLS

/* The QMP and guest-agent steps of a boot snapshot, apart from the session
 * that owns the channels: saving one (Freeze's scratch guest), loading one
 * into a QEMU started with -incoming defer, and making the loaded guest
 * unique. Each is one GTask over a chain of calls. */

#define VD_BOOT_SNAPSHOT_STATE   "boot.state"
#define VD_BOOT_SNAPSHOT_DISK    "boot.qcow2"
#define VD_BOOT_SNAPSHOT_INFO    "boot.json"

/* Unmounts the share, stops the guest, migrates it to @image_dir/boot.state
 * (through a descriptor), moves @overlay to @image_dir/boot.qcow2 and
 * writes @info (plus the measured save time and size) as boot.json. */
void     vd_session_snapshot_save_async      (VdSessionHelper    *helper,
                                              const gchar        *overlay,
                                              const gchar        *image_dir,
                                              JsonObject         *info,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean vd_session_snapshot_save_finish     (GAsyncResult  *result,
                                              GError       **error);
/* Only the memory of a guest (stopped, left stopped) to @state_path;
 * finish with vd_session_snapshot_save_finish(). */
void     vd_session_snapshot_save_state_async (VdSessionHelper   *helper,
                                              const gchar        *state_path,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);

/* Loads @state_path into a QEMU waiting with -incoming defer, and lets the
 * guest run. */
void     vd_session_snapshot_restore_async   (VdSessionHelper    *helper,
                                              const gchar        *state_path,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean vd_session_snapshot_restore_finish  (GAsyncResult  *result,
                                              GError       **error);

/* Sets the guest clock from the host (and checks it took), writes a fresh
 * /etc/machine-id when @machine_id (the image has one), mounts the
 * project share when @mount_project, and makes @resolver (an IPv4
 * address, DNS over TCP) the guest's only nameserver when not NULL. */
void     vd_session_snapshot_reseed_async    (VdSessionHelper    *helper,
                                              gboolean            mount_project,
                                              gboolean            machine_id,
                                              const gchar        *resolver,
                                              GCancellable       *cancellable,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
gboolean vd_session_snapshot_reseed_finish   (GAsyncResult  *result,
                                              GError       **error);

G_END_DECLS
