/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Just enough HTTP/1.x for the agent, the client of its gateway's unix
 * socket: one request per connection, bodies by Content-Length (or, for a
 * response, up to the end), every size capped. No chunked bodies, no
 * keep-alive: the gateway (libsoup) answers each request with
 * Content-Length and closes. The gateway itself uses only
 * vivarium_http_error_body(). */

#define VIVARIUM_HTTP_HEAD_MAX (16 * 1024)

typedef struct {
  gchar      *method;    /* request: "POST" */
  gchar      *path;      /* request: "/v1/chat/completions" */
  guint       status;    /* response: 200 */
  GHashTable *headers;   /* lower-cased name → value */
  GBytes     *body;
} VivariumHttpMessage;

void     vivarium_http_message_free (VivariumHttpMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumHttpMessage, vivarium_http_message_free)

/* Reads one message. A body over @max_body fails with G_IO_ERROR_MESSAGE_TOO_LARGE. */
VivariumHttpMessage *vivarium_http_read (GInputStream *in,
                                         gboolean      request,
                                         gsize         max_body,
                                         GError      **error);
gboolean vivarium_http_write_request  (GOutputStream      *out,
                                       const gchar        *method,
                                       const gchar        *path,
                                       const gchar        *host,
                                       const gchar *const *extra_headers,
                                       GBytes             *body,
                                       GError            **error);
gboolean vivarium_http_write_response (GOutputStream *out,
                                       guint          status,
                                       const gchar   *content_type,
                                       GBytes        *body,
                                       GError       **error);
/* A JSON body {"error": {"message": TEXT}} as chat-completions servers send. */
GBytes  *vivarium_http_error_body     (const gchar *text);

G_END_DECLS
