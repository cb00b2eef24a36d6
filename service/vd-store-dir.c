/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdStoreDir"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "vivarium-error.h"
#include "vivarium-secret.h"
#include "vd-fs.h"
#include "vd-store-dir.h"

#define STORE_DIR_MODE 0700

gboolean
vd_store_dir_check_name (const VdStoreKind *kind, const gchar *name, GError **error)
{
  if (vivarium_secret_name_is_valid (name))
    return TRUE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
               "“%s” is not %s's name: a letter or '_' and then at most 63 letters, digits or '_'",
               g_utf8_validate (name, -1, NULL) && strlen (name) <= 80 ? name : "(not shown)", kind->a_kind);
  return FALSE;
}

gchar *
vd_store_dir_path (const VdStoreKind *kind, const gchar *dir, const gchar *name)
{
  g_autofree gchar *file = g_strconcat (name, kind->suffix, NULL);

  return g_build_filename (dir, file, NULL);
}

gboolean
vd_store_dir_prepare (const gchar *dir, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (!vd_fs_mkdir (dir, STORE_DIR_MODE, 0, 0, &local) || chmod (dir, STORE_DIR_MODE) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot prepare the store %s: %s", dir,
                 local != NULL ? local->message : g_strerror (errno));
    return FALSE;
  }
  return TRUE;
}

static gint
by_string (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const gchar * const *) a, *(const gchar * const *) b);
}

GStrv
vd_store_dir_names (const VdStoreKind *kind, const gchar *dir)
{
  const gchar *suffix = kind->suffix;
  g_auto(GStrv) files = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; files != NULL && files[i] != NULL; i++) {
    g_autofree gchar *name = NULL;

    if (!g_str_has_suffix (files[i], suffix))
      continue;
    name = g_strndup (files[i], strlen (files[i]) - strlen (suffix));
    if (vivarium_secret_name_is_valid (name))
      g_ptr_array_add (names, g_steal_pointer (&name));
  }
  g_ptr_array_sort (names, by_string);
  g_ptr_array_add (names, NULL);
  return (GStrv) g_ptr_array_free (g_steal_pointer (&names), FALSE);
}

gboolean
vd_store_dir_check_room (const VdStoreKind *kind, const gchar *dir, const gchar *name, GError **error)
{
  g_auto(GStrv) names = vd_store_dir_names (kind, dir);

  if (g_strv_length (names) < kind->max || g_strv_contains ((const gchar * const *) names, name))
    return TRUE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE,
               "%u %s are stored, as many as the store may hold: remove one before adding “%s”", kind->max,
               kind->kinds, name);
  return FALSE;
}
