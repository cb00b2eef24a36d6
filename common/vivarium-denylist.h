/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* One definition of the destinations a guest must never reach; both guard
 * layers (IPAddressDeny= and the nftables sets) are generated from it. */
typedef struct {
  GSocketFamily family;   /* G_SOCKET_FAMILY_IPV4 or _IPV6 */
  const gchar  *address;  /* network address, textual */
  guint         prefix;   /* prefix length */
  const gchar  *why;      /* what the range is, for docs and reports */
} VivariumDenyEntry;

const VivariumDenyEntry *vivarium_denylist_builtin     (gsize *n_entries);
GPtrArray               *vivarium_denylist_to_strings  (void);
gboolean                 vivarium_cidr_parse           (const gchar    *cidr,
                                                        GInetAddress  **address,
                                                        guint          *prefix,
                                                        GError        **error);
/* The entry whose range holds @address (an IPv4-mapped IPv6 address is
 * checked as the IPv4 address it maps too), or NULL when none does. */
const VivariumDenyEntry *vivarium_denylist_match       (GInetAddress   *address);

G_END_DECLS
