/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivariumctl-commands.h"

/* Projects come later than sessions and images; a daemon without them is
 * still worth a status line, so only that one count may be missing. */
static gboolean
count_projects (VctlContext *ctx, gint64 *n, GError **error)
{
  g_autoptr(GError) error_local = NULL;
  g_auto(GStrv) paths = vctl_list_objects (ctx, vivarium_dbus_manager_call_list_projects_sync, &error_local);

  if (paths != NULL) {
    *n = g_strv_length (paths);
    return TRUE;
  }
  if (g_error_matches (error_local, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD) ||
      g_error_matches (error_local, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED)) {
    *n = -1;
    return TRUE;
  }
  g_propagate_error (error, g_steal_pointer (&error_local));
  return FALSE;
}

static void
print_count (const gchar *label, gint64 n)
{
  if (n < 0)
    g_print ("%-13s -\n", label);
  else
    g_print ("%-13s %" G_GINT64_FORMAT "\n", label, n);
}

static void
print_text (VctlContext *ctx, gint64 sessions, gint64 images, gint64 projects)
{
  g_autofree gchar *version = vctl_escape_line (vivarium_dbus_manager_get_version (ctx->manager));
  g_autofree gchar *state = vctl_escape_line (vivarium_dbus_manager_get_state (ctx->manager));
  g_autofree gchar *accel = vctl_escape_line (vivarium_dbus_manager_get_accelerator (ctx->manager));

  g_print ("%-13s %s\n", _("Version:"), version);
  g_print ("%-13s %s\n", _("State:"), state);
  g_print ("%-13s %s\n", _("Accelerator:"), accel);
  print_count (_("Sessions:"), sessions);
  print_count (_("Images:"), images);
  print_count (_("Projects:"), projects);
}

static void
print_json (VctlContext *ctx, gint64 sessions, gint64 images, gint64 projects)
{
  g_autoptr(JsonNode) root = vctl_proxy_to_json (ctx->manager);
  JsonObject *obj = json_node_get_object (root);

  json_object_set_int_member (obj, "Sessions", sessions);
  json_object_set_int_member (obj, "Images", images);
  if (projects < 0)
    json_object_set_null_member (obj, "Projects");
  else
    json_object_set_int_member (obj, "Projects", projects);
  vctl_print_json (root);
}

gboolean
vctl_cmd_status (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(GStrv) sessions = NULL;
  g_auto(GStrv) images = NULL;
  gint64 n_projects = 0;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  /* The method calls come first: they carry the daemon's real error when
   * it cannot be reached, where a property read would only be empty. */
  sessions = vctl_list_objects (ctx, vivarium_dbus_manager_call_list_sessions_sync, error);
  if (sessions == NULL)
    return FALSE;
  images = vctl_list_objects (ctx, vivarium_dbus_manager_call_list_images_sync, error);
  if (images == NULL)
    return FALSE;
  if (!count_projects (ctx, &n_projects, error))
    return FALSE;
  if (!vctl_ensure_properties (ctx, ctx->manager, error))
    return FALSE;

  if (ctx->json)
    print_json (ctx, g_strv_length (sessions), g_strv_length (images), n_projects);
  else
    print_text (ctx, g_strv_length (sessions), g_strv_length (images), n_projects);
  return TRUE;
}
