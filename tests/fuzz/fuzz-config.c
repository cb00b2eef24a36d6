/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's configuration (service/vd-config.c over the layers of
 * common/vivarium-config-layers.c): the input, cut at NUL bytes, is up to
 * three layers, written as DATA/defaults.conf, CONFIG/vivarium.conf and
 * CONFIG/conf.d/50-fuzz.conf on tmpfs, then loaded the daemon's way.
 *
 * Checked: a layer that does not parse is refused naming its file; the
 * traced loader (vivariumctl config show) merges to the same keys and names
 * a layer for each; an [EgressGroup NAME] holds exactly the keys of the last
 * layer that defines it (replaced whole, never mixed); every getter stays
 * in its range or its set of words, whatever the text says; lists hold no
 * empty or padded item; group names are valid, short enough, sorted, and
 * each one reads back. A value out of range is a warning (the daemon's
 * documented behaviour), the only one this harness lets through. */

#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "fuzz-common.h"
#include "vivarium-config-layers.h"
#include "vivarium-names.h"
#include "vd-config.h"

static gchar *data_dir;
static gchar *config_dir;
static gchar *layer_paths[4];   /* NULL-terminated */

/* vd-config's own warnings ("is not a number in …; using …") are its
 * answer to a bad value; anything else still aborts. */
static GLogWriterOutput
config_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  if (level & G_LOG_LEVEL_WARNING) {
    for (gsize i = 0; i < n_fields; i++) {
      if (g_str_equal (fields[i].key, "GLIB_DOMAIN") && g_strcmp0 (fields[i].value, "VdConfig") == 0)
        return G_LOG_WRITER_HANDLED;
    }
  }
  return fuzz_log_writer (level, fields, n_fields, user_data);
}

static gchar *root_dir;

/* A replay by hand (HARNESS FILE) leaves nothing behind either. */
static void
remove_layers (void)
{
  g_autofree gchar *confd = g_build_filename (config_dir, "conf.d", NULL);

  for (guint i = 0; i < 3; i++)
    g_unlink (layer_paths[i]);
  g_rmdir (confd);
  g_rmdir (config_dir);
  g_rmdir (data_dir);
  g_rmdir (root_dir);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *root = g_dir_make_tmp ("vivarium-fuzz-config-XXXXXX", &error);
  g_autofree gchar *confd = NULL;

  g_log_set_writer_func (config_log_writer, NULL, NULL);
  g_assert_no_error (error);
  data_dir = g_build_filename (root, "data", NULL);
  config_dir = g_build_filename (root, "etc", NULL);
  confd = g_build_filename (config_dir, "conf.d", NULL);
  g_assert_cmpint (g_mkdir_with_parents (data_dir, 0700), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (confd, 0700), ==, 0);
  layer_paths[0] = g_build_filename (data_dir, "defaults.conf", NULL);
  layer_paths[1] = g_build_filename (config_dir, "vivarium.conf", NULL);
  layer_paths[2] = g_build_filename (confd, "50-fuzz.conf", NULL);
  g_setenv ("VIVARIUM_DATA_DIR", data_dir, TRUE);
  g_setenv ("VIVARIUM_CONFIG_DIR", config_dir, TRUE);
  root_dir = g_strdup (root);
  atexit (remove_layers);
  return 0;
}

static void
check_list (GStrv list)
{
  g_assert_nonnull (list);
  for (guint i = 0; list[i] != NULL; i++) {
    gsize n = strlen (list[i]);
    g_assert_cmpuint (n, >, 0);
    g_assert_false (g_ascii_isspace (list[i][0]) || g_ascii_isspace (list[i][n - 1]));
  }
}

static void
check_choice (const gchar *value, const gchar * const *known)
{
  g_assert_true (g_strv_contains (known, value));
}

static void
check_getters (VdConfig *config)
{
  static const gchar * const relay[] = { "auto", "always", "never", NULL };
  static const gchar * const accel[] = { "auto", "kvm", "tcg", NULL };
  static const gchar * const modes[] = { "open", "allowlist", "none", NULL };
  g_auto(GStrv) deny = vd_config_get_extra_deny (config);
  g_auto(GStrv) session_groups = vd_config_get_egress_session_groups (config);
  g_auto(GStrv) task_groups = vd_config_get_egress_task_groups (config);
  g_auto(GStrv) names = vd_config_get_egress_group_names (config);
  g_autofree gchar *ca = vd_config_dup_egress_upstream_ca (config);

  (void) vd_config_get_read_grant_sec (config);
  (void) vd_config_get_idle_timeout_sec (config);
  (void) vd_config_get_default_memory_mib (config);
  (void) vd_config_get_default_cpus (config);
  (void) vd_config_get_max_sessions (config);
  (void) vd_config_get_commit_file_max (config);
  (void) vd_config_get_commit_timeout_sec (config);
  g_assert (vd_config_get_max_finished_tasks (config) >= 1 && vd_config_get_max_finished_tasks (config) <= 1000);
  g_assert (vd_config_get_max_reports (config) >= 1 && vd_config_get_max_reports (config) <= 2000);
  (void) vd_config_get_agent_timeout_sec (config);
  (void) vd_config_get_allow_unenforced_layer1 (config);
  (void) vd_config_get_allow_negative_control (config);
  (void) vd_config_get_boot_snapshots (config);
  check_choice (vd_config_get_dns_relay (config), relay);
  check_choice (vd_config_get_accelerator (config), accel);
  check_choice (vd_config_get_egress_session_mode (config), modes);
  check_choice (vd_config_get_egress_task_mode (config), modes);
  g_assert_cmpuint (vd_config_get_egress_limit_up (config) % (1024 * 1024), ==, 0);
  g_assert_cmpuint (vd_config_get_egress_limit_up (config), <=, (guint64) 1024 * 1024 * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_limit_down (config), <=, (guint64) 1024 * 1024 * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), >=, 100);
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), <=, 1000000);
  g_assert_true (ca == NULL || g_path_is_absolute (ca));
  check_list (deny);
  check_list (session_groups);
  check_list (task_groups);
  for (guint i = 0; names[i] != NULL; i++) {
    g_auto(GStrv) allow = NULL;
    g_auto(GStrv) refuse = NULL;
    g_autofree gchar *description = NULL;
    g_assert_cmpuint (strlen (names[i]), <=, VD_EGRESS_GROUP_NAME_MAX);
    g_assert_true (vivarium_name_validate ("egress group", names[i], NULL));
    if (i > 0)
      g_assert_cmpint (strcmp (names[i - 1], names[i]), <, 0);
    g_assert_true (vd_config_get_egress_group (config, names[i], &allow, &refuse, &description));
    check_list (allow);
    check_list (refuse);
    g_assert_nonnull (description);
    g_assert_true (g_utf8_validate (description, -1, NULL));
  }
}

/* Each whole group comes from one layer: the last that defines it. */
static void
check_whole_groups (GKeyFile *merged, GKeyFile **layers)
{
  g_auto(GStrv) groups = g_key_file_get_groups (merged, NULL);

  for (guint i = 0; groups[i] != NULL; i++) {
    g_auto(GStrv) keys = NULL;
    gint last = -1;
    if (!vivarium_config_group_is_whole (groups[i]))
      continue;
    for (gint l = 0; l < 3; l++) {
      if (layers[l] != NULL && g_key_file_has_group (layers[l], groups[i]))
        last = l;
    }
    g_assert_cmpint (last, >=, 0);
    keys = g_key_file_get_keys (merged, groups[i], NULL, NULL);
    for (guint k = 0; keys[k] != NULL; k++) {
      g_autofree gchar *a = g_key_file_get_value (merged, groups[i], keys[k], NULL);
      g_autofree gchar *b = g_key_file_get_value (layers[last], groups[i], keys[k], NULL);
      g_assert_cmpstr (a, ==, b);
    }
    g_strfreev (keys);
    keys = g_key_file_get_keys (layers[last], groups[i], NULL, NULL);
    for (guint k = 0; keys[k] != NULL; k++)
      g_assert_true (g_key_file_has_key (merged, groups[i], keys[k], NULL));
  }
}

static void
check_traced (GKeyFile *merged)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GKeyFile) origins = NULL;
  g_autoptr(GKeyFile) traced = vivarium_config_load_layers_traced (data_dir, config_dir, &origins, &error);
  g_autofree gchar *a = g_key_file_to_data (merged, NULL, NULL);
  g_autofree gchar *b = NULL;
  g_auto(GStrv) groups = NULL;

  g_assert_no_error (error);
  b = g_key_file_to_data (traced, NULL, NULL);
  g_assert_cmpstr (a, ==, b);
  groups = g_key_file_get_groups (merged, NULL);
  for (guint i = 0; groups[i] != NULL; i++) {
    g_auto(GStrv) keys = g_key_file_get_keys (merged, groups[i], NULL, NULL);
    for (guint k = 0; keys != NULL && keys[k] != NULL; k++) {
      g_autofree gchar *from = g_key_file_get_value (origins, groups[i], keys[k], NULL);
      g_assert_true (from != NULL && g_strv_contains ((const gchar * const *) layer_paths, from));
    }
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(VdConfig) config = vd_config_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GKeyFile) merged = NULL;
  GKeyFile *layers[3] = { NULL, NULL, NULL };
  const uint8_t *p = data, *end = data + size;
  guint n = 0;

  for (guint i = 0; i < 3; i++)
    g_unlink (layer_paths[i]);
  /* Up to three layers; a missing one is no error. */
  while (n < 3 && p <= end) {
    const uint8_t *nul = memchr (p, '\0', (size_t) (end - p));
    const uint8_t *stop = nul != NULL ? nul : end;
    g_assert_true (g_file_set_contents (layer_paths[n], (const gchar *) p, stop - p, NULL));
    layers[n] = g_key_file_new ();
    if (!g_key_file_load_from_data (layers[n], (const gchar *) p, stop - p, G_KEY_FILE_NONE, NULL))
      g_clear_pointer (&layers[n], g_key_file_unref);
    n++;
    p = stop + 1;
  }
  merged = vivarium_config_load_layers (data_dir, config_dir, &error);
  if (merged == NULL) {
    gboolean named = FALSE;
    g_assert_nonnull (error);
    for (guint i = 0; i < n; i++)
      named = named || (layers[i] == NULL && strstr (error->message, layer_paths[i]) != NULL);
    g_assert_true (named);
    g_assert_false (vd_config_load (config, NULL));
  } else {
    g_assert_true (vd_config_load (config, &error));
    g_assert_no_error (error);
    check_whole_groups (merged, layers);
    check_traced (merged);
    check_getters (config);
  }
  for (guint i = 0; i < 3; i++)
    g_clear_pointer (&layers[i], g_key_file_unref);
  return 0;
}
