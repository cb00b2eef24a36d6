/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-secret.h"
#include "vivarium-ssh-key.h"
#include "vivariumctl-commands.h"

/* How many commits `project log` shows without -n, and the most Log() gives. */
#define VCTL_LOG_DEFAULT 20
#define VCTL_LOG_MAX     10000

/* The name is checked here as the daemon checks it, so that a typo is a
 * usage error and not a round trip. */
static gboolean
check_project_name (const gchar *name, GError **error)
{
  return vivarium_project_name_validate (name, error) || vctl_to_usage_error (error);
}

VivariumDBusProject *
vctl_project_for_call (VctlContext *ctx, const gchar *name, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!check_project_name (name, error) || !vctl_connect (ctx, error))
    return NULL;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_projects_sync,
                           VIVARIUM_DBUS_PATH_PROJECTS, _("project"),
                           name, error);
  if (path == NULL)
    return NULL;
  return vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_PROJECT_PROXY,
                         VIVARIUM_DBUS_IFACE_PREFIX ".Project", path, error);
}

/* The common start of the verbs that take one project NAME and nothing else. */
static VivariumDBusProject *
project_from_args (VctlContext *ctx, const VctlCommand *cmd, gboolean listing, gchar ***argv,
                   GError **error)
{
  if (!vctl_parse_args (ctx, cmd, NULL, listing, argv, 1, 1, error))
    return NULL;
  return vctl_project_for_call (ctx, (*argv)[1], error);
}

static guint64
size_unit (gchar letter)
{
  switch (g_ascii_toupper (letter)) {
  case 'K': return G_GUINT64_CONSTANT (1) << 10;
  case 'M': return G_GUINT64_CONSTANT (1) << 20;
  case 'G': return G_GUINT64_CONSTANT (1) << 30;
  case 'T': return G_GUINT64_CONSTANT (1) << 40;
  default:  return 0;
  }
}

static gboolean
size_error (const gchar *text, GError **error)
{
  g_autofree gchar *shown = vctl_escape_line (text);

  g_set_error (error, VCTL_USAGE_ERROR, 0,
               _("“%s” is not a size: give a whole number of bytes, or one followed by K, M, G "
                 "or T (powers of 1024), e.g. 64M"), shown);
  return FALSE;
}

/* DIGITS, optionally followed by one of K M G T and optionally "iB" after
 * it: "1048576", "64M", "2GiB". Nothing else: no sign, no fraction, no
 * exponent, no space, and nothing that overflows 64 bits. */
static gboolean
parse_size (const gchar *text, guint64 *out, GError **error)
{
  gsize digits = strspn (text, "0123456789");
  const gchar *suffix = text + digits;
  g_autofree gchar *number = g_strndup (text, digits);
  guint64 unit = 1;
  guint64 value = 0;

  if (digits == 0)
    return size_error (text, error);
  if (suffix[0] != '\0') {
    unit = size_unit (suffix[0]);
    if (unit == 0 || (suffix[1] != '\0' && strcmp (suffix + 1, "iB") != 0))
      return size_error (text, error);
  }
  if (!g_ascii_string_to_unsigned (number, 10, 0, G_MAXUINT64 / unit, &value, NULL)) {
    g_autofree gchar *shown = vctl_escape_line (text);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("The size “%s” is too large"), shown);
    return FALSE;
  }
  *out = value * unit;
  return TRUE;
}

/* The floor is the daemon's (common/); the ceiling, free space, only the
 * daemon knows. */
static gboolean
parse_quota (const gchar *text, guint64 *out, GError **error)
{
  g_autofree gchar *floor = vivarium_format_size (VIVARIUM_PROJECT_QUOTA_MIN, FALSE);

  if (text == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("--quota SIZE is required"));
    return FALSE;
  }
  if (!parse_size (text, out, error))
    return FALSE;
  if (*out < VIVARIUM_PROJECT_QUOTA_MIN) {
    g_autofree gchar *shown = vctl_escape_line (text);
    g_set_error (error, VCTL_USAGE_ERROR, 0,
                 _("A quota of “%s” is less than %s, the least a project may have"), shown, floor);
    return FALSE;
  }
  return TRUE;
}

static void
print_created (VctlContext *ctx, const gchar *name, const gchar *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusProject) project = NULL;
  g_autoptr(GVariant) key = NULL;
  g_autofree gchar *shown = vctl_escape_line (name);

  g_print (_("Created project “%s”.\n"), shown);
  /* The key is a convenience here; `project show` has it too. */
  project = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_PROJECT_PROXY,
                            VIVARIUM_DBUS_IFACE_PREFIX ".Project", path, &error);
  if (project != NULL)
    key = vctl_get_property (ctx, project, "DeployKey", &error);
  if (key != NULL) {
    g_autofree gchar *shown_key = vctl_escape_line (g_variant_get_string (key, NULL));
    g_print (_("Deploy key (add it on the forge before you publish): %s\n"), shown_key);
  }
}

gboolean
vctl_cmd_project_create (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *quota_text = NULL;
  g_autofree gchar *clone = NULL;
  g_auto(GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autofree gchar *path = NULL;
  guint64 quota = 0;
  const GOptionEntry entries[] = {
    { "quota", 0, 0, G_OPTION_ARG_STRING, &quota_text,
      N_("The dataset's hard size limit, e.g. 64M or 2G"), "SIZE" },
    { "clone", 0, 0, G_OPTION_ARG_STRING, &clone,
      N_("Start from this repository (https://, ssh:// or file://)"), "URL" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error) ||
      !check_project_name ((*argv)[1], error) || !parse_quota (quota_text, &quota, error))
    return FALSE;
  if (clone != NULL) {
    if (!vctl_check_text ("--clone", clone, G_MAXSIZE, error))
      return FALSE;
    g_variant_builder_add (&options, "{sv}", "clone", g_variant_new_string (clone));
  }
  if (!vctl_connect (ctx, error))
    return FALSE;
  /* A clone and a filesystem take as long as they take; the daemon bounds them. */
  if (!vivarium_dbus_manager_call_create_project_sync (ctx->manager, (*argv)[1], quota,
                                                      g_variant_builder_end (&options),
                                                      vctl_call_flags (ctx), VCTL_TIMEOUT_LONG,
                                                      &path, NULL, error))
    return FALSE;
  print_created (ctx, (*argv)[1], path);
  return TRUE;
}

static gchar *
format_head (const gchar *head)
{
  /* 12 hex digits tell commits apart; show and --json have it whole. */
  if (head == NULL || head[0] == '\0')
    return g_strdup ("-");
  return g_strndup (head, 12);
}

static void
print_project_row (gpointer proxy)
{
  VivariumDBusProject *project = proxy;
  g_autofree gchar *name = vctl_escape_line (vivarium_dbus_project_get_name (project));
  g_autofree gchar *quota = vivarium_format_size (vivarium_dbus_project_get_quota_bytes (project), FALSE);
  g_autofree gchar *used = vivarium_format_size (vivarium_dbus_project_get_used_bytes (project), FALSE);
  g_autofree gchar *head_raw = format_head (vivarium_dbus_project_get_head (project));
  g_autofree gchar *head = vctl_escape_line (head_raw);
  g_autofree gchar *remote = vctl_escape_line (vivarium_dbus_project_get_remote (project));

  g_print ("%-24s %10s %10s %-12s %s\n", name, quota, used, head,
           remote[0] != '\0' ? remote : "-");
}

gboolean
vctl_cmd_project_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *header = g_strdup_printf ("%-24s %10s %10s %-12s %s", _("NAME"), _("QUOTA"),
                                             _("USED"), _("HEAD"), _("REMOTE"));

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  return vctl_print_objects (ctx, vivarium_dbus_manager_call_list_projects_sync,
                             VIVARIUM_DBUS_TYPE_PROJECT_PROXY,
                             VIVARIUM_DBUS_IFACE_PREFIX ".Project", header, print_project_row,
                             _("No projects."), error);
}

static void
print_field (const gchar *label, const gchar *value)
{
  g_autofree gchar *shown = vctl_escape_line (value);

  g_print ("%-12s %s\n", label, shown[0] != '\0' ? shown : "-");
}

static void
print_bytes_field (const gchar *label, guint64 bytes)
{
  g_autofree gchar *size = vivarium_format_size (bytes, TRUE);

  g_print ("%-12s %s\n", label, size);
}

/* A list property an older daemon may not have: shown only when it is there. */
static void
print_cached_list (VivariumDBusProject *project, const gchar *property, const gchar *label)
{
  g_autoptr(GVariant) value = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (project), property);
  g_autofree const gchar **items = NULL;
  g_autofree gchar *joined = NULL;

  if (value == NULL || !g_variant_is_of_type (value, G_VARIANT_TYPE_STRING_ARRAY))
    return;
  items = g_variant_get_strv (value, NULL);
  joined = g_strjoinv (",", (gchar **) items);
  print_field (label, joined);
}

static void
print_project (VivariumDBusProject *project)
{
  const gchar *last_task = vivarium_dbus_project_get_last_task (project);

  print_field (_("Name:"), vivarium_dbus_project_get_name (project));
  print_bytes_field (_("Quota:"), vivarium_dbus_project_get_quota_bytes (project));
  print_bytes_field (_("Used:"), vivarium_dbus_project_get_used_bytes (project));
  print_field (_("Head:"), vivarium_dbus_project_get_head (project));
  print_field (_("Remote:"), vivarium_dbus_project_get_remote (project));
  print_field (_("Last task:"), g_strcmp0 (last_task, "/") == 0 ? "" : last_task);
  print_field (_("Deploy key:"), vivarium_dbus_project_get_deploy_key (project));
  print_cached_list (project, "Secrets", _("Secrets:"));
  print_cached_list (project, "SshKeys", _("SSH keys:"));
}

gboolean
vctl_cmd_project_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusProject) project = project_from_args (ctx, cmd, TRUE, argv, error);

  if (project == NULL || !vctl_ensure_properties (ctx, project, error))
    return FALSE;
  if (ctx->json) {
    g_autoptr(JsonNode) root = vctl_proxy_to_json (project);
    vctl_print_json (root);
  } else {
    print_project (project);
  }
  return TRUE;
}

static void
print_commit (const gchar *id, const gchar *author, gint64 time, const gchar *subject)
{
  g_autofree gchar *short_id = format_head (id);
  g_autofree gchar *shown_id = vctl_escape_line (short_id);
  g_autofree gchar *when = vctl_format_time (time > 0 ? (guint64) time : 0);
  g_autofree gchar *shown_author = vctl_escape_line (author);
  g_autofree gchar *shown_subject = vctl_escape_line (subject);

  g_print ("%-12s %-19s %s  %s\n", shown_id, when, shown_author, shown_subject);
}

static void
print_log_json (GVariant *commits)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  GVariantIter iter;
  const gchar *id, *author, *subject;
  gint64 time;

  json_builder_begin_array (b);
  g_variant_iter_init (&iter, commits);
  while (g_variant_iter_next (&iter, "(&s&sx&s)", &id, &author, &time, &subject)) {
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "id");
    json_builder_add_string_value (b, id);
    json_builder_set_member_name (b, "author");
    json_builder_add_string_value (b, author);
    json_builder_set_member_name (b, "time");
    json_builder_add_int_value (b, time);
    json_builder_set_member_name (b, "subject");
    json_builder_add_string_value (b, subject);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  root = json_builder_get_root (b);
  vctl_print_json (root);
}

gboolean
vctl_cmd_project_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *n_text = NULL;
  g_autoptr(VivariumDBusProject) project = NULL;
  g_autoptr(GVariant) commits = NULL;
  GVariantIter iter;
  const gchar *id, *author, *subject;
  gint64 time;
  guint n = VCTL_LOG_DEFAULT;
  const GOptionEntry entries[] = {
    { "max-count", 'n', 0, G_OPTION_ARG_STRING, &n_text,
      N_("Show at most N commits (default: 20)"), "N" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, TRUE, argv, 1, 1, error))
    return FALSE;
  if (n_text != NULL && !vctl_parse_uint ("-n", n_text, 1, VCTL_LOG_MAX, &n, error))
    return FALSE;
  project = vctl_project_for_call (ctx, (*argv)[1], error);
  if (project == NULL)
    return FALSE;
  if (!vivarium_dbus_project_call_log_sync (project, n, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                            &commits, NULL, error))
    return FALSE;
  if (ctx->json) {
    print_log_json (commits);
    return TRUE;
  }
  g_variant_iter_init (&iter, commits);
  while (g_variant_iter_next (&iter, "(&s&sx&s)", &id, &author, &time, &subject))
    print_commit (id, author, time, subject);
  return TRUE;
}

gboolean
vctl_cmd_project_delete (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusProject) project = project_from_args (ctx, cmd, FALSE, argv, error);
  g_autofree gchar *name = NULL;

  if (project == NULL)
    return FALSE;
  /* Unmounting and removing a dataset is the daemon's to bound. */
  if (!vivarium_dbus_project_call_delete_sync (project, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  g_print (_("Deleted project “%s”.\n"), name);
  return TRUE;
}

gboolean
vctl_cmd_project_remote (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusProject) project = NULL;
  g_autofree gchar *name = NULL;
  g_autofree gchar *url = NULL;

  /* Which URLs are allowed is the daemon's rule (and its sentence); only
   * what could not even be sent is refused here. */
  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error) ||
      !vctl_check_text ("URL", (*argv)[2], G_MAXSIZE, error))
    return FALSE;
  project = vctl_project_for_call (ctx, (*argv)[1], error);
  if (project == NULL)
    return FALSE;
  if (!vivarium_dbus_project_call_set_remote_sync (project, (*argv)[2], vctl_call_flags (ctx),
                                                   VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  url = vctl_escape_line ((*argv)[2]);
  g_print (_("Project “%s” publishes to %s.\n"), name, url);
  return TRUE;
}

gboolean
vctl_cmd_project_publish (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusProject) project = project_from_args (ctx, cmd, FALSE, argv, error);
  g_autofree gchar *name = NULL;

  if (project == NULL)
    return FALSE;
  if (!vivarium_dbus_project_call_publish_sync (project, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  g_print (_("Published project “%s”.\n"), name);
  return TRUE;
}

typedef struct {
  gchar *mode;
  GStrv  groups;
  GStrv  secrets;
  GStrv  ssh_keys;
} ProjectSettings;

static void
project_settings_clear (ProjectSettings *o)
{
  g_free (o->mode);
  g_strfreev (o->groups);
  g_strfreev (o->secrets);
  g_strfreev (o->ssh_keys);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ProjectSettings, project_settings_clear)

static GStrv
split_list (const gchar *text)
{
  return text[0] != '\0' ? g_strsplit (text, ",", -1) : g_new0 (gchar *, 1);
}

/* KEY=VALUE: egress=MODE, groups=G1,G2 (empty: the configuration's),
 * secrets=A,B and ssh_keys=A,B (empty: none). A key not given keeps the
 * project's value. */
static gboolean
parse_setting (const gchar *arg, ProjectSettings *o, GError **error)
{
  const gchar *eq = strchr (arg, '=');

  if (eq != NULL && g_str_has_prefix (arg, "egress=")) {
    g_free (o->mode);
    o->mode = g_strdup (eq + 1);
    return TRUE;
  }
  if (eq != NULL && g_str_has_prefix (arg, "groups=")) {
    g_strfreev (o->groups);
    o->groups = split_list (eq + 1);
    return TRUE;
  }
  if (eq != NULL && g_str_has_prefix (arg, "secrets=")) {
    g_strfreev (o->secrets);
    o->secrets = split_list (eq + 1);
    return TRUE;
  }
  if (eq != NULL && g_str_has_prefix (arg, "ssh_keys=")) {
    g_strfreev (o->ssh_keys);
    o->ssh_keys = split_list (eq + 1);
    return TRUE;
  }
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
               _("Unknown setting “%s” (known: egress=MODE, groups=G1,G2, secrets=A,B, ssh_keys=A,B)"), arg);
  return FALSE;
}

/* The same bounds as --secret and --ssh-key, before the bus (keys are
 * named by the same rule as secrets). */
static gboolean
check_secret_names (GStrv secrets, guint max, GError **error)
{
  guint n = secrets != NULL ? g_strv_length (secrets) : 0;

  if (n > max) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("At most %u names; %u were given"), max, n);
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

static gboolean
set_egress (VctlContext *ctx, VivariumDBusProject *project, const gchar *name, ProjectSettings *o, GError **error)
{
  g_autofree gchar *joined = NULL;
  g_autofree gchar *shown_mode = NULL;
  g_autofree gchar *shown_groups = NULL;

  /* The key not given keeps the project's value, which must be read first:
   * the proxy was made without its properties (a NULL list crashed here). */
  if ((o->mode == NULL || o->groups == NULL) && !vctl_ensure_properties (ctx, project, error))
    return FALSE;
  if (o->mode == NULL)
    o->mode = g_strdup (vivarium_dbus_project_get_egress_mode (project));
  if (o->groups == NULL)
    o->groups = g_strdupv ((gchar **) vivarium_dbus_project_get_egress_groups (project));
  if (o->groups == NULL)
    o->groups = g_new0 (gchar *, 1);
  if (!vivarium_dbus_project_call_set_egress_sync (project, o->mode != NULL ? o->mode : "",
                                                   (const gchar * const *) o->groups, vctl_call_flags (ctx),
                                                   VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL, error))
    return FALSE;
  joined = o->groups != NULL ? g_strjoinv (",", o->groups) : g_strdup ("");
  shown_mode = vctl_escape_line (o->mode != NULL && o->mode[0] != '\0' ? o->mode : _("the configuration's"));
  shown_groups = vctl_escape_line (joined[0] != '\0' ? joined : _("the configuration's"));
  g_print (_("Project “%s”: egress %s, groups %s.\n"), name, shown_mode, shown_groups);
  return TRUE;
}

static gboolean
set_secrets (VctlContext *ctx, VivariumDBusProject *project, const gchar *name, ProjectSettings *o, GError **error)
{
  g_autofree gchar *joined = NULL;
  g_autofree gchar *shown = NULL;

  if (!vivarium_dbus_project_call_set_secrets_sync (project, (const gchar * const *) o->secrets,
                                                    vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                    NULL, error))
    return FALSE;
  joined = g_strjoinv (",", o->secrets);
  shown = vctl_escape_line (joined[0] != '\0' ? joined : _("none"));
  g_print (_("Project “%s”: secrets %s.\n"), name, shown);
  return TRUE;
}

static gboolean
set_ssh_keys (VctlContext *ctx, VivariumDBusProject *project, const gchar *name, ProjectSettings *o, GError **error)
{
  g_autofree gchar *joined = NULL;
  g_autofree gchar *shown = NULL;

  if (!vivarium_dbus_project_call_set_ssh_keys_sync (project, (const gchar * const *) o->ssh_keys,
                                                     vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                     NULL, error))
    return FALSE;
  joined = g_strjoinv (",", o->ssh_keys);
  shown = vctl_escape_line (joined[0] != '\0' ? joined : _("none"));
  g_print (_("Project “%s”: SSH keys %s.\n"), name, shown);
  return TRUE;
}

gboolean
vctl_cmd_project_set (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusProject) project = NULL;
  g_auto(ProjectSettings) o = { 0 };
  g_autofree gchar *name = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 4, error))
    return FALSE;
  for (guint i = 2; (*argv)[i] != NULL; i++) {
    if (!vctl_check_text ("setting", (*argv)[i], 4096, error) || !parse_setting ((*argv)[i], &o, error))
      return FALSE;
  }
  if (!check_secret_names (o.secrets, VIVARIUM_SECRET_MAX_PER_SESSION, error) ||
      !check_secret_names (o.ssh_keys, VIVARIUM_SSH_KEY_MAX_PER_SESSION, error))
    return FALSE;
  project = vctl_project_for_call (ctx, (*argv)[1], error);
  if (project == NULL)
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  /* One method per kind of setting: each only when one of its keys was given. */
  if ((o.mode != NULL || o.groups != NULL) && !set_egress (ctx, project, name, &o, error))
    return FALSE;
  if (o.secrets != NULL && !set_secrets (ctx, project, name, &o, error))
    return FALSE;
  return o.ssh_keys == NULL || set_ssh_keys (ctx, project, name, &o, error);
}
