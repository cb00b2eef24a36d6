/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib-unix.h>
#include <gio/gunixfdlist.h>

#include "manager-bus.h"

#define MANAGER_PATH "/org/vivarium/Vivarium1"

void
manager_bus_up (ManagerBus *mb)
{
  g_autoptr(GError) error = NULL;

  memset (mb, 0, sizeof *mb);
  private_bus_up (&mb->pb);
  mb->manager = vivarium_dbus_manager_skeleton_new ();
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (mb->manager), mb->pb.service,
                                                   MANAGER_PATH, &error));
  invocation_watch_attach (&mb->calls, G_DBUS_INTERFACE_SKELETON (mb->manager), VIVARIUM_DBUS_TYPE_MANAGER);
}

void
manager_bus_down (ManagerBus *mb)
{
  invocation_watch_assert_freed (&mb->calls);
  invocation_watch_detach (&mb->calls);
  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (mb->manager));
  g_clear_object (&mb->manager);
  private_bus_down (&mb->pb);
}

typedef struct {
  gboolean  done;
  GVariant *reply;
  GError   *error;
} Call;

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Call *call = user_data;

  call->reply = g_dbus_connection_call_with_unix_fd_list_finish (G_DBUS_CONNECTION (source), NULL, res,
                                                                 &call->error);
  call->done = TRUE;
}

/* Calls @method with @args, whose handle 0 is the read end of a pipe that
 * holds @fd_contents, and returns its reply (the handler answers from a
 * thread, so the call is asynchronous and the context runs meanwhile). */
GVariant *
manager_bus_call_with_fd (ManagerBus *mb, const gchar *method, GVariant *args, const gchar *fd_contents,
                          GError **error)
{
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  g_autoptr(GError) local = NULL;
  Call call = { 0 };
  int pipe_fds[2];

  g_assert_true (g_unix_open_pipe (pipe_fds, FD_CLOEXEC, &local));
  g_assert_cmpint (write (pipe_fds[1], fd_contents, strlen (fd_contents)), ==, (gssize) strlen (fd_contents));
  close (pipe_fds[1]);
  g_assert_cmpint (g_unix_fd_list_append (fds, pipe_fds[0], &local), ==, 0);
  close (pipe_fds[0]);
  g_dbus_connection_call_with_unix_fd_list (mb->pb.client, g_dbus_connection_get_unique_name (mb->pb.service), MANAGER_PATH,
                                            "org.vivarium.Vivarium1.Manager", method, args, NULL,
                                            G_DBUS_CALL_FLAGS_NONE, 10000, fds, NULL, call_done_cb, &call);
  while (!call.done)
    g_main_context_iteration (NULL, TRUE);
  if (call.error != NULL)
    g_propagate_error (error, call.error);
  return call.reply;
}
