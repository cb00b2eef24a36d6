/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-egress-policy.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-secret.h"
#include "vivariumctl-commands.h"

/* Entries asked for per GetEgressLog call: the contract's most. */
#define EGRESS_LOG_PAGE 1000

void
vctl_egress_options_clear (VctlEgressOptions *o)
{
  g_clear_pointer (&o->mode, g_free);
  g_clear_pointer (&o->allow, g_strfreev);
  g_clear_pointer (&o->groups, g_strfreev);
  g_clear_pointer (&o->secrets, g_strfreev);
  g_clear_pointer (&o->ssh_keys, g_strfreev);
}

/* The same grammar the daemon and the proxy use (common/), so that a typo
 * is a usage error here and never a session booted for nothing. */
static gboolean
check_rules (gchar **allow, GError **error)
{
  guint n = allow != NULL ? g_strv_length (allow) : 0;

  if (n > VIVARIUM_EGRESS_MAX_EXTRA_RULES) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("At most %d --allow rules; %u were given"),
                 VIVARIUM_EGRESS_MAX_EXTRA_RULES, n);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    if (!vivarium_egress_rule_parse (allow[i], NULL, NULL, error))
      return vctl_to_usage_error (error);
  }
  return TRUE;
}

static gboolean
check_groups (gchar **groups, GError **error)
{
  for (guint i = 0; groups != NULL && groups[i] != NULL; i++) {
    if (!vivarium_name_validate ("egress group", groups[i], error))
      return vctl_to_usage_error (error);
  }
  return TRUE;
}

static gboolean
check_secrets (gchar **secrets, GError **error)
{
  guint n = secrets != NULL ? g_strv_length (secrets) : 0;

  if (n > VIVARIUM_SECRET_MAX_PER_SESSION) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("At most %d --secret names; %u were given"),
                 VIVARIUM_SECRET_MAX_PER_SESSION, n);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    if (!vivarium_secret_name_is_valid (secrets[i])) {
      g_autofree gchar *shown = vctl_escape_line (secrets[i]);
      g_set_error (error, VCTL_USAGE_ERROR, 0,
                   _("“%s” is not a secret's name (a letter or '_', then at most 63 letters, digits or '_')"), shown);
      return FALSE;
    }
  }
  return TRUE;
}

static void
add_strv (GVariantBuilder *b, const gchar *key, gchar **values)
{
  if (values != NULL)
    g_variant_builder_add (b, "{sv}", key, g_variant_new_strv ((const gchar * const *) values, -1));
}

gboolean
vctl_egress_options_add (const VctlEgressOptions *o, GVariantBuilder *b, GError **error)
{
  if (o->mode != NULL && !vivarium_egress_mode_is_valid (o->mode)) {
    g_autofree gchar *shown = vctl_escape_line (o->mode);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("Unknown egress mode “%s”; the modes are none, allowlist and open"),
                 shown);
    return FALSE;
  }
  /* Without --egress the daemon's default decides, which may well be
   * allowlist; only an explicit other mode makes the rules pointless. */
  if (o->mode != NULL && g_strcmp0 (o->mode, VIVARIUM_EGRESS_MODE_ALLOWLIST) != 0 &&
      (o->allow != NULL || o->groups != NULL || o->secrets != NULL || o->ssh_keys != NULL)) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("--allow, --group, --secret and --ssh-key apply only to --egress allowlist"));
    return FALSE;
  }
  if (!check_rules (o->allow, error) || !check_groups (o->groups, error) || !check_secrets (o->secrets, error))
    return FALSE;
  if (o->mode != NULL)
    g_variant_builder_add (b, "{sv}", "egress", g_variant_new_string (o->mode));
  add_strv (b, "egress_groups", o->groups);
  add_strv (b, "egress_allow", o->allow);
  add_strv (b, "secrets", o->secrets);
  add_strv (b, "ssh_keys", o->ssh_keys);
  return TRUE;
}

/* --- egress check ------------------------------------------------------ */

typedef struct {
  gchar  *session;
  gchar **groups;
  gchar **allow;
} CheckOptions;

static void
check_options_clear (CheckOptions *o)
{
  g_free (o->session);
  g_strfreev (o->groups);
  g_strfreev (o->allow);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (CheckOptions, check_options_clear)

/* A destination is what a guest would ask for: a host (or an address),
 * never a wildcard. */
static gboolean
check_destination (const gchar *destination, GError **error)
{
  if (destination[0] == '*') {
    g_autofree gchar *shown = vctl_escape_line (destination);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("“%s” is a wildcard; a destination is one host[:port]"), shown);
    return FALSE;
  }
  return vivarium_egress_rule_parse (destination, NULL, NULL, error) || vctl_to_usage_error (error);
}

static GVariant *
check_options_to_variant (VctlContext *ctx, const CheckOptions *o, GError **error)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autofree gchar *path = NULL;

  if (o->session != NULL && (o->groups != NULL || o->allow != NULL)) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Give --session, or --group and --allow, not both: a session's policy is fixed"));
    return NULL;
  }
  if (!check_rules (o->allow, error) || !check_groups (o->groups, error))
    return NULL;
  if (!vctl_connect (ctx, error))
    return NULL;
  if (o->session != NULL) {
    path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_sessions_sync,
                             VIVARIUM_DBUS_PATH_SESSIONS, _("session"), o->session, error);
    if (path == NULL)
      return NULL;
    g_variant_builder_add (&b, "{sv}", "session", g_variant_new_object_path (path));
  }
  add_strv (&b, "egress_groups", o->groups);
  add_strv (&b, "egress_allow", o->allow);
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

gboolean
vctl_cmd_egress_check (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(CheckOptions) o = { 0 };
  g_autoptr(GVariant) options = NULL;
  g_autofree gchar *shown = NULL;
  g_autofree gchar *reason = NULL;
  gboolean allowed = FALSE;
  const GOptionEntry entries[] = {
    { "session", 0, 0, G_OPTION_ARG_STRING, &o.session, N_("Judge by this session's policy"), "ID" },
    { "group", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.groups,
      N_("Judge by these rule groups instead of the default ones (repeat)"), "NAME" },
    { "allow", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.allow,
      N_("Add an allow rule HOST[:PORT] or *.DOMAIN[:PORT] (repeat)"), "RULE" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error) ||
      !check_destination ((*argv)[1], error))
    return FALSE;
  options = check_options_to_variant (ctx, &o, error);
  if (options == NULL)
    return FALSE;
  if (!vivarium_dbus_manager_call_check_egress_sync (ctx->manager, (*argv)[1], options, vctl_call_flags (ctx),
                                                     VIVARIUM_CALL_TIMEOUT_DEFAULT, &allowed, &reason, NULL, error))
    return FALSE;
  shown = vctl_escape_line (reason);
  g_print ("%s: %s\n", allowed ? "allowed" : "denied", shown);
  /* A script asks "would this pass?" with the exit status alone. */
  if (!allowed)
    ctx->exit_status = VCTL_EXIT_ERROR;
  return TRUE;
}

/* --- session/task egress-log ------------------------------------------- */

typedef struct {
  gint64       time;
  const gchar *host;
  guint16      port;
  const gchar *via;
  const gchar *verdict;
  const gchar *reason;
  guint64      bytes_up;
  guint64      bytes_down;
  guint64      duration_ms;
} EgressEntry;

/* Missing or mistyped members read as empty: the entry is still shown, and
 * never trusted for more than it says. */
static void
entry_from_variant (GVariant *v, EgressEntry *e)
{
  GVariantDict dict;

  memset (e, 0, sizeof *e);
  e->host = e->via = e->verdict = e->reason = "";
  g_variant_dict_init (&dict, v);
  g_variant_dict_lookup (&dict, "time", "x", &e->time);
  g_variant_dict_lookup (&dict, "host", "&s", &e->host);
  g_variant_dict_lookup (&dict, "port", "q", &e->port);
  g_variant_dict_lookup (&dict, "via", "&s", &e->via);
  g_variant_dict_lookup (&dict, "verdict", "&s", &e->verdict);
  g_variant_dict_lookup (&dict, "reason", "&s", &e->reason);
  g_variant_dict_lookup (&dict, "bytes-up", "t", &e->bytes_up);
  g_variant_dict_lookup (&dict, "bytes-down", "t", &e->bytes_down);
  g_variant_dict_lookup (&dict, "duration-ms", "t", &e->duration_ms);
  /* The strings point into @v, which outlives the entry. */
  g_variant_dict_clear (&dict);
}

/* "2026-12-02T00:21:00.123Z", as in the proxy's decisions.jsonl. */
static gchar *
format_iso_utc (gint64 usec)
{
  g_autoptr(GDateTime) utc = NULL;
  g_autofree gchar *seconds = NULL;

  if (usec < 0)
    return NULL;
  utc = g_date_time_new_from_unix_utc (usec / G_USEC_PER_SEC);
  if (utc == NULL)
    return NULL;
  seconds = g_date_time_format (utc, "%Y-%m-%dT%H:%M:%S");
  return g_strdup_printf ("%s.%03dZ", seconds, (gint) ((usec % G_USEC_PER_SEC) / 1000));
}

static void
add_json_entry (JsonBuilder *b, const EgressEntry *e)
{
  g_autofree gchar *when = format_iso_utc (e->time);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "time");
  if (when != NULL)
    json_builder_add_string_value (b, when);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "host");
  json_builder_add_string_value (b, e->host);
  json_builder_set_member_name (b, "port");
  json_builder_add_int_value (b, e->port);
  json_builder_set_member_name (b, "via");
  json_builder_add_string_value (b, e->via);
  json_builder_set_member_name (b, "verdict");
  json_builder_add_string_value (b, e->verdict);
  json_builder_set_member_name (b, "reason");
  json_builder_add_string_value (b, e->reason);
  json_builder_set_member_name (b, "bytes_up");
  json_builder_add_int_value (b, (gint64) MIN (e->bytes_up, (guint64) G_MAXINT64));
  json_builder_set_member_name (b, "bytes_down");
  json_builder_add_int_value (b, (gint64) MIN (e->bytes_down, (guint64) G_MAXINT64));
  json_builder_set_member_name (b, "duration_ms");
  json_builder_add_int_value (b, (gint64) MIN (e->duration_ms, (guint64) G_MAXINT64));
  json_builder_end_object (b);
}

#define EGRESS_ROW "%-19s %-8s %-5s %-36s %9s %9s %8s %s\n"

static void
print_table_header (void)
{
  g_print (EGRESS_ROW, _("TIME"), _("VERDICT"), _("VIA"), _("DESTINATION"), _("UP"), _("DOWN"),
           _("TOOK"), _("REASON"));
}

/* Host and reason carry what the guest asked for: escaped, one line each,
 * so no entry can draw a row of its own. */
static void
print_table_entry (const EgressEntry *e)
{
  g_autofree gchar *when = vctl_format_time (e->time > 0 ? (guint64) e->time : 0);
  g_autofree gchar *host = vctl_escape_line (e->host);
  g_autofree gchar *dest = g_strdup_printf ("%s:%u", host, e->port);
  g_autofree gchar *via = vctl_escape_line (e->via);
  g_autofree gchar *verdict = vctl_escape_line (e->verdict);
  g_autofree gchar *reason = vctl_escape_line (e->reason);
  g_autofree gchar *up = vivarium_format_size (e->bytes_up, FALSE);
  g_autofree gchar *down = vivarium_format_size (e->bytes_down, FALSE);
  g_autofree gchar *took = vctl_format_duration (e->duration_ms * 1000);

  g_print (EGRESS_ROW, when, verdict, via, dest, up, down, took, reason);
}

static GVariant *
fetch_egress_page (VctlContext *ctx, gpointer proxy, guint64 offset, guint64 *next, guint64 *total,
                   GError **error)
{
  GVariant *entries = NULL;
  gboolean ok;

  /* Sessions and tasks keep the same log under the same method. */
  if (VIVARIUM_DBUS_IS_SESSION (proxy))
    ok = vivarium_dbus_session_call_get_egress_log_sync (proxy, offset, EGRESS_LOG_PAGE, vctl_call_flags (ctx),
                                                         VIVARIUM_CALL_TIMEOUT_DEFAULT, &entries, next, total,
                                                         NULL, error);
  else
    ok = vivarium_dbus_task_call_get_egress_log_sync (proxy, offset, EGRESS_LOG_PAGE, vctl_call_flags (ctx),
                                                      VIVARIUM_CALL_TIMEOUT_DEFAULT, &entries, next, total,
                                                      NULL, error);
  if (!ok)
    return NULL;
  /* A daemon that does not move forward would keep us here forever. */
  if (*next <= offset && *next < *total) {
    g_clear_pointer (&entries, g_variant_unref);
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL, _("The daemon’s egress log did not advance"));
  }
  return entries;
}

/* Paged: each reply is bounded, the whole log is not. The table is printed
 * page by page; JSON needs the whole array first. */
gboolean
vctl_print_egress_log (VctlContext *ctx, gpointer proxy, GError **error)
{
  g_autoptr(JsonBuilder) json = json_builder_new ();
  guint64 offset = 0, next = 0, total = 1, shown = 0;

  json_builder_begin_array (json);
  while (offset < total) {
    g_autoptr(GVariant) entries = fetch_egress_page (ctx, proxy, offset, &next, &total, error);
    if (entries == NULL)
      return FALSE;
    for (gsize i = 0; i < g_variant_n_children (entries); i++) {
      g_autoptr(GVariant) v = g_variant_get_child_value (entries, i);
      EgressEntry e;
      entry_from_variant (v, &e);
      if (ctx->json) {
        add_json_entry (json, &e);
        continue;
      }
      if (shown++ == 0)
        print_table_header ();
      print_table_entry (&e);
    }
    offset = next;
  }
  json_builder_end_array (json);
  if (ctx->json) {
    g_autoptr(JsonNode) root = json_builder_get_root (json);
    vctl_print_json (root);
  } else if (shown == 0) {
    g_print ("%s\n", _("No egress decisions (the log is empty, or the session is not in allowlist mode)."));
  }
  return TRUE;
}

gboolean
vctl_cmd_session_egress_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autofree gchar *path = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error) || !vctl_connect (ctx, error))
    return FALSE;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_sessions_sync,
                           VIVARIUM_DBUS_PATH_SESSIONS, _("session"), (*argv)[1], error);
  if (path == NULL)
    return FALSE;
  session = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_SESSION_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Session", path,
                            error);
  return session != NULL && vctl_print_egress_log (ctx, session, error);
}

gboolean
vctl_cmd_task_egress_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *path = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error) || !vctl_connect (ctx, error))
    return FALSE;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_tasks_sync,
                           VIVARIUM_DBUS_PATH_TASKS, _("task"), (*argv)[1], error);
  if (path == NULL)
    return FALSE;
  task = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_TASK_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Task", path, error);
  return task != NULL && vctl_print_egress_log (ctx, task, error);
}
