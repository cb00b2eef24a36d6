/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdEgressOptions"

#include "config.h"

#include "vivarium-error.h"
#include "vd-egress-options.h"
#include "vd-egress-rules.h"
#include "vd-ssh-key-store.h"

void
vd_egress_options_clear (VdEgressOptions *options)
{
  g_clear_pointer (&options->groups, g_strfreev);
  g_clear_pointer (&options->allow, g_strfreev);
  g_clear_pointer (&options->secrets, g_ptr_array_unref);
  g_clear_pointer (&options->ssh_keys, g_ptr_array_unref);
}

static gboolean
lookup_strv (GVariantDict *dict, const gchar *key, GStrv *out, GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, key, NULL);

  if (v == NULL)
    return TRUE;
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_STRING_ARRAY)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” must be a list of strings (type as)", key);
    return FALSE;
  }
  *out = g_variant_dup_strv (v, NULL);
  return TRUE;
}

static gboolean
parse_mode (VdConfig *config, VdProject *project, GVariantDict *dict, VdEgressPurpose purpose, VdEgressMode *mode,
            GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, "egress", NULL);
  g_autofree gchar *project_mode = project != NULL ? vd_project_get_egress_mode (project) : NULL;
  const gchar *text = project_mode != NULL         ? project_mode
                    : purpose == VD_EGRESS_FOR_TASK ? vd_config_get_egress_task_mode (config)
                                                    : vd_config_get_egress_session_mode (config);

  if (v != NULL && !g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The option “egress” must be a string");
    return FALSE;
  }
  if (v != NULL)
    text = g_variant_get_string (v, NULL);
  if (!vd_egress_mode_from_string (text, mode)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Unknown egress mode “%s” (known: none, allowlist, open)", text);
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_egress_options_parse (VdConfig *config, VdProject *project, GVariantDict *dict, VdEgressPurpose purpose,
                         VdEgressOptions *out, GError **error)
{
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  gboolean given;

  if (!parse_mode (config, project, dict, purpose, &out->mode, error) ||
      !lookup_strv (dict, "egress_groups", &out->groups, error) || !lookup_strv (dict, "egress_allow", &out->allow, error))
    return FALSE;
  given = out->groups != NULL || out->allow != NULL;
  if (given && out->mode != VD_EGRESS_MODE_ALLOWLIST) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Egress groups and rules apply to the “allowlist” mode only, and this one is “%s”",
                 vd_egress_mode_to_string (out->mode));
    return FALSE;
  }
  if (out->allow != NULL && g_strv_length (out->allow) > VD_EGRESS_MAX_EXTRA_RULES) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "%u egress rules were given; at most %u are allowed", g_strv_length (out->allow),
                 VD_EGRESS_MAX_EXTRA_RULES);
    return FALSE;
  }
  if (out->groups == NULL && project != NULL)
    out->groups = vd_project_get_egress_groups (project);
  if (out->groups == NULL)
    out->groups = purpose == VD_EGRESS_FOR_TASK ? vd_config_get_egress_task_groups (config)
                                                : vd_config_get_egress_session_groups (config);
  if (out->mode != VD_EGRESS_MODE_ALLOWLIST)
    return TRUE;
  policy = vd_egress_rules_build (config, (const gchar * const *) out->groups, (const gchar * const *) out->allow, error);
  return policy != NULL;
}

gboolean
vd_egress_check (VivariumEgressPolicy *policy, const gchar *destination, gboolean *allowed, gchar **reason,
                 GError **error)
{
  g_autofree gchar *host = NULL;
  g_autoptr(GError) local = NULL;
  guint16 port = 0;

  if (!g_utf8_validate (destination, -1, NULL) || !vivarium_egress_rule_parse (destination, &host, &port, &local)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "Not a destination host[:port]: %s",
                 local != NULL ? local->message : "not UTF-8");
    return FALSE;
  }
  if (g_str_has_prefix (host, "*")) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A destination names one host, not a wildcard (%s)", destination);
    return FALSE;
  }
  *allowed = vivarium_egress_policy_decide (policy, host, port != 0 ? port : 443, reason);
  return TRUE;
}

/* A name the proxy would intercept for @host: itself, or one below a
 * wildcard. */
static gchar *
probe_name (const gchar *host)
{
  return g_str_has_prefix (host, "*.") ? g_strconcat ("vivarium-probe", host + 1, NULL) : g_strdup (host);
}

static gboolean
check_interceptable (VivariumEgressPolicy *policy, GPtrArray *secrets, GError **error)
{
  for (guint i = 0; i < secrets->len; i++) {
    VivariumSecret *secret = secrets->pdata[i];

    for (guint j = 0; secret->hosts[j] != NULL; j++) {
      g_autofree gchar *probe = probe_name (secret->hosts[j]);

      if (!vivarium_egress_policy_may_intercept (policy, probe, 443)) {
        g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                     "The secret “%s” is for %s, which this session's egress policy does not allow on port 443 "
                     "with interception (no rule allows it, or the rule says no-intercept): its placeholder would "
                     "leave unswapped",
                     secret->name, secret->hosts[j]);
        return FALSE;
      }
    }
  }
  return TRUE;
}

gboolean
vd_egress_options_parse_secrets (VdConfig *config, VdSecretStore *store, VdProject *project, GVariantDict *dict,
                                 VdEgressOptions *out, GError **error)
{
  g_auto(GStrv) names = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;

  if (!lookup_strv (dict, "secrets", &names, error))
    return FALSE;
  /* A project's default goes to its allowlist sessions only: in another
   * mode the guest gets no placeholder, so none can leave unswapped. */
  if (names == NULL && project != NULL && out->mode == VD_EGRESS_MODE_ALLOWLIST)
    names = vd_project_get_secrets (project);
  if (names == NULL || names[0] == NULL)
    return TRUE;
  if (out->mode != VD_EGRESS_MODE_ALLOWLIST) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Secrets need the egress mode “allowlist” (their values are put in by its proxy), and this one is "
                 "“%s”", vd_egress_mode_to_string (out->mode));
    return FALSE;
  }
  out->secrets = vd_secret_store_for_session (store, (const gchar * const *) names, error);
  if (out->secrets == NULL)
    return FALSE;
  policy = vd_egress_rules_build (config, (const gchar * const *) out->groups, (const gchar * const *) out->allow,
                                  error);
  return policy != NULL && check_interceptable (policy, out->secrets, error);
}

gboolean
vd_egress_options_parse_ssh_keys (VdConfig *config, VdProject *project, GVariantDict *dict, VdEgressOptions *out,
                                  GError **error)
{
  g_auto(GStrv) defaults = project != NULL ? vd_project_get_ssh_keys (project) : NULL;

  return vd_ssh_key_store_parse_option (config, dict, out->mode, (const gchar * const *) defaults, &out->ssh_keys,
                                        error);
}
