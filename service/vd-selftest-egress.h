/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The self-test's probes through a scratch session's egress proxy
 * (configuration "allowlist"): what the guest asks the proxy for, and what
 * the proxy's decision log and usage file say of it. No GObject: the
 * self-test owns the run, this only knows the proxy's side. */

typedef enum {
  VD_SELF_TEST_ASK_CONNECT,   /* CONNECT host:port, nothing after it */
  VD_SELF_TEST_ASK_HELLO,     /* CONNECT host:port, then a TLS ClientHello naming sni */
  VD_SELF_TEST_ASK_DNS,       /* a DNS question (A) for host, over TCP to the proxy's port 53 */
} VdSelfTestAsk;

typedef struct {
  const gchar  *name;
  VdSelfTestAsk ask;
  const gchar  *host;            /* the CONNECT host (IPv6 in brackets), or the question's name */
  const gchar  *sni;             /* VD_SELF_TEST_ASK_HELLO only */
  const gchar  *canary_address;  /* the listener a leak would reach, or NULL */
  const gchar  *expected;        /* "reached", "answered", "refused" or "blocked" */
  const gchar  *reason_part;     /* the proxy's logged reason holds it when it decided so; NULL: any */
} VdSelfTestProxyProbe;

/* The rules the allowlist session's policy holds, each on the canary's TCP
 * port: the positive control's address, and localhost (which resolves into
 * the denied loopback range on every host). */
GStrv    vd_self_test_egress_rules    (guint16 tcp_port);

/* A shell script for the guest (busybox): one question per probe to the
 * proxy, all at once, each printing "NAME http STATUS" (the status line's
 * code) or "NAME dns RCODE"; nothing when no answer came. */
gchar   *vd_self_test_egress_script   (const VdSelfTestProxyProbe *probes,
                                       guint                       n_probes,
                                       guint16                     tcp_port);

/* The proxy's last decision on @host:@port (0: a DNS question) whose reason
 * holds @reason_part (NULL: any), in the log at @log_path: TRUE with
 * *verdict ("allowed", "denied"), *reason and *duration_ms (how long the
 * connection lasted) set, FALSE when the log holds none (or cannot be
 * read). */
gboolean vd_self_test_egress_decision (const gchar  *log_path,
                                       const gchar  *host,
                                       guint16       port,
                                       const gchar  *reason_part,
                                       gchar       **verdict,
                                       gchar       **reason,
                                       guint64      *duration_ms);

/* The names the proxy has looked up so far (its usage file's Lookups=, in
 * the egress directory @dir); FALSE when it cannot be read. */
gboolean vd_self_test_egress_lookups  (const gchar  *dir,
                                       guint64      *lookups);

/* The bytes the guest sends, for the tests: a DNS question over TCP (its
 * length first) and a minimal TLS ClientHello naming @server_name. */
GBytes  *vd_self_test_egress_dns_query (const gchar *name);
GBytes  *vd_self_test_egress_hello     (const gchar *server_name);

G_END_DECLS
