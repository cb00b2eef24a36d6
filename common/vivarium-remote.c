/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-remote.h"

#include <glib/gi18n.h>
#include <string.h>

#define DESTINATION_MAX 255
#define USER_MAX        32

static gboolean
is_user_char (gchar c)
{
  return g_ascii_isalnum (c) || c == '_' || c == '.' || c == '-';
}

/* Host names (RFC 1123 labels), IPv4 and IPv6 addresses. */
static gboolean
is_host_char (gchar c)
{
  return g_ascii_isalnum (c) || c == '.' || c == '-' || c == ':';
}

gboolean
vivarium_remote_check_destination (const gchar *destination, GError **error)
{
  const gchar *at = destination != NULL ? strrchr (destination, '@') : NULL;
  const gchar *host = at != NULL ? at + 1 : destination;
  gsize user_len = at != NULL ? (gsize) (at - destination) : 0;

  if (destination == NULL || destination[0] == '\0' || strlen (destination) > DESTINATION_MAX)
    goto bad;
  if (at != NULL && (user_len == 0 || user_len > USER_MAX || destination[0] == '-'))
    goto bad;
  for (gsize i = 0; i < user_len; i++)
    if (!is_user_char (destination[i]))
      goto bad;
  if (host[0] == '\0' || host[0] == '-' || host[0] == '.')
    goto bad;
  for (const gchar *p = host; *p != '\0'; p++)
    if (!is_host_char (*p))
      goto bad;
  return TRUE;

bad:
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
               _("“%s” is not a host to reach over SSH: give [USER@]HOST, a user name and a host name "
                 "or address (a port or other options go in ~/.ssh/config)"),
               destination != NULL ? destination : "");
  return FALSE;
}

static GSubprocess *
spawn_bridge (const gchar *destination, gboolean interactive, GError **error)
{
  const gchar *ssh = g_getenv ("VIVARIUM_SSH");
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();

  g_ptr_array_add (argv, (gpointer) (ssh != NULL && ssh[0] != '\0' ? ssh : "ssh"));
  /* No X11, no terminal, no escape character: the pipe carries D-Bus only. */
  g_ptr_array_add (argv, (gpointer) "-xT");
  g_ptr_array_add (argv, (gpointer) "-e");
  g_ptr_array_add (argv, (gpointer) "none");
  if (!interactive) {
    g_ptr_array_add (argv, (gpointer) "-o");
    g_ptr_array_add (argv, (gpointer) "BatchMode=yes");
  }
  g_ptr_array_add (argv, (gpointer) "--");
  g_ptr_array_add (argv, (gpointer) destination);
  g_ptr_array_add (argv, (gpointer) "systemd-stdio-bridge");
  g_ptr_array_add (argv, NULL);
  return g_subprocess_newv ((const gchar * const *) argv->pdata,
                            G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE, error);
}

/* ssh goes when the connection does: its stdin closes with the stream,
 * and what is left of it is ended. */
static void
bridge_free (gpointer data)
{
  GSubprocess *ssh = data;

  g_subprocess_force_exit (ssh);
  g_object_unref (ssh);
}

/* Why ssh could not carry the connection, when it ended: its own lines
 * are on stderr already. */
static void
explain_failure (GSubprocess *ssh, const gchar *destination, GError *dbus_error, GError **error)
{
  if (g_subprocess_get_if_exited (ssh))
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                 _("Cannot reach %s over SSH: ssh ended with status %d before the bus answered "
                   "(its own message, if any, is above)"),
                 destination, g_subprocess_get_exit_status (ssh));
  else
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                 _("Cannot reach the system bus of %s over SSH: %s"), destination, dbus_error->message);
}

GDBusConnection *
vivarium_remote_connect_sync (const gchar *destination, gboolean interactive, GCancellable *cancellable,
                              GError **error)
{
  g_autoptr(GSubprocess) ssh = NULL;
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(GError) dbus_error = NULL;
  GDBusConnection *connection;

  if (!vivarium_remote_check_destination (destination, error))
    return NULL;
  ssh = spawn_bridge (destination, interactive, error);
  if (ssh == NULL) {
    g_prefix_error (error, _("Cannot run ssh to reach %s: "), destination);
    return NULL;
  }
  stream = g_simple_io_stream_new (g_subprocess_get_stdout_pipe (ssh), g_subprocess_get_stdin_pipe (ssh));
  connection = g_dbus_connection_new_sync (stream, NULL,
                                           G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                           G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                           NULL, cancellable, &dbus_error);
  if (connection == NULL) {
    g_io_stream_close (stream, NULL, NULL);
    /* A failed handshake is most often ssh having ended: wait for it. */
    g_subprocess_wait (ssh, cancellable, NULL);
    explain_failure (ssh, destination, dbus_error, error);
    g_subprocess_force_exit (ssh);
    return NULL;
  }
  g_object_set_data_full (G_OBJECT (connection), "vivarium-remote-ssh", g_steal_pointer (&ssh), bridge_free);
  return connection;
}
