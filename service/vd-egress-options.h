/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-egress.h"
#include "vd-project.h"
#include "vd-secret-store.h"

G_BEGIN_DECLS

/* The egress options of StartSession, SubmitTask and CheckEgress:
 * "egress" (s), "egress_groups" (as), "egress_allow" (as), with the
 * configuration's defaults for what is not given. */

typedef struct {
  VdEgressMode mode;
  GStrv        groups;
  GStrv        allow;
  GPtrArray   *secrets;   /* VivariumSecret* with placeholders, or NULL */
  GPtrArray   *ssh_keys;  /* VivariumSshKey*, or NULL (vd_ssh_key_store_parse_option) */
} VdEgressOptions;

typedef enum {
  VD_EGRESS_FOR_SESSION,
  VD_EGRESS_FOR_TASK,
} VdEgressPurpose;

/* Everything is checked, the policy built once: a bad group or rule is
 * InvalidArgument here, never a failed start later. */
/* @project: whose defaults (Project.SetEgress) come between the caller's
 * options and the configuration's, or NULL. */
gboolean vd_egress_options_parse (VdConfig        *config,
                                  VdProject       *project,
                                  GVariantDict    *dict,
                                  VdEgressPurpose  purpose,
                                  VdEgressOptions *out,
                                  GError         **error);
/* "secrets" (as), after vd_egress_options_parse(): allowlist only; each
 * secret from @store with a new placeholder, and each of its hosts one the
 * policy lets the proxy intercept on 443 (else the placeholder would leave
 * unswapped): InvalidArgument naming the secret and the host, NotFound
 * for a secret not stored. */
/* @project: whose Secrets stand in when the caller names none, or NULL. */
gboolean vd_egress_options_parse_secrets (VdConfig        *config,
                                          VdSecretStore   *store,
                                          VdProject       *project,
                                          GVariantDict    *dict,
                                          VdEgressOptions *out,
                                          GError         **error);
/* "ssh_keys" (as), after vd_egress_options_parse(): allowlist only; at
 * most VIVARIUM_SSH_KEY_MAX_PER_SESSION stored keys into out->ssh_keys.
 * @project: whose SshKeys stand in when the caller names none, or NULL.
 * InvalidArgument, NotFound. */
gboolean vd_egress_options_parse_ssh_keys (VdConfig        *config,
                                           VdProject       *project,
                                           GVariantDict    *dict,
                                           VdEgressOptions *out,
                                           GError         **error);
void     vd_egress_options_clear (VdEgressOptions *options);

/* CheckEgress's dry run of @destination (host[:port], 443 without a port)
 * against @policy; FALSE with InvalidArgument for a bad destination. */
gboolean vd_egress_check         (VivariumEgressPolicy *policy,
                                  const gchar          *destination,
                                  gboolean             *allowed,
                                  gchar               **reason,
                                  GError              **error);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VdEgressOptions, vd_egress_options_clear)

G_END_DECLS
