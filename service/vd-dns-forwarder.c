/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDnsForwarder"

#include "config.h"

#include <string.h>
#include <unistd.h>

#include "vd-dns-forwarder.h"

#define DNS_HEADER         12
#define UDP_MAX            4096
#define TCP_MAX            65535
#define MAX_IN_FLIGHT      256
#define QUERY_TIMEOUT_SEC  5
#define UDP_BURST          64

/* What the relay (vivarium-dns-relay) does with its two listening sockets:
 * every guest query is asked of every nameserver (UDP) or of each in turn
 * (TCP), from a socket of its own, and the first answer with the query's id
 * goes back. Guest bytes: every length is checked, nothing is parsed past
 * the header's id. */

struct _VdDnsForwarder {
  GObject          parent_instance;
  GPtrArray       *upstreams;     /* GInetSocketAddress, port 53 */
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

G_DEFINE_TYPE (VdDnsForwarder, vd_dns_forwarder, G_TYPE_OBJECT)

typedef struct {
  VdDnsForwarder *relay;
  GSocketAddress *client;
  guint8          id[2];
  GPtrArray      *sources;        /* GSource, one per nameserver socket */
  guint           failed;
  GSource        *timeout;
  gint64          started;
} UdpQuery;

typedef struct {
  VdDnsForwarder *relay;          /* strong: callbacks may outlive a stop */
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

static void udp_query_free (UdpQuery *q);

static void
vd_dns_forwarder_finalize (GObject *object)
{
  VdDnsForwarder *self = VD_DNS_FORWARDER (object);

  vd_dns_forwarder_stop (self);
  g_hash_table_unref (self->udp_queries);
  g_hash_table_unref (self->tcp_queries);
  g_ptr_array_unref (self->upstreams);
  g_clear_object (&self->client);
  g_clear_object (&self->cancellable);
  G_OBJECT_CLASS (vd_dns_forwarder_parent_class)->finalize (object);
}

static void
vd_dns_forwarder_class_init (VdDnsForwarderClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_dns_forwarder_finalize;
}

static void
vd_dns_forwarder_init (VdDnsForwarder *self)
{
  self->udp_queries = g_hash_table_new_full (NULL, NULL, (GDestroyNotify) udp_query_free, NULL);
  self->tcp_queries = g_hash_table_new (NULL, NULL);
  self->client = g_socket_client_new ();
}

/* @upstreams: GInetSocketAddress, at least one. */
VdDnsForwarder *
vd_dns_forwarder_new (GPtrArray *upstreams)
{
  VdDnsForwarder *self = g_object_new (VD_TYPE_DNS_FORWARDER, NULL);

  self->upstreams = g_ptr_array_ref (upstreams);
  return self;
}

guint64 vd_dns_forwarder_get_relayed (VdDnsForwarder *self) { return self->relayed; }
guint64 vd_dns_forwarder_get_dropped (VdDnsForwarder *self) { return self->dropped; }

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
  VdDnsForwarder *self = q->relay;
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
udp_query_start (VdDnsForwarder *self, GSocketAddress *client, const guint8 *query, gsize len)
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
  VdDnsForwarder *self = user_data;

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
  VdDnsForwarder *self = q->relay;

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
tcp_query_start (VdDnsForwarder *self, GSocketConnection *connection)
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

static void tcp_accept_next (VdDnsForwarder *self);

static gboolean
tcp_accept_again_cb (gpointer user_data)
{
  VdDnsForwarder *self = user_data;

  if (self->active)
    tcp_accept_next (self);
  return G_SOURCE_REMOVE;
}

static void
tcp_accepted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdDnsForwarder) self = user_data;
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
tcp_accept_next (VdDnsForwarder *self)
{
  g_socket_listener_accept_async (self->tcp, self->cancellable, tcp_accepted_cb, g_object_ref (self));
}


/* --- life cycle -------------------------------------------------------- */

/* Takes @udp_fd and @tcp_fd (bound, non-blocking), also on failure. */
gboolean
vd_dns_forwarder_start (VdDnsForwarder *self, gint udp_fd, gint tcp_fd, GError **error)
{
  g_autoptr(GSocket) tcp = NULL;

  g_return_val_if_fail (!self->active, FALSE);
  self->udp = g_socket_new_from_fd (udp_fd, error);
  if (self->udp == NULL) {
    close (udp_fd);
    close (tcp_fd);
    return FALSE;
  }
  tcp = g_socket_new_from_fd (tcp_fd, error);
  if (tcp == NULL) {
    close (tcp_fd);
    return FALSE;
  }
  self->active = TRUE;
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

void
vd_dns_forwarder_stop (VdDnsForwarder *self)
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
}
