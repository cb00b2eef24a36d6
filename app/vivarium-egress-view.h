/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>

#include "vivarium-dbus-generated.h"

G_BEGIN_DECLS

/* A session's egress: its mode, the proxy's state, the rules and the
 * proxy's decisions. The same view on the Sessions page (a session's log)
 * and the Tasks page (a task's log, kept after its session is gone). It
 * reads the log only while it is on screen. */
#define VIVARIUM_TYPE_EGRESS_VIEW (vivarium_egress_view_get_type ())
G_DECLARE_FINAL_TYPE (VivariumEgressView, vivarium_egress_view, VIVARIUM, EGRESS_VIEW, AdwBin)

/* @log_source: the Session or Task proxy whose GetEgressLog is read, or
 * NULL to show nothing. @session: the session whose Egress* properties
 * are shown, or NULL when it is gone. */
void vivarium_egress_view_set_source (VivariumEgressView  *self,
                                      GDBusProxy          *log_source,
                                      VivariumDBusSession *session);
/* A task's: its log, and its work session's properties while it exists. */
void vivarium_egress_view_set_task   (VivariumEgressView  *self,
                                      VivariumDBusTask    *task);

G_END_DECLS
