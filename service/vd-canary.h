/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-canary-net.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* The canary network of one self-test run: a network namespace joined to
 * the host's netns by a veth pair, with listeners on addresses no real
 * network uses, plus listeners on host loopback. vivarium-canary-net makes
 * them in a transient unit of its own and hands the daemon the listeners;
 * the daemon only counts what reaches them. */

#define VD_TYPE_CANARY (vd_canary_get_type ())
G_DECLARE_FINAL_TYPE (VdCanary, vd_canary, VD, CANARY, GObject)

VdCanary    *vd_canary_new           (void);
void         vd_canary_setup_async   (VdCanary           *self,
                                      VdSystemd          *systemd,
                                      GCancellable       *cancellable,
                                      GAsyncReadyCallback callback,
                                      gpointer            user_data);
gboolean     vd_canary_setup_finish  (VdCanary     *self,
                                      GAsyncResult *result,
                                      GError      **error);
gboolean     vd_canary_take_listeners (VdCanary    *self,
                                       gint         sock,
                                       GError     **error);
/* Closes the listeners, deletes the veth and leaves no unit behind. */
void         vd_canary_teardown      (VdCanary     *self);
/* The unit of this run's vivarium-canary-net (NULL before the setup). */
const gchar *vd_canary_get_unit      (VdCanary     *self);
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
