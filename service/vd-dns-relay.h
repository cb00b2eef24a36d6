/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"

G_BEGIN_DECLS

/* DNS for guests when the host's resolver is one they must not reach
 * (loopback, a private address): the daemon listens on an address outside
 * the deny list, in a network namespace of its own joined to the daemon's
 * by a veth pair, and forwards each query to the host's nameservers itself.
 * Session units get a resolv.conf naming the relay, so QEMU's user-mode
 * DNS (10.0.2.3) forwards there. */

#define VD_DNS_RELAY_HOST_LINK     "vv-dns"
#define VD_DNS_RELAY_PEER_LINK     "dns0"
#define VD_DNS_RELAY_ADDRESS       "198.51.100.53"
#define VD_DNS_RELAY_HOST_ADDRESS  "198.51.100.54"

#define VD_TYPE_DNS_RELAY (vd_dns_relay_get_type ())
G_DECLARE_FINAL_TYPE (VdDnsRelay, vd_dns_relay, VD, DNS_RELAY, GObject)

VdDnsRelay  *vd_dns_relay_new              (VdConfig     *config);
gboolean     vd_dns_relay_start            (VdDnsRelay   *self,
                                            GError      **error);
void         vd_dns_relay_stop             (VdDnsRelay   *self);
gboolean     vd_dns_relay_is_active        (VdDnsRelay   *self);
const gchar *vd_dns_relay_get_resolv_conf  (VdDnsRelay   *self);
void         vd_dns_relay_sweep            (const gchar  *runtime_dir);

G_END_DECLS
