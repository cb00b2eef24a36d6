/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* DNS for guests when the host's resolver is one they must not reach
 * (loopback, a private address): vivarium-dns-relay, in a unit of its own,
 * listens on an address outside the deny list, in a network namespace of
 * its own joined to the host's by a veth pair, and forwards each query to
 * the host's nameservers. Session units get a resolv.conf naming the relay,
 * so QEMU's user-mode DNS (10.0.2.3) forwards there. The daemon decides
 * whether one is needed and runs its unit; it never sees a query. */

#define VD_DNS_RELAY_HOST_LINK     "vv-dns"
#define VD_DNS_RELAY_PEER_LINK     "dns0"
#define VD_DNS_RELAY_ADDRESS       "198.51.100.53"
#define VD_DNS_RELAY_HOST_ADDRESS  "198.51.100.54"
/* Keeps the veth's MACs apart from the canary's (vd_netns_new). */
#define VD_DNS_RELAY_MAC_TAG       0x01

#define VD_TYPE_DNS_RELAY (vd_dns_relay_get_type ())
G_DECLARE_FINAL_TYPE (VdDnsRelay, vd_dns_relay, VD, DNS_RELAY, GObject)

VdDnsRelay  *vd_dns_relay_new              (VdConfig     *config,
                                            VdSystemd    *systemd);
gboolean     vd_dns_relay_start            (VdDnsRelay   *self,
                                            GError      **error);
void         vd_dns_relay_stop             (VdDnsRelay   *self);
gboolean     vd_dns_relay_is_active        (VdDnsRelay   *self);
const gchar *vd_dns_relay_get_resolv_conf  (VdDnsRelay   *self);
void         vd_dns_relay_sweep            (const gchar  *runtime_dir);

G_END_DECLS
