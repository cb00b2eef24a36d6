/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <glib/gi18n.h>

#include "vivarium-config-layers.h"
#include "vivariumctl-commands.h"

/* Every value of the merged layers, each with the file it came from: the
 * layers are read here as the daemon reads them (common/), so what is
 * shown is what applies. */

static void
print_value (const gchar *group, const gchar *key, const gchar *value, const gchar *origin)
{
  g_autofree gchar *g = vctl_escape_line (group);
  g_autofree gchar *k = vctl_escape_line (key);
  g_autofree gchar *v = vctl_escape_line (value);
  g_autofree gchar *o = vctl_escape_line (origin);

  g_print ("[%s] %s=%s\t# %s\n", g, k, v, o);
}

static gboolean
print_layers (GError **error)
{
  g_autoptr(GKeyFile) origins = NULL;
  g_autoptr(GKeyFile) merged = vivarium_config_load_layers_traced (vivarium_config_data_dir (),
                                                                   vivarium_config_config_dir (), &origins, error);
  g_auto(GStrv) groups = NULL;

  if (merged == NULL)
    return FALSE;
  groups = g_key_file_get_groups (merged, NULL);
  for (guint i = 0; groups[i] != NULL; i++) {
    g_auto(GStrv) keys = g_key_file_get_keys (merged, groups[i], NULL, NULL);
    for (guint j = 0; keys != NULL && keys[j] != NULL; j++) {
      g_autofree gchar *value = g_key_file_get_value (merged, groups[i], keys[j], NULL);
      g_autofree gchar *origin = g_key_file_get_value (origins, groups[i], keys[j], NULL);
      print_value (groups[i], keys[j], value != NULL ? value : "", origin != NULL ? origin : "?");
    }
  }
  return TRUE;
}

/* The project's layer: only what it sets, above the files. */
static gboolean
print_project (VctlContext *ctx, const gchar *name, GError **error)
{
  g_autoptr(VivariumDBusProject) project = vctl_project_for_call (ctx, name, error);
  g_autofree gchar *origin = NULL;
  const gchar *mode;
  const gchar * const *groups;

  if (project == NULL)
    return FALSE;
  origin = g_strdup_printf (_("project %s (its record, set with “project set”)"), name);
  mode = vivarium_dbus_project_get_egress_mode (project);
  groups = vivarium_dbus_project_get_egress_groups (project);
  if (mode != NULL && mode[0] != '\0') {
    print_value ("Egress", "TaskMode", mode, origin);
    print_value ("Egress", "SessionMode", mode, origin);
  }
  if (groups != NULL && groups[0] != NULL) {
    g_autofree gchar *joined = g_strjoinv (";", (gchar **) groups);
    print_value ("Egress", "TaskGroups", joined, origin);
    print_value ("Egress", "SessionGroups", joined, origin);
  }
  return TRUE;
}

gboolean
vctl_cmd_config_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *project = NULL;
  const GOptionEntry entries[] = {
    { "project", 0, 0, G_OPTION_ARG_STRING, &project, N_("Also the project's own settings, which come last"),
      "NAME" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, TRUE, argv, 0, 0, error) || !print_layers (error))
    return FALSE;
  return project == NULL || print_project (ctx, project, error);
}
