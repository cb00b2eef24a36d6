/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The built vivarium-egress, end to end: a policy saved the daemon's way,
 * its four sockets, a loopback HTTP server in this test as the "internet"
 * (the deny list given to the proxy leaves out 127.0.0.0/8 for that, and
 * only that), and the decision log and usage file read back. Then the
 * guest's network on net.sock, as QEMU's stream netdev speaks to it.
 * Nothing leaves loopback. Needs root for the other-uid case. */

#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-denylist.h"
#include "vivarium-egress-policy.h"

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

typedef struct {
  gchar       *dir;
  Upstream     up;
  GSubprocess *proxy;
} Fixture;

typedef struct {
  gboolean     deny_loopback;    /* the real deny list: 127.0.0.0/8 in it */
  guint64      limit_down;
  guint        log_max_entries;  /* 0: the default */
  guint64      limit_up;
} ProxyConfig;

static gchar *
write_policy (Fixture *f)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *rule = g_strdup_printf ("localhost:%u", f->up.port);
  gchar *path = g_build_filename (f->dir, "policy", NULL);

  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, rule, "group test", &error));
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

  g_subprocess_launcher_setenv (launcher, "NOTIFY_SOCKET", notify_path, TRUE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_test, NULL, NULL);
  f->proxy = g_subprocess_launcher_spawn (launcher, &error, g_getenv ("VIVARIUM_EGRESS"), "--dir", f->dir,
                                          "--policy", policy, "--deny", deny, "--peer-uid", uid,
                                          "--limit-down", limit, "--limit-up", limit_up,
                                          "--log-max-entries", entries, NULL);
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
  upstream_start (&f->up);
  proxy_start (f, data);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GFile) dir = g_file_new_for_path (f->dir);
  g_autoptr(GFileEnumerator) children = g_file_enumerate_children (dir, "standard::name", 0, NULL, NULL);
  GFileInfo *info;

  g_subprocess_force_exit (f->proxy);
  g_subprocess_wait (f->proxy, NULL, NULL);
  g_object_unref (f->proxy);
  g_cancellable_cancel (f->up.stop);
  g_thread_join (f->up.thread);
  g_socket_listener_close (f->up.listener);
  g_object_unref (f->up.stop);
  g_object_unref (f->up.listener);
  g_string_free (f->up.last_head, TRUE);
  while (children != NULL && (info = g_file_enumerator_next_file (children, NULL, NULL)) != NULL) {
    g_autofree gchar *path = g_build_filename (f->dir, g_file_info_get_name (info), NULL);
    g_unlink (path);
    g_object_unref (info);
  }
  g_rmdir (f->dir);
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

int
main (int argc, char **argv)
{
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
  ADD ("other-uid", open_loopback, test_other_uid);
  ADD ("dns", open_loopback, test_dns);
  ADD ("transparent-tls", open_loopback, test_transparent_tls);
  ADD ("transparent-http", open_loopback, test_transparent_http);
  ADD ("net-stream", open_loopback, test_net_stream);
  ADD ("net-garbage-length", open_loopback, test_net_garbage_length);
  ADD ("log-full", short_log, test_log_full);
  ADD ("dns-bound", open_loopback, test_dns_bound);
  ADD ("connection-bound", open_loopback, test_connection_bound);
  ADD ("head-bounds", open_loopback, test_head_bounds);
  ADD ("empty-deny", open_loopback, test_empty_deny);
  g_test_add_func ("/egress/proxy/bad-policy", test_bad_policy);
  return g_test_run ();
}
