/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-egress.h"
#include "vivarium-dbus-generated.h"
#include "vivarium-ssh-key.h"

G_BEGIN_DECLS

/* The host's SSH keys (docs/secrets.md, "SSH keys"): beside the secrets,
 * one root-only file per key in STATE/secrets/ (0700), NAME.sshkey (0600,
 * vivarium_ssh_keys_save()). A sibling of VdSecretStore rather than part
 * of it: a key is not a secret (no hosts, no header, no placeholder; it is
 * used by an agent, not put into requests), so neither record grows fields
 * the other must ignore, and each file keeps one owner. It answers
 * Manager.AddSshKey, ListSshKeys and RemoveSshKey itself (the boundary has
 * asked polkit already). No private key ever reaches a log, a property or
 * an error. */

#define VD_TYPE_SSH_KEY_STORE (vd_ssh_key_store_get_type ())
G_DECLARE_FINAL_TYPE (VdSshKeyStore, vd_ssh_key_store, VD, SSH_KEY_STORE, GObject)

VdSshKeyStore *vd_ssh_key_store_new     (const gchar *dir);
/* The store of @config's state directory. */
VdSshKeyStore *vd_ssh_key_store_new_for (VdConfig    *config);
void           vd_ssh_key_store_connect (VdSshKeyStore       *self,
                                         VivariumDBusManager *manager);

/* Checks @private_key with `ssh-keygen -y` and stores it under @name with
 * its public key and fingerprint. InvalidArgument, Exists (unless
 * @replace), Failed. */
gboolean       vd_ssh_key_store_add     (VdSshKeyStore  *self,
                                         const gchar    *name,
                                         GBytes         *private_key,
                                         gboolean        replace,
                                         GError        **error);
gboolean       vd_ssh_key_store_remove  (VdSshKeyStore  *self,
                                         const gchar    *name,
                                         GError        **error);
/* Every stored key, private parts dropped (NULL), sorted by name. */
GPtrArray     *vd_ssh_key_store_list    (VdSshKeyStore  *self,
                                         GError        **error);

/* The keys @names (at most VIVARIUM_SSH_KEY_MAX_PER_SESSION, each once),
 * private parts loaded: VivariumSshKey*. InvalidArgument, NotFound. */
GPtrArray     *vd_ssh_key_store_for_session (VdSshKeyStore       *self,
                                             const gchar * const *names,
                                             GError             **error);

/* The option "ssh_keys" (as) of StartSession and SubmitTask: at most
 * VIVARIUM_SSH_KEY_MAX_PER_SESSION stored keys, each once, allowlist only
 * (the agent is in its proxy). Without the option, @defaults (the
 * project's SshKeys, or NULL) for an allowlist session. *out:
 * VivariumSshKey*, or NULL when none is named. InvalidArgument, NotFound. */
gboolean       vd_ssh_key_store_parse_option (VdConfig            *config,
                                              GVariantDict        *dict,
                                              VdEgressMode         mode,
                                              const gchar * const *defaults,
                                              GPtrArray          **out,
                                              GError             **error);

G_END_DECLS
