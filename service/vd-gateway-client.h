/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* The daemon's side of vivarium-gateway: no bus between them, only files
 * under RUNTIME/tasks/ (root's, 0711). To give an agent task its model
 * socket the daemon makes RUNTIME/tasks/<id>/ with a file "uid" (the
 * worker's uid), complete before it appears (made as .new-<id>, renamed);
 * the gateway watches RUNTIME/tasks/, binds <id>/model.sock owned by that
 * uid, mode 0600 (so the worker's uid, and root, may connect, nobody else),
 * and writes its counters to <id>/usage. Removing the directory closes the
 * socket. */

#define VD_GATEWAY_SOCKET_NAME "model.sock"
/* RUNTIME/gateway-deny: what the guard denies besides the built-in ranges,
 * for the gateway to refuse a name that resolves there. */
#define VD_GATEWAY_DENY_NAME "gateway-deny"
#define VD_GATEWAY_UNIT "vivarium-gateway.service"

/* Writes RUNTIME/gateway-deny (root's, 0600), a line "CIDR WHY" for each
 * entry of the guard's @deny_list outside the built-in ranges: the host's
 * own addresses and [Guard] ExtraDeny=. The gateway (sandboxed, started
 * later by the first agent worker's unit) reads it when it starts. */
gboolean  vd_gateway_write_host_deny (VdConfig    *config,
                                      GPtrArray   *deny_list,
                                      GError     **error);
/* Returns the socket's path (which the gateway binds soon after). */
gchar    *vd_gateway_task_open       (const gchar *runtime_dir,
                                      const gchar *task_id,
                                      guint32      uid,
                                      GError     **error);
/* The gateway's counters: requests, refused, prompt and completion tokens
 * (VIVARIUM_REPORT_MODEL_* order); FALSE when it wrote none. */
gboolean  vd_gateway_task_read_usage (const gchar *runtime_dir,
                                      const gchar *task_id,
                                      guint64      usage[4]);
void      vd_gateway_task_close      (const gchar *runtime_dir,
                                      const gchar *task_id);
/* Why the gateway cannot serve a task, read from systemd (the unit's state,
 * result, exit status and the gateway's own StatusText=); NULL while it runs. */
gchar    *vd_gateway_dup_down_reason (VdSystemd   *systemd);

G_END_DECLS
