/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <string.h>
#include <libsoup/soup.h>

#include "vivarium-egress-http.h"
#include "vivarium-egress-intercept.h"
#include "vivarium-egress-prefix-stream.h"
#include "vivarium-egress-splice.h"

/* Room for a whole request head and what came after it in the same read. */
#define READ_BUF (VIVARIUM_EGRESS_MAX_HEAD + 64 * 1024)
#define PUMP_BUF (64 * 1024)
/* A header's name in a reason is the guest's text: cut to this. */
#define HEADER_NAME_SHOWN 64
/* What the guest is told it speaks inside. */
static const gchar *const http11[] = { "http/1.1", NULL };

typedef enum {
  BODY_NONE,
  BODY_LENGTH,
  BODY_CHUNKED,
  BODY_REST,      /* after an Upgrade: whatever comes, until the end */
} BodyKind;

typedef struct {
  VivariumEgressContext   *ctx;
  const gchar             *host;
  GSocketConnection       *guest_socket;   /* kept: its end would close the socket */
  GIOStream               *guest;          /* the TLS server connection */
  GIOStream               *up;             /* the TLS client connection */
  GCancellable            *cancel;         /* either way ending ends both */
  VivariumInterceptResult *result;
  gboolean                 answer_403;     /* the reason goes back as HTTP */
  gchar                   *down_reason;    /* the pump's cut, read after join */
  guint64                  bytes_down;
  VivariumPlaceholderScan  scan;
  /* The head waits (with the values in it) until the first body byte
   * goes on or the body has ended, and the body's bytes wait, scanned:
   * up to VIVARIUM_INTERCEPT_HOLD_BODY of them while the head waits, so a
   * small body's refused request reaches no server at all; then the last
   * VIVARIUM_PLACEHOLDER_OVERLAP, so a placeholder whose first bytes came
   * in one read is found in the next before any of it has gone on. */
  GString                 *head;           /* NULL once sent */
  GByteArray              *held;
  gboolean                 hold;           /* not for an Upgrade's stream: it would stall */
  gboolean                 rechunk;        /* body bytes go up as chunks of our own */
  GPtrArray               *swapped;        /* names, borrowed */
  guint8                   buf[READ_BUF];
  gsize                    start, end;
} Intercept;

void
vivarium_intercept_result_clear (VivariumInterceptResult *result)
{
  g_clear_pointer (&result->summary, g_free);
  g_clear_pointer (&result->reason, g_free);
}

gboolean
vivarium_egress_intercepts (VivariumEgressContext *ctx, const gchar *host, guint16 port)
{
  g_autoptr(GMutexLocker) locker = NULL;
  gboolean any = FALSE;

  if (ctx->secrets == NULL || port != 443 || host == NULL)
    return FALSE;
  for (guint i = 0; i < ctx->secrets->len && !any; i++)
    any = vivarium_secret_applies_to (ctx->secrets->pdata[i], host);
  if (!any)
    return FALSE;
  locker = g_mutex_locker_new (&ctx->policy_lock);
  return vivarium_egress_policy_may_intercept (ctx->policy, host, port);
}

/* --- the two handshakes ------------------------------------------------------------ */

static gboolean
record_errors (GTlsConnection *conn, GTlsCertificate *peer, GTlsCertificateFlags errors, gpointer data)
{
  *(GTlsCertificateFlags *) data = errors;
  return FALSE;
}

static gchar *
describe_errors (GTlsCertificateFlags errors, const gchar *host)
{
  g_autoptr(GPtrArray) why = g_ptr_array_new_with_free_func (g_free);
  g_autofree gchar *joined = NULL;

  if (errors & G_TLS_CERTIFICATE_UNKNOWN_CA)
    g_ptr_array_add (why, g_strdup ("it is not signed by an authority the proxy trusts"));
  if (errors & G_TLS_CERTIFICATE_BAD_IDENTITY)
    g_ptr_array_add (why, g_strdup_printf ("it is not for %s", host));
  if (errors & G_TLS_CERTIFICATE_NOT_ACTIVATED)
    g_ptr_array_add (why, g_strdup ("it is not valid yet"));
  if (errors & G_TLS_CERTIFICATE_EXPIRED)
    g_ptr_array_add (why, g_strdup ("it has expired"));
  if (errors & G_TLS_CERTIFICATE_REVOKED)
    g_ptr_array_add (why, g_strdup ("it is revoked"));
  if (errors & G_TLS_CERTIFICATE_INSECURE)
    g_ptr_array_add (why, g_strdup ("its algorithm is insecure"));
  if (why->len == 0)
    g_ptr_array_add (why, g_strdup ("it could not be verified"));
  g_ptr_array_add (why, NULL);
  joined = g_strjoinv (", ", (gchar **) why->pdata);
  return g_strdup_printf ("the certificate of %s is not trusted: %s", host, joined);
}

/* The host's own certificate first: a guest never gets an answer from a
 * server the proxy would not trust. */
static GIOStream *
open_upstream_tls (VivariumEgressContext *ctx, const gchar *host, GSocketConnection *upstream, gchar **reason)
{
  g_autoptr(GSocketConnectable) identity = g_network_address_new (host, 443);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) tls = g_tls_client_connection_new (G_IO_STREAM (upstream), identity, &error);
  GTlsCertificateFlags errors = 0;

  if (tls == NULL) {
    *reason = g_strdup_printf ("cannot start TLS to %s: %s", host, error->message);
    return NULL;
  }
  g_tls_connection_set_database (G_TLS_CONNECTION (tls), ctx->upstream_ca);
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (tls), http11);
  g_signal_connect (tls, "accept-certificate", G_CALLBACK (record_errors), &errors);
  if (!g_tls_connection_handshake (G_TLS_CONNECTION (tls), NULL, &error)) {
    if (errors != 0 || g_error_matches (error, G_TLS_ERROR, G_TLS_ERROR_BAD_CERTIFICATE))
      *reason = describe_errors (errors, host);
    else
      *reason = g_strdup_printf ("the TLS handshake with %s failed: %s", host, error->message);
    g_signal_handlers_disconnect_by_data (tls, &errors);
    return NULL;
  }
  g_signal_handlers_disconnect_by_data (tls, &errors);
  return g_steal_pointer (&tls);
}

static GIOStream *
answer_guest (Intercept *ic, GSocket *client, GBytes *hello, gchar **reason)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GTlsCertificate) cert = vivarium_egress_ca_certificate_for (ic->ctx->ca, ic->host, &error);
  g_autoptr(GInputStream) in = NULL;
  g_autoptr(GIOStream) base = NULL;
  g_autoptr(GIOStream) tls = NULL;

  if (cert == NULL) {
    *reason = g_strdup_printf ("cannot mint a certificate for %s: %s", ic->host, error->message);
    return NULL;
  }
  ic->guest_socket = g_socket_connection_factory_create_connection (client);
  in = vivarium_egress_prefix_stream_new (hello, g_io_stream_get_input_stream (G_IO_STREAM (ic->guest_socket)));
  base = g_simple_io_stream_new (in, g_io_stream_get_output_stream (G_IO_STREAM (ic->guest_socket)));
  tls = g_tls_server_connection_new (base, cert, &error);
  if (tls == NULL) {
    *reason = g_strdup_printf ("cannot answer TLS for %s: %s", ic->host, error->message);
    return NULL;
  }
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (tls), http11);
  if (!g_tls_connection_handshake (G_TLS_CONNECTION (tls), NULL, &error)) {
    *reason = g_strdup_printf ("the guest's TLS handshake for %s failed: %s", ic->host, error->message);
    return NULL;
  }
  return g_steal_pointer (&tls);
}

/* --- down: the server's bytes, untouched ------------------------------------------- */

static gpointer
pump (gpointer data)
{
  Intercept *ic = data;
  g_autofree guint8 *buf = g_malloc (PUMP_BUF);
  GInputStream *in = g_io_stream_get_input_stream (ic->up);
  GOutputStream *out = g_io_stream_get_output_stream (ic->guest);

  for (;;) {
    gssize n = g_input_stream_read (in, buf, PUMP_BUF, ic->cancel, NULL);
    if (n <= 0)
      break;
    if (!vivarium_egress_budget_charge (ic->ctx->budget, 0, (guint64) n, &ic->down_reason))
      break;
    ic->bytes_down += (guint64) n;
    if (!g_output_stream_write_all (out, buf, (gsize) n, NULL, ic->cancel, NULL))
      break;
  }
  g_cancellable_cancel (ic->cancel);
  return NULL;
}

/* --- up: requests, one after another ------------------------------------------------ */

static gboolean
refuse (Intercept *ic, gchar *reason)
{
  g_free (ic->result->reason);
  ic->result->reason = reason;
  ic->answer_403 = TRUE;
  return FALSE;
}

/* Reads more of the guest's bytes behind what is held; 0 at the end. */
static gssize
fill (Intercept *ic)
{
  gssize n;

  if (ic->start > 0) {
    memmove (ic->buf, ic->buf + ic->start, ic->end - ic->start);
    ic->end -= ic->start;
    ic->start = 0;
  }
  if (ic->end == sizeof ic->buf)
    return -1;
  n = g_input_stream_read (g_io_stream_get_input_stream (ic->guest), ic->buf + ic->end, sizeof ic->buf - ic->end,
                           ic->cancel, NULL);
  if (n > 0)
    ic->end += (gsize) n;
  return n;
}

/* Counted, then sent; FALSE (reason set when it was the budget) ends it. */
static gboolean
send_up (Intercept *ic, const guint8 *data, gsize len)
{
  if (len == 0)
    return TRUE;
  if (!vivarium_egress_budget_charge (ic->ctx->budget, len, 0, &ic->result->reason))
    return FALSE;
  ic->result->bytes_up += len;
  return g_output_stream_write_all (g_io_stream_get_output_stream (ic->up), data, len, NULL, ic->cancel, NULL);
}

/* The request's head, once: it held the values, so it is wiped. */
static gboolean
send_head (Intercept *ic)
{
  gboolean sent;

  if (ic->head == NULL)
    return TRUE;
  sent = send_up (ic, (const guint8 *) ic->head->str, ic->head->len);
  memset (ic->head->str, 0, ic->head->len);
  g_string_free (g_steal_pointer (&ic->head), TRUE);
  return sent;
}

/* Body bytes as upstream gets them, after the head: as they are, or in a
 * chunk of their own when the guest's chunked body is being re-framed. */
static gboolean
send_piece (Intercept *ic, const guint8 *data, gsize len)
{
  g_autofree gchar *size = NULL;

  if (!send_head (ic))
    return FALSE;
  if (len == 0 || !ic->rechunk)
    return send_up (ic, data, len);
  size = g_strdup_printf ("%zx\r\n", len);
  return send_up (ic, (const guint8 *) size, strlen (size)) && send_up (ic, data, len) &&
         send_up (ic, (const guint8 *) "\r\n", 2);
}

/* Body bytes: scanned (with the overlap), then held as the Intercept's
 * comment says; what passes the hold goes on. */
static gboolean
send_body (Intercept *ic, const guint8 *data, gsize len)
{
  const VivariumSecret *secret = vivarium_placeholder_scan_feed (&ic->scan, data, len);
  gsize limit = ic->head != NULL ? VIVARIUM_INTERCEPT_HOLD_BODY : VIVARIUM_PLACEHOLDER_OVERLAP;
  gsize out;
  gboolean sent;

  if (secret != NULL)
    return refuse (ic, vivarium_placeholder_reason (secret, ic->host, 443, "body"));
  if (!ic->hold)
    return send_piece (ic, data, len);
  g_byte_array_append (ic->held, data, (guint) len);
  if (ic->held->len <= limit)
    return TRUE;
  out = ic->held->len - VIVARIUM_PLACEHOLDER_OVERLAP;
  sent = send_piece (ic, ic->held->data, out);
  g_byte_array_remove_range (ic->held, 0, (guint) out);
  return sent;
}

/* The end of the body: the head, if it still waits, and what was held. */
static gboolean
flush_body (Intercept *ic)
{
  gboolean sent = send_piece (ic, ic->held->data, ic->held->len);

  g_byte_array_set_size (ic->held, 0);
  return sent;
}

static gboolean
forward_length (Intercept *ic, guint64 left)
{
  while (left > 0) {
    gsize n;
    if (ic->start == ic->end && fill (ic) <= 0)
      return FALSE;
    n = (gsize) MIN ((guint64) (ic->end - ic->start), left);
    if (!send_body (ic, ic->buf + ic->start, n))
      return FALSE;
    ic->start += n;
    left -= n;
  }
  return TRUE;
}

/* One CRLF-ended line (a chunk size, a trailer), held in buf; its length
 * with the CRLF. */
static gsize
take_line (Intercept *ic)
{
  for (;;) {
    const guint8 *lf = memmem (ic->buf + ic->start, ic->end - ic->start, "\r\n", 2);
    if (lf != NULL)
      return (gsize) (lf - (ic->buf + ic->start)) + 2;
    if (ic->end - ic->start > VIVARIUM_INTERCEPT_MAX_LINE) {
      refuse (ic, g_strdup_printf ("a line of the chunked body is longer than %u bytes", VIVARIUM_INTERCEPT_MAX_LINE));
      return 0;
    }
    if (fill (ic) <= 0)
      return 0;
  }
}

/* A chunk-size line or a trailer: its text may not hide a placeholder
 * either; it is sent as it came. */
static gboolean
send_line (Intercept *ic, gsize len)
{
  const VivariumSecret *secret = vivarium_placeholders_find (ic->ctx->placeholders, ic->buf + ic->start, len);
  gboolean ok;

  if (secret != NULL)
    return refuse (ic, vivarium_placeholder_reason (secret, ic->host, 443, "body"));
  ok = send_up (ic, ic->buf + ic->start, len);
  ic->start += len;
  return ok;
}

/* 1*HEXDIG, then at most spaces and an extension: nothing a server could
 * read as another size ("0x5", "+5", " 5") than the proxy does. */
static gboolean
chunk_size (const guint8 *line, gsize len, guint64 *size)
{
  gsize i = 0;

  *size = 0;
  for (; i < len - 2 && g_ascii_isxdigit (line[i]); i++) {
    if (i >= 15)
      return FALSE;
    *size = *size << 4 | (guint64) g_ascii_xdigit_value (line[i]);
  }
  if (i == 0)
    return FALSE;
  while (i < len - 2 && (line[i] == ' ' || line[i] == '\t'))
    i++;
  return i == len - 2 || line[i] == ';';
}

/* A line the guest sent that is not passed on (a chunk's size, the CRLF
 * after its data): consumed. */
static void
skip_line (Intercept *ic, gsize len)
{
  ic->start += len;
}

/* The guest's chunks are read and the data sent in chunks of the proxy's
 * own (what was held back waits across the guest's chunk boundaries);
 * the chunk sizes' extensions are dropped, the trailers scanned and sent
 * as they came. */
static gboolean
forward_chunked (Intercept *ic)
{
  const VivariumSecret *secret;

  ic->rechunk = TRUE;
  for (;;) {
    guint64 size;
    gsize len = take_line (ic);
    if (len == 0)
      return FALSE;
    if (!chunk_size (ic->buf + ic->start, len, &size))
      return refuse (ic, g_strdup ("the chunked body has a chunk size that is not a number"));
    secret = vivarium_placeholders_find (ic->ctx->placeholders, ic->buf + ic->start, len);
    if (secret != NULL)
      return refuse (ic, vivarium_placeholder_reason (secret, ic->host, 443, "body"));
    skip_line (ic, len);
    if (size == 0)
      break;
    if (!forward_length (ic, size))
      return FALSE;
    len = take_line (ic);
    if (len != 2)
      return len == 0 ? FALSE : refuse (ic, g_strdup ("a chunk of the body does not end where its size says"));
    skip_line (ic, len);
  }
  if (!flush_body (ic))
    return FALSE;
  ic->rechunk = FALSE;
  if (!send_up (ic, (const guint8 *) "0\r\n", 3))
    return FALSE;
  /* Trailers, up to the empty line. */
  for (;;) {
    gsize len = take_line (ic);
    if (len == 0 || !send_line (ic, len))
      return FALSE;
    if (len == 2)
      return TRUE;
  }
}

static gboolean
forward_rest (Intercept *ic)
{
  for (;;) {
    gsize n = ic->end - ic->start;
    if (n == 0 && fill (ic) <= 0)
      return FALSE;
    n = ic->end - ic->start;
    if (!send_body (ic, ic->buf + ic->start, n))
      return FALSE;
    ic->start += n;
  }
}

/* --- the head ------------------------------------------------------------------------ */

static gboolean
is_secret_header (const VivariumSecret *secret, Intercept *ic, const gchar *name)
{
  return g_ascii_strcasecmp (secret->header, name) == 0 && vivarium_secret_applies_to (secret, ic->host);
}

/* Each placeholder of secret in *value: the value, in the secret's format
 * (where the guest already wrote the format's text around it, only the
 * value goes in). *seen gets the value with the placeholder blanked, for
 * the scan of what is left. */
static void
swap_in (const VivariumSecret *secret, GString *value, GString *seen)
{
  const gchar *braces = strstr (secret->format, "{}");
  g_autofree gchar *before = g_strndup (secret->format, braces - secret->format);
  const gchar *after = braces + 2;
  gsize len = strlen (secret->placeholder), vlen = 0;
  const gchar *raw = g_bytes_get_data (secret->value, &vlen);
  gchar *rendered = vivarium_secret_render (secret);
  gsize from = 0;

  for (;;) {
    const gchar *at = strstr (value->str + from, secret->placeholder);
    gsize pos;
    gboolean formatted;
    if (at == NULL)
      break;
    pos = (gsize) (at - value->str);
    formatted = pos >= strlen (before) && strncmp (at - strlen (before), before, strlen (before)) == 0 &&
                strncmp (at + len, after, strlen (after)) == 0;
    g_string_erase (value, (gssize) pos, (gssize) len);
    if (formatted)
      g_string_insert_len (value, (gssize) pos, raw, (gssize) vlen);
    else
      g_string_insert (value, (gssize) pos, rendered);
    from = pos + (formatted ? vlen : strlen (rendered));
  }
  for (gchar *at; (at = strstr (seen->str, secret->placeholder)) != NULL;)
    memset (at, ' ', len);
  memset (rendered, 0, strlen (rendered));
  g_free (rendered);
}

static void
note_swapped (Intercept *ic, const VivariumSecret *secret)
{
  for (guint i = 0; i < ic->swapped->len; i++)
    if (g_str_equal (ic->swapped->pdata[i], secret->name))
      return;
  g_ptr_array_add (ic->swapped, secret->name);
}

/* One header line for upstream: its secrets swapped in; refused when a
 * placeholder is left in it that is not one of them. */
static gboolean
add_header (Intercept *ic, GString *out, const gchar *name, const gchar *value)
{
  g_autoptr(GString) v = g_string_new (value);
  g_autoptr(GString) seen = g_string_new (value);
  g_autofree gchar *where = NULL;
  const VivariumSecret *left;

  for (guint i = 0; i < ic->ctx->secrets->len; i++) {
    const VivariumSecret *secret = ic->ctx->secrets->pdata[i];
    if (is_secret_header (secret, ic, name) && strstr (value, secret->placeholder) != NULL) {
      swap_in (secret, v, seen);
      note_swapped (ic, secret);
    }
  }
  left = vivarium_placeholders_find (ic->ctx->placeholders, (const guint8 *) seen->str, seen->len);
  if (left == NULL)
    left = vivarium_placeholders_find (ic->ctx->placeholders, (const guint8 *) name, strlen (name));
  if (left != NULL) {
    where = vivarium_placeholders_find (ic->ctx->placeholders, (const guint8 *) name, strlen (name)) != NULL
                ? g_strdup ("header name") : g_strdup_printf ("header %.*s", HEADER_NAME_SHOWN, name);
    memset (v->str, 0, v->len);
    return refuse (ic, vivarium_placeholder_reason (left, ic->host, 443, where));
  }
  g_string_append_printf (out, "%s: %s\r\n", name, v->str);
  memset (v->str, 0, v->len);
  return TRUE;
}

/* Content-Length or chunked, never both, never another coding: the
 * proxy must know where each request ends to look at the next one. */
static gboolean
framing (Intercept *ic, SoupMessageHeaders *headers, BodyKind *kind, guint64 *length)
{
  const gchar *te = soup_message_headers_get_list (headers, "Transfer-Encoding");
  const gchar *cl = soup_message_headers_get_list (headers, "Content-Length");

  *kind = BODY_NONE;
  *length = 0;
  if (te != NULL && cl != NULL)
    return refuse (ic, g_strdup ("the request has both Transfer-Encoding and Content-Length"));
  if (te != NULL) {
    if (g_ascii_strcasecmp (te, "chunked") != 0)
      return refuse (ic, g_strdup ("the request's Transfer-Encoding is not chunked alone"));
    *kind = BODY_CHUNKED;
  } else if (cl != NULL) {
    if (!g_ascii_string_to_unsigned (cl, 10, 0, G_MAXINT64, length, NULL) || !g_ascii_isdigit (cl[0]))
      return refuse (ic, g_strdup ("the request's Content-Length is not one number"));
    *kind = BODY_LENGTH;
  }
  if (soup_message_headers_get_one (headers, "Upgrade") != NULL && *kind == BODY_NONE)
    *kind = BODY_REST;
  return TRUE;
}

/* The guest may not send a request for another server down a connection
 * made for this one. */
static gboolean
check_host (Intercept *ic, SoupMessageHeaders *headers)
{
  const gchar *host_header = soup_message_headers_get_one (headers, "Host");
  g_autofree gchar *host = NULL;
  g_autofree gchar *normal = NULL;
  guint16 port;

  if (host_header == NULL)
    return TRUE;
  if (vivarium_egress_split_host_port (host_header, 443, &host, &port) &&
      (normal = vivarium_egress_context_normalize (host)) != NULL && g_str_equal (normal, ic->host) && port == 443)
    return TRUE;
  return refuse (ic, g_strdup_printf ("the request's Host header is not %s", ic->host));
}

/* The head as upstream gets it: rebuilt from what libsoup parsed (what
 * was checked is what is sent), the secrets in their headers. */
static GString *
rewrite_head (Intercept *ic, const gchar *head, gsize len, BodyKind *kind, guint64 *length)
{
  g_autoptr(SoupMessageHeaders) headers = soup_message_headers_new (SOUP_MESSAGE_HEADERS_REQUEST);
  g_autofree gchar *method = NULL, *target = NULL, *line = NULL, *why = NULL;
  g_autoptr(GString) out = NULL;
  SoupMessageHeadersIter iter;
  const gchar *name, *value;
  SoupHTTPVersion version;

  if (memchr (head, '\0', len) != NULL ||
      soup_headers_parse_request (head, (int) len, headers, &method, &target, &version) != SOUP_STATUS_OK)
    return (refuse (ic, g_strdup ("the request head is not valid HTTP/1.x")), NULL);
  line = g_strdup_printf ("%s %s", method, target);
  why = vivarium_egress_context_placeholder (ic->ctx, line, strlen (line), ic->host, 443, "URL");
  if (why != NULL)
    return (refuse (ic, g_steal_pointer (&why)), NULL);
  if (g_str_equal (method, "CONNECT"))
    return (refuse (ic, g_strdup ("CONNECT inside an intercepted connection is not proxied")), NULL);
  if (!check_host (ic, headers) || !framing (ic, headers, kind, length))
    return NULL;
  out = g_string_new (NULL);
  g_string_append_printf (out, "%s HTTP/1.%d\r\n", line, version == SOUP_HTTP_1_0 ? 0 : 1);
  soup_message_headers_iter_init (&iter, headers);
  while (soup_message_headers_iter_next (&iter, &name, &value))
    if (!add_header (ic, out, name, value)) {
      memset (out->str, 0, out->len);
      return NULL;
    }
  g_string_append (out, "\r\n");
  return g_steal_pointer (&out);
}

/* FALSE when the connection is over (the guest's end, a refusal, a cut). */
static gboolean
serve_one (Intercept *ic)
{
  const guint8 *end;
  g_autoptr(GString) head = NULL;
  BodyKind kind;
  guint64 length;
  gsize head_len;

  while ((end = memmem (ic->buf + ic->start, ic->end - ic->start, "\r\n\r\n", 4)) == NULL) {
    if (ic->end - ic->start >= VIVARIUM_EGRESS_MAX_HEAD)
      return refuse (ic, g_strdup_printf ("the request head is larger than %u bytes", VIVARIUM_EGRESS_MAX_HEAD));
    if (fill (ic) <= 0)
      return FALSE;
  }
  head_len = (gsize) (end + 4 - (ic->buf + ic->start));
  head = rewrite_head (ic, (const gchar *) ic->buf + ic->start, head_len, &kind, &length);
  if (head == NULL)
    return FALSE;
  ic->start += head_len;
  ic->result->requests++;
  vivarium_placeholder_scan_init (&ic->scan, ic->ctx->placeholders);
  ic->head = g_steal_pointer (&head);
  ic->hold = kind != BODY_REST;
  switch (kind) {
  case BODY_LENGTH:
    return forward_length (ic, length) && flush_body (ic);
  case BODY_CHUNKED:
    return forward_chunked (ic);
  case BODY_REST:
    return send_head (ic) && forward_rest (ic);
  default:
    return send_head (ic);
  }
}

static void
answer_refusal (Intercept *ic)
{
  g_autofree gchar *body = g_strdup_printf ("vivarium egress: %s\n", ic->result->reason);
  g_autofree gchar *answer = g_strdup_printf ("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                              "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                              strlen (body), body);

  g_output_stream_write_all (g_io_stream_get_output_stream (ic->guest), answer, strlen (answer), NULL, NULL, NULL);
}

static gchar *
summarize (Intercept *ic)
{
  g_autofree gchar *names = NULL;

  if (ic->swapped->len == 0)
    return g_strdup_printf ("TLS intercepted: %u requests, no secret swapped in", ic->result->requests);
  g_ptr_array_add (ic->swapped, NULL);
  names = g_strjoinv (", ", (gchar **) ic->swapped->pdata);
  return g_strdup_printf ("TLS intercepted: %u requests, secrets swapped in: %s", ic->result->requests, names);
}

static void
run (Intercept *ic)
{
  GThread *down;

  g_socket_set_timeout (g_socket_connection_get_socket (ic->guest_socket), VIVARIUM_SPLICE_IDLE_SEC);
  down = g_thread_new ("egress-down", pump, ic);
  while (serve_one (ic))
    ;
  g_cancellable_cancel (ic->cancel);
  g_thread_join (down);
  if (ic->result->reason == NULL && ic->down_reason != NULL)
    ic->result->reason = g_steal_pointer (&ic->down_reason);
  /* The way down is stopped: the 403 cannot be cut into a response. */
  if (ic->answer_403)
    answer_refusal (ic);
}

gboolean
vivarium_egress_intercept (VivariumEgressContext *ctx, GSocket *client, GBytes *hello, const gchar *host,
                           GSocketConnection *upstream, VivariumInterceptResult *result)
{
  g_autofree Intercept *ic = g_new0 (Intercept, 1);

  ic->ctx = ctx;
  ic->host = host;
  ic->result = result;
  ic->up = open_upstream_tls (ctx, host, upstream, &result->reason);
  if (ic->up != NULL)
    ic->guest = answer_guest (ic, client, hello, &result->reason);
  if (ic->guest != NULL) {
    g_socket_set_timeout (g_socket_connection_get_socket (upstream), VIVARIUM_SPLICE_IDLE_SEC);
    ic->cancel = g_cancellable_new ();
    ic->swapped = g_ptr_array_new ();
    ic->held = g_byte_array_new ();
    run (ic);
    result->bytes_down = ic->bytes_down;
    if (result->reason == NULL)
      result->summary = summarize (ic);
    g_io_stream_close (ic->guest, NULL, NULL);
  }
  if (ic->up != NULL)
    g_io_stream_close (ic->up, NULL, NULL);
  g_clear_object (&ic->guest);
  g_clear_object (&ic->up);
  g_clear_object (&ic->guest_socket);
  g_clear_object (&ic->cancel);
  g_clear_pointer (&ic->swapped, g_ptr_array_unref);
  if (ic->head != NULL)
    memset (ic->head->str, 0, ic->head->len);
  if (ic->head != NULL)
    g_string_free (ic->head, TRUE);
  if (ic->held != NULL)
    g_byte_array_unref (ic->held);
  g_free (ic->down_reason);
  return result->reason == NULL;
}
