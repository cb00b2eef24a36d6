/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The canary network of one self-test run: a network namespace of the
 * daemon's own, joined to the daemon's netns by a veth pair, with listeners
 * on addresses no real network uses, plus listeners on host loopback. */

#define VD_CANARY_HOST_LINK   "vv-canary"
#define VD_CANARY_PEER_LINK   "canary0"

#define VD_TYPE_CANARY (vd_canary_get_type ())
G_DECLARE_FINAL_TYPE (VdCanary, vd_canary, VD, CANARY, GObject)

VdCanary    *vd_canary_new           (const gchar  *runtime_dir);
gboolean     vd_canary_setup         (VdCanary     *self,
                                      GError      **error);
void         vd_canary_teardown      (VdCanary     *self);
guint16      vd_canary_get_tcp_port  (VdCanary     *self);
guint16      vd_canary_get_udp_port  (VdCanary     *self);
const gchar * const *vd_canary_get_addresses (void);
void         vd_canary_drain         (VdCanary     *self);
void         vd_canary_reset         (VdCanary     *self);
gboolean     vd_canary_lookup        (VdCanary     *self,
                                      const gchar  *address,
                                      const gchar  *transport,
                                      guint        *count,
                                      const gchar **first_peer);
void         vd_canary_sweep         (const gchar  *runtime_dir);

G_END_DECLS
