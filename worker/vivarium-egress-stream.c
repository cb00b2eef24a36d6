/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <string.h>

#include "vivarium-egress-http.h"
#include "vivarium-egress-intercept.h"
#include "vivarium-egress-io.h"
#include "vivarium-egress-sni.h"
#include "vivarium-egress-splice.h"
#include "vivarium-egress-stream.h"

/* Room for the largest head or ClientHello the guest may send. */
#define FIRST_BYTES_MAX MAX (VIVARIUM_EGRESS_MAX_HEAD, VIVARIUM_SNI_MAX_HELLO)
/* Seconds a blocking write to either side may take. */
#define WRITE_TIMEOUT_SEC 10

static const gchar *const via_names[] = { "proxy", "http", "tls" };

typedef struct {
  VivariumEgressContext *ctx;
  GSocket               *client;
  VivariumEgressVia      via;
  gint64                 start;
  gchar                 *host;     /* normalised (IPv6 in brackets); NULL if invalid */
  guint16                port;
  guint64                bytes_up, bytes_down;
  guint8                 buf[FIRST_BYTES_MAX];
  gsize                  len;
  /* Placeholders (docs/secrets.md) in what the guest sends on in plain. */
  gboolean               scan_up;
  const gchar           *scan_where;
  gboolean               scan_refused;
  VivariumPlaceholderScan scan;
} Flow;

static void
flow_log (Flow *f, gboolean allowed, const gchar *reason)
{
  VivariumEgressDecision d = {
    .host = f->host, .port = f->port, .via = via_names[f->via], .allowed = allowed, .reason = reason,
    .bytes_up = f->bytes_up, .bytes_down = f->bytes_down,
    .duration_ms = (g_get_monotonic_time () - f->start) / 1000,
  };

  vivarium_egress_log_record (f->ctx->log, &d);
}

static void
answer_403 (Flow *f, const gchar *reason)
{
  g_autofree gchar *body = g_strdup_printf ("vivarium egress: %s\n", reason);
  g_autofree gchar *answer = g_strdup_printf ("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                              "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                              strlen (body), body);

  vivarium_egress_io_send_all (f->client, (const guint8 *) answer, strlen (answer));
}

/* The same refusal for the same cause: 403 and the reason on the explicit
 * proxy, a closed connection on the transparent ports. */
static void
refuse (Flow *f, const gchar *reason)
{
  flow_log (f, FALSE, reason);
  if (f->via == VIVARIUM_EGRESS_VIA_PROXY)
    answer_403 (f, reason);
}

/* A placeholder in a plain HTTP request is refused in HTTP on both HTTP
 * doors: the client learns why (docs/secrets.md). */
static void
refuse_http (Flow *f, const gchar *reason)
{
  flow_log (f, FALSE, reason);
  answer_403 (f, reason);
}

/* The guest's own head, line by line: the request line is the "URL", each
 * other line a header (named by what comes before its ':'). Loose on
 * purpose: whatever the guest wrote, a placeholder in it is seen. */
static gchar *
placeholder_in_head (Flow *f, gsize used, gboolean connect)
{
  g_autofree gchar *text = g_strndup ((const gchar *) f->buf, used);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree gchar *where = NULL;
    g_autofree gchar *why = NULL;
    gchar *colon = strchr (lines[i], ':');
    if (i == 0)
      where = g_strdup (connect ? "CONNECT target" : "URL");
    else if (colon == NULL)
      where = g_strdup ("header");
    else if ((why = vivarium_egress_context_placeholder (f->ctx, lines[i], colon - lines[i], f->host, f->port,
                                                         "header name")) != NULL)
      return g_steal_pointer (&why);
    else
      where = g_strdup_printf ("header %.*s", (int) (colon - lines[i]), lines[i]);
    why = vivarium_egress_context_placeholder (f->ctx, lines[i], strlen (lines[i]), f->host, f->port, where);
    if (why != NULL)
      return g_steal_pointer (&why);
  }
  return NULL;
}

/* Every chunk the guest sends on in plain (an HTTP body, a tunnel that
 * is not TLS), scanned with the overlap. */
static gboolean
scan_chunk (const guint8 *data, gsize len, gchar **reason, gpointer user_data)
{
  Flow *f = user_data;
  const VivariumSecret *secret;

  if (!f->scan_up)
    return TRUE;
  secret = vivarium_placeholder_scan_feed (&f->scan, data, len);
  if (secret == NULL)
    return TRUE;
  *reason = vivarium_placeholder_reason (secret, f->host, f->port, f->scan_where);
  f->scan_refused = TRUE;
  return FALSE;
}

/* Reads until done() says the first bytes are whole; FALSE with *reason
 * (NULL: the guest left before sending anything, nothing to log). */
typedef gboolean (*WholeFunc) (Flow *f, gchar **reason);

static gboolean
read_first (Flow *f, WholeFunc whole, const gchar *what, gchar **reason)
{
  gint64 deadline = f->start + VIVARIUM_EGRESS_FIRST_BYTES_SEC * G_USEC_PER_SEC;

  for (;;) {
    gboolean timed_out;
    gssize n;
    if (f->len > 0 && whole (f, reason))
      return TRUE;
    if (*reason != NULL)
      return FALSE;
    if (f->len == sizeof f->buf) {
      *reason = g_strdup_printf ("the %s is larger than %zu bytes", what, sizeof f->buf);
      return FALSE;
    }
    n = vivarium_egress_io_read (f->client, f->buf + f->len, sizeof f->buf - f->len, deadline, &timed_out);
    if (n <= 0) {
      if (timed_out)
        *reason = g_strdup_printf ("the %s did not come within %u s", what, VIVARIUM_EGRESS_FIRST_BYTES_SEC);
      else if (f->len > 0)
        *reason = g_strdup_printf ("the connection ended inside the %s", what);
      return FALSE;
    }
    f->len += (gsize) n;
  }
}

static gboolean
head_whole (Flow *f, gchar **reason)
{
  return vivarium_egress_http_head_end (f->buf, f->len) != 0;
}

static const gchar *
sni_problem (VivariumSniResult result)
{
  switch (result) {
  case VIVARIUM_SNI_NOT_TLS:
    return "the first bytes are not a TLS ClientHello";
  case VIVARIUM_SNI_NONE:
    return "the TLS ClientHello names no server (no SNI)";
  case VIVARIUM_SNI_MALFORMED:
    return "the TLS ClientHello is malformed";
  case VIVARIUM_SNI_TOO_LARGE:
    return "the TLS ClientHello is larger than the proxy reads";
  default:
    return NULL;
  }
}

/* tls.sock: the destination is the ClientHello's server name, port 443. */
static gboolean
hello_whole (Flow *f, gchar **reason)
{
  g_autofree gchar *name = NULL;
  VivariumSniResult result = vivarium_egress_sni_parse (f->buf, f->len, &name);

  if (result == VIVARIUM_SNI_NEED_MORE)
    return FALSE;
  if (result != VIVARIUM_SNI_FOUND) {
    *reason = g_strdup (sni_problem (result));
    return FALSE;
  }
  f->host = vivarium_egress_context_normalize (name);
  f->port = 443;
  return TRUE;
}

/* After CONNECT: the first bytes, if they are a ClientHello, must name the
 * CONNECT host; anything that looks like TLS and cannot be read is cut (a
 * server might read it otherwise than we do). */
static VivariumInspect
check_sni (const guint8 *data, gsize len, gchar **reason, gpointer user_data)
{
  Flow *f = user_data;
  g_autofree gchar *name = NULL;
  g_autofree gchar *normal = NULL;
  VivariumSniResult result = vivarium_egress_sni_parse (data, len, &name);

  switch (result) {
  case VIVARIUM_SNI_NEED_MORE:
    return VIVARIUM_INSPECT_NEED_MORE;
  case VIVARIUM_SNI_NOT_TLS:
    /* Plain bytes through the tunnel: the proxy sees them, these first
     * ones included (they were held, not scanned, until now). */
    f->scan_up = TRUE;
    f->scan_where = "tunnelled data";
    return scan_chunk (data, len, reason, f) ? VIVARIUM_INSPECT_PASS : VIVARIUM_INSPECT_CUT;
  case VIVARIUM_SNI_NONE:
    return VIVARIUM_INSPECT_PASS;
  case VIVARIUM_SNI_FOUND:
    *reason = vivarium_egress_context_placeholder (f->ctx, name, strlen (name), f->host, f->port, "SNI");
    if (*reason != NULL)
      return VIVARIUM_INSPECT_CUT;
    normal = vivarium_egress_context_normalize (name);
    if (normal != NULL && g_str_equal (normal, f->host))
      return VIVARIUM_INSPECT_PASS;
    *reason = g_strdup_printf ("the TLS server name %s is not the CONNECT host %s",
                               normal != NULL ? normal : "(invalid)", f->host);
    return VIVARIUM_INSPECT_CUT;
  default:
    *reason = g_strdup (sni_problem (result));
    return VIVARIUM_INSPECT_CUT;
  }
}

/* The policy, then the budget: a refused name is refused for its own
 * reason even when the budget is spent. */
static gboolean
admit (Flow *f, gchar **reason)
{
  g_autofree gchar *spent = NULL;

  if (f->host == NULL) {
    *reason = g_strdup ("not a valid host name");
    return FALSE;
  }
  if (!vivarium_egress_context_decide (f->ctx, f->host, f->port, reason))
    return FALSE;
  spent = vivarium_egress_budget_spent (f->ctx->budget);
  if (spent != NULL) {
    g_free (*reason);
    *reason = g_steal_pointer (&spent);
    return FALSE;
  }
  return TRUE;
}

static GSocketConnection *
open_upstream (Flow *f, gchar **reason)
{
  g_autofree gchar *bare = g_strdup (f->host);
  GSocketConnection *conn;

  /* GIO takes an IPv6 literal without its brackets. */
  if (bare[0] == '[') {
    bare[strlen (bare) - 1] = '\0';
    memmove (bare, bare + 1, strlen (bare));
  }
  conn = vivarium_egress_connect (f->ctx->deny, bare, f->port, reason);
  if (conn != NULL)
    g_socket_set_timeout (g_socket_connection_get_socket (conn), WRITE_TIMEOUT_SEC);
  return conn;
}

/* The rewritten head goes upstream before anything else, counted as up. */
static gboolean
send_head (Flow *f, GSocket *upstream, GBytes *head, gchar **reason)
{
  gsize len = g_bytes_get_size (head);

  if (!vivarium_egress_budget_charge (f->ctx->budget, len, 0, reason))
    return FALSE;
  f->bytes_up += len;
  if (!vivarium_egress_io_send_all (upstream, g_bytes_get_data (head, NULL), len))
    g_debug ("the upstream server closed before the request head");
  return TRUE;
}

static void
relay (Flow *f, GSocket *upstream, gsize used, gboolean inspect, const gchar *allowed_by)
{
  g_autofree gchar *cut = NULL;
  VivariumSplice splice = {
    .client_fd = g_socket_get_fd (f->client), .upstream_fd = g_socket_get_fd (upstream),
    .budget = f->ctx->budget, .inspect = inspect ? check_sni : NULL, .inspect_data = f,
    .inspect_deadline = g_get_monotonic_time () + VIVARIUM_EGRESS_FIRST_BYTES_SEC * G_USEC_PER_SEC,
    .scan = f->ctx->placeholders != NULL ? scan_chunk : NULL, .scan_data = f,
  };
  gboolean whole;

  vivarium_placeholder_scan_init (&f->scan, f->ctx->placeholders);
  whole = vivarium_egress_splice (&splice, f->buf + used, f->len - used, &cut);
  f->bytes_up += splice.bytes_up;
  f->bytes_down += splice.bytes_down;
  flow_log (f, whole, whole ? allowed_by : cut);
  /* A body refused before the server said anything: the client is told. */
  if (f->scan_refused && f->via != VIVARIUM_EGRESS_VIA_TLS && splice.bytes_down == 0 && !inspect)
    answer_403 (f, cut);
}

/* The TLS of a secret's host, opened up (vivarium-egress-intercept.h):
 * f->buf[used..len) is the guest's ClientHello so far. */
static void
intercept (Flow *f, GSocketConnection *conn, gsize used, const gchar *allowed_by)
{
  g_auto(VivariumInterceptResult) result = { 0 };
  g_autoptr(GBytes) hello = g_bytes_new (f->buf + used, f->len - used);
  g_autofree gchar *summary = NULL;
  gboolean ok = vivarium_egress_intercept (f->ctx, f->client, hello, f->host, conn, &result);

  f->bytes_up += result.bytes_up;
  f->bytes_down += result.bytes_down;
  if (ok)
    summary = g_strdup_printf ("%s; %s", allowed_by, result.summary);
  flow_log (f, ok, ok ? summary : result.reason);
}

/* After CONNECT host:443 to a secret's host: the guest's ClientHello,
 * which must name the CONNECT host (or none), before the proxy answers it. */
static gboolean
connect_hello_whole (Flow *f, gchar **reason)
{
  g_autofree gchar *name = NULL;
  g_autofree gchar *normal = NULL;
  VivariumSniResult result = vivarium_egress_sni_parse (f->buf, f->len, &name);

  switch (result) {
  case VIVARIUM_SNI_NEED_MORE:
    return FALSE;
  case VIVARIUM_SNI_NONE:
    return TRUE;
  case VIVARIUM_SNI_FOUND:
    *reason = vivarium_egress_context_placeholder (f->ctx, name, strlen (name), f->host, f->port, "SNI");
    if (*reason != NULL)
      return FALSE;
    normal = vivarium_egress_context_normalize (name);
    if (normal != NULL && g_str_equal (normal, f->host))
      return TRUE;
    *reason = g_strdup_printf ("the TLS server name %s is not the CONNECT host %s",
                               normal != NULL ? normal : "(invalid)", f->host);
    return FALSE;
  case VIVARIUM_SNI_NOT_TLS:
    *reason = g_strdup_printf ("the bytes after CONNECT %s:443 are not TLS (the proxy holds a secret for it)",
                               f->host);
    return FALSE;
  default:
    *reason = g_strdup (sni_problem (result));
    return FALSE;
  }
}

static void
intercept_connect (Flow *f, GSocketConnection *conn, gsize used, const gchar *allowed_by)
{
  g_autofree gchar *reason = NULL;

  memmove (f->buf, f->buf + used, f->len - used);
  f->len -= used;
  if (!read_first (f, connect_hello_whole, "TLS ClientHello", &reason)) {
    flow_log (f, FALSE, reason != NULL ? reason : "the guest left before its TLS ClientHello");
    return;
  }
  intercept (f, conn, 0, allowed_by);
}

static const guint8 connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* Everything the guest sent after its head goes on (inspected after a
 * CONNECT). */
static void
serve_request (Flow *f, VivariumEgressRequest *request, gsize used)
{
  g_autofree gchar *reason = NULL;
  g_autofree gchar *cut = NULL;
  g_autoptr(GSocketConnection) conn = NULL;
  GSocket *upstream;

  f->host = vivarium_egress_context_normalize (request->host);
  f->port = request->port;
  if ((reason = placeholder_in_head (f, used, request->connect)) != NULL) {
    refuse_http (f, reason);
    return;
  }
  if (!admit (f, &reason) || (conn = open_upstream (f, &reason)) == NULL) {
    refuse (f, reason);
    return;
  }
  upstream = g_socket_connection_get_socket (conn);
  if (request->connect && vivarium_egress_intercepts (f->ctx, f->host, f->port)) {
    vivarium_egress_io_send_all (f->client, connect_ok, sizeof connect_ok - 1);
    intercept_connect (f, conn, used, reason);
    return;
  }
  if (request->connect)
    vivarium_egress_io_send_all (f->client, connect_ok, sizeof connect_ok - 1);
  else if (!send_head (f, upstream, request->head, &cut)) {
    refuse (f, cut);
    return;
  }
  if (!request->connect) {
    f->scan_up = TRUE;
    f->scan_where = "body";
  }
  relay (f, upstream, used, request->connect, reason);
}

/* A refused request is logged under the host it names (normalised, or
 * "(invalid)" when it names none). */
static void
name_refused_destination (Flow *f, gsize used)
{
  g_autofree gchar *host = NULL;
  guint16 port = 0;

  if (f->host != NULL ||
      !vivarium_egress_http_named_destination ((const gchar *) f->buf, used, &host, &port))
    return;
  f->host = vivarium_egress_context_normalize (host);
  f->port = port;
}

static void
serve_http (Flow *f)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(VivariumEgressRequest) request = NULL;
  gsize used;

  if (!read_first (f, head_whole, "request head", &reason)) {
    if (reason != NULL)
      refuse (f, reason);
    return;
  }
  used = vivarium_egress_http_head_end (f->buf, f->len);
  request = vivarium_egress_http_parse ((const gchar *) f->buf, used,
                                        f->via == VIVARIUM_EGRESS_VIA_PROXY ? VIVARIUM_EGRESS_HTTP_EXPLICIT
                                                                            : VIVARIUM_EGRESS_HTTP_TRANSPARENT,
                                        &reason);
  if (request == NULL) {
    name_refused_destination (f, used);
    refuse (f, reason);
  } else {
    serve_request (f, request, used);
  }
}

/* The ClientHello itself goes on to the server it names. */
static void
serve_tls (Flow *f)
{
  g_autofree gchar *reason = NULL;
  g_autoptr(GSocketConnection) conn = NULL;

  if (!read_first (f, hello_whole, "TLS ClientHello", &reason)) {
    if (reason != NULL)
      refuse (f, reason);
    return;
  }
  if (f->host != NULL &&
      (reason = vivarium_egress_context_placeholder (f->ctx, f->host, strlen (f->host), f->host, f->port, "SNI")) !=
          NULL) {
    refuse (f, reason);
    return;
  }
  if (!admit (f, &reason) || (conn = open_upstream (f, &reason)) == NULL) {
    refuse (f, reason);
    return;
  }
  if (vivarium_egress_intercepts (f->ctx, f->host, f->port))
    intercept (f, conn, 0, reason);
  else
    relay (f, g_socket_connection_get_socket (conn), 0, FALSE, reason);
}

void
vivarium_egress_serve_stream (VivariumEgressContext *ctx, GSocket *client, VivariumEgressVia via)
{
  g_autofree Flow *f = g_new0 (Flow, 1);

  f->ctx = ctx;
  f->client = client;
  f->via = via;
  f->start = g_get_monotonic_time ();
  g_socket_set_timeout (client, WRITE_TIMEOUT_SEC);
  if (via == VIVARIUM_EGRESS_VIA_TLS)
    serve_tls (f);
  else
    serve_http (f);
  g_free (f->host);
}
