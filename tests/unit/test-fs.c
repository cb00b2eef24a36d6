/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"

/* vd_fs_read_untrusted(), which reads what QEMU (another uid) wrote, such
 * as a screenshot: a FIFO in its place must not hang the daemon, a link
 * must not be followed, and a file is read into at most the cap. */

static gchar *
scratch_dir (void)
{
  g_autoptr(GError) error = NULL;
  gchar *dir = g_dir_make_tmp ("vd-fs-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
test_regular (void)
{
  g_autofree gchar *dir = scratch_dir ();
  g_autofree gchar *path = g_build_filename (dir, "screen.png", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;

  g_assert_true (g_file_set_contents (path, "\x89PNG picture", -1, NULL));
  bytes = vd_fs_read_untrusted (path, 64, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), "\x89PNG picture", 12);
  g_clear_pointer (&bytes, g_bytes_unref);
  /* Exactly at the cap is fine, one byte past it is not. */
  bytes = vd_fs_read_untrusted (path, 12, &error);
  g_assert_no_error (error);
  g_clear_pointer (&bytes, g_bytes_unref);
  g_assert_null (vd_fs_read_untrusted (path, 11, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE);
  g_unlink (path);
  g_rmdir (dir);
}

/* No writer ever opens it: a blocking open() would wait forever. */
static void
test_fifo_refused_at_once (void)
{
  g_autofree gchar *dir = scratch_dir ();
  g_autofree gchar *path = g_build_filename (dir, "screen.png", NULL);
  g_autoptr(GError) error = NULL;
  gint64 t0;

  g_assert_cmpint (mkfifo (path, 0600), ==, 0);
  t0 = g_get_monotonic_time ();
  g_assert_null (vd_fs_read_untrusted (path, 64, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, G_USEC_PER_SEC);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_link_not_followed (void)
{
  g_autofree gchar *dir = scratch_dir ();
  g_autofree gchar *secret = g_build_filename (dir, "secret", NULL);
  g_autofree gchar *path = g_build_filename (dir, "screen.png", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_set_contents (secret, "root's secret", -1, NULL));
  g_assert_cmpint (symlink (secret, path), ==, 0);
  g_assert_null (vd_fs_read_untrusted (path, 64, &error));
  g_assert_nonnull (error);
  g_unlink (path);
  g_unlink (secret);
  g_rmdir (dir);
}

static void
test_directory_refused (void)
{
  g_autofree gchar *dir = scratch_dir ();
  g_autoptr(GError) error = NULL;

  g_assert_null (vd_fs_read_untrusted (dir, 64, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_rmdir (dir);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fs/read-untrusted/regular", test_regular);
  g_test_add_func ("/fs/read-untrusted/fifo-refused-at-once", test_fifo_refused_at_once);
  g_test_add_func ("/fs/read-untrusted/link-not-followed", test_link_not_followed);
  g_test_add_func ("/fs/read-untrusted/directory-refused", test_directory_refused);
  return g_test_run ();
}
