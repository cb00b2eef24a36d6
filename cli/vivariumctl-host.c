/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-capacity-pick.h"
#include "vivarium-remote.h"
#include "vivariumctl-commands.h"

/* Each host is asked in turn, over its own SSH connection; a fleet bigger
 * than this wants a scheduler (docs/fleet.md), not a loop in a client. */
#define MAX_HOSTS 64

typedef struct {
  const gchar *destination;
  GVariant    *capacity;   /* NULL when the host could not be asked */
  GError      *error;
} HostAnswer;

static void
host_answer_clear (HostAnswer *answer)
{
  g_clear_pointer (&answer->capacity, g_variant_unref);
  g_clear_error (&answer->error);
}

/* Manager.GetCapacity of one host, over a connection of its own that is
 * closed again (ssh ends with it). */
static void
ask_host (VctlContext *ctx, HostAnswer *answer)
{
  VctlContext host_ctx = { .no_interaction = ctx->no_interaction, .host = g_strdup (answer->destination) };

  if (vctl_connect (&host_ctx, &answer->error))
    vivarium_dbus_manager_call_get_capacity_sync (host_ctx.manager, vctl_call_flags (&host_ctx),
                                                  VIVARIUM_CALL_TIMEOUT_DEFAULT, &answer->capacity,
                                                  NULL, &answer->error);
  if (host_ctx.bus != NULL)
    g_dbus_connection_close_sync (host_ctx.bus, NULL, NULL);
  vctl_context_clear (&host_ctx);
}

static void
warn_unasked (const HostAnswer *answer)
{
  g_autoptr(GError) error = g_error_copy (answer->error);

  /* "Cannot reach HOST over SSH" names it already; the daemon's refusals do not. */
  if (strstr (error->message, answer->destination) == NULL)
    g_prefix_error (&error, "%s: ", answer->destination);
  (void) vctl_report_error (error);
}

static void
print_json (const HostAnswer *answers, guint n, gint pick, VivariumPickKind kind)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "Pick");
  if (pick < 0)
    json_builder_add_null_value (b);
  else
    json_builder_add_string_value (b, answers[pick].destination);
  json_builder_set_member_name (b, "Queued");
  json_builder_add_boolean_value (b, kind == VIVARIUM_PICK_QUEUED);
  json_builder_set_member_name (b, "Hosts");
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++) {
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "Host");
    json_builder_add_string_value (b, answers[i].destination);
    if (answers[i].capacity != NULL) {
      json_builder_set_member_name (b, "Capacity");
      json_builder_add_value (b, json_gvariant_serialize (answers[i].capacity));
    } else {
      g_autofree gchar *sentence = vivarium_call_error_sentence (answers[i].error);
      json_builder_set_member_name (b, "Error");
      json_builder_add_string_value (b, sentence);
    }
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  vctl_print_json (root);
}

static gboolean
check_destinations (VctlContext *ctx, gchar **hosts, GError **error)
{
  if (ctx->host != NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("host pick asks the hosts named after it; it takes no --host before it"));
    return FALSE;
  }
  if (g_strv_length (hosts) > MAX_HOSTS) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("At most %u hosts can be asked at once"), MAX_HOSTS);
    return FALSE;
  }
  for (guint i = 0; hosts[i] != NULL; i++) {
    g_autoptr(GError) error_local = NULL;

    if (!vivarium_remote_check_destination (hosts[i], &error_local)) {
      g_set_error_literal (error, VCTL_USAGE_ERROR, 0, error_local->message);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean
vctl_cmd_host_pick (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  gchar **hosts;
  g_autofree HostAnswer *answers = NULL;
  g_autofree GVariant **capacities = NULL;
  VivariumPickKind kind;
  guint n;
  gint pick;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, G_MAXUINT, error))
    return FALSE;
  hosts = *argv + 1;
  if (!check_destinations (ctx, hosts, error))
    return FALSE;

  n = g_strv_length (hosts);
  answers = g_new0 (HostAnswer, n);
  capacities = g_new0 (GVariant *, n);
  for (guint i = 0; i < n; i++) {
    answers[i].destination = hosts[i];
    ask_host (ctx, &answers[i]);
    capacities[i] = answers[i].capacity;
    if (answers[i].capacity == NULL && !ctx->json)
      warn_unasked (&answers[i]);
  }
  pick = vivarium_capacity_pick (capacities, n, &kind);

  if (ctx->json)
    print_json (answers, n, pick, kind);
  else if (pick >= 0)
    g_print ("%s\n", answers[pick].destination);
  if (pick >= 0 && kind == VIVARIUM_PICK_QUEUED && !ctx->json)
    g_printerr (_("vivariumctl: no host has a free session slot; %s has the shortest queue\n"),
                answers[pick].destination);
  for (guint i = 0; i < n; i++)
    host_answer_clear (&answers[i]);
  if (pick < 0) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE,
                         _("No host can take a task: none could be asked, or every one's queue is full"));
    return FALSE;
  }
  return TRUE;
}
