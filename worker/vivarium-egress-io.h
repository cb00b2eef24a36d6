/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Reads on a guest's socket against a deadline (monotonic µs): a guest that
 * trickles bytes gets the time it was given in total, not per byte. */

/* Bytes read (> 0), 0 at EOF, -1 on timeout or error (*timed_out set). */
gssize   vivarium_egress_io_read       (GSocket  *socket,
                                        guint8   *buf,
                                        gsize     max,
                                        gint64    deadline,
                                        gboolean *timed_out);
gboolean vivarium_egress_io_read_exact (GSocket  *socket,
                                        guint8   *buf,
                                        gsize     len,
                                        gint64    deadline);
/* Blocking, bounded by the socket's own timeout. */
gboolean vivarium_egress_io_send_all   (GSocket      *socket,
                                        const guint8 *data,
                                        gsize         len);

G_END_DECLS
