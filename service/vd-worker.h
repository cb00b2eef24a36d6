/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* A task's worker: a host program in the transient unit
 * vivarium-worker-<task>.service. It runs as a reserved worker uid
 * (vivarium-wN, VIVARIUM_WORKER_UID_BASE + N), not DynamicUser=: the daemon
 * picks the uid (vd-worker-slots.h), so the grants that admit it exist
 * before its first call, with no window to learn the uid in. No network at
 * all (PrivateNetwork=, IPAddressDeny=any, AF_UNIX only), a read-only
 * system, a private /tmp, only its own processes in /proc, no
 * capabilities, a system-call allow-list (vd-unit-sandbox.h); of
 * /run/vivarium it sees only its own directory (and an agent its model
 * socket's), of the state directory nothing; no secrets: its environment
 * holds VIVARIUM_TASK (the task's object path), VIVARIUM_SESSION (the work
 * session's) and VIVARIUM_INSTRUCTIONS_FILE. The script's bytes are written
 * by the daemon to RUNTIME/workers/<task>/worker and the instructions next
 * to it, root:<the worker's group> 0750/0640 in a 0750 directory under a
 * 0711 RUNTIME/workers: no other worker, QEMU uid or local user lists or
 * reads them.
 *
 * signal "exited" (gboolean success): the program ended (or was stopped).
 * When it failed on its own (not stopped by the daemon), the unit stays
 * loaded until the daemon has asked systemd why, and
 * vd_worker_get_failure() says it in words. */

/* The script's size bound is VIVARIUM_TASK_SCRIPT_MAX (common/vivarium-names.h). */

#define VD_TYPE_WORKER (vd_worker_get_type ())
G_DECLARE_FINAL_TYPE (VdWorker, vd_worker, VD, WORKER, GObject)

VdWorker    *vd_worker_new        (VdSystemd   *systemd,
                                   VdConfig    *config,
                                   const gchar *task_id,
                                   guint32      uid);
/* vivarium-worker-<task>.service */
gchar       *vd_worker_unit_for   (const gchar *task_id);
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
