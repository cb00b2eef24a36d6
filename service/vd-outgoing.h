/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Returns @message itself or its replacement (then @message is unreffed),
 * or NULL to drop it. */
GDBusMessage *vd_outgoing_check (GDBusMessage *message);

G_END_DECLS
