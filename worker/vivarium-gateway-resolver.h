/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The gateway's process-wide resolver (g_resolver_set_default): every name
 * the gateway's HTTP client looks up goes through it. It asks the system's
 * resolver, drops the addresses in the guard's deny list
 * (vivarium_denylist_match), keeps at most VIVARIUM_GATEWAY_RESOLVER_MAX of
 * the rest, and hands them to @admit before anyone may connect to them: the
 * gateway opens its unit's firewall to exactly those (and refuses a name
 * that is not the endpoint's). No lookup is cached here: each connection
 * resolves again. */

#define VIVARIUM_GATEWAY_RESOLVER_MAX 16

/* Runs in the resolving thread. FALSE with @error refuses the lookup. */
typedef gboolean (*VivariumGatewayAdmit) (const gchar *host,
                                          GList       *addresses,
                                          gpointer     user_data,
                                          GError     **error);

#define VIVARIUM_TYPE_GATEWAY_RESOLVER (vivarium_gateway_resolver_get_type ())
G_DECLARE_FINAL_TYPE (VivariumGatewayResolver, vivarium_gateway_resolver, VIVARIUM, GATEWAY_RESOLVER, GResolver)

VivariumGatewayResolver *vivarium_gateway_resolver_new    (GResolver            *inner,
                                                           VivariumGatewayAdmit  admit,
                                                           gpointer              user_data);

/* Why the latest lookup was refused (denied ranges, the firewall), or
 * NULL when it was not. */
gchar                   *vivarium_gateway_resolver_last_refusal (VivariumGatewayResolver *self);

/* The pure part: the addresses of @addresses (GInetAddress) outside every
 * denied range, in order, at most VIVARIUM_GATEWAY_RESOLVER_MAX (a new
 * list, the addresses referenced). NULL, with @reason naming the first
 * denied one, when none is left. */
GList                   *vivarium_gateway_resolver_filter (const gchar *host,
                                                           GList       *addresses,
                                                           gchar      **reason);

G_END_DECLS
