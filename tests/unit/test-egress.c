/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The built vivarium-egress, end to end: a policy saved the daemon's way,
 * its four sockets, a loopback HTTP server in this test as the "internet"
 * (the deny list given to the proxy leaves out 127.0.0.0/8 for that, and
 * only that), and the decision log and usage file read back. Then the
 * guest's network on net.sock, as QEMU's stream netdev speaks to it.
 * Nothing leaves loopback. Needs root for the other-uid case. */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <gnutls/x509.h>
#include <json-glib/json-glib.h>

#include "vivarium-denylist.h"
#include "vivarium-egress-policy.h"
#include "vivarium-secret.h"

/* Seconds anything in here may take before the test fails (more than the
 * proxy's own 10 s bounds). */
#define WAIT_SEC 20
/* The most a client here reads back. */
#define READ_MAX (8 * 1024 * 1024)

/* --- the loopback upstream server --------------------------------------------- */

/* Reads a head, answers GET /bytes/N with N bytes of 'x' and closes; keeps
 * the last head it saw and how many bytes came before EOF. */
typedef struct {
  GSocketListener *listener;
  guint16          port;
  GMutex           lock;
  GString         *last_head;
  guint            connections;
  GCancellable    *stop;
  GThread         *thread;
  gboolean         closes_first;  /* closes each connection at once, before a byte either way */
} Upstream;

static gchar *
read_head (GSocket *socket)
{
  g_autoptr(GString) head = g_string_new (NULL);
  gchar c;

  while (head->len < 65536 && !g_str_has_suffix (head->str, "\r\n\r\n")) {
    if (g_socket_receive (socket, &c, 1, NULL, NULL) != 1)
      break;
    g_string_append_c (head, c);
  }
  return g_string_free (g_steal_pointer (&head), FALSE);
}

static void
answer (GSocket *socket, const gchar *head)
{
  guint64 n = 0;
  g_autofree gchar *reply = NULL;
  g_autofree gchar *chunk = g_strnfill (65536, 'x');
  const gchar *at = strstr (head, " /bytes/");

  if (at == NULL)
    return;
  n = g_ascii_strtoull (at + 8, NULL, 10);
  reply = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %" G_GUINT64_FORMAT "\r\nConnection: close\r\n\r\n", n);
  if (g_socket_send (socket, reply, strlen (reply), NULL, NULL) < 0)
    return;
  while (n > 0) {
    gssize sent = g_socket_send (socket, chunk, MIN (n, 65536), NULL, NULL);
    if (sent <= 0)
      return;
    n -= (guint64) sent;
  }
}

static gpointer
upstream_thread (gpointer data)
{
  Upstream *up = data;

  for (;;) {
    g_autoptr(GSocketConnection) conn = g_socket_listener_accept (up->listener, NULL, up->stop, NULL);
    g_autofree gchar *head = NULL;
    GSocket *socket;
    if (conn == NULL)
      return NULL;
    socket = g_socket_connection_get_socket (conn);
    if (up->closes_first) {
      g_mutex_lock (&up->lock);
      up->connections++;
      g_mutex_unlock (&up->lock);
      continue;
    }
    g_socket_set_timeout (socket, WAIT_SEC);
    head = read_head (socket);
    g_mutex_lock (&up->lock);
    up->connections++;
    g_string_assign (up->last_head, head);
    g_mutex_unlock (&up->lock);
    answer (socket, head);
    g_socket_shutdown (socket, FALSE, TRUE, NULL);
  }
}

static void
upstream_start (Upstream *up)
{
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GError) error = NULL;

  g_mutex_init (&up->lock);
  up->last_head = g_string_new (NULL);
  up->listener = g_socket_listener_new ();
  up->stop = g_cancellable_new ();
  g_assert_true (g_socket_listener_add_address (up->listener, any, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL,
                                                &bound, &error));
  g_assert_no_error (error);
  up->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  up->thread = g_thread_new ("upstream", upstream_thread, up);
}

static gchar *
upstream_last_head (Upstream *up)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&up->lock);
  return g_strdup (up->last_head->str);
}

/* --- the proxy ------------------------------------------------------------------ */

typedef struct _HttpsUpstream HttpsUpstream;

typedef struct {
  gchar         *dir;
  Upstream       up;
  GSubprocess   *proxy;
  HttpsUpstream *https;       /* with secrets: the TLS "internet" on 127.0.0.1:443 */
  gchar         *ph_a, *ph_b; /* the secrets' placeholders */
  GSocket       *silent;      /* the nameserver that never answers, or NULL */
} Fixture;

typedef struct {
  gboolean     deny_loopback;    /* the real deny list: 127.0.0.0/8 in it */
  guint64      limit_down;
  guint        log_max_entries;  /* 0: the default */
  guint64      limit_up;
  gboolean     secrets;          /* --secrets and --upstream-ca, an HTTPS upstream */
  gboolean     foreign_ca;       /* --upstream-ca names a CA that did not sign the upstream's */
  gboolean     upstream_closes_first;
  gboolean     silent_resolver;  /* the proxy's resolv.conf names a server that never answers */
  gboolean     net_fd;           /* net.sock made here, as the daemon does, and given as --net-fd 0 */
} ProxyConfig;

static gchar *write_secrets (Fixture *f);
static void https_start (Fixture *f);
static void https_stop (Fixture *f);
/* The test's own CA, its server certificate, and the session CA's hosts
 * (made once in main(), with openssl, in a temporary directory). */
static gchar *test_ca_pem;
static gchar *certs_dir;

/* Not in /etc/hosts: its lookup goes to the nameserver. */
#define SILENT_NAME "silent.test"
/* On loopback, but no address the host's own services use. */
#define SILENT_ADDRESS "127.77.0.53"

static gchar *
write_policy (Fixture *f)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *rule = g_strdup_printf ("localhost:%u", f->up.port);
  gchar *path = g_build_filename (f->dir, "policy", NULL);

  g_autofree gchar *silent = g_strdup_printf (SILENT_NAME ":%u", f->up.port);

  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, rule, "group test", &error));
  /* The secrets' hosts, a host without a secret, and one whose rule says
   * no-intercept (its secret must then be tunnelled, never opened). */
  if (f->https != NULL) {
    const gchar *rules[] = { "api.test:443", "other.test:443", "plain.test:443", "bad.test:443",
                             "noint.test:443 no-intercept", NULL };
    for (guint i = 0; rules[i] != NULL; i++)
      g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, rules[i], "session", &error));
  }
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, silent, "group test", &error));
  g_assert_true (vivarium_egress_policy_save (policy, path, 0644, &error));
  g_assert_no_error (error);
  return path;
}

/* The guard's built-in list, without loopback unless asked (the test's
 * "internet" is on 127.0.0.1); every other range stays denied. */
static gchar *
write_deny (Fixture *f, gboolean deny_loopback)
{
  g_autoptr(GPtrArray) ranges = vivarium_denylist_to_strings ();
  g_autoptr(GString) text = g_string_new (NULL);
  gchar *path = g_build_filename (f->dir, "deny", NULL);

  for (guint i = 0; i < ranges->len; i++)
    if (deny_loopback || !g_str_equal (ranges->pdata[i], "127.0.0.0/8"))
      g_string_append_printf (text, "%s\n", (const gchar *) ranges->pdata[i]);
  g_assert_true (g_file_set_contents (path, text->str, -1, NULL));
  return path;
}

/* A nameserver on loopback (UDP port 53, so root) that takes every
 * question and never answers, and a resolv.conf naming it whose own
 * timeout (30 s) is longer than the proxy's. */
static gchar *
silent_resolver_start (Fixture *f)
{
  g_autoptr(GInetAddress) address = g_inet_address_new_from_string (SILENT_ADDRESS);
  g_autoptr(GSocketAddress) at = g_inet_socket_address_new (address, 53);
  g_autoptr(GError) error = NULL;
  gchar *path = g_build_filename (f->dir, "resolv.conf", NULL);

  f->silent = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_UDP, &error);
  g_assert_no_error (error);
  g_assert_true (g_socket_bind (f->silent, at, FALSE, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (path, "nameserver " SILENT_ADDRESS "\noptions timeout:30 attempts:1\n", -1, NULL));
  return path;
}

/* The proxy in a mount namespace of its own with that resolv.conf bound
 * over /etc/resolv.conf: the host's stays untouched. */
static void
add_silent_wrapper (GPtrArray *argv, const gchar *resolv_conf)
{
  const gchar *prefix[] = { "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                            "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", resolv_conf };

  for (guint i = 0; i < G_N_ELEMENTS (prefix); i++)
    g_ptr_array_add (argv, g_strdup (prefix[i]));
}

/* READY=1 on a NOTIFY_SOCKET of our own: the sockets are bound by then. */
static GSocket *
notify_socket (const gchar *path)
{
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (path);
  g_autoptr(GError) error = NULL;
  GSocket *socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_DEFAULT, &error);

  g_assert_no_error (error);
  g_assert_true (g_socket_bind (socket, address, FALSE, &error));
  return socket;
}

static void
wait_ready (GSocket *notify)
{
  gchar buf[512] = { 0 };
  g_autoptr(GError) error = NULL;

  for (;;) {
    gssize n;
    g_assert_true (g_socket_condition_timed_wait (notify, G_IO_IN, WAIT_SEC * G_USEC_PER_SEC, NULL, &error));
    n = g_socket_receive (notify, buf, sizeof buf - 1, NULL, &error);
    g_assert_cmpint (n, >, 0);
    buf[n] = '\0';
    if (strstr (buf, "READY=1") != NULL)
      return;
  }
}

/* net.sock as vd-egress.c makes it: bound, 0666, listening, blocking. */
static int
listening_net_socket (Fixture *f)
{
  g_autofree gchar *path = g_build_filename (f->dir, "net.sock", NULL);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpuint (strlen (path), <, sizeof sun.sun_path);
  strcpy (sun.sun_path, path);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &sun, sizeof sun), ==, 0);
  g_assert_cmpint (chmod (path, 0666), ==, 0);
  g_assert_cmpint (listen (fd, 4), ==, 0);
  return fd;
}

/* A test that fails leaves no proxy behind. */
static void
die_with_test (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static void
proxy_start (Fixture *f, const ProxyConfig *config)
{
  g_autofree gchar *policy = write_policy (f);
  g_autofree gchar *deny = write_deny (f, config->deny_loopback);
  g_autofree gchar *notify_path = g_build_filename (f->dir, "notify", NULL);
  g_autofree gchar *uid = g_strdup_printf ("%u", (guint) getuid ());
  g_autofree gchar *limit = g_strdup_printf ("%" G_GUINT64_FORMAT, config->limit_down);
  g_autofree gchar *limit_up = g_strdup_printf ("%" G_GUINT64_FORMAT, config->limit_up);
  g_autofree gchar *entries = g_strdup_printf ("%u", config->log_max_entries > 0 ? config->log_max_entries : 10000);
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GSocket) notify = notify_socket (notify_path);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  const gchar *fixed[] = { g_getenv ("VIVARIUM_EGRESS"), "--dir", f->dir, "--policy", policy, "--deny", deny,
                           "--peer-uid", uid, "--limit-down", limit, "--limit-up", limit_up,
                           "--log-max-entries", entries, NULL };

  if (config->silent_resolver) {
    g_autofree gchar *resolv_conf = silent_resolver_start (f);
    add_silent_wrapper (argv, resolv_conf);
  }
  for (guint i = 0; fixed[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (fixed[i]));
  if (config->secrets) {
    g_ptr_array_add (argv, g_strdup ("--secrets"));
    g_ptr_array_add (argv, write_secrets (f));
    g_ptr_array_add (argv, g_strdup ("--upstream-ca"));
    g_ptr_array_add (argv, config->foreign_ca ? g_build_filename (certs_dir, "foreign-ca.pem", NULL)
                                              : g_strdup (test_ca_pem));
  }
  if (config->net_fd) {
    g_ptr_array_add (argv, g_strdup ("--net-fd"));
    g_ptr_array_add (argv, g_strdup ("0"));
    g_subprocess_launcher_take_stdin_fd (launcher, listening_net_socket (f));
  }
  g_ptr_array_add (argv, NULL);
  g_subprocess_launcher_setenv (launcher, "NOTIFY_SOCKET", notify_path, TRUE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_test, NULL, NULL);
  f->proxy = g_subprocess_launcher_spawnv (launcher, (const gchar *const *) argv->pdata, &error);
  g_assert_no_error (error);
  wait_ready (notify);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("test-egress-XXXXXX", &error);
  g_assert_no_error (error);
  /* Like the daemon's DIR: others may pass through to the sockets. */
  g_assert_cmpint (g_chmod (f->dir, 0711), ==, 0);
  f->up.closes_first = ((const ProxyConfig *) data)->upstream_closes_first;
  upstream_start (&f->up);
  if (((const ProxyConfig *) data)->secrets)
    https_start (f);
  proxy_start (f, data);
}

/* A directory of plain files and sockets, and the directory. */
static void
remove_flat_dir (const gchar *path)
{
  g_autoptr(GFile) dir = g_file_new_for_path (path);
  g_autoptr(GFileEnumerator) children = g_file_enumerate_children (dir, "standard::name", 0, NULL, NULL);
  GFileInfo *info;

  while (children != NULL && (info = g_file_enumerator_next_file (children, NULL, NULL)) != NULL) {
    g_autofree gchar *child = g_build_filename (path, g_file_info_get_name (info), NULL);
    g_unlink (child);
    g_object_unref (info);
  }
  g_rmdir (path);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_subprocess_force_exit (f->proxy);
  g_subprocess_wait (f->proxy, NULL, NULL);
  g_object_unref (f->proxy);
  if (f->https != NULL)
    https_stop (f);
  g_free (f->ph_a);
  g_free (f->ph_b);
  g_clear_object (&f->silent);
  g_cancellable_cancel (f->up.stop);
  g_thread_join (f->up.thread);
  g_socket_listener_close (f->up.listener);
  g_object_unref (f->up.stop);
  g_object_unref (f->up.listener);
  g_string_free (f->up.last_head, TRUE);
  remove_flat_dir (f->dir);
  g_free (f->dir);
}

/* --- a guest's side ------------------------------------------------------------- */

static GSocket *
connect_door (Fixture *f, const gchar *door)
{
  g_autofree gchar *path = g_build_filename (f->dir, door, NULL);
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (path);
  g_autoptr(GError) error = NULL;
  GSocket *socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &error);

  g_assert_no_error (error);
  g_socket_set_timeout (socket, WAIT_SEC);
  g_assert_true (g_socket_connect (socket, address, NULL, &error));
  return socket;
}

static void
send_text (GSocket *socket, const gchar *text, gsize len)
{
  gsize sent = 0;

  while (sent < len) {
    gssize n = g_socket_send (socket, text + sent, len - sent, NULL, NULL);
    g_assert_cmpint (n, >, 0);
    sent += (gsize) n;
  }
}

/* Everything until EOF (or a reset: a cut connection); then closed, as a
 * client does (the proxy logs a connection once both sides are done). */
static GString *
read_all (GSocket *socket)
{
  GString *out = g_string_new (NULL);
  g_autofree gchar *buf = g_malloc (65536);

  while (out->len < READ_MAX) {
    g_autoptr(GError) error = NULL;
    gssize n = g_socket_receive (socket, buf, 65536, NULL, &error);
    g_assert_false (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT));
    if (n <= 0)
      break;
    g_string_append_len (out, buf, n);
  }
  g_socket_close (socket, NULL);
  return out;
}

/* Reads until the head of an HTTP answer is whole; the rest stays unread. */
static gchar *
read_reply_head (GSocket *socket)
{
  return read_head (socket);
}

/* --- the decision log ------------------------------------------------------------- */

static JsonObject *
find_decision (Fixture *f, const gchar *via, const gchar *verdict, const gchar *reason_part)
{
  g_autofree gchar *path = g_build_filename (f->dir, "decisions.jsonl", NULL);
  gint64 deadline = g_get_monotonic_time () + WAIT_SEC * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline) {
    g_autofree gchar *text = NULL;
    g_auto(GStrv) lines = NULL;
    if (g_file_get_contents (path, &text, NULL, NULL)) {
      lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++) {
        g_autoptr(JsonParser) parser = json_parser_new ();
        JsonObject *o;
        g_assert_true (json_parser_load_from_data (parser, lines[i], -1, NULL));
        o = json_node_get_object (json_parser_get_root (parser));
        if (g_strcmp0 (json_object_get_string_member_with_default (o, "via", ""), via) == 0 &&
            g_str_equal (json_object_get_string_member (o, "verdict"), verdict) &&
            strstr (json_object_get_string_member (o, "reason"), reason_part) != NULL)
          return json_object_ref (o);
      }
    }
    g_usleep (20 * 1000);
  }
  g_test_message ("no %s decision via %s with “%s” in %s", verdict, via, reason_part, path);
  g_assert_not_reached ();
}

static guint64
usage_value (Fixture *f, const gchar *key)
{
  g_autofree gchar *path = g_build_filename (f->dir, "usage", NULL);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error = NULL;
  guint64 v;

  g_assert_true (g_key_file_load_from_file (kf, path, 0, &error));
  v = g_key_file_get_uint64 (kf, "Usage", key, &error);
  g_assert_no_error (error);
  return v;
}

/* --- the cases ---------------------------------------------------------------------- */

static const ProxyConfig open_loopback = { FALSE, 0 };
static const ProxyConfig real_deny_list = { TRUE, 0 };
static const ProxyConfig small_download = { FALSE, 100000 };
static const ProxyConfig short_log = { FALSE, 0, 2 };
static const ProxyConfig small_upload = { FALSE, 0, 0, 50000 };
static const ProxyConfig with_secrets = { .secrets = TRUE };
static const ProxyConfig foreign_upstream_ca = { .secrets = TRUE, .foreign_ca = TRUE };
static const ProxyConfig closing_upstream = { .upstream_closes_first = TRUE };
static const ProxyConfig silent_resolver = { .silent_resolver = TRUE };
static const ProxyConfig given_net_socket = { .net_fd = TRUE };

static gchar *
connect_request (const gchar *host, guint16 port)
{
  return g_strdup_printf ("CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, port, host, port);
}

static void
test_connect_allowed (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autofree gchar *head = NULL;
  const gchar *get = "GET /bytes/1000 HTTP/1.1\r\nHost: localhost\r\n\r\n";
  g_autoptr(GString) rest = NULL;
  g_autoptr(JsonObject) d = NULL;

  send_text (c, req, strlen (req));
  head = read_reply_head (c);
  g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
  send_text (c, get, strlen (get));
  rest = read_all (c);
  g_assert_true (g_str_has_prefix (rest->str, "HTTP/1.1 200 OK\r\n"));
  g_assert_true (g_str_has_suffix (rest->str, "\r\n\r\n") == FALSE);
  g_assert_cmpuint (rest->len, >, 1000);
  d = find_decision (f, "proxy", "allowed", "allowed by localhost");
  g_assert_cmpstr (json_object_get_string_member (d, "host"), ==, "localhost");
  g_assert_cmpint (json_object_get_int_member (d, "port"), ==, f->up.port);
  g_assert_cmpint (json_object_get_int_member (d, "bytes_up"), ==, strlen (get));
  g_assert_cmpint (json_object_get_int_member (d, "bytes_down"), ==, rest->len);
  g_assert_true (json_object_has_member (d, "duration_ms"));
  g_assert_true (g_str_has_suffix (json_object_get_string_member (d, "time"), "Z"));
  g_assert_cmpuint (usage_value (f, "Allowed"), ==, 1);
  g_assert_cmpuint (usage_value (f, "BytesDown"), ==, rest->len);
  /* localhost was looked up (in /etc/hosts), once. */
  g_assert_cmpuint (usage_value (f, "Lookups"), ==, 1);
}

static void
test_denied_name (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("Evil.Example", 443);
  g_autoptr(GString) reply = NULL;
  g_autoptr(JsonObject) d = NULL;

  send_text (c, req, strlen (req));
  reply = read_all (c);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_true (g_str_has_suffix (reply->str, "\r\n\r\nvivarium egress: no rule allows evil.example:443\n"));
  d = find_decision (f, "proxy", "denied", "no rule allows evil.example:443");
  g_assert_cmpstr (json_object_get_string_member (d, "host"), ==, "evil.example");
  g_assert_cmpuint (usage_value (f, "Denied"), ==, 1);
  g_assert_cmpuint (f->up.connections, ==, 0);
}

static void
test_absolute_get (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = g_strdup_printf ("GET http://localhost:%u/bytes/10 HTTP/1.1\r\nHost: localhost:%u\r\n"
                                           "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
                                           "User-Agent: test\r\n\r\n", f->up.port, f->up.port);
  g_autoptr(GString) reply = NULL;
  g_autofree gchar *seen = NULL;
  g_autofree gchar *want = g_strdup_printf ("GET /bytes/10 HTTP/1.1\r\nHost: localhost:%u\r\n", f->up.port);

  send_text (c, req, strlen (req));
  reply = read_all (c);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 200 OK\r\n"));
  g_assert_true (g_str_has_suffix (reply->str, "\r\n\r\nxxxxxxxxxx"));
  seen = upstream_last_head (&f->up);
  g_assert_true (g_str_has_prefix (seen, want));
  g_assert_null (strstr (seen, "Proxy-"));
  g_assert_nonnull (strstr (seen, "User-Agent: test\r\n"));
  g_assert_true (g_str_has_suffix (seen, "Connection: close\r\n\r\n"));
  find_decision (f, "proxy", "allowed", "allowed by localhost");
}

/* A ClientHello naming another server than the CONNECT host: the hello
 * never reaches the server, the connection is cut and logged. */
static const guint8 *
hello_for (const gchar *name, gsize *len)
{
  static guint8 buf[512];
  gsize n = strlen (name), body = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 9 + n;
  guint8 *p = buf;

  *p++ = 0x16; *p++ = 3; *p++ = 1; *p++ = (body + 4) >> 8; *p++ = (body + 4) & 0xff;
  *p++ = 1; *p++ = 0; *p++ = body >> 8; *p++ = body & 0xff;
  *p++ = 3; *p++ = 3; memset (p, 0, 32); p += 32;
  *p++ = 0;                                     /* session id */
  *p++ = 0; *p++ = 2; *p++ = 0x13; *p++ = 0x01; /* one cipher suite */
  *p++ = 1; *p++ = 0;                           /* null compression */
  *p++ = 0; *p++ = 9 + n;                       /* extensions */
  *p++ = 0; *p++ = 0; *p++ = 0; *p++ = 5 + n;   /* server_name */
  *p++ = 0; *p++ = 3 + n; *p++ = 0; *p++ = 0; *p++ = n;
  memcpy (p, name, n);
  p += n;
  *len = (gsize) (p - buf);
  return buf;
}

static void
test_sni_mismatch (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autofree gchar *head = NULL;
  g_autoptr(GString) rest = NULL;
  gsize len;
  const guint8 *hello = hello_for ("evil.example", &len);
  g_autoptr(JsonObject) d = NULL;

  send_text (c, req, strlen (req));
  head = read_reply_head (c);
  g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
  send_text (c, (const gchar *) hello, len);
  rest = read_all (c);
  g_assert_cmpuint (rest->len, ==, 0);
  d = find_decision (f, "proxy", "denied", "the TLS server name evil.example is not the CONNECT host localhost");
  g_assert_cmpint (json_object_get_int_member (d, "bytes_up"), ==, len);
  g_assert_cmpint (json_object_get_int_member (d, "bytes_down"), ==, 0);
  /* The server got a connection and not one byte of the hello. */
  g_assert_cmpstr (upstream_last_head (&f->up), ==, "");
}

/* The positive control: the same hello naming the CONNECT host goes on. */
static void
test_sni_match (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autofree gchar *head = NULL;
  g_autoptr(GString) rest = NULL;
  g_autofree gchar *seen = NULL;
  gsize len;
  const guint8 *hello = hello_for ("LocalHost", &len);

  send_text (c, req, strlen (req));
  head = read_reply_head (c);
  send_text (c, (const gchar *) hello, len);
  send_text (c, "\r\n\r\n", 4);
  g_socket_shutdown (c, FALSE, TRUE, NULL);
  rest = read_all (c);
  find_decision (f, "proxy", "allowed", "allowed by localhost");
  seen = upstream_last_head (&f->up);
  g_assert_cmpuint (strlen (seen), >, 0);
  /* Up to its first NUL: the record header of the hello. */
  g_assert_cmpmem (seen, 3, hello, 3);
}

/* With loopback in the deny list, the allowed name resolves only into it. */
static void
test_rebinding (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autoptr(GString) reply = NULL;

  send_text (c, req, strlen (req));
  reply = read_all (c);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_nonnull (strstr (reply->str, "vivarium egress: localhost resolves only into denied ranges ("));
  find_decision (f, "proxy", "denied", "localhost resolves only into denied ranges");
  g_assert_cmpuint (f->up.connections, ==, 0);
}

/* An IP literal no rule names is refused even where the name is allowed. */
static void
test_ip_literal (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("127.0.0.1", f->up.port);
  g_autoptr(GString) reply = NULL;

  send_text (c, req, strlen (req));
  reply = read_all (c);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  find_decision (f, "proxy", "denied", "127.0.0.1");
  g_assert_cmpuint (f->up.connections, ==, 0);
}

static void
test_download_limit (Fixture *f, gconstpointer data)
{
  g_autofree gchar *req = g_strdup_printf ("GET http://localhost:%u/bytes/1000000 HTTP/1.1\r\nHost: localhost\r\n\r\n",
                                           f->up.port);
  g_autoptr(GString) reply = NULL;
  g_autoptr(GString) later = NULL;
  g_autoptr(JsonObject) d = NULL;

  {
    g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
    send_text (c, req, strlen (req));
    reply = read_all (c);
  }
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 200 OK\r\n"));
  g_assert_cmpuint (reply->len, <=, 100000);
  d = find_decision (f, "proxy", "denied", "the session's download limit of 100000 bytes was reached");
  g_assert_cmpint (json_object_get_int_member (d, "bytes_down"), ==, reply->len);
  {
    g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
    send_text (c, req, strlen (req));
    later = read_all (c);
  }
  g_assert_true (g_str_has_prefix (later->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_nonnull (strstr (later->str, "vivarium egress: the session's download limit of 100000 bytes is used up"));
  find_decision (f, "proxy", "denied", "is used up");
  g_assert_cmpuint (usage_value (f, "BytesDown"), <=, 100000);
}

static GString *
ask (Fixture *f, const gchar *door, const gchar *request)
{
  g_autoptr(GSocket) c = connect_door (f, door);

  send_text (c, request, strlen (request));
  return read_all (c);
}

/* The server closes first (like the self-test's canary) while the guest
 * keeps its side open, reading: the guest sees EOF and the tunnel is logged
 * allowed — not held until the guest's first bytes are overdue and then
 * cut as late. Then the guest closes too. */
static void
test_upstream_closes_first (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autofree gchar *head = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) d = NULL;
  gchar byte;

  send_text (c, req, strlen (req));
  head = read_reply_head (c);
  g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
  g_assert_cmpint (g_socket_receive (c, &byte, 1, NULL, &error), ==, 0);
  g_assert_no_error (error);
  g_socket_close (c, NULL);
  d = find_decision (f, "proxy", "allowed", "allowed by localhost");
  g_assert_cmpint (json_object_get_int_member (d, "bytes_up"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (d, "bytes_down"), ==, 0);
  g_assert_cmpuint (f->up.connections, ==, 1);
}

/* A nameserver that never answers: the proxy gives up after its own 10 s
 * (the resolver's are 30), refuses, and logs why; it did ask that server. */
static void
test_lookup_timeout (Fixture *f, gconstpointer data)
{
  g_autofree gchar *req = connect_request (SILENT_NAME, f->up.port);
  g_autoptr(GString) reply = ask (f, "proxy.sock", req);

  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_nonnull (strstr (reply->str, "vivarium egress: the lookup of " SILENT_NAME " timed out (10 s)\n"));
  find_decision (f, "proxy", "denied", "the lookup of " SILENT_NAME " timed out");
  g_assert_true (g_socket_condition_check (f->silent, G_IO_IN) & G_IO_IN);
  g_assert_cmpuint (usage_value (f, "Lookups"), ==, 1);
  g_assert_cmpuint (f->up.connections, ==, 0);
}

/* The upload limit: a body that would cross it is not passed on. */
static void
test_upload_limit (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autofree gchar *head = NULL;
  g_autofree gchar *body = g_strnfill (200000, 'u');
  g_autoptr(GString) cut = NULL;
  g_autoptr(GString) later = NULL;
  g_autoptr(JsonObject) d = NULL;

  send_text (c, req, strlen (req));
  head = read_reply_head (c);
  g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
  /* The proxy cuts in the middle: later sends may fail, that is the point. */
  for (gsize sent = 0; sent < 200000;) {
    gssize n = g_socket_send (c, body + sent, 200000 - sent, NULL, NULL);
    if (n <= 0)
      break;
    sent += (gsize) n;
  }
  cut = read_all (c);
  d = find_decision (f, "proxy", "denied", "the session's upload limit of 50000 bytes was reached");
  g_assert_cmpint (json_object_get_int_member (d, "bytes_up"), <=, 50000);
  g_assert_cmpuint (usage_value (f, "BytesUp"), <=, 50000);
  later = ask (f, "proxy.sock", req);
  g_assert_nonnull (strstr (later->str, "vivarium egress: the session's upload limit of 50000 bytes is used up"));
}

/* Another uid than --peer-uid: closed before a byte is read. */
static void
test_other_uid (Fixture *f, gconstpointer data)
{
  g_autofree gchar *path = g_build_filename (f->dir, "proxy.sock", NULL);
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int status;
  pid_t pid;

  if (getuid () != 0) {
    g_test_message ("connecting as another uid needs root");
    g_test_fail ();
    return;
  }
  g_assert_cmpuint (strlen (path), <, sizeof sun.sun_path);
  strcpy (sun.sun_path, path);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0) {
    /* Only async-signal-safe calls here: the parent has threads. */
    char buf[64];
    int fd;
    ssize_t n;
    alarm (WAIT_SEC);
    if (setresgid (65534, 65534, 65534) != 0 || setresuid (65534, 65534, 65534) != 0)
      _exit (10);
    fd = socket (AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect (fd, (struct sockaddr *) &sun, sizeof sun) != 0)
      _exit (11);
    if (write (fd, req, strlen (req)) < 0) {
      /* A reset before the write is a refusal too. */
    }
    n = read (fd, buf, sizeof buf);
    _exit (n <= 0 ? 0 : 12);
  }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpuint (f->up.connections, ==, 0);
}

static gssize
read_exact (GSocket *socket, guint8 *buf, gsize len)
{
  gsize got = 0;

  while (got < len) {
    gssize n = g_socket_receive (socket, (gchar *) buf + got, len - got, NULL, NULL);
    g_assert_cmpint (n, >, 0);
    got += (gsize) n;
  }
  return (gssize) got;
}

static void
test_dns (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "dns.sock");
  /* id 0x1234, RD, one question: localhost A; then evil.example A. */
  const guint8 allowed[] = { 0, 27, 0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                             9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0, 0, 1, 0, 1 };
  const guint8 refused[] = { 0, 30, 0x12, 0x35, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                             4, 'e', 'v', 'i', 'l', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1 };
  guint8 reply[128];
  gssize n;

  send_text (c, (const gchar *) allowed, sizeof allowed);
  n = read_exact (c, reply, 2 + 27 + 16);
  g_assert_cmpuint (reply[5] & 0x0f, ==, 0);
  g_assert_cmpuint (reply[9], ==, 1);
  g_assert_cmpmem (reply + n - 4, 4, "\x0a\x00\x02\x64", 4);
  send_text (c, (const gchar *) refused, sizeof refused);
  n = read_exact (c, reply, 2 + 30);
  g_assert_cmpuint (reply[5] & 0x0f, ==, 5);
  find_decision (f, "dns", "allowed", "the policy allows localhost");
  find_decision (f, "dns", "denied", "no rule allows evil.example");
  /* Answered from the policy alone: no name went to a resolver. */
  g_assert_cmpuint (usage_value (f, "Lookups"), ==, 0);
}

/* tls.sock: the destination from the SNI alone; no SNI, no way out. */
static void
test_transparent_tls (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "tls.sock");
  g_autoptr(GString) rest = NULL;
  gsize len;
  const guint8 *hello = hello_for ("localhost", &len);

  send_text (c, (const gchar *) hello, len);
  rest = read_all (c);
  g_assert_cmpuint (rest->len, ==, 0);
  /* The policy allows localhost on the test's port only, not on 443. */
  find_decision (f, "tls", "denied", "no rule allows localhost:443");
}

static void
test_transparent_http (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "http.sock");
  g_autofree gchar *req = g_strdup_printf ("GET /bytes/3 HTTP/1.1\r\nHost: localhost:%u\r\n\r\n", f->up.port);
  g_autoptr(GString) reply = NULL;

  send_text (c, req, strlen (req));
  reply = read_all (c);
  g_assert_true (g_str_has_suffix (reply->str, "\r\n\r\nxxx"));
  find_decision (f, "http", "allowed", "allowed by localhost");
}

/* --- the guest's network: QEMU's side of net.sock ------------------------------ */

/* An ARP request from a guest (52:54:00:12:34:56 at 10.0.2.15) for the
 * proxy's address, behind its 4-byte length, as QEMU's stream sends it. */
static void
send_arp_request (GSocket *net)
{
  const guint8 frame[] = {
    0, 0, 0, 42,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0, 0x12, 0x34, 0x56, 0x08, 0x06,
    0, 1, 0x08, 0, 6, 4, 0, 1,
    0x52, 0x54, 0, 0x12, 0x34, 0x56, 10, 0, 2, 15,
    0, 0, 0, 0, 0, 0, 10, 0, 2, 100,
  };

  send_text (net, (const gchar *) frame, sizeof frame);
}

/* libslirp's answer: an ARP reply saying where 10.0.2.100 is. */
static void
expect_arp_reply (GSocket *net)
{
  guint8 length[4];
  guint8 frame[2048];
  guint32 len;

  read_exact (net, length, sizeof length);
  len = (guint32) length[0] << 24 | (guint32) length[1] << 16 | (guint32) length[2] << 8 | length[3];
  g_assert_cmpuint (len, >=, 42);
  g_assert_cmpuint (len, <=, sizeof frame);
  read_exact (net, frame, len);
  g_assert_cmpmem (frame, 6, "\x52\x54\x00\x12\x34\x56", 6);
  g_assert_cmpmem (frame + 12, 2, "\x08\x06", 2);
  g_assert_cmpmem (frame + 20, 2, "\x00\x02", 2);
  g_assert_cmpmem (frame + 28, 4, "\x0a\x00\x02\x64", 4);
}

/* The guest's network answers on net.sock, for one QEMU at a time. */
static void
test_net_stream (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) net = connect_door (f, "net.sock");
  g_autoptr(GSocket) second = NULL;
  g_autoptr(GString) seen = NULL;

  send_arp_request (net);
  expect_arp_reply (net);
  /* The second QEMU is closed at once, before a byte is read. */
  second = connect_door (f, "net.sock");
  seen = read_all (second);
  g_assert_cmpuint (seen->len, ==, 0);
  send_arp_request (net);
  expect_arp_reply (net);
}

/* A length past any frame QEMU sends closes the stream, and only that: the
 * proxy serves the next stream (a positive control before and after). */
static void
test_net_garbage_length (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) net = connect_door (f, "net.sock");
  g_autoptr(GSocket) again = NULL;
  g_autoptr(GString) seen = NULL;
  const guint8 garbage[] = { 0x7f, 0xff, 0xff, 0xff, 'x', 'x', 'x', 'x' };

  send_arp_request (net);
  expect_arp_reply (net);
  send_text (net, (const gchar *) garbage, sizeof garbage);
  seen = read_all (net);
  g_assert_cmpuint (seen->len, ==, 0);
  again = connect_door (f, "net.sock");
  send_arp_request (again);
  expect_arp_reply (again);
}

static guint
count_lines (Fixture *f, const gchar *part)
{
  g_autofree gchar *path = g_build_filename (f->dir, "decisions.jsonl", NULL);
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  guint n = 0;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    n += lines[i][0] != '\0' && strstr (lines[i], part) != NULL;
  return n;
}

/* --log-max-entries 2: two lines, one log-full line, then only counts. */
static void
test_log_full (Fixture *f, gconstpointer data)
{
  g_autofree gchar *req = connect_request ("evil.example", 443);

  for (guint i = 0; i < 5; i++) {
    g_autoptr(GString) reply = ask (f, "proxy.sock", req);
    g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  }
  g_assert_cmpuint (count_lines (f, "\"verdict\":\"denied\""), ==, 2);
  g_assert_cmpuint (count_lines (f, "\"verdict\":\"log-full\""), ==, 1);
  g_assert_cmpuint (count_lines (f, "\"time\""), ==, 3);
  g_assert_cmpuint (usage_value (f, "Denied"), ==, 5);
  g_assert_cmpuint (usage_value (f, "LogDropped"), ==, 3);
}

/* 64 questions on one connection are answered, the 65th is not. */
static void
test_dns_bound (Fixture *f, gconstpointer data)
{
  g_autoptr(GSocket) c = connect_door (f, "dns.sock");
  const guint8 query[] = { 0, 27, 0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                           9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0, 0, 1, 0, 1 };
  g_autoptr(GByteArray) all = g_byte_array_new ();
  g_autoptr(GString) answers = NULL;

  for (guint i = 0; i < 65; i++)
    g_byte_array_append (all, query, sizeof query);
  send_text (c, (const gchar *) all->data, all->len);
  answers = read_all (c);
  g_assert_cmpuint (answers->len, ==, 64 * (2 + 27 + 16));
}

/* 64 connections at once; the 65th is closed unread; one fewer, and a new
 * one is served again. */
static void
test_connection_bound (Fixture *f, gconstpointer data)
{
  g_autoptr(GPtrArray) held = g_ptr_array_new_with_free_func (g_object_unref);
  g_autofree gchar *req = connect_request ("localhost", f->up.port);
  g_autoptr(GString) refused = NULL;
  g_autofree gchar *head = NULL;

  for (guint i = 0; i < 64; i++)
    g_ptr_array_add (held, connect_door (f, "proxy.sock"));
  /* A DNS round trip on one of them would not tell: wait for the proxy to
   * have taken them all (it accepts in order). */
  g_usleep (300 * 1000);
  {
    /* Closed at once: the request may not even be taken. */
    g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
    g_socket_send (c, req, strlen (req), NULL, NULL);
    refused = read_all (c);
  }
  g_assert_cmpuint (refused->len, ==, 0);
  g_ptr_array_remove_index (held, 0);
  for (guint attempt = 0; attempt < 100; attempt++) {
    g_autoptr(GSocket) c = connect_door (f, "proxy.sock");
    g_free (head);
    g_socket_send (c, req, strlen (req), NULL, NULL);
    head = read_reply_head (c);
    if (head[0] != '\0')
      break;
    g_usleep (50 * 1000);
  }
  g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
}

static void
test_head_bounds (Fixture *f, gconstpointer data)
{
  g_autoptr(GString) huge = g_string_new ("GET http://localhost/ HTTP/1.1\r\n");
  g_autoptr(GString) reply = NULL;
  g_autoptr(GString) slow = NULL;
  gint64 start;

  while (huge->len <= 17 * 1024)
    g_string_append (huge, "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
  reply = ask (f, "proxy.sock", huge->str);
  g_assert_true (g_str_has_prefix (reply->str, "HTTP/1.1 403 Forbidden\r\n"));
  g_assert_nonnull (strstr (reply->str, "vivarium egress: the request head is larger than 16384 bytes"));
  find_decision (f, "proxy", "denied", "larger than 16384 bytes");
  /* A head that never ends: refused after the 10 s it is given. */
  start = g_get_monotonic_time ();
  slow = ask (f, "proxy.sock", "CONNECT localhost:1 HTTP/1.1\r\n");
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 9 * G_USEC_PER_SEC);
  g_assert_nonnull (strstr (slow->str, "vivarium egress: the request head did not come within 10 s"));
}

static gpointer
cancel_later (gpointer data)
{
  g_usleep (WAIT_SEC * G_USEC_PER_SEC);
  g_cancellable_cancel (data);
  g_object_unref (data);
  return NULL;
}

/* The exit status of a proxy that must refuse to start; one that runs on
 * instead fails the test after WAIT_SEC (and is killed). */
static gint
refused_start (GSubprocess *proxy, gchar **err)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  GThread *timer = g_thread_new ("timer", cancel_later, g_object_ref (cancellable));
  gboolean done = g_subprocess_communicate_utf8 (proxy, NULL, cancellable, NULL, err, &error);

  if (!done)
    g_subprocess_force_exit (proxy);
  g_assert_no_error (error);
  g_thread_unref (timer);
  return g_subprocess_get_exit_status (proxy);
}

/* An empty deny list is refused, not taken as "deny nothing". */
static void
test_empty_deny (Fixture *f, gconstpointer data)
{
  g_autoptr(GSubprocess) proxy = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *policy = g_build_filename (f->dir, "policy", NULL);
  g_autofree gchar *deny = g_build_filename (f->dir, "empty-deny", NULL);
  g_autofree gchar *dir = g_build_filename (f->dir, "second", NULL);
  g_autofree gchar *sock = g_build_filename (dir, "proxy.sock", NULL);
  g_autofree gchar *err = NULL;

  g_assert_true (g_file_set_contents (deny, "# nothing\n\n", -1, NULL));
  g_assert_cmpint (g_mkdir (dir, 0711), ==, 0);
  proxy = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, &error, g_getenv ("VIVARIUM_EGRESS"), "--dir", dir,
                            "--policy", policy, "--deny", deny, "--peer-uid", "0", NULL);
  g_assert_no_error (error);
  g_assert_cmpint (refused_start (proxy, &err), ==, 1);
  g_assert_nonnull (strstr (err, "names no range"));
  g_assert_false (g_file_test (sock, G_FILE_TEST_EXISTS));
  g_assert_cmpint (g_rmdir (dir), ==, 0);   /* nothing made in it */
}

/* --net-fd names something that is not a listening socket (here a
 * regular file): refused, nothing made in its directory. */
static void
test_net_fd_not_listening (Fixture *f, gconstpointer data)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) proxy = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *policy = write_policy (f);
  g_autofree gchar *deny = write_deny (f, FALSE);
  g_autofree gchar *dir = g_build_filename (f->dir, "second", NULL);
  g_autofree gchar *net = g_build_filename (dir, "net.sock", NULL);
  g_autofree gchar *uid = g_strdup_printf ("%u", (guint) getuid ());
  g_autofree gchar *err = NULL;

  g_assert_cmpint (g_mkdir (dir, 0711), ==, 0);
  g_subprocess_launcher_take_stdin_fd (launcher, open (policy, O_RDONLY | O_CLOEXEC));
  proxy = g_subprocess_launcher_spawn (launcher, &error, g_getenv ("VIVARIUM_EGRESS"), "--dir", dir, "--policy",
                                       policy, "--deny", deny, "--peer-uid", uid, "--net-fd", "0", NULL);
  g_assert_no_error (error);
  g_assert_cmpint (refused_start (proxy, &err), ==, 1);
  g_assert_nonnull (strstr (err, "is not a listening unix stream socket"));
  g_assert_false (g_file_test (net, G_FILE_TEST_EXISTS));
  remove_flat_dir (dir);
}

/* A start it cannot make: exit 1 and the reason, no READY. */
static void
test_bad_policy (void)
{
  g_autoptr(GSubprocess) proxy = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("test-egress-XXXXXX", &error);
  g_autofree gchar *policy = g_build_filename (dir, "policy", NULL);
  g_autofree gchar *err = NULL;

  g_assert_true (g_file_set_contents (policy, "not a policy", -1, NULL));
  proxy = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, &error, g_getenv ("VIVARIUM_EGRESS"), "--dir", dir,
                            "--policy", policy, "--deny", policy, "--peer-uid", "0", NULL);
  g_assert_no_error (error);
  g_assert_cmpint (refused_start (proxy, &err), ==, 1);
  g_assert_true (g_str_has_prefix (err, "vivarium-egress: "));
  g_unlink (policy);
  g_rmdir (dir);
}

/* --- secrets: the TLS "internet" and its certificates ------------------------------ */

/* Everything below runs in a network and mount namespace of the test's
 * own (main() makes them as root): 127.0.0.1:443 is ours, and the names
 * api.test, other.test, plain.test, bad.test, noint.test resolve to it
 * through an /etc/hosts seen only here. Nothing leaves loopback. */
static gboolean isolated;

#define VALUE_A "real-value-A-0123456789"
#define VALUE_B "real-value-B-abcdef"

struct _HttpsUpstream {
  GSocketListener *listener;
  GCancellable    *stop;
  GThread         *thread;
  GTlsCertificate *cert;
  GMutex           lock;
  GString         *seen;      /* every request, head and (de-chunked) body */
  GString         *partial;   /* what connections that ended mid-request got of it */
  guint            closed;    /* connections over */
  GPtrArray       *threads;
};

typedef struct {
  HttpsUpstream     *up;
  GSocketConnection *conn;
} HttpsConn;

static gchar *
stream_line (GInputStream *in, GCancellable *cancel)
{
  g_autoptr(GString) line = g_string_new (NULL);
  gchar c;

  while (line->len < 65536 && !g_str_has_suffix (line->str, "\r\n")) {
    if (g_input_stream_read (in, &c, 1, cancel, NULL) != 1)
      return NULL;
    g_string_append_c (line, c);
  }
  return g_string_free (g_steal_pointer (&line), FALSE);
}

static gboolean
stream_body (GInputStream *in, gsize n, GString *out, GCancellable *cancel)
{
  g_autofree gchar *buf = g_malloc (n + 1);
  gsize got = 0;

  if (n > 0 && !g_input_stream_read_all (in, buf, n, &got, cancel, NULL))
    return FALSE;
  g_string_append_len (out, buf, (gssize) got);
  return got == n;
}

/* A request: its head, then its body de-chunked (what the server sees). */
static gboolean
https_read_request (GInputStream *in, GString *req, GCancellable *cancel)
{
  gboolean chunked = FALSE;
  gsize length = 0;

  for (;;) {
    g_autofree gchar *line = stream_line (in, cancel);
    if (line == NULL)
      return FALSE;
    g_string_append (req, line);
    if (g_ascii_strncasecmp (line, "Content-Length:", 15) == 0)
      length = g_ascii_strtoull (line + 15, NULL, 10);
    if (g_ascii_strncasecmp (line, "Transfer-Encoding: chunked", 26) == 0)
      chunked = TRUE;
    if (g_str_equal (line, "\r\n"))
      break;
  }
  if (!chunked)
    return stream_body (in, length, req, cancel);
  for (;;) {
    g_autofree gchar *size = stream_line (in, cancel);
    g_autofree gchar *crlf = NULL;
    gsize n;
    if (size == NULL)
      return FALSE;
    n = g_ascii_strtoull (size, NULL, 16);
    if (n == 0)
      break;
    if (!stream_body (in, n, req, cancel) || (crlf = stream_line (in, cancel)) == NULL)
      return FALSE;
  }
  for (;;) {
    g_autofree gchar *trailer = stream_line (in, cancel);
    if (trailer == NULL || g_str_equal (trailer, "\r\n"))
      return trailer != NULL;
  }
}

/* GET /bytes/N: N bytes of 'x' after the head. */
static gboolean
send_bytes (GOutputStream *out, const gchar *req, GCancellable *cancel)
{
  g_autofree gchar *chunk = g_strnfill (65536, 'x');
  guint64 n = g_str_has_prefix (req, "GET /bytes/") ? g_ascii_strtoull (req + 11, NULL, 10) : 0;

  while (n > 0) {
    gsize len = MIN (n, 65536);
    if (!g_output_stream_write_all (out, chunk, len, NULL, cancel, NULL))
      return FALSE;
    n -= len;
  }
  return TRUE;
}

static gpointer
https_conn_thread (gpointer data)
{
  g_autofree HttpsConn *hc = data;
  g_autoptr(GSocketConnection) conn = hc->conn;
  g_autoptr(GIOStream) tls = g_tls_server_connection_new (G_IO_STREAM (conn), hc->up->cert, NULL);

  g_socket_set_timeout (g_socket_connection_get_socket (conn), WAIT_SEC);
  if (tls == NULL || !g_tls_connection_handshake (G_TLS_CONNECTION (tls), hc->up->stop, NULL))
    return NULL;
  for (;;) {
    g_autoptr(GString) req = g_string_new (NULL);
    g_autofree gchar *reply = NULL;
    if (!https_read_request (g_io_stream_get_input_stream (tls), req, hc->up->stop)) {
      g_mutex_lock (&hc->up->lock);
      g_string_append (hc->up->partial, req->str);
      g_mutex_unlock (&hc->up->lock);
      break;
    }
    g_mutex_lock (&hc->up->lock);
    g_string_append (hc->up->seen, req->str);
    g_mutex_unlock (&hc->up->lock);
    reply = g_strdup ("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nseen");
    if (g_str_has_prefix (req->str, "GET /bytes/")) {
      g_free (reply);
      reply = g_strdup_printf ("HTTP/1.1 200 OK\r\nContent-Length: %" G_GUINT64_FORMAT "\r\n\r\n",
                               g_ascii_strtoull (req->str + 11, NULL, 10));
    }
    if (!g_output_stream_write_all (g_io_stream_get_output_stream (tls), reply, strlen (reply), NULL, hc->up->stop,
                                    NULL) ||
        !send_bytes (g_io_stream_get_output_stream (tls), req->str, hc->up->stop))
      break;
  }
  g_io_stream_close (tls, NULL, NULL);
  g_mutex_lock (&hc->up->lock);
  hc->up->closed++;
  g_mutex_unlock (&hc->up->lock);
  return NULL;
}

static gpointer
https_thread (gpointer data)
{
  HttpsUpstream *up = data;

  for (;;) {
    GSocketConnection *conn = g_socket_listener_accept (up->listener, NULL, up->stop, NULL);
    HttpsConn *hc;
    if (conn == NULL)
      return NULL;
    hc = g_new0 (HttpsConn, 1);
    hc->up = up;
    hc->conn = conn;
    g_mutex_lock (&up->lock);
    g_ptr_array_add (up->threads, g_thread_new ("https-conn", https_conn_thread, hc));
    g_mutex_unlock (&up->lock);
  }
}

static void
https_start (Fixture *f)
{
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (lo, 443);
  g_autofree gchar *cert = g_build_filename (certs_dir, "server.pem", NULL);
  g_autofree gchar *key = g_build_filename (certs_dir, "server.key", NULL);
  g_autoptr(GError) error = NULL;
  HttpsUpstream *up = g_new0 (HttpsUpstream, 1);

  g_assert_true (isolated);
  g_mutex_init (&up->lock);
  up->seen = g_string_new (NULL);
  up->partial = g_string_new (NULL);
  up->threads = g_ptr_array_new ();
  up->stop = g_cancellable_new ();
  up->cert = g_tls_certificate_new_from_files (cert, key, &error);
  g_assert_no_error (error);
  up->listener = g_socket_listener_new ();
  g_assert_true (g_socket_listener_add_address (up->listener, address, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                                                NULL, NULL, &error));
  g_assert_no_error (error);
  up->thread = g_thread_new ("https", https_thread, up);
  f->https = up;
}

static void
https_stop (Fixture *f)
{
  HttpsUpstream *up = f->https;

  g_cancellable_cancel (up->stop);
  g_thread_join (up->thread);
  g_socket_listener_close (up->listener);
  for (guint i = 0; i < up->threads->len; i++)
    g_thread_join (up->threads->pdata[i]);
  g_ptr_array_unref (up->threads);
  g_object_unref (up->listener);
  g_object_unref (up->stop);
  g_object_unref (up->cert);
  g_string_free (up->seen, TRUE);
  g_string_free (up->partial, TRUE);
  g_mutex_clear (&up->lock);
  g_free (up);
  f->https = NULL;
}

static gchar *
https_seen (Fixture *f)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&f->https->lock);
  return g_strdup (f->https->seen->str);
}

/* What the server got of requests it never got whole. */
static gchar *
https_partial (Fixture *f)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&f->https->lock);
  return g_strdup (f->https->partial->str);
}

static guint
https_closed (Fixture *f)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&f->https->lock);
  return f->https->closed;
}

/* Until the server has seen the end of one more connection (the proxy's
 * upstream one): what it got is then all it will get. Bounded. */
static void
https_wait_closed (Fixture *f, guint before)
{
  for (guint i = 0; i < 1000 && https_closed (f) == before; i++)
    g_usleep (10 * 1000);
  g_assert_cmpuint (https_closed (f), >, before);
}

static VivariumSecret *
new_secret (const gchar *name, const gchar *host, const gchar *header, const gchar *format, const gchar *value)
{
  VivariumSecret *secret = g_new0 (VivariumSecret, 1);
  const gchar *hosts[] = { host, NULL };

  secret->name = g_strdup (name);
  secret->hosts = g_strdupv ((GStrv) hosts);
  secret->header = g_strdup (header);
  secret->format = g_strdup (format);
  secret->value = g_bytes_new (value, strlen (value));
  secret->placeholder = vivarium_secret_placeholder_new ();
  secret->added_at = 1;
  return secret;
}

/* A for api.test in Authorization, B for other.test in X-Api-Key, C for
 * bad.test (whose certificate does not name it), D for noint.test (its
 * rule says no-intercept). Written as the daemon does, 0400. */
static gchar *
write_secrets (Fixture *f)
{
  g_autoptr(GPtrArray) secrets = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  g_autoptr(GError) error = NULL;
  gchar *path = g_build_filename (f->dir, "secrets", NULL);

  g_ptr_array_add (secrets, new_secret ("A", "api.test", "Authorization", "Bearer {}", VALUE_A));
  g_ptr_array_add (secrets, new_secret ("B", "other.test", "X-Api-Key", "{}", VALUE_B));
  g_ptr_array_add (secrets, new_secret ("C", "bad.test", "Authorization", "Bearer {}", "value-c"));
  g_ptr_array_add (secrets, new_secret ("D", "noint.test", "Authorization", "Bearer {}", "value-d"));
  f->ph_a = g_strdup (((VivariumSecret *) secrets->pdata[0])->placeholder);
  f->ph_b = g_strdup (((VivariumSecret *) secrets->pdata[1])->placeholder);
  g_assert_true (vivarium_secrets_save (secrets, path, 0400, &error));
  g_assert_no_error (error);
  return path;
}

/* --- secrets: a guest's TLS ------------------------------------------------------------ */

/* A TLS client through one of the proxy's doors (tls.sock, or proxy.sock
 * after CONNECT name:443), trusting only ca (a PEM file). */
static GIOStream *
tls_open (Fixture *f, const gchar *door, const gchar *name, const gchar *ca, GError **error)
{
  g_autoptr(GSocket) socket = connect_door (f, door);
  g_autoptr(GSocketConnection) conn = NULL;
  g_autoptr(GSocketConnectable) identity = g_network_address_new (name, 443);
  g_autoptr(GTlsDatabase) db = g_tls_file_database_new (ca, error);
  g_autoptr(GIOStream) tls = NULL;

  g_assert_nonnull (db);
  if (g_str_equal (door, "proxy.sock")) {
    g_autofree gchar *req = connect_request (name, 443);
    g_autofree gchar *head = NULL;
    send_text (socket, req, strlen (req));
    head = read_reply_head (socket);
    g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
  }
  conn = g_socket_connection_factory_create_connection (socket);
  tls = g_tls_client_connection_new (G_IO_STREAM (conn), identity, error);
  g_assert_nonnull (tls);
  g_tls_connection_set_database (G_TLS_CONNECTION (tls), db);
  /* As curl does: h2 first. An intercepted host answers http/1.1 only. */
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (tls), (const gchar *const[]) { "h2", "http/1.1", NULL });
  if (!g_tls_connection_handshake (G_TLS_CONNECTION (tls), NULL, error))
    return NULL;
  return g_steal_pointer (&tls);
}

static gchar *
session_ca (Fixture *f)
{
  return g_build_filename (f->dir, "ca.pem", NULL);
}

/* One request, one answer (its head and Content-Length body). */
static gchar *
exchange (GIOStream *tls, const gchar *request, gsize len)
{
  GInputStream *in = g_io_stream_get_input_stream (tls);
  g_autoptr(GString) answer = g_string_new (NULL);
  gsize length = 0;

  if (!g_output_stream_write_all (g_io_stream_get_output_stream (tls), request, len, NULL, NULL, NULL))
    return NULL;
  for (;;) {
    g_autofree gchar *line = stream_line (in, NULL);
    if (line == NULL)
      return NULL;
    g_string_append (answer, line);
    if (g_ascii_strncasecmp (line, "Content-Length:", 15) == 0)
      length = g_ascii_strtoull (line + 15, NULL, 10);
    if (g_str_equal (line, "\r\n"))
      break;
  }
  if (!stream_body (in, length, answer, NULL))
    return NULL;
  return g_string_free (g_steal_pointer (&answer), FALSE);
}

static gchar *
get_with (const gchar *host, const gchar *path, const gchar *header)
{
  return g_strdup_printf ("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, host, header);
}

/* The session CA as docs/secrets.md has it: named after the session (the
 * last component of DIR), a CA of path length 0, its name constraints the
 * secrets' hosts and no address. */
static void
check_session_ca (Fixture *f, const gchar *pem)
{
  gnutls_x509_crt_t crt;
  gnutls_x509_name_constraints_t nc;
  gnutls_datum_t in = { (guchar *) pem, (guint) strlen (pem) }, name = { NULL, 0 };
  g_autofree gchar *base = g_path_get_basename (f->dir);
  g_autofree gchar *expected = g_strdup_printf ("CN=Vivarium session CA %s", base);
  g_autoptr(GPtrArray) permitted = g_ptr_array_new_with_free_func (g_free);
  unsigned int critical = 0, type = 0, ca = 0;
  int pathlen = -1, is_ca;

  g_assert_cmpint (gnutls_x509_crt_init (&crt), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_import (crt, &in, GNUTLS_X509_FMT_PEM), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_get_dn3 (crt, &name, 0), ==, 0);
  g_assert_cmpstr ((const gchar *) name.data, ==, expected);
  gnutls_free (name.data);
  is_ca = gnutls_x509_crt_get_basic_constraints (crt, &critical, &ca, &pathlen);
  g_assert_cmpint (is_ca, ==, 1);
  g_assert_cmpint (pathlen, ==, 0);
  g_assert_cmpint (gnutls_x509_name_constraints_init (&nc), ==, 0);
  g_assert_cmpint (gnutls_x509_crt_get_name_constraints (crt, nc, 0, &critical), ==, 0);
  g_assert_cmpuint (critical, ==, 1);
  for (guint i = 0; gnutls_x509_name_constraints_get_permitted (nc, i, &type, &name) == 0; i++) {
    g_assert_cmpuint (type, ==, GNUTLS_SAN_DNSNAME);
    g_ptr_array_add (permitted, g_strndup ((const gchar *) name.data, name.size));
  }
  g_ptr_array_add (permitted, NULL);
  g_assert_cmpstrv (permitted->pdata, ((const gchar *const[]) { "api.test", "other.test", "bad.test", "noint.test",
                                                                NULL }));
  g_assert_cmpint (gnutls_x509_name_constraints_get_excluded (nc, 0, &type, &name), ==, 0);
  g_assert_cmpuint (type, ==, GNUTLS_SAN_IPADDRESS);
  gnutls_x509_name_constraints_deinit (nc);
  gnutls_x509_crt_deinit (crt);
}

/* The session CA is written before READY=1; the secrets file is gone; a
 * placeholder in its header reaches the server as the value, request
 * after request on one connection (keep-alive), through both doors. */
static void
test_secret_swapped (Fixture *f, gconstpointer data)
{
  g_autofree gchar *ca = session_ca (f);
  g_autofree gchar *secrets = g_build_filename (f->dir, "secrets", NULL);
  g_autofree gchar *auth = g_strdup_printf ("Authorization: Bearer %s\r\n", f->ph_a);
  g_autofree gchar *req1 = get_with ("api.test", "/one", auth);
  g_autofree gchar *post = g_strdup_printf ("POST /two HTTP/1.1\r\nHost: api.test\r\n%sContent-Length: 5\r\n\r\nhello",
                                            auth);
  g_autofree gchar *chunked = g_strdup_printf ("POST /three HTTP/1.1\r\nHost: api.test:443\r\n%s"
                                               "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", auth);
  g_autofree gchar *answer = NULL;
  g_autofree gchar *seen = NULL;
  g_autofree gchar *ca_text = NULL;
  g_autoptr(GIOStream) tls = NULL;
  g_autoptr(GError) error = NULL;
  struct stat st;

  g_assert_cmpint (g_stat (ca, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 0777, ==, 0644);
  g_assert_true (g_file_get_contents (ca, &ca_text, NULL, NULL));
  g_assert_true (g_str_has_prefix (ca_text, "-----BEGIN CERTIFICATE-----"));
  check_session_ca (f, ca_text);
  g_assert_false (g_file_test (secrets, G_FILE_TEST_EXISTS));

  tls = tls_open (f, "tls.sock", "api.test", ca, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_tls_connection_get_negotiated_protocol (G_TLS_CONNECTION (tls)), ==, "http/1.1");
  for (guint i = 0; i < 3; i++) {
    const gchar *req = i == 0 ? req1 : i == 1 ? post : chunked;
    g_free (answer);
    answer = exchange (tls, req, strlen (req));
    g_assert_nonnull (answer);
    g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 200 OK\r\n"));
  }
  g_io_stream_close (tls, NULL, NULL);
  seen = https_seen (f);
  g_assert_nonnull (strstr (seen, "GET /one HTTP/1.1\r\n"));
  g_assert_nonnull (strstr (seen, "Authorization: Bearer " VALUE_A "\r\n"));
  g_assert_nonnull (strstr (seen, "\r\n\r\nhello"));
  g_assert_nonnull (strstr (seen, "\r\n\r\nabc"));
  g_assert_null (strstr (seen, f->ph_a));
  g_assert_null (strstr (seen, "Bearer Bearer"));
  find_decision (f, "tls", "allowed", "TLS intercepted: 3 requests, secrets swapped in: A");

  /* CONNECT api.test:443 is intercepted the same way; a bare placeholder
   * gets the format around it. */
  g_clear_object (&tls);
  tls = tls_open (f, "proxy.sock", "api.test", ca, &error);
  g_assert_no_error (error);
  g_free (auth);
  auth = g_strdup_printf ("Authorization: %s\r\n", f->ph_a);
  g_free (req1);
  req1 = get_with ("api.test", "/four", auth);
  g_free (answer);
  answer = exchange (tls, req1, strlen (req1));
  g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 200 OK\r\n"));
  g_io_stream_close (tls, NULL, NULL);
  g_free (seen);
  seen = https_seen (f);
  g_assert_nonnull (strstr (seen, "GET /four HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer " VALUE_A "\r\n"));
  find_decision (f, "proxy", "allowed", "TLS intercepted: 1 requests, secrets swapped in: A");
}

static gchar *
percent_all (const gchar *text)
{
  GString *out = g_string_new (NULL);

  for (const gchar *p = text; *p != '\0'; p++)
    g_string_append_printf (out, "%%%02X", (guchar) *p);
  return g_string_free (out, FALSE);
}

static gchar *
json_escaped (const gchar *text)
{
  GString *out = g_string_new (NULL);

  for (const gchar *p = text; *p != '\0'; p++)
    g_string_append_printf (out, "\\u%04x", (guchar) *p);
  return g_string_free (out, FALSE);
}

/* One request on a new intercepted connection to host: refused with a 403
 * and the reason, which the decision log has too. The server never saw
 * the request, not even in part; or, with @streamed (a chunked body: its
 * head goes on before the body is read), never a byte of a placeholder. */
static void
assert_refused_as (Fixture *f, const gchar *host, const gchar *request, gsize len, const gchar *reason,
                   gboolean streamed)
{
  g_autofree gchar *ca = session_ca (f);
  guint closed = https_closed (f);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) tls = tls_open (f, "tls.sock", host, ca, &error);
  g_autofree gchar *answer = NULL;
  g_autofree gchar *before = https_seen (f);
  g_autofree gchar *partial_before = https_partial (f);
  g_autofree gchar *partial = NULL;
  g_autofree gchar *after = NULL;
  g_autoptr(JsonObject) d = NULL;

  g_assert_no_error (error);
  answer = exchange (tls, request, len);
  g_assert_nonnull (answer);
  if (!g_str_has_prefix (answer, "HTTP/1.1 403 Forbidden\r\n") || strstr (answer, reason) == NULL)
    g_error ("expected a 403 with “%s” for %s, got: %s", reason, request, answer);
  g_io_stream_close (tls, NULL, NULL);
  d = find_decision (f, "tls", "denied", reason);
  g_assert_cmpstr (json_object_get_string_member (d, "host"), ==, host);
  https_wait_closed (f, closed);
  after = https_seen (f);
  g_assert_cmpstr (before, ==, after);
  partial = https_partial (f);
  g_assert_true (g_str_has_prefix (partial, partial_before));
  if (!streamed && partial[strlen (partial_before)] != '\0')
    g_error ("the server got part of a refused request: %.200s", partial + strlen (partial_before));
  if (strstr (partial + strlen (partial_before), "vivarium-secret-") != NULL)
    g_error ("the server got a piece of a placeholder: %.200s", partial + strlen (partial_before));
}

static void
assert_refused (Fixture *f, const gchar *host, const gchar *request, gsize len, const gchar *reason)
{
  assert_refused_as (f, host, request, len, reason, FALSE);
}

static void
test_secret_refused (Fixture *f, gconstpointer data)
{
  g_autofree gchar *auth_a = g_strdup_printf ("Authorization: Bearer %s\r\n", f->ph_a);
  g_autofree gchar *pct = percent_all (f->ph_a);
  g_autofree gchar *json = json_escaped (f->ph_b);
  g_autofree gchar *in_url = g_strdup_printf ("/x?token=%s", f->ph_a);
  g_autofree gchar *req = NULL;
  g_autofree gchar *hdr = NULL;
  g_autofree gchar *half = NULL;

  req = get_with ("api.test", in_url, "");
  assert_refused (f, "api.test", req, strlen (req), "a secret's placeholder (A) was sent to api.test:443 in the URL");
  g_free (req);
  hdr = g_strdup_printf ("X-Other: a %s b\r\n", f->ph_a);
  req = get_with ("api.test", "/", hdr);
  assert_refused (f, "api.test", req, strlen (req), "(A) was sent to api.test:443 in the header X-Other");
  /* A's placeholder to B's host, in the header A would have it in. */
  g_free (req);
  req = get_with ("other.test", "/", auth_a);
  assert_refused (f, "other.test", req, strlen (req), "(A) was sent to other.test:443 in the header Authorization");
  /* B's placeholder in B's own header on A's host: not B's host. */
  g_free (hdr);
  hdr = g_strdup_printf ("X-Api-Key: %s\r\n", f->ph_b);
  g_free (req);
  req = get_with ("api.test", "/", hdr);
  assert_refused (f, "api.test", req, strlen (req), "(B) was sent to api.test:443 in the header X-Api-Key");
  /* Bodies: raw, percent-encoded, JSON-escaped, base64 at each alignment. */
  {
    const gchar *bodies[6];
    g_autofree gchar *raw = g_strdup_printf ("token=%s", f->ph_a);
    g_autofree gchar *b64[3] = { NULL };
    bodies[0] = raw;
    bodies[1] = pct;
    bodies[2] = json;
    for (guint align = 0; align < 3; align++) {
      g_autofree gchar *plain = g_strdup_printf ("%.*s%s", align, "xy", f->ph_a);
      b64[align] = g_base64_encode ((const guchar *) plain, strlen (plain));
      bodies[3 + align] = b64[align];
    }
    for (guint i = 0; i < G_N_ELEMENTS (bodies); i++) {
      g_autofree gchar *post = g_strdup_printf ("POST / HTTP/1.1\r\nHost: api.test\r\n%sContent-Length: %zu\r\n\r\n%s",
                                                auth_a, strlen (bodies[i]), bodies[i]);
      assert_refused (f, "api.test", post, strlen (post), i == 2 ? "(B) was sent to api.test:443 in the body"
                                                                 : "(A) was sent to api.test:443 in the body");
    }
  }
  /* Split across two chunks of a chunked body, after 100 KiB: the head and
   * what came before went on, no byte of the placeholder. */
  half = g_strndup (f->ph_a, 20);
  g_free (req);
  {
    g_autofree gchar *lead = g_strnfill (100 * 1024, 'x');
    req = g_strdup_printf ("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "%zx\r\n%s%s\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen (lead) + strlen (half), lead, half,
                           strlen (f->ph_a + 20), f->ph_a + 20);
  }
  assert_refused_as (f, "api.test", req, strlen (req), "(A) was sent to api.test:443 in the body", TRUE);
  /* In a Content-Length body too large to be held whole (100 KiB of it
   * before the placeholder): no byte of the placeholder. */
  {
    g_autofree gchar *lead = g_strnfill (100 * 1024, 'x');
    g_autofree gchar *post = g_strdup_printf ("POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: %zu\r\n\r\n%s%s",
                                              strlen (lead) + strlen (f->ph_a), lead, f->ph_a);
    assert_refused_as (f, "api.test", post, strlen (post), "(A) was sent to api.test:443 in the body", TRUE);
  }
  /* Where the proxy could read a request otherwise than the server, or
   * the request is not for this server: refused, before anything goes. */
  {
    const gchar *const cases[][2] = {
      { "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
        "the chunked body has a chunk size that is not a number" },
      { "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n 3\r\nabc\r\n0\r\n\r\n",
        "the chunked body has a chunk size that is not a number" },
      { "POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "the request's Transfer-Encoding is not chunked alone" },
      { "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "the request has both Transfer-Encoding and Content-Length" },
      { "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3, 4\r\n\r\nabcd",
        "the request's Content-Length is not one number" },
      { "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "the request's Host header is not api.test" },
      { "CONNECT other.test:443 HTTP/1.1\r\nHost: api.test\r\n\r\n",
        "CONNECT inside an intercepted connection is not proxied" },
    };
    for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
      assert_refused (f, "api.test", cases[i][0], strlen (cases[i][0]), cases[i][1]);
  }
}

/* Plain HTTP (both HTTP doors), CONNECT, SNI, DNS: refused anywhere. */
static void
test_secret_refused_plain (Fixture *f, gconstpointer data)
{
  g_autofree gchar *plain = g_strdup_printf ("GET / HTTP/1.1\r\nHost: localhost:%u\r\nX-T: %s\r\n\r\n", f->up.port,
                                             f->ph_a);
  g_autofree gchar *absolute = g_strdup_printf ("GET http://localhost:%u/?t=%s HTTP/1.1\r\nHost: localhost\r\n\r\n",
                                                f->up.port, f->ph_b);
  g_autofree gchar *body = g_strdup_printf ("POST / HTTP/1.1\r\nHost: localhost:%u\r\nContent-Length: 48\r\n\r\n%s",
                                            f->up.port, f->ph_a);
  g_autofree gchar *target = g_strdup_printf ("%s.test", f->ph_a);
  g_autofree gchar *connect = connect_request (target, 443);
  GString *answer = NULL;
  g_autoptr(GString) rest = NULL;
  g_autoptr(GSocket) c = NULL;
  gsize hello_len;
  const guint8 *hello;
  guint8 query[128], reply[128];
  gsize qlen = 0;

  answer = ask (f, "http.sock", plain);
  g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
  find_decision (f, "http", "denied", "(A) was sent to localhost:");
  find_decision (f, "http", "denied", "in the header X-T: refused");
  g_string_free (answer, TRUE);
  answer = ask (f, "proxy.sock", absolute);
  g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
  find_decision (f, "proxy", "denied", "(B) was sent to localhost");
  find_decision (f, "proxy", "denied", "in the URL: refused");
  g_string_free (answer, TRUE);
  answer = ask (f, "http.sock", body);
  g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
  find_decision (f, "http", "denied", "(A) was sent to localhost");
  find_decision (f, "http", "denied", "in the body: refused");
  g_string_free (answer, TRUE);
  answer = ask (f, "proxy.sock", connect);
  g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
  find_decision (f, "proxy", "denied", "in the CONNECT target: refused");
  g_string_free (answer, TRUE);
  /* In a header of the CONNECT request itself. */
  {
    g_autofree gchar *req = g_strdup_printf ("CONNECT localhost:%u HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n",
                                             f->up.port, f->ph_b);
    answer = ask (f, "proxy.sock", req);
    g_assert_true (g_str_has_prefix (answer->str, "HTTP/1.1 403 Forbidden\r\n"));
    find_decision (f, "proxy", "denied", "in the header Proxy-Authorization: refused");
    g_string_free (answer, TRUE);
  }
  /* Through a tunnel that is not TLS, in its very first bytes. */
  {
    g_autoptr(GSocket) t = connect_door (f, "proxy.sock");
    g_autofree gchar *req = connect_request ("localhost", f->up.port);
    g_autofree gchar *head = NULL;
    g_autofree gchar *first = g_strdup_printf ("GET /%s HTTP/1.1\r\nHost: x\r\n\r\n", f->ph_a);
    g_autoptr(GString) left = NULL;
    send_text (t, req, strlen (req));
    head = read_reply_head (t);
    g_assert_cmpstr (head, ==, "HTTP/1.1 200 Connection established\r\n\r\n");
    send_text (t, first, strlen (first));
    left = read_all (t);
    g_assert_cmpuint (left->len, ==, 0);
    find_decision (f, "proxy", "denied", "in the tunnelled data: refused");
  }

  c = connect_door (f, "tls.sock");
  hello = hello_for (target, &hello_len);
  send_text (c, (const gchar *) hello, hello_len);
  rest = read_all (c);
  g_assert_cmpuint (rest->len, ==, 0);
  find_decision (f, "tls", "denied", "in the SNI: refused");

  /* A DNS question for PLACEHOLDER.test: REFUSED, and logged. */
  g_clear_object (&c);
  c = connect_door (f, "dns.sock");
  memcpy (query + 2, "\x12\x36\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
  qlen = 14;
  query[qlen++] = 48;
  memcpy (query + qlen, f->ph_a, 48);
  qlen += 48;
  memcpy (query + qlen, "\x04test\x00\x00\x01\x00\x01", 10);
  qlen += 10;
  query[0] = 0;
  query[1] = qlen - 2;
  send_text (c, (const gchar *) query, qlen);
  read_exact (c, reply, 2 + 12);
  g_assert_cmpuint (reply[2 + 3] & 0x0f, ==, 5);
  find_decision (f, "dns", "denied", "in the DNS name: refused");
}

/* A host without a secret, and one whose rule says no-intercept: the
 * client sees the server's own certificate (the test CA's), never one
 * the proxy minted. */
static void
test_secret_tunnelled (Fixture *f, gconstpointer data)
{
  const gchar *hosts[] = { "plain.test", "noint.test" };

  for (guint i = 0; i < G_N_ELEMENTS (hosts); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GIOStream) tls = tls_open (f, "tls.sock", hosts[i], test_ca_pem, &error);
    g_autofree gchar *req = get_with (hosts[i], "/tunnel", "");
    g_autofree gchar *answer = NULL;
    g_autofree gchar *issuer = NULL;
    GTlsCertificate *peer;
    g_assert_no_error (error);
    peer = g_tls_connection_get_peer_certificate (G_TLS_CONNECTION (tls));
    g_object_get (peer, "issuer-name", &issuer, NULL);
    g_assert_nonnull (strstr (issuer, "vivarium test CA"));
    answer = exchange (tls, req, strlen (req));
    g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 200 OK\r\n"));
    g_io_stream_close (tls, NULL, NULL);
  }
  find_decision (f, "tls", "allowed", "allowed by plain.test:443 (session)");
  find_decision (f, "tls", "allowed", "allowed by noint.test:443 (session)");
}

/* bad.test has a secret, and the server's certificate does not name it:
 * the guest's connection is closed, nothing of it reaches the server. */
static void
test_secret_untrusted (Fixture *f, gconstpointer data)
{
  g_autofree gchar *ca = session_ca (f);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) tls = tls_open (f, "tls.sock", "bad.test", ca, &error);

  g_assert_null (tls);
  g_assert_nonnull (error);
  find_decision (f, "tls", "denied", "the certificate of bad.test is not trusted: it is not for bad.test");
}

/* --upstream-ca is what upstream certificates are checked against: a CA
 * that did not sign the server's makes it untrusted. */
static void
test_secret_foreign_ca (Fixture *f, gconstpointer data)
{
  g_autofree gchar *ca = session_ca (f);
  g_autoptr(GError) error = NULL;
  g_autoptr(GIOStream) tls = tls_open (f, "proxy.sock", "api.test", ca, &error);

  g_assert_null (tls);
  find_decision (f, "proxy", "denied",
                 "the certificate of api.test is not trusted: it is not signed by an authority the proxy trusts");
}

/* What interception costs, side by side with a tunnel to the same server
 * (the numbers go to the test's log; only that both work is asserted):
 * connection set-up with a first small request, and a download. */
static gdouble
measure (Fixture *f, const gchar *host, const gchar *ca, guint rounds, guint64 bytes)
{
  g_autofree gchar *req = g_strdup_printf ("GET /bytes/%" G_GUINT64_FORMAT " HTTP/1.1\r\nHost: %s\r\n\r\n", bytes,
                                           host);
  gint64 start = g_get_monotonic_time ();

  for (guint i = 0; i < rounds; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GIOStream) tls = tls_open (f, "tls.sock", host, ca, &error);
    g_autofree gchar *answer = NULL;
    g_assert_no_error (error);
    answer = exchange (tls, req, strlen (req));
    g_assert_nonnull (answer);
    g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 200 OK\r\n"));
    g_io_stream_close (tls, NULL, NULL);
  }
  return (g_get_monotonic_time () - start) / 1000.0 / rounds;
}

static void
test_secret_cost (Fixture *f, gconstpointer data)
{
  g_autofree gchar *ca = session_ca (f);
  const guint mib = 8;
  gdouble tunnel_ms = measure (f, "plain.test", test_ca_pem, 5, 10);
  gdouble intercept_ms = measure (f, "api.test", ca, 5, 10);
  gdouble tunnel_big = measure (f, "plain.test", test_ca_pem, 1, mib * 1024 * 1024);
  gdouble intercept_big = measure (f, "api.test", ca, 1, mib * 1024 * 1024);

  g_test_message ("set-up and a small request: tunnelled %.1f ms, intercepted %.1f ms", tunnel_ms, intercept_ms);
  g_test_message ("%u MiB down: tunnelled %.0f MiB/s, intercepted %.0f MiB/s", mib, mib / (tunnel_big / 1000),
                  mib / (intercept_big / 1000));
}

/* A secrets file that does not load: no start, the file gone all the same. */
static void
test_secret_bad_file (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = g_dir_make_tmp ("test-egress-XXXXXX", &error);
  g_autofree gchar *policy = g_build_filename (dir, "policy", NULL);
  g_autofree gchar *deny = g_build_filename (dir, "deny", NULL);
  g_autofree gchar *secrets = g_build_filename (dir, "secrets", NULL);
  g_autofree gchar *err = NULL;
  g_autoptr(VivariumEgressPolicy) p = vivarium_egress_policy_new ();
  g_autoptr(GSubprocess) proxy = NULL;

  g_assert_true (vivarium_egress_policy_save (p, policy, 0644, &error));
  g_assert_true (g_file_set_contents (deny, "10.0.0.0/8\n", -1, NULL));
  g_assert_true (g_file_set_contents (secrets, "[Secrets]\nnot=this\n", -1, NULL));
  proxy = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, &error, g_getenv ("VIVARIUM_EGRESS"), "--dir", dir,
                            "--policy", policy, "--deny", deny, "--peer-uid", "0", "--secrets", secrets, NULL);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_communicate_utf8 (proxy, NULL, NULL, NULL, &err, &error));
  g_assert_cmpint (g_subprocess_get_exit_status (proxy), ==, 1);
  g_assert_nonnull (strstr (err, "the secrets file does not load"));
  g_assert_false (g_file_test (secrets, G_FILE_TEST_EXISTS));
  for (const gchar *const *n = (const gchar *const[]) { "policy", "deny", "decisions.jsonl", "usage", "proxy.sock",
                                                          "http.sock", "tls.sock", "dns.sock", NULL };
       *n != NULL; n++) {
    g_autofree gchar *path = g_build_filename (dir, *n, NULL);
    g_unlink (path);
  }
  g_rmdir (dir);
}

/* --- the namespace and the certificates ------------------------------------------------ */

static void
bring_up_loopback (void)
{
  struct ifreq ifr = { 0 };
  int fd = socket (AF_INET, SOCK_DGRAM, 0);

  g_assert_cmpint (fd, >=, 0);
  strcpy (ifr.ifr_name, "lo");
  g_assert_cmpint (ioctl (fd, SIOCGIFFLAGS, &ifr), ==, 0);
  ifr.ifr_flags |= IFF_UP;
  g_assert_cmpint (ioctl (fd, SIOCSIFFLAGS, &ifr), ==, 0);
  close (fd);
}

static void
isolate (const gchar *dir)
{
  g_autofree gchar *hosts = g_build_filename (dir, "hosts", NULL);

  if (getuid () != 0)
    return;   /* the secrets cases then fail, saying so */
  g_assert_cmpint (unshare (CLONE_NEWNS | CLONE_NEWNET), ==, 0);
  g_assert_cmpint (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), ==, 0);
  g_assert_true (g_file_set_contents (hosts, "127.0.0.1 localhost api.test other.test plain.test bad.test noint.test\n",
                                      -1, NULL));
  g_assert_cmpint (mount (hosts, "/etc/hosts", NULL, MS_BIND, NULL), ==, 0);
  bring_up_loopback ();
  isolated = TRUE;
}

static void
run_openssl (const gchar *dir, const gchar *args)
{
  g_autofree gchar *cmd = g_strdup_printf ("cd '%s' && openssl %s", dir, args);
  g_autofree gchar *out = NULL, *err = NULL;
  gint status;
  g_autoptr(GError) error = NULL;
  const gchar *argv[] = { "/bin/sh", "-c", cmd, NULL };

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("openssl %s: %s", args, err);
}

/* A CA of the test's own (the "public" one the upstream's certificate is
 * from) and a server certificate for every test name but bad.test. */
static void
make_certificates (const gchar *dir)
{
  g_autofree gchar *ext = g_build_filename (dir, "ext.cnf", NULL);

  g_assert_true (g_file_set_contents (ext, "subjectAltName=DNS:api.test,DNS:other.test,DNS:plain.test,"
                                      "DNS:noint.test\n", -1, NULL));
  run_openssl (dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem "
                    "-subj '/CN=vivarium test CA' -days 2 -addext basicConstraints=critical,CA:TRUE "
                    "-addext keyUsage=critical,keyCertSign");
  run_openssl (dir, "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr "
                    "-subj /CN=api.test");
  run_openssl (dir, "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
                    "-extfile ext.cnf");
  run_openssl (dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout foreign-ca.key "
                    "-out foreign-ca.pem -subj '/CN=a foreign CA' -days 2 -addext basicConstraints=critical,CA:TRUE");
  test_ca_pem = g_build_filename (dir, "ca.pem", NULL);
}

static void
remove_certificates (const gchar *dir)
{
  const gchar *names[] = { "ext.cnf", "ca.key", "ca.pem", "ca.srl", "server.key", "server.csr", "server.pem", "hosts",
                           "foreign-ca.key", "foreign-ca.pem", NULL };

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_unlink (path);
  }
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  certs_dir = g_dir_make_tmp ("test-egress-certs-XXXXXX", &error);
  g_assert_no_error (error);
  isolate (certs_dir);
  make_certificates (certs_dir);
  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);
  g_assert_nonnull (g_getenv ("VIVARIUM_EGRESS"));
#define ADD(name, config, fn) \
  g_test_add ("/egress/proxy/" name, Fixture, &config, fixture_set_up, fn, fixture_tear_down)
  ADD ("connect-allowed", open_loopback, test_connect_allowed);
  ADD ("denied-name", open_loopback, test_denied_name);
  ADD ("absolute-get", open_loopback, test_absolute_get);
  ADD ("sni-mismatch", open_loopback, test_sni_mismatch);
  ADD ("sni-match", open_loopback, test_sni_match);
  ADD ("rebinding", real_deny_list, test_rebinding);
  ADD ("ip-literal", open_loopback, test_ip_literal);
  ADD ("download-limit", small_download, test_download_limit);
  ADD ("upload-limit", small_upload, test_upload_limit);
  ADD ("upstream-closes-first", closing_upstream, test_upstream_closes_first);
  ADD ("lookup-timeout", silent_resolver, test_lookup_timeout);
  ADD ("other-uid", open_loopback, test_other_uid);
  ADD ("dns", open_loopback, test_dns);
  ADD ("transparent-tls", open_loopback, test_transparent_tls);
  ADD ("transparent-http", open_loopback, test_transparent_http);
  ADD ("net-stream", open_loopback, test_net_stream);
  ADD ("net-garbage-length", open_loopback, test_net_garbage_length);
  ADD ("net-stream-given", given_net_socket, test_net_stream);
  ADD ("net-fd-not-listening", open_loopback, test_net_fd_not_listening);
  ADD ("log-full", short_log, test_log_full);
  ADD ("dns-bound", open_loopback, test_dns_bound);
  ADD ("connection-bound", open_loopback, test_connection_bound);
  ADD ("head-bounds", open_loopback, test_head_bounds);
  ADD ("empty-deny", open_loopback, test_empty_deny);
  g_test_add_func ("/egress/proxy/bad-policy", test_bad_policy);
  ADD ("secret-swapped", with_secrets, test_secret_swapped);
  ADD ("secret-refused", with_secrets, test_secret_refused);
  ADD ("secret-refused-plain", with_secrets, test_secret_refused_plain);
  ADD ("secret-tunnelled", with_secrets, test_secret_tunnelled);
  ADD ("secret-untrusted", with_secrets, test_secret_untrusted);
  ADD ("secret-foreign-ca", foreign_upstream_ca, test_secret_foreign_ca);
  ADD ("secret-cost", with_secrets, test_secret_cost);
  g_test_add_func ("/egress/proxy/secret-bad-file", test_secret_bad_file);
  status = g_test_run ();
  remove_certificates (certs_dir);
  return status;
}
