/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The canary network of the isolation self-test, said once: what
 * vivarium-canary-net makes, and what vivariumd checks that it was handed.
 * A veth pair from the host's netns into a namespace of its own, listeners
 * on each canary address there and on host loopback, one TCP and one UDP
 * port for all of them. */

#define VD_CANARY_HOST_LINK   "vv-canary"
#define VD_CANARY_PEER_LINK   "canary0"
/* The host's end of the veth: the source of every re-originated probe. */
#define VD_CANARY_HOST_ADDR4  "169.254.255.253"
#define VD_CANARY_HOST_ADDR6  "fd00::ffff:253"
#define VD_CANARY_MAC_TAG     0x00

const gchar * const *vd_canary_net_addresses   (void);
const gchar * const *vd_canary_net_loopbacks   (void);
/* Every listener: (loopbacks + addresses) × (tcp, udp). */
guint                vd_canary_net_n_listeners (void);

G_END_DECLS
