/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-dns.h"

#define DNS_HEADER 12
#define DNS_FLAG_QR 0x8000
#define DNS_FLAG_AA 0x0400
#define DNS_FLAG_RD 0x0100
#define DNS_FLAG_RA 0x0080
#define DNS_OPCODE_MASK 0x7800
#define DNS_RCODE_REFUSED 5
/* RFC 1035 2.3.4 */
#define DNS_MAX_LABEL 63
#define DNS_MAX_NAME 255

static guint16
get16 (const guint8 *p)
{
  return (guint16) (p[0] << 8 | p[1]);
}

static void
put16 (GByteArray *out, guint16 v)
{
  guint8 b[2] = { v >> 8, v & 0xff };
  g_byte_array_append (out, b, 2);
}

static gboolean
label_is_hostlike (const guint8 *p, gsize n)
{
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isalnum (p[i]) && p[i] != '-' && p[i] != '_')
      return FALSE;
  return TRUE;
}

/* Reads the name at *at. A pointer must point strictly before the label
 * sequence that holds it, and into the question, so every jump goes back:
 * no loop, whatever the bytes say. *at ends after the name as it is laid
 * out in place (after the first pointer, if any). */
static gboolean
read_name (const guint8 *msg, gsize len, gsize *at, GString *name, gboolean *hostlike)
{
  gsize pos = *at, floor = *at, wire = 1;
  guint jumps = 0;
  gboolean jumped = FALSE;

  for (;;) {
    guint8 n;
    if (pos >= len)
      return FALSE;
    n = msg[pos];
    if ((n & 0xc0) == 0xc0) {
      gsize target;
      if (pos + 1 >= len || ++jumps > VIVARIUM_DNS_MAX_POINTERS)
        return FALSE;
      target = (gsize) (n & 0x3f) << 8 | msg[pos + 1];
      if (target < DNS_HEADER || target >= floor)
        return FALSE;
      if (!jumped)
        *at = pos + 2;
      jumped = TRUE;
      pos = floor = target;
      continue;
    }
    if ((n & 0xc0) != 0 || pos + 1 + n > len)
      return FALSE;
    if (n == 0)
      break;
    wire += 1 + n;
    if (n > DNS_MAX_LABEL || wire > DNS_MAX_NAME)
      return FALSE;
    if (!label_is_hostlike (msg + pos + 1, n))
      *hostlike = FALSE;
    if (name->len > 0)
      g_string_append_c (name, '.');
    g_string_append_len (name, (const gchar *) msg + pos + 1, n);
    pos += 1 + n;
  }
  if (!jumped)
    *at = pos + 1;
  return TRUE;
}

void
vivarium_dns_query_clear (VivariumDnsQuery *query)
{
  g_clear_pointer (&query->name, g_free);
}

gboolean
vivarium_egress_dns_parse (const guint8 *msg, gsize len, VivariumDnsQuery *query)
{
  g_autoptr(GString) name = g_string_new (NULL);
  gboolean hostlike = TRUE;
  gsize at = DNS_HEADER;

  memset (query, 0, sizeof *query);
  if (len < DNS_HEADER || len > VIVARIUM_DNS_MAX_QUERY)
    return FALSE;
  query->id = get16 (msg);
  query->flags = get16 (msg + 2);
  /* A standard query (QR 0, opcode 0) with exactly one question and no
   * answers; additional records (EDNS) are allowed and ignored. */
  if ((query->flags & (DNS_FLAG_QR | DNS_OPCODE_MASK)) != 0 || get16 (msg + 4) != 1 ||
      get16 (msg + 6) != 0 || get16 (msg + 8) != 0)
    return FALSE;
  if (!read_name (msg, len, &at, name, &hostlike) || at + 4 > len)
    return FALSE;
  query->qtype = get16 (msg + at);
  query->qclass = get16 (msg + at + 2);
  query->question_end = at + 4;
  query->name = hostlike && name->len > 0 ? g_strdup (name->str) : NULL;
  return TRUE;
}

GBytes *
vivarium_egress_dns_answer (const guint8 *msg, const VivariumDnsQuery *query, gboolean allowed, GInetAddress *address)
{
  g_autoptr(GByteArray) out = g_byte_array_new ();
  gboolean a = allowed && query->qtype == VIVARIUM_DNS_TYPE_A && query->qclass == VIVARIUM_DNS_CLASS_IN &&
               g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV4;
  guint16 flags = DNS_FLAG_QR | DNS_FLAG_AA | DNS_FLAG_RA | (query->flags & DNS_FLAG_RD);

  put16 (out, query->id);
  put16 (out, allowed ? flags : flags | DNS_RCODE_REFUSED);
  put16 (out, 1);
  put16 (out, a ? 1 : 0);
  put16 (out, 0);
  put16 (out, 0);
  /* The question at the same offset as in the query: its pointers (which
   * point back into itself) stay right. */
  g_byte_array_append (out, msg + DNS_HEADER, query->question_end - DNS_HEADER);
  if (a) {
    put16 (out, 0xc000 | DNS_HEADER);
    put16 (out, VIVARIUM_DNS_TYPE_A);
    put16 (out, VIVARIUM_DNS_CLASS_IN);
    put16 (out, 0);
    put16 (out, VIVARIUM_DNS_TTL);
    put16 (out, 4);
    g_byte_array_append (out, g_inet_address_to_bytes (address), 4);
  }
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}
