/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-report.h"
#include "vivariumctl-commands.h"

/* `report verify` and `report render` work on a copy of a signed report,
 * offline: they never touch the bus, so anyone holding a file can check it
 * with the public key it carries, and compare that key's fingerprint with
 * the daemon's. */

#define READ_CHUNK (64 * 1024)

/* Reads at most one byte past the document limit, so an endless or huge
 * file costs no more than that to refuse. */
static GBytes *
read_bounded (const gchar *path, GError **error)
{
  g_autoptr(GByteArray) buf = g_byte_array_new ();
  g_autofree gchar *shown = vctl_escape_line (path);
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0) {
    int saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot open “%s”: %s"),
                 shown, g_strerror (saved));
    return NULL;
  }
  while (buf->len <= VIVARIUM_REPORT_DOCUMENT_MAX) {
    guint at = buf->len;
    gssize n;

    g_byte_array_set_size (buf, at + READ_CHUNK);
    n = read (fd, buf->data + at, READ_CHUNK);
    if (n < 0 && errno == EINTR) {
      g_byte_array_set_size (buf, at);
      continue;
    }
    if (n < 0) {
      int saved = errno;
      close (fd);
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot read “%s”: %s"),
                   shown, g_strerror (saved));
      return NULL;
    }
    g_byte_array_set_size (buf, at + (guint) n);
    if (n == 0)
      break;
  }
  close (fd);
  /* The limit itself is checked, with its sentence, by the verifier. */
  return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
}

/* Hex pasted from elsewhere may be upper case; the fingerprint is not. */
static gboolean
parse_fingerprint (gchar *fingerprint, GError **error)
{
  if (fingerprint == NULL)
    return TRUE;
  if (g_str_has_prefix (fingerprint, "sha256:")) {
    for (gchar *p = fingerprint + strlen ("sha256:"); *p != '\0'; p++)
      *p = g_ascii_tolower (*p);
    return TRUE;
  }
  g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                       _("A key fingerprint has the form sha256:HEX"));
  return FALSE;
}

static VivariumReport *
verify_file (const gchar *path, const gchar *expected, gchar **fingerprint, GError **error)
{
  g_autoptr(GBytes) data = read_bounded (path, error);
  gsize len = 0;
  const gchar *text;

  if (data == NULL)
    return NULL;
  text = g_bytes_get_data (data, &len);
  return vivarium_signed_report_verify (text != NULL ? text : "", len, expected, fingerprint,
                                        error);
}

gboolean
vctl_cmd_report_verify (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *expected = NULL;
  g_autofree gchar *fingerprint = NULL;
  g_autoptr(VivariumReport) report = NULL;
  g_autofree gchar *id = NULL;
  const GOptionEntry entries[] = {
    { "fingerprint", 0, 0, G_OPTION_ARG_STRING, &expected,
      N_("Also refuse a report signed by any key but this one"), "sha256:HEX" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error) ||
      !parse_fingerprint (expected, error))
    return FALSE;
  report = verify_file ((*argv)[1], expected, &fingerprint, error);
  if (report == NULL)
    return FALSE;
  id = vctl_escape_line (vivarium_report_get_id (report));
  g_print (_("Valid: report %s is signed by the key %s.\n"), id, fingerprint);
  if (expected == NULL)
    g_print ("%s\n", _("Compare this fingerprint with the daemon's public key before you trust "
                       "the report; --fingerprint checks it for you."));
  return TRUE;
}

gboolean
vctl_cmd_report_render (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *expected = NULL;
  g_autofree gchar *fingerprint = NULL;
  g_autoptr(VivariumReport) report = NULL;
  g_autofree gchar *text = NULL;
  gboolean no_verify = FALSE;
  const GOptionEntry entries[] = {
    { "no-verify", 0, 0, G_OPTION_ARG_NONE, &no_verify,
      N_("Show the report even if its signature is missing or wrong"), NULL },
    { "fingerprint", 0, 0, G_OPTION_ARG_STRING, &expected,
      N_("Also refuse a report signed by any key but this one"), "sha256:HEX" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error) ||
      !parse_fingerprint (expected, error))
    return FALSE;
  if (no_verify && expected != NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("--no-verify and --fingerprint contradict each other"));
    return FALSE;
  }
  if (no_verify) {
    g_autoptr(GBytes) data = read_bounded ((*argv)[1], error);
    gsize len = 0;
    const gchar *raw;

    if (data == NULL)
      return FALSE;
    raw = g_bytes_get_data (data, &len);
    report = vivarium_signed_report_parse_unverified (raw != NULL ? raw : "", len, error);
  } else {
    report = verify_file ((*argv)[1], expected, &fingerprint, error);
  }
  if (report == NULL)
    return FALSE;
  /* The text says itself whether the signature was checked. */
  text = vivarium_report_render_text (report, fingerprint);
  g_print ("%s", text);
  return TRUE;
}
