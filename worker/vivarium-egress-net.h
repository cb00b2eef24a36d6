/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>
#include <glib.h>

G_BEGIN_DECLS

/* The guest's user-mode network of an `allowlist` session, run here rather
 * than in QEMU (docs/egress.md, "How allowlist is wired"): QEMU's
 * `-netdev stream` connects to DIR/net.sock and sends the guest's Ethernet
 * frames, each behind a 4-byte big-endian length; a restricted libslirp on
 * a thread of its own answers them, and its only forwards lead from
 * 10.0.2.100:{3128,80,443,53} into this proxy's own doors. No process is
 * started per guest connection, and QEMU needs no network of its own. */

/* The largest frame either side passes: QEMU's own NET_BUFSIZE (4096 +
 * 65536), the most its stream netdev ever sends. A larger length is
 * garbage: the stream is closed. */
#define VIVARIUM_EGRESS_NET_MAX_FRAME (4096 + 65536)
/* Bytes of frames queued towards QEMU at most; past it a frame is dropped
 * (the guest's TCP sends it again later, as on a congested link). */
#define VIVARIUM_EGRESS_NET_MAX_QUEUED (4 * 1024 * 1024)

typedef struct {
  const gchar        *dir;            /* net.sock is made here; the doors are here */
  int                 listen_fd;      /* net.sock as the daemon made it, listening; -1: make it */
  uid_t               peer_uid;       /* the only uid that may connect (QEMU's) */
  const gchar        *guest_address;  /* the doors' address in the guest */
  const gchar *const *doors;          /* socket names in dir, for ports[] */
  const guint16      *ports;
  guint               n_doors;
} VivariumEgressNetConfig;

/* Takes listen_fd, or binds DIR/net.sock, and starts the network's thread;
 * the doors must be listening already (libslirp connects to them per guest
 * connection). Runs until the process ends. */
gboolean vivarium_egress_net_start (const VivariumEgressNetConfig *config,
                                    GError                       **error);

G_END_DECLS
