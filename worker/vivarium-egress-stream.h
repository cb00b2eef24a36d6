/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-egress-context.h"

G_BEGIN_DECLS

/* One guest connection on proxy.sock, http.sock or tls.sock, on its own
 * thread, from the first byte to the log line. */

/* Seconds the guest has to send its request head or ClientHello. */
#define VIVARIUM_EGRESS_FIRST_BYTES_SEC 10

typedef enum {
  VIVARIUM_EGRESS_VIA_PROXY,   /* explicit: CONNECT, absolute-form http:// */
  VIVARIUM_EGRESS_VIA_HTTP,    /* transparent: the Host: header */
  VIVARIUM_EGRESS_VIA_TLS,     /* transparent: the ClientHello's SNI */
} VivariumEgressVia;

void vivarium_egress_serve_stream (VivariumEgressContext *ctx,
                                   GSocket               *client,
                                   VivariumEgressVia      via);

G_END_DECLS
