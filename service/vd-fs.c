/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdFs"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"

/* A failed system call as a Vivarium error: a full disk (or quota) is
 * NoSpace, so that a caller can tell "free some space" from a fault. The
 * message is FORMAT followed by ": " and the system's reason. */
gboolean
vd_fs_set_error_errno (GError **error, int errsv, const gchar *format, ...)
{
  g_autofree gchar *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "%s: %s", what, g_strerror (errsv));
  vivarium_error_convert (error);
  /* GLib has no GIOErrorEnum for EDQUOT; for the caller it is the same. */
  if (errsv == EDQUOT && error != NULL && *error != NULL)
    (*error)->code = VIVARIUM_ERROR_NO_SPACE;
  return FALSE;
}

static gboolean
fail_errno (GError **error, const gchar *what, const gchar *path)
{
  return vd_fs_set_error_errno (error, errno, "Cannot %s %s", what, path);
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
  if (dir == NULL) {
    vivarium_error_convert (error);
    return FALSE;
  }
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

/* Whether a tool's message is the system's own words for ENOSPC or EDQUOT
 * in the C locale (the builder and the tools we run use it). Nothing
 * vaguer: a guess would send people to free space that was never short. */
gboolean
vd_fs_says_no_space (const gchar *text)
{
  return strstr (text, "No space left on device") != NULL || strstr (text, "Disk quota exceeded") != NULL;
}

gboolean
vd_fs_fsync_dir (const gchar *dir, GError **error)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int saved;

  if (fd < 0)
    return fail_errno (error, "open", dir);
  if (fsync (fd) != 0) {
    saved = errno;
    close (fd);
    return vd_fs_set_error_errno (error, saved, "Cannot flush %s to disk", dir);
  }
  close (fd);
  return TRUE;
}

static gboolean
write_all (int fd, const gchar *text, gsize len)
{
  while (len > 0) {
    gssize n = write (fd, text, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      errno = EIO;
    if (n <= 0)
      return FALSE;
    text += n;
    len -= (gsize) n;
  }
  return TRUE;
}

/* PATH.tmp, written and flushed, then renamed over PATH and the directory
 * flushed: after a crash PATH is the old file or the new one, whole. A
 * failure leaves no temporary file behind and says which file it was. */
gboolean
vd_fs_write_durably (const gchar *path, const gchar *text, guint mode, GError **error)
{
  g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);
  g_autofree gchar *dir = g_path_get_dirname (path);
  int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  int saved = 0;

  if (fd < 0)
    return fail_errno (error, "create", tmp);
  if (fchmod (fd, mode) != 0 || !write_all (fd, text, strlen (text)) || fsync (fd) != 0)
    saved = errno;
  /* close() is where some filesystems report a failed write. */
  if (close (fd) != 0 && saved == 0)
    saved = errno;
  if (saved == 0 && rename (tmp, path) != 0)
    saved = errno;
  if (saved != 0) {
    g_unlink (tmp);
    return vd_fs_set_error_errno (error, saved, "Cannot write %s", path);
  }
  return vd_fs_fsync_dir (dir, error);
}

static GBytes *
read_bounded_fd (int fd, const gchar *path, gsize max, GError **error)
{
  g_autofree guint8 *buf = NULL;
  struct stat st;
  gsize len = 0;

  if (fstat (fd, &st) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot read %s", path), NULL;
  if (!S_ISREG (st.st_mode)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s is not a regular file", path);
    return NULL;
  }
  if ((guint64) st.st_size > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "%s is over %" G_GSIZE_FORMAT " bytes", path, max);
    return NULL;
  }
  /* The size may change under us: read at most one byte past the cap. */
  buf = g_malloc (max + 1);
  while (len <= max) {
    gssize n = read (fd, buf + len, max + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return vd_fs_set_error_errno (error, errno, "Cannot read %s", path), NULL;
    if (n == 0)
      break;
    len += (gsize) n;
  }
  if (len > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "%s is over %" G_GSIZE_FORMAT " bytes", path, max);
    return NULL;
  }
  return g_bytes_new_take (g_realloc (g_steal_pointer (&buf), MAX (len, 1)), len);
}

/* For a file that someone else owns and may swap or grow while we read:
 * no link is followed, a FIFO or device does not block us (O_NONBLOCK)
 * and is refused, and at most @max bytes are read, by read(): no mapping,
 * which a truncation under us would turn into SIGBUS. */
GBytes *
vd_fs_read_untrusted (const gchar *path, gsize max, GError **error)
{
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  GBytes *bytes;

  if (fd < 0)
    return vd_fs_set_error_errno (error, errno, "Cannot open %s", path), NULL;
  bytes = read_bounded_fd (fd, path, max, error);
  close (fd);
  return bytes;
}
