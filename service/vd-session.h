/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-state.h"
#include "vd-config.h"
#include "vd-command-log.h"
#include "vd-image.h"
#include "vd-agent-exec-result.h"
#include "vd-systemd.h"
#include "vd-egress.h"

G_BEGIN_DECLS

typedef struct {
  guint     memory_mib;
  guint     cpus;
  guint     timeout_sec;       /* 0: none */
  gboolean  guard_layer1;      /* IPAddressDeny= on the unit (self-test may drop it) */
  gboolean  guard_layer2;      /* uid covered by the nftables table */
  gboolean  project_readonly;  /* the project share is read-only (a task's verification) */
  gboolean  boot_snapshot;     /* Freeze's scratch boot of the unfrozen image, to be saved */
  VdEgressMode egress_mode;    /* zero: open */
  /* allowlist: the rule groups and extra rules (borrowed; vd_session_new
   * keeps copies) */
  const gchar * const *egress_groups;
  const gchar * const *egress_allow;
  /* allowlist: VivariumSecret* with placeholders, or NULL (vd_session_new
   * takes a reference) */
  GPtrArray           *secrets;
  /* allowlist: VivariumSshKey*, or NULL (vd_session_new takes a reference;
   * the proxy's agent gets them) */
  GPtrArray           *ssh_keys;
} VdSessionOptions;

#define VD_TYPE_SESSION (vd_session_get_type ())
G_DECLARE_FINAL_TYPE (VdSession, vd_session, VD, SESSION, GObject)

VdSession   *vd_session_new             (VdConfig               *config,
                                         VdSystemd              *systemd,
                                         GDBusConnection        *connection,
                                         VdImage                *image,
                                         const gchar            *project_dir,
                                         guint32                 uid,
                                         const VdSessionOptions *options,
                                         GPtrArray              *deny_list);
const gchar *vd_session_get_id          (VdSession *self);
const gchar *vd_session_get_object_path (VdSession *self);
const gchar *vd_session_get_unit        (VdSession *self);
const gchar *vd_session_get_state       (VdSession *self);
VivariumSessionState vd_session_get_session_state (VdSession *self);
VdCommandLog *vd_session_get_command_log (VdSession *self);
guint32      vd_session_get_uid         (VdSession *self);
VdImage     *vd_session_get_image       (VdSession *self);
gboolean     vd_session_is_active       (VdSession *self);
/* Once "ended": QEMU or the session helper went away without being asked
 * to (killed, crashed, hung, the guest powered off), not at its runtime
 * limit. */
gboolean     vd_session_died            (VdSession *self);
/* How, in systemd's words ("signal, SIGKILL"), or NULL when it said nothing. */
const gchar *vd_session_get_end_detail  (VdSession *self);
/* What died, for a sentence: "QEMU exited on its own", or the session
 * helper's end; with systemd's words when it had any. */
gchar       *vd_session_describe_death  (VdSession *self);
const gchar *vd_session_get_state_reason (VdSession *self);
GDBusInterfaceSkeleton *vd_session_get_skeleton (VdSession *self);

void         vd_session_start_async     (VdSession          *self,
                                         GCancellable       *cancellable,
                                         GAsyncReadyCallback callback,
                                         gpointer            user_data);
gboolean     vd_session_start_finish    (VdSession     *self,
                                         GAsyncResult  *result,
                                         GError       **error);
void         vd_session_stop_async      (VdSession          *self,
                                         GAsyncReadyCallback callback,
                                         gpointer            user_data);
gboolean     vd_session_stop_finish     (VdSession     *self,
                                         GAsyncResult  *result,
                                         GError       **error);
void         vd_session_stop_sync       (VdSession *self);
void         vd_session_record_timing   (VdSession *self, const gchar *step, guint64 usec);
void         vd_session_set_resolv_conf (VdSession *self, const gchar *path);
/* The egress proxy's own uid (allowlist mode), from the session uid range. */
void         vd_session_set_egress_uid  (VdSession *self, guint32 uid);
guint32      vd_session_get_egress_uid  (VdSession *self);
/* The proxy, or NULL when the mode is not allowlist. */
VdEgress    *vd_session_get_egress      (VdSession *self);

const VdSessionOptions *vd_session_get_options (VdSession *self);
const gchar *vd_session_get_start_mode  (VdSession *self);
/* A running boot_snapshot session: stops the guest and saves boot.state,
 * boot.qcow2 and boot.json into @image_dir. Stop the session afterwards. */
void         vd_session_save_boot_snapshot_async  (VdSession          *self,
                                                   const gchar        *image_dir,
                                                   GCancellable       *cancellable,
                                                   GAsyncReadyCallback callback,
                                                   gpointer            user_data);
gboolean     vd_session_save_boot_snapshot_finish (VdSession     *self,
                                                   GAsyncResult  *result,
                                                   GError       **error);
guint32      vd_session_get_main_pid    (VdSession *self);
void         vd_session_exec_async      (VdSession           *self,
                                         const gchar * const *argv,
                                         guint                timeout_sec,
                                         GCancellable        *cancellable,
                                         GAsyncReadyCallback  callback,
                                         gpointer             user_data);
VdAgentExecResult *vd_session_exec_finish (VdSession     *self,
                                         GAsyncResult  *result,
                                         GError       **error);

/* SaveAsImage's part in the session: writes disk.qcow2 (flattened) into
 * @dir, and for a paused restored guest without a project also boot.state,
 * boot.qcow2 (over @final_dir/disk.qcow2) and boot.json. */
void         vd_session_save_disk_async  (VdSession          *self,
                                          const gchar        *dir,
                                          const gchar        *final_dir,
                                          GCancellable       *cancellable,
                                          GAsyncReadyCallback callback,
                                          gpointer            user_data);
gboolean     vd_session_save_disk_finish (VdSession     *self,
                                          GAsyncResult  *result,
                                          gchar        **memory_note,
                                          GError       **error);

/* signal "ended": the session reached "stopped" or "failed" */

G_END_DECLS
