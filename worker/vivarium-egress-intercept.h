/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-egress-context.h"

G_BEGIN_DECLS

/* TLS to a secret's host, terminated and re-originated (docs/secrets.md):
 * the upstream's certificate is verified against --upstream-ca (or the
 * system's store) first; then the guest gets a certificate the session's
 * CA minted for the name, ALPN "http/1.1" only; then every HTTP/1.1
 * request on the connection (keep-alive, Content-Length and chunked
 * bodies) has its secrets' placeholders swapped in, in their headers, and
 * any other placeholder refused with a 403. Responses go back untouched.
 * Runs on the connection's thread, with one more thread for the way down. */

/* Bytes a chunk-size line or a trailer line may take. */
#define VIVARIUM_INTERCEPT_MAX_LINE 4096
/* A Content-Length body up to this size is read and scanned whole before
 * anything of its request goes on: a refused request reaches no server. */
#define VIVARIUM_INTERCEPT_HOLD_BODY (64 * 1024)

typedef struct {
  guint64  bytes_up;     /* plaintext, as counted against the budget */
  guint64  bytes_down;
  guint    requests;
  gchar   *summary;      /* when it ended well: what was done */
  gchar   *reason;       /* when it was refused or cut */
} VivariumInterceptResult;

void     vivarium_intercept_result_clear (VivariumInterceptResult *result);

/* TRUE when TLS to host:port is to be intercepted: port 443, some secret
 * applies to host, and the policy lets the proxy look inside. */
gboolean vivarium_egress_intercepts      (VivariumEgressContext  *ctx,
                                          const gchar            *host,
                                          guint16                 port);

/* hello: the guest's bytes already read (its ClientHello, whole or a
 * prefix); upstream: a TCP connection to host:443 the proxy made. FALSE
 * with result->reason when the connection was refused or cut. */
gboolean vivarium_egress_intercept       (VivariumEgressContext   *ctx,
                                          GSocket                 *client,
                                          GBytes                  *hello,
                                          const gchar             *host,
                                          GSocketConnection       *upstream,
                                          VivariumInterceptResult *result);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VivariumInterceptResult, vivarium_intercept_result_clear)

G_END_DECLS
