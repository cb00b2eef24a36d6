/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-egress-policy.h"
#include "vd-config.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* A session's egress proxy (docs/egress.md): its directory under
 * /run/vivarium/egress/, its unit vivarium-egress-<session>.service, run
 * as its own uid, and what it decided. The session starts it before QEMU
 * and connects QEMU's network device to the proxy's network (net.sock). */

typedef enum {
  VD_EGRESS_MODE_OPEN = 0,   /* the default of internal scratch sessions */
  VD_EGRESS_MODE_ALLOWLIST,
  VD_EGRESS_MODE_NONE,
} VdEgressMode;

/* Where the guest finds the proxy on its user-mode network. */
#define VD_EGRESS_GUEST_ADDRESS "10.0.2.100"
#define VD_EGRESS_PROXY_PORT    VIVARIUM_EGRESS_PROXY_PORT

const gchar *vd_egress_mode_to_string   (VdEgressMode  mode);
gboolean     vd_egress_mode_from_string (const gchar  *text,
                                         VdEgressMode *mode);

#define VD_TYPE_EGRESS (vd_egress_get_type ())
G_DECLARE_FINAL_TYPE (VdEgress, vd_egress, VD, EGRESS, GObject)

/* Takes @policy. @deny_list: the guard's CIDRs (borrowed). */
VdEgress    *vd_egress_new          (VdConfig             *config,
                                     VdSystemd            *systemd,
                                     const gchar          *session_id,
                                     guint32               proxy_uid,
                                     guint32               peer_uid,
                                     VivariumEgressPolicy *policy,
                                     GPtrArray            *deny_list);
/* The DNS relay's resolv.conf (vd-dns-relay.h), or NULL: where the host's
 * own nameservers are on loopback or a private address, both guard layers
 * on the proxy (rightly) drop its queries there. Before the start. */
void         vd_egress_set_resolv_conf (VdEgress    *self,
                                        const gchar *path);
/* The session's secrets with their placeholders (docs/secrets.md), or
 * NULL: written for the proxy as DIR/secrets (its uid, 0400; it removes
 * the file once read) and the proxy then makes the session's CA. Before
 * the start. */
void         vd_egress_set_secrets  (VdEgress    *self,
                                     GPtrArray   *secrets);
/* The session's SSH keys (docs/secrets.md, "SSH keys"), or NULL: written
 * for the proxy as DIR/ssh-keys (its uid, 0400; removed once read), whose
 * agent then serves them on 10.0.2.100:7022. Before the start. */
void         vd_egress_set_ssh_keys (VdEgress    *self,
                                     GPtrArray   *ssh_keys);
/* The session CA's certificate (PEM) the proxy wrote, once started with
 * secrets; NULL with an error otherwise. */
gchar       *vd_egress_dup_ca_pem   (VdEgress    *self,
                                     GError     **error);
const gchar *vd_egress_get_unit     (VdEgress *self);
const gchar *vd_egress_get_dir      (VdEgress *self);
/* "starting", "running", "failed"; and why it failed, or "". */
const gchar *vd_egress_get_state    (VdEgress *self);
const gchar *vd_egress_get_reason   (VdEgress *self);
/* The proxy ended on its own after it had started (killed, crashed), and
 * vd_egress_get_reason says how in systemd's words. */
gboolean     vd_egress_died         (VdEgress *self);
GStrv        vd_egress_describe_rules (VdEgress *self);
/* The unix socket QEMU's `-netdev stream` connects to: the guest's
 * user-mode network, run by the proxy (DIR/net.sock). */
gchar       *vd_egress_net_socket   (VdEgress *self);
VivariumEgressPolicy *vd_egress_get_policy (VdEgress *self);

/* Returns once the proxy said READY=1 (its sockets are bound). */
void         vd_egress_start_async  (VdEgress           *self,
                                     GCancellable       *cancellable,
                                     GAsyncReadyCallback callback,
                                     gpointer            user_data);
gboolean     vd_egress_start_finish (VdEgress      *self,
                                     GAsyncResult  *result,
                                     GError       **error);
/* Stops the unit, keeps the decision log as
 * /var/lib/vivarium/logs/egress/<session>.jsonl, removes the directory. */
void         vd_egress_stop_sync    (VdEgress *self);
/* The same without blocking: a session's teardown step. */
void         vd_egress_stop_async   (VdEgress           *self,
                                     GAsyncReadyCallback callback,
                                     gpointer            user_data);
gboolean     vd_egress_stop_finish  (VdEgress      *self,
                                     GAsyncResult  *result,
                                     GError       **error);
/* The decision log: the live one while the proxy runs, the kept one after. */
gchar       *vd_egress_dup_log_path (VdEgress *self);

/* The kept log of a session, whether or not it still exists. */
gchar       *vd_egress_kept_log_path (VdConfig    *config,
                                      const gchar *session_id);

G_END_DECLS
