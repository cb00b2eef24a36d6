/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The self-test's probes through a scratch session's egress proxy
 * (configuration "allowlist"): what the guest asks the proxy for, and what
 * the proxy's decision log says of it. No GObject: the self-test owns the
 * run, this only knows the proxy's side. */

typedef struct {
  const gchar *name;
  const gchar *host;            /* the CONNECT host, IPv6 in brackets */
  const gchar *canary_address;  /* the listener a leak would reach, or NULL */
  const gchar *expected;        /* "reached", "refused" or "blocked" */
} VdSelfTestProxyProbe;

/* The rule the allowlist session's policy holds: the positive control's
 * address and the canary's TCP port, nothing else. */
gchar *vd_self_test_egress_rule   (guint16 tcp_port);

/* A shell script for the guest: one CONNECT per probe to the proxy's port,
 * each printing "NAME http STATUS" (0: no status line came back). */
gchar *vd_self_test_egress_script (const VdSelfTestProxyProbe *probes,
                                   guint                       n_probes,
                                   guint16                     tcp_port);

/* The proxy's last decision on @host:@port in the log at @log_path:
 * TRUE with *verdict ("allowed", "denied") and *reason set, FALSE when the
 * log holds none (or cannot be read). */
gboolean vd_self_test_egress_decision (const gchar  *log_path,
                                       const gchar  *host,
                                       guint16       port,
                                       gchar       **verdict,
                                       gchar       **reason);

G_END_DECLS
