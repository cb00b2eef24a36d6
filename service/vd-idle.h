/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* When the daemon may leave the bus: exactly the timeout after the last
 * call ended or the last inhibitor was released, never while one is held.
 * The clock starts at the first vd_idle_reset().
 * signal "timeout" (no arguments), emitted once per quiet period. */

#define VD_TYPE_IDLE (vd_idle_get_type ())
G_DECLARE_FINAL_TYPE (VdIdle, vd_idle, VD, IDLE, GObject)

VdIdle  *vd_idle_new           (guint        timeout_ms);
guint    vd_idle_inhibit       (VdIdle      *self,
                                const gchar *reason);
void     vd_idle_uninhibit     (VdIdle      *self,
                                guint        token);
void     vd_idle_reset         (VdIdle      *self);
guint    vd_idle_get_n_inhibitors (VdIdle   *self);

G_END_DECLS
