/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-file.h"

static gboolean
set_error_errno (GError **error, int saved, const gchar *what, const gchar *path)
{
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "Cannot %s %s: %s", what, path, g_strerror (saved));
  return FALSE;
}

gboolean
vivarium_file_write_all (int fd, const void *buf, gsize len)
{
  const guint8 *data = buf;

  while (len > 0) {
    gssize n = write (fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      errno = EIO;
    if (n <= 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static gboolean
fsync_dir (const gchar *path, GError **error)
{
  g_autofree gchar *dir = g_path_get_dirname (path);
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int saved = 0;

  if (fd < 0)
    return set_error_errno (error, errno, "open", dir);
  if (fsync (fd) != 0)
    saved = errno;
  close (fd);
  if (saved != 0)
    return set_error_errno (error, saved, "flush", dir);
  return TRUE;
}

gboolean
vivarium_file_write_durably (const gchar *path, const void *data, gsize len, gint mode, GError **error)
{
  g_autofree gchar *tmp = NULL;
  int fd, saved = 0;

  g_return_val_if_fail (path != NULL && (data != NULL || len == 0), FALSE);
  tmp = g_strconcat (path, ".tmp", NULL);
  g_unlink (tmp);
  fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return set_error_errno (error, errno, "create", tmp);
  if (fchmod (fd, (mode_t) mode) != 0 || !vivarium_file_write_all (fd, data, len) || fsync (fd) != 0)
    saved = errno;
  if (close (fd) != 0 && saved == 0)
    saved = errno;
  if (saved == 0 && rename (tmp, path) != 0)
    saved = errno;
  if (saved != 0) {
    g_unlink (tmp);
    return set_error_errno (error, saved, "write", path);
  }
  return fsync_dir (path, error);
}

gchar *
vivarium_file_read_bounded (const gchar *path, gsize max, gsize *len_out, GError **error)
{
  g_autofree gchar *buf = NULL;
  struct stat st;
  gsize len = 0;
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

  if (fd < 0)
    return (set_error_errno (error, errno, "open", path), NULL);
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || (guint64) st.st_size > max) {
    close (fd);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a regular file of at most %" G_GSIZE_FORMAT
                 " bytes", path, max);
    return NULL;
  }
  buf = g_malloc ((gsize) st.st_size + 1);
  while (len < (gsize) st.st_size) {
    gssize n = read (fd, buf + len, (gsize) st.st_size - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (gsize) n;
  }
  close (fd);
  buf[len] = '\0';
  if (len_out != NULL)
    *len_out = len;
  return g_steal_pointer (&buf);
}
