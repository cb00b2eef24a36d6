/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "config.h"

#include <gio/gio.h>

#include "vivarium-config-layers.h"
#include "vivarium-error.h"

/* Under systemd these are unset; the test hosts point them at throwaway
 * directories. Only absolute paths count. */
static const gchar *
dir_from_env (const gchar *variable, const gchar *fallback)
{
  const gchar *value = g_getenv (variable);

  return value != NULL && value[0] == '/' ? value : fallback;
}

const gchar *
vivarium_config_data_dir (void)
{
  return dir_from_env ("VIVARIUM_DATA_DIR", VIVARIUM_PKGDATADIR);
}

const gchar *
vivarium_config_config_dir (void)
{
  return dir_from_env ("VIVARIUM_CONFIG_DIR", VIVARIUM_SYSCONFDIR);
}

static gint
compare_paths (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const gchar * const *) a, *(const gchar * const *) b);
}

GStrv
vivarium_config_layer_paths (const gchar *data_dir, const gchar *config_dir)
{
  g_autofree gchar *dropin_dir = g_build_filename (config_dir, "conf.d", NULL);
  g_autoptr(GDir) dir = g_dir_open (dropin_dir, 0, NULL);
  g_autoptr(GPtrArray) dropins = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GStrvBuilder) paths = g_strv_builder_new ();
  g_autofree gchar *defaults = g_build_filename (data_dir, "defaults.conf", NULL);
  g_autofree gchar *admin = g_build_filename (config_dir, "vivarium.conf", NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    if (g_str_has_suffix (name, ".conf") && name[0] != '.')
      g_ptr_array_add (dropins, g_build_filename (dropin_dir, name, NULL));
  }
  g_ptr_array_sort (dropins, compare_paths);
  g_strv_builder_add (paths, defaults);
  g_strv_builder_add (paths, admin);
  for (guint i = 0; i < dropins->len; i++)
    g_strv_builder_add (paths, g_ptr_array_index (dropins, i));
  return g_strv_builder_end (paths);
}

gchar *
vivarium_config_layers_describe (const gchar *data_dir, const gchar *config_dir)
{
  g_autofree gchar *defaults = g_build_filename (data_dir, "defaults.conf", NULL);
  g_autofree gchar *admin = g_build_filename (config_dir, "vivarium.conf", NULL);
  g_autofree gchar *dropins = g_build_filename (config_dir, "conf.d", "*.conf", NULL);

  return g_strdup_printf ("%s, %s or %s", defaults, admin, dropins);
}

/* A rule group merged key by key would keep an earlier layer's Allow=
 * when a later one meant to replace the group, say with a shorter list:
 * the administrator would grant more than they wrote. */
gboolean
vivarium_config_group_is_whole (const gchar *group)
{
  return g_str_has_prefix (group, VIVARIUM_CONFIG_EGRESS_GROUP_PREFIX);
}

/* @origins (nullable): the same groups and keys, each holding the path of
 * the layer its value came from. */
static gboolean
merge_file (GKeyFile *merged, GKeyFile *origins, const gchar *path, GError **error)
{
  g_autoptr(GKeyFile) layer = g_key_file_new ();
  g_autoptr(GError) local_error = NULL;
  g_auto(GStrv) groups = NULL;

  if (!g_key_file_load_from_file (layer, path, G_KEY_FILE_NONE, &local_error)) {
    if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      return TRUE;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "Cannot read configuration %s: %s", path, local_error->message);
    return FALSE;
  }
  groups = g_key_file_get_groups (layer, NULL);
  for (guint i = 0; groups[i] != NULL; i++) {
    g_auto(GStrv) keys = g_key_file_get_keys (layer, groups[i], NULL, NULL);
    if (vivarium_config_group_is_whole (groups[i])) {
      g_key_file_remove_group (merged, groups[i], NULL);
      if (origins != NULL)
        g_key_file_remove_group (origins, groups[i], NULL);
    }
    for (guint j = 0; keys != NULL && keys[j] != NULL; j++) {
      g_autofree gchar *value = g_key_file_get_value (layer, groups[i], keys[j], NULL);
      g_key_file_set_value (merged, groups[i], keys[j], value);
      if (origins != NULL)
        g_key_file_set_value (origins, groups[i], keys[j], path);
    }
  }
  g_debug ("loaded configuration layer %s", path);
  return TRUE;
}

GKeyFile *
vivarium_config_load_files (const gchar *const *paths, GError **error)
{
  g_autoptr(GKeyFile) merged = g_key_file_new ();

  for (guint i = 0; paths[i] != NULL; i++) {
    if (!merge_file (merged, NULL, paths[i], error))
      return NULL;
  }
  return g_steal_pointer (&merged);
}

GKeyFile *
vivarium_config_load_layers_traced (const gchar *data_dir, const gchar *config_dir, GKeyFile **origins,
                                    GError **error)
{
  g_auto(GStrv) paths = vivarium_config_layer_paths (data_dir, config_dir);
  g_autoptr(GKeyFile) merged = g_key_file_new ();
  g_autoptr(GKeyFile) from = g_key_file_new ();

  for (guint i = 0; paths[i] != NULL; i++) {
    if (!merge_file (merged, from, paths[i], error))
      return NULL;
  }
  *origins = g_steal_pointer (&from);
  return g_steal_pointer (&merged);
}

GKeyFile *
vivarium_config_load_layers (const gchar *data_dir, const gchar *config_dir, GError **error)
{
  g_auto(GStrv) paths = vivarium_config_layer_paths (data_dir, config_dir);

  return vivarium_config_load_files ((const gchar * const *) paths, error);
}
