/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-canary-net.h"

/* Addresses no real network uses, one in each denied range the self-test
 * probes, plus the positive controls outside the deny list (TEST-NET-2 and
 * the IPv6 documentation prefix). Behind the veth they are not local
 * addresses of the host's netns, so a probe tests its range's rule and not
 * the "host's own addresses" rule. */
static const gchar * const canary_addresses[] = {
  "10.255.255.254", "172.31.255.254", "192.168.255.254", "100.127.255.254",
  "169.254.255.254", "fd00::ffff:254", "198.51.100.1", "2001:db8:ffff::254", NULL
};

/* In the host's netns: the guest reaches 127.0.0.1 through the slirp
 * gateway 10.0.2.2 and ::1 through fec0::2. */
static const gchar * const loopbacks[] = { "127.0.0.1", "::1", NULL };

const gchar * const *
vd_canary_net_addresses (void)
{
  return canary_addresses;
}

const gchar * const *
vd_canary_net_loopbacks (void)
{
  return loopbacks;
}

guint
vd_canary_net_n_listeners (void)
{
  return 2 * (g_strv_length ((gchar **) loopbacks) + g_strv_length ((gchar **) canary_addresses));
}
