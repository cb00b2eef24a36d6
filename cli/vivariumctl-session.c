/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivariumctl-commands.h"

static VivariumDBusSession *
session_for_call (VctlContext *ctx, const gchar *id, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vctl_connect (ctx, error))
    return NULL;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_sessions_sync,
                           VIVARIUM_DBUS_PATH_SESSIONS, _("session"),
                           id, error);
  if (path == NULL)
    return NULL;
  return vivarium_dbus_session_proxy_new_sync (ctx->bus,
                                               G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                               G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                               VIVARIUM_DBUS_NAME, path, NULL, error);
}

static gboolean
check_guest_path (const gchar *path, GError **error)
{
  return vivarium_guest_path_validate (path, error) || vctl_to_usage_error (error);
}

static void
print_session_row (gpointer proxy)
{
  VivariumDBusSession *session = proxy;
  g_autofree gchar *id = vctl_escape_line (vivarium_dbus_session_get_id (session));
  g_autofree gchar *state = vctl_escape_line (vivarium_dbus_session_get_state (session));
  g_autofree gchar *image = vctl_escape_line (vivarium_dbus_session_get_image (session));
  g_autofree gchar *project = vctl_escape_line (vivarium_dbus_session_get_project (session));
  g_autofree gchar *accel = vctl_escape_line (vivarium_dbus_session_get_accelerator (session));
  g_autofree gchar *started = vctl_format_time (vivarium_dbus_session_get_started_at (session));

  g_print ("%-20s %-9s %-20s %-16s %-5s %s\n", id, state, image,
           project[0] != '\0' ? project : "-", accel, started);
}

gboolean
vctl_cmd_session_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *header = g_strdup_printf ("%-20s %-9s %-20s %-16s %-5s %s",
                                             _("ID"), _("STATE"), _("IMAGE"), _("PROJECT"),
                                             _("ACCEL"), _("STARTED"));

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  return vctl_print_objects (ctx, vivarium_dbus_manager_call_list_sessions_sync,
                             VIVARIUM_DBUS_TYPE_SESSION_PROXY,
                             VIVARIUM_DBUS_IFACE_PREFIX ".Session", header, print_session_row,
                             _("No sessions."), error);
}

static void
print_field (const gchar *label, const gchar *value)
{
  g_autofree gchar *shown = vctl_escape_line (value);

  g_print ("%-20s %s\n", label, shown[0] != '\0' && g_strcmp0 (shown, "/") != 0 ? shown : "-");
}

/* A property the daemon may not have yet (an older daemon has no Egress*):
 * shown only when it is there. */
static const gchar *
cached_string (gpointer proxy, const gchar *name, GVariant **hold)
{
  *hold = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (proxy), name);
  if (*hold == NULL || !g_variant_is_of_type (*hold, G_VARIANT_TYPE_STRING))
    return NULL;
  return g_variant_get_string (*hold, NULL);
}

static void
print_egress (VivariumDBusSession *session)
{
  g_autoptr(GVariant) mode = NULL;
  g_autoptr(GVariant) state = NULL;
  g_autoptr(GVariant) reason = NULL;
  g_autoptr(GVariant) rules = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (session), "EgressRules");
  const gchar *mode_text = cached_string (session, "EgressMode", &mode);
  const gchar *state_text = cached_string (session, "EgressState", &state);
  const gchar *reason_text = cached_string (session, "EgressStateReason", &reason);

  if (mode_text != NULL)
    print_field (_("Egress mode:"), mode_text);
  if (state_text != NULL)
    print_field (_("Egress state:"), state_text);
  if (reason_text != NULL && reason_text[0] != '\0')
    print_field (_("Egress state reason:"), reason_text);
  if (rules != NULL && g_variant_is_of_type (rules, G_VARIANT_TYPE_STRING_ARRAY)) {
    g_autofree const gchar **items = g_variant_get_strv (rules, NULL);
    for (guint i = 0; items[i] != NULL; i++)
      print_field (i == 0 ? _("Egress rules:") : "", items[i]);
  }
}

/* Names only (Secrets, SshKeys): the daemon never gives a value, a
 * placeholder or a key out. */
static void
print_names (VivariumDBusSession *session, const gchar *property, const gchar *label)
{
  g_autoptr(GVariant) list = g_dbus_proxy_get_cached_property (G_DBUS_PROXY (session), property);
  g_autofree const gchar **names = NULL;
  g_autofree gchar *joined = NULL;

  if (list == NULL || !g_variant_is_of_type (list, G_VARIANT_TYPE_STRING_ARRAY))
    return;
  names = g_variant_get_strv (list, NULL);
  joined = g_strjoinv (", ", (gchar **) names);
  print_field (label, joined);
}

static void
print_session (VivariumDBusSession *session)
{
  g_autofree gchar *started = vctl_format_time (vivarium_dbus_session_get_started_at (session));
  guint32 uid = vivarium_dbus_session_get_uid (session);
  /* QEMU never runs as root: 0 is a property not read, said as "-". */
  g_autofree gchar *qemu_user = uid != 0 ? vivarium_format_uid (uid) : g_strdup ("");
  const gchar *reason = vivarium_dbus_session_get_state_reason (session);

  print_field (_("Id:"), vivarium_dbus_session_get_id (session));
  print_field (_("State:"), vivarium_dbus_session_get_state (session));
  if (reason != NULL && reason[0] != '\0')
    print_field (_("State reason:"), reason);
  print_field (_("Image:"), vivarium_dbus_session_get_image (session));
  print_field (_("Project:"), vivarium_dbus_session_get_project (session));
  print_field (_("Accelerator:"), vivarium_dbus_session_get_accelerator (session));
  print_field (_("QEMU runs as:"), qemu_user);
  g_print ("%-20s %s\n", _("Started:"), started);
  print_egress (session);
  print_names (session, "Secrets", _("Secrets:"));
  print_names (session, "SshKeys", _("SSH keys:"));
}

gboolean
vctl_cmd_session_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error))
    return FALSE;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL || !vctl_ensure_properties (ctx, session, error))
    return FALSE;
  if (ctx->json) {
    g_autoptr(JsonNode) root = vctl_proxy_to_json (session);
    vctl_print_json (root);
  } else {
    print_session (session);
  }
  return TRUE;
}

typedef struct {
  gchar *project;
  gchar *memory;
  gchar *cpus;
  gchar *timeout;
  VctlEgressOptions egress;
} StartOptions;

static GVariant *
start_options_to_variant (const StartOptions *o, GError **error)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  guint value = 0;

  /* Only what the user gave is sent; the daemon owns the defaults. */
  if (o->memory != NULL) {
    if (!vctl_parse_uint ("--memory", o->memory, VIVARIUM_MEMORY_MIN_MIB,
                          VIVARIUM_MEMORY_MAX_MIB, &value, error))
      return NULL;
    g_variant_builder_add (&b, "{sv}", "memory", g_variant_new_uint32 (value));
  }
  if (o->cpus != NULL) {
    if (!vctl_parse_uint ("--cpus", o->cpus, 1, VIVARIUM_CPUS_MAX, &value, error))
      return NULL;
    g_variant_builder_add (&b, "{sv}", "cpus", g_variant_new_uint32 (value));
  }
  if (o->timeout != NULL) {
    if (!vctl_parse_uint ("--timeout", o->timeout, 0, VIVARIUM_TIMEOUT_MAX_SEC, &value, error))
      return NULL;
    g_variant_builder_add (&b, "{sv}", "timeout", g_variant_new_uint32 (value));
  }
  if (!vctl_egress_options_add (&o->egress, &b, error))
    return NULL;
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

static void
start_options_clear (StartOptions *o)
{
  g_free (o->project);
  g_free (o->memory);
  g_free (o->cpus);
  g_free (o->timeout);
  vctl_egress_options_clear (&o->egress);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (StartOptions, start_options_clear)

gboolean
vctl_cmd_session_start (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(StartOptions) o = { 0 };
  g_autoptr(GVariant) options = NULL;
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) id = NULL;
  g_autofree gchar *path = NULL;
  const GOptionEntry entries[] = {
    { "project", 0, 0, G_OPTION_ARG_STRING, &o.project, N_("Project to share into the guest"),
      "P" },
    { "memory", 0, 0, G_OPTION_ARG_STRING, &o.memory, N_("Guest memory in MiB"), "MIB" },
    { "cpus", 0, 0, G_OPTION_ARG_STRING, &o.cpus, N_("Number of virtual CPUs"), "N" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o.timeout,
      N_("Stop the session after SEC seconds (0: never)"), "SEC" },
    VCTL_EGRESS_OPTION_ENTRIES (o.egress),
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error))
    return FALSE;
  options = start_options_to_variant (&o, error);
  if (options == NULL)
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_start_session_sync (ctx->manager, o.project != NULL ? o.project : "",
                                                      (*argv)[1], options, vctl_call_flags (ctx),
                                                      VCTL_TIMEOUT_LONG, &path, NULL, error))
    return FALSE;
  session = vivarium_dbus_session_proxy_new_sync (ctx->bus,
                                                  G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                                  G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                                  VIVARIUM_DBUS_NAME, path, NULL, error);
  if (session == NULL)
    return FALSE;
  id = vctl_get_property (ctx, session, "Id", error);
  if (id == NULL)
    return FALSE;
  /* Only the id on stdout, so that id=$(vivariumctl session start …) works. */
  {
    g_autofree gchar *shown = vctl_escape_line (g_variant_get_string (id, NULL));
    g_print ("%s\n", shown);
  }
  return TRUE;
}

/* Everything after the first "--" is the guest's argv, untouched by our
 * option parser; it is cut off @argv and returned. */
static gchar **
split_guest_argv (gchar **argv)
{
  g_autoptr(GStrvBuilder) tail = g_strv_builder_new ();

  for (guint i = 0; argv[i] != NULL; i++) {
    if (g_strcmp0 (argv[i], "--") != 0)
      continue;
    for (guint j = i + 1; argv[j] != NULL; j++) {
      g_strv_builder_add (tail, argv[j]);
      g_clear_pointer (&argv[j], g_free);
    }
    g_clear_pointer (&argv[i], g_free);
    return g_strv_builder_end (tail);
  }
  return NULL;
}

typedef struct {
  gchar **env;
  gchar  *cwd;
  gchar  *timeout;
} ExecOptions;

static void
exec_options_clear (ExecOptions *o)
{
  g_strfreev (o->env);
  g_free (o->cwd);
  g_free (o->timeout);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecOptions, exec_options_clear)

static gboolean
check_exec (gchar **guest_argv, ExecOptions *o, guint *timeout, GError **error)
{
  if (guest_argv == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Put “--” before the command to run in the guest"));
    return FALSE;
  }
  if (!vivarium_argv_validate ((const gchar * const *) guest_argv, error))
    return vctl_to_usage_error (error);
  if (!vivarium_env_validate ((const gchar * const *) o->env, error))
    return vctl_to_usage_error (error);
  if (o->cwd != NULL && !check_guest_path (o->cwd, error))
    return FALSE;
  *timeout = VCTL_EXEC_TIMEOUT_DEFAULT;
  return o->timeout == NULL ||
         vctl_parse_uint ("--timeout", o->timeout, 1, VIVARIUM_EXEC_TIMEOUT_MAX_SEC, timeout, error);
}

gboolean
vctl_cmd_session_exec (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(ExecOptions) o = { 0 };
  g_auto(GStrv) guest_argv = split_guest_argv (*argv);
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) out = NULL;
  g_autoptr(GVariant) err = NULL;
  gint status = 0;
  gboolean out_truncated = FALSE;
  gboolean err_truncated = FALSE;
  const gchar * const no_env[] = { NULL };
  guint timeout = 0;
  const GOptionEntry entries[] = {
    { "env", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.env, N_("Add NAME=VALUE to the environment"),
      "K=V" },
    { "cwd", 0, 0, G_OPTION_ARG_STRING, &o.cwd, N_("Working directory in the guest"), "DIR" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o.timeout,
      N_("Give up after SEC seconds (default: 600)"), "SEC" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error))
    return FALSE;
  if (!check_exec (guest_argv, &o, &timeout, error))
    return FALSE;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL)
    return FALSE;
  /* The daemon gives up after @timeout and says so; the bus call must
   * outlive that, or the client would report a vaguer error first. */
  if (!vivarium_dbus_session_call_exec_sync (session, (const gchar * const *) guest_argv,
                                             o.env != NULL ? (const gchar * const *) o.env : no_env,
                                             o.cwd != NULL ? o.cwd : "", timeout, vctl_call_flags (ctx),
                                             (gint) ((timeout + 60) * 1000), &status, &out, &err,
                                             &out_truncated, &err_truncated, NULL, error))
    return FALSE;
  return vctl_print_exec_reply (ctx, status, out, err, out_truncated, err_truncated, FALSE, error);
}

/* "ID:/path" names a file in a guest; anything else is a local path (write
 * ./a:/b for a local file whose name looks like that). */
static gboolean
parse_guest_spec (const gchar *spec, gchar **id, gchar **path)
{
  const gchar *colon = strchr (spec, ':');

  if (colon == NULL || colon == spec || colon[1] != '/')
    return FALSE;
  if (memchr (spec, '/', (gsize) (colon - spec)) != NULL)
    return FALSE;
  *id = g_strndup (spec, (gsize) (colon - spec));
  *path = g_strdup (colon + 1);
  return TRUE;
}

static gchar *
join_if_dir_guest (const gchar *guest_path, const gchar *local)
{
  g_autofree gchar *base = g_path_get_basename (local);

  if (g_str_has_suffix (guest_path, "/"))
    return g_strconcat (guest_path, base, NULL);
  return g_strdup (guest_path);
}

static gchar *
join_if_dir_local (const gchar *local, const gchar *guest_path)
{
  g_autofree gchar *base = g_path_get_basename (guest_path);

  if (g_file_test (local, G_FILE_TEST_IS_DIR))
    return g_build_filename (local, base, NULL);
  return g_strdup (local);
}

static gboolean
copy_from_guest (VctlContext *ctx, VivariumDBusSession *session, const gchar *guest_path,
                 const gchar *local, GError **error)
{
  g_autoptr(GVariant) data = NULL;
  g_autofree gchar *target = join_if_dir_local (local, guest_path);
  const gchar *bytes;
  gsize len = 0;

  if (!vivarium_dbus_session_call_read_file_sync (session, guest_path, vctl_call_flags (ctx), VCTL_TIMEOUT_FILE,
                                                  &data, NULL, error))
    return FALSE;
  bytes = g_variant_get_fixed_array (data, &len, 1);
  return g_file_set_contents (target, bytes, (gssize) len, error);
}

static gboolean
read_local_file (const gchar *local, GBytes **out, GError **error)
{
  g_autofree gchar *contents = NULL;
  GStatBuf st;
  gsize len = 0;

  /* Refuse before reading 4 GiB into memory only to be told no. */
  if (g_stat (local, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > VIVARIUM_FILE_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 _("“%s” is larger than %d MiB, the most a guest file may hold"),
                 local, VIVARIUM_FILE_MAX / (1024 * 1024));
    return FALSE;
  }
  if (!g_file_get_contents (local, &contents, &len, error))
    return FALSE;
  *out = g_bytes_new_take (g_steal_pointer (&contents), len);
  return TRUE;
}

static gboolean
copy_to_guest (VctlContext *ctx, VivariumDBusSession *session, const gchar *local,
               const gchar *guest_path, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  g_autofree gchar *target = join_if_dir_guest (guest_path, local);
  GVariant *data;

  if (!read_local_file (local, &bytes, error))
    return FALSE;
  data = g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, bytes, TRUE);
  return vivarium_dbus_session_call_write_file_sync (session, target, data, vctl_call_flags (ctx),
                                                     VCTL_TIMEOUT_FILE, NULL, error);
}

gboolean
vctl_cmd_session_cp (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *src_id = NULL;
  g_autofree gchar *src_path = NULL;
  g_autofree gchar *dst_id = NULL;
  g_autofree gchar *dst_path = NULL;
  g_autoptr(VivariumDBusSession) session = NULL;
  gboolean from_guest;
  gboolean to_guest;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error))
    return FALSE;
  from_guest = parse_guest_spec ((*argv)[1], &src_id, &src_path);
  to_guest = parse_guest_spec ((*argv)[2], &dst_id, &dst_path);
  if (from_guest == to_guest) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Exactly one of SRC and DST must be ID:/guest/path"));
    return FALSE;
  }
  if (!check_guest_path (from_guest ? src_path : dst_path, error))
    return FALSE;
  session = session_for_call (ctx, from_guest ? src_id : dst_id, error);
  if (session == NULL)
    return FALSE;
  if (from_guest)
    return copy_from_guest (ctx, session, src_path, (*argv)[2], error);
  return copy_to_guest (ctx, session, (*argv)[1], dst_path, error);
}

gboolean
vctl_cmd_session_screenshot (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv,
                             GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) png = NULL;
  const gchar *bytes;
  gsize len = 0;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error))
    return FALSE;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL)
    return FALSE;
  if (!vivarium_dbus_session_call_screenshot_sync (session, vctl_call_flags (ctx), VCTL_TIMEOUT_FILE, &png,
                                                   NULL, error))
    return FALSE;
  bytes = g_variant_get_fixed_array (png, &len, 1);
  return g_file_set_contents ((*argv)[2], bytes, (gssize) len, error);
}

static gchar *
format_argv (GVariant *argv)
{
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree const gchar **items = NULL;

  if (argv == NULL || !g_variant_is_of_type (argv, G_VARIANT_TYPE_STRING_ARRAY))
    return g_strdup ("?");
  items = g_variant_get_strv (argv, NULL);
  for (guint i = 0; items[i] != NULL; i++) {
    g_autofree gchar *quoted = g_shell_quote (items[i]);
    if (i > 0)
      g_string_append_c (out, ' ');
    g_string_append (out, quoted);
  }
  return vctl_escape_line (out->str);
}

static void
print_log_entry (GVariant *entry)
{
  GVariantDict dict;
  g_autoptr(GVariant) argv = NULL;
  guint64 started_at = 0;
  guint64 duration = 0;
  gint32 status = 0;
  gboolean argv_truncated = FALSE;
  const gchar *kind = "?";
  const gchar *err = "";
  const gchar *state = "";
  g_autofree gchar *when = NULL;
  g_autofree gchar *took = NULL;
  g_autofree gchar *line = NULL;
  g_autofree gchar *shown_kind = NULL;

  g_variant_dict_init (&dict, entry);
  g_variant_dict_lookup (&dict, "started-at", "t", &started_at);
  g_variant_dict_lookup (&dict, "duration", "t", &duration);
  g_variant_dict_lookup (&dict, "exit-status", "i", &status);
  g_variant_dict_lookup (&dict, "kind", "&s", &kind);
  g_variant_dict_lookup (&dict, "error", "&s", &err);
  g_variant_dict_lookup (&dict, "state", "&s", &state);
  g_variant_dict_lookup (&dict, "argv-truncated", "b", &argv_truncated);
  argv = g_variant_dict_lookup_value (&dict, "argv", G_VARIANT_TYPE_STRING_ARRAY);

  when = vctl_format_time (started_at);
  took = vctl_format_duration (duration);
  line = format_argv (argv);
  if (argv_truncated) {
    g_autofree gchar *cut = g_strconcat (line, " ", _("[argv truncated]"), NULL);
    g_free (line);
    line = g_steal_pointer (&cut);
  }
  shown_kind = vctl_escape_line (kind);
  /* What happened, in the daemon's words: a timed-out command that went on
   * is not shown as a failure. */
  if (g_strcmp0 (state, "finished") == 0 || (state[0] == '\0' && err[0] == '\0')) {
    g_print ("%s %9s %-10s exit %-4d %s\n", when, took, shown_kind, status, line);
  } else if (g_strcmp0 (state, "finished-late") == 0) {
    g_print ("%s %9s %-10s %s %-4d %s (%s)\n", when, took, shown_kind, _("late exit"), status, line,
             _("finished after its timeout"));
  } else {
    g_autofree gchar *shown_state = vctl_escape_line (state[0] != '\0' ? state : _("error"));
    g_autofree gchar *shown_err = vctl_escape_line (err);
    g_print ("%s %9s %-10s %-9s %s (%s)\n", when, took, shown_kind, shown_state, line, shown_err);
  }
  g_variant_dict_clear (&dict);
}

/* One page of the log; *@next says where the next one starts. */
static GVariant *
fetch_log_page (VctlContext *ctx, VivariumDBusSession *session, guint64 offset, guint64 *next,
                guint64 *total, guint64 *dropped, GError **error)
{
  GVariant *entries = NULL;

  if (!vivarium_dbus_session_call_get_command_log_sync (session, offset, VIVARIUM_LOG_PAGE_MAX, vctl_call_flags (ctx),
                                                        VIVARIUM_CALL_TIMEOUT_DEFAULT, &entries, next, total,
                                                        dropped, NULL, error))
    return NULL;
  /* A daemon that does not move forward would keep us here forever. */
  if (*next <= offset && *next < *total) {
    g_clear_pointer (&entries, g_variant_unref);
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         _("The daemon’s command log did not advance"));
  }
  return entries;
}

/* --- the history the daemon keeps on disk ------------------------------ */

static gint64
json_int (JsonObject *o, const gchar *member)
{
  JsonNode *n = json_object_get_member (o, member);
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_INT64 ?
         json_node_get_int (n) : 0;
}

static const gchar *
json_str (JsonObject *o, const gchar *member)
{
  JsonNode *n = json_object_get_member (o, member);
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING ?
         json_node_get_string (n) : "";
}

/* One line of the file, in the shape GetCommandLog() returns. */
static GVariant *
entry_from_json (JsonObject *o)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) items = NULL;
  JsonNode *argv = json_object_get_member (o, "argv");
  GVariantDict d;

  if (argv != NULL && JSON_NODE_HOLDS_ARRAY (argv)) {
    JsonArray *a = json_node_get_array (argv);
    for (guint i = 0; i < json_array_get_length (a); i++) {
      JsonNode *n = json_array_get_element (a, i);
      if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING)
        g_strv_builder_add (b, json_node_get_string (n));
    }
  }
  items = g_strv_builder_end (b);
  g_variant_dict_init (&d, NULL);
  g_variant_dict_insert (&d, "seq", "t", (guint64) json_int (o, "seq"));
  g_variant_dict_insert (&d, "kind", "s", json_str (o, "kind"));
  g_variant_dict_insert_value (&d, "argv", g_variant_new_strv ((const gchar * const *) items, -1));
  g_variant_dict_insert (&d, "argv-truncated", "b",
                         json_object_get_boolean_member_with_default (o, "argv-truncated", FALSE));
  g_variant_dict_insert (&d, "started-at", "t", (guint64) json_int (o, "started-at"));
  g_variant_dict_insert (&d, "duration", "t", (guint64) json_int (o, "duration"));
  g_variant_dict_insert (&d, "state", "s", json_str (o, "state"));
  g_variant_dict_insert (&d, "exit-status", "i", (gint32) json_int (o, "exit-status"));
  g_variant_dict_insert (&d, "error", "s", json_str (o, "error"));
  return g_variant_ref_sink (g_variant_dict_end (&d));
}

/* The file has one line per change of an entry: the last line of a seq is
 * its final word. A line that does not parse is skipped, not trusted. */
static gboolean
load_log_file (const gchar *path, GPtrArray *out, GError **error)
{
  g_autofree gchar *contents = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(GHashTable) by_seq = g_hash_table_new (g_int64_hash, g_int64_equal);

  if (!g_file_get_contents (path, &contents, NULL, error))
    return FALSE;
  lines = g_strsplit (contents, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *o;
    GVariant *entry;
    gint64 *seq;

    if (lines[i][0] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
      continue;
    o = json_node_get_object (json_parser_get_root (parser));
    if (!json_object_has_member (o, "seq"))
      continue;
    entry = entry_from_json (o);
    seq = g_new (gint64, 1);
    *seq = json_int (o, "seq");
    if (g_hash_table_contains (by_seq, seq)) {
      guint index = GPOINTER_TO_UINT (g_hash_table_lookup (by_seq, seq));
      g_variant_unref (g_ptr_array_index (out, index));
      out->pdata[index] = entry;
      g_free (seq);
      continue;
    }
    g_hash_table_insert (by_seq, seq, GUINT_TO_POINTER (out->len));
    g_ptr_array_add (out, entry);
  }
  g_hash_table_foreach (by_seq, (GHFunc) (void (*) (void)) g_free, NULL);
  return TRUE;
}

static gboolean
print_entries (VctlContext *ctx, GPtrArray *all)
{
  if (ctx->json) {
    g_autoptr(GVariant) array = g_variant_ref_sink (g_variant_new_array (G_VARIANT_TYPE_VARDICT,
                                                                         (GVariant **) all->pdata, all->len));
    g_autoptr(JsonNode) root = json_gvariant_serialize (array);
    vctl_print_json (root);
    return TRUE;
  }
  for (guint i = 0; i < all->len; i++)
    print_log_entry (g_ptr_array_index (all, i));
  return TRUE;
}

/* A session the daemon no longer knows (it ended, or the daemon restarted)
 * still has its history in the daemon's file, which root may read. */
static gboolean
session_log_from_file (VctlContext *ctx, const gchar *id, GError **error)
{
  g_autofree gchar *name = g_strconcat (id, ".jsonl", NULL);
  g_autofree gchar *path = g_build_filename (VIVARIUM_STATEDIR, "logs", "sessions", name, NULL);
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);

  if (!vivarium_name_validate ("session", id, NULL) || !g_file_test (path, G_FILE_TEST_EXISTS))
    return FALSE;
  if (!load_log_file (path, all, error))
    return FALSE;
  if (!ctx->json)
    g_print (_("(the daemon does not know this session any more; from %s)\n"), path);
  return print_entries (ctx, all);
}

gboolean
vctl_cmd_session_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  guint64 offset = 0;
  guint64 next = 0;
  guint64 total = 1;
  guint64 dropped = 0;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error))
    return FALSE;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL) {
    g_autoptr(GError) file_error = NULL;
    if (!g_error_matches (*error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND))
      return FALSE;
    if (session_log_from_file (ctx, (*argv)[1], &file_error)) {
      g_clear_error (error);
      return TRUE;
    }
    if (file_error != NULL)
      g_prefix_error (error, "%s; ", file_error->message);
    return FALSE;
  }
  /* Paged: each reply is bounded, the whole log is not. */
  while (offset < total) {
    g_autoptr(GVariant) entries = fetch_log_page (ctx, session, offset, &next, &total, &dropped, error);
    if (entries == NULL)
      return FALSE;
    for (gsize i = 0; i < g_variant_n_children (entries); i++)
      g_ptr_array_add (all, g_variant_get_child_value (entries, i));
    offset = next;
  }
  if (dropped > 0 && !ctx->json) {
    g_autofree gchar *count = g_strdup_printf ("%" G_GUINT64_FORMAT, dropped);
    g_print (_("(%s older commands are only in the daemon’s file for this session)\n"), count);
  }
  return print_entries (ctx, all);
}

typedef gboolean (*SessionVerbCall) (VivariumDBusSession *proxy, GDBusCallFlags call_flags, gint timeout_msec,
                                     GCancellable *cancellable, GError **error);

/* Pause and Resume: one session, a verb without arguments. Returns the
 * session's proxy once the daemon said yes. */
static VivariumDBusSession *
call_session_verb (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, SessionVerbCall call, GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error))
    return NULL;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL)
    return NULL;
  if (!call (session, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL, error))
    return NULL;
  return g_steal_pointer (&session);
}

gboolean
vctl_cmd_session_resume (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session =
    call_session_verb (ctx, cmd, argv, vivarium_dbus_session_call_resume_sync, error);
  g_autoptr(GVariant) state = NULL;
  g_autofree gchar *id = NULL;
  VivariumSessionState parsed;

  if (session == NULL)
    return FALSE;
  id = vctl_escape_line ((*argv)[1]);
  state = vctl_get_property (ctx, session, "State", NULL);
  if (state != NULL && vivarium_session_state_from_string (g_variant_get_string (state, NULL), &parsed) &&
      parsed == VIVARIUM_SESSION_STATE_PAUSED) {
    g_autoptr(GVariant) reason = vctl_get_property (ctx, session, "StateReason", NULL);
    g_autofree gchar *shown = vctl_escape_line (reason != NULL ? g_variant_get_string (reason, NULL) : "");
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 _("Session “%s” was resumed but paused again: %s"), id, shown);
    return FALSE;
  }
  g_print (_("Resumed session “%s”.\n"), id);
  return TRUE;
}

gboolean
vctl_cmd_session_pause (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session =
    call_session_verb (ctx, cmd, argv, vivarium_dbus_session_call_pause_sync, error);
  g_autofree gchar *id = NULL;

  if (session == NULL)
    return FALSE;
  id = vctl_escape_line ((*argv)[1]);
  g_print (_("Paused session “%s”.\n"), id);
  return TRUE;
}

gboolean
vctl_cmd_session_stop (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) leftovers = NULL;
  g_autofree gchar *id = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error))
    return FALSE;
  session = session_for_call (ctx, (*argv)[1], error);
  if (session == NULL)
    return FALSE;
  if (!vivarium_dbus_session_call_stop_sync (session, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  id = vctl_escape_line ((*argv)[1]);
  /* A session the daemon already forgot cannot report leftovers; one that
   * still exists must, and anything left behind is a failure. */
  leftovers = vctl_get_property (ctx, session, "Leftovers", NULL);
  if (leftovers != NULL && g_variant_is_of_type (leftovers, G_VARIANT_TYPE_STRING_ARRAY) &&
      g_variant_n_children (leftovers) > 0) {
    g_autofree const gchar **items = g_variant_get_strv (leftovers, NULL);
    g_autofree gchar *joined = g_strjoinv (", ", (gchar **) items);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 _("Session “%s” stopped, but teardown left: %s"), id, joined);
    return FALSE;
  }
  g_print (_("Stopped session “%s”.\n"), id);
  return TRUE;
}
