/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "vivarium-egress-budget.h"

G_BEGIN_DECLS

/* Bytes both ways between the guest's connection and the upstream one, on
 * the connection's own thread: poll(), a fixed buffer each way, half-close
 * passed on, every chunk counted against the session's budget. */

/* Per direction; larger than a whole ClientHello (it may be held here). */
#define VIVARIUM_SPLICE_BUFFER (64 * 1024)
/* A connection with no byte either way for this long is closed. */
#define VIVARIUM_SPLICE_IDLE_SEC 300

/* Looks at the first bytes the guest sends (held back until it answers):
 * NEED_MORE, PASS (they go on, nothing more is inspected) or CUT (*reason). */
typedef enum {
  VIVARIUM_INSPECT_NEED_MORE,
  VIVARIUM_INSPECT_PASS,
  VIVARIUM_INSPECT_CUT,
} VivariumInspect;

typedef VivariumInspect (*VivariumSpliceInspect) (const guint8  *data,
                                                  gsize          len,
                                                  gchar        **reason,
                                                  gpointer       user_data);

/* Looks at every chunk the guest sends, as it comes (before it is counted
 * or sent): FALSE cuts the connection (*reason). */
typedef gboolean (*VivariumSpliceScan) (const guint8  *data,
                                        gsize          len,
                                        gchar        **reason,
                                        gpointer       user_data);

typedef struct {
  int                    client_fd;
  int                    upstream_fd;
  VivariumEgressBudget  *budget;
  VivariumSpliceInspect  inspect;          /* or NULL */
  gpointer               inspect_data;
  gint64                 inspect_deadline; /* monotonic µs */
  VivariumSpliceScan     scan;             /* or NULL */
  gpointer               scan_data;
  /* out */
  guint64                bytes_up;
  guint64                bytes_down;
} VivariumSplice;

/* Returns FALSE when the connection was cut (by the budget, the inspector
 * or the inspection deadline), *reason saying why; TRUE when both sides
 * ended, or it went idle, or a side failed. initial: guest bytes already
 * read (they are inspected and counted like the rest). */
gboolean vivarium_egress_splice (VivariumSplice  *splice,
                                 const guint8    *initial,
                                 gsize            initial_len,
                                 gchar          **reason);

G_END_DECLS
