/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <gio/gunixfdlist.h>

#include "vivarium-secret.h"
#include "vivariumctl-commands.h"

/* `ssh-key add|list|remove` (docs/secrets.md, "SSH keys"). The key goes to
 * the daemon as a descriptor this client opened with its own rights, never
 * as an argument a bus monitor could log. */

static gboolean
check_name (const gchar *name, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (vivarium_secret_name_is_valid (name))
    return TRUE;
  shown = vctl_escape_line (name);
  g_set_error (error, VCTL_USAGE_ERROR, 0,
               _("“%s” is not an SSH key's name: a letter or '_' and then at most 63 letters, digits or '_'"),
               shown);
  return FALSE;
}

static GUnixFDList *
open_key (const gchar *file, GError **error)
{
  struct stat st;
  gint fd = open (file, O_RDONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0) {
    gint saved = errno;
    g_autofree gchar *shown = vctl_escape_line (file);
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), _("Cannot open “%s”: %s"), shown,
                 g_strerror (saved));
    return NULL;
  }
  if (fstat (fd, &st) != 0 || S_ISDIR (st.st_mode)) {
    g_autofree gchar *shown = vctl_escape_line (file);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_IS_DIRECTORY, _("“%s” is not a key file"), shown);
    close (fd);
    return NULL;
  }
  return g_unix_fd_list_new_from_array (&fd, 1);
}

gboolean
vctl_cmd_ssh_key_add (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *key_file = NULL;
  gboolean replace = FALSE;
  g_autoptr(GUnixFDList) fds = NULL;
  g_autofree gchar *shown = NULL;
  GVariantBuilder options;
  const GOptionEntry entries[] = {
    { "key-file", 0, 0, G_OPTION_ARG_FILENAME, &key_file,
      N_("The OpenSSH private key (unencrypted), as ssh-keygen wrote it"), "FILE" },
    { "replace", 0, 0, G_OPTION_ARG_NONE, &replace, N_("Replace a key of that name"), NULL },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error) || !check_name ((*argv)[1], error))
    return FALSE;
  if (key_file == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("--key-file FILE is required"));
    return FALSE;
  }
  if (!vctl_check_local (ctx, "ssh-key add", error))
    return FALSE;
  fds = open_key (key_file, error);
  if (fds == NULL || !vctl_connect (ctx, error))
    return FALSE;
  g_variant_builder_init (&options, G_VARIANT_TYPE_VARDICT);
  if (replace)
    g_variant_builder_add (&options, "{sv}", "replace", g_variant_new_boolean (TRUE));
  if (!vivarium_dbus_manager_call_add_ssh_key_sync (ctx->manager, (*argv)[1], g_variant_builder_end (&options),
                                                    g_variant_new_handle (0), vctl_call_flags (ctx), VCTL_TIMEOUT_FILE,
                                                    fds, NULL, NULL, error))
    return FALSE;
  shown = vctl_escape_line ((*argv)[1]);
  g_print (_("Stored SSH key “%s”.\n"), shown);
  return TRUE;
}

static void
print_json (GVariant *keys)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  GVariantIter iter;
  GVariant *key;

  json_builder_begin_array (b);
  g_variant_iter_init (&iter, keys);
  while ((key = g_variant_iter_next_value (&iter)) != NULL) {
    g_autoptr(GVariantDict) d = g_variant_dict_new (key);
    const gchar *name = "", *public_key = "", *fingerprint = "";
    guint64 added_at = 0;

    g_variant_dict_lookup (d, "name", "&s", &name);
    g_variant_dict_lookup (d, "public_key", "&s", &public_key);
    g_variant_dict_lookup (d, "fingerprint", "&s", &fingerprint);
    g_variant_dict_lookup (d, "added_at", "t", &added_at);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "name");
    json_builder_add_string_value (b, name);
    json_builder_set_member_name (b, "public_key");
    json_builder_add_string_value (b, public_key);
    json_builder_set_member_name (b, "fingerprint");
    json_builder_add_string_value (b, fingerprint);
    json_builder_set_member_name (b, "added_at");
    json_builder_add_int_value (b, (gint64) added_at);
    json_builder_end_object (b);
    g_variant_unref (key);
  }
  json_builder_end_array (b);
  root = json_builder_get_root (b);
  vctl_print_json (root);
}

static void
print_table (GVariant *keys)
{
  GVariantIter iter;
  GVariant *key;

  g_print ("%-20s %-52s %s\n", _("NAME"), _("FINGERPRINT"), _("ADDED"));
  g_variant_iter_init (&iter, keys);
  while ((key = g_variant_iter_next_value (&iter)) != NULL) {
    g_autoptr(GVariantDict) d = g_variant_dict_new (key);
    const gchar *name = "", *fingerprint = "";
    guint64 added_at = 0;
    g_autofree gchar *shown_name = NULL;
    g_autofree gchar *shown_fp = NULL;
    g_autofree gchar *when = NULL;

    g_variant_dict_lookup (d, "name", "&s", &name);
    g_variant_dict_lookup (d, "fingerprint", "&s", &fingerprint);
    g_variant_dict_lookup (d, "added_at", "t", &added_at);
    shown_name = vctl_escape_line (name);
    shown_fp = vctl_escape_line (fingerprint);
    when = vctl_format_time (added_at * G_USEC_PER_SEC);
    g_print ("%-20s %-52s %s\n", shown_name, shown_fp, when);
    g_variant_unref (key);
  }
}

gboolean
vctl_cmd_ssh_key_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(GVariant) keys = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error) || !vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_list_ssh_keys_sync (ctx->manager, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                      &keys, NULL, error))
    return FALSE;
  if (ctx->json)
    print_json (keys);
  else
    print_table (keys);
  return TRUE;
}

gboolean
vctl_cmd_ssh_key_remove (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error) || !check_name ((*argv)[1], error) ||
      !vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_remove_ssh_key_sync (ctx->manager, (*argv)[1], vctl_call_flags (ctx),
                                                       VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL, error))
    return FALSE;
  shown = vctl_escape_line ((*argv)[1]);
  g_print (_("Removed SSH key “%s”.\n"), shown);
  return TRUE;
}
