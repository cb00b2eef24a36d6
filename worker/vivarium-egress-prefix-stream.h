/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* An input stream that gives bytes already read (the guest's ClientHello,
 * read to learn its server name) and then the rest of the base stream:
 * what a TLS server connection needs to start from the first byte.
 * Pollable when the base stream is. */
#define VIVARIUM_TYPE_EGRESS_PREFIX_STREAM (vivarium_egress_prefix_stream_get_type ())
G_DECLARE_FINAL_TYPE (VivariumEgressPrefixStream, vivarium_egress_prefix_stream, VIVARIUM, EGRESS_PREFIX_STREAM,
                      GInputStream)

GInputStream *vivarium_egress_prefix_stream_new (GBytes       *prefix,
                                                 GInputStream *base);

G_END_DECLS
