/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-systemd.h"

G_BEGIN_DECLS

/* A task's worker: a host program in the transient unit
 * vivarium-worker-<task>.service. It runs as a reserved worker uid
 * (vivarium-wN, VIVARIUM_WORKER_UID_BASE + N), not DynamicUser=: the daemon
 * picks the uid, so the grants that admit it exist before its first call,
 * with no window to learn the uid in; and a slot is reused only after its
 * unit is gone. No network at all (PrivateNetwork=, IPAddressDeny=any), a
 * read-only system (ProtectSystem=strict, ProtectHome=yes), a private /tmp,
 * NoNewPrivileges=, no secrets: its environment holds VIVARIUM_TASK (the
 * task's object path), VIVARIUM_SESSION (the work session's) and
 * VIVARIUM_INSTRUCTIONS_FILE. The script's bytes are written by the daemon
 * to RUNTIME/workers/<task>/worker (root's, 0755) and the instructions next
 * to it (0644).
 *
 * signal "exited" (gboolean success): the program ended (or was stopped).
 * When it failed on its own (not stopped by the daemon), the unit stays
 * loaded until the daemon has asked systemd why, and
 * vd_worker_get_failure() says it in words. */

#define VD_WORKER_SCRIPT_MAX (1024 * 1024)

#define VD_TYPE_WORKER (vd_worker_get_type ())
G_DECLARE_FINAL_TYPE (VdWorker, vd_worker, VD, WORKER, GObject)

VdWorker    *vd_worker_new        (VdSystemd   *systemd,
                                   const gchar *runtime_dir,
                                   const gchar *task_id,
                                   guint32      uid);
const gchar *vd_worker_get_unit   (VdWorker *self);
guint32      vd_worker_get_uid    (VdWorker *self);
/* Why the unit failed on its own (could not start, could not execute the
 * program, exited non-zero, killed), or NULL. Valid once "exited" came. */
const gchar *vd_worker_get_failure (VdWorker *self);
/* Before start: run @program (vivarium-agent) instead of a script, with
 * VIVARIUM_MODEL_SOCKET=@model_socket, after vivarium-gateway.service. */
void         vd_worker_set_agent  (VdWorker    *self,
                                   const gchar *program,
                                   const gchar *model_socket);
/* Writes the files and starts the unit; "exited" follows when it ends. */
gboolean     vd_worker_start      (VdWorker    *self,
                                   GBytes      *script,
                                   const gchar *instructions,
                                   const gchar *task_path,
                                   const gchar *session_path,
                                   guint        memory_mib,
                                   GError     **error);
void         vd_worker_stop       (VdWorker *self);
/* Removes RUNTIME/workers/<task>. */
void         vd_worker_cleanup    (VdWorker *self);

G_END_DECLS
