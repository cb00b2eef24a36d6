/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"

/* vivarium-egress: one session's way out in `allowlist` mode
 * (docs/egress.md). The guest's user-mode network itself (net.sock, QEMU's
 * stream netdev: vivarium-egress-net.c), whose only forwards lead into four
 * unix sockets in --dir: an explicit HTTP proxy, transparent HTTP and TLS,
 * and a DNS that answers only allowed names. Every peer must be the session's uid; every destination a name the
 * policy allows, resolved here, its addresses outside the guard's deny list;
 * every decision logged, every byte counted. Each connection runs on a
 * thread of its own (at most MAX_CONNECTIONS); the main loop only accepts. */

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <systemd/sd-daemon.h>

#include "vivarium-egress-context.h"
#include "vivarium-egress-dnsd.h"
#include "vivarium-egress-net.h"
#include "vivarium-egress-secrets.h"
#include "vivarium-egress-sshagent.h"
#include "vivarium-ssh-key.h"
#include "vivarium-egress-stream.h"

/* Connections served at once; one more is closed at once (and said in the
 * journal), so a guest cannot queue up threads. */
#define MAX_CONNECTIONS 64
/* Connections waiting to be accepted (GLib's default is 10). */
#define LISTEN_BACKLOG 128
/* The sockets are the guest's doors: any local process may connect, the
 * peer's uid is checked on each connection instead. */
#define SOCKET_MODE 0666
/* Seconds systemd gets to take the STATUS= of a refused start. */
#define STATUS_BARRIER_SEC 5

typedef enum {
  DOOR_PROXY,
  DOOR_HTTP,
  DOOR_TLS,
  DOOR_DNS,
  DOOR_SSH_AGENT,   /* last: opened only with --ssh-keys */
  N_DOORS,
} Door;

static const gchar *const door_names[N_DOORS] = { "proxy.sock", "http.sock", "tls.sock", "dns.sock",
                                                    VIVARIUM_EGRESS_SSH_AGENT_DOOR };
/* Where each door is in the guest, at --guest-address. */
static const guint16 door_ports[N_DOORS] = { VIVARIUM_EGRESS_PROXY_PORT, 80, 443, 53,
                                              VIVARIUM_SSH_AGENT_PORT };

typedef struct {
  gchar   *dir;
  gchar   *policy;
  gchar   *deny;
  gint64   peer_uid;
  gchar   *guest_address;
  gint64   limit_up;
  gint64   limit_down;
  gint64   log_max_entries;
  gchar   *secrets;
  gchar   *upstream_ca;
  gchar   *ssh_keys;
  gint     net_fd;
} Options;

typedef struct {
  GSocketConnection *conn;
  Door               door;
} Job;

static VivariumEgressContext ctx;
static uid_t peer_uid;
static gint active;   /* atomic */
static VivariumEgressSshAgent *ssh_agent;   /* NULL without --ssh-keys */

static void
run_job (gpointer data, gpointer user_data)
{
  Job *job = data;
  GSocket *socket = g_socket_connection_get_socket (job->conn);

  if (job->door == DOOR_DNS)
    vivarium_egress_serve_dns (&ctx, socket);
  else if (job->door == DOOR_SSH_AGENT)
    vivarium_egress_ssh_agent_serve (ssh_agent, ctx.log, socket);
  else
    vivarium_egress_serve_stream (&ctx, socket, (VivariumEgressVia) job->door);
  g_io_stream_close (G_IO_STREAM (job->conn), NULL, NULL);
  g_object_unref (job->conn);
  g_free (job);
  g_atomic_int_dec_and_test (&active);
}

/* SO_PEERCRED: who connected, as the kernel says. The guest's network in
 * this process connects as the proxy's own uid. */
static gboolean
peer_allowed (GSocket *socket, uid_t *uid)
{
  g_autoptr(GCredentials) creds = g_socket_get_credentials (socket, NULL);

  *uid = creds != NULL ? g_credentials_get_unix_user (creds, NULL) : (uid_t) -1;
  return creds != NULL && (*uid == peer_uid || *uid == geteuid ());
}

static gboolean
incoming_cb (GSocketService *service, GSocketConnection *conn, GObject *source, gpointer user_data)
{
  GThreadPool *pool = user_data;
  Door door = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (service), "door"));
  uid_t uid;
  Job *job;

  if (!peer_allowed (g_socket_connection_get_socket (conn), &uid)) {
    g_warning ("%s: refused a connection from uid %d (only uid %u may connect)", door_names[door], (int) uid,
               (guint) peer_uid);
    g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
    return TRUE;
  }
  if (g_atomic_int_add (&active, 1) >= MAX_CONNECTIONS) {
    g_atomic_int_dec_and_test (&active);
    g_warning ("%s: refused a connection: %d are open already", door_names[door], MAX_CONNECTIONS);
    g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
    return TRUE;
  }
  job = g_new0 (Job, 1);
  job->conn = g_object_ref (conn);
  job->door = door;
  g_thread_pool_push (pool, job, NULL);
  return TRUE;
}

static GSocketService *
open_door (const gchar *dir, Door door, GThreadPool *pool, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, door_names[door], NULL);
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
                                            error);
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (path);
  g_autoptr(GSocketService) service = NULL;

  if (socket == NULL || !g_socket_bind (socket, address, FALSE, error))
    return NULL;
  if (chmod (path, SOCKET_MODE) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot open %s to the guest: %s", path,
                 g_strerror (errno));
    return NULL;
  }
  /* Room for a burst of the guest's connections while the loop accepts. */
  g_socket_set_listen_backlog (socket, LISTEN_BACKLOG);
  if (!g_socket_listen (socket, error))
    return NULL;
  service = g_socket_service_new ();
  if (!g_socket_listener_add_socket (G_SOCKET_LISTENER (service), socket, NULL, error))
    return NULL;
  g_object_set_data (G_OBJECT (service), "door", GUINT_TO_POINTER (door));
  g_signal_connect (service, "incoming", G_CALLBACK (incoming_cb), pool);
  return g_steal_pointer (&service);
}

static gboolean
check_options (Options *o, GError **error)
{
  if (o->dir == NULL || o->policy == NULL || o->deny == NULL || o->peer_uid < 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "--dir, --policy, --deny and --peer-uid are required");
    return FALSE;
  }
  if (o->peer_uid > G_MAXUINT32 - 1 || o->limit_up < 0 || o->limit_down < 0 || o->log_max_entries < 1 ||
      o->log_max_entries > G_MAXINT32) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "--peer-uid, --limit-up, --limit-down or --log-max-entries is out of range");
    return FALSE;
  }
  ctx.guest_address = g_inet_address_new_from_string (o->guest_address);
  if (ctx.guest_address == NULL || g_inet_address_get_family (ctx.guest_address) != G_SOCKET_FAMILY_IPV4) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "--guest-address %s is not an IPv4 address",
                 o->guest_address);
    return FALSE;
  }
  if (o->net_fd != -1 && o->net_fd < 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "--net-fd %d is not a descriptor", o->net_fd);
    return FALSE;
  }
  peer_uid = (uid_t) o->peer_uid;
  return TRUE;
}

static gboolean
parse_options (int *argc, char ***argv, Options *o, GError **error)
{
  GOptionEntry entries[] = {
    { "dir", 0, 0, G_OPTION_ARG_FILENAME, &o->dir, "The session's egress directory", "DIR" },
    { "policy", 0, 0, G_OPTION_ARG_FILENAME, &o->policy, "The policy, as vivarium_egress_policy_save() wrote it", "FILE" },
    { "deny", 0, 0, G_OPTION_ARG_FILENAME, &o->deny, "The guard's deny list, one CIDR a line", "FILE" },
    { "peer-uid", 0, 0, G_OPTION_ARG_INT64, &o->peer_uid, "The only uid that may connect", "UID" },
    { "guest-address", 0, 0, G_OPTION_ARG_STRING, &o->guest_address, "The proxy's address in the guest", "ADDRESS" },
    { "limit-up", 0, 0, G_OPTION_ARG_INT64, &o->limit_up, "Bytes the session may send (0: no limit)", "BYTES" },
    { "limit-down", 0, 0, G_OPTION_ARG_INT64, &o->limit_down, "Bytes the session may receive (0: no limit)", "BYTES" },
    { "log-max-entries", 0, 0, G_OPTION_ARG_INT64, &o->log_max_entries, "Lines in the decision log at most", "N" },
    { "secrets", 0, 0, G_OPTION_ARG_FILENAME, &o->secrets, "The session's secrets (removed once read)", "FILE" },
    { "upstream-ca", 0, 0, G_OPTION_ARG_FILENAME, &o->upstream_ca, "Trusted CAs for intercepted hosts", "FILE" },
    { "ssh-keys", 0, 0, G_OPTION_ARG_FILENAME, &o->ssh_keys, "The session's SSH keys (removed once read)", "FILE" },
    { "net-fd", 0, 0, G_OPTION_ARG_INT, &o->net_fd, "net.sock, made and listening already (else it is made in --dir)", "FD" },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- a session's egress proxy");

  g_option_context_add_main_entries (context, entries, NULL);
  return g_option_context_parse (context, argc, argv, error) && check_options (o, error);
}

static gboolean
load (Options *o, GError **error)
{
  g_mutex_init (&ctx.policy_lock);
  /* First: whatever else fails, the secrets file does not stay on disk. */
  if (!vivarium_egress_load_secrets (&ctx, o->dir, o->secrets, o->upstream_ca, error))
    return FALSE;
  ctx.policy = vivarium_egress_policy_load (o->policy, error);
  if (ctx.policy == NULL)
    return FALSE;
  ctx.deny = vivarium_egress_deny_load (o->deny, error);
  if (ctx.deny == NULL)
    return FALSE;
  ctx.budget = vivarium_egress_budget_new ((guint64) o->limit_up, (guint64) o->limit_down);
  ctx.log = vivarium_egress_log_new (o->dir, (guint) o->log_max_entries, ctx.budget, error);
  if (ctx.log == NULL)
    return FALSE;
  if (o->ssh_keys != NULL)
    ssh_agent = vivarium_egress_ssh_agent_start (o->dir, o->ssh_keys, error);
  return o->ssh_keys == NULL || ssh_agent != NULL;
}

/* The agent's door only when there is an agent. */
static guint
n_doors (void)
{
  return ssh_agent != NULL ? N_DOORS : DOOR_SSH_AGENT;
}

static gboolean
start_net (Options *o, GError **error)
{
  VivariumEgressNetConfig net = { .dir = o->dir, .listen_fd = o->net_fd, .peer_uid = peer_uid,
                                  .guest_address = o->guest_address,
                                  .doors = door_names, .ports = door_ports, .n_doors = n_doors () };

  return vivarium_egress_net_start (&net, error);
}

/* Like the gateway: the reason in the journal and in StatusText=, which
 * systemd keeps while the unit stays failed, for the daemon to quote. */
static int
refuse_to_start (const gchar *why)
{
  g_printerr ("vivarium-egress: %s\n", why);
  sd_notifyf (0, "STATUS=%s", why);
  sd_notify_barrier (0, STATUS_BARRIER_SEC * G_USEC_PER_SEC);
  return EXIT_FAILURE;
}

int
main (int argc, char **argv)
{
  Options o = { .peer_uid = -1, .net_fd = -1, .guest_address = g_strdup ("10.0.2.100"),
                .log_max_entries = VIVARIUM_EGRESS_LOG_DEFAULT_ENTRIES };
  g_autoptr(GError) error = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  GSocketService *doors[N_DOORS];
  GThreadPool *pool;

  if (!parse_options (&argc, &argv, &o, &error) || !load (&o, &error))
    return refuse_to_start (error->message);
  pool = g_thread_pool_new (run_job, NULL, MAX_CONNECTIONS, FALSE, &error);
  for (guint i = 0; i < n_doors (); i++) {
    doors[i] = open_door (o.dir, i, pool, &error);
    if (doors[i] == NULL)
      return refuse_to_start (error->message);
  }
  for (guint i = 0; i < n_doors (); i++)
    g_socket_service_start (doors[i]);
  if (!start_net (&o, &error))
    return refuse_to_start (error->message);
  g_message ("serving %s for uid %u: %u rules", o.dir, (guint) peer_uid,
             vivarium_egress_policy_get_n_rules (ctx.policy));
  sd_notifyf (0, "READY=1\nSTATUS=serving %u rules", vivarium_egress_policy_get_n_rules (ctx.policy));
  g_main_loop_run (loop);
  return EXIT_SUCCESS;
}
