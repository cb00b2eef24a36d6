/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The SessionHelper boundary in one process: the daemon's VdSessionHelper
 * on one end of a socketpair, the helper's VdHelperService on the other,
 * the guest agent a scripted peer (fake-peer.c). What the daemon gets is
 * typed, cut at its cap, and every failure a Vivarium error. */
#include "config.h"

#include <sys/socket.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-helper-service.h"
#include "vd-session-helper.h"
#include "fake-peer.h"

typedef struct {
  gchar           *dir;
  gchar           *agent_socket;
  GDBusConnection *daemon_side;
  GDBusConnection *helper_side;
  VdHelperService *service;
  VdSessionHelper *helper;
} Fixture;

static void
connection_made_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GDBusConnection **out = user_data;
  g_autoptr(GError) error = NULL;

  *out = g_dbus_connection_new_finish (res, &error);
  g_assert_no_error (error);
}

static GIOStream *
stream_for (int fd)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) socket = g_socket_new_from_fd (fd, &error);

  g_assert_no_error (error);
  return G_IO_STREAM (g_socket_connection_factory_create_connection (socket));
}

static gboolean
allow_anonymous_cb (GDBusAuthObserver *observer, const gchar *mechanism, gpointer user_data)
{
  return g_strcmp0 (mechanism, "ANONYMOUS") == 0;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusAuthObserver) observer = g_dbus_auth_observer_new ();
  g_autoptr(GIOStream) daemon_stream = NULL;
  g_autoptr(GIOStream) helper_stream = NULL;
  g_autofree gchar *guid = g_dbus_generate_guid ();
  g_autofree gchar *qmp_socket = NULL;
  int pair[2];

  f->dir = g_dir_make_tmp ("vd-helper-XXXXXX", &error);
  g_assert_no_error (error);
  f->agent_socket = g_build_filename (f->dir, "qga.sock", NULL);
  qmp_socket = g_build_filename (f->dir, "qmp.sock", NULL);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), ==, 0);
  daemon_stream = stream_for (pair[0]);
  helper_stream = stream_for (pair[1]);
  g_signal_connect (observer, "allow-mechanism", G_CALLBACK (allow_anonymous_cb), NULL);
  g_dbus_connection_new (daemon_stream, guid,
                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_SERVER |
                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_ALLOW_ANONYMOUS |
                         G_DBUS_CONNECTION_FLAGS_DELAY_MESSAGE_PROCESSING,
                         observer, NULL, connection_made_cb, &f->daemon_side);
  g_dbus_connection_new (helper_stream, NULL,
                         G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                         G_DBUS_CONNECTION_FLAGS_DELAY_MESSAGE_PROCESSING,
                         NULL, NULL, connection_made_cb, &f->helper_side);
  while (f->daemon_side == NULL || f->helper_side == NULL)
    g_main_context_iteration (NULL, TRUE);
  f->service = vd_helper_service_new (f->helper_side, qmp_socket, f->agent_socket);
  g_assert_true (vd_helper_service_export (f->service, &error));
  g_assert_no_error (error);
  g_dbus_connection_start_message_processing (f->helper_side);
  f->helper = vd_session_helper_new_for_connection (f->daemon_side, "test");
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  vd_session_helper_close (f->helper);
  g_clear_object (&f->helper);
  g_clear_object (&f->service);
  g_clear_object (&f->helper_side);
  g_clear_object (&f->daemon_side);
  g_unlink (f->agent_socket);
  g_rmdir (f->dir);
  g_free (f->agent_socket);
  g_free (f->dir);
}

static void
test_qmp_command_outside_the_list (Fixture *f, gconstpointer data)
{
  TestWait wait = { 0 };
  g_autoptr(GError) error = NULL;

  vd_session_helper_qmp_async (f->helper, "human-monitor-command", NULL, 1000, NULL, test_wait_cb, &wait);
  test_run_until (&wait.done);
  g_assert_false (vd_session_helper_call_finish (f->helper, wait.result, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "human-monitor-command"));
  g_assert_null (strstr (error->message, "GDBus.Error"));
  g_clear_object (&wait.result);
}

static void
test_exec_through_the_helper (Fixture *f, gconstpointer data)
{
  const gchar *echo[] = { "echo", "hello", "world", NULL };
  const gchar *nothing[] = { "true", NULL };
  TestWait wait = { 0 };
  TestWait wait2 = { 0 };
  TestWait wait3 = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) result = NULL;
  FakePeer *peer = fake_peer_new_listen ("helper-exec.txt", f->agent_socket, 0);
  gint64 pid = -1;

  g_assert_false (vd_session_helper_has_agent (f->helper));
  vd_session_helper_connect_agent_async (f->helper, 10000, NULL, test_wait_cb, &wait);
  test_run_until (&wait.done);
  g_assert_true (vd_session_helper_call_finish (f->helper, wait.result, &error));
  g_assert_no_error (error);
  g_assert_true (vd_session_helper_has_agent (f->helper));

  /* Cut at the daemon's cap, and said to be cut. */
  vd_session_helper_exec_async (f->helper, echo, NULL, NULL, 10000, 5, NULL, test_wait_cb, &wait2);
  test_run_until (&wait2.done);
  result = vd_session_helper_exec_finish (f->helper, wait2.result, &pid, &error);
  g_assert_no_error (error);
  g_assert_cmpint (pid, ==, 77);
  g_assert_cmpint (result->exit_status, ==, 0);
  g_assert_cmpmem (g_bytes_get_data (result->out, NULL), g_bytes_get_size (result->out), "hello", 5);
  g_assert_true (result->out_truncated);
  g_assert_cmpuint (g_bytes_get_size (result->err), ==, 0);

  /* A pid past 2^64: the helper's parser refuses it, the daemon gets a
   * typed error, no process id. */
  vd_session_helper_exec_async (f->helper, nothing, NULL, NULL, 10000, 5, NULL, test_wait_cb, &wait3);
  test_run_until (&wait3.done);
  pid = 0;
  g_assert_null (vd_session_helper_exec_finish (f->helper, wait3.result, &pid, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_cmpint (pid, ==, -1);
  g_clear_object (&wait.result);
  g_clear_object (&wait2.result);
  g_clear_object (&wait3.result);
  /* The helper's end closes its agent: the peer's transcript ends there. */
  g_clear_object (&f->service);
  test_run_until_peer (peer);
  fake_peer_finish (peer, TRUE);
}

static void
died_cb (VdSessionHelper *helper, const gchar *reason, gpointer user_data)
{
  gchar **out = user_data;

  *out = g_strdup (reason);
}

static void
test_helper_hangs_up (Fixture *f, gconstpointer data)
{
  g_autofree gchar *reason = NULL;
  TestWait wait = { 0 };
  g_autoptr(GError) error = NULL;
  gboolean kvm = TRUE;

  g_signal_connect (f->helper, "died", G_CALLBACK (died_cb), &reason);
  g_dbus_connection_close_sync (f->helper_side, NULL, &error);
  g_assert_no_error (error);
  while (reason == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_nonnull (strstr (reason, "session helper"));
  g_assert_true (vd_session_helper_is_closed (f->helper));
  vd_session_helper_query_kvm_async (f->helper, NULL, test_wait_cb, &wait);
  test_run_until (&wait.done);
  g_assert_false (vd_session_helper_query_kvm_finish (f->helper, wait.result, &kvm, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST);
  g_clear_object (&wait.result);
}

static void
count_cb (VdSessionHelper *helper, gpointer user_data)
{
  (*(guint *) user_data)++;
}

/* A helper broken into by its guest may flood the daemon's loop with
 * signals: past the bound the session is given up, not the daemon's time. */
static void
test_helper_floods_signals (Fixture *f, gconstpointer data)
{
  g_autofree gchar *reason = NULL;
  guint stopped = 0;

  g_signal_connect (f->helper, "died", G_CALLBACK (died_cb), &reason);
  g_signal_connect (f->helper, "guest-stopped", G_CALLBACK (count_cb), &stopped);
  for (guint i = 0; i < 3000; i++)
    g_dbus_connection_emit_signal (f->helper_side, NULL, VD_HELPER_OBJECT_PATH, VD_HELPER_INTERFACE,
                                   "GuestStopped", NULL, NULL);
  g_dbus_connection_flush_sync (f->helper_side, NULL, NULL);
  for (guint i = 0; i < 10000 && reason == NULL; i++)
    g_main_context_iteration (NULL, TRUE);
  g_assert_nonnull (reason);
  g_assert_nonnull (strstr (reason, "signals in a second"));
  g_assert_true (vd_session_helper_is_closed (f->helper));
  /* Forwarded up to the bound (a second boundary may split them), never all. */
  g_assert_cmpuint (stopped, <=, 2000);
  g_assert_cmpuint (stopped, >, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  vivarium_error_quark ();
  g_test_add ("/session-helper/qmp-command-outside-the-list", Fixture, NULL, fixture_set_up,
              test_qmp_command_outside_the_list, fixture_tear_down);
  g_test_add ("/session-helper/exec", Fixture, NULL, fixture_set_up, test_exec_through_the_helper,
              fixture_tear_down);
  g_test_add ("/session-helper/floods-signals", Fixture, NULL, fixture_set_up, test_helper_floods_signals,
              fixture_tear_down);
  g_test_add ("/session-helper/hangs-up", Fixture, NULL, fixture_set_up, test_helper_hangs_up, fixture_tear_down);
  return g_test_run ();
}
