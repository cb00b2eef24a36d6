/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdRecord"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vd-fs.h"
#include "vd-record.h"

/* The parents only have to exist; the record's own directory is made
 * 0700 and the daemon's also when something else made it first. */
static gboolean
ensure_dir (const gchar *dir, GError **error)
{
  g_autofree gchar *parent = g_path_get_dirname (dir);

  if (g_mkdir_with_parents (parent, 0700) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot create %s", parent);
  return vd_fs_mkdir (dir, 0700, geteuid (), getegid (), error);
}

gboolean
vd_record_write (const gchar *dir, const gchar *name, JsonNode *root, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  /* Indented: an operator reads these with less. */
  g_autofree gchar *text = json_to_string (root, TRUE);

  g_return_val_if_fail (strchr (name, '/') == NULL, FALSE);
  if (!ensure_dir (dir, error))
    return FALSE;
  return vd_fs_write_durably (path, text, 0600, error);
}
