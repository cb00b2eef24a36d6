/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <locale.h>
#include <string.h>
#include <glib/gi18n.h>

#include "vivariumctl-commands.h"

/* The end of a verb's --help: how a script tells the outcome. */
#define EXIT_HELP N_("Exit status: 0 on success; 1 when it failed (the error's D-Bus name ends " \
                     "the line); 2 on a usage error.")
#define WORKER_HELP N_("For a task's script worker: acts on its task and session, named by " \
                       "$VIVARIUM_TASK and $VIVARIUM_SESSION.\n" \
                       "Exit status: 0 on success; 1 when it failed (the error's D-Bus name " \
                       "ends the line); 2 on a usage error.")

static const VctlCommand commands[] = {
  { NULL, "status", "",
    N_("Show the daemon's version, state, accelerator, counts and free capacity"), vctl_cmd_status },
  { "image", "list", "", N_("List images"), vctl_cmd_image_list },
  { "image", "build", "RECIPE NAME", N_("Build an image from a recipe"), vctl_cmd_image_build },
  { "image", "import", "NAME FILE", N_("Import a qcow2 or raw disk as a new image"),
    vctl_cmd_image_import },
  { "image", "freeze", "NAME", N_("Freeze an image (this cannot be undone)"),
    vctl_cmd_image_freeze },
  { "image", "verify", "NAME", N_("Check a frozen image against its recorded digest"),
    vctl_cmd_image_verify },
  { "image", "delete", "NAME", N_("Delete an image"), vctl_cmd_image_delete },
  { "image", "show", "NAME", N_("Show an image, with its lineage when it was saved from a session"),
    vctl_cmd_image_show },
  { "image", "recipes", "", N_("List the recipes the daemon can build"),
    vctl_cmd_image_recipes },
  { "session", "list", "", N_("List sessions"), vctl_cmd_session_list },
  { "session", "start", "IMAGE [--project P] [--memory MIB] [--cpus N] [--timeout SEC] "
    "[--egress MODE] [--allow HOST[:PORT]]… [--group NAME]… [--secret NAME]… [--ssh-key NAME]…",
    N_("Boot a throwaway machine from a frozen image and print its id"),
    vctl_cmd_session_start },
  { "session", "show", "ID [--json]", N_("Show a session's state, image, egress and secrets' names"),
    vctl_cmd_session_show, EXIT_HELP },
  { "session", "egress-log", "ID [--json]",
    N_("Show what a session's guest tried to reach and what the egress proxy decided"),
    vctl_cmd_session_egress_log, EXIT_HELP },
  { "session", "exec", "ID [--env K=V]... [--cwd DIR] [--timeout SEC] -- ARGV...",
    N_("Run a command in the guest; exit with its exit status"), vctl_cmd_session_exec },
  { "session", "cp", "SRC DST",
    N_("Copy a file into or out of a guest; one side is ID:/guest/path"),
    vctl_cmd_session_cp },
  { "session", "screenshot", "ID FILE.png", N_("Save the guest display as PNG"),
    vctl_cmd_session_screenshot },
  { "session", "log", "ID", N_("Show the commands run in a session"), vctl_cmd_session_log },
  { "session", "resume", "ID", N_("Let a paused session run again"), vctl_cmd_session_resume },
  { "session", "pause", "ID", N_("Hold a session's guest still until it is resumed"), vctl_cmd_session_pause },
  { "session", "save-as-image", "ID NAME",
    N_("Save a session's disk (and, when paused, its memory) as a new frozen image"),
    vctl_cmd_session_save_as_image },
  { "session", "stop", "ID", N_("Stop a session and remove everything it left"),
    vctl_cmd_session_stop },
  { "project", "create", "NAME --quota SIZE [--clone URL]",
    N_("Create a project dataset with a hard quota"), vctl_cmd_project_create, EXIT_HELP },
  { "project", "list", "", N_("List projects"), vctl_cmd_project_list, EXIT_HELP },
  { "project", "show", "NAME", N_("Show a project, its head, remote and deploy key"),
    vctl_cmd_project_show, EXIT_HELP },
  { "project", "log", "NAME [-n N]", N_("Show a project's newest commits"),
    vctl_cmd_project_log, EXIT_HELP },
  { "project", "delete", "NAME", N_("Delete a project's dataset, repository and key"),
    vctl_cmd_project_delete, EXIT_HELP },
  { "project", "remote", "NAME URL", N_("Set the URL a project publishes to"),
    vctl_cmd_project_remote, EXIT_HELP },
  { "project", "publish", "NAME", N_("Push a project's commits to its remote"),
    vctl_cmd_project_publish, EXIT_HELP },
  { "project", "set", "NAME egress=MODE|groups=G1,G2|secrets=A,B|ssh_keys=A,B …",
    N_("Set a project's egress, secrets and SSH keys defaults (MODE none, allowlist, open; empty for the configuration's)"),
    vctl_cmd_project_set, EXIT_HELP },
  { "task", "submit",
    "PROJECT IMAGE --script FILE | --agent --instructions TEXT|--instructions-file F [--verify CMD] [--timeout S] …",
    N_("Hand work to a worker in a fresh guest and print the task's id"), vctl_cmd_task_submit,
    N_("Prints only the new task's id on standard output.\n"
       "Exit status: 0 on success; 1 when it failed (the error's D-Bus name ends the line); "
       "2 on a usage error.") },
  { "task", "egress-log", "ID [--json]",
    N_("Show what a task's work session tried to reach and what was decided"),
    vctl_cmd_task_egress_log, EXIT_HELP },
  { "task", "wait", "ID [--timeout S]", N_("Wait for a task and print its outcome"),
    vctl_cmd_task_wait,
    N_("Exit status:\n"
       "  0  DONE: the report is ready (see “task report”)\n"
       "  1  FAILED: the reason follows on standard error; or the call itself failed\n"
       "  2  NEEDS_INPUT: the worker's question follows; reply with “task answer”\n"
       "     (2 is also a usage error, which prints nothing on standard output)\n"
       "  3  IN_PROGRESS: still running when the wait ended; wait again or “task cancel”") },
  { "task", "list", "", N_("List tasks"), vctl_cmd_task_list, EXIT_HELP },
  { "task", "show", "ID", N_("Show a task's state, and its question if it asks one"),
    vctl_cmd_task_show, EXIT_HELP },
  { "task", "answer", "ID TEXT", N_("Answer the question a task's worker asked"),
    vctl_cmd_task_answer, EXIT_HELP },
  { "task", "cancel", "ID", N_("Stop a task; the work so far is committed and reported"),
    vctl_cmd_task_cancel, EXIT_HELP },
  { "task", "report", "ID [--json]", N_("Print a task's signed report (--json: the signed file)"),
    vctl_cmd_task_report, EXIT_HELP },
  { "task", "transcript", "ID [--follow]",
    N_("Print an agent task's transcript: model turns, tool calls and results"),
    vctl_cmd_task_transcript,
    N_("With --follow, goes on printing entries as the agent records them (asking the daemon "
       "once a second) and ends with the task's outcome when the task is over.\n"
       "Exit status: 0 on success (with --follow: the task ended, whatever its outcome); "
       "1 when it failed (the error's D-Bus name ends the line); 2 on a usage error; "
       "130 when Ctrl-C stopped --follow (the task goes on).") },
  { "worker", "exec", "[--timeout S] [--cwd DIR] [--] ARGV…",
    N_("Worker: run a command in the task's guest; exit with its status"), vctl_cmd_worker_exec,
    N_("For a task's script worker: acts on the session in $VIVARIUM_SESSION (or the task's, "
       "from $VIVARIUM_TASK). The command's standard output is passed through unchanged, and "
       "so is its standard error unless that is a terminal.\n"
       "Exit status: the command's own in the guest (255 when a shell cannot carry it); when "
       "vivariumctl itself fails, one line on standard error and 1 (2 on a usage error).") },
  { "worker", "read", "PATH", N_("Worker: write a guest file to standard output"),
    vctl_cmd_worker_read, WORKER_HELP },
  { "worker", "write", "PATH", N_("Worker: write standard input (at most 16 MiB) to a guest file"),
    vctl_cmd_worker_write, WORKER_HELP },
  { "worker", "ask", "QUESTION", N_("Worker: ask the caller, wait, and print the answer"),
    vctl_cmd_worker_ask, WORKER_HELP },
  { "worker", "finish", "[--summary TEXT|--summary-file F] [--verify CMD]",
    N_("Worker: say the work is done; the daemon commits, verifies and reports"),
    vctl_cmd_worker_finish, WORKER_HELP },
  { "secret", "add", "NAME --host HOST… [--header H] [--format F] [--replace] [--value-file FILE]",
    N_("Store a secret a guest gets only as a placeholder (the value from a file or standard input)"),
    vctl_cmd_secret_add,
    N_("The value is never an argument: it is read from --value-file FILE, or from standard input (a file or "
       "a pipe is handed to the daemon as it is; from a terminal it is asked for, not shown). One trailing "
       "newline is dropped. The session's egress proxy puts it into the header H (default Authorization), "
       "as F renders it ({} is the value; default 'Bearer {}'), of requests to the hosts given, and refuses "
       "the placeholder anywhere else. Needs an administrator (polkit secret-manage).\n"
       "Exit status: 0 on success; 1 when it failed (the error's D-Bus name ends the line); 2 on a usage "
       "error.") },
  { "secret", "list", "[--json]", N_("List the stored secrets: names, hosts, header, format, when added; never values"),
    vctl_cmd_secret_list, EXIT_HELP },
  { "secret", "remove", "NAME", N_("Remove a stored secret (running sessions keep theirs until they end)"),
    vctl_cmd_secret_remove, EXIT_HELP },
  { "ssh-key", "add", "NAME --key-file FILE [--replace]",
    N_("Store an OpenSSH private key the daemon keeps; sessions sign with it, guests never see it"),
    vctl_cmd_ssh_key_add, EXIT_HELP },
  { "ssh-key", "list", "[--json]", N_("List stored SSH keys: name, fingerprint, public key, never the private key"),
    vctl_cmd_ssh_key_list, EXIT_HELP },
  { "ssh-key", "remove", "NAME", N_("Remove a stored SSH key"), vctl_cmd_ssh_key_remove, EXIT_HELP },
  { "egress", "check", "[--session ID | --group NAME… --allow RULE…] HOST[:PORT]",
    N_("Dry run: would the egress proxy let a guest reach HOST[:PORT] (port 443 if absent)?"),
    vctl_cmd_egress_check,
    N_("Nothing is resolved or connected. Without --session, judged by the policy a new session "
       "would get, or by the --group and --allow given.\n"
       "Exit status: 0 allowed; 1 denied (the reason is printed), or the call failed (the error's "
       "D-Bus name ends the line); 2 on a usage error.") },
  { "config", "show", "[--project NAME]",
    N_("Show every configuration value and the file (or project) it comes from"), vctl_cmd_config_show,
    N_("Reads the layers as the daemon does: defaults.conf < vivarium.conf < conf.d/*.conf, then, with "
       "--project, the project's own egress defaults (from the daemon). Values the daemon has not read yet "
       "apply from its next start or the next session.") },
  { "guard", "status", "", N_("Show the network guard's layers and last verdict"),
    vctl_cmd_guard_status },
  { "guard", "selftest", "[--image NAME] [--session ID] [--json] [--junit FILE]",
    N_("Run the isolation self-test in real guests"), vctl_cmd_guard_selftest },
  { "report", "list", "", N_("List the daemon's signed reports"), vctl_cmd_report_list,
    EXIT_HELP },
  { "report", "show", "ID [--json]", N_("Print a report (--json: the signed file, to verify)"),
    vctl_cmd_report_show, EXIT_HELP },
  { "host", "pick", "[USER@]HOST… [--json]",
    N_("Ask each host over SSH for its free capacity and print the one to hand a task to"),
    vctl_cmd_host_pick,
    N_("The host with a free session slot comes first, then the most free slots, the most "
       "memory available and the lowest load per CPU; with no free slot anywhere, the "
       "shortest queue. Ties go to the host named first. A host that cannot be asked is "
       "named on stderr and passed over.\n"
       "Exit status: 0 with a host printed; 1 when no host can take a task; 2 on a usage error.") },
  { "report", "verify", "FILE [--fingerprint sha256:HEX]",
    N_("Check a signed report offline and print its key's fingerprint"), vctl_cmd_report_verify },
  { "report", "render", "FILE [--no-verify] [--fingerprint sha256:HEX]",
    N_("Check a signed report, then show it as text"), vctl_cmd_report_render },
};

#define SYNOPSIS_WIDTH 28

static void
append_command_line (GString *out, const VctlCommand *cmd)
{
  g_autofree gchar *synopsis = vctl_command_synopsis (cmd);

  if (strlen (synopsis) <= SYNOPSIS_WIDTH)
    g_string_append_printf (out, "  %-*s  %s\n", SYNOPSIS_WIDTH, synopsis, _(cmd->summary));
  else
    g_string_append_printf (out, "  %s\n  %-*s  %s\n", synopsis, SYNOPSIS_WIDTH, "",
                            _(cmd->summary));
}

static gchar *
commands_help (const gchar *group)
{
  GString *out = g_string_new (_("Commands:"));

  g_string_append_c (out, '\n');
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++) {
    if (group == NULL || g_strcmp0 (commands[i].group, group) == 0)
      append_command_line (out, &commands[i]);
  }
  return g_string_free (out, FALSE);
}

static gboolean
is_group (const gchar *word)
{
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++) {
    if (g_strcmp0 (commands[i].group, word) == 0)
      return TRUE;
  }
  return FALSE;
}

static const VctlCommand *
lookup (const gchar *group, const gchar *verb)
{
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++) {
    if (g_strcmp0 (commands[i].group, group) == 0 && g_strcmp0 (commands[i].verb, verb) == 0)
      return &commands[i];
  }
  return NULL;
}

/* Finds the command named by the first one or two words of @args (after
 * the program name) and says how many words it used. */
static const VctlCommand *
find_command (gchar **args, guint *n_words, GError **error)
{
  const VctlCommand *cmd;

  if (args[1] == NULL) {
    g_set_error_literal (error, VCTL_USAGE_ERROR, 0, _("No command given"));
    return NULL;
  }
  cmd = lookup (NULL, args[1]);
  if (cmd != NULL) {
    *n_words = 1;
    return cmd;
  }
  if (!is_group (args[1])) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("Unknown command “%s”"), args[1]);
    return NULL;
  }
  if (args[2] == NULL) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("“%s” needs a command"), args[1]);
    return NULL;
  }
  cmd = lookup (args[1], args[2]);
  if (cmd == NULL) {
    g_set_error (error, VCTL_USAGE_ERROR, 0, _("Unknown command “%s %s”"), args[1], args[2]);
    return NULL;
  }
  *n_words = 2;
  return cmd;
}

static gboolean
is_help (const gchar *word)
{
  return g_strcmp0 (word, "--help") == 0 || g_strcmp0 (word, "-h") == 0 ||
         g_strcmp0 (word, "help") == 0;
}

static gchar **
command_argv (gchar **args, guint n_words)
{
  GPtrArray *out = g_ptr_array_new ();

  g_ptr_array_add (out, g_strdup (g_get_prgname ()));
  for (guint i = 1 + n_words; args[i] != NULL; i++)
    g_ptr_array_add (out, g_strdup (args[i]));
  g_ptr_array_add (out, NULL);
  return (gchar **) g_ptr_array_free (out, FALSE);
}

static gint
run (VctlContext *ctx, gchar ***args, GError **error)
{
  gboolean version = FALSE;
  g_autofree gchar *description = commands_help (NULL);
  g_autoptr(GOptionContext) octx = g_option_context_new (_("COMMAND [ARGUMENTS…]"));
  g_auto(GStrv) cmd_argv = NULL;
  const VctlCommand *cmd;
  guint n_words = 0;
  const GOptionEntry entries[] = {
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, N_("Show the client's version"), NULL },
    { "no-interaction", 0, 0, G_OPTION_ARG_NONE, &ctx->no_interaction,
      N_("Never ask for a password; fail instead"), NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctx->json, N_("Print JSON where listing"), NULL },
    { "host", 0, 0, G_OPTION_ARG_STRING, &ctx->host,
      N_("Call the daemon on HOST, over SSH"), N_("[USER@]HOST") },
    { NULL }
  };

  g_option_context_set_translation_domain (octx, GETTEXT_PACKAGE);
  g_option_context_add_main_entries (octx, entries, GETTEXT_PACKAGE);
  g_option_context_set_summary (octx, _("Run and inspect Vivarium's throwaway machines."));
  g_option_context_set_description (octx, description);
  /* Stop at the command: what follows belongs to it (and to the guest). */
  g_option_context_set_strict_posix (octx, TRUE);
  if (!g_option_context_parse_strv (octx, args, error))
    return -1;
  if (version) {
    g_print ("vivariumctl %s\n", PACKAGE_VERSION);
    return 0;
  }
  if ((*args)[1] != NULL && is_help ((*args)[1])) {
    g_autofree gchar *help = g_option_context_get_help (octx, TRUE, NULL);
    g_print ("%s", help);
    return 0;
  }
  if ((*args)[1] != NULL && is_group ((*args)[1]) && is_help ((*args)[2])) {
    g_autofree gchar *help = commands_help ((*args)[1]);
    g_print ("%s", help);
    return 0;
  }

  cmd = find_command (*args, &n_words, error);
  if (cmd == NULL)
    return -1;
  cmd_argv = command_argv (*args, n_words);
  if (!cmd->func (ctx, cmd, &cmd_argv, error))
    return -1;
  return ctx->exit_status;
}

int
main (int argc, char *argv[])
{
  VctlContext ctx = { 0 };
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) args = g_strdupv (argv);
  gint status;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  g_set_prgname ("vivariumctl");

  status = run (&ctx, &args, &error);
  if (status < 0)
    status = vctl_report_error (error);
  vctl_context_clear (&ctx);
  return status;
}
