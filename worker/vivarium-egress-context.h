/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-egress-budget.h"
#include "vivarium-egress-ca.h"
#include "vivarium-egress-log.h"
#include "vivarium-egress-placeholder.h"
#include "vivarium-egress-policy.h"
#include "vivarium-egress-upstream.h"

G_BEGIN_DECLS

/* What every connection of one session's proxy shares: set up by main()
 * before the first connection, read-only afterwards except through the
 * parts' own locks. */
typedef struct {
  VivariumEgressPolicy   *policy;
  GMutex                  policy_lock;   /* the policy's calls are not promised thread-safe */
  VivariumEgressDenyList *deny;
  VivariumEgressLog      *log;
  VivariumEgressBudget   *budget;
  GInetAddress           *guest_address; /* what the DNS answers for an allowed name */
  /* Secrets (docs/secrets.md); all NULL without --secrets. */
  GPtrArray              *secrets;      /* VivariumSecret*, with placeholders */
  VivariumPlaceholders   *placeholders;
  VivariumEgressCa       *ca;
  GTlsDatabase           *upstream_ca;  /* --upstream-ca, or the system's */
} VivariumEgressContext;

/* The host as the policy takes it: an IPv6 literal in brackets. NULL when
 * it is not a valid destination. */
gchar    *vivarium_egress_context_normalize   (const gchar *host);
gboolean  vivarium_egress_context_decide      (VivariumEgressContext  *ctx,
                                               const gchar            *host,
                                               guint16                 port,
                                               gchar                 **reason);
gboolean  vivarium_egress_context_allows_name (VivariumEgressContext  *ctx,
                                               const gchar            *name);
/* A placeholder in text the guest sent to host:port (where: "URL", "SNI",
 * …): NULL when there is none, else the reason to refuse it with. */
gchar    *vivarium_egress_context_placeholder (VivariumEgressContext  *ctx,
                                               const gchar            *text,
                                               gsize                   len,
                                               const gchar            *host,
                                               guint16                 port,
                                               const gchar            *where);

G_END_DECLS
