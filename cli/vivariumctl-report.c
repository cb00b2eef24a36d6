/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-report.h"
#include "vivariumctl-commands.h"

/* `report verify` and `report render` work on a copy of a signed report,
 * offline: they never touch the bus, so anyone holding a file can check it
 * with the public key it carries, and compare that key's fingerprint with
 * the daemon's. */

/* Reads at most one chunk past the document limit; the limit itself is
 * checked, with its sentence, by the verifier. */
static GBytes *
read_bounded (const gchar *path, GError **error)
{
  return vctl_read_bounded (path, VIVARIUM_REPORT_DOCUMENT_MAX, error);
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

/* --- reports the daemon keeps: list, show, and a task's report --------- */

static void
print_report_row (gpointer proxy)
{
  VivariumDBusReport *report = proxy;
  g_autofree gchar *id = vctl_escape_line (vivarium_dbus_report_get_id (report));
  g_autofree gchar *outcome = vctl_escape_line (vivarium_dbus_report_get_outcome (report));
  g_autofree gchar *project = vctl_escape_line (vivarium_dbus_report_get_project (report));
  g_autofree gchar *task = vctl_escape_line (vivarium_dbus_report_get_task_id (report));
  g_autofree gchar *created = vctl_format_time (vivarium_dbus_report_get_created_at (report));

  g_print ("%-20s %-11s %-16s %-20s %s\n", id, outcome, project, task, created);
}

gboolean
vctl_cmd_report_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *header = g_strdup_printf ("%-20s %-11s %-16s %-20s %s", _("ID"),
                                             _("OUTCOME"), _("PROJECT"), _("TASK"),
                                             _("CREATED"));

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  return vctl_print_objects (ctx, vivarium_dbus_manager_call_list_reports_sync,
                             VIVARIUM_DBUS_TYPE_REPORT_PROXY,
                             VIVARIUM_DBUS_IFACE_PREFIX ".Report", header, print_report_row,
                             _("No reports."), error);
}

/* The signed JSON (or the daemon's rendering of it) exactly as the daemon
 * stored it, so that `report show ID --json > f; report verify f` holds. */
gboolean
vctl_print_report (VctlContext *ctx, const gchar *path, gboolean json, GError **error)
{
  g_autoptr(VivariumDBusReport) report = NULL;
  g_autofree gchar *text = NULL;
  gboolean ok;

  report = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_REPORT_PROXY,
                           VIVARIUM_DBUS_IFACE_PREFIX ".Report", path, error);
  if (report == NULL)
    return FALSE;
  if (json)
    ok = vivarium_dbus_report_call_get_json_sync (report, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                  &text, NULL, error);
  else
    ok = vivarium_dbus_report_call_get_text_sync (report, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                  &text, NULL, error);
  if (!ok)
    return FALSE;
  return vctl_write_for_reader (text, error);
}

gboolean
vctl_cmd_report_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_reports_sync,
                           VIVARIUM_DBUS_PATH_REPORTS, _("report"),
                           (*argv)[1], error);
  if (path == NULL)
    return FALSE;
  return vctl_print_report (ctx, path, ctx->json, error);
}
