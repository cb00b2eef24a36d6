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
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-repo.h"

static gboolean
write_all (int fd, const guint8 *data, gsize len)
{
  while (len > 0) {
    gssize n = write (fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static int
report (const GError *error, const gchar *host_key_seen)
{
  g_autofree gchar *name = error != NULL ? g_dbus_error_encode_gerror (error) : NULL;
  g_autoptr(GVariant) result = g_variant_ref_sink (
    g_variant_new ("(bsss)", error == NULL, name != NULL ? name : "", error != NULL ? error->message : "",
                   host_key_seen != NULL ? host_key_seen : ""));

  if (error != NULL)
    g_printerr ("%s\n", error->message);
  if (!write_all (STDOUT_FILENO, g_variant_get_data (result), g_variant_get_size (result))) {
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
  gsize i;

  for (i = 0; pin[i] != '\0' && g_ascii_isxdigit (pin[i]); i++)
    ;
  if (pin[i] != '\0' || i != 64) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "The pinned host key must be 64 hexadecimal digits");
    return FALSE;
  }
  return TRUE;
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
