/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdEgressRules"

#include "config.h"

#include "vivarium-config-layers.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-egress-rules.h"

static gboolean
add_group_rules (VivariumEgressPolicy *policy, VdConfig *config, VivariumEgressAction action,
                 const gchar *const *rules, const gchar *name, GError **error)
{
  g_autofree gchar *origin = g_strconcat ("group ", name, NULL);

  for (guint i = 0; rules[i] != NULL; i++) {
    g_autoptr(GError) local_error = NULL;
    if (!vivarium_egress_rule_parse (rules[i], NULL, NULL, &local_error)) {
      g_autofree gchar *where = vivarium_config_layers_describe (vd_config_get_data_dir (config),
                                                                 vivarium_config_config_dir ());
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                   "The egress group “%s” in the configuration cannot be used: %s (fix [EgressGroup %s] in %s)",
                   name, local_error->message, name, where);
      return FALSE;
    }
    /* Parsed already: what is left to refuse is the bound. */
    if (!vivarium_egress_policy_add_rule (policy, action, rules[i], origin, &local_error)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "%s", local_error->message);
      return FALSE;
    }
  }
  return TRUE;
}

static gchar *
known_groups (VdConfig *config)
{
  g_auto(GStrv) names = vd_config_get_egress_group_names (config);

  return names[0] != NULL ? g_strjoinv (", ", names) : g_strdup ("none");
}

static gboolean
add_group (VivariumEgressPolicy *policy, VdConfig *config, const gchar *name, GError **error)
{
  g_auto(GStrv) allow = NULL;
  g_auto(GStrv) deny = NULL;

  if (!vivarium_name_validate ("egress group", name, error))
    return FALSE;
  if (!vd_config_get_egress_group (config, name, &allow, &deny, NULL)) {
    g_autofree gchar *known = known_groups (config);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Unknown egress group “%s” (known: %s)", name, known);
    return FALSE;
  }
  return add_group_rules (policy, config, VIVARIUM_EGRESS_DENY, (const gchar * const *) deny, name, error) &&
         add_group_rules (policy, config, VIVARIUM_EGRESS_ALLOW, (const gchar * const *) allow, name, error);
}

static gboolean
add_extras (VivariumEgressPolicy *policy, const gchar *const *extra_allow, GError **error)
{
  guint n = extra_allow != NULL ? g_strv_length ((gchar **) extra_allow) : 0;

  if (n > VD_EGRESS_MAX_EXTRA_RULES) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Too many egress_allow rules: %u given, at most %d", n, VD_EGRESS_MAX_EXTRA_RULES);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    g_autoptr(GError) local_error = NULL;
    if (!vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, extra_allow[i], "session", &local_error)) {
      /* The library's sentence already names the rule, escaped. */
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "%s", local_error->message);
      return FALSE;
    }
  }
  return TRUE;
}

VivariumEgressPolicy *
vd_egress_rules_build (VdConfig *config, const gchar *const *groups,
                       const gchar *const *extra_allow, GError **error)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();

  g_return_val_if_fail (VD_IS_CONFIG (config), NULL);
  for (guint i = 0; groups != NULL && groups[i] != NULL; i++) {
    if (!add_group (policy, config, groups[i], error))
      return NULL;
  }
  if (!add_extras (policy, extra_allow, error))
    return NULL;
  return g_steal_pointer (&policy);
}
