/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A session's own certificate authority (docs/secrets.md): made at the
 * proxy's start with GnuTLS (ECDSA P-256), its key in this process's memory
 * only, its name constraints permitting only the secrets' hosts (and no IP
 * address), valid from an hour before the start to 30 days after. It signs
 * a certificate per name the proxy intercepts, minted on demand and kept
 * (at most VIVARIUM_EGRESS_CA_MAX_CACHED names; then the cache starts
 * over). Thread-safe. */

#define VIVARIUM_EGRESS_CA_NAME "ca.pem"
#define VIVARIUM_EGRESS_CA_MAX_CACHED 256

typedef struct _VivariumEgressCa VivariumEgressCa;

/* session: for the subject, "CN=Vivarium session CA <session>"; hosts:
 * every secret's hosts ("api.example.org", "*.example.org"). */
VivariumEgressCa *vivarium_egress_ca_new             (const gchar         *session,
                                                      const gchar *const  *hosts,
                                                      GError             **error);
void              vivarium_egress_ca_free            (VivariumEgressCa *ca);

/* The CA's certificate, PEM, written 0644 (the daemon installs it in the
 * guest). */
gboolean          vivarium_egress_ca_write           (VivariumEgressCa  *ca,
                                                      const gchar       *path,
                                                      GError           **error);

/* A certificate for name (normalised), with its key, signed by the CA. */
GTlsCertificate  *vivarium_egress_ca_certificate_for (VivariumEgressCa  *ca,
                                                      const gchar       *name,
                                                      GError           **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressCa, vivarium_egress_ca_free)

G_END_DECLS
