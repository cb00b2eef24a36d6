/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium-git-transfer: a project's one network transfer with its remote,
 * so that vivariumd itself opens no AF_INET/AF_INET6 socket. Started by
 * vivariumd in a transient unit of its own per transfer
 * (vivarium-git-transfer-<project>.service, vd-git-transfer.c), which sees
 * the project's git directory (read-write), its deploy key (read-only) and
 * nothing else of the state directory:
 *
 *   vivarium-git-transfer clone URL GITDIR KEY        a bare clone, no checkout
 *   vivarium-git-transfer push GITDIR KEY PIN|-       HEAD's branch to origin
 *
 * Its standard output is a pipe to the daemon, and all it writes there is
 * its result: one serialized GVariant (bsss), (ok, error name, message,
 * the ssh host key's SHA-256 seen or ""). Its diagnostics go to stderr (the
 * journal). */
#define G_LOG_DOMAIN "vivarium-git-transfer"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <syslog.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vivarium-error.h"
#include "vivarium-file.h"
#include "vivarium-names.h"
#include "vd-repo.h"

/* The result's descriptor, stdout as the unit got it; stdout itself is
 * /dev/null from then on, so nothing a library prints can get into it. */
static int result_fd = -1;

static int
report (const GError *error, const gchar *host_key_seen)
{
  g_autofree gchar *name = error != NULL ? g_dbus_error_encode_gerror (error) : NULL;
  /* libgit2 passes on what libssh2 and the remote said, which need not be UTF-8. */
  g_autofree gchar *message = error != NULL ? g_utf8_make_valid (error->message, -1) : g_strdup ("");
  g_autoptr(GVariant) result = g_variant_ref_sink (
    g_variant_new ("(bsss)", error == NULL, name != NULL ? name : "", message,
                   host_key_seen != NULL ? host_key_seen : ""));

  if (error != NULL)
    g_printerr ("%s\n", message);
  if (!vivarium_file_write_all (result_fd, g_variant_get_data (result), g_variant_get_size (result))) {
    g_printerr ("cannot write the result: %s\n", g_strerror (errno));
    return EXIT_FAILURE;
  }
  return error == NULL ? EXIT_SUCCESS : EXIT_FAILURE;
}

static gboolean
path_ok (const gchar *what, const gchar *path, GError **error)
{
  if (!g_path_is_absolute (path) || strlen (path) >= VIVARIUM_PATH_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The %s must be an absolute path", what);
    return FALSE;
  }
  return TRUE;
}

static gboolean
pin_ok (const gchar *pin, GError **error)
{
  if (!vd_repo_host_key_pin_valid (pin)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "The pinned host key must be 64 hexadecimal digits");
    return FALSE;
  }
  return TRUE;
}

static gboolean
same_file (int a, int b)
{
  struct stat sa, sb;

  return fstat (a, &sa) == 0 && fstat (b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Seen in the test host (systemd 252): the unit's stderr was the same pipe
 * as its stdout (StandardOutputFileDescriptor=), StandardError=journal
 * notwithstanding. The diagnostics go to the journal, the result alone to
 * the pipe. */
static void
take_result_fd (void)
{
  int null_fd = open ("/dev/null", O_WRONLY | O_CLOEXEC);

  result_fd = fcntl (STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (result_fd < 0)
    result_fd = STDOUT_FILENO;
  else if (null_fd >= 0)
    dup2 (null_fd, STDOUT_FILENO);
  if (result_fd != STDOUT_FILENO && same_file (result_fd, STDERR_FILENO)) {
    int journal_fd = sd_journal_stream_fd ("vivarium-git-transfer", LOG_INFO, FALSE);
    if (journal_fd >= 0 || null_fd >= 0)
      dup2 (journal_fd >= 0 ? journal_fd : null_fd, STDERR_FILENO);
    if (journal_fd >= 0)
      close (journal_fd);
  }
  if (null_fd >= 0)
    close (null_fd);
}

static int
run_clone (gchar **argv)
{
  g_autoptr(GError) error = NULL;

  if (vd_remote_url_validate (argv[0], &error) && path_ok ("git directory", argv[1], &error) &&
      path_ok ("deploy key", argv[2], &error))
    vd_repo_clone_fetch (argv[0], argv[1], argv[2], NULL, &error);
  return report (error, NULL);
}

static int
run_push (gchar **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdRepo) repo = NULL;
  g_autofree gchar *seen = NULL;
  const gchar *pin = g_strcmp0 (argv[2], "-") != 0 ? argv[2] : NULL;

  if (path_ok ("git directory", argv[0], &error) && path_ok ("deploy key", argv[1], &error) &&
      (pin == NULL || pin_ok (pin, &error)) && (repo = vd_repo_open_bare (argv[0], &error)) != NULL)
    vd_repo_push (repo, argv[1], pin, &seen, NULL, &error);
  return report (error, seen);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;

  setlocale (LC_ALL, "");
  take_result_fd ();
  /* Registers the error domain, so the error's name says its code. */
  (void) VIVARIUM_ERROR;
  if (argc == 5 && strcmp (argv[1], "clone") == 0)
    return run_clone (argv + 2);
  if (argc == 5 && strcmp (argv[1], "push") == 0)
    return run_push (argv + 2);
  g_set_error_literal (&error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                       "usage: vivarium-git-transfer clone URL GITDIR KEY | push GITDIR KEY PIN|-");
  return report (error, NULL);
}
