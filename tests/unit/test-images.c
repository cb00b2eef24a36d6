/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Images without root or a bus: every error the image code passes on is in
 * the Vivarium domain, a full disk is NoSpace, and a failed build says what
 * the builder said.
 */
#define G_LOG_DOMAIN "TestImages"

#include "config.h"

#include <errno.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"
#include "vd-image.h"
#include "vd-image-build.h"

static gchar *
make_dir (void)
{
  g_autoptr(GError) error = NULL;
  gchar *dir = g_dir_make_tmp ("vivarium-unit-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
write_file (const gchar *dir, const gchar *name, const gchar *text)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

static void
test_errno_codes (void)
{
  struct { int errsv; VivariumError code; } cases[] = {
    { ENOSPC, VIVARIUM_ERROR_NO_SPACE },
    { EDQUOT, VIVARIUM_ERROR_NO_SPACE },
    { ENOENT, VIVARIUM_ERROR_NOT_FOUND },
    { EEXIST, VIVARIUM_ERROR_EXISTS },
    { EIO,    VIVARIUM_ERROR_FAILED },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = NULL;

    g_assert_false (vd_fs_set_error_errno (&error, cases[i].errsv, "Cannot write %s", "/x/y"));
    g_assert_error (error, VIVARIUM_ERROR, (gint) cases[i].code);
    g_assert_true (g_str_has_prefix (error->message, "Cannot write /x/y: "));
    g_assert_nonnull (strstr (error->message, g_strerror (cases[i].errsv)));
  }
}

static void
test_write_durably (void)
{
  g_autofree gchar *dir = make_dir ();
  g_autofree gchar *path = g_build_filename (dir, "a.json", NULL);
  g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);
  g_autofree gchar *missing_dir = g_build_filename (dir, "no-such-dir", NULL);
  g_autofree gchar *missing = g_build_filename (missing_dir, "a.json", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;
  GStatBuf st;

  g_assert_true (vd_fs_write_durably (path, "{}\n", 0640, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "{}\n");
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0640);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));

  /* Was a GFileError from g_file_set_contents before. */
  g_assert_false (vd_fs_write_durably (missing, "{}\n", 0644, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, missing));
  g_clear_error (&error);
  g_assert_false (vd_image_write_metadata (missing_dir, "tiny", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);

  g_unlink (path);
  g_rmdir (dir);
}

/* A damaged manifest was a JsonParserError; a pending one that cannot be
 * read must not be guessed at either. */
static void
test_load_damaged (gconstpointer data)
{
  const gchar *file = data;
  g_autofree gchar *dir = make_dir ();
  g_autofree gchar *path = g_build_filename (dir, file, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(VdImage) image = NULL;

  write_file (dir, file, "{ \"digest\": ");
  image = vd_image_load (dir, &error);
  g_assert_null (image);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));

  g_unlink (path);
  g_rmdir (dir);
}

/* The roll-back trusts only a journal that names files a freeze seals:
 * one naming a path outside the image changes nothing. */
static void
test_load_foreign_journal (void)
{
  g_autofree gchar *dir = make_dir ();
  g_autofree gchar *victim = g_strconcat (dir, "-victim", NULL);
  g_autofree gchar *pending = g_build_filename (dir, "manifest.json.pending", NULL);
  g_autofree gchar *journal = NULL;
  g_autofree gchar *base = g_path_get_basename (victim);
  g_autoptr(GError) error = NULL;
  g_autoptr(VdImage) image = NULL;
  GStatBuf st;

  g_assert_true (g_file_set_contents (victim, "x", -1, NULL));
  g_assert_cmpint (g_chmod (victim, 0600), ==, 0);
  journal = g_strdup_printf ("{\"before\": [{\"name\": \"../%s\", \"mode\": 511, \"uid\": %u, \"gid\": %u,"
                             " \"immutable\": false}],"
                             " \"dir-before\": {\"name\": \".\", \"mode\": 493, \"uid\": %u, \"gid\": %u,"
                             " \"immutable\": false}}",
                             base, getuid (), getgid (), getuid (), getgid ());
  write_file (dir, "manifest.json.pending", journal);
  image = vd_image_load (dir, &error);
  g_assert_null (image);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "never seals"));
  g_assert_cmpint (g_stat (victim, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0600);

  g_unlink (pending);
  g_unlink (victim);
  g_rmdir (dir);
}

static void
test_build_epilogue (void)
{
  g_assert_true (vd_image_build_is_epilogue ("[  12s] build failed (status 1); removed /var/lib/vivarium/images/.staging/x/out"));
  g_assert_true (vd_image_build_is_epilogue ("[1234s] build failed (status 143); removed /o"));
  g_assert_true (vd_image_build_is_epilogue ("vivarium-image-builder: warning: could not unmount /w/proc"));
  g_assert_false (vd_image_build_is_epilogue ("gzip: stdout: No space left on device"));
  g_assert_false (vd_image_build_is_epilogue ("vivarium-image-builder: error: missing tools: cpio"));
  g_assert_false (vd_image_build_is_epilogue ("[   3s] Writing the initrd"));
  g_assert_false (vd_image_build_is_epilogue ("build failed (status 1) said a tool"));
  g_assert_false (vd_image_build_is_epilogue (""));
  g_assert_false (vd_image_build_is_epilogue ("[x  12s] build failed (status 1)"));

  g_assert_true (vd_image_build_is_step ("[   3s] Writing the initrd"));
  g_assert_false (vd_image_build_is_step ("gzip: stdout: No space left on device"));
  g_assert_false (vd_image_build_is_step ("[a] s] x"));
  g_assert_true (vd_fs_says_no_space ("gzip: stdout: No space left on device"));
  g_assert_true (vd_fs_says_no_space ("cp: cannot create 'x': Disk quota exceeded"));
  g_assert_false (vd_fs_says_no_space ("cpio: write error: Broken pipe"));
  g_assert_false (vd_fs_says_no_space ("no space for doubt"));
}

static void
test_build_failure (void)
{
  g_autoptr(GError) unit_failed = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                               "systemd could not finish the job for u: failed");
  g_autoptr(GError) no_space = NULL;
  g_autoptr(GError) other = NULL;
  g_autoptr(GError) quota = NULL;
  g_autoptr(GError) daemon_side = NULL;
  g_autoptr(GError) file_error = g_error_new (G_FILE_ERROR, G_FILE_ERROR_NOSPC, "Cannot write x: No space left on device");
  g_autoptr(GError) cancelled = NULL;
  g_autoptr(GError) io_cancelled = g_error_new (G_IO_ERROR, G_IO_ERROR_CANCELLED, "Operation was cancelled");

  no_space = vd_image_build_failure ("t", "tiny", "gzip: stdout: No space left on device", unit_failed);
  g_assert_error (no_space, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE);
  g_assert_nonnull (strstr (no_space->message, "The builder's last words: “gzip: stdout: No space left on device”"));
  g_assert_nonnull (strstr (no_space->message, "“t”"));
  g_assert_nonnull (strstr (no_space->message, "“tiny”"));

  quota = vd_image_build_failure ("t", "tiny", "cp: error writing 'x': Disk quota exceeded", unit_failed);
  g_assert_error (quota, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE);

  other = vd_image_build_failure ("t", "ubuntu", "vivarium-image-builder: error: ubuntu: not attempted", unit_failed);
  g_assert_error (other, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_nonnull (strstr (other->message, "vivarium-image-builder: error: ubuntu: not attempted"));

  /* The daemon's own failures keep their code and their sentence. */
  daemon_side = vd_image_build_failure ("t", "tiny", NULL, file_error);
  g_assert_error (daemon_side, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE);
  g_assert_nonnull (strstr (daemon_side->message, "Cannot write x: No space left on device"));
  g_assert_null (strstr (daemon_side->message, "builder"));

  cancelled = vd_image_build_failure ("t", "tiny", "[  5s] whatever", io_cancelled);
  g_assert_error (cancelled, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  (void) VIVARIUM_ERROR;

  g_test_add_func ("/images/errno-codes", test_errno_codes);
  g_test_add_func ("/images/write-durably", test_write_durably);
  g_test_add_data_func ("/images/load/damaged-manifest", "manifest.json", test_load_damaged);
  g_test_add_data_func ("/images/load/damaged-pending-manifest", "manifest.json.pending", test_load_damaged);
  g_test_add_func ("/images/load/foreign-journal", test_load_foreign_journal);
  g_test_add_func ("/images/build/epilogue", test_build_epilogue);
  g_test_add_func ("/images/build/failure", test_build_failure);
  return g_test_run ();
}
