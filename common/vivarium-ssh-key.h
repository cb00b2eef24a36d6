/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* An SSH key (docs/secrets.md, "SSH keys"): an OpenSSH private key that
 * never enters a guest. A session that names it gets an agent in its
 * egress proxy that lists and signs with it, and nothing else.
 *
 * - name: as a secret's name, [A-Za-z_][A-Za-z0-9_]{0,63} (one rule for
 *   every name the daemon stores on a guest's behalf).
 * - public_key: "TYPE BASE64" as `ssh-keygen -y` printed it, without its
 *   comment; printable ASCII, at most VIVARIUM_SSH_KEY_MAX_PUBLIC bytes.
 * - fingerprint: "SHA256:" + the unpadded base64 of the SHA-256 of the
 *   key's blob (what `ssh-keygen -l` prints); computed from public_key.
 * - private_key: an unencrypted OpenSSH private key, PEM-armoured,
 *   1..VIVARIUM_SSH_KEY_MAX_PRIVATE bytes.
 *
 * The same file format carries the store's records (one key;
 * /var/lib/vivarium/secrets/NAME.sshkey, root 0600) and a session's keys
 * for its proxy (DIR/ssh-keys, the proxy's uid 0400; read at start and
 * removed). Never log private_key. */

#define VIVARIUM_SSH_KEY_MAX_PRIVATE     16384
#define VIVARIUM_SSH_KEY_MAX_PUBLIC      4096
#define VIVARIUM_SSH_KEY_MAX_PER_SESSION 8
/* How many SSH keys the host's store may hold (AddSshKey: NoSpace past it). */
#define VIVARIUM_SSH_KEY_MAX_STORED      64
#define VIVARIUM_SSH_KEY_PEM_BEGIN       "-----BEGIN OPENSSH PRIVATE KEY-----"
/* The guest's agent: the proxy's door in the guest, and the unix socket a
 * guest with socat makes for it ($SSH_AUTH_SOCK). */
#define VIVARIUM_SSH_AGENT_PORT          7022
#define VIVARIUM_SSH_AGENT_GUEST_SOCKET  "/run/vivarium-ssh-agent.sock"

typedef struct {
  gchar  *name;
  gchar  *public_key;
  gchar  *fingerprint;
  GBytes *private_key;
  gint64  added_at;     /* seconds since the epoch */
} VivariumSshKey;

/* G_IO_ERROR INVALID_ARGUMENT naming the key, never its private part;
 * checks the fingerprint against the public key. */
gboolean        vivarium_ssh_key_check       (const VivariumSshKey *key,
                                              GError              **error);
void            vivarium_ssh_key_free        (VivariumSshKey *key);
/* Wipes and drops the private key (a listing's record). */
void            vivarium_ssh_key_drop_private (VivariumSshKey *key);
/* The key's blob (the base64 field of "TYPE BASE64"), NULL if malformed. */
GBytes         *vivarium_ssh_key_public_blob (const gchar *public_key);
/* "SHA256:…" of a public key line, NULL if malformed. */
gchar          *vivarium_ssh_key_fingerprint (const gchar *public_key);

/* A GKeyFile text written with vivarium_file_write_durably(); load refuses
 * (G_IO_ERROR naming the path) a file that is not whole or holds a key
 * that does not pass vivarium_ssh_key_check(). Arrays of VivariumSshKey*. */
gboolean        vivarium_ssh_keys_save       (GPtrArray    *keys,
                                              const gchar  *path,
                                              gint          mode,
                                              GError      **error);
GPtrArray      *vivarium_ssh_keys_load       (const gchar  *path,
                                              GError      **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumSshKey, vivarium_ssh_key_free)

G_END_DECLS
