/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-call.h"
#include "vivarium-dbus-generated.h"

G_BEGIN_DECLS

/* vivariumd on the system bus, as the calling user: polkit decides each
 * call as for any script. The bus is joined at the first call, so a client
 * that only lists tools needs no daemon. Calls are never interactive: an
 * MCP server has no one to type a password. */
typedef struct _VmcpDaemon VmcpDaemon;
/* @host: "[USER@]HOST" to reach that host's daemon over SSH
 * (vivarium-remote.h), NULL for this one's. */
VmcpDaemon *vmcp_daemon_new          (const gchar         *host);
void        vmcp_daemon_free         (VmcpDaemon          *self);
/* Typed proxies of the daemon's objects, called through with
 * VMCP_CALL_FLAGS. They load no properties (each is read with
 * vmcp_daemon_get, so that a refusal is an error) and do not start the
 * daemon until the first call. */
#define VMCP_CALL_FLAGS (vivarium_call_flags (FALSE))
VivariumDBusManager *vmcp_daemon_manager (VmcpDaemon          *self,
                                          GError             **error);
VivariumDBusTask    *vmcp_daemon_task    (VmcpDaemon          *self,
                                          const gchar         *path,
                                          GError             **error);
VivariumDBusReport  *vmcp_daemon_report  (VmcpDaemon          *self,
                                          const gchar         *path,
                                          GError             **error);
/* A property, read with Properties.Get (authorized like any call). */
GVariant   *vmcp_daemon_get          (VmcpDaemon          *self,
                                      const gchar         *path,
                                      const gchar         *interface,
                                      const gchar         *property,
                                      const GVariantType  *type,
                                      GError             **error);
gchar      *vmcp_daemon_get_string   (VmcpDaemon          *self,
                                      const gchar         *path,
                                      const gchar         *interface,
                                      const gchar         *property,
                                      GError             **error);
/* The D-Bus error name a failure is known by: the daemon's, the bus's, or
 * org.vivarium.Vivarium1.Error.Failed for one of ours without a name. */
gchar      *vmcp_error_name          (const GError        *error);
/* The message without GDBus's "GDBus.Error:NAME: " prefix. */
gchar      *vmcp_error_message       (const GError        *error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpDaemon, vmcp_daemon_free)

G_END_DECLS
