/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-egress-context.h"

G_BEGIN_DECLS

/* DNS over TCP on dns.sock (RFC 1035 4.2.2: each message behind its 2-byte
 * length): allowed names → the guest address, others → REFUSED, anything
 * malformed → the connection closed. Nothing is ever asked upstream. */

/* Queries answered on one connection before it is closed. */
#define VIVARIUM_DNS_MAX_QUERIES 64
/* Seconds the guest has to send each query whole. */
#define VIVARIUM_DNS_QUERY_SEC 10

void vivarium_egress_serve_dns (VivariumEgressContext *ctx,
                                GSocket               *client);

G_END_DECLS
