/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-egress-log.h"

G_BEGIN_DECLS

/* The session's ssh-agent (docs/secrets.md, "SSH keys"): a real
 * `ssh-agent -D` of this proxy's own, on DIR/.agent/agent.sock (0700),
 * holding only the keys of --ssh-keys, and the guest's door to it
 * (ssh-agent.sock, 10.0.2.100:7022), where every message goes through
 * vivarium_ssh_agent_filter() first. The agent dies with the proxy
 * (PR_SET_PDEATHSIG, and the unit's cgroup). */

#define VIVARIUM_EGRESS_SSH_AGENT_DOOR "ssh-agent.sock"

typedef struct _VivariumEgressSshAgent VivariumEgressSshAgent;

/* Reads @keys_path (and removes it, whatever it held), starts the agent,
 * loads each key into it with `ssh-add -` (the key on its stdin, never in
 * a file) and checks the agent lists exactly those keys. */
VivariumEgressSshAgent *vivarium_egress_ssh_agent_start (const gchar  *dir,
                                                         const gchar  *keys_path,
                                                         GError      **error);
/* One guest connection, until it ends or misbehaves; on a pool thread. */
void                    vivarium_egress_ssh_agent_serve (VivariumEgressSshAgent *agent,
                                                         VivariumEgressLog      *log,
                                                         GSocket                *socket);

G_END_DECLS
