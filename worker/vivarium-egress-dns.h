/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The egress proxy's DNS, as pure functions: one question read from a
 * query the guest sent, and the answer built for it. The guest's resolver
 * gets an address that leads back into the proxy for an allowed name, and
 * REFUSED for every other one; no query ever leaves the host. */

/* A query larger than this is refused (a single question, even with an EDNS
 * record, fits in 512 bytes, RFC 1035's UDP size). */
#define VIVARIUM_DNS_MAX_QUERY 512
/* At most this many compression pointers followed in one name. */
#define VIVARIUM_DNS_MAX_POINTERS 16
/* Time to live of the answers: long enough for a build, short enough that a
 * policy change shows within a minute. */
#define VIVARIUM_DNS_TTL 60

#define VIVARIUM_DNS_TYPE_A 1
#define VIVARIUM_DNS_CLASS_IN 1

typedef struct {
  guint16  id;
  guint16  flags;
  gchar   *name;          /* dotted, no trailing dot; NULL when a label holds
                           * bytes no host name has (then never allowed) */
  guint16  qtype;
  guint16  qclass;
  gsize    question_end;  /* offset just after the question */
} VivariumDnsQuery;

void     vivarium_dns_query_clear   (VivariumDnsQuery *query);

/* FALSE for anything that is not one standard query with one question:
 * the caller closes the connection. */
gboolean vivarium_egress_dns_parse  (const guint8     *msg,
                                     gsize             len,
                                     VivariumDnsQuery *query);

/* allowed: an A question (class IN) gets one A record, address (IPv4), TTL
 * VIVARIUM_DNS_TTL; any other question of an allowed name gets NOERROR and
 * no answer. !allowed: REFUSED. msg is the query the question came from
 * (its question is echoed byte for byte). */
GBytes  *vivarium_egress_dns_answer (const guint8           *msg,
                                     const VivariumDnsQuery *query,
                                     gboolean                allowed,
                                     GInetAddress           *address);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VivariumDnsQuery, vivarium_dns_query_clear)

G_END_DECLS
