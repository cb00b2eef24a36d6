/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-egress-policy.h"
#include "vd-config.h"

G_BEGIN_DECLS

#define VD_EGRESS_MAX_EXTRA_RULES VIVARIUM_EGRESS_MAX_EXTRA_RULES

/* The policy of an allowlist session: the named rule groups from the config
 * layers (their Allow= and Deny=, origin "group NAME") and the caller's
 * extra allow rules (origin "session"). groups and extra_allow may be NULL.
 * Refusals are VIVARIUM_ERROR_INVALID_ARGUMENT with a sentence (an unknown
 * group, a bad extra rule, too many rules); a group whose own rules are bad
 * is VIVARIUM_ERROR_FAILED naming the group and where the config lives,
 * because a rule skipped silently could be a deny. */
VivariumEgressPolicy *vd_egress_rules_build (VdConfig            *config,
                                             const gchar * const *groups,
                                             const gchar * const *extra_allow,
                                             GError             **error);

G_END_DECLS
