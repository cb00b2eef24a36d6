/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-qmp-client"

#include "config.h"

#include <signal.h>
#include <sys/prctl.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-qmp-client.h"
#include "fake-peer.h"

typedef struct {
  FakePeer    *peer;
  VdQmpClient *client;
  guint        closed;
  GPtrArray   *events;
  GPtrArray   *io_errors;    /* "reason|nospace" */
  guint        stopped;
  guint        resumed;
} Fixture;

static void
on_block_io_error (VdQmpClient *client, const gchar *reason, gboolean nospace, gpointer user_data)
{
  Fixture *fx = user_data;
  g_ptr_array_add (fx->io_errors, g_strdup_printf ("%s|%s", reason, nospace ? "nospace" : "other"));
}

static void
on_guest_stopped (VdQmpClient *client, gpointer user_data)
{
  Fixture *fx = user_data;
  fx->stopped++;
}

static void
on_guest_resumed (VdQmpClient *client, gpointer user_data)
{
  Fixture *fx = user_data;
  fx->resumed++;
}

static void
on_closed (VdQmpClient *client, gpointer user_data)
{
  Fixture *fx = user_data;
  fx->closed++;
}

static void
on_event (VdQmpClient *client, const gchar *name, JsonObject *data, gpointer user_data)
{
  Fixture *fx = user_data;
  g_ptr_array_add (fx->events, g_strdup (name));
}

static void
fixture_start (Fixture *fx, const gchar *transcript)
{
  g_autoptr(GIOStream) stream = NULL;

  fx->peer = fake_peer_new (transcript, &stream);
  fx->client = vd_qmp_client_new_for_stream (stream);
  fx->events = g_ptr_array_new_with_free_func (g_free);
  fx->io_errors = g_ptr_array_new_with_free_func (g_free);
  g_signal_connect (fx->client, "closed", G_CALLBACK (on_closed), fx);
  g_signal_connect (fx->client, "block-io-error", G_CALLBACK (on_block_io_error), fx);
  g_signal_connect (fx->client, "guest-stopped", G_CALLBACK (on_guest_stopped), fx);
  g_signal_connect (fx->client, "guest-resumed", G_CALLBACK (on_guest_resumed), fx);
  g_signal_connect (fx->client, "event", G_CALLBACK (on_event), fx);
}

/* Closes our end, lets the peer see EOF, and checks its side of the story. */
static void
fixture_finish (Fixture *fx, gboolean complete)
{
  vd_qmp_client_close (fx->client);
  g_clear_object (&fx->client);
  test_run_until_peer (fx->peer);
  fake_peer_finish (fx->peer, complete);
  g_ptr_array_unref (fx->events);
  g_ptr_array_unref (fx->io_errors);
}

static gboolean
handshake (VdQmpClient *client, GError **error)
{
  TestWait w = { 0 };
  gboolean ok;

  vd_qmp_client_handshake_async (client, 5000, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  ok = vd_qmp_client_handshake_finish (client, w.result, error);
  g_object_unref (w.result);
  return ok;
}

static void
execute_start (VdQmpClient *client, const gchar *command, guint timeout_ms, TestWait *w)
{
  vd_qmp_client_execute_async (client, command, NULL, timeout_ms, NULL, test_wait_cb, w);
}

static JsonNode *
execute_end (VdQmpClient *client, TestWait *w, GError **error)
{
  JsonNode *ret;

  test_run_until (&w->done);
  ret = vd_qmp_client_execute_finish (client, w->result, error);
  g_clear_object (&w->result);
  w->done = FALSE;
  return ret;
}

static JsonNode *
execute (VdQmpClient *client, const gchar *command, guint timeout_ms, GError **error)
{
  TestWait w = { 0 };

  execute_start (client, command, timeout_ms, &w);
  return execute_end (client, &w, error);
}

static void
test_normal (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) version = NULL;
  g_autoptr(JsonNode) status = NULL;
  g_autoptr(JsonNode) stop = NULL;
  g_autoptr(JsonNode) missing = NULL;

  fixture_start (&fx, "qmp-normal.txt");
  g_assert_true (handshake (fx.client, &error));
  g_assert_no_error (error);

  version = execute (fx.client, "query-version", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (json_node_get_object (version), "qemu"), "major"), ==, 7);

  status = execute (fx.client, "query-status", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (status), "status"), ==, "running");

  missing = execute (fx.client, "no-such", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST);
  g_assert_null (missing);
  g_assert_nonnull (strstr (error->message, "CommandNotFound"));
  g_clear_error (&error);

  stop = execute (fx.client, "stop", 5000, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (stop));
  g_assert_cmpuint (fx.events->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (fx.events, 0), ==, "STOP");
  g_assert_cmpuint (fx.closed, ==, 0);

  fixture_finish (&fx, TRUE);
}

/* Issue 7, defect 4: the events that say why the guest stopped. */
static void
test_block_io_error (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) s1 = NULL;
  g_autoptr(JsonNode) cont = NULL;
  g_autoptr(JsonNode) s2 = NULL;

  fixture_start (&fx, "qmp-block-io-error.txt");
  g_assert_true (handshake (fx.client, &error));
  s1 = execute (fx.client, "query-status", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (fx.io_errors->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (fx.io_errors, 0), ==,
                   "the disk ran out of space (No space left on device)|nospace");
  g_assert_cmpuint (fx.stopped, ==, 1);
  g_assert_cmpuint (fx.resumed, ==, 0);
  cont = execute (fx.client, "cont", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (fx.resumed, ==, 1);
  s2 = execute (fx.client, "query-status", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (fx.io_errors->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (fx.io_errors, 1), ==,
                   "a disk read error (Input/output error\\x1b[2J)|other");
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_before_handshake (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  TestWait hw = { 0 };

  fixture_start (&fx, "qmp-hostile-before-greeting.txt");
  vd_qmp_client_handshake_async (fx.client, 5000, NULL, test_wait_cb, &hw);
  /* Nothing goes out before the capabilities are negotiated. */
  ret = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&error);
  /* A reply before the greeting is garbage. */
  test_run_until (&hw.done);
  g_assert_false (vd_qmp_client_handshake_finish (fx.client, hw.result, &error));
  g_object_unref (hw.result);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_cmpuint (fx.closed, ==, 1);
  fixture_finish (&fx, TRUE);
}

static void
test_stale_id (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;

  fixture_start (&fx, "qmp-stale-id.txt");
  g_assert_true (handshake (fx.client, &error));
  status = execute (fx.client, "query-status", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (status), "status"), ==, "running");
  fixture_finish (&fx, TRUE);
}

static void
test_oversize (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;
  g_autoptr(JsonNode) after = NULL;

  fixture_start (&fx, "qmp-oversize.txt");
  g_assert_true (handshake (fx.client, &error));
  status = execute (fx.client, "query-status", 30000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_null (status);
  g_clear_error (&error);
  g_assert_cmpuint (fx.closed, ==, 1);
  g_assert_true (vd_qmp_client_is_closed (fx.client));
  /* A closed client refuses, it does not crash. */
  after = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  /* The peer's write fails once we are gone: it cannot finish its script. */
  fixture_finish (&fx, FALSE);
}

static void
test_oversize_line (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;

  fixture_start (&fx, "qmp-oversize-line.txt");
  g_assert_true (handshake (fx.client, &error));
  vd_qmp_client_set_max_response_size (fx.client, 1024);
  status = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_cmpuint (fx.closed, ==, 1);
  fixture_finish (&fx, TRUE);
}

static void
test_timeout (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;
  g_autoptr(JsonNode) version = NULL;

  fixture_start (&fx, "qmp-timeout.txt");
  g_assert_true (handshake (fx.client, &error));
  status = execute (fx.client, "query-status", 100, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);
  version = execute (fx.client, "query-version", 5000, &error);
  g_assert_no_error (error);
  g_assert_true (json_object_has_member (json_node_get_object (version), "qemu"));
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_cancel (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(JsonNode) status = NULL;
  g_autoptr(JsonNode) version = NULL;
  TestWait w = { 0 };

  /* Same exchange as a timeout: the late reply must be ignored. */
  fixture_start (&fx, "qmp-timeout.txt");
  g_assert_true (handshake (fx.client, &error));
  vd_qmp_client_execute_async (fx.client, "query-status", NULL, 5000, cancellable, test_wait_cb, &w);
  g_cancellable_cancel (cancellable);
  status = execute_end (fx.client, &w, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);
  version = execute (fx.client, "query-version", 5000, &error);
  g_assert_no_error (error);
  fixture_finish (&fx, TRUE);
}

static void
test_disconnect (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret1 = NULL;
  g_autoptr(JsonNode) ret2 = NULL;
  TestWait w1 = { 0 };
  TestWait w2 = { 0 };

  fixture_start (&fx, "qmp-disconnect.txt");
  g_assert_true (handshake (fx.client, &error));
  execute_start (fx.client, "query-status", 5000, &w1);
  execute_start (fx.client, "query-version", 5000, &w2);
  ret1 = execute_end (fx.client, &w1, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_clear_error (&error);
  ret2 = execute_end (fx.client, &w2, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_cmpuint (fx.closed, ==, 1);
  fixture_finish (&fx, TRUE);
  g_assert_cmpuint (fx.closed, ==, 1);
}

static void
test_malformed (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;

  fixture_start (&fx, "qmp-malformed.txt");
  g_assert_true (handshake (fx.client, &error));
  status = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_cmpuint (fx.closed, ==, 1);
  fixture_finish (&fx, TRUE);
}

static void
test_error_shape (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) bad = NULL;
  g_autoptr(JsonNode) good = NULL;

  fixture_start (&fx, "qmp-error-shape.txt");
  g_assert_true (handshake (fx.client, &error));
  bad = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_clear_error (&error);
  good = execute (fx.client, "query-status", 5000, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

typedef struct {
  const gchar *transcript;
  gboolean     closes;
} HostileCase;

static const HostileCase hostile_cases[] = {
  { "qmp-hostile-array.txt",     TRUE },
  { "qmp-hostile-bignum.txt",    TRUE },
  { "qmp-hostile-deep.txt",      TRUE },
  { "qmp-hostile-utf8.txt",      TRUE },
  { "qmp-hostile-surrogate.txt", TRUE },
  { "qmp-hostile-event.txt",     TRUE },
  { "qmp-hostile-eventdata.txt", TRUE },
  { "qmp-hostile-unknown.txt",   TRUE },
  { "qmp-hostile-greeting.txt",  TRUE },
  { "qmp-hostile-both.txt",      FALSE },
};

static void
test_hostile (gconstpointer data)
{
  const HostileCase *c = data;
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) status = NULL;

  fixture_start (&fx, c->transcript);
  g_assert_true (handshake (fx.client, &error));
  status = execute (fx.client, "query-status", 5000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_null (status);
  g_assert_cmpuint (fx.closed, ==, c->closes ? 1 : 0);
  fixture_finish (&fx, TRUE);
}

/* The real thing: QEMU without a guest, talking QMP on a unix socket. */

static void
qemu_child_setup (gpointer data)
{
  /* If this test dies, QEMU dies with it. */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static gboolean
on_tick (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static VdQmpClient *
connect_with_retries (const gchar *path, GSubprocess *qemu)
{
  for (guint i = 0; i < 200; i++) {
    TestWait w = { 0 };
    gboolean tick = FALSE;
    g_autoptr(GError) error = NULL;
    VdQmpClient *client;

    vd_qmp_client_connect_async (path, 5000, NULL, test_wait_cb, &w);
    test_run_until (&w.done);
    client = vd_qmp_client_connect_finish (w.result, &error);
    g_object_unref (w.result);
    if (client != NULL)
      return client;
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
    /* QEMU has not bound its socket yet. */
    g_timeout_add (50, on_tick, &tick);
    test_run_until (&tick);
  }
  g_assert_not_reached ();
}

static void
test_real_qemu (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("vd-qmp-XXXXXX", &error);
  g_autofree gchar *path = NULL;
  g_autofree gchar *qmp_arg = NULL;
  g_autofree gchar *qemu_path = g_find_program_in_path ("qemu-system-x86_64");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) qemu = NULL;
  g_autoptr(VdQmpClient) client = NULL;
  g_autoptr(JsonNode) version = NULL;
  g_autoptr(JsonNode) status = NULL;
  g_autoptr(JsonNode) missing = NULL;
  JsonObject *qemu_version;

  g_assert_no_error (error);
  /* A missing prerequisite is a failure, never a silent skip. */
  g_assert_nonnull (qemu_path);
  path = g_build_filename (dir, "qmp.sock", NULL);
  qmp_arg = g_strdup_printf ("unix:%s,server=on,wait=off", path);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_subprocess_launcher_set_child_setup (launcher, qemu_child_setup, NULL, NULL);
  qemu = g_subprocess_launcher_spawn (launcher, &error, qemu_path,
                                      "-M", "none", "-nodefaults", "-no-user-config",
                                      "-display", "none", "-qmp", qmp_arg, NULL);
  g_assert_no_error (error);

  client = connect_with_retries (path, qemu);
  version = execute (client, "query-version", 10000, &error);
  g_assert_no_error (error);
  qemu_version = json_object_get_object_member (json_node_get_object (version), "qemu");
  g_assert_nonnull (qemu_version);
  g_assert_cmpint (json_object_get_int_member (qemu_version, "major"), >=, 7);
  status = execute (client, "query-status", 10000, &error);
  g_assert_no_error (error);
  g_assert_nonnull (json_object_get_string_member (json_node_get_object (status), "status"));
  missing = execute (client, "vivarium-no-such-command", 10000, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST);
  g_clear_error (&error);

  vd_qmp_client_close (client);
  /* Stopped by its own PID, and reaped. */
  g_subprocess_force_exit (qemu);
  g_assert_true (g_subprocess_wait (qemu, NULL, &error));
  g_assert_no_error (error);
  g_unlink (path);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/qmp/normal", test_normal);
  g_test_add_func ("/qmp/before-handshake", test_before_handshake);
  g_test_add_func ("/qmp/block-io-error", test_block_io_error);
  g_test_add_func ("/qmp/stale-id", test_stale_id);
  g_test_add_func ("/qmp/oversize", test_oversize);
  g_test_add_func ("/qmp/oversize-line", test_oversize_line);
  g_test_add_func ("/qmp/timeout-then-next", test_timeout);
  g_test_add_func ("/qmp/cancel-then-next", test_cancel);
  g_test_add_func ("/qmp/disconnect-mid-reply", test_disconnect);
  g_test_add_func ("/qmp/malformed", test_malformed);
  g_test_add_func ("/qmp/error-shape", test_error_shape);
  for (gsize i = 0; i < G_N_ELEMENTS (hostile_cases); i++) {
    g_autofree gchar *name = g_strdup_printf ("/qmp/hostile/%s", hostile_cases[i].transcript);
    g_test_add_data_func (name, &hostile_cases[i], test_hostile);
  }
  g_test_add_func ("/qmp/real-qemu", test_real_qemu);
  return g_test_run ();
}
