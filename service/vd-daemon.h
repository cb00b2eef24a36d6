/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-authority.h"
#include "vd-config.h"

G_BEGIN_DECLS

#define VD_TYPE_DAEMON (vd_daemon_get_type ())
G_DECLARE_FINAL_TYPE (VdDaemon, vd_daemon, VD, DAEMON, GObject)

VdDaemon    *vd_daemon_new            (VdConfig  *config,
                                       gboolean   replace);
gint         vd_daemon_run            (VdDaemon  *self);
void         vd_daemon_quit           (VdDaemon  *self);

G_END_DECLS
