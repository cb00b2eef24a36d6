/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-size.h"
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

/* Manager.GetCapacity; NULL from a daemon older than it, which is no
 * error for a status line. */
static gboolean
read_capacity (VctlContext *ctx, GVariant **capacity, GError **error)
{
  g_autoptr(GError) error_local = NULL;

  *capacity = NULL;
  if (vivarium_dbus_manager_call_get_capacity_sync (ctx->manager, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                    capacity, NULL, &error_local))
    return TRUE;
  if (g_error_matches (error_local, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD))
    return TRUE;
  g_propagate_error (error, g_steal_pointer (&error_local));
  return FALSE;
}

static void
print_capacity (GVariant *capacity)
{
  guint32 slots = 0, slots_free = 0, queued = 0, queue_free = 0, cpus = 0;
  guint64 total = 0, available = 0;
  gdouble load = 0;
  g_autofree gchar *total_text = NULL;
  g_autofree gchar *available_text = NULL;

  if (capacity == NULL)
    return;
  g_variant_lookup (capacity, "slots", "u", &slots);
  g_variant_lookup (capacity, "slots-free", "u", &slots_free);
  g_variant_lookup (capacity, "queued", "u", &queued);
  g_variant_lookup (capacity, "queue-free", "u", &queue_free);
  g_variant_lookup (capacity, "memory-total", "t", &total);
  g_variant_lookup (capacity, "memory-available", "t", &available);
  g_variant_lookup (capacity, "load", "d", &load);
  g_variant_lookup (capacity, "cpus", "u", &cpus);
  total_text = vivarium_format_size (total, FALSE);
  available_text = vivarium_format_size (available, FALSE);
  g_print ("%-13s ", _("Slots:"));
  /* TRANSLATORS: session slots of [Sessions] MaxSessions, e.g. "3 of 4 free" */
  g_print (_("%u of %u free"), slots_free, slots);
  g_print ("\n%-13s ", _("Queued:"));
  /* TRANSLATORS: tasks waiting for a slot, and how many more may wait */
  g_print (_("%u (room for %u more)"), queued, queue_free);
  g_print ("\n%-13s ", _("Memory:"));
  /* TRANSLATORS: e.g. "20.1 GiB of 23.4 GiB available" */
  g_print (_("%s of %s available"), available_text, total_text);
  g_print ("\n%-13s ", _("Load:"));
  /* TRANSLATORS: the 1-minute load average and the CPU count */
  g_print (_("%.2f on %u CPUs"), load, cpus);
  g_print ("\n");
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
print_text (VctlContext *ctx, gint64 sessions, gint64 images, gint64 projects, GVariant *capacity)
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
  print_capacity (capacity);
}

static void
print_json (VctlContext *ctx, gint64 sessions, gint64 images, gint64 projects, GVariant *capacity)
{
  g_autoptr(JsonNode) root = vctl_proxy_to_json (ctx->manager);
  JsonObject *obj = json_node_get_object (root);

  json_object_set_int_member (obj, "Sessions", sessions);
  json_object_set_int_member (obj, "Images", images);
  if (projects < 0)
    json_object_set_null_member (obj, "Projects");
  else
    json_object_set_int_member (obj, "Projects", projects);
  if (capacity != NULL)
    json_object_set_member (obj, "Capacity", json_gvariant_serialize (capacity));
  vctl_print_json (root);
}

gboolean
vctl_cmd_status (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(GStrv) sessions = NULL;
  g_auto(GStrv) images = NULL;
  g_autoptr(GVariant) capacity = NULL;
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
  if (!read_capacity (ctx, &capacity, error))
    return FALSE;
  if (!vctl_ensure_properties (ctx, ctx->manager, error))
    return FALSE;

  if (ctx->json)
    print_json (ctx, g_strv_length (sessions), g_strv_length (images), n_projects, capacity);
  else
    print_text (ctx, g_strv_length (sessions), g_strv_length (images), n_projects, capacity);
  return TRUE;
}
