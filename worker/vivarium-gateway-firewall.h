/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The gateway's own unit's firewall (cgroup BPF), read and set over
 * systemd's D-Bus API. An endpoint on an address: the unit's
 * IPAddressAllow= (a drop-in's) must be exactly that address, read back at
 * start. An endpoint by name: the unit keeps IPAddressDeny=any and the
 * gateway sets IPAddressAllow= at runtime (runtime=true, gone at reboot) to
 * the system resolvers' addresses (/etc/resolv.conf) and the endpoint's
 * addresses of recent lookups, after it checked them against the deny list
 * and before it connects: the firewall follows the name. */

/* Connects to the system bus and finds the unit this process runs in. */
gboolean vivarium_gateway_firewall_open          (GError     **error);
/* The unit allows exactly @address. */
gboolean vivarium_gateway_firewall_check_exactly (const gchar *address,
                                                  GError     **error);
/* The unit denies any (IPv4 and IPv6); then its allow list becomes the
 * resolvers only. */
gboolean vivarium_gateway_firewall_follow_init   (guint        keep_sec,
                                                  GError     **error);
/* Adds @addresses (GInetAddress) for @keep_sec seconds (a connection made
 * now may last that long), sets the unit's list and reads it back. Thread-safe. */
gboolean vivarium_gateway_firewall_follow        (GList       *addresses,
                                                  GError     **error);

G_END_DECLS
