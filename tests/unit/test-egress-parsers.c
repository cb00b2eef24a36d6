/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress proxy's parsers over bytes a guest chose: the TLS ClientHello
 * (a real one from GnuTLS, and hand-built ones whose lengths lie), the DNS
 * question and the answer built for it, the request heads (libsoup's parser
 * and our rewrite). Pure functions: no proxy, no network. */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <gnutls/gnutls.h>

#include "vivarium-egress-dns.h"
#include "vivarium-egress-http.h"
#include "vivarium-egress-placeholder.h"
#include "vivarium-egress-sni.h"

/* --- ClientHello --------------------------------------------------------------- */

static gboolean
push_bytes (gpointer ptr, const void *data, gsize len)
{
  g_byte_array_append (ptr, data, len);
  return TRUE;
}

static ssize_t
capture_push (gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
  push_bytes (ptr, data, len);
  return (ssize_t) len;
}

static ssize_t
no_pull (gnutls_transport_ptr_t ptr, void *data, size_t len)
{
  errno = EAGAIN;
  return -1;
}

/* The first flight of a real TLS client (GnuTLS, its default priorities). */
static GByteArray *
real_hello (const gchar *server_name)
{
  GByteArray *out = g_byte_array_new ();
  gnutls_session_t session;
  gnutls_certificate_credentials_t creds;

  g_assert_cmpint (gnutls_certificate_allocate_credentials (&creds), ==, 0);
  g_assert_cmpint (gnutls_init (&session, GNUTLS_CLIENT | GNUTLS_NONBLOCK), ==, 0);
  g_assert_cmpint (gnutls_set_default_priority (session), ==, 0);
  g_assert_cmpint (gnutls_credentials_set (session, GNUTLS_CRD_CERTIFICATE, creds), ==, 0);
  if (server_name != NULL)
    g_assert_cmpint (gnutls_server_name_set (session, GNUTLS_NAME_DNS, server_name, strlen (server_name)), ==, 0);
  gnutls_transport_set_ptr (session, out);
  gnutls_transport_set_push_function (session, capture_push);
  gnutls_transport_set_pull_function (session, no_pull);
  g_assert_cmpint (gnutls_handshake (session), ==, GNUTLS_E_AGAIN);
  gnutls_deinit (session);
  gnutls_certificate_free_credentials (creds);
  g_assert_cmpuint (out->len, >, 100);
  return out;
}

static void
test_sni_real (void)
{
  g_autoptr(GByteArray) with = real_hello ("deb.debian.org");
  g_autoptr(GByteArray) without = real_hello (NULL);
  g_autofree gchar *name = NULL;
  g_autofree gchar *none = NULL;

  g_assert_cmpint (vivarium_egress_sni_parse (with->data, with->len, &name), ==, VIVARIUM_SNI_FOUND);
  g_assert_cmpstr (name, ==, "deb.debian.org");
  g_assert_cmpint (vivarium_egress_sni_parse (without->data, without->len, &none), ==, VIVARIUM_SNI_NONE);
  g_assert_null (none);
}

/* Every proper prefix of a real hello asks for more, never decides. */
static void
test_sni_truncated (void)
{
  g_autoptr(GByteArray) hello = real_hello ("deb.debian.org");

  for (gsize len = 0; len < hello->len; len++) {
    g_autofree gchar *name = NULL;
    g_assert_cmpint (vivarium_egress_sni_parse (hello->data, len, &name), ==, VIVARIUM_SNI_NEED_MORE);
    g_assert_null (name);
  }
}

/* Knobs for a hand-built hello: each adds to one length field. */
typedef struct {
  gint session_id;
  gint extensions;
  gint sni_list;
  gint sni_name;
  gint ext;
} Lies;

static void
put16 (GByteArray *a, guint v)
{
  guint8 b[2] = { (v >> 8) & 0xff, v & 0xff };
  g_byte_array_append (a, b, 2);
}

static void
put8 (GByteArray *a, guint v)
{
  guint8 b = v & 0xff;
  g_byte_array_append (a, &b, 1);
}

static GByteArray *
sni_extension (const gchar *name, const Lies *lie)
{
  GByteArray *ext = g_byte_array_new ();
  gsize n = strlen (name);

  put16 (ext, 0x0000);                          /* server_name */
  put16 (ext, 2 + 1 + 2 + n + lie->ext);
  put16 (ext, 1 + 2 + n + lie->sni_list);
  put8 (ext, 0);                                /* host_name */
  put16 (ext, n + lie->sni_name);
  g_byte_array_append (ext, (const guint8 *) name, n);
  return ext;
}

/* The hello body, then a handshake header, then records of at most
 * record_size bytes each. */
static GByteArray *
built_hello (const gchar *name, const Lies *lie, gsize padding, gsize record_size)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  g_autoptr(GByteArray) exts = g_byte_array_new ();
  g_autoptr(GByteArray) msg = g_byte_array_new ();
  GByteArray *out = g_byte_array_new ();
  guint8 zero[32] = { 0 };

  put16 (exts, 0x0017);                         /* extended_master_secret, empty */
  put16 (exts, 0);
  if (name != NULL) {
    g_autoptr(GByteArray) sni = sni_extension (name, lie);
    g_byte_array_append (exts, sni->data, sni->len);
  }
  if (padding > 0) {
    g_autofree guint8 *pad = g_malloc0 (padding);
    put16 (exts, 0x0015);                       /* padding */
    put16 (exts, padding);
    g_byte_array_append (exts, pad, padding);
  }
  put16 (body, 0x0303);
  g_byte_array_append (body, zero, 32);
  put8 (body, 32 + lie->session_id);
  g_byte_array_append (body, zero, 32);
  put16 (body, 2);
  put16 (body, 0x1301);
  put8 (body, 1);
  put8 (body, 0);
  put16 (body, exts->len + lie->extensions);
  g_byte_array_append (body, exts->data, exts->len);
  put8 (msg, 0x01);
  put8 (msg, body->len >> 16);
  put16 (msg, body->len & 0xffff);
  g_byte_array_append (msg, body->data, body->len);
  for (gsize at = 0; at < msg->len; at += record_size) {
    gsize n = MIN (record_size, msg->len - at);
    put8 (out, 0x16);
    put16 (out, 0x0301);
    put16 (out, n);
    g_byte_array_append (out, msg->data + at, n);
  }
  return out;
}

static VivariumSniResult
parse_built (const gchar *name, const Lies *lie, gsize padding, gsize record_size, gchar **found)
{
  g_autoptr(GByteArray) hello = built_hello (name, lie, padding, record_size);

  return vivarium_egress_sni_parse (hello->data, hello->len, found);
}

static void
test_sni_built (void)
{
  Lies honest = { 0 };
  g_autofree gchar *one = NULL;
  g_autofree gchar *split = NULL;
  g_autofree gchar *none = NULL;

  g_assert_cmpint (parse_built ("Example.ORG", &honest, 0, 16384, &one), ==, VIVARIUM_SNI_FOUND);
  g_assert_cmpstr (one, ==, "Example.ORG");
  /* A hello spread over records of 7 bytes is put together again. */
  g_assert_cmpint (parse_built ("example.org", &honest, 0, 7, &split), ==, VIVARIUM_SNI_FOUND);
  g_assert_cmpstr (split, ==, "example.org");
  g_assert_cmpint (parse_built (NULL, &honest, 0, 16384, &none), ==, VIVARIUM_SNI_NONE);
}

/* Every inner length that claims more (or less) than its container holds. */
static void
test_sni_lies (void)
{
  const Lies lies[] = {
    { .session_id = 200 }, { .extensions = 1 }, { .extensions = -1 }, { .extensions = 3000 },
    { .ext = 1 }, { .ext = -1 }, { .ext = 60000 }, { .sni_list = 1 }, { .sni_list = -1 },
    { .sni_name = 1 }, { .sni_name = 1000 }, { .sni_name = -11 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (lies); i++) {
    g_autofree gchar *name = NULL;
    g_test_message ("lie %zu", i);
    g_assert_cmpint (parse_built ("example.org", &lies[i], 0, 16384, &name), ==, VIVARIUM_SNI_MALFORMED);
    g_assert_null (name);
  }
}

static void
test_sni_oversized (void)
{
  Lies honest = { 0 };
  g_autofree gchar *name = NULL;
  g_autofree gchar *fits = NULL;
  /* A record header announcing more than a record may hold. */
  const guint8 huge_record[] = { 0x16, 0x03, 0x01, 0x50, 0x00, 0x01, 0x00, 0x10, 0x00 };
  /* A handshake header announcing a 64 KiB ClientHello. */
  const guint8 huge_hello[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x01, 0x00, 0x00 };

  g_assert_cmpint (vivarium_egress_sni_parse (huge_record, sizeof huge_record, &name), ==, VIVARIUM_SNI_MALFORMED);
  g_assert_cmpint (vivarium_egress_sni_parse (huge_hello, sizeof huge_hello, &name), ==, VIVARIUM_SNI_TOO_LARGE);
  /* 15 KiB of padding fits, 17 KiB over three records does not. */
  g_assert_cmpint (parse_built ("example.org", &honest, 15 * 1024, 16384, &fits), ==, VIVARIUM_SNI_FOUND);
  g_assert_cmpint (parse_built ("example.org", &honest, 17 * 1024, 8000, &name), ==, VIVARIUM_SNI_TOO_LARGE);
  g_assert_null (name);
}

static void
test_sni_not_tls (void)
{
  const gchar *http = "GET / HTTP/1.1\r\n";
  const guint8 ssl2[] = { 0x16, 0x02, 0x00, 0x00, 0x10 };
  const guint8 alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28 };
  const guint8 server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00 };
  g_autofree gchar *name = NULL;

  g_assert_cmpint (vivarium_egress_sni_parse ((const guint8 *) http, strlen (http), &name), ==, VIVARIUM_SNI_NOT_TLS);
  g_assert_cmpint (vivarium_egress_sni_parse (ssl2, sizeof ssl2, &name), ==, VIVARIUM_SNI_NOT_TLS);
  g_assert_cmpint (vivarium_egress_sni_parse (alert, sizeof alert, &name), ==, VIVARIUM_SNI_NOT_TLS);
  g_assert_cmpint (vivarium_egress_sni_parse (server_hello, sizeof server_hello, &name), ==, VIVARIUM_SNI_MALFORMED);
}

/* --- DNS ------------------------------------------------------------------------ */

static GByteArray *
dns_query (guint16 id, guint16 flags, guint16 qdcount, const gchar *name, guint16 qtype)
{
  GByteArray *q = g_byte_array_new ();
  g_auto(GStrv) labels = g_strsplit (name, ".", -1);

  put16 (q, id);
  put16 (q, flags);
  put16 (q, qdcount);
  put16 (q, 0);
  put16 (q, 0);
  put16 (q, 0);
  for (guint i = 0; labels[i] != NULL; i++) {
    if (labels[i][0] == '\0')
      continue;
    put8 (q, strlen (labels[i]));
    g_byte_array_append (q, (const guint8 *) labels[i], strlen (labels[i]));
  }
  put8 (q, 0);
  put16 (q, qtype);
  put16 (q, VIVARIUM_DNS_CLASS_IN);
  return q;
}

static guint16
get16 (GBytes *b, gsize at)
{
  const guint8 *p = g_bytes_get_data (b, NULL);
  return (guint16) (p[at] << 8 | p[at + 1]);
}

static void
test_dns_allowed_a (void)
{
  g_autoptr(GByteArray) q = dns_query (0xbeef, 0x0100, 1, "Deb.Debian.org.", VIVARIUM_DNS_TYPE_A);
  g_autoptr(GInetAddress) guest = g_inet_address_new_from_string ("10.0.2.100");
  g_auto(VivariumDnsQuery) query = { 0 };
  g_autoptr(GBytes) answer = NULL;
  const guint8 *a;
  gsize len;

  g_assert_true (vivarium_egress_dns_parse (q->data, q->len, &query));
  g_assert_cmpstr (query.name, ==, "Deb.Debian.org");
  g_assert_cmpuint (query.qtype, ==, VIVARIUM_DNS_TYPE_A);
  g_assert_cmpuint (query.question_end, ==, q->len);
  answer = vivarium_egress_dns_answer (q->data, &query, TRUE, guest);
  a = g_bytes_get_data (answer, &len);
  g_assert_cmpuint (len, ==, q->len + 16);
  g_assert_cmpuint (get16 (answer, 0), ==, 0xbeef);
  g_assert_cmpuint (get16 (answer, 2) & 0x8000, ==, 0x8000);       /* a response */
  g_assert_cmpuint (get16 (answer, 2) & 0x000f, ==, 0);            /* NOERROR */
  g_assert_cmpuint (get16 (answer, 2) & 0x0100, ==, 0x0100);       /* RD echoed */
  g_assert_cmpuint (get16 (answer, 6), ==, 1);                     /* one answer */
  g_assert_cmpmem (a + 12, q->len - 12, q->data + 12, q->len - 12); /* the question echoed */
  g_assert_cmpuint (get16 (answer, q->len), ==, 0xc00c);           /* its name: the question's */
  g_assert_cmpuint (get16 (answer, q->len + 2), ==, VIVARIUM_DNS_TYPE_A);
  g_assert_cmpuint (get16 (answer, q->len + 6), ==, 0);
  g_assert_cmpuint (get16 (answer, q->len + 8), ==, VIVARIUM_DNS_TTL);
  g_assert_cmpuint (get16 (answer, q->len + 10), ==, 4);
  g_assert_cmpmem (a + q->len + 12, 4, g_inet_address_to_bytes (guest), 4);
}

static void
test_dns_other_type_and_refused (void)
{
  g_autoptr(GByteArray) q = dns_query (7, 0x0100, 1, "deb.debian.org", 28 /* AAAA */);
  g_autoptr(GInetAddress) guest = g_inet_address_new_from_string ("10.0.2.100");
  g_auto(VivariumDnsQuery) query = { 0 };
  g_autoptr(GBytes) aaaa = NULL;
  g_autoptr(GBytes) refused = NULL;

  g_assert_true (vivarium_egress_dns_parse (q->data, q->len, &query));
  aaaa = vivarium_egress_dns_answer (q->data, &query, TRUE, guest);
  g_assert_cmpuint (g_bytes_get_size (aaaa), ==, q->len);
  g_assert_cmpuint (get16 (aaaa, 2) & 0x000f, ==, 0);
  g_assert_cmpuint (get16 (aaaa, 6), ==, 0);
  refused = vivarium_egress_dns_answer (q->data, &query, FALSE, guest);
  g_assert_cmpuint (get16 (refused, 2) & 0x000f, ==, 5);
  g_assert_cmpuint (get16 (refused, 6), ==, 0);
  g_assert_cmpuint (get16 (refused, 0), ==, 7);
}

/* A name with bytes no host name has parses (it gets REFUSED), nameless. */
static void
test_dns_odd_name (void)
{
  g_autoptr(GByteArray) q = dns_query (1, 0, 1, "a b.example", VIVARIUM_DNS_TYPE_A);
  g_auto(VivariumDnsQuery) query = { 0 };

  g_assert_true (vivarium_egress_dns_parse (q->data, q->len, &query));
  g_assert_null (query.name);
}

static gboolean
parses (const guint8 *msg, gsize len)
{
  g_auto(VivariumDnsQuery) query = { 0 };
  return vivarium_egress_dns_parse (msg, len, &query);
}

static void
test_dns_malformed (void)
{
  g_autoptr(GByteArray) ok = dns_query (1, 0, 1, "example.org", VIVARIUM_DNS_TYPE_A);
  g_autoptr(GByteArray) response = dns_query (1, 0x8000, 1, "example.org", VIVARIUM_DNS_TYPE_A);
  g_autoptr(GByteArray) two = dns_query (1, 0, 2, "example.org", VIVARIUM_DNS_TYPE_A);
  g_autoptr(GByteArray) notify = dns_query (1, 4 << 11, 1, "example.org", VIVARIUM_DNS_TYPE_A);
  g_autofree gchar *label64 = g_strnfill (64, 'a');
  g_autofree gchar *long_label = g_strconcat (label64, ".example", NULL);
  g_autoptr(GByteArray) too_long_label = dns_query (1, 0, 1, long_label, VIVARIUM_DNS_TYPE_A);
  g_autoptr(GString) long_name = g_string_new (NULL);
  g_autoptr(GByteArray) too_long_name = NULL;
  g_autofree guint8 *big = g_malloc0 (VIVARIUM_DNS_MAX_QUERY + 1);

  for (guint i = 0; i < 5; i++)
    g_string_append (long_name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");   /* 5 × 51 = 255 */
  too_long_name = dns_query (1, 0, 1, long_name->str, VIVARIUM_DNS_TYPE_A);

  g_assert_true (parses (ok->data, ok->len));
  g_assert_false (parses (ok->data, 11));                 /* short header */
  g_assert_false (parses (ok->data, ok->len - 1));        /* the class cut */
  for (gsize len = 12; len < ok->len; len++)
    g_assert_false (parses (ok->data, len));              /* every truncation */
  g_assert_false (parses (response->data, response->len));
  g_assert_false (parses (two->data, two->len));
  g_assert_false (parses (notify->data, notify->len));
  g_assert_false (parses (too_long_label->data, too_long_label->len));
  g_assert_false (parses (too_long_name->data, too_long_name->len));
  memcpy (big, ok->data, ok->len);
  g_assert_false (parses (big, VIVARIUM_DNS_MAX_QUERY + 1));
}

/* Compression pointers: at itself, forward, in a loop, a chain: the
 * question has nothing before it to point to, so every pointer is refused,
 * and none makes the parser loop. */
static void
test_dns_pointers (void)
{
  const guint8 header[12] = { 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
  const guint8 self[] = { 0xc0, 12, 0, 1, 0, 1 };
  const guint8 forward[] = { 0xc0, 14, 1, 'a', 0, 0, 1, 0, 1 };
  const guint8 loop[] = { 1, 'a', 0xc0, 12, 0, 1, 0, 1 };
  const guint8 into_header[] = { 1, 'a', 0xc0, 2, 0, 1, 0, 1 };
  const guint8 reserved[] = { 0x80, 1, 'a', 0, 0, 1, 0, 1 };
  struct { const guint8 *q; gsize len; } cases[] = {
    { self, sizeof self }, { forward, sizeof forward }, { loop, sizeof loop },
    { into_header, sizeof into_header }, { reserved, sizeof reserved },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GByteArray) msg = g_byte_array_new ();
    g_byte_array_append (msg, header, 12);
    g_byte_array_append (msg, cases[i].q, cases[i].len);
    g_test_message ("case %zu", i);
    g_assert_false (parses (msg->data, msg->len));
  }
}

/* --- request heads ---------------------------------------------------------------- */

static VivariumEgressRequest *
parse_head (const gchar *head, VivariumEgressHttpMode mode, gchar **reason)
{
  g_assert_cmpuint (vivarium_egress_http_head_end ((const guint8 *) head, strlen (head)), ==, strlen (head));
  return vivarium_egress_http_parse (head, strlen (head), mode, reason);
}

static void
test_http_connect (void)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(VivariumEgressRequest) r = parse_head ("CONNECT deb.debian.org:443 HTTP/1.1\r\nHost: x\r\n\r\n",
                                                   VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);
  g_autoptr(VivariumEgressRequest) v6 = parse_head ("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n",
                                                    VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);
  g_autoptr(VivariumEgressRequest) no_port = parse_head ("CONNECT deb.debian.org HTTP/1.1\r\n\r\n",
                                                         VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);

  g_assert_true (r->connect);
  g_assert_cmpstr (r->host, ==, "deb.debian.org");
  g_assert_cmpuint (r->port, ==, 443);
  g_assert_null (r->head);
  g_assert_cmpstr (v6->host, ==, "2001:db8::1");
  g_assert_cmpuint (v6->port, ==, 8443);
  g_assert_null (no_port);
  g_assert_cmpstr (reason, ==, "CONNECT needs host:port");
}

static void
test_http_absolute (void)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(VivariumEgressRequest) r =
    parse_head ("GET http://Deb.Debian.org:8080/debian/dists?x=1 HTTP/1.1\r\nHost: evil.example\r\n"
                "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
                "Accept: */*\r\n\r\n", VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);
  const gchar *head;

  g_assert_nonnull (r);
  g_assert_false (r->connect);
  g_assert_cmpstr (r->host, ==, "Deb.Debian.org");
  g_assert_cmpuint (r->port, ==, 8080);
  head = g_bytes_get_data (r->head, NULL);
  g_assert_true (g_str_has_prefix (head, "GET /debian/dists?x=1 HTTP/1.1\r\nHost: Deb.Debian.org:8080\r\n"));
  g_assert_null (strstr (head, "Proxy-"));
  g_assert_null (strstr (head, "evil.example"));
  g_assert_null (strstr (head, "keep-alive"));
  g_assert_nonnull (strstr (head, "Accept: */*\r\n"));
  g_assert_true (g_str_has_suffix (head, "Connection: close\r\n\r\n"));
}

/* Host: as the client would write it: the default port left out, any
 * other kept; a refused request still names the destination it asked for,
 * for the log. */
static void
test_http_host_and_named (void)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(VivariumEgressRequest) plain = parse_head ("GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
                                                       VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);
  const gchar *refused = "GET https://Allowed.Test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  g_autofree gchar *host = NULL;
  guint16 port = 0;

  g_assert_nonnull (plain);
  g_assert_true (g_str_has_prefix (g_bytes_get_data (plain->head, NULL), "GET /x HTTP/1.1\r\nHost: allowed.test\r\n"));
  g_assert_null (parse_head (refused, VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason));
  g_assert_true (vivarium_egress_http_named_destination (refused, strlen (refused), &host, &port));
  g_assert_cmpstr (host, ==, "Allowed.Test");
  g_assert_cmpuint (port, ==, 443);
  g_clear_pointer (&host, g_free);
  {
    const gchar *connect = "CONNECT a.test:8443 HTTP/1.1\r\n\r\n";
    g_assert_true (vivarium_egress_http_named_destination (connect, strlen (connect), &host, &port));
  }
  g_assert_cmpstr (host, ==, "a.test");
  g_assert_cmpuint (port, ==, 8443);
  g_clear_pointer (&host, g_free);
  g_assert_false (vivarium_egress_http_named_destination ("not http\r\n\r\n", strlen ("not http\r\n\r\n"), &host, &port));
}

static void
test_http_transparent (void)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(VivariumEgressRequest) r = parse_head ("GET /x HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n",
                                                   VIVARIUM_EGRESS_HTTP_TRANSPARENT, &reason);
  g_autoptr(VivariumEgressRequest) explicit = parse_head ("GET /x HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n",
                                                          VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);

  g_assert_cmpstr (r->host, ==, "deb.debian.org");
  g_assert_cmpuint (r->port, ==, 80);
  g_assert_true (g_str_has_prefix (g_bytes_get_data (r->head, NULL), "GET /x HTTP/1.1\r\nHost: deb.debian.org\r\n"));
  g_assert_null (explicit);
  g_assert_nonnull (strstr (reason, "CONNECT"));
}

static void
test_http_refused (void)
{
  const gchar *heads[] = {
    "GET https://deb.debian.org/ HTTP/1.1\r\n\r\n",
    "GET http://user:pw@deb.debian.org/ HTTP/1.1\r\n\r\n",
    "GARBAGE\r\n\r\n",
    "GET http://deb.debian.org/ HTTP/2.0\r\n\r\n",
    "CONNECT deb.debian.org:0 HTTP/1.1\r\n\r\n",
    "CONNECT deb.debian.org:99999 HTTP/1.1\r\n\r\n",
    "CONNECT 2001:db8::1:443 HTTP/1.1\r\n\r\n",
    "CONNECT :443 HTTP/1.1\r\n\r\n",
  };
  g_autoptr(GString) huge = g_string_new ("GET http://deb.debian.org/ HTTP/1.1\r\n");

  for (gsize i = 0; i < G_N_ELEMENTS (heads); i++) {
    g_autofree gchar *reason = NULL;
    g_test_message ("head %zu", i);
    g_assert_null (vivarium_egress_http_parse (heads[i], strlen (heads[i]), VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason));
    g_assert_nonnull (reason);
  }
  while (huge->len <= VIVARIUM_EGRESS_MAX_HEAD)
    g_string_append (huge, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
  g_string_append (huge, "\r\n");
  {
    g_autofree gchar *reason = NULL;
    g_assert_null (vivarium_egress_http_parse (huge->str, huge->len, VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason));
    g_assert_nonnull (strstr (reason, "larger"));
  }
}

/* Found by tests/fuzz/fuzz-egress-request: libsoup takes everything up to
 * the first space as the method, line breaks included, and reads its
 * headers from after the first line break; the head sent upstream then
 * carried the guest's line breaks, read by the server as other lines than
 * the proxy read. A method is a token and a target visible ASCII, or the
 * head is refused. */
static void
test_http_request_line_breaks (void)
{
  const gchar *heads[] = {
    "G\r\n'\nET http://p080/ HTTP/1.0\r\nA\n\r\n\r\n",
    "GET\r\nHost: evil.example\r\nX: http://deb.debian.org/ HTTP/1.1\r\n\r\n",
    "GET\nX: http://deb.debian.org/ HTTP/1.1\r\n\r\n",
    "G(T http://deb.debian.org/ HTTP/1.1\r\n\r\n",
    "GET\thttp://deb.debian.org/\x7f HTTP/1.1\r\n\r\n",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (heads); i++) {
    g_autofree gchar *reason = NULL;
    g_autoptr(VivariumEgressRequest) r = NULL;
    g_test_message ("head %zu", i);
    r = vivarium_egress_http_parse (heads[i], strlen (heads[i]), VIVARIUM_EGRESS_HTTP_EXPLICIT, &reason);
    g_assert_null (r);
    g_assert_cmpstr (reason, ==, "the request head is not valid HTTP/1.x");
  }
}

/* --- placeholders ---------------------------------------------------------------- */

static VivariumSecret *
secret_of (const gchar *name, const gchar *placeholder)
{
  VivariumSecret *secret = g_new0 (VivariumSecret, 1);
  const gchar *hosts[] = { "api.example.org", NULL };

  secret->name = g_strdup (name);
  secret->hosts = g_strdupv ((GStrv) hosts);
  secret->header = g_strdup ("Authorization");
  secret->format = g_strdup ("Bearer {}");
  secret->placeholder = g_strdup (placeholder);
  secret->value = g_bytes_new_static ("v", 1);
  return secret;
}

static GPtrArray *
two_secrets (void)
{
  GPtrArray *secrets = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);

  g_ptr_array_add (secrets, secret_of ("A", "vivarium-secret-0123456789abcdef0123456789abcdef"));
  g_ptr_array_add (secrets, secret_of ("B", "vivarium-secret-fedcba9876543210fedcba9876543210"));
  return secrets;
}

static const gchar *
found_in (VivariumPlaceholders *set, const gchar *text)
{
  const VivariumSecret *secret = vivarium_placeholders_find (set, (const guint8 *) text, strlen (text));

  return secret != NULL ? secret->name : NULL;
}

static gchar *
percent_all (const gchar *text)
{
  GString *out = g_string_new (NULL);

  for (const gchar *p = text; *p != '\0'; p++)
    g_string_append_printf (out, "%%%02X", (guchar) *p);
  return g_string_free (out, FALSE);
}

static gchar *
json_all (const gchar *text)
{
  GString *out = g_string_new (NULL);

  for (const gchar *p = text; *p != '\0'; p++)
    g_string_append_printf (out, "\\u%04x", (guchar) *p);
  return g_string_free (out, FALSE);
}

static void
test_placeholder_forms (void)
{
  g_autoptr(GPtrArray) secrets = two_secrets ();
  g_autoptr(VivariumPlaceholders) set = vivarium_placeholders_new (secrets);
  const gchar *a = ((VivariumSecret *) secrets->pdata[0])->placeholder;
  const gchar *b = ((VivariumSecret *) secrets->pdata[1])->placeholder;
  g_autofree gchar *upper = g_ascii_strup (a, -1);
  g_autofree gchar *raw = g_strdup_printf ("{\"token\":\"%s\"}", b);
  g_autofree gchar *pct = percent_all (a);
  g_autofree gchar *pct2 = NULL;
  g_autofree gchar *json = json_all (b);
  g_autofree gchar *partial = g_strndup (a, strlen (a) - 1);
  g_autofree gchar *other = g_strdup ("vivarium-secret-00000000000000000000000000000000");

  g_assert_cmpstr (found_in (set, raw), ==, "B");
  g_assert_cmpstr (found_in (set, upper), ==, "A");
  g_assert_cmpstr (found_in (set, pct), ==, "A");
  /* Encoded twice: "%25" is '%'. */
  {
    g_autoptr(GString) twice = g_string_new (NULL);
    for (const gchar *p = pct; *p != '\0'; p++)
      *p == '%' ? g_string_append (twice, "%25") : g_string_append_c (twice, *p);
    pct2 = g_strdup (twice->str);
  }
  g_assert_cmpstr (found_in (set, pct2), ==, "A");
  g_assert_cmpstr (found_in (set, json), ==, "B");
  /* base64 and base64url, each at the three alignments, inside other text. */
  for (guint align = 0; align < 3; align++) {
    g_autofree gchar *plain = g_strdup_printf ("%.*s%s:x", align, "uv", a);
    g_autofree gchar *encoded = g_base64_encode ((const guchar *) plain, strlen (plain));
    g_autofree gchar *text = g_strdup_printf ("Basic %s and more", encoded);
    g_assert_cmpstr (found_in (set, text), ==, "A");
    g_strdelimit (text, "+", '-');
    g_strdelimit (text, "/", '_');
    g_strdelimit (text, "=", '.');
    g_assert_cmpstr (found_in (set, text), ==, "A");
  }
  /* At the very end of the text, padded or not. */
  for (guint align = 0; align < 3; align++) {
    g_autofree gchar *plain = g_strdup_printf ("%.*s%s", align, "uv", a);
    g_autofree gchar *encoded = g_base64_encode ((const guchar *) plain, strlen (plain));
    g_assert_cmpstr (found_in (set, encoded), ==, "A");
    *strchrnul (encoded, '=') = '\0';
    g_assert_cmpstr (found_in (set, encoded), ==, "A");
  }
  /* Benign: a cut placeholder, a placeholder of no secret, plain text. */
  g_assert_null (found_in (set, partial));
  g_assert_null (found_in (set, other));
  g_assert_null (found_in (set, "GET /index.html HTTP/1.1 %41%42 \\u0041"));
  g_assert_null (vivarium_placeholders_find (set, (const guint8 *) "", 0));
}

/* Split across reads at every place, fed in two and in one-byte chunks:
 * the scan finds it when its last byte comes, never before, with only the
 * overlap in memory. */
static void
test_placeholder_stream (void)
{
  g_autoptr(GPtrArray) secrets = two_secrets ();
  g_autoptr(VivariumPlaceholders) set = vivarium_placeholders_new (secrets);
  const gchar *b = ((VivariumSecret *) secrets->pdata[1])->placeholder;
  g_autofree gchar *json = json_all (b);
  g_autofree gchar *filler = g_strnfill (100000, 'x');
  g_autofree gchar *text = g_strdup_printf ("%s%s%s", filler, json, filler);
  gsize len = strlen (text), at = strlen (filler), end = at + strlen (json);

  for (gsize cut = at - 3; cut <= end + 3; cut += 7) {
    VivariumPlaceholderScan scan;
    const VivariumSecret *first, *second;
    vivarium_placeholder_scan_init (&scan, set);
    first = vivarium_placeholder_scan_feed (&scan, (const guint8 *) text, cut);
    second = vivarium_placeholder_scan_feed (&scan, (const guint8 *) text + cut, len - cut);
    g_assert_true (cut >= end ? first != NULL : first == NULL);
    if (cut < end)
      g_assert_nonnull (second);
    g_assert_cmpuint (scan.tail_len, <=, VIVARIUM_PLACEHOLDER_OVERLAP);
  }
  {
    VivariumPlaceholderScan scan;
    gsize found_at = 0;
    vivarium_placeholder_scan_init (&scan, set);
    for (gsize i = at - 10; i < len && found_at == 0; i++)
      if (vivarium_placeholder_scan_feed (&scan, (const guint8 *) text + i, 1) != NULL)
        found_at = i + 1;
    g_assert_cmpuint (found_at, ==, end);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/egress/sni/real-hello", test_sni_real);
  g_test_add_func ("/egress/sni/truncated", test_sni_truncated);
  g_test_add_func ("/egress/sni/built", test_sni_built);
  g_test_add_func ("/egress/sni/length-lies", test_sni_lies);
  g_test_add_func ("/egress/sni/oversized", test_sni_oversized);
  g_test_add_func ("/egress/sni/not-tls", test_sni_not_tls);
  g_test_add_func ("/egress/dns/allowed-a", test_dns_allowed_a);
  g_test_add_func ("/egress/dns/other-type-and-refused", test_dns_other_type_and_refused);
  g_test_add_func ("/egress/dns/odd-name", test_dns_odd_name);
  g_test_add_func ("/egress/dns/malformed", test_dns_malformed);
  g_test_add_func ("/egress/dns/pointers", test_dns_pointers);
  g_test_add_func ("/egress/http/connect", test_http_connect);
  g_test_add_func ("/egress/http/absolute", test_http_absolute);
  g_test_add_func ("/egress/http/transparent", test_http_transparent);
  g_test_add_func ("/egress/http/host-and-named", test_http_host_and_named);
  g_test_add_func ("/egress/http/refused", test_http_refused);
  g_test_add_func ("/egress/http/request-line-breaks", test_http_request_line_breaks);
  g_test_add_func ("/egress/placeholder/forms", test_placeholder_forms);
  g_test_add_func ("/egress/placeholder/stream", test_placeholder_stream);
  return g_test_run ();
}
