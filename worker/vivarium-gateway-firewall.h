/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The gateway's own unit's firewall (cgroup BPF), set over systemd's D-Bus
 * API (Unit.SetProperties, runtime: /run, gone at reboot, replaced at each
 * start). The unit file says IPAddressDeny=any and allows nothing; the
 * gateway, before it connects anywhere, sets IPAddressAllow= to exactly
 * - an endpoint on an address: that address (the configured one, even in a
 *   denied range: a local model on 127.0.0.1 is the default);
 * - an endpoint by name: the system resolvers' addresses (/etc/resolv.conf:
 *   glibc must reach them to resolve at all) and the endpoint's addresses
 *   of its recent lookups, each checked against the deny list first,
 *   kept while a connection made to it may last;
 * and reads it back. A compromised gateway could widen it (it is root);
 * the list guards against the gateway's own mistakes and holds while the
 * process is whatever its code says. */

/* Connects to the system bus and finds the unit this process runs in. */
gboolean vivarium_gateway_firewall_open          (GError     **error);
/* The unit denies any; its allow list becomes @address only. */
gboolean vivarium_gateway_firewall_fixed         (GInetAddress *address,
                                                  GError      **error);
/* The unit denies any; its allow list becomes the resolvers only, each
 * address followed kept @keep_sec seconds. */
gboolean vivarium_gateway_firewall_follow_init   (guint        keep_sec,
                                                  GError     **error);
/* Adds @addresses (GInetAddress) for keep_sec seconds (a connection made
 * now may last that long), sets the unit's list and reads it back. Thread-safe. */
gboolean vivarium_gateway_firewall_follow        (GList       *addresses,
                                                  GError     **error);

G_END_DECLS
