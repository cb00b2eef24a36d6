/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <libsoup/soup.h>

#include "vivarium-egress-http.h"

void
vivarium_egress_request_free (VivariumEgressRequest *request)
{
  g_free (request->host);
  g_clear_pointer (&request->head, g_bytes_unref);
  g_free (request);
}

gsize
vivarium_egress_http_head_end (const guint8 *buf, gsize len)
{
  const guint8 *end = memmem (buf, len, "\r\n\r\n", 4);

  return end != NULL ? (gsize) (end - buf) + 4 : 0;
}

gboolean
vivarium_egress_split_host_port (const gchar *text, guint16 default_port, gchar **host, guint16 *port)
{
  const gchar *colon;
  g_autofree gchar *name = NULL;
  guint64 value = default_port;

  if (text[0] == '[') {
    const gchar *close = strchr (text, ']');
    if (close == NULL || close == text + 1 || (close[1] != '\0' && close[1] != ':'))
      return FALSE;
    name = g_strndup (text + 1, close - text - 1);
    colon = close[1] == ':' ? close + 1 : NULL;
  } else {
    colon = strchr (text, ':');
    if (colon != NULL && strchr (colon + 1, ':') != NULL)
      return FALSE;   /* a bare IPv6 address: ambiguous, brackets required */
    name = colon != NULL ? g_strndup (text, colon - text) : g_strdup (text);
  }
  if (name[0] == '\0')
    return FALSE;
  if (colon != NULL && !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &value, NULL))
    return FALSE;
  if (value == 0)
    return FALSE;
  *host = g_steal_pointer (&name);
  *port = (guint16) value;
  return TRUE;
}

/* Hop-by-hop and proxy headers never go upstream: they are for us. */
static gboolean
header_dropped (const gchar *name)
{
  return g_ascii_strncasecmp (name, "Proxy-", 6) == 0 || g_ascii_strcasecmp (name, "Connection") == 0 ||
         g_ascii_strcasecmp (name, "Keep-Alive") == 0 || g_ascii_strcasecmp (name, "Host") == 0;
}

static GBytes *
build_head (const gchar *method, const gchar *target, SoupHTTPVersion version, const gchar *authority,
            SoupMessageHeaders *headers)
{
  g_autoptr(GString) out = g_string_new (NULL);
  SoupMessageHeadersIter iter;
  const gchar *name, *value;

  g_string_append_printf (out, "%s %s HTTP/1.%d\r\nHost: %s\r\n", method, target,
                          version == SOUP_HTTP_1_0 ? 0 : 1, authority);
  soup_message_headers_iter_init (&iter, headers);
  while (soup_message_headers_iter_next (&iter, &name, &value))
    if (!header_dropped (name))
      g_string_append_printf (out, "%s: %s\r\n", name, value);
  g_string_append (out, "Connection: close\r\n\r\n");
  return g_string_free_to_bytes (g_steal_pointer (&out));
}

/* An absolute http:// URL: the server from its authority, the origin-form
 * (path and query) for the head. */
static gboolean
parse_absolute (const gchar *target, gchar **host, guint16 *port, gchar **origin, gchar **reason)
{
  g_autoptr(GUri) uri = g_uri_parse (target, G_URI_FLAGS_ENCODED | G_URI_FLAGS_NON_DNS, NULL);
  const gchar *query;

  if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0') {
    *reason = g_strdup ("the request's URL is not an absolute http:// URL");
    return FALSE;
  }
  if (g_ascii_strcasecmp (g_uri_get_scheme (uri), "http") != 0) {
    *reason = g_strdup ("only http:// URLs are proxied in plain; use CONNECT for TLS");
    return FALSE;
  }
  if (g_uri_get_userinfo (uri) != NULL) {
    *reason = g_strdup ("a URL with a user name or password is not proxied");
    return FALSE;
  }
  *host = g_strdup (g_uri_get_host (uri));
  *port = g_uri_get_port (uri) > 0 ? (guint16) g_uri_get_port (uri) : 80;
  query = g_uri_get_query (uri);
  *origin = g_strdup_printf ("%s%s%s", g_uri_get_path (uri)[0] != '\0' ? g_uri_get_path (uri) : "/",
                             query != NULL ? "?" : "", query != NULL ? query : "");
  return TRUE;
}

static VivariumEgressRequest *
parse_connect (const gchar *target, gchar **reason)
{
  g_autoptr(VivariumEgressRequest) request = g_new0 (VivariumEgressRequest, 1);

  request->connect = TRUE;
  if (!vivarium_egress_split_host_port (target, 0, &request->host, &request->port) || request->port == 0) {
    *reason = g_strdup ("CONNECT needs host:port");
    return NULL;
  }
  return g_steal_pointer (&request);
}

/* Where a request that is not CONNECT goes: the absolute URL's server, else
 * (transparent only) the Host: header's. */
static gboolean
find_destination (const gchar *target, SoupMessageHeaders *headers, VivariumEgressHttpMode mode,
                  gchar **host, guint16 *port, gchar **origin, gchar **reason)
{
  const gchar *host_header = soup_message_headers_get_one (headers, "Host");

  if (target[0] != '/')
    return parse_absolute (target, host, port, origin, reason);
  if (mode == VIVARIUM_EGRESS_HTTP_EXPLICIT) {
    *reason = g_strdup ("the proxy takes CONNECT host:port or an absolute http:// URL");
    return FALSE;
  }
  if (host_header == NULL || !vivarium_egress_split_host_port (host_header, 80, host, port)) {
    *reason = g_strdup ("the request has no usable Host: header");
    return FALSE;
  }
  *origin = g_strdup (target);
  return TRUE;
}

VivariumEgressRequest *
vivarium_egress_http_parse (const gchar *head, gsize len, VivariumEgressHttpMode mode, gchar **reason)
{
  g_autoptr(SoupMessageHeaders) headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_REQUEST);
  g_autoptr(VivariumEgressRequest) request = g_new0 (VivariumEgressRequest, 1);
  g_autofree gchar *method = NULL, *target = NULL, *origin = NULL, *authority = NULL;
  SoupHTTPVersion version;

  if (len > VIVARIUM_EGRESS_MAX_HEAD) {
    *reason = g_strdup_printf ("the request head is larger than %u bytes", VIVARIUM_EGRESS_MAX_HEAD);
    return NULL;
  }
  if (memchr (head, '\0', len) != NULL ||
      soup_headers_parse_request (head, (int) len, headers, &method, &target, &version) != SOUP_STATUS_OK) {
    *reason = g_strdup ("the request head is not valid HTTP/1.x");
    return NULL;
  }
  if (g_str_equal (method, "CONNECT"))
    return mode == VIVARIUM_EGRESS_HTTP_EXPLICIT ? parse_connect (target, reason)
                                                 : (*reason = g_strdup ("CONNECT is for the proxy port"), NULL);
  if (!find_destination (target, headers, mode, &request->host, &request->port, &origin, reason))
    return NULL;
  authority = strchr (request->host, ':') != NULL ? g_strdup_printf ("[%s]:%u", request->host, request->port)
                                                  : g_strdup_printf ("%s:%u", request->host, request->port);
  request->head = build_head (method, origin, version, authority, headers);
  return g_steal_pointer (&request);
}
