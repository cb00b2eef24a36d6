/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivariumctl-commands.h"

/* The verbs a `script` worker uses from inside vivarium-worker-<task>.service.
 * The daemon admits the worker's uid for exactly these calls on its own
 * task and session, so they name those objects by the paths the daemon put
 * in the environment and never ask the Manager for anything. Their stdout
 * is for the worker program: the guest's bytes, unchanged. */

#define ENV_TASK    "VIVARIUM_TASK"
#define ENV_SESSION "VIVARIUM_SESSION"

/* An environment can be anything; only one object of the right collection
 * is accepted, so that a worker cannot be pointed at the Manager or at
 * something that merely starts with the right prefix. */
static gchar *
path_from_env (const gchar *variable, const gchar *collection, GError **error)
{
  const gchar *value = g_getenv (variable);
  g_autofree gchar *prefix = g_strconcat (collection, "/", NULL);
  const gchar *id;

  if (value == NULL || value[0] == '\0') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 _("$%s is not set: worker commands run only inside a task's worker"), variable);
    return NULL;
  }
  id = g_str_has_prefix (value, prefix) ? value + strlen (prefix) : NULL;
  if (!g_variant_is_object_path (value) || id == NULL || id[0] == '\0' ||
      strchr (id, '/') != NULL) {
    g_autofree gchar *shown = vctl_escape_line (value);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 _("$%s is “%s”, which is not the object path of one object under %s"),
                 variable, shown, prefix);
    return NULL;
  }
  return g_strdup (value);
}

/* The session the verbs act on: $VIVARIUM_SESSION, or, when only the task
 * is known, the task's Session property. Checked before anything else. */
typedef struct {
  gchar *session_path;
  gchar *task_path;
} WorkerTarget;

static void
worker_target_clear (WorkerTarget *t)
{
  g_free (t->session_path);
  g_free (t->task_path);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (WorkerTarget, worker_target_clear)

static gboolean
session_target_from_env (WorkerTarget *t, GError **error)
{
  if (g_getenv (ENV_SESSION) == NULL && g_getenv (ENV_TASK) != NULL) {
    t->task_path = path_from_env (ENV_TASK, VIVARIUM_DBUS_PATH_TASKS, error);
    return t->task_path != NULL;
  }
  t->session_path = path_from_env (ENV_SESSION, VIVARIUM_DBUS_PATH_SESSIONS, error);
  return t->session_path != NULL;
}

static gboolean
resolve_session (VctlContext *ctx, WorkerTarget *t, GError **error)
{
  g_autoptr(GDBusProxy) task = NULL;
  g_autoptr(GVariant) session = NULL;

  if (t->session_path != NULL)
    return TRUE;
  task = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_TASK_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Task",
                         t->task_path, error);
  if (task == NULL)
    return FALSE;
  session = vctl_get_property (ctx, task, "Session", error);
  if (session == NULL)
    return FALSE;
  if (!g_variant_is_of_type (session, G_VARIANT_TYPE_OBJECT_PATH) ||
      g_strcmp0 (g_variant_get_string (session, NULL), "/") == 0) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                         _("The task has no running session"));
    return FALSE;
  }
  t->session_path = g_variant_dup_string (session, NULL);
  return TRUE;
}

static VivariumDBusSession *
open_session (VctlContext *ctx, WorkerTarget *t, GError **error)
{
  if (!vctl_connect (ctx, error) || !resolve_session (ctx, t, error))
    return NULL;
  return vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_SESSION_PROXY,
                         VIVARIUM_DBUS_IFACE_PREFIX ".Session", t->session_path, error);
}

static VivariumDBusTask *
open_task (VctlContext *ctx, const gchar *path, GError **error)
{
  if (!vctl_connect (ctx, error))
    return NULL;
  return vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_TASK_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Task",
                         path, error);
}

static gboolean
check_guest_path (const gchar *path, GError **error)
{
  return vivarium_guest_path_validate (path, error) || vctl_to_usage_error (error);
}

/* --- worker exec ------------------------------------------------------- */

/* What is left after the options is the guest's argv; a "--" in front of
 * it only ends the options. */
static gboolean
check_exec_args (gchar **argv, const gchar *cwd, const gchar *timeout_text, guint *timeout,
                 GError **error)
{
  if (argv[0] == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("Name the command to run in the guest"));
    return FALSE;
  }
  if (!vivarium_argv_validate ((const gchar * const *) argv, error))
    return vctl_to_usage_error (error);
  if (cwd != NULL && !check_guest_path (cwd, error))
    return FALSE;
  *timeout = VCTL_EXEC_TIMEOUT_DEFAULT;
  return timeout_text == NULL ||
         vctl_parse_uint ("--timeout", timeout_text, 1, VIVARIUM_EXEC_TIMEOUT_MAX_SEC, timeout,
                          error);
}

gboolean
vctl_cmd_worker_exec (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *cwd = NULL;
  g_autofree gchar *timeout_text = NULL;
  g_auto(WorkerTarget) target = { 0 };
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) out = NULL;
  g_autoptr(GVariant) err = NULL;
  gint status = 0;
  gboolean out_truncated = FALSE;
  gboolean err_truncated = FALSE;
  const gchar * const no_env[] = { NULL };
  gchar **guest_argv;
  guint timeout = 0;
  const GOptionEntry entries[] = {
    { "cwd", 0, 0, G_OPTION_ARG_STRING, &cwd, N_("Working directory in the guest"), "DIR" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &timeout_text,
      N_("Give up after S seconds (default: 600)"), "S" },
    { NULL }
  };

  /* Options end at the command, so that its own options stay its own. */
  if (!vctl_parse_args_full (ctx, cmd, entries, FALSE, TRUE, argv, 0, G_MAXUINT, error))
    return FALSE;
  guest_argv = *argv + 1;
  if (g_strcmp0 (guest_argv[0], "--") == 0)
    guest_argv++;
  if (!check_exec_args (guest_argv, cwd, timeout_text, &timeout, error) ||
      !session_target_from_env (&target, error))
    return FALSE;
  session = open_session (ctx, &target, error);
  if (session == NULL)
    return FALSE;
  /* The daemon gives up after @timeout and says so; the call outlives it. */
  if (!vivarium_dbus_session_call_exec_sync (session, (const gchar * const *) guest_argv, no_env,
                                             cwd != NULL ? cwd : "", timeout, vctl_call_flags (ctx),
                                             (gint) ((timeout + 60) * 1000), &status, &out, &err,
                                             &out_truncated, &err_truncated, NULL, error))
    return FALSE;
  return vctl_print_exec_reply (ctx, status, out, err, out_truncated, err_truncated, TRUE, error);
}

/* --- worker read, write ------------------------------------------------ */

gboolean
vctl_cmd_worker_read (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(WorkerTarget) target = { 0 };
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GVariant) data = NULL;
  const gchar *bytes;
  gsize len = 0;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error) ||
      !check_guest_path ((*argv)[1], error) || !session_target_from_env (&target, error))
    return FALSE;
  session = open_session (ctx, &target, error);
  if (session == NULL)
    return FALSE;
  if (!vivarium_dbus_session_call_read_file_sync (session, (*argv)[1], vctl_call_flags (ctx), VCTL_TIMEOUT_FILE,
                                                  &data, NULL, error))
    return FALSE;
  bytes = g_variant_get_fixed_array (data, &len, 1);
  return vctl_write_all (stdout, bytes, len, error);
}

/* All of stdin, or a refusal before the bus when it passes what a guest
 * file may hold: reading stops one chunk past the limit. */
static GBytes *
read_stdin_for_guest (GError **error)
{
  g_autoptr(GBytes) data = vctl_read_bounded (NULL, VIVARIUM_FILE_MAX, error);

  if (data == NULL)
    return NULL;
  if (g_bytes_get_size (data) > VIVARIUM_FILE_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 _("Standard input holds more than %d MiB, the most a guest file may hold"),
                 VIVARIUM_FILE_MAX / (1024 * 1024));
    return NULL;
  }
  return g_steal_pointer (&data);
}

gboolean
vctl_cmd_worker_write (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(WorkerTarget) target = { 0 };
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autoptr(GBytes) bytes = NULL;
  GVariant *data;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error) ||
      !check_guest_path ((*argv)[1], error) || !session_target_from_env (&target, error))
    return FALSE;
  bytes = read_stdin_for_guest (error);
  if (bytes == NULL)
    return FALSE;
  session = open_session (ctx, &target, error);
  if (session == NULL)
    return FALSE;
  data = g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, bytes, TRUE);
  return vivarium_dbus_session_call_write_file_sync (session, (*argv)[1], data, vctl_call_flags (ctx),
                                                     VCTL_TIMEOUT_FILE, NULL, error);
}

/* --- worker ask, finish ------------------------------------------------ */

gboolean
vctl_cmd_worker_ask (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *task_path = NULL;
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *answer = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error) ||
      !vctl_check_text (_("The question"), (*argv)[1], VIVARIUM_TASK_QUESTION_MAX, error))
    return FALSE;
  if ((*argv)[1][0] == '\0') {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("The question is empty"));
    return FALSE;
  }
  task_path = path_from_env (ENV_TASK, VIVARIUM_DBUS_PATH_TASKS, error);
  if (task_path == NULL)
    return FALSE;
  task = open_task (ctx, task_path, error);
  if (task == NULL)
    return FALSE;
  /* A person answers when they answer; the daemon ends the call with
   * Cancelled if the task ends first, so the client never gives up. */
  if (!vivarium_dbus_task_call_ask_sync (task, (*argv)[1], vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, &answer, NULL,
                                         error))
    return FALSE;
  if (!vctl_write_all (stdout, answer, strlen (answer), error))
    return FALSE;
  return g_str_has_suffix (answer, "\n") || vctl_write_all (stdout, "\n", 1, error);
}

static gchar *
read_summary (const gchar *text, const gchar *file, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  const gchar *data;
  gsize len = 0;

  if (text != NULL && file != NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Give --summary or --summary-file, not both"));
    return NULL;
  }
  if (file == NULL) {
    text = text != NULL ? text : "";
    return vctl_check_text ("--summary", text, VIVARIUM_TASK_SUMMARY_MAX, error) ? g_strdup (text)
                                                                               : NULL;
  }
  bytes = vctl_read_capped (file, VIVARIUM_TASK_SUMMARY_MAX, _("a summary"), error);
  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data (bytes, &len);
  if (len > 0 && (!g_utf8_validate (data, (gssize) len, NULL) || memchr (data, '\0', len) != NULL)) {
    g_autofree gchar *shown = vctl_escape_line (file);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("“%s” is not UTF-8 text"), shown);
    return NULL;
  }
  return g_strndup (data != NULL ? data : "", len);
}

gboolean
vctl_cmd_worker_finish (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *summary_text = NULL;
  g_autofree gchar *summary_file = NULL;
  g_autofree gchar *verify = NULL;
  g_autofree gchar *summary = NULL;
  g_autofree gchar *task_path = NULL;
  g_autoptr(VivariumDBusTask) task = NULL;
  const GOptionEntry entries[] = {
    { "summary", 0, 0, G_OPTION_ARG_STRING, &summary_text,
      N_("Your account of the work (the report labels it an unverified claim)"), "TEXT" },
    { "summary-file", 0, 0, G_OPTION_ARG_FILENAME, &summary_file,
      N_("Read the summary from a file"), "F" },
    { "verify", 0, 0, G_OPTION_ARG_STRING, &verify,
      N_("Shell command that checks the work (the caller's own wins)"), "CMD" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 0, 0, error))
    return FALSE;
  if (verify != NULL &&
      !vctl_check_text ("--verify", verify, VIVARIUM_REPORT_VERIFY_CMD_MAX, error))
    return FALSE;
  summary = read_summary (summary_text, summary_file, error);
  if (summary == NULL)
    return FALSE;
  task_path = path_from_env (ENV_TASK, VIVARIUM_DBUS_PATH_TASKS, error);
  if (task_path == NULL)
    return FALSE;
  task = open_task (ctx, task_path, error);
  if (task == NULL)
    return FALSE;
  /* The daemon stops the worker after this; nothing may follow it. */
  return vivarium_dbus_task_call_finish_sync (task, summary, verify != NULL ? verify : "", vctl_call_flags (ctx),
                                              VCTL_TIMEOUT_LONG, NULL, error);
}
