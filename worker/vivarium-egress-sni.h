/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The TLS server name a client asks for, read from the first bytes it sends
 * (its ClientHello), without TLS: a pure function over bytes the guest
 * chose, so every length is checked against the one that encloses it. */

/* A ClientHello larger than this (records included) is refused, not read on:
 * real ones are 0.5–2 KiB, post-quantum key shares included. */
#define VIVARIUM_SNI_MAX_HELLO (16 * 1024)

typedef enum {
  VIVARIUM_SNI_NEED_MORE,   /* a prefix of a ClientHello: read more */
  VIVARIUM_SNI_NOT_TLS,     /* the first bytes are not a TLS handshake */
  VIVARIUM_SNI_NONE,        /* a whole ClientHello naming no server */
  VIVARIUM_SNI_FOUND,       /* a whole ClientHello; *name is its server name */
  VIVARIUM_SNI_MALFORMED,   /* a length that lies, or not a ClientHello */
  VIVARIUM_SNI_TOO_LARGE,   /* longer than VIVARIUM_SNI_MAX_HELLO */
} VivariumSniResult;

/* data: the bytes received so far. *name (FOUND only) is the name as sent,
 * NUL-free, at most 255 bytes; the caller normalises it. */
VivariumSniResult vivarium_egress_sni_parse (const guint8 *data,
                                             gsize         len,
                                             gchar       **name);

G_END_DECLS
