/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* One operation's end by time or by its caller: whichever of the deadline
 * and the cancellable comes first calls @func once, with
 * VIVARIUM_ERROR_TIMED_OUT or VIVARIUM_ERROR_CANCELLED, on @context (the
 * operation's GTask context). Stopping it (or freeing it) guarantees @func
 * is not called afterwards. The QMP client, the agent client and the unix
 * connect all end their calls this way. */
typedef void (*VdDeadlineFunc) (gint code, gpointer user_data);

typedef struct _VdDeadline VdDeadline;

VdDeadline *vd_deadline_new          (guint           timeout_ms,
                                      GCancellable   *cancellable,
                                      GMainContext   *context,
                                      VdDeadlineFunc  func,
                                      gpointer        user_data);
/* @deadline_us: on the monotonic clock */
VdDeadline *vd_deadline_new_at       (gint64          deadline_us,
                                      GCancellable   *cancellable,
                                      GMainContext   *context,
                                      VdDeadlineFunc  func,
                                      gpointer        user_data);
void        vd_deadline_stop         (VdDeadline     *self);
void        vd_deadline_free         (VdDeadline     *self);
gint64      vd_deadline_get_us       (VdDeadline     *self);
guint       vd_deadline_remaining_ms (VdDeadline     *self);
/* Milliseconds until @deadline_us (monotonic), rounded up; 0 once passed. */
guint       vd_deadline_ms_until     (gint64          deadline_us);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdDeadline, vd_deadline_free)

G_END_DECLS
