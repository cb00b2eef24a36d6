/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The proxy's way out: the name it decided on resolved by itself, every
 * address checked against the guard's deny list, a connection to an
 * address it checked (never resolved twice, so a rebinding name gains
 * nothing). */

/* At most this many lines in a --deny file. */
#define VIVARIUM_EGRESS_MAX_DENY 4096
/* Seconds a name's lookup may take (the host's resolver may take longer:
 * then the connection is refused, "the lookup of HOST timed out"). */
#define VIVARIUM_EGRESS_LOOKUP_TIMEOUT 10
/* Seconds to connect to one address. */
#define VIVARIUM_EGRESS_CONNECT_TIMEOUT 10
/* At most this many of a name's allowed addresses are tried. */
#define VIVARIUM_EGRESS_MAX_TRIED 4

typedef struct _VivariumEgressDenyList VivariumEgressDenyList;

VivariumEgressDenyList *vivarium_egress_deny_load  (const gchar  *path,
                                                    GError      **error);
void                    vivarium_egress_deny_free  (VivariumEgressDenyList *deny);

/* The CIDR (as written in the file) that holds address, or NULL. An
 * IPv4-mapped IPv6 address is checked as the IPv4 address too. */
const gchar            *vivarium_egress_deny_match (VivariumEgressDenyList *deny,
                                                    GInetAddress           *address);

/* host: normalised (a name, or an IP literal without brackets). NULL with
 * *reason when no allowed address of it takes the connection. */
GSocketConnection      *vivarium_egress_connect    (VivariumEgressDenyList  *deny,
                                                    const gchar             *host,
                                                    guint16                  port,
                                                    gchar                  **reason);

/* Names this proxy has asked the host's resolver for (an IP literal is
 * none), counted before each lookup: the usage file's Lookups=, by which
 * the self-test sees that a DNS question was answered without one. */
guint                   vivarium_egress_lookups    (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressDenyList, vivarium_egress_deny_free)

G_END_DECLS
