/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "vivarium-secret.h"

G_BEGIN_DECLS

/* Finds a session's placeholders (docs/secrets.md) in bytes the guest
 * sends: as written, in either case; percent-encoded or JSON \u-escaped
 * (each up to three times over, mixed); base64 or base64url at any of the
 * three alignments. A pure function over the guest's bytes, so the fuzz
 * harness and the unit tests run it alone.
 *
 * Not seen (and said so in docs/secrets.md): a placeholder compressed,
 * encrypted, hex-encoded, base64 with line breaks inside it, or cut into
 * pieces the guest reassembles elsewhere. */

/* The longest form a placeholder takes here (JSON: six bytes a
 * character): a stream scan keeps this many bytes of the previous chunk. */
#define VIVARIUM_PLACEHOLDER_OVERLAP (6 * VIVARIUM_SECRET_PLACEHOLDER_LEN)

typedef struct _VivariumPlaceholders VivariumPlaceholders;

/* secrets: VivariumSecret* with placeholders, borrowed (they outlive the
 * set). */
VivariumPlaceholders *vivarium_placeholders_new  (GPtrArray *secrets);
void                  vivarium_placeholders_free (VivariumPlaceholders *set);

/* The secret whose placeholder data holds, in any form above, or NULL. */
const VivariumSecret *vivarium_placeholders_find (VivariumPlaceholders *set,
                                                  const guint8         *data,
                                                  gsize                 len);

/* A stream's scan: each chunk is looked at together with the last
 * VIVARIUM_PLACEHOLDER_OVERLAP bytes before it, so a placeholder split
 * across reads is found when its last byte comes. Memory: the overlap. */
typedef struct {
  VivariumPlaceholders *set;
  guint8                tail[VIVARIUM_PLACEHOLDER_OVERLAP];
  gsize                 tail_len;
} VivariumPlaceholderScan;

void                  vivarium_placeholder_scan_init (VivariumPlaceholderScan *scan,
                                                      VivariumPlaceholders    *set);
const VivariumSecret *vivarium_placeholder_scan_feed (VivariumPlaceholderScan *scan,
                                                      const guint8            *data,
                                                      gsize                    len);

/* "a secret's placeholder (NAME) was sent to HOST:PORT in the WHERE:
 * refused", the decision log's reason (docs/secrets.md). */
gchar                *vivarium_placeholder_reason    (const VivariumSecret *secret,
                                                      const gchar          *host,
                                                      guint16               port,
                                                      const gchar          *where);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumPlaceholders, vivarium_placeholders_free)

G_END_DECLS
