/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdFs"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"

static gboolean
fail_errno (GError **error, const gchar *what, const gchar *path)
{
  int saved = errno;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot %s %s: %s", what, path, g_strerror (saved));
  return FALSE;
}

/* Never follows symlinks: a session directory may hold links planted by
 * something the session ran, and they must be removed, not followed. */
gboolean
vd_fs_rm_rf (const gchar *path, GError **error)
{
  GStatBuf st;
  g_autoptr(GDir) dir = NULL;
  const gchar *name;

  if (g_lstat (path, &st) != 0)
    return errno == ENOENT ? TRUE : fail_errno (error, "inspect", path);
  if (!S_ISDIR (st.st_mode))
    return g_unlink (path) == 0 || errno == ENOENT ? TRUE : fail_errno (error, "remove", path);
  if (chmod (path, 0700) != 0)
    g_debug ("chmod %s: %s", path, g_strerror (errno));
  dir = g_dir_open (path, 0, error);
  if (dir == NULL)
    return FALSE;
  while ((name = g_dir_read_name (dir)) != NULL) {
    g_autofree gchar *child = g_build_filename (path, name, NULL);
    if (!vd_fs_rm_rf (child, error))
      return FALSE;
  }
  return g_rmdir (path) == 0 ? TRUE : fail_errno (error, "remove", path);
}

gboolean
vd_fs_mkdir (const gchar *path, guint mode, uid_t uid, gid_t gid, GError **error)
{
  if (g_mkdir (path, (int) mode) != 0 && errno != EEXIST)
    return fail_errno (error, "create", path);
  /* mkdir honours the umask; the mode we ask for is the mode we mean. */
  if (chmod (path, mode) != 0)
    return fail_errno (error, "set the mode of", path);
  if (chown (path, uid, gid) != 0)
    return fail_errno (error, "set the owner of", path);
  return TRUE;
}

GStrv
vd_fs_list_dir (const gchar *path)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    g_strv_builder_add (builder, name);
  return g_strv_builder_end (builder);
}
