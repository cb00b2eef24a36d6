/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The gateway's process-wide resolver (g_resolver_set_default): every name
 * the gateway's HTTP client looks up goes through it. It asks the system's
 * resolver, drops the addresses in the guard's deny list (the built-in
 * ranges, vivarium_denylist_match, and what the daemon's guard adds: the
 * host's own addresses and [Guard] ExtraDeny=, handed over in a file of the
 * daemon's, vd-gateway-client.h), keeps at most VIVARIUM_GATEWAY_RESOLVER_MAX of
 * the rest, and hands them to @admit before anyone may connect to them: the
 * gateway opens its unit's firewall to exactly those (and refuses a name
 * that is not the endpoint's). No lookup is cached here: each connection
 * resolves again. */

#define VIVARIUM_GATEWAY_RESOLVER_MAX 16

/* A range the daemon's guard denies beyond the built-in list, and what it
 * is ("one of the host's own addresses"), for the refusal's sentence. */
typedef struct {
  GInetAddressMask *mask;
  gchar            *cidr;
  gchar            *why;
} VivariumGatewayDeny;

/* The daemon's file holds a line per range, "CIDR WHY"; more lines than
 * this, or a line longer than VIVARIUM_GATEWAY_DENY_LINE_MAX, is refused. */
#define VIVARIUM_GATEWAY_DENY_MAX 4096
#define VIVARIUM_GATEWAY_DENY_LINE_MAX 512

/* An array of VivariumGatewayDeny (freed with it), or NULL with @error
 * naming the line. */
GPtrArray *vivarium_gateway_deny_parse (const gchar *text,
                                        GError     **error);

/* Runs in the resolving thread. FALSE with @error refuses the lookup. */
typedef gboolean (*VivariumGatewayAdmit) (const gchar *host,
                                          GList       *addresses,
                                          gpointer     user_data,
                                          GError     **error);

#define VIVARIUM_TYPE_GATEWAY_RESOLVER (vivarium_gateway_resolver_get_type ())
G_DECLARE_FINAL_TYPE (VivariumGatewayResolver, vivarium_gateway_resolver, VIVARIUM, GATEWAY_RESOLVER, GResolver)

VivariumGatewayResolver *vivarium_gateway_resolver_new    (GResolver            *inner,
                                                           GPtrArray            *host_deny,
                                                           VivariumGatewayAdmit  admit,
                                                           gpointer              user_data);

/* Why the latest lookup was refused (denied ranges, the firewall), or
 * NULL when it was not. */
gchar                   *vivarium_gateway_resolver_last_refusal (VivariumGatewayResolver *self);

/* The pure part: the addresses of @addresses (GInetAddress) outside every
 * denied range (the built-in ones and @host_deny's, which may be NULL), in
 * order, at most VIVARIUM_GATEWAY_RESOLVER_MAX (a new list, the addresses
 * referenced). NULL, with @reason naming the first denied one, when none
 * is left. */
GList                   *vivarium_gateway_resolver_filter (const gchar *host,
                                                           GList       *addresses,
                                                           GPtrArray   *host_deny,
                                                           gchar      **reason);

G_END_DECLS
