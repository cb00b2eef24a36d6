/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "vivarium-egress-budget.h"

G_BEGIN_DECLS

/* The proxy's decision log, DIR/decisions.jsonl (one JSON object a line, at
 * most max_entries, then one "log-full" line), and DIR/usage (counts, bytes,
 * rewritten atomically after each decision). docs/egress.md has the format.
 * Never a payload: hosts normalised (or "(invalid)"), reasons the proxy's
 * own sentences. Thread-safe. */

/* The default of --log-max-entries. */
#define VIVARIUM_EGRESS_LOG_DEFAULT_ENTRIES 10000
#define VIVARIUM_EGRESS_LOG_NAME "decisions.jsonl"
#define VIVARIUM_EGRESS_USAGE_NAME "usage"

typedef struct {
  const gchar *host;        /* as the guest asked (normalised here); NULL = "(invalid)" */
  guint16      port;        /* 0 for a DNS question */
  const gchar *via;         /* "proxy", "http", "tls", "dns" */
  gboolean     allowed;
  const gchar *reason;
  guint64      bytes_up;
  guint64      bytes_down;
  gint64       duration_ms;
} VivariumEgressDecision;

typedef struct _VivariumEgressLog VivariumEgressLog;

VivariumEgressLog *vivarium_egress_log_new    (const gchar           *dir,
                                               guint                  max_entries,
                                               VivariumEgressBudget  *budget,
                                               GError               **error);
void               vivarium_egress_log_free   (VivariumEgressLog *log);
void               vivarium_egress_log_record (VivariumEgressLog            *log,
                                               const VivariumEgressDecision *decision);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressLog, vivarium_egress_log_free)

G_END_DECLS
