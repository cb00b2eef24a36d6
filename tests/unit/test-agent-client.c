/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-agent-client"

#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-agent-client.h"
#include "fake-peer.h"

typedef struct {
  FakePeer      *peer;
  VdAgentClient *client;
  guint          closed;
} Fixture;

static void
on_closed (VdAgentClient *client, gpointer user_data)
{
  Fixture *fx = user_data;
  fx->closed++;
}

static void
fixture_start (Fixture *fx, const gchar *transcript)
{
  g_autoptr(GIOStream) stream = NULL;

  fx->peer = fake_peer_new (transcript, &stream);
  fx->client = vd_agent_client_new_for_stream (stream);
  g_signal_connect (fx->client, "closed", G_CALLBACK (on_closed), fx);
}

static void
fixture_finish (Fixture *fx, gboolean complete)
{
  vd_agent_client_close (fx->client);
  g_clear_object (&fx->client);
  test_run_until_peer (fx->peer);
  fake_peer_finish (fx->peer, complete);
}

static void
exec_start (VdAgentClient *client, const gchar * const *argv, const gchar * const *env,
            guint timeout_ms, gsize cap, TestWait *w)
{
  vd_agent_client_exec_async (client, argv, env, NULL, timeout_ms, cap, NULL, test_wait_cb, w);
}

static VdAgentExecResult *
exec_end (VdAgentClient *client, TestWait *w, GError **error)
{
  VdAgentExecResult *r;

  test_run_until (&w->done);
  r = vd_agent_client_exec_finish (client, w->result, NULL, error);
  g_clear_object (&w->result);
  w->done = FALSE;
  return r;
}

static VdAgentExecResult *
exec (VdAgentClient *client, const gchar * const *argv, const gchar * const *env,
      guint timeout_ms, gsize cap, GError **error)
{
  TestWait w = { 0 };

  exec_start (client, argv, env, timeout_ms, cap, &w);
  return exec_end (client, &w, error);
}

static GBytes *
read_file (VdAgentClient *client, const gchar *path, gsize max_size, GError **error)
{
  TestWait w = { 0 };
  GBytes *data;

  vd_agent_client_read_file_async (client, path, max_size, 5000, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  data = vd_agent_client_read_file_finish (client, w.result, error);
  g_object_unref (w.result);
  return data;
}

static gboolean
write_file (VdAgentClient *client, const gchar *path, const gchar *text, GError **error)
{
  TestWait w = { 0 };
  g_autoptr(GBytes) data = g_bytes_new (text, strlen (text));
  gboolean ok;

  vd_agent_client_write_file_async (client, path, data, 5000, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  ok = vd_agent_client_write_file_finish (client, w.result, error);
  g_object_unref (w.result);
  return ok;
}

static void
assert_bytes (GBytes *bytes, const gchar *text)
{
  gsize len = 0;
  const gchar *data = g_bytes_get_data (bytes, &len);

  g_assert_cmpmem (data, len, text, strlen (text));
}

static void
sync_now (VdAgentClient *client, GError **error)
{
  TestWait w = { 0 };

  vd_agent_client_sync_async (client, 5000, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  vd_agent_client_sync_finish (client, w.result, error);
  g_object_unref (w.result);
}

static const gchar *true_argv[] = { "/bin/true", NULL };

static void
test_normal (void)
{
  Fixture fx = { 0 };
  const gchar *argv[] = { "/bin/sh", "-c", "echo hi; echo err >&2; exit 3", NULL };
  const gchar *env[] = { "LANG=C", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  g_autoptr(GBytes) hostname = NULL;
  g_autoptr(GBytes) missing = NULL;

  fixture_start (&fx, "agent-normal.txt");
  r = exec (fx.client, argv, env, 5000, VIVARIUM_OUTPUT_CAP, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_status, ==, 3);
  g_assert_false (r->signaled);
  assert_bytes (r->out, "hi\n");
  assert_bytes (r->err, "err\n");
  g_assert_false (r->out_truncated);
  g_assert_false (r->err_truncated);

  hostname = read_file (fx.client, "/etc/hostname", 100, &error);
  g_assert_no_error (error);
  assert_bytes (hostname, "vm\n");
  g_assert_true (write_file (fx.client, "/tmp/x", "hello", &error));
  g_assert_no_error (error);
  missing = read_file (fx.client, "/nonexistent", 100, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST);
  g_assert_null (missing);
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_garbage_before_sync (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) hostname = NULL;

  fixture_start (&fx, "agent-garbage-before-sync.txt");
  hostname = read_file (fx.client, "/etc/hostname", 100, &error);
  g_assert_no_error (error);
  assert_bytes (hostname, "vm\n");
  fixture_finish (&fx, TRUE);
}

static void
test_timeout_resync (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) late = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;

  fixture_start (&fx, "agent-timeout-resync.txt");
  /* Synchronised first, so that the short timeout can only hit the exec. */
  sync_now (fx.client, &error);
  g_assert_no_error (error);
  late = exec (fx.client, true_argv, NULL, 150, 1024, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_assert_null (late);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);
  r = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_status, ==, 0);
  fixture_finish (&fx, TRUE);
}

/* Issue 7, defect 5: a timed-out exec leaves its pid, and the command is
 * waited for afterwards; its real end is what gets recorded. */
static void
test_timeout_then_wait (void)
{
  Fixture fx = { 0 };
  const gchar *argv[] = { "/bin/sleep", "5", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) late = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  TestWait w = { 0 };
  gint64 pid = 0;

  fixture_start (&fx, "agent-timeout-then-wait.txt");
  sync_now (fx.client, &error);
  g_assert_no_error (error);
  vd_agent_client_exec_async (fx.client, argv, NULL, NULL, 300, 1024, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  late = vd_agent_client_exec_finish (fx.client, w.result, &pid, &error);
  g_clear_object (&w.result);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_assert_null (late);
  g_assert_cmpint (pid, ==, 7);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);

  w.done = FALSE;
  vd_agent_client_exec_wait_async (fx.client, pid, 20000, 1024, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  r = vd_agent_client_exec_wait_finish (fx.client, w.result, &error);
  g_clear_object (&w.result);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_status, ==, 5);
  assert_bytes (r->out, "hi\n");
  fixture_finish (&fx, TRUE);
}

/* A guest that never confirmed the start leaves no pid to wait for. */
static void
test_timeout_before_pid (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  TestWait w = { 0 };
  gint64 pid = 0;

  fixture_start (&fx, "agent-timeout-resync.txt");
  sync_now (fx.client, &error);
  g_assert_no_error (error);
  vd_agent_client_exec_async (fx.client, true_argv, NULL, NULL, 150, 1024, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  r = vd_agent_client_exec_finish (fx.client, w.result, &pid, &error);
  g_clear_object (&w.result);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_assert_cmpint (pid, ==, -1);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);
  g_clear_pointer (&r, vd_agent_exec_result_free);
  r = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_no_error (error);
  fixture_finish (&fx, TRUE);
}

/* Issue 7, defect 1: 256 items and a cwd were refused as "261 items"; the
 * limit is the caller's, and the wrapper goes out as the guest's argv. */
static void
test_cwd_full_argv (void)
{
  Fixture fx = { 0 };
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) argv = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  TestWait w = { 0 };

  g_strv_builder_add (b, "/bin/echo");
  for (guint i = 1; i < VIVARIUM_ARGV_MAX; i++)
    g_strv_builder_add (b, "x");
  argv = g_strv_builder_end (b);
  fixture_start (&fx, "agent-exec-cwd.txt");
  vd_agent_client_exec_async (fx.client, (const gchar * const *) argv, NULL, "/root", 5000, 1024, NULL,
                              test_wait_cb, &w);
  test_run_until (&w.done);
  r = vd_agent_client_exec_finish (fx.client, w.result, NULL, &error);
  g_clear_object (&w.result);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_status, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_cancel_resync (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(VdAgentExecResult) cancelled = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  TestWait w = { 0 };

  /* Same exchange as a timeout: the late reply must be skipped. */
  fixture_start (&fx, "agent-timeout-resync.txt");
  sync_now (fx.client, &error);
  g_assert_no_error (error);
  vd_agent_client_exec_async (fx.client, true_argv, NULL, NULL, 5000, 1024, cancellable, test_wait_cb, &w);
  g_cancellable_cancel (cancellable);
  cancelled = exec_end (fx.client, &w, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
  g_clear_error (&error);
  fake_peer_resume (fx.peer);
  r = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->exit_status, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_disconnect (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;
  TestWait w1 = { 0 };
  TestWait w2 = { 0 };

  fixture_start (&fx, "agent-disconnect.txt");
  exec_start (fx.client, true_argv, NULL, 5000, 1024, &w1);
  /* Queued behind the exec: it must fail too, not hang. */
  vd_agent_client_sync_async (fx.client, 5000, NULL, test_wait_cb, &w2);
  r = exec_end (fx.client, &w1, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_clear_error (&error);
  test_run_until (&w2.done);
  g_assert_false (vd_agent_client_sync_finish (fx.client, w2.result, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_object_unref (w2.result);
  g_assert_cmpuint (fx.closed, ==, 1);
  g_assert_true (vd_agent_client_is_closed (fx.client));
  fixture_finish (&fx, TRUE);
  g_assert_cmpuint (fx.closed, ==, 1);
}

static void
test_oversize (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;

  fixture_start (&fx, "agent-oversize.txt");
  vd_agent_client_set_max_response_size (fx.client, 4096);
  r = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_cmpuint (fx.closed, ==, 1);
  fixture_finish (&fx, FALSE);
}

static void
test_malformed (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) bad = NULL;
  g_autoptr(VdAgentExecResult) good = NULL;

  fixture_start (&fx, "agent-malformed.txt");
  bad = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_clear_error (&error);
  good = exec (fx.client, true_argv, NULL, 5000, 1024, &error);
  g_assert_no_error (error);
  g_assert_cmpint (good->exit_status, ==, 0);
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

typedef struct {
  const gchar *transcript;
  gint         error_code;     /* -1: success */
  gsize        cap;
  gint         exit_status;
  gboolean     signaled;
  const gchar *out;
  gboolean     out_truncated;
  const gchar *err;
  gboolean     err_truncated;
} StatusCase;

static const StatusCase status_cases[] = {
  { "agent-status-b64-garbage.txt",      VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-b64-bad-padding.txt",  VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-code-string.txt",      VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-code-huge.txt",        VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-code-2pow40.txt",      VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-code-float.txt",       VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-code-and-signal.txt",  VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-exited-string.txt",    VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-not-object.txt",       VIVARIUM_ERROR_PROTOCOL },
  { "agent-status-guest-error.txt",      VIVARIUM_ERROR_GUEST },
  /* A Windows NTSTATUS keeps its bit pattern. */
  { "agent-status-ntstatus.txt",         -1, 1024, (gint) 0xC0000005u, FALSE, "", FALSE, "", FALSE },
  { "agent-status-signal.txt",           -1, 1024, 9, TRUE, "", FALSE, "", FALSE },
  { "agent-status-no-code.txt",          -1, 1024, -1, FALSE, "", FALSE, "", FALSE },
  /* out: the guest says it cut; err: we cut at the cap. */
  { "agent-status-truncated.txt",        -1, 4, 0, FALSE, "hi\n", TRUE, "0123", TRUE },
  { "agent-status-truncated.txt",        -1, 1024, 0, FALSE, "hi\n", TRUE, "0123456789", FALSE },
};

static void
test_status (gconstpointer data)
{
  const StatusCase *c = data;
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = NULL;

  fixture_start (&fx, c->transcript);
  r = exec (fx.client, true_argv, NULL, 5000, c->cap, &error);
  if (c->error_code >= 0) {
    g_assert_error (error, VIVARIUM_ERROR, c->error_code);
    g_assert_null (r);
    /* Escaped: no terminal control byte from the guest gets through. */
    g_assert_null (strchr (error->message, '\x1b'));
  } else {
    g_assert_no_error (error);
    g_assert_cmpint (r->exit_status, ==, c->exit_status);
    g_assert_cmpint (r->signaled, ==, c->signaled);
    assert_bytes (r->out, c->out);
    assert_bytes (r->err, c->err);
    g_assert_cmpint (r->out_truncated, ==, c->out_truncated);
    g_assert_cmpint (r->err_truncated, ==, c->err_truncated);
  }
  g_assert_cmpuint (fx.closed, ==, 0);
  fixture_finish (&fx, TRUE);
}

static void
test_read_too_large (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) data = NULL;

  fixture_start (&fx, "agent-read-too-large.txt");
  data = read_file (fx.client, "/var/log/big", 10, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE);
  g_assert_null (data);
  fixture_finish (&fx, TRUE);
}

static void
test_read_lying_count (void)
{
  Fixture fx = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) data = NULL;

  fixture_start (&fx, "agent-read-lying-count.txt");
  data = read_file (fx.client, "/etc/hostname", 10, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
  g_assert_null (data);
  fixture_finish (&fx, TRUE);
}

static void
test_invalid_arguments (void)
{
  Fixture fx = { 0 };
  const gchar *empty[] = { NULL };
  const gchar *bad_env[] = { "NOEQUALS", NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r1 = NULL;
  g_autoptr(VdAgentExecResult) r2 = NULL;
  g_autoptr(GBytes) data = NULL;

  fixture_start (&fx, "agent-idle.txt");
  r1 = exec (fx.client, empty, NULL, 5000, 1024, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  r2 = exec (fx.client, true_argv, bad_env, 5000, 1024, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  data = read_file (fx.client, "relative/path", 10, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  /* Nothing at all went to the peer. */
  fixture_finish (&fx, TRUE);
}

static VdAgentClient *
wait_ready (const gchar *path, guint timeout_ms, GError **error)
{
  TestWait w = { 0 };
  VdAgentClient *client;

  vd_agent_client_wait_ready_async (path, timeout_ms, NULL, test_wait_cb, &w);
  test_run_until (&w.done);
  client = vd_agent_client_wait_ready_finish (w.result, error);
  g_object_unref (w.result);
  return client;
}

static void
test_wait_ready (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("vd-agent-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "agent.sock", NULL);
  g_autoptr(VdAgentClient) client = NULL;
  FakePeer *peer;

  /* No socket for a while, then one that ignores the first sync. */
  peer = fake_peer_new_listen ("agent-wait-ready.txt", path, 300);
  client = wait_ready (path, 20000, &error);
  g_assert_no_error (error);
  g_assert_nonnull (client);
  vd_agent_client_close (client);
  test_run_until_peer (peer);
  fake_peer_finish (peer, TRUE);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

static void
test_wait_ready_timeout (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("vd-agent-XXXXXX", &error);
  g_autofree gchar *path = g_build_filename (dir, "never.sock", NULL);
  g_autoptr(VdAgentClient) client = NULL;

  client = wait_ready (path, 300, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_assert_null (client);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

/* The real agent, run on the host over a unix socket: the commands are
 * harmless and stay inside the test's own temporary directory. */

static void
child_setup (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* qemu-ga leaves state files of its own in its state directory. */
static void
remove_dir (const gchar *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const gchar *name;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL) {
    g_autofree gchar *path = g_build_filename (dir, name, NULL);
    g_assert_cmpint (g_unlink (path), ==, 0);
  }
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

static void
test_real_agent (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *qga = g_find_program_in_path ("qemu-ga");
  g_autofree gchar *dir = g_dir_make_tmp ("vd-qga-XXXXXX", &error);
  g_autofree gchar *sock = g_build_filename (dir, "qga.sock", NULL);
  g_autofree gchar *pidfile = g_build_filename (dir, "qga.pid", NULL);
  g_autofree gchar *file = g_build_filename (dir, "data.txt", NULL);
  const gchar *script = "printf out; printf err >&2; kill -9 $$";
  const gchar *argv_exit[] = { "/bin/sh", "-c", "echo \"$GREETING\"; exit 7", NULL };
  const gchar *argv_kill[] = { "/bin/sh", "-c", script, NULL };
  const gchar *env[] = { "GREETING=hello from the agent", NULL };
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) agent = NULL;
  g_autoptr(VdAgentClient) client = NULL;
  g_autoptr(VdAgentExecResult) r1 = NULL;
  g_autoptr(VdAgentExecResult) r2 = NULL;
  g_autoptr(GBytes) back = NULL;
  g_autoptr(GBytes) too_big = NULL;

  g_assert_no_error (error);
  /* A missing prerequisite is a failure, never a silent skip. */
  g_assert_nonnull (qga);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_subprocess_launcher_set_child_setup (launcher, child_setup, NULL, NULL);
  agent = g_subprocess_launcher_spawn (launcher, &error, qga, "-m", "unix-listen", "-p", sock,
                                       "-t", dir, "-f", pidfile, NULL);
  g_assert_no_error (error);

  client = wait_ready (sock, 20000, &error);
  g_assert_no_error (error);

  r1 = exec (client, argv_exit, env, 20000, VIVARIUM_OUTPUT_CAP, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r1->exit_status, ==, 7);
  g_assert_false (r1->signaled);
  assert_bytes (r1->out, "hello from the agent\n");

  r2 = exec (client, argv_kill, NULL, 20000, VIVARIUM_OUTPUT_CAP, &error);
  g_assert_no_error (error);
  g_assert_true (r2->signaled);
  g_assert_cmpint (r2->exit_status, ==, 9);
  assert_bytes (r2->out, "out");
  assert_bytes (r2->err, "err");

  g_assert_true (write_file (client, file, "written through the agent\n", &error));
  g_assert_no_error (error);
  back = read_file (client, file, 1024, &error);
  g_assert_no_error (error);
  assert_bytes (back, "written through the agent\n");
  too_big = read_file (client, file, 5, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE);
  g_clear_error (&error);

  vd_agent_client_close (client);
  g_subprocess_force_exit (agent);
  g_assert_true (g_subprocess_wait (agent, NULL, &error));
  g_assert_no_error (error);
  remove_dir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/agent/normal", test_normal);
  g_test_add_func ("/agent/garbage-before-sync", test_garbage_before_sync);
  g_test_add_func ("/agent/timeout-then-resync", test_timeout_resync);
  g_test_add_func ("/agent/cancel-then-resync", test_cancel_resync);
  g_test_add_func ("/agent/timeout-then-wait", test_timeout_then_wait);
  g_test_add_func ("/agent/timeout-before-pid", test_timeout_before_pid);
  g_test_add_func ("/agent/cwd-full-argv", test_cwd_full_argv);
  g_test_add_func ("/agent/disconnect-mid-reply", test_disconnect);
  g_test_add_func ("/agent/oversize", test_oversize);
  g_test_add_func ("/agent/malformed", test_malformed);
  g_test_add_func ("/agent/read-too-large", test_read_too_large);
  g_test_add_func ("/agent/read-lying-count", test_read_lying_count);
  g_test_add_func ("/agent/invalid-arguments", test_invalid_arguments);
  g_test_add_func ("/agent/wait-ready", test_wait_ready);
  g_test_add_func ("/agent/wait-ready-timeout", test_wait_ready_timeout);
  for (gsize i = 0; i < G_N_ELEMENTS (status_cases); i++) {
    g_autofree gchar *name = g_strdup_printf ("/agent/status/%" G_GSIZE_FORMAT "-%s", i,
                                              status_cases[i].transcript);
    g_test_add_data_func (name, &status_cases[i], test_status);
  }
  g_test_add_func ("/agent/real-qemu-ga", test_real_agent);
  return g_test_run ();
}
