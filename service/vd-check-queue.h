/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The polkit checks waiting for a turn. A bus allows a connection only so
 * many calls awaiting a reply (dbus-daemon's max_replies_per_connection,
 * 128 on the system bus), and every check is one on the daemon's polkit
 * connection: past that the bus answers LimitsExceeded, and a check that
 * fails is a refusal, so one flooding caller would get everyone refused.
 * At most VD_CHECK_QUEUE_IN_FLIGHT run at once; the rest wait here, one
 * queue a caller (its unique bus name), served in turn, so a caller with
 * a thousand calls waiting delays another's next call by one turn, not by a
 * thousand. Each caller may have VD_CHECK_QUEUE_PER_CALLER waiting, all
 * callers VD_CHECK_QUEUE_TOTAL; past either, push says no. Holds a
 * reference on each GTask it holds. */

#define VD_CHECK_QUEUE_IN_FLIGHT   32
/* The system bus's own max_replies_per_connection: a caller cannot have
 * more calls awaiting a reply there, so it meets this only on a bus whose
 * limit was raised. */
#define VD_CHECK_QUEUE_PER_CALLER  128
#define VD_CHECK_QUEUE_TOTAL       4096

typedef struct _VdCheckQueue VdCheckQueue;

VdCheckQueue *vd_check_queue_new          (void);
void          vd_check_queue_free         (VdCheckQueue *self);
/* FALSE (and nothing kept) when @caller or everyone has too many waiting. */
gboolean      vd_check_queue_push         (VdCheckQueue *self,
                                           const gchar  *caller,
                                           GTask        *task);
/* The next caller's oldest waiting task (a new reference), or NULL. */
GTask        *vd_check_queue_pop          (VdCheckQueue *self);
guint         vd_check_queue_get_waiting  (VdCheckQueue *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdCheckQueue, vd_check_queue_free)

G_END_DECLS
