/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <string.h>

#include "vivarium-egress-dns.h"
#include "vivarium-egress-dnsd.h"
#include "vivarium-egress-io.h"

static gboolean
decide (VivariumEgressContext *ctx, const VivariumDnsQuery *query, gint64 start)
{
  gboolean allowed = query->name != NULL && vivarium_egress_context_allows_name (ctx, query->name);
  g_autofree gchar *host = vivarium_egress_context_normalize (query->name);
  g_autofree gchar *reason = NULL;
  VivariumEgressDecision d = { .host = host, .port = 0, .via = "dns", .allowed = allowed };

  if (host == NULL)
    reason = g_strdup ("not a valid host name");
  else if ((reason = vivarium_egress_context_placeholder (ctx, query->name, strlen (query->name), host, 53,
                                                          "DNS name")) != NULL)
    d.allowed = allowed = FALSE;
  else if (allowed)
    reason = g_strdup_printf ("the policy allows %s: answered with the proxy's address", host);
  else
    reason = g_strdup_printf ("no rule allows %s: answered REFUSED", host);
  d.reason = reason;
  d.duration_ms = (g_get_monotonic_time () - start) / 1000;
  vivarium_egress_log_record (ctx->log, &d);
  return allowed;
}

/* FALSE: the connection is over (EOF, timeout, malformed, gone). */
static gboolean
answer_one (VivariumEgressContext *ctx, GSocket *client)
{
  guint8 prefix[2], msg[VIVARIUM_DNS_MAX_QUERY];
  gint64 start = g_get_monotonic_time ();
  gint64 deadline = start + VIVARIUM_DNS_QUERY_SEC * G_USEC_PER_SEC;
  g_auto(VivariumDnsQuery) query = { 0 };
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GByteArray) framed = NULL;
  gsize len, answer_len;
  const guint8 *data;

  if (!vivarium_egress_io_read_exact (client, prefix, 2, deadline))
    return FALSE;
  len = (gsize) prefix[0] << 8 | prefix[1];
  if (len == 0 || len > sizeof msg || !vivarium_egress_io_read_exact (client, msg, len, deadline) ||
      !vivarium_egress_dns_parse (msg, len, &query))
    return FALSE;
  answer = vivarium_egress_dns_answer (msg, &query, decide (ctx, &query, start), ctx->guest_address);
  data = g_bytes_get_data (answer, &answer_len);
  /* One write, length and message: a resolver that reads once gets both. */
  framed = g_byte_array_sized_new (answer_len + 2);
  prefix[0] = answer_len >> 8;
  prefix[1] = answer_len & 0xff;
  g_byte_array_append (framed, prefix, 2);
  g_byte_array_append (framed, data, answer_len);
  return vivarium_egress_io_send_all (client, framed->data, framed->len);
}

void
vivarium_egress_serve_dns (VivariumEgressContext *ctx, GSocket *client)
{
  g_socket_set_timeout (client, VIVARIUM_DNS_QUERY_SEC);
  for (guint i = 0; i < VIVARIUM_DNS_MAX_QUERIES; i++)
    if (!answer_one (ctx, client))
      return;
}
