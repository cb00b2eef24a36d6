/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib-unix.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivariumctl-commands.h"

/* `task wait` tells the outcome by its exit status (see its --help). */
#define VCTL_EXIT_NEEDS_INPUT 2
#define VCTL_EXIT_IN_PROGRESS 3
/* `task transcript --follow` stopped by Ctrl-C, as a shell reports SIGINT. */
#define VCTL_EXIT_INTERRUPTED 130

/* The verbs a worker may be narrowed to, as the contract spells them. */
static const gchar * const worker_tools[] = {
  "exec", "read-file", "write-file", "screenshot", "ask", NULL
};

static VivariumDBusTask *
task_for_call (VctlContext *ctx, const gchar *id, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vctl_connect (ctx, error))
    return NULL;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_tasks_sync,
                           VIVARIUM_DBUS_PATH_TASKS, _("task"), id, error);
  if (path == NULL)
    return NULL;
  return vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_TASK_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Task",
                         path, error);
}

/* --- task submit ------------------------------------------------------- */

typedef struct {
  gchar  *script;
  gboolean agent;
  gchar  *verify;
  gchar  *timeout;
  gchar  *instructions;
  gchar  *instructions_file;
  gchar  *memory;
  gchar  *cpus;
  gchar **tools;
  VctlEgressOptions egress;
} SubmitOptions;

static void
submit_options_clear (SubmitOptions *o)
{
  g_free (o->script);
  g_free (o->verify);
  g_free (o->timeout);
  g_free (o->instructions);
  g_free (o->instructions_file);
  g_free (o->memory);
  g_free (o->cpus);
  g_strfreev (o->tools);
  vctl_egress_options_clear (&o->egress);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (SubmitOptions, submit_options_clear)

/* The script is bytes (it may be any program); it is read here with the
 * caller's rights and sent, so the daemon never opens the caller's path. */
static GVariant *
read_script (const gchar *file, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;

  bytes = vctl_read_capped (file, VIVARIUM_TASK_SCRIPT_MAX, _("a worker script"), error);
  if (bytes == NULL)
    return NULL;
  if (g_bytes_get_size (bytes) == 0) {
    g_autofree gchar *shown = vctl_escape_line (file);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 _("The script “%s” is empty"), shown);
    return NULL;
  }
  return g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, bytes, TRUE);
}

/* The worker is a choice of two, made explicitly: a script worker by
 * default would make a forgotten --agent run nothing at all. */
static gboolean
check_worker_choice (const SubmitOptions *o, GError **error)
{
  if (o->script != NULL && o->agent) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Give --script FILE or --agent, not both: the worker is one or the other"));
    return FALSE;
  }
  if (o->script == NULL && !o->agent) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Choose the worker: --script FILE (your program) or --agent (the model loop, "
                           "which needs --instructions or --instructions-file)"));
    return FALSE;
  }
  /* An agent acts only on what it is told; with nothing, it has no task. */
  if (o->agent && o->instructions == NULL && o->instructions_file == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("--agent needs --instructions TEXT or --instructions-file FILE: what the agent is asked to do"));
    return FALSE;
  }
  return TRUE;
}

static gchar *
read_instructions (const SubmitOptions *o, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  gsize len = 0;
  const gchar *data;

  if (o->instructions != NULL && o->instructions_file != NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("Give --instructions or --instructions-file, not both"));
    return NULL;
  }
  if (o->instructions_file == NULL) {
    const gchar *text = o->instructions != NULL ? o->instructions : "";
    if (!vctl_check_text ("--instructions", text, VIVARIUM_TASK_INSTRUCTIONS_MAX, error))
      return NULL;
    return g_strdup (text);
  }
  bytes = vctl_read_capped (o->instructions_file, VIVARIUM_TASK_INSTRUCTIONS_MAX, _("the instructions"),
                            error);
  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data (bytes, &len);
  if (len > 0 && (!g_utf8_validate (data, (gssize) len, NULL) || memchr (data, '\0', len) != NULL)) {
    g_autofree gchar *shown = vctl_escape_line (o->instructions_file);
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("“%s” is not UTF-8 text"), shown);
    return NULL;
  }
  return g_strndup (data != NULL ? data : "", len);
}

static gboolean
is_blank (const gchar *text)
{
  for (; *text != '\0'; text = g_utf8_next_char (text))
    if (!g_unichar_isspace (g_utf8_get_char (text)))
      return FALSE;
  return TRUE;
}

static gboolean
add_uint_option (GVariantBuilder *b, const gchar *key, const gchar *option, const gchar *text,
                 guint64 min, guint64 max, GError **error)
{
  guint value = 0;

  if (text == NULL)
    return TRUE;
  if (!vctl_parse_uint (option, text, min, max, &value, error))
    return FALSE;
  g_variant_builder_add (b, "{sv}", key, g_variant_new_uint32 (value));
  return TRUE;
}

static gboolean
add_tools_option (GVariantBuilder *b, gchar **tools, GError **error)
{
  if (tools == NULL)
    return TRUE;
  for (guint i = 0; tools[i] != NULL; i++) {
    if (!g_strv_contains (worker_tools, tools[i])) {
      g_autofree gchar *shown = vctl_escape_line (tools[i]);
      g_autofree gchar *known = g_strjoinv (", ", (gchar **) worker_tools);
      g_set_error (error, VCTL_USAGE_ERROR, 0, _("Unknown tool “%s”; the tools are: %s"),
                   shown, known);
      return FALSE;
    }
  }
  g_variant_builder_add (b, "{sv}", "tools", g_variant_new_strv ((const gchar * const *) tools, -1));
  return TRUE;
}

/* Only what the user gave is sent; the daemon owns the defaults. */
static GVariant *
submit_options_to_variant (const SubmitOptions *o, GError **error)
{
  g_auto(GVariantBuilder) b = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  if (o->agent) {
    g_variant_builder_add (&b, "{sv}", "worker", g_variant_new_string ("agent"));
  } else {
    GVariant *script = read_script (o->script, error);

    if (script == NULL)
      return NULL;
    g_variant_builder_add (&b, "{sv}", "worker", g_variant_new_string ("script"));
    g_variant_builder_add (&b, "{sv}", "script", script);
  }
  if (o->verify != NULL) {
    if (o->verify[0] == '\0') {
      g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("--verify needs a command"));
      return NULL;
    }
    if (!vctl_check_text ("--verify", o->verify, VIVARIUM_REPORT_VERIFY_CMD_MAX, error))
      return NULL;
    g_variant_builder_add (&b, "{sv}", "verify", g_variant_new_string (o->verify));
  }
  if (!add_uint_option (&b, "timeout", "--timeout", o->timeout, 1, VIVARIUM_TIMEOUT_MAX_SEC, error) ||
      !add_uint_option (&b, "memory", "--memory", o->memory, VIVARIUM_MEMORY_MIN_MIB,
                        VIVARIUM_MEMORY_MAX_MIB, error) ||
      !add_uint_option (&b, "cpus", "--cpus", o->cpus, 1, VIVARIUM_CPUS_MAX, error) ||
      !add_tools_option (&b, o->tools, error) ||
      !vctl_egress_options_add (&o->egress, &b, error))
    return NULL;
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

static gboolean
print_task_id (VctlContext *ctx, const gchar *path, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autoptr(GVariant) id = NULL;
  g_autofree gchar *shown = NULL;

  task = vctl_proxy_new (ctx, VIVARIUM_DBUS_TYPE_TASK_PROXY, VIVARIUM_DBUS_IFACE_PREFIX ".Task",
                         path, error);
  if (task == NULL)
    return FALSE;
  id = vctl_get_property (ctx, task, "Id", error);
  if (id == NULL)
    return FALSE;
  /* Only the id on stdout, so that id=$(vivariumctl task submit …) works. */
  shown = vctl_escape_line (g_variant_get_string (id, NULL));
  g_print ("%s\n", shown);
  return TRUE;
}

gboolean
vctl_cmd_task_submit (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(SubmitOptions) o = { 0 };
  g_autoptr(GVariant) options = NULL;
  g_autofree gchar *instructions = NULL;
  g_autofree gchar *path = NULL;
  const GOptionEntry entries[] = {
    { "script", 0, 0, G_OPTION_ARG_FILENAME, &o.script,
      N_("The worker program (run on the host, in its own unit)"), "FILE" },
    { "agent", 0, 0, G_OPTION_ARG_NONE, &o.agent,
      N_("The worker is vivarium-agent, the model loop (needs --instructions or --instructions-file)"),
      NULL },
    { "verify", 0, 0, G_OPTION_ARG_STRING, &o.verify,
      N_("Shell command that checks the work, re-run in a fresh guest in /project"), "CMD" },
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &o.timeout,
      N_("The task's hard limit in seconds (default: the daemon's, 1800)"), "S" },
    { "instructions", 0, 0, G_OPTION_ARG_STRING, &o.instructions,
      N_("What the worker is asked to do"), "TEXT" },
    { "instructions-file", 0, 0, G_OPTION_ARG_FILENAME, &o.instructions_file,
      N_("Read the instructions from a file"), "F" },
    { "memory", 0, 0, G_OPTION_ARG_STRING, &o.memory, N_("Guest memory in MiB"), "MIB" },
    { "cpus", 0, 0, G_OPTION_ARG_STRING, &o.cpus, N_("Number of virtual CPUs"), "N" },
    { "tool", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o.tools,
      N_("Allow the worker only these verbs (repeat): exec, read-file, write-file, screenshot, ask"),
      "VERB" },
    VCTL_EGRESS_OPTION_ENTRIES (o.egress),
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 2, 2, error))
    return FALSE;
  if (!vivarium_project_name_validate ((*argv)[1], error) ||
      !vivarium_name_validate ("image", (*argv)[2], error))
    return vctl_to_usage_error (error);
  if (!check_worker_choice (&o, error))
    return FALSE;
  instructions = read_instructions (&o, error);
  if (instructions == NULL)
    return FALSE;
  if (o.agent && is_blank (instructions)) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0,
                         _("The instructions are empty: an agent needs to be told what to do"));
    return FALSE;
  }
  options = submit_options_to_variant (&o, error);
  if (options == NULL)
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  /* The daemon boots the work session before it answers. */
  if (!vivarium_dbus_manager_call_submit_task_sync (ctx->manager, (*argv)[1], (*argv)[2], instructions, options,
                                                    vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, &path, NULL, error))
    return FALSE;
  return print_task_id (ctx, path, error);
}

/* --- task wait --------------------------------------------------------- */

static gchar *
read_string_property (VctlContext *ctx, gpointer proxy, const gchar *name)
{
  g_autoptr(GVariant) value = vctl_get_property (ctx, proxy, name, NULL);

  if (value == NULL || !g_variant_is_of_type (value, G_VARIANT_TYPE_STRING))
    return g_strdup ("");
  return g_variant_dup_string (value, NULL);
}

/* The question is the worker's, not ours: labelled, quoted line by line
 * and escaped, so that it cannot pass for vivariumctl's own output. */
static void
print_question (const gchar *question)
{
  g_autofree gchar *escaped = vctl_escape (question);
  g_auto(GStrv) lines = g_strsplit (escaped, "\n", -1);

  g_print ("%s\n", _("The worker asks (its own words, unchecked):"));
  for (guint i = 0; lines[i] != NULL; i++)
    g_print ("  > %s\n", lines[i]);
}

static gboolean
report_outcome (VctlContext *ctx, VivariumDBusTask *task, const gchar *id, const gchar *outcome,
                GError **error)
{
  g_autofree gchar *shown_id = vctl_escape_line (id);
  VivariumOutcome o;

  if (!vivarium_outcome_from_string (outcome, &o)) {
    g_autofree gchar *shown = vctl_escape_line (outcome);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 _("The daemon gave task “%s” an unknown outcome “%s”"), shown_id, shown);
    return FALSE;
  }
  g_print ("%s\n", vivarium_outcome_to_string (o));
  if (o == VIVARIUM_OUTCOME_NEEDS_INPUT) {
    g_autofree gchar *question = read_string_property (ctx, task, "Question");
    print_question (question);
    ctx->exit_status = VCTL_EXIT_NEEDS_INPUT;
  } else if (o == VIVARIUM_OUTCOME_IN_PROGRESS) {
    g_autofree gchar *reason = read_string_property (ctx, task, "Reason");
    /* A task stopped at its hard limit stays IN_PROGRESS; waiting again
     * would not change that, so say so where a person sees it. */
    if (reason[0] != '\0') {
      g_autofree gchar *shown = vctl_escape_line (reason);
      g_printerr (_("vivariumctl: task “%s” stopped: %s; its work so far is in its report\n"),
                  shown_id, shown);
    }
    ctx->exit_status = VCTL_EXIT_IN_PROGRESS;
  } else if (o == VIVARIUM_OUTCOME_FAILED) {
    g_autofree gchar *reason = read_string_property (ctx, task, "Reason");
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, _("Task “%s” failed: %s"),
                 shown_id, reason[0] != '\0' ? reason : _("no reason given"));
    return FALSE;
  }
  return TRUE;
}

gboolean
vctl_cmd_task_wait (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *timeout_text = NULL;
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *outcome = NULL;
  guint timeout = VIVARIUM_TASK_WAIT_MAX_SEC;
  const GOptionEntry entries[] = {
    { "timeout", 0, 0, G_OPTION_ARG_STRING, &timeout_text,
      N_("Wait at most S seconds, 0–3600 (default: 3600)"), "S" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error))
    return FALSE;
  if (timeout_text != NULL &&
      !vctl_parse_uint ("--timeout", timeout_text, 0, VIVARIUM_TASK_WAIT_MAX_SEC, &timeout, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL)
    return FALSE;
  /* The daemon ends the wait itself; the call must outlive it. */
  if (!vivarium_dbus_task_call_wait_sync (task, timeout, vctl_call_flags (ctx), (gint) ((timeout + 60) * 1000),
                                          &outcome, NULL, error))
    return FALSE;
  return report_outcome (ctx, task, (*argv)[1], outcome, error);
}

/* --- task list, show --------------------------------------------------- */

static void
print_task_row (gpointer proxy)
{
  VivariumDBusTask *task = proxy;
  g_autofree gchar *id = vctl_escape_line (vivarium_dbus_task_get_id (task));
  g_autofree gchar *outcome = vctl_escape_line (vivarium_dbus_task_get_outcome (task));
  g_autofree gchar *step = vctl_escape_line (vivarium_dbus_task_get_step (task));
  g_autofree gchar *project = vctl_escape_line (vivarium_dbus_task_get_project (task));
  g_autofree gchar *image = vctl_escape_line (vivarium_dbus_task_get_image (task));
  g_autofree gchar *submitted = vctl_format_time (vivarium_dbus_task_get_submitted_at (task));

  g_print ("%-20s %-11s %-7s %-16s %-16s %s\n", id, outcome, step, project, image, submitted);
}

gboolean
vctl_cmd_task_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *header = g_strdup_printf ("%-20s %-11s %-7s %-16s %-16s %s", _("ID"),
                                             _("OUTCOME"), _("STEP"), _("PROJECT"), _("IMAGE"),
                                             _("SUBMITTED"));

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  return vctl_print_objects (ctx, vivarium_dbus_manager_call_list_tasks_sync, VIVARIUM_DBUS_TYPE_TASK_PROXY,
                             VIVARIUM_DBUS_IFACE_PREFIX ".Task", header, print_task_row,
                             _("No tasks."), error);
}

static void
print_field (const gchar *label, const gchar *value)
{
  g_autofree gchar *shown = vctl_escape_line (value);

  g_print ("%-14s %s\n", label, shown[0] != '\0' && g_strcmp0 (shown, "/") != 0 ? shown : "-");
}

static void
print_time_field (const gchar *label, guint64 usec)
{
  g_autofree gchar *when = vctl_format_time (usec);

  g_print ("%-14s %s\n", label, when);
}

static void
print_task (VivariumDBusTask *task)
{
  const gchar *question = vivarium_dbus_task_get_question (task);

  print_field (_("Id:"), vivarium_dbus_task_get_id (task));
  print_field (_("Project:"), vivarium_dbus_task_get_project (task));
  print_field (_("Image:"), vivarium_dbus_task_get_image (task));
  print_field (_("Worker:"), vivarium_dbus_task_get_worker (task));
  print_field (_("Outcome:"), vivarium_dbus_task_get_outcome (task));
  print_field (_("Step:"), vivarium_dbus_task_get_step (task));
  print_field (_("Reason:"), vivarium_dbus_task_get_reason (task));
  print_field (_("Session:"), vivarium_dbus_task_get_session (task));
  print_field (_("Report:"), vivarium_dbus_task_get_report (task));
  print_time_field (_("Submitted:"), vivarium_dbus_task_get_submitted_at (task));
  print_time_field (_("Finished:"), vivarium_dbus_task_get_finished_at (task));
  if (question != NULL && question[0] != '\0')
    print_question (question);
}

gboolean
vctl_cmd_task_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL || !vctl_ensure_properties (ctx, task, error))
    return FALSE;
  if (ctx->json) {
    g_autoptr(JsonNode) root = vctl_proxy_to_json (task);
    vctl_print_json (root);
  } else {
    print_task (task);
  }
  return TRUE;
}

/* --- task answer, cancel, report --------------------------------------- */

gboolean
vctl_cmd_task_answer (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *id = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error) ||
      !vctl_check_text (_("The answer"), (*argv)[2], VIVARIUM_TASK_ANSWER_MAX, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL)
    return FALSE;
  if (!vivarium_dbus_task_call_answer_sync (task, (*argv)[2], vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                            NULL, error))
    return FALSE;
  id = vctl_escape_line ((*argv)[1]);
  g_print (_("Answered task “%s”; its worker goes on.\n"), id);
  return TRUE;
}

gboolean
vctl_cmd_task_cancel (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *id = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL)
    return FALSE;
  /* The work so far is committed and reported before the call returns. */
  if (!vivarium_dbus_task_call_cancel_sync (task, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  id = vctl_escape_line ((*argv)[1]);
  g_print (_("Cancelled task “%s”.\n"), id);
  return TRUE;
}

gboolean
vctl_cmd_task_report (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autoptr(GVariant) report = NULL;
  const gchar *path;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 1, 1, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL)
    return FALSE;
  report = vctl_get_property (ctx, task, "Report", error);
  if (report == NULL)
    return FALSE;
  path = g_variant_get_string (report, NULL);
  if (!g_variant_is_of_type (report, G_VARIANT_TYPE_OBJECT_PATH) || g_strcmp0 (path, "/") == 0) {
    g_autofree gchar *id = vctl_escape_line ((*argv)[1]);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 _("Task “%s” has no report yet; “vivariumctl task wait” tells when it has"), id);
    return FALSE;
  }
  return vctl_print_report (ctx, path, ctx->json, error);
}

/* --- task transcript ------------------------------------------------------- */

static void
print_transcript_entry (guint64 time, const gchar *kind, const gchar *text, gboolean truncated)
{
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_local ((gint64) (time / G_USEC_PER_SEC));
  g_autofree gchar *when = dt != NULL ? g_date_time_format (dt, "%H:%M:%S") : g_strdup ("?");
  g_autofree gchar *shown_kind = vctl_escape_line (kind);
  /* The daemon escaped it already; the terminal is ours to protect anyway. */
  g_autofree gchar *shown = vivarium_escape_untrusted (text, strlen (text), strlen (text), NULL);
  g_auto(GStrv) lines = g_strsplit (shown, "\n", -1);

  g_print ("[%s] %s%s\n", when, shown_kind, truncated ? _(" (cut at the cap)") : "");
  for (guint i = 0; lines[i] != NULL; i++)
    g_print ("    %s\n", lines[i]);
}

/* --follow asks again at most this often: GetTranscript has no offset, so
 * each poll carries the whole transcript (at most its 4 MiB cap). */
#define TRANSCRIPT_POLL_MS 1000

typedef struct {
  VctlContext      *ctx;
  VivariumDBusTask *task;
  GMainLoop        *loop;
  guint             printed;    /* entries already on stdout */
  gboolean          cap_noted;
  gboolean          interrupted;
  GError           *error;
} TranscriptFollow;

/* Prints the entries past the ones already shown; FALSE with an error when
 * the daemon's answer does not fit what was shown before. */
static gboolean
print_new_entries (TranscriptFollow *f, GError **error)
{
  g_autoptr(GVariant) entries = NULL;
  gboolean truncated = FALSE;
  gsize n;

  if (!vivarium_dbus_task_call_get_transcript_sync (f->task, vctl_call_flags (f->ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                    &entries, &truncated, NULL, error))
    return FALSE;
  n = g_variant_n_children (entries);
  /* The transcript only grows; a shorter one is not the same task's. */
  if (n < f->printed) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 _("The transcript shrank from %u to %u entries while it was followed"),
                 f->printed, (guint) n);
    return FALSE;
  }
  for (gsize i = f->printed; i < n; i++) {
    guint64 time;
    const gchar *kind, *text;
    gboolean cut;

    g_variant_get_child (entries, i, "(t&s&sb)", &time, &kind, &text, &cut);
    print_transcript_entry (time, kind, text, cut);
  }
  f->printed = (guint) n;
  if (truncated && !f->cap_noted) {
    g_print (_("(The transcript reached its cap; later entries were dropped.)\n"));
    f->cap_noted = TRUE;
  }
  return TRUE;
}

/* Over when the daemon says so: FinishedAt is set on every end, also at the
 * hard limit (which stays IN_PROGRESS); DONE and FAILED are final anyway. */
static gboolean
task_is_over (TranscriptFollow *f, GError **error)
{
  g_autoptr(GVariant) finished = vctl_get_property (f->ctx, f->task, "FinishedAt", error);
  g_autoptr(GVariant) outcome = NULL;
  VivariumOutcome o;

  if (finished == NULL)
    return FALSE;
  if (g_variant_is_of_type (finished, G_VARIANT_TYPE_UINT64) && g_variant_get_uint64 (finished) != 0)
    return TRUE;
  outcome = vctl_get_property (f->ctx, f->task, "Outcome", error);
  if (outcome == NULL)
    return FALSE;
  return g_variant_is_of_type (outcome, G_VARIANT_TYPE_STRING) &&
         vivarium_outcome_from_string (g_variant_get_string (outcome, NULL), &o) &&
         (o == VIVARIUM_OUTCOME_DONE || o == VIVARIUM_OUTCOME_FAILED);
}

static gboolean
follow_tick (gpointer user_data)
{
  TranscriptFollow *f = user_data;
  gboolean over;

  /* Read the end first, then the entries: nothing recorded before the end
   * is missed by the last round. */
  over = task_is_over (f, &f->error);
  if (f->error == NULL)
    print_new_entries (f, &f->error);
  if (f->error != NULL || over) {
    g_main_loop_quit (f->loop);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

static gboolean
follow_sigint (gpointer user_data)
{
  TranscriptFollow *f = user_data;

  f->interrupted = TRUE;
  g_main_loop_quit (f->loop);
  return G_SOURCE_CONTINUE;
}

/* Ctrl-C stops following; the task goes on (cancelling it is its own verb). */
static gboolean
follow_transcript (VctlContext *ctx, VivariumDBusTask *task, const gchar *id, GError **error)
{
  TranscriptFollow f = { .ctx = ctx, .task = task };
  guint tick_id, sigint_id;
  g_autofree gchar *shown_id = vctl_escape_line (id);

  f.loop = g_main_loop_new (NULL, FALSE);
  sigint_id = g_unix_signal_add (SIGINT, follow_sigint, &f);
  if (follow_tick (&f)) {
    tick_id = g_timeout_add (TRANSCRIPT_POLL_MS, follow_tick, &f);
    g_main_loop_run (f.loop);
    if (f.interrupted)
      g_source_remove (tick_id);
  }
  g_source_remove (sigint_id);
  g_main_loop_unref (f.loop);
  if (f.error != NULL) {
    g_propagate_error (error, f.error);
    return FALSE;
  }
  if (f.interrupted) {
    g_printerr (_("vivariumctl: stopped following task “%s”; it goes on\n"), shown_id);
    ctx->exit_status = VCTL_EXIT_INTERRUPTED;
  } else {
    g_autofree gchar *outcome = read_string_property (ctx, task, "Outcome");
    g_autofree gchar *shown = vctl_escape_line (outcome);
    g_print (_("Task “%s” ended: %s\n"), shown_id, shown);
  }
  return TRUE;
}

gboolean
vctl_cmd_task_transcript (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autoptr(GVariant) transcript = NULL;
  GVariantIter iter;
  gboolean truncated = FALSE;
  gboolean follow = FALSE;
  guint64 time;
  const gchar *kind, *text;
  gboolean cut;
  const GOptionEntry entries[] = {
    { "follow", 'f', 0, G_OPTION_ARG_NONE, &follow,
      N_("Go on printing entries as the worker records them, until the task ends"), NULL },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, FALSE, argv, 1, 1, error))
    return FALSE;
  task = task_for_call (ctx, (*argv)[1], error);
  if (task == NULL)
    return FALSE;
  if (follow)
    return follow_transcript (ctx, task, (*argv)[1], error);
  if (!vivarium_dbus_task_call_get_transcript_sync (task, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                    &transcript, &truncated, NULL, error))
    return FALSE;
  g_variant_iter_init (&iter, transcript);
  while (g_variant_iter_next (&iter, "(t&s&sb)", &time, &kind, &text, &cut))
    print_transcript_entry (time, kind, text, cut);
  if (truncated)
    g_print (_("(The transcript reached its cap; later entries were dropped.)\n"));
  return TRUE;
}
