/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium-session-helper: one session's guest-facing parser. Started by
 * vivariumd in its own transient unit, unprivileged as the session's uid,
 * with a socketpair to the daemon as its standard input; it serves the
 * SessionHelper interface there and ends when the daemon hangs up. */
#define G_LOG_DOMAIN "vivarium-session-helper"

#include "config.h"

#include <gio/gio.h>
#include <locale.h>
#include <stdlib.h>

#include "vivarium-error.h"
#include "vd-helper-service.h"

static void
closed_cb (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error, gpointer user_data)
{
  g_main_loop_quit (user_data);
}

static GDBusConnection *
connect_daemon (GError **error)
{
  g_autoptr(GSocket) socket = g_socket_new_from_fd (0, error);
  g_autoptr(GSocketConnection) stream = NULL;

  if (socket == NULL) {
    g_prefix_error (error, "Standard input is not the daemon's socket: ");
    return NULL;
  }
  stream = g_socket_connection_factory_create_connection (socket);
  return g_dbus_connection_new_sync (G_IO_STREAM (stream), NULL,
                                     G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                     G_DBUS_CONNECTION_FLAGS_DELAY_MESSAGE_PROCESSING,
                                     NULL, NULL, error);
}

int
main (int argc, char **argv)
{
  g_autofree gchar *qmp_socket = NULL;
  g_autofree gchar *agent_socket = NULL;
  const GOptionEntry entries[] = {
    { "qmp", 0, 0, G_OPTION_ARG_FILENAME, &qmp_socket, "QEMU's QMP socket", "PATH" },
    { "agent", 0, 0, G_OPTION_ARG_FILENAME, &agent_socket, "The guest agent's socket", "PATH" },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- a Vivarium session's guest-facing parser");
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(VdHelperService) service = NULL;
  g_autoptr(GMainLoop) loop = NULL;

  setlocale (LC_ALL, "");
  vivarium_error_quark ();
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    g_printerr ("%s\n", error->message);
    return EXIT_FAILURE;
  }
  if (qmp_socket == NULL || agent_socket == NULL || !g_path_is_absolute (qmp_socket) ||
      !g_path_is_absolute (agent_socket)) {
    g_printerr ("vivarium-session-helper is started by vivariumd, with --qmp PATH and --agent PATH\n");
    return EXIT_FAILURE;
  }
  connection = connect_daemon (&error);
  if (connection == NULL) {
    g_printerr ("Cannot talk to vivariumd: %s\n", error->message);
    return EXIT_FAILURE;
  }
  loop = g_main_loop_new (NULL, FALSE);
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_signal_connect (connection, "closed", G_CALLBACK (closed_cb), loop);
  service = vd_helper_service_new (connection, qmp_socket, agent_socket);
  if (!vd_helper_service_export (service, &error)) {
    g_printerr ("Cannot serve the session helper interface: %s\n", error->message);
    return EXIT_FAILURE;
  }
  g_dbus_connection_start_message_processing (connection);
  g_main_loop_run (loop);
  return EXIT_SUCCESS;
}
