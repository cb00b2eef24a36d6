/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>

#include "vivarium-egress-io.h"
#include "vivarium-egress-sshagent-filter.h"
#include "vivarium-egress-sshagent.h"
#include "vivarium-ssh-key.h"

/* How long the agent gets to make its socket, and ssh-add to load a key. */
#define AGENT_START_TIMEOUT_MS 5000
/* A guest connection may stay idle between requests this long (ssh keeps
 * its agent connection for the whole login). */
#define GUEST_IDLE_TIMEOUT_SEC 600
/* The agent answers within this, or the guest's connection ends. */
#define AGENT_REPLY_TIMEOUT_SEC 30
#define LOG_HOST "ssh-agent"
#define LOG_VIA "ssh-agent"

struct _VivariumEgressSshAgent {
  gchar     *socket_path;
  GPtrArray *names;         /* gchar*, for blobs[] */
  GPtrArray *fingerprints;  /* gchar* */
  GPtrArray *blobs;         /* GBytes* */
};

/* The agent must not outlive us: the kernel sends it SIGTERM when this
 * (main) thread ends, however the proxy ends. Debian's ssh-agent is
 * set-group-ID (_ssh), and exec'ing one clears PR_SET_PDEATHSIG: with
 * no_new_privs (as in the proxy's unit anyway) the bit is not honoured and
 * the death signal stays. The agent still makes itself undumpable. */
static void
agent_child_setup (gpointer user_data)
{
  pid_t parent = GPOINTER_TO_INT (user_data);

  prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl (PR_SET_PDEATHSIG, SIGTERM);
  /* We may have died before the prctl. */
  if (getppid () != parent)
    _exit (1);
}

static gboolean
wait_for_socket (const gchar *path, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + AGENT_START_TIMEOUT_MS * 1000;

  while (g_get_monotonic_time () < deadline) {
    g_autoptr(GSocketClient) client = g_socket_client_new ();
    g_autoptr(GSocketAddress) address = g_unix_socket_address_new (path);
    g_autoptr(GSocketConnection) conn = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (address), NULL, NULL);
    if (conn != NULL)
      return TRUE;
    g_usleep (20 * 1000);
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "ssh-agent did not open %s within %d ms", path,
               AGENT_START_TIMEOUT_MS);
  return FALSE;
}

static void
agent_exited_cb (GPid pid, gint status, gpointer user_data)
{
  g_warning ("ssh-agent (pid %d) ended: the guest's agent requests fail from now on", (int) pid);
  g_spawn_close_pid (pid);
}

/* DO_NOT_REAP_CHILD: the agent is our own child, not a grandchild GLib
 * hands to init, so that PR_SET_PDEATHSIG follows us and not the
 * intermediate process. */
static gboolean
spawn_agent (VivariumEgressSshAgent *agent, GError **error)
{
  const gchar *argv[] = { "ssh-agent", "-D", "-a", agent->socket_path, NULL };
  g_autoptr(GError) local = NULL;
  GPid pid;

  /* Its stdout only names the socket; its stderr goes to our journal. */
  if (!g_spawn_async (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL |
                        G_SPAWN_STDOUT_TO_DEV_NULL,
                      agent_child_setup, GINT_TO_POINTER (getpid ()), &pid, &local)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot start ssh-agent (openssh-client): %s", local->message);
    return FALSE;
  }
  /* Reaped by the main loop; its end said in the journal. */
  g_child_watch_add (pid, agent_exited_cb, NULL);
  return wait_for_socket (agent->socket_path, error);
}

static gboolean
add_key (VivariumEgressSshAgent *agent, const VivariumSshKey *key, GError **error)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE |
                                                                       G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                                                       G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GBytes) err = NULL;
  g_autoptr(GError) local = NULL;
  g_autofree gchar *why = NULL;

  g_subprocess_launcher_setenv (launcher, "SSH_AUTH_SOCK", agent->socket_path, TRUE);
  /* "-": the key on stdin, so the private key is never in a file here. */
  proc = g_subprocess_launcher_spawn (launcher, &local, "ssh-add", "-q", "-", NULL);
  if (proc == NULL || !g_subprocess_communicate (proc, key->private_key, NULL, NULL, &err, &local)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot run ssh-add (openssh-client) for the SSH key %s: %s",
                 key->name, local->message);
    return FALSE;
  }
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) != 0) {
    /* ssh-add's own words, short: they name the file "(stdin)", never the key. */
    why = g_strndup (g_bytes_get_data (err, NULL), MIN (g_bytes_get_size (err), 200));
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "ssh-add did not load the SSH key %s: %s", key->name,
                 g_strstrip (why));
    return FALSE;
  }
  return TRUE;
}

static GSocket *
connect_agent (VivariumEgressSshAgent *agent, GError **error)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
                                            error);
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (agent->socket_path);

  if (socket == NULL || !g_socket_connect (socket, address, NULL, error))
    return NULL;
  g_socket_set_timeout (socket, AGENT_REPLY_TIMEOUT_SEC);
  return g_steal_pointer (&socket);
}

static void
put_u32 (guint8 *p, guint32 v)
{
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

static guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] << 24 | (guint32) p[1] << 16 | (guint32) p[2] << 8 | p[3];
}

/* One message (length, then body) from @socket, bounded; NULL at EOF, on
 * a timeout or past the bound. */
static GBytes *
read_message (GSocket *socket, gint64 deadline, gboolean *oversized)
{
  guint8 header[4];
  guint32 len;
  g_autofree guint8 *body = NULL;

  *oversized = FALSE;
  if (!vivarium_egress_io_read_exact (socket, header, sizeof header, deadline))
    return NULL;
  len = get_u32 (header);
  if (len == 0 || len > VIVARIUM_SSH_AGENT_MAX_MESSAGE) {
    *oversized = TRUE;
    return NULL;
  }
  body = g_malloc (len);
  if (!vivarium_egress_io_read_exact (socket, body, len, deadline))
    return NULL;
  return g_bytes_new_take (g_steal_pointer (&body), len);
}

static gboolean
send_message (GSocket *socket, const guint8 *body, gsize len)
{
  guint8 header[4];

  put_u32 (header, (guint32) len);
  return vivarium_egress_io_send_all (socket, header, sizeof header) && vivarium_egress_io_send_all (socket, body, len);
}

/* A request to the agent and its answer; NULL when the agent failed us. */
static GBytes *
ask_agent (GSocket *agent_socket, GBytes *request)
{
  gsize len = 0;
  const guint8 *body = g_bytes_get_data (request, &len);
  gboolean oversized;

  if (!send_message (agent_socket, body, len))
    return NULL;
  return read_message (agent_socket, g_get_monotonic_time () + AGENT_REPLY_TIMEOUT_SEC * G_USEC_PER_SEC, &oversized);
}

/* The agent holds what we loaded and nothing else: its identities answer
 * counts exactly our keys. */
static gboolean
check_identities (VivariumEgressSshAgent *agent, GError **error)
{
  static const guint8 request[] = { VIVARIUM_SSH_AGENTC_REQUEST_IDENTITIES };
  g_autoptr(GBytes) req = g_bytes_new_static (request, sizeof request);
  g_autoptr(GSocket) socket = connect_agent (agent, error);
  g_autoptr(GBytes) answer = NULL;
  const guint8 *data;
  gsize len = 0;

  if (socket == NULL)
    return FALSE;
  answer = ask_agent (socket, req);
  data = answer != NULL ? g_bytes_get_data (answer, &len) : NULL;
  if (data == NULL || len < 5 || data[0] != VIVARIUM_SSH_AGENT_IDENTITIES_ANSWER ||
      get_u32 (data + 1) != agent->blobs->len) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "ssh-agent does not list the %u SSH keys it was given",
                 agent->blobs->len);
    return FALSE;
  }
  return TRUE;
}

static GPtrArray *
load_keys (const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) keys = vivarium_ssh_keys_load (path, &local);

  /* Whatever it held, it does not stay on disk. */
  if (g_unlink (path) != 0 && errno != ENOENT) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot remove the SSH keys file %s: %s", path,
                 g_strerror (errno));
    return NULL;
  }
  if (keys == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the SSH keys file does not load: %s", local->message);
    return NULL;
  }
  if (keys->len == 0 || keys->len > VIVARIUM_SSH_KEY_MAX_PER_SESSION) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the SSH keys file %s holds %u keys (1 to %u)", path,
                 keys->len, VIVARIUM_SSH_KEY_MAX_PER_SESSION);
    return NULL;
  }
  return g_steal_pointer (&keys);
}

static gboolean
make_agent_dir (const gchar *dir, GError **error)
{
  if (g_mkdir (dir, 0700) != 0 && errno != EEXIST) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot make %s: %s", dir, g_strerror (errno));
    return FALSE;
  }
  /* Ours alone, whatever was there: the agent's socket is in it. */
  if (chmod (dir, 0700) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot close %s: %s", dir, g_strerror (errno));
    return FALSE;
  }
  return TRUE;
}

VivariumEgressSshAgent *
vivarium_egress_ssh_agent_start (const gchar *dir, const gchar *keys_path, GError **error)
{
  g_autoptr(GPtrArray) keys = load_keys (keys_path, error);
  g_autofree gchar *agent_dir = g_build_filename (dir, ".agent", NULL);
  VivariumEgressSshAgent *agent;

  if (keys == NULL || !make_agent_dir (agent_dir, error))
    return NULL;
  agent = g_new0 (VivariumEgressSshAgent, 1);
  agent->socket_path = g_build_filename (agent_dir, "agent.sock", NULL);
  agent->names = g_ptr_array_new_with_free_func (g_free);
  agent->fingerprints = g_ptr_array_new_with_free_func (g_free);
  agent->blobs = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  /* Started once for the process's life: never freed. */
  if (!spawn_agent (agent, error))
    return NULL;
  for (guint i = 0; i < keys->len; i++) {
    const VivariumSshKey *key = keys->pdata[i];
    if (!add_key (agent, key, error))
      return NULL;
    g_ptr_array_add (agent->names, g_strdup (key->name));
    g_ptr_array_add (agent->fingerprints, g_strdup (key->fingerprint));
    g_ptr_array_add (agent->blobs, vivarium_ssh_key_public_blob (key->public_key));
  }
  if (!check_identities (agent, error))
    return NULL;
  g_message ("ssh-agent: serving %u SSH keys", agent->blobs->len);
  return agent;
}

static void
record (VivariumEgressLog *log, gboolean allowed, const gchar *reason)
{
  VivariumEgressDecision d = { .host = LOG_HOST, .port = VIVARIUM_SSH_AGENT_PORT, .via = LOG_VIA,
                               .allowed = allowed, .reason = reason };

  vivarium_egress_log_record (log, &d);
}

static const guint8 failure[] = { VIVARIUM_SSH_AGENT_FAILURE };

static gboolean
refuse (GSocket *socket, VivariumEgressLog *log, const gchar *why)
{
  g_autofree gchar *reason = g_strdup_printf ("ssh-agent refused %s", why);

  record (log, FALSE, reason);
  return send_message (socket, failure, sizeof failure);
}

/* Relays @request to the agent and its answer back; the agent's socket is
 * opened on the first request that passes. */
static gboolean
relay (VivariumEgressSshAgent *agent, GSocket **agent_socket, GSocket *socket, GBytes *request, GBytes **answer)
{
  gsize len = 0;
  const guint8 *data;

  if (*agent_socket == NULL)
    *agent_socket = connect_agent (agent, NULL);
  if (*agent_socket == NULL)
    return FALSE;
  *answer = ask_agent (*agent_socket, request);
  if (*answer == NULL)
    return FALSE;
  data = g_bytes_get_data (*answer, &len);
  return send_message (socket, data, len);
}

static gboolean
serve_one (VivariumEgressSshAgent *agent, VivariumEgressLog *log, GSocket *socket, GSocket **agent_socket,
           GBytes *request)
{
  gsize len = 0;
  const guint8 *body = g_bytes_get_data (request, &len);
  g_autoptr(GBytes) answer = NULL;
  g_autofree gchar *reason = NULL;
  const gchar *why = NULL;
  guint key = 0;
  VivariumSshAgentVerdict verdict = vivarium_ssh_agent_filter (body, len, agent->blobs, &key, &why);
  gboolean signed_it;

  if (verdict == VIVARIUM_SSH_AGENT_REFUSE)
    return refuse (socket, log, why);
  if (!relay (agent, agent_socket, socket, request, &answer))
    return FALSE;
  if (verdict != VIVARIUM_SSH_AGENT_RELAY_SIGN)
    return TRUE;
  signed_it = ((const guint8 *) g_bytes_get_data (answer, NULL))[0] == VIVARIUM_SSH_AGENT_SIGN_RESPONSE;
  reason = g_strdup_printf ("%s ssh key %s (%s)", signed_it ? "signed with" : "the agent did not sign with",
                            (const gchar *) agent->names->pdata[key], (const gchar *) agent->fingerprints->pdata[key]);
  record (log, signed_it, reason);
  return TRUE;
}

void
vivarium_egress_ssh_agent_serve (VivariumEgressSshAgent *agent, VivariumEgressLog *log, GSocket *socket)
{
  g_autoptr(GSocket) agent_socket = NULL;

  g_socket_set_timeout (socket, AGENT_REPLY_TIMEOUT_SEC);
  for (;;) {
    gint64 deadline = g_get_monotonic_time () + GUEST_IDLE_TIMEOUT_SEC * G_USEC_PER_SEC;
    gboolean oversized;
    g_autoptr(GBytes) request = read_message (socket, deadline, &oversized);

    if (request == NULL) {
      if (oversized)
        record (log, FALSE, "ssh-agent refused a message of 0 or over 262144 bytes and closed the connection");
      return;
    }
    if (!serve_one (agent, log, socket, &agent_socket, request))
      return;
  }
}
