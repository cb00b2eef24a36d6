/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <glib/gi18n.h>

#include "vivarium-mcp-rpc.h"
#include "vivarium-remote.h"

/* vivarium-mcp: the assistant's one tool. An MCP server on stdin/stdout
 * (the client starts it), a D-Bus client of vivariumd as the user who runs
 * it. Nothing but MCP messages may reach stdout, so the protocol gets its
 * own copy of the descriptor and fd 1 becomes stderr before anything can
 * print. */

static GLogWriterOutput
log_to_stderr (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  g_autofree gchar *line = g_log_writer_format_fields (level, fields, n_fields, FALSE);

  fprintf (stderr, "%s\n", line);
  return G_LOG_WRITER_HANDLED;
}

static gint
protocol_fd (GError **error)
{
  gint fd = dup (STDOUT_FILENO);

  if (fd < 0 || dup2 (STDERR_FILENO, STDOUT_FILENO) < 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "Cannot set up stdout: %s", g_strerror (errno));
    return -1;
  }
  return fd;
}

int
main (int argc, char **argv)
{
  g_autofree gchar *client = NULL;
  g_autofree gchar *host = NULL;
  g_autofree gchar *config = NULL;
  gboolean version = FALSE;
  const GOptionEntry entries[] = {
    { "client", 0, 0, G_OPTION_ARG_STRING, &client,
      "Apply the [Client NAME] manifest of the MCP configuration", "NAME" },
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &config,
      "The MCP configuration (default " VIVARIUM_SYSCONFDIR "/" VMCP_CONFIG_FILE ")", "FILE" },
    { "host", 0, 0, G_OPTION_ARG_STRING, &host,
      "Hand tasks to the daemon on HOST, over SSH (ssh -xT HOST systemd-stdio-bridge)", "[USER@]HOST" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new ("— the Vivarium MCP server (stdio)");
  g_autoptr(GError) error = NULL;
  g_autoptr(VmcpSchema) schema = NULL;
  g_autoptr(VmcpManifest) manifest = NULL;
  g_autoptr(VmcpDaemon) daemon = NULL;
  g_autoptr(VmcpTools) tools = NULL;
  g_autoptr(VmcpServer) server = NULL;
  gint out_fd;

  setlocale (LC_ALL, "");
  /* A client that went away is an error to report, not a signal to die of. */
  signal (SIGPIPE, SIG_IGN);
  g_log_set_writer_func (log_to_stderr, NULL, NULL);
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx,
    "Speaks the Model Context Protocol (revision " VMCP_PROTOCOL_VERSION ") on stdin and stdout:\n"
    "one JSON-RPC message per line. Add it to an assistant's MCP configuration; see README.md.");
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    g_printerr ("vivarium-mcp: %s\n", error->message);
    return 2;
  }
  if (version) {
    g_printerr ("vivarium-mcp %s (MCP %s)\n", PACKAGE_VERSION, VMCP_PROTOCOL_VERSION);
    return 0;
  }
  if (host != NULL && !vivarium_remote_check_destination (host, &error)) {
    g_printerr ("vivarium-mcp: %s\n", error->message);
    return 2;
  }
  if (config == NULL)
    config = g_build_filename (VIVARIUM_SYSCONFDIR, VMCP_CONFIG_FILE, NULL);
  schema = vmcp_schema_load (&error);
  if (schema == NULL) {
    g_printerr ("vivarium-mcp: the tool definitions are broken: %s\n", error->message);
    return 1;
  }
  manifest = vmcp_manifest_load (config, client, vmcp_schema_tool_names (schema), &error);
  if (manifest == NULL) {
    g_printerr ("vivarium-mcp: %s\n", error->message);
    return 1;
  }
  out_fd = protocol_fd (&error);
  if (out_fd < 0) {
    g_printerr ("vivarium-mcp: %s\n", error->message);
    return 1;
  }
  daemon = vmcp_daemon_new (host);
  tools = vmcp_tools_new (schema, manifest, daemon);
  server = vmcp_server_new (tools);
  if (!vmcp_server_run (server, STDIN_FILENO, out_fd, &error)) {
    g_printerr ("vivarium-mcp: %s\n", error->message);
    return 1;
  }
  return 0;
}
