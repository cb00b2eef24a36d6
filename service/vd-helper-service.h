/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-helper-protocol.h"

G_BEGIN_DECLS

/* The inside of vivarium-session-helper: the SessionHelper interface
 * (dbus/org.vivarium.Vivarium1.SessionHelper.xml) on a peer-to-peer
 * connection to vivariumd, served by the QMP and guest-agent clients of
 * one session. It is the only code that reads what QEMU and the guest
 * write; what it hands back is typed, capped and escaped. */

#define VD_TYPE_HELPER_SERVICE (vd_helper_service_get_type ())
G_DECLARE_FINAL_TYPE (VdHelperService, vd_helper_service, VD, HELPER_SERVICE, GObject)

VdHelperService *vd_helper_service_new    (GDBusConnection  *connection,
                                           const gchar      *qmp_socket,
                                           const gchar      *agent_socket);
gboolean         vd_helper_service_export (VdHelperService  *self,
                                           GError          **error);

G_END_DECLS
