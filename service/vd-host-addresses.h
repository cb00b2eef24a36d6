/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The guard's "host's own addresses": every IPv4 and IPv6 address of an
 * interface of the caller's network namespace, read from netlink
 * (getifaddrs: no IP socket is opened). A GPtrArray of GInetAddress;
 * empty when they cannot be read. */
GPtrArray *vd_host_addresses_list     (void);

/* Whether @address is one of them. */
gboolean   vd_host_addresses_contain  (GInetAddress *address);

G_END_DECLS
