/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium_egress_dns_parse() over any message a guest sends to the
 * proxy's resolver, and vivarium_egress_dns_answer() for what it reads. */

#include "config.h"

#include <string.h>
#include <gio/gio.h>

#include "fuzz-common.h"
#include "vivarium-egress-dns.h"

#define DNS_HEADER 12
/* The answer is the query's header and question plus at most one A record
 * (a 2-byte pointer, type, class, TTL, length, 4 bytes). */
#define ANSWER_RECORD 16

static GInetAddress *ipv4, *ipv6;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  ipv4 = g_inet_address_new_from_string ("10.0.2.100");
  ipv6 = g_inet_address_new_from_string ("fd00::100");
  return 0;
}

static guint16
get16 (const guint8 *p)
{
  return (guint16) (p[0] << 8 | p[1]);
}

/* A name it returns is what a host name may hold: dotted labels of
 * letters, digits, '-' and '_', none empty, at most 253 bytes. */
static void
check_query (const VivariumDnsQuery *q, size_t size)
{
  g_assert_cmpuint (q->question_end, >=, DNS_HEADER + 1 + 4);
  g_assert_cmpuint (q->question_end, <=, size);
  if (q->name == NULL)
    return;
  g_assert_cmpuint (strlen (q->name), >, 0);
  g_assert_cmpuint (strlen (q->name), <=, 253);
  g_assert_null (strstr (q->name, ".."));
  g_assert_true (q->name[0] != '.' && q->name[strlen (q->name) - 1] != '.');
  for (const gchar *p = q->name; *p != '\0'; p++)
    g_assert_true (g_ascii_isalnum (*p) || *p == '-' || *p == '_' || *p == '.');
}

/* The answer's header says what was decided; its question, made a query
 * again, reads back as the same question. */
static void
check_answer (const uint8_t *msg, const VivariumDnsQuery *q, gboolean allowed, GInetAddress *address)
{
  g_autoptr(GBytes) answer = vivarium_egress_dns_answer (msg, q, allowed, address);
  gboolean a = allowed && q->qtype == VIVARIUM_DNS_TYPE_A && q->qclass == VIVARIUM_DNS_CLASS_IN &&
               g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV4;
  g_auto(VivariumDnsQuery) back = { 0 };
  g_autofree guint8 *again = NULL;
  gsize len;
  const guint8 *p = g_bytes_get_data (answer, &len);

  g_assert_cmpuint (len, ==, q->question_end + (a ? ANSWER_RECORD : 0));
  g_assert_cmpuint (len, <=, VIVARIUM_DNS_MAX_QUERY + ANSWER_RECORD);
  g_assert_cmpuint (get16 (p), ==, q->id);
  g_assert_true (get16 (p + 2) & 0x8000);
  g_assert_cmpuint (get16 (p + 2) & 0x000f, ==, allowed ? 0 : 5);
  g_assert_cmpuint (get16 (p + 4), ==, 1);
  g_assert_cmpuint (get16 (p + 6), ==, a ? 1 : 0);
  g_assert_cmpmem (p + DNS_HEADER, q->question_end - DNS_HEADER, msg + DNS_HEADER, q->question_end - DNS_HEADER);
  if (a) {
    g_assert_cmpuint (get16 (p + q->question_end), ==, 0xc000 | DNS_HEADER);
    g_assert_cmpmem (p + len - 4, 4, g_inet_address_to_bytes (address), 4);
  }
  again = g_memdup2 (p, q->question_end);
  again[2] &= 0x01;        /* RD only: a query's flags */
  again[3] = 0;
  again[6] = again[7] = 0; /* no answers */
  g_assert_true (vivarium_egress_dns_parse (again, q->question_end, &back));
  g_assert_cmpuint (back.id, ==, q->id);
  g_assert_cmpuint (back.qtype, ==, q->qtype);
  g_assert_cmpuint (back.qclass, ==, q->qclass);
  g_assert_cmpuint (back.question_end, ==, q->question_end);
  g_assert_cmpstr (back.name, ==, q->name);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_auto(VivariumDnsQuery) q = { 0 };

  if (!vivarium_egress_dns_parse (data, size, &q)) {
    g_assert_null (q.name);
    return 0;
  }
  check_query (&q, size);
  check_answer (data, &q, FALSE, ipv4);
  check_answer (data, &q, TRUE, ipv4);
  check_answer (data, &q, TRUE, ipv6);
  return 0;
}
