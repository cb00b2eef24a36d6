/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-remote.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define DESTINATION_MAX 255
#define USER_MAX        32
/* How much of the end of ssh's stderr is read for its last line. */
#define MESSAGE_TAIL    4096

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
spawn_bridge (const gchar *destination, gboolean interactive, gint stderr_fd, GError **error)
{
  const gchar *ssh = g_getenv ("VIVARIUM_SSH");
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE);

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
  if (stderr_fd >= 0) {
    gint fd = dup (stderr_fd);

    if (fd < 0) {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "dup: %s", g_strerror (errno));
      return NULL;
    }
    g_subprocess_launcher_take_stderr_fd (launcher, fd);
  }
  return g_subprocess_launcher_spawnv (launcher, (const gchar * const *) argv->pdata, error);
}

/* An unlinked file for ssh's stderr: nothing to drain, nothing left behind. */
static gint
open_message_file (GError **error)
{
  g_autofree gchar *path = NULL;
  gint fd = g_file_open_tmp ("vivarium-ssh-XXXXXX", &path, error);

  if (fd >= 0)
    g_unlink (path);
  return fd;
}

/* The last non-empty line ssh wrote at or after @from. */
static gchar *
last_line (gint fd, off_t from)
{
  gchar buf[MESSAGE_TAIL + 1];
  off_t end = lseek (fd, 0, SEEK_END);
  off_t start = MAX (from, end > MESSAGE_TAIL ? end - MESSAGE_TAIL : 0);
  ssize_t n = end > start ? pread (fd, buf, (size_t) (end - start), start) : 0;
  g_auto(GStrv) lines = NULL;

  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  lines = g_strsplit (buf, "\n", -1);
  for (gint i = (gint) g_strv_length (lines) - 1; i >= 0; i--) {
    g_autofree gchar *line = g_utf8_make_valid (g_strstrip (lines[i]), -1);

    if (line[0] != '\0')
      return g_steal_pointer (&line);
  }
  return NULL;
}

/* ssh's stderr on a connection: what it said while connecting is not the
 * reason the link ends later. */
typedef struct {
  gint  fd;
  off_t connected_at;
} Messages;

static void
messages_free (gpointer data)
{
  Messages *messages = data;

  close (messages->fd);
  g_free (messages);
}

gchar *
vivarium_remote_get_ssh_message (GDBusConnection *connection)
{
  Messages *messages = g_object_get_data (G_OBJECT (connection), "vivarium-remote-stderr");

  return messages != NULL ? last_line (messages->fd, messages->connected_at) : NULL;
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
 * are on stderr already, or its last one is in @message. */
static void
explain_failure (GSubprocess *ssh, const gchar *destination, const gchar *message, GError *dbus_error,
                 GError **error)
{
  if (g_subprocess_get_if_exited (ssh) && message != NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                 _("Cannot reach %s over SSH: %s"), destination, message);
  else if (g_subprocess_get_if_exited (ssh))
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                 _("Cannot reach %s over SSH: ssh ended with status %d before the bus answered "
                   "(its own message, if any, is above)"),
                 destination, g_subprocess_get_exit_status (ssh));
  else
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED,
                 _("Cannot reach the system bus of %s over SSH: %s"), destination, dbus_error->message);
}

static GDBusConnection *
connect_bridge (const gchar *destination, gboolean interactive, gint stderr_fd, GCancellable *cancellable,
                GError **error)
{
  g_autoptr(GSubprocess) ssh = NULL;
  g_autoptr(GIOStream) stream = NULL;
  g_autoptr(GError) dbus_error = NULL;
  GDBusConnection *connection;

  if (!vivarium_remote_check_destination (destination, error))
    return NULL;
  ssh = spawn_bridge (destination, interactive, stderr_fd, error);
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
    g_autofree gchar *message = NULL;

    g_io_stream_close (stream, NULL, NULL);
    /* A failed handshake is most often ssh having ended: wait for it. */
    g_subprocess_wait (ssh, cancellable, NULL);
    if (stderr_fd >= 0)
      message = last_line (stderr_fd, 0);
    explain_failure (ssh, destination, message, dbus_error, error);
    g_subprocess_force_exit (ssh);
    return NULL;
  }
  g_object_set_data_full (G_OBJECT (connection), "vivarium-remote-ssh", g_steal_pointer (&ssh), bridge_free);
  return connection;
}

GDBusConnection *
vivarium_remote_connect_sync (const gchar *destination, gboolean interactive, GCancellable *cancellable,
                              GError **error)
{
  return connect_bridge (destination, interactive, -1, cancellable, error);
}

GDBusConnection *
vivarium_remote_connect_quiet (const gchar *destination, GCancellable *cancellable, GError **error)
{
  gint fd = open_message_file (error);
  GDBusConnection *connection;
  Messages *messages;

  if (fd < 0)
    return NULL;
  connection = connect_bridge (destination, FALSE, fd, cancellable, error);
  if (connection == NULL) {
    close (fd);
    return NULL;
  }
  messages = g_new0 (Messages, 1);
  messages->fd = fd;
  messages->connected_at = lseek (fd, 0, SEEK_END);
  g_object_set_data_full (G_OBJECT (connection), "vivarium-remote-stderr", messages, messages_free);
  return connection;
}
