/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDnsRelay"

#include "config.h"

#include <errno.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vd-dns-relay.h"
#include "vd-netns.h"

#define HOST_RESOLV_CONF   "/etc/resolv.conf"
#define MAX_NAMESERVERS    3          /* glibc's MAXNS: it reads no more */
#define DNS_PORT           53
#define DNS_HEADER         12
#define UDP_MAX            4096
#define TCP_MAX            65535
#define MAX_IN_FLIGHT      256
#define QUERY_TIMEOUT_SEC  5
#define UDP_BURST          64
#define MAC_TAG            0x01
/* The daemon has no CAP_NET_BIND_SERVICE; inside the relay's own netns,
 * where nothing but the relay opens sockets, port 53 is made unprivileged. */
#define UNPRIVILEGED_PORT_SYSCTL "/proc/sys/net/ipv4/ip_unprivileged_port_start"

struct _VdDnsRelay {
  GObject          parent_instance;
  VdConfig        *config;
  VdNetns         *netns;
  gchar           *dir;
  gchar           *resolv_conf;
  GPtrArray       *upstreams;     /* GInetSocketAddress, port 53 */
  gint             udp_fd;        /* opened inside the netns */
  gint             tcp_fd;
  GSocket         *udp;
  GSource         *udp_source;
  GSocketListener *tcp;
  GSocketClient   *client;
  GCancellable    *cancellable;   /* cancelled at stop */
  GHashTable      *udp_queries;   /* UdpQuery set, owns them */
  GHashTable      *tcp_queries;   /* TcpQuery set, unowned */
  guint            in_flight;
  guint64          relayed;
  guint64          dropped;
  gboolean         active;
};

G_DEFINE_TYPE (VdDnsRelay, vd_dns_relay, G_TYPE_OBJECT)

typedef struct {
  VdDnsRelay     *relay;
  GSocketAddress *client;
  guint8          id[2];
  GPtrArray      *sources;        /* GSource, one per nameserver socket */
  guint           failed;
  GSource        *timeout;
  gint64          started;
} UdpQuery;

typedef struct {
  VdDnsRelay     *relay;          /* strong: callbacks may outlive a stop */
  GIOStream      *client;
  GIOStream      *upstream;
  GCancellable   *cancellable;
  GSource        *timeout;
  guint           next_upstream;
  guint8          id[2];
  guint8          len[2];
  guint8         *msg;            /* 2-byte length prefix + message */
  gsize           msg_len;
  gint64          started;
} TcpQuery;

static void
vd_dns_relay_finalize (GObject *object)
{
  VdDnsRelay *self = VD_DNS_RELAY (object);

  vd_dns_relay_stop (self);
  g_hash_table_unref (self->udp_queries);
  g_hash_table_unref (self->tcp_queries);
  g_clear_pointer (&self->upstreams, g_ptr_array_unref);
  g_clear_object (&self->client);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->netns);
  g_clear_object (&self->config);
  g_free (self->dir);
  g_free (self->resolv_conf);
  G_OBJECT_CLASS (vd_dns_relay_parent_class)->finalize (object);
}

static void
vd_dns_relay_class_init (VdDnsRelayClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_dns_relay_finalize;
}

static void udp_query_free (UdpQuery *q);

static void
vd_dns_relay_init (VdDnsRelay *self)
{
  self->udp_fd = -1;
  self->tcp_fd = -1;
  self->udp_queries = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) udp_query_free, NULL);
  self->tcp_queries = g_hash_table_new (NULL, NULL);
  self->client = g_socket_client_new ();
}

static gchar *
relay_dir (const gchar *runtime_dir)
{
  return g_build_filename (runtime_dir, "dns", NULL);
}

VdDnsRelay *
vd_dns_relay_new (VdConfig *config)
{
  VdDnsRelay *self = g_object_new (VD_TYPE_DNS_RELAY, NULL);

  self->config = g_object_ref (config);
  self->dir = relay_dir (vd_config_get_runtime_dir (config));
  self->resolv_conf = g_build_filename (self->dir, "resolv.conf", NULL);
  self->netns = vd_netns_new (self->dir, VD_DNS_RELAY_HOST_LINK, VD_DNS_RELAY_PEER_LINK, MAC_TAG);
  return self;
}

gboolean vd_dns_relay_is_active (VdDnsRelay *self) { return self->active; }

const gchar *
vd_dns_relay_get_resolv_conf (VdDnsRelay *self)
{
  return self->active ? self->resolv_conf : NULL;
}

/* --- which nameservers, and is a relay needed ------------------------- */

static GPtrArray *
read_nameservers (const gchar *path)
{
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func (g_object_unref);

  if (g_file_get_contents (path, &text, NULL, NULL))
    lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines != NULL && lines[i] != NULL && out->len < MAX_NAMESERVERS; i++) {
    gchar *line = g_strstrip (lines[i]);
    GSocketAddress *addr;

    if (!g_str_has_prefix (line, "nameserver") || (line[10] != ' ' && line[10] != '\t'))
      continue;
    line = g_strstrip (line + 10);
    line[strcspn (line, " \t#;")] = '\0';
    addr = g_inet_socket_address_new_from_string (line, DNS_PORT);
    if (addr != NULL)
      g_ptr_array_add (out, addr);
    else
      g_warning ("%s: ignoring nameserver “%s”", path, line);
  }
  /* What glibc uses when the file names none. */
  if (out->len == 0)
    g_ptr_array_add (out, g_inet_socket_address_new_from_string ("127.0.0.1", DNS_PORT));
  return out;
}

static gboolean
in_cidr (GInetAddress *addr, const gchar *cidr)
{
  g_autoptr(GInetAddress) net = NULL;
  const guint8 *a, *n;
  guint prefix, full, rest;

  if (!vivarium_cidr_parse (cidr, &net, &prefix, NULL) ||
      g_inet_address_get_family (net) != g_inet_address_get_family (addr))
    return FALSE;
  a = g_inet_address_to_bytes (addr);
  n = g_inet_address_to_bytes (net);
  full = prefix / 8;
  rest = prefix % 8;
  if (memcmp (a, n, full) != 0)
    return FALSE;
  return rest == 0 || ((a[full] ^ n[full]) & (guint8) (0xff << (8 - rest))) == 0;
}

/* bind() succeeds only for an address of the host's own: the guard's
 * "host's own addresses" rule. */
static gboolean
is_local (GInetAddress *addr)
{
  g_autoptr(GSocket) sock = g_socket_new (g_inet_address_get_family (addr), G_SOCKET_TYPE_DATAGRAM,
                                          G_SOCKET_PROTOCOL_UDP, NULL);
  g_autoptr(GSocketAddress) any_port = g_inet_socket_address_new (addr, 0);

  return sock != NULL && g_socket_bind (sock, any_port, FALSE, NULL);
}

static gboolean
is_denied (VdDnsRelay *self, GInetAddress *addr)
{
  g_autoptr(GPtrArray) list = vivarium_denylist_to_strings ();
  g_auto(GStrv) extra = vd_config_get_extra_deny (self->config);

  for (guint i = 0; i < list->len; i++) {
    if (in_cidr (addr, g_ptr_array_index (list, i)))
      return TRUE;
  }
  for (guint i = 0; extra[i] != NULL; i++) {
    if (in_cidr (addr, extra[i]))
      return TRUE;
  }
  return is_local (addr);
}

static gboolean
want_relay (VdDnsRelay *self)
{
  const gchar *mode = vd_config_get_dns_relay (self->config);

  if (g_strcmp0 (mode, "never") == 0) {
    g_info ("DNS relay off ([Guard] DnsRelay=never)");
    return FALSE;
  }
  if (g_strcmp0 (mode, "always") == 0)
    return TRUE;
  for (guint i = 0; i < self->upstreams->len; i++) {
    GInetSocketAddress *ns = g_ptr_array_index (self->upstreams, i);
    if (!is_denied (self, g_inet_socket_address_get_address (ns))) {
      g_autofree gchar *text = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (ns));
      g_info ("DNS relay not needed: guests may reach the nameserver %s", text);
      return FALSE;
    }
  }
  return TRUE;
}

/* --- UDP --------------------------------------------------------------- */

static void
udp_query_free (UdpQuery *q)
{
  for (guint i = 0; i < q->sources->len; i++)
    g_source_destroy (g_ptr_array_index (q->sources, i));
  g_ptr_array_unref (q->sources);
  g_source_destroy (q->timeout);
  g_source_unref (q->timeout);
  g_object_unref (q->client);
  q->relay->in_flight--;
  g_free (q);
}

static void
udp_query_done (UdpQuery *q)
{
  g_hash_table_remove (q->relay->udp_queries, q);
}

static gboolean
udp_timeout_cb (gpointer user_data)
{
  UdpQuery *q = user_data;

  q->relay->dropped++;
  udp_query_done (q);
  return G_SOURCE_REMOVE;
}

static gboolean
udp_answer_cb (GSocket *sock, GIOCondition condition, gpointer user_data)
{
  UdpQuery *q = user_data;
  VdDnsRelay *self = q->relay;
  guint8 buf[UDP_MAX + 1];
  g_autoptr(GError) error = NULL;
  gssize n = g_socket_receive (sock, (gchar *) buf, sizeof buf, NULL, &error);

  if (n < 0) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
      return G_SOURCE_CONTINUE;
    /* e.g. ICMP port unreachable: this nameserver is out; others may answer. */
    if (++q->failed == q->sources->len) {
      self->dropped++;
      udp_query_done (q);
    }
    return G_SOURCE_REMOVE;
  }
  /* The socket is connected, so the kernel already dropped datagrams from
   * anyone but this nameserver; the id must be the query's own. */
  if (n < DNS_HEADER || n > UDP_MAX || memcmp (buf, q->id, 2) != 0)
    return G_SOURCE_CONTINUE;
  if (g_socket_send_to (self->udp, q->client, (const gchar *) buf, (gsize) n, NULL, NULL) == n)
    self->relayed++;
  g_debug ("relayed a UDP answer (%" G_GSSIZE_FORMAT " B) in %" G_GINT64_FORMAT " µs", n,
           g_get_monotonic_time () - q->started);
  udp_query_done (q);
  return G_SOURCE_REMOVE;
}

static GSocket *
udp_upstream_socket (GInetSocketAddress *ns, const guint8 *query, gsize len)
{
  g_autoptr(GSocket) sock = g_socket_new (g_socket_address_get_family (G_SOCKET_ADDRESS (ns)),
                                          G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_UDP, NULL);

  if (sock == NULL)
    return NULL;
  g_socket_set_blocking (sock, FALSE);
  if (!g_socket_connect (sock, G_SOCKET_ADDRESS (ns), NULL, NULL) ||
      g_socket_send (sock, (const gchar *) query, len, NULL, NULL) != (gssize) len)
    return NULL;
  return g_steal_pointer (&sock);
}

/* Every nameserver is asked at once; the first good answer goes back. */
static void
udp_query_start (VdDnsRelay *self, GSocketAddress *client, const guint8 *query, gsize len)
{
  UdpQuery *q = g_new0 (UdpQuery, 1);

  q->relay = self;
  q->client = g_object_ref (client);
  memcpy (q->id, query, 2);
  q->started = g_get_monotonic_time ();
  q->sources = g_ptr_array_new_with_free_func ((GDestroyNotify) g_source_unref);
  q->timeout = g_timeout_source_new_seconds (QUERY_TIMEOUT_SEC);
  g_source_set_callback (q->timeout, udp_timeout_cb, q, NULL);
  g_source_attach (q->timeout, NULL);
  self->in_flight++;
  g_hash_table_add (self->udp_queries, q);
  for (guint i = 0; i < self->upstreams->len; i++) {
    g_autoptr(GSocket) sock = udp_upstream_socket (g_ptr_array_index (self->upstreams, i), query, len);
    GSource *source;
    if (sock == NULL)
      continue;
    source = g_socket_create_source (sock, G_IO_IN, NULL);
    g_source_set_callback (source, (GSourceFunc) (GCallback) udp_answer_cb, q, NULL);
    g_source_attach (source, NULL);
    g_ptr_array_add (q->sources, source);
  }
  if (q->sources->len == 0) {
    self->dropped++;
    udp_query_done (q);
  }
}

static gboolean
udp_query_cb (GSocket *sock, GIOCondition condition, gpointer user_data)
{
  VdDnsRelay *self = user_data;

  /* Bounded, so a flood cannot hold the main loop. */
  for (guint i = 0; i < UDP_BURST; i++) {
    guint8 buf[UDP_MAX + 1];
    g_autoptr(GSocketAddress) client = NULL;
    gssize n = g_socket_receive_from (sock, &client, (gchar *) buf, sizeof buf, NULL, NULL);

    if (n < 0)
      break;
    if (n < DNS_HEADER || n > UDP_MAX || self->in_flight >= MAX_IN_FLIGHT || client == NULL) {
      self->dropped++;
      continue;
    }
    udp_query_start (self, client, buf, (gsize) n);
  }
  return G_SOURCE_CONTINUE;
}

/* --- TCP --------------------------------------------------------------- */

/* Called only from the callback of the one operation in flight, so
 * nothing still refers to the query. */
static void
tcp_query_done (TcpQuery *q)
{
  VdDnsRelay *self = q->relay;

  g_source_destroy (q->timeout);
  g_source_unref (q->timeout);
  g_clear_object (&q->client);
  g_clear_object (&q->upstream);
  g_object_unref (q->cancellable);
  g_free (q->msg);
  g_hash_table_remove (self->tcp_queries, q);
  self->in_flight--;
  g_free (q);
  g_object_unref (self);
}

static gboolean
tcp_timeout_cb (gpointer user_data)
{
  TcpQuery *q = user_data;

  q->relay->dropped++;
  g_cancellable_cancel (q->cancellable);
  return G_SOURCE_REMOVE;
}

static guint16
tcp_length (const guint8 *len)
{
  return (guint16) ((len[0] << 8) | len[1]);
}

static gboolean
tcp_read_finish (GObject *source, GAsyncResult *res, gsize expected)
{
  gsize n = 0;

  return g_input_stream_read_all_finish (G_INPUT_STREAM (source), res, &n, NULL) && n == expected;
}

static void
tcp_client_written_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TcpQuery *q = user_data;

  if (g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), res, NULL, NULL)) {
    q->relay->relayed++;
    g_debug ("relayed a TCP answer (%" G_GSIZE_FORMAT " B) in %" G_GINT64_FORMAT " µs", q->msg_len,
             g_get_monotonic_time () - q->started);
  }
  tcp_query_done (q);
}

static void
tcp_answer_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TcpQuery *q = user_data;

  if (!tcp_read_finish (source, res, q->msg_len) || memcmp (q->msg + 2, q->id, 2) != 0) {
    tcp_query_done (q);
    return;
  }
  memcpy (q->msg, q->len, 2);
  g_output_stream_write_all_async (g_io_stream_get_output_stream (q->client), q->msg, q->msg_len + 2,
                                   G_PRIORITY_DEFAULT, q->cancellable, tcp_client_written_cb, q);
}

/* The 2-byte length has arrived: read that much, then call next. */
static void
tcp_read_message (GObject *source, GAsyncResult *res, TcpQuery *q, GAsyncReadyCallback next)
{
  if (!tcp_read_finish (source, res, 2) || tcp_length (q->len) < DNS_HEADER) {
    tcp_query_done (q);
    return;
  }
  q->msg_len = tcp_length (q->len);
  g_input_stream_read_all_async (G_INPUT_STREAM (source), q->msg + 2, q->msg_len, G_PRIORITY_DEFAULT,
                                 q->cancellable, next, q);
}

static void
tcp_answer_len_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  tcp_read_message (source, res, user_data, tcp_answer_cb);
}

static void
tcp_upstream_written_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TcpQuery *q = user_data;

  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), res, NULL, NULL)) {
    tcp_query_done (q);
    return;
  }
  g_input_stream_read_all_async (g_io_stream_get_input_stream (q->upstream), q->len, 2, G_PRIORITY_DEFAULT,
                                 q->cancellable, tcp_answer_len_cb, q);
}

static void tcp_connect_next (TcpQuery *q);

static void
tcp_connected_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TcpQuery *q = user_data;
  g_autoptr(GError) error = NULL;

  q->upstream = G_IO_STREAM (g_socket_client_connect_finish (G_SOCKET_CLIENT (source), res, &error));
  if (q->upstream == NULL) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      tcp_query_done (q);
    else
      tcp_connect_next (q);
    return;
  }
  g_output_stream_write_all_async (g_io_stream_get_output_stream (q->upstream), q->msg, q->msg_len + 2,
                                   G_PRIORITY_DEFAULT, q->cancellable, tcp_upstream_written_cb, q);
}

/* The nameservers in order, the next one when one refuses. */
static void
tcp_connect_next (TcpQuery *q)
{
  GPtrArray *upstreams = q->relay->upstreams;

  if (q->next_upstream >= upstreams->len) {
    q->relay->dropped++;
    tcp_query_done (q);
    return;
  }
  g_socket_client_connect_async (q->relay->client, g_ptr_array_index (upstreams, q->next_upstream++),
                                 q->cancellable, tcp_connected_cb, q);
}

static void
tcp_query_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  TcpQuery *q = user_data;

  if (!tcp_read_finish (source, res, q->msg_len)) {
    tcp_query_done (q);
    return;
  }
  memcpy (q->msg, q->len, 2);
  memcpy (q->id, q->msg + 2, 2);
  tcp_connect_next (q);
}

static void
tcp_query_len_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  tcp_read_message (source, res, user_data, tcp_query_cb);
}

/* One query per connection: the answer goes back and the connection is
 * closed, which RFC 7766 allows. */
static void
tcp_query_start (VdDnsRelay *self, GSocketConnection *connection)
{
  TcpQuery *q = g_new0 (TcpQuery, 1);

  q->relay = g_object_ref (self);
  q->client = G_IO_STREAM (connection);
  q->cancellable = g_cancellable_new ();
  q->msg = g_malloc (TCP_MAX + 2);
  q->started = g_get_monotonic_time ();
  q->timeout = g_timeout_source_new_seconds (QUERY_TIMEOUT_SEC);
  g_source_set_callback (q->timeout, tcp_timeout_cb, q, NULL);
  g_source_attach (q->timeout, NULL);
  self->in_flight++;
  g_hash_table_add (self->tcp_queries, q);
  g_input_stream_read_all_async (g_io_stream_get_input_stream (q->client), q->len, 2, G_PRIORITY_DEFAULT,
                                 q->cancellable, tcp_query_len_cb, q);
}

static void tcp_accept_next (VdDnsRelay *self);

static gboolean
tcp_accept_again_cb (gpointer user_data)
{
  VdDnsRelay *self = user_data;

  if (self->active)
    tcp_accept_next (self);
  return G_SOURCE_REMOVE;
}

static void
tcp_accepted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdDnsRelay) self = user_data;
  g_autoptr(GError) error = NULL;
  GSocketConnection *connection = g_socket_listener_accept_finish (G_SOCKET_LISTENER (source), res, NULL, &error);

  if (connection == NULL) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) || !self->active)
      return;
    /* e.g. out of file descriptors: wait a moment instead of spinning. */
    g_debug ("accept: %s", error->message);
    g_timeout_add_full (G_PRIORITY_DEFAULT, 100, tcp_accept_again_cb, g_object_ref (self), g_object_unref);
    return;
  }
  tcp_accept_next (self);
  if (self->in_flight >= MAX_IN_FLIGHT) {
    self->dropped++;
    g_object_unref (connection);
    return;
  }
  tcp_query_start (self, connection);
}

static void
tcp_accept_next (VdDnsRelay *self)
{
  g_socket_listener_accept_async (self->tcp, self->cancellable, tcp_accepted_cb, g_object_ref (self));
}

/* --- life cycle -------------------------------------------------------- */

static gboolean
allow_low_ports (GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!g_file_set_contents_full (UNPRIVILEGED_PORT_SYSCTL, "53", -1, G_FILE_SET_CONTENTS_NONE, 0644, &local_error)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "cannot let the relay bind port 53: %s",
                 local_error->message);
    return FALSE;
  }
  return TRUE;
}

/* Called on the helper thread, inside the relay's netns. */
static gboolean
open_inside (gpointer user_data, GError **error)
{
  VdDnsRelay *self = user_data;

  if (!allow_low_ports (error))
    return FALSE;
  self->udp_fd = vd_netns_open_listener (VD_DNS_RELAY_ADDRESS, FALSE, DNS_PORT, NULL, error);
  if (self->udp_fd < 0)
    return FALSE;
  self->tcp_fd = vd_netns_open_listener (VD_DNS_RELAY_ADDRESS, TRUE, DNS_PORT, NULL, error);
  return self->tcp_fd >= 0;
}

static void
close_fds (VdDnsRelay *self)
{
  if (self->udp_fd >= 0)
    close (self->udp_fd);
  if (self->tcp_fd >= 0)
    close (self->tcp_fd);
  self->udp_fd = self->tcp_fd = -1;
}

static gboolean
serve (VdDnsRelay *self, GError **error)
{
  g_autoptr(GSocket) tcp = NULL;

  self->udp = g_socket_new_from_fd (self->udp_fd, error);
  if (self->udp == NULL)
    return FALSE;
  self->udp_fd = -1;
  tcp = g_socket_new_from_fd (self->tcp_fd, error);
  if (tcp == NULL)
    return FALSE;
  self->tcp_fd = -1;
  g_socket_set_blocking (self->udp, FALSE);
  self->tcp = g_socket_listener_new ();
  if (!g_socket_listener_add_socket (self->tcp, tcp, NULL, error))
    return FALSE;
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  self->udp_source = g_socket_create_source (self->udp, G_IO_IN, NULL);
  g_source_set_callback (self->udp_source, (GSourceFunc) (GCallback) udp_query_cb, self, NULL);
  g_source_attach (self->udp_source, NULL);
  tcp_accept_next (self);
  return TRUE;
}

static gchar *
describe_upstreams (VdDnsRelay *self)
{
  g_autoptr(GString) s = g_string_new (NULL);

  for (guint i = 0; i < self->upstreams->len; i++) {
    g_autofree gchar *text = g_socket_connectable_to_string (g_ptr_array_index (self->upstreams, i));
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", text);
  }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

/* QEMU reads it as the session uid, and the daemon's umask (0077) would
 * have made it root's alone: libslirp then finds no nameserver at all. */
static gboolean
make_world_readable (const gchar *path, GError **error)
{
  if (chmod (path, 0644) != 0) {
    int saved = errno;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "cannot make %s readable: %s", path, g_strerror (saved));
    return FALSE;
  }
  return TRUE;
}

/* Not needed (by [Guard] DnsRelay= and /etc/resolv.conf) is success with
 * the relay inactive. Must run before the guard collects the host's own
 * addresses, so that the veth's host end is in the deny list. */
gboolean
vd_dns_relay_start (VdDnsRelay *self, GError **error)
{
  const gchar *inside[] = { VD_DNS_RELAY_ADDRESS, NULL };
  g_autofree gchar *upstreams = NULL;

  g_return_val_if_fail (!self->active, FALSE);
  g_clear_pointer (&self->upstreams, g_ptr_array_unref);
  self->upstreams = read_nameservers (HOST_RESOLV_CONF);
  if (!want_relay (self))
    return TRUE;
  if (!vd_netns_create (self->netns, inside, VD_DNS_RELAY_HOST_ADDRESS, NULL, open_inside, self, error)) {
    close_fds (self);
    g_prefix_error (error, "DNS relay: ");
    return FALSE;
  }
  self->active = TRUE;
  if (!serve (self, error) ||
      !g_file_set_contents_full (self->resolv_conf, "nameserver " VD_DNS_RELAY_ADDRESS "\n", -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT, 0644, error) ||
      !make_world_readable (self->resolv_conf, error)) {
    g_prefix_error (error, "DNS relay: ");
    vd_dns_relay_stop (self);
    return FALSE;
  }
  upstreams = describe_upstreams (self);
  g_message ("DNS relay on %s:%u (in its own netns, veth %s), forwarding to %s", VD_DNS_RELAY_ADDRESS,
             DNS_PORT, VD_DNS_RELAY_HOST_LINK, upstreams);
  return TRUE;
}

void
vd_dns_relay_stop (VdDnsRelay *self)
{
  GHashTableIter iter;
  gpointer q;

  if (!self->active)
    return;
  self->active = FALSE;
  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_hash_table_remove_all (self->udp_queries);
  /* Each ends in its own callback, which the cancellation brings about. */
  g_hash_table_iter_init (&iter, self->tcp_queries);
  while (g_hash_table_iter_next (&iter, &q, NULL))
    g_cancellable_cancel (((TcpQuery *) q)->cancellable);
  if (self->udp_source != NULL)
    g_source_destroy (self->udp_source);
  g_clear_pointer (&self->udp_source, g_source_unref);
  if (self->udp != NULL)
    g_socket_close (self->udp, NULL);
  g_clear_object (&self->udp);
  if (self->tcp != NULL)
    g_socket_listener_close (self->tcp);
  g_clear_object (&self->tcp);
  close_fds (self);
  if (g_unlink (self->resolv_conf) != 0 && errno != ENOENT)
    g_warning ("removing %s: %s", self->resolv_conf, g_strerror (errno));
  vd_netns_teardown (self->netns);
  g_message ("DNS relay stopped: %" G_GUINT64_FORMAT " answers relayed, %" G_GUINT64_FORMAT " queries dropped",
             self->relayed, self->dropped);
}

void
vd_dns_relay_sweep (const gchar *runtime_dir)
{
  g_autofree gchar *dir = relay_dir (runtime_dir);
  g_autofree gchar *resolv_conf = g_build_filename (dir, "resolv.conf", NULL);

  g_unlink (resolv_conf);
  vd_netns_sweep (dir, VD_DNS_RELAY_HOST_LINK, "DNS relay");
}
