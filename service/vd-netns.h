/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A network namespace of the caller's own, joined to the caller's netns by
 * a veth pair with fixed MACs, permanent neighbour entries and /32 (/128)
 * host routes. With a @dir it is pinned by a bind mount there (in the
 * caller's mount namespace); with none it lives as long as a socket opened
 * in it (by the inside function) does, and its veth pair goes with it. */

#define VD_TYPE_NETNS (vd_netns_get_type ())
G_DECLARE_FINAL_TYPE (VdNetns, vd_netns, VD, NETNS, GObject)

/* Runs inside the new namespace (on a helper thread), to open the sockets
 * that must live there. */
typedef gboolean (*VdNetnsInsideFunc) (gpointer   user_data,
                                       GError   **error);

VdNetns     *vd_netns_new            (const gchar        *dir,
                                      const gchar        *host_link,
                                      const gchar        *peer_link,
                                      guint8              mac_tag);
gboolean     vd_netns_create         (VdNetns            *self,
                                      const gchar * const *inside_addresses,
                                      const gchar        *host_address4,
                                      const gchar        *host_address6,
                                      VdNetnsInsideFunc   inside_func,
                                      gpointer            user_data,
                                      GError            **error);
void         vd_netns_teardown       (VdNetns            *self);
const gchar *vd_netns_get_dir        (VdNetns            *self);
const gchar *vd_netns_get_pin        (VdNetns            *self);

gint         vd_netns_open_listener  (const gchar        *address,
                                      gboolean            tcp,
                                      guint16             port,
                                      guint16            *bound_port,
                                      GError            **error);
/* Deletes @host_link (and so its peer) if it is there; for the owner of
 * the sockets of a namespace another process made. */
void         vd_netns_remove_link    (const gchar        *host_link);
void         vd_netns_sweep          (const gchar        *dir,
                                      const gchar        *host_link,
                                      const gchar        *what);

G_END_DECLS
