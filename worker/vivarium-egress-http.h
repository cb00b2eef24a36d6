/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The request heads the egress proxy reads (libsoup's header parser): where
 * a request wants to go, and the head it sends on instead of the guest's. */

/* A request head (request line and headers) longer than this is refused. */
#define VIVARIUM_EGRESS_MAX_HEAD (16 * 1024)

typedef enum {
  VIVARIUM_EGRESS_HTTP_EXPLICIT,     /* proxy.sock: CONNECT or an absolute http:// URL */
  VIVARIUM_EGRESS_HTTP_TRANSPARENT,  /* http.sock: the Host: header names the server */
} VivariumEgressHttpMode;

typedef struct {
  gboolean  connect;   /* CONNECT host:port: a tunnel */
  gchar    *host;      /* as the guest wrote it (brackets of IPv6 removed) */
  guint16   port;
  GBytes   *head;      /* what goes upstream (NULL for CONNECT): origin-form,
                        * no Proxy-* headers, Connection: close */
} VivariumEgressRequest;

void                   vivarium_egress_request_free  (VivariumEgressRequest *request);

/* The length of the head at the start of buf, blank line included; 0 while
 * it is incomplete. */
gsize                  vivarium_egress_http_head_end (const guint8 *buf,
                                                      gsize         len);

/* head: exactly the head (vivarium_egress_http_head_end() bytes). NULL when
 * it is refused; *reason says why, in a sentence for the log. */
VivariumEgressRequest *vivarium_egress_http_parse    (const gchar            *head,
                                                      gsize                   len,
                                                      VivariumEgressHttpMode  mode,
                                                      gchar                 **reason);

/* "host", "host:port", "[v6]:port": FALSE when it is none of these. */
gboolean               vivarium_egress_split_host_port (const gchar  *text,
                                                        guint16       default_port,
                                                        gchar       **host,
                                                        guint16      *port);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressRequest, vivarium_egress_request_free)

G_END_DECLS
