/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Which of the guest's ssh-agent requests reach the real agent
 * (docs/secrets.md, "SSH keys"). A message is a 4-byte big-endian length,
 * then that many bytes: a type, then its contents (draft-miller-ssh-agent).
 * Only two types pass: REQUEST_IDENTITIES (the agent holds only the
 * session's keys anyway) and SIGN_REQUEST for one of @blobs, whole and
 * well-formed. Everything else (add, remove, lock, extensions, unknown
 * types, a sign request for any other key or with trailing bytes) is
 * answered SSH_AGENT_FAILURE here and never forwarded. */

/* A message body's length at most, either way; a longer one closes the
 * connection (a real request is a few KiB: a key blob and a hash). */
#define VIVARIUM_SSH_AGENT_MAX_MESSAGE (256 * 1024)

#define VIVARIUM_SSH_AGENT_FAILURE            5
#define VIVARIUM_SSH_AGENTC_REQUEST_IDENTITIES 11
#define VIVARIUM_SSH_AGENT_IDENTITIES_ANSWER  12
#define VIVARIUM_SSH_AGENTC_SIGN_REQUEST      13
#define VIVARIUM_SSH_AGENT_SIGN_RESPONSE      14

typedef enum {
  VIVARIUM_SSH_AGENT_REFUSE,
  VIVARIUM_SSH_AGENT_RELAY_IDENTITIES,
  VIVARIUM_SSH_AGENT_RELAY_SIGN,
} VivariumSshAgentVerdict;

/* @body: the message after its length (1..MAX_MESSAGE bytes). @blobs:
 * GBytes*, the session's keys. For RELAY_SIGN, *key_index is the key's
 * index in @blobs; for REFUSE, *reason a sentence for the decision log
 * (static, never the guest's bytes). */
VivariumSshAgentVerdict vivarium_ssh_agent_filter (const guint8  *body,
                                                   gsize          len,
                                                   GPtrArray     *blobs,
                                                   guint         *key_index,
                                                   const gchar  **reason);

G_END_DECLS
