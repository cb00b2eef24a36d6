/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The DNS relay's forwarding (in vivarium-dns-relay, never in vivariumd):
 * the guests' queries from two listening sockets to the host's nameservers
 * and the answers back. */

#define VD_TYPE_DNS_FORWARDER (vd_dns_forwarder_get_type ())
G_DECLARE_FINAL_TYPE (VdDnsForwarder, vd_dns_forwarder, VD, DNS_FORWARDER, GObject)

VdDnsForwarder *vd_dns_forwarder_new          (GPtrArray      *upstreams);
gboolean        vd_dns_forwarder_start        (VdDnsForwarder *self,
                                               gint            udp_fd,
                                               gint            tcp_fd,
                                               GError        **error);
void            vd_dns_forwarder_stop         (VdDnsForwarder *self);
guint64         vd_dns_forwarder_get_relayed  (VdDnsForwarder *self);
guint64         vd_dns_forwarder_get_dropped  (VdDnsForwarder *self);

G_END_DECLS
