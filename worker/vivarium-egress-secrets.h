/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-egress-context.h"

G_BEGIN_DECLS

/* --secrets and --upstream-ca (docs/secrets.md, "The proxy's side"): the
 * session's secrets loaded and their file removed (the values then live
 * only in this process), the session's CA made and DIR/ca.pem written, the
 * store upstream certificates are checked against. Before READY=1; any
 * failure refuses the start. secrets_path NULL: no secrets, no CA, no
 * interception (upstream_ca_path is still loaded when given). */
gboolean vivarium_egress_load_secrets (VivariumEgressContext  *ctx,
                                       const gchar            *dir,
                                       const gchar            *secrets_path,
                                       const gchar            *upstream_ca_path,
                                       GError                **error);

G_END_DECLS
