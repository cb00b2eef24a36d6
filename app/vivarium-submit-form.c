/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-submit-form.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-egress-policy.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-secret.h"
#include "vivarium-ssh-key.h"

static const char *
text_or_empty (const char *text)
{
  return text != NULL ? text : "";
}

static gboolean
is_blank (const char *text)
{
  for (; *text != '\0'; text = g_utf8_next_char (text))
    if (!g_unichar_isspace (g_utf8_get_char (text)))
      return FALSE;
  return TRUE;
}

/* A whole number in [min, max] as typed, or "" (the daemon's default).
 * *value is 0 for "". */
static gboolean
parse_uint (const char *text, guint64 min, guint64 max, guint64 *value)
{
  *value = 0;
  if (*text == '\0')
    return TRUE;
  return g_ascii_string_to_unsigned (text, 10, min, max, value, NULL);
}

char **
vivarium_submit_split_groups (const char *text)
{
  g_auto(GStrv) parts = g_strsplit (text_or_empty (text), ",", -1);
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; parts[i] != NULL; i++) {
    g_strstrip (parts[i]);
    if (parts[i][0] != '\0')
      g_ptr_array_add (out, g_strdup (parts[i]));
  }
  if (out->len == 0)
    return NULL;
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&out), FALSE);
}

/* The egress part both dialogs share; NULL when it is right. */
static char *
check_egress (const char *egress, const char *groups_text)
{
  g_auto(GStrv) groups = vivarium_submit_split_groups (groups_text);

  if (*egress != '\0' && !vivarium_egress_mode_is_valid (egress))
    return g_strdup_printf (_("Unknown egress mode “%s”."), egress);
  /* The daemon's default may well be allowlist; only another mode chosen
   * here makes groups pointless (the daemon refuses them then). */
  if (groups != NULL && *egress != '\0' && strcmp (egress, VIVARIUM_EGRESS_MODE_ALLOWLIST) != 0)
    return g_strdup (_("Rule groups apply only to the allowlist egress mode."));
  for (guint i = 0; groups != NULL && groups[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;

    if (!vivarium_name_validate ("egress group", groups[i], &error))
      return g_strdup_printf (_("“%s” is not a rule group name: letters, digits, “-”, “_” and “.”."),
                              groups[i]);
  }
  return NULL;
}

/* Secrets and SSH keys by name, as the daemon's rule for them has it: a
 * few, each named once, and only for the allowlist mode (the proxy swaps
 * the values in; no other mode has one). */
static char *
check_stored_names (const char *egress, const char *text, guint max, const char *what)
{
  g_auto(GStrv) names = vivarium_submit_split_groups (text);
  guint n = names != NULL ? g_strv_length (names) : 0;

  if (n == 0)
    return NULL;
  if (*egress != '\0' && strcmp (egress, VIVARIUM_EGRESS_MODE_ALLOWLIST) != 0)
    /* TRANSLATORS: %s is "Secrets" or "SSH keys" */
    return g_strdup_printf (_("%s apply only to the allowlist egress mode."), what);
  if (n > max)
    return g_strdup_printf (_("%s: at most %u per task or session."), what, max);
  for (guint i = 0; i < n; i++) {
    if (!vivarium_secret_name_is_valid (names[i]))
      return g_strdup_printf (_("“%s” is not a name of the store: a letter or “_”, then letters, digits or “_”."),
                              names[i]);
    for (guint j = 0; j < i; j++)
      if (strcmp (names[i], names[j]) == 0)
        return g_strdup_printf (_("“%s” is named twice."), names[i]);
  }
  return NULL;
}

static char *
check_hosts_side (const char *egress, const char *groups, const char *secrets, const char *ssh_keys)
{
  char *why;

  if ((why = check_egress (egress, groups)) != NULL ||
      (why = check_stored_names (egress, secrets, VIVARIUM_SECRET_MAX_PER_SESSION, _("Secrets"))) != NULL)
    return why;
  return check_stored_names (egress, ssh_keys, VIVARIUM_SSH_KEY_MAX_PER_SESSION, _("SSH keys"));
}

static char *
check_timeout (const char *timeout, guint64 min)
{
  guint64 value;

  if (!parse_uint (timeout, min, VIVARIUM_TIMEOUT_MAX_SEC, &value))
    return g_strdup_printf (_("The time limit must be a whole number of seconds, %u to %u (or empty for the default)."),
                            (guint) min, (guint) VIVARIUM_TIMEOUT_MAX_SEC);
  return NULL;
}

static char *
check_worker (const VivariumTaskForm *form)
{
  const char *instructions = text_or_empty (form->instructions);
  gsize len = strlen (instructions);

  if (len > VIVARIUM_TASK_INSTRUCTIONS_MAX) {
    g_autofree char *size = g_strdup_printf ("%" G_GSIZE_FORMAT, len);

    return g_strdup_printf (_("The instructions are %s bytes long; at most %u are sent."),
                            size, (guint) VIVARIUM_TASK_INSTRUCTIONS_MAX);
  }
  if (!g_utf8_validate (instructions, (gssize) len, NULL))
    return g_strdup (_("The instructions are not valid UTF-8 text."));
  if (form->worker == VIVARIUM_SUBMIT_WORKER_AGENT) {
    if (is_blank (instructions))
      return g_strdup (_("Write the instructions: what the agent is asked to do."));
    return NULL;
  }
  if (form->script_error != NULL)
    return g_strdup (form->script_error);
  if (form->script == NULL)
    return g_strdup (_("Choose the script file: the worker program to run."));
  if (g_bytes_get_size (form->script) == 0)
    return g_strdup (_("The script file is empty."));
  if (g_bytes_get_size (form->script) > VIVARIUM_TASK_SCRIPT_MAX)
    return g_strdup_printf (_("The script is larger than %u MiB."), (guint) (VIVARIUM_TASK_SCRIPT_MAX >> 20));
  return NULL;
}

/* The first thing that keeps the task from being submitted, as a sentence
 * for the dialog; NULL when it is ready. */
char *
vivarium_task_form_check (const VivariumTaskForm *form)
{
  g_autoptr(GError) error = NULL;
  const char *project = text_or_empty (form->project);
  const char *verify = text_or_empty (form->verify);
  char *why;

  if (*project == '\0')
    return g_strdup (_("Choose a project: its dataset is what the worker changes."));
  if (!vivarium_project_name_validate (project, &error))
    return g_strdup_printf (_("“%s” is not a project name."), project);
  if (*text_or_empty (form->image) == '\0')
    return g_strdup (_("Choose a frozen image (freeze one on the Images page)."));
  if ((why = check_worker (form)) != NULL)
    return why;
  if (strlen (verify) > VIVARIUM_REPORT_VERIFY_CMD_MAX)
    return g_strdup_printf (_("The verification command is longer than %u bytes."),
                            (guint) VIVARIUM_REPORT_VERIFY_CMD_MAX);
  if (*verify != '\0' && is_blank (verify))
    return g_strdup (_("The verification command is only spaces: leave it empty or give a command."));
  if ((why = check_timeout (text_or_empty (form->timeout), 1)) != NULL)
    return why;
  return check_hosts_side (text_or_empty (form->egress), form->groups, form->secrets, form->ssh_keys);
}

static void
add_list (GVariantBuilder *b, const char *key, const char *text)
{
  g_auto(GStrv) names = vivarium_submit_split_groups (text);

  if (names != NULL)
    g_variant_builder_add (b, "{sv}", key, g_variant_new_strv ((const char * const *) names, -1));
}

static void
add_egress (GVariantBuilder *b, const char *egress, const char *groups_text, const char *secrets,
            const char *ssh_keys)
{
  if (*egress != '\0')
    g_variant_builder_add (b, "{sv}", "egress", g_variant_new_string (egress));
  add_list (b, "egress_groups", groups_text);
  add_list (b, "secrets", secrets);
  add_list (b, "ssh_keys", ssh_keys);
}

static void
add_uint (GVariantBuilder *b, const char *key, const char *text)
{
  guint64 value;

  if (*text != '\0' && g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT32, &value, NULL))
    g_variant_builder_add (b, "{sv}", key, g_variant_new_uint32 ((guint32) value));
}

/* SubmitTask's options: only what was given; the daemon owns the
 * defaults. Call after vivarium_task_form_check() said it is ready. */
GVariant *
vivarium_task_form_options (const VivariumTaskForm *form)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *verify = text_or_empty (form->verify);

  if (form->worker == VIVARIUM_SUBMIT_WORKER_AGENT) {
    g_variant_builder_add (&b, "{sv}", "worker", g_variant_new_string ("agent"));
  } else {
    g_variant_builder_add (&b, "{sv}", "worker", g_variant_new_string ("script"));
    g_variant_builder_add (&b, "{sv}", "script",
                           g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, form->script, TRUE));
  }
  if (*verify != '\0')
    g_variant_builder_add (&b, "{sv}", "verify", g_variant_new_string (verify));
  add_uint (&b, "timeout", text_or_empty (form->timeout));
  add_egress (&b, text_or_empty (form->egress), form->groups, form->secrets, form->ssh_keys);
  return g_variant_builder_end (&b);
}

char *
vivarium_session_form_check (const VivariumSessionForm *form)
{
  guint64 value;
  char *why;

  if (*text_or_empty (form->image) == '\0')
    return g_strdup (_("Choose a frozen image."));
  if (!parse_uint (text_or_empty (form->memory), VIVARIUM_MEMORY_MIN_MIB, VIVARIUM_MEMORY_MAX_MIB, &value))
    return g_strdup_printf (_("Memory must be a whole number of MiB, %u to %u (or empty for the default)."),
                            (guint) VIVARIUM_MEMORY_MIN_MIB, (guint) VIVARIUM_MEMORY_MAX_MIB);
  if (!parse_uint (text_or_empty (form->cpus), 1, VIVARIUM_CPUS_MAX, &value))
    return g_strdup_printf (_("CPUs must be a whole number, 1 to %u (or empty for the default)."),
                            (guint) VIVARIUM_CPUS_MAX);
  /* 0 is the contract's "no limit" for a session. */
  if ((why = check_timeout (text_or_empty (form->timeout), 0)) != NULL)
    return why;
  return check_hosts_side (text_or_empty (form->egress), form->groups, form->secrets, form->ssh_keys);
}

GVariant *
vivarium_session_form_options (const VivariumSessionForm *form)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  add_uint (&b, "memory", text_or_empty (form->memory));
  add_uint (&b, "cpus", text_or_empty (form->cpus));
  add_uint (&b, "timeout", text_or_empty (form->timeout));
  add_egress (&b, text_or_empty (form->egress), form->groups, form->secrets, form->ssh_keys);
  return g_variant_builder_end (&b);
}
