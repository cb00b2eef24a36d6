/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The request heads a guest sends to the explicit proxy and to the
 * transparent HTTP port: vivarium_egress_http_head_end(),
 * vivarium_egress_http_parse() and the head it sends upstream instead. The
 * first byte picks the port; the rest is what the guest sent. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vivarium-egress-http.h"
#include "vivarium-egress-policy.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

/* The proxy hands the parser exactly one head: the bytes up to the first
 * blank line, or (when there is none) what a guest would have sent had it
 * ended its head there. */
static GByteArray *
head_of (const uint8_t *data, size_t size)
{
  GByteArray *head = g_byte_array_new ();
  gsize end = vivarium_egress_http_head_end (data, size);

  g_assert_cmpuint (end, <=, size);
  if (end != 0) {
    g_assert_cmpmem (data + end - 4, 4, "\r\n\r\n", 4);
    g_assert_null (memmem (data, end - 1, "\r\n\r\n", 4));
    g_byte_array_append (head, data, end);
    return head;
  }
  g_byte_array_append (head, data, size);
  g_byte_array_append (head, (const guint8 *) "\r\n\r\n", 4);
  g_byte_array_set_size (head, vivarium_egress_http_head_end (head->data, head->len));
  return head;
}

static gboolean
line_is (const gchar *line, const gchar *name)
{
  gsize n = strlen (name);

  return g_ascii_strncasecmp (line, name, n) == 0 && line[n] == ':';
}

/* What goes upstream is one head and no more (nothing after the blank line
 * a server could read as a second request), with one Host, our own
 * Connection: close, and none of the headers meant for the proxy. */
static void
check_upstream_head (GBytes *bytes)
{
  gsize len;
  const gchar *head = g_bytes_get_data (bytes, &len);
  g_autofree gchar *text = g_strndup (head, len);
  g_auto(GStrv) lines = NULL;
  guint hosts = 0, connections = 0;

  g_assert_null (memchr (head, '\0', len));
  g_assert_cmpuint (vivarium_egress_http_head_end ((const guint8 *) head, len), ==, len);
  g_assert_true (g_str_has_suffix (text, "\r\nConnection: close\r\n\r\n"));
  lines = g_strsplit (text, "\r\n", -1);
  for (guint i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    g_assert_null (strchr (lines[i], '\r'));
    g_assert_null (strchr (lines[i], '\n'));
    hosts += line_is (lines[i], "Host");
    connections += line_is (lines[i], "Connection");
    g_assert_false (g_ascii_strncasecmp (lines[i], "Proxy-", 6) == 0);
    g_assert_false (line_is (lines[i], "Keep-Alive"));
  }
  g_assert_cmpuint (hosts, ==, 1);
  g_assert_cmpuint (connections, ==, 1);
}

/* The host as the proxy takes it (vivarium_egress_context_normalize()):
 * an IPv6 address comes without its brackets. NULL: refused at once. */
static gchar *
destination (const gchar *host)
{
  g_autofree gchar *bracketed = strchr (host, ':') != NULL ? g_strdup_printf ("[%s]", host) : NULL;

  return vivarium_egress_normalize_host (bracketed != NULL ? bracketed : host);
}

/* The upstream head, for a host the proxy would connect to at all, read by
 * the transparent port goes to the same place and is rewritten to itself:
 * the rewrite is a fixed point. */
static void
check_reparse (const VivariumEgressRequest *request)
{
  gsize len;
  const gchar *head = g_bytes_get_data (request->head, &len);
  g_autofree gchar *reason = NULL;
  g_autofree gchar *normal = destination (request->host);
  g_autoptr(VivariumEgressRequest) again = NULL;

  if (normal == NULL)
    return;
  again = vivarium_egress_http_parse (head, len, VIVARIUM_EGRESS_HTTP_TRANSPARENT, &reason);
  g_assert_nonnull (again);
  g_assert_null (reason);
  g_assert_false (again->connect);
  g_assert_cmpstr (again->host, ==, request->host);
  g_assert_cmpuint (again->port, ==, request->port);
  g_assert_true (g_bytes_equal (again->head, request->head));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  VivariumEgressHttpMode mode;
  g_autoptr(GByteArray) head = NULL;
  g_autoptr(VivariumEgressRequest) request = NULL;
  g_autofree gchar *reason = NULL;

  if (size == 0)
    return 0;
  mode = (data[0] & 1) ? VIVARIUM_EGRESS_HTTP_TRANSPARENT : VIVARIUM_EGRESS_HTTP_EXPLICIT;
  head = head_of (data + 1, size - 1);
  request = vivarium_egress_http_parse ((const gchar *) head->data, head->len, mode, &reason);
  g_assert_true ((request == NULL) == (reason != NULL));
  if (request == NULL) {
    g_assert_true (g_utf8_validate (reason, -1, NULL));
    return 0;
  }
  g_assert_nonnull (request->host);
  g_assert_cmpuint (strlen (request->host), >, 0);
  g_assert_cmpuint (request->port, !=, 0);
  if (request->connect) {
    g_assert_cmpint (mode, ==, VIVARIUM_EGRESS_HTTP_EXPLICIT);
    g_assert_null (request->head);
    return 0;
  }
  check_upstream_head (request->head);
  check_reparse (request);
  return 0;
}
