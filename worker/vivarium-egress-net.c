/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgressNet"

/* The guest's user-mode network, in the proxy (vivarium-egress-net.h).
 * One thread owns libslirp and everything it touches: a poll() loop over
 * net.sock's listener, QEMU's stream and libslirp's own sockets (the ones
 * it connects to the doors, one per guest connection). The doors' threads
 * see those connections like any other; nothing here reads a payload. */

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <gio/gio.h>
#include <slirp/libslirp.h>

#include "vivarium-egress-net.h"

#define LENGTH_BYTES 4
/* Anyone may connect (the directory lets QEMU's uid pass); the peer's uid
 * is checked on each connection. */
#define SOCKET_MODE 0666
/* The stream's socket buffers each way: room for a burst of libslirp's
 * segments (its TCP windows are 128 KiB) without a round of the loop per
 * few frames. */
#define STREAM_BUFFER_BYTES (1024 * 1024)
/* Reads of the stream per round of the loop at most, so that libslirp's
 * own sockets get their turn. */
#define READS_PER_ROUND 8
/* libslirp's messages about a guest's misbehaviour: the first ones are
 * logged, then only that more came (a guest must not fill the journal). */
#define MAX_GUEST_ERRORS_LOGGED 10

typedef struct {
  SlirpTimerId id;
  void        *cb_opaque;
  gint64       expire_ms;   /* -1: not armed */
} Timer;

typedef struct {
  Slirp     *slirp;
  uid_t      peer_uid;
  int        listen_fd;
  int        conn_fd;       /* QEMU's stream, or -1 */
  GArray    *pollfds;       /* struct pollfd: [0] the listener, [1] the stream if any, then libslirp's */
  GPtrArray *timers;
  guint8    *in;            /* LENGTH_BYTES + MAX_FRAME: at most one frame and a half-read length */
  gsize      in_len;
  guint8    *out;           /* MAX_QUEUED: frames towards QEMU, behind their lengths */
  gsize      out_start;
  gsize      out_end;
  guint64    dropped;
  guint      guest_errors;
} Net;

static gint64
now_ms (void)
{
  return g_get_monotonic_time () / 1000;
}

/* --- libslirp's callbacks ------------------------------------------------------ */

/* A frame for the guest, queued behind its length. Without a stream, or
 * with the queue full, it is dropped: libslirp's contract allows it. */
static ssize_t
send_packet (const void *buf, size_t len, void *opaque)
{
  Net *net = opaque;
  guint32 be = GUINT32_TO_BE ((guint32) len);

  if (net->conn_fd < 0 || len > VIVARIUM_EGRESS_NET_MAX_FRAME)
    return (ssize_t) len;
  if (net->out_end + LENGTH_BYTES + len > VIVARIUM_EGRESS_NET_MAX_QUEUED) {
    memmove (net->out, net->out + net->out_start, net->out_end - net->out_start);
    net->out_end -= net->out_start;
    net->out_start = 0;
  }
  if (net->out_end + LENGTH_BYTES + len > VIVARIUM_EGRESS_NET_MAX_QUEUED) {
    net->dropped++;
    return (ssize_t) len;
  }
  memcpy (net->out + net->out_end, &be, LENGTH_BYTES);
  memcpy (net->out + net->out_end + LENGTH_BYTES, buf, len);
  net->out_end += LENGTH_BYTES + len;
  return (ssize_t) len;
}

static void
guest_error (const char *msg, void *opaque)
{
  Net *net = opaque;

  if (net->guest_errors < MAX_GUEST_ERRORS_LOGGED)
    g_warning ("the guest's network: %s", msg);
  else if (net->guest_errors == MAX_GUEST_ERRORS_LOGGED)
    g_warning ("the guest's network: more errors, no longer logged");
  net->guest_errors++;
}

static int64_t
clock_get_ns (void *opaque)
{
  return g_get_monotonic_time () * 1000;
}

static void *
timer_new_opaque (SlirpTimerId id, void *cb_opaque, void *opaque)
{
  Net *net = opaque;
  Timer *timer = g_new0 (Timer, 1);

  timer->id = id;
  timer->cb_opaque = cb_opaque;
  timer->expire_ms = -1;
  g_ptr_array_add (net->timers, timer);
  return timer;
}

static void
timer_free (void *timer, void *opaque)
{
  Net *net = opaque;

  g_ptr_array_remove_fast (net->timers, timer);
}

static void
timer_mod (void *timer, int64_t expire_time, void *opaque)
{
  ((Timer *) timer)->expire_ms = expire_time;
}

/* libslirp's sockets are polled anew on every round of the loop, and it
 * is only ever called from the loop's thread: nothing to register, nobody
 * to wake. */
static void
no_fd (int fd, void *opaque)
{
}

static void
no_notify (void *opaque)
{
}

static const SlirpCb callbacks = {
  .send_packet = send_packet,
  .guest_error = guest_error,
  .clock_get_ns = clock_get_ns,
  .timer_free = timer_free,
  .timer_mod = timer_mod,
  .register_poll_fd = no_fd,
  .unregister_poll_fd = no_fd,
  .notify = no_notify,
  .timer_new_opaque = timer_new_opaque,
};

static int
add_poll (int fd, int events, void *opaque)
{
  Net *net = opaque;
  struct pollfd p = { .fd = fd };

  p.events = ((events & SLIRP_POLL_IN) ? POLLIN : 0) | ((events & SLIRP_POLL_OUT) ? POLLOUT : 0) |
             ((events & SLIRP_POLL_PRI) ? POLLPRI : 0);
  g_array_append_val (net->pollfds, p);
  return (int) net->pollfds->len - 1;
}

static int
get_revents (int idx, void *opaque)
{
  Net *net = opaque;
  short r = g_array_index (net->pollfds, struct pollfd, idx).revents;

  return ((r & POLLIN) ? SLIRP_POLL_IN : 0) | ((r & POLLOUT) ? SLIRP_POLL_OUT : 0) |
         ((r & POLLPRI) ? SLIRP_POLL_PRI : 0) | ((r & POLLERR) ? SLIRP_POLL_ERR : 0) |
         ((r & POLLHUP) ? SLIRP_POLL_HUP : 0);
}

/* --- QEMU's stream ------------------------------------------------------------- */

static void
close_stream (Net *net)
{
  close (net->conn_fd);
  net->conn_fd = -1;
  net->in_len = 0;
  net->out_start = net->out_end = 0;
}

static void
accept_stream (Net *net)
{
  struct ucred cred = { 0 };
  socklen_t len = sizeof cred;
  int fd = accept4 (net->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

  if (fd < 0)
    return;
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != net->peer_uid) {
    g_warning ("net.sock: refused a connection from uid %d (only uid %u may connect)", (int) cred.uid,
               (guint) net->peer_uid);
    close (fd);
    return;
  }
  if (net->conn_fd >= 0) {
    g_warning ("net.sock: refused a second connection (the guest's network is connected already)");
    close (fd);
    return;
  }
  setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &(int) { STREAM_BUFFER_BYTES }, sizeof (int));
  setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &(int) { STREAM_BUFFER_BYTES }, sizeof (int));
  net->conn_fd = fd;
  g_message ("net.sock: the guest's network is connected");
}

/* Every whole frame read goes to libslirp; a length past the bound is
 * garbage (QEMU never sends one) and ends the stream. FALSE: close it;
 * *more: the read filled the buffer, there may be more waiting. */
static gboolean
read_frames (Net *net, gboolean *more)
{
  gsize pos = 0;
  gsize room = LENGTH_BYTES + VIVARIUM_EGRESS_NET_MAX_FRAME - net->in_len;
  ssize_t n = read (net->conn_fd, net->in + net->in_len, room);

  *more = n > 0 && (gsize) n == room;
  if (n < 0)
    return errno == EAGAIN || errno == EINTR;
  if (n == 0) {
    g_message ("net.sock: the guest's network was disconnected");
    return FALSE;
  }
  net->in_len += (gsize) n;
  while (net->in_len - pos >= LENGTH_BYTES) {
    guint32 len;
    memcpy (&len, net->in + pos, LENGTH_BYTES);
    len = GUINT32_FROM_BE (len);
    if (len > VIVARIUM_EGRESS_NET_MAX_FRAME) {
      g_warning ("net.sock: closed the guest's network: a frame of %u bytes (at most %u)", len,
                 (guint) VIVARIUM_EGRESS_NET_MAX_FRAME);
      return FALSE;
    }
    if (net->in_len - pos - LENGTH_BYTES < len)
      break;
    slirp_input (net->slirp, net->in + pos + LENGTH_BYTES, (int) len);
    pos += LENGTH_BYTES + len;
  }
  memmove (net->in, net->in + pos, net->in_len - pos);
  net->in_len -= pos;
  return TRUE;
}

static void
read_stream (Net *net)
{
  gboolean more = TRUE;

  for (guint i = 0; more && i < READS_PER_ROUND; i++) {
    if (!read_frames (net, &more)) {
      close_stream (net);
      return;
    }
  }
}

/* FALSE: the stream broke. */
static gboolean
flush_frames (Net *net)
{
  while (net->out_start < net->out_end) {
    ssize_t n = send (net->conn_fd, net->out + net->out_start, net->out_end - net->out_start, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno == EAGAIN;
    net->out_start += (gsize) n;
  }
  net->out_start = net->out_end = 0;
  return TRUE;
}

/* --- the loop ------------------------------------------------------------------ */

static guint32
next_timer (Net *net, guint32 timeout)
{
  gint64 now = now_ms ();

  for (guint i = 0; i < net->timers->len; i++) {
    Timer *t = g_ptr_array_index (net->timers, i);
    if (t->expire_ms >= 0)
      timeout = (guint32) MIN ((gint64) timeout, MAX (t->expire_ms - now, 0));
  }
  return timeout;
}

static void
run_timers (Net *net)
{
  gint64 now = now_ms ();

  for (guint i = 0; i < net->timers->len; i++) {
    Timer *t = g_ptr_array_index (net->timers, i);
    if (t->expire_ms >= 0 && t->expire_ms <= now) {
      t->expire_ms = -1;
      slirp_handle_timer (net->slirp, t->id, t->cb_opaque);
    }
  }
}

static void
poll_once (Net *net)
{
  struct pollfd listener = { .fd = net->listen_fd, .events = POLLIN };
  struct pollfd stream = { .fd = net->conn_fd, .events = POLLIN | (net->out_end > net->out_start ? POLLOUT : 0) };
  guint32 timeout = UINT32_MAX;
  short stream_revents;
  int n;

  g_array_set_size (net->pollfds, 0);
  g_array_append_val (net->pollfds, listener);
  g_array_append_val (net->pollfds, stream);   /* fd -1 when absent: poll() skips it */
  slirp_pollfds_fill (net->slirp, &timeout, add_poll, net);
  timeout = next_timer (net, timeout);
  n = poll ((struct pollfd *) (gpointer) net->pollfds->data, net->pollfds->len,
            timeout == UINT32_MAX ? -1 : (int) MIN (timeout, (guint32) G_MAXINT));
  if (n < 0 && errno != EINTR)
    g_warning ("the guest's network: poll: %s", g_strerror (errno));
  slirp_pollfds_poll (net->slirp, n < 0, get_revents, net);
  stream_revents = g_array_index (net->pollfds, struct pollfd, 1).revents;
  if (n > 0 && net->conn_fd >= 0 && (stream_revents & (POLLIN | POLLHUP | POLLERR)))
    read_stream (net);
  run_timers (net);
  if (net->conn_fd >= 0 && !flush_frames (net))
    close_stream (net);
  if (n > 0 && (g_array_index (net->pollfds, struct pollfd, 0).revents & POLLIN))
    accept_stream (net);
}

static gpointer
net_thread (gpointer data)
{
  Net *net = data;

  for (;;)
    poll_once (net);
  return NULL;
}

/* --- start ----------------------------------------------------------------------- */

static int
listen_on (const gchar *path, GError **error)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof sun.sun_path) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FILENAME_TOO_LONG, "%s: the path is too long for a socket", path);
    return -1;
  }
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind (fd, (struct sockaddr *) &sun, sizeof sun) != 0 || chmod (path, SOCKET_MODE) != 0 ||
      listen (fd, 4) != 0) {
    int saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "cannot open %s to QEMU: %s", path,
                 g_strerror (saved));
    if (fd >= 0)
      close (fd);
    return -1;
  }
  return fd;
}

/* The network QEMU's own user-mode stack gives a guest by default (the
 * guest's DHCP lease and every boot snapshot were made on it), restricted:
 * nothing reaches beyond the forwards. No IPv6: nothing behind it. */
static Slirp *
new_slirp (Net *net)
{
  SlirpConfig cfg = {
    .version = 4,
    .restricted = 1,
    .in_enabled = true,
    .in6_enabled = false,
    .disable_host_loopback = true,
  };

  inet_pton (AF_INET, "10.0.2.0", &cfg.vnetwork);
  inet_pton (AF_INET, "255.255.255.0", &cfg.vnetmask);
  inet_pton (AF_INET, "10.0.2.2", &cfg.vhost);
  inet_pton (AF_INET, "10.0.2.15", &cfg.vdhcp_start);
  inet_pton (AF_INET, "10.0.2.3", &cfg.vnameserver);
  return slirp_new (&cfg, &callbacks, net);
}

static gboolean
add_forwards (Net *net, const VivariumEgressNetConfig *config, GError **error)
{
  struct in_addr guest;

  if (inet_pton (AF_INET, config->guest_address, &guest) != 1) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "%s is not an IPv4 address", config->guest_address);
    return FALSE;
  }
  for (guint i = 0; i < config->n_doors; i++) {
    g_autofree gchar *path = g_build_filename (config->dir, config->doors[i], NULL);
    if (slirp_add_unix (net->slirp, path, &guest, config->ports[i]) < 0) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot forward %s:%u to %s in the guest's network",
                   config->guest_address, config->ports[i], path);
      return FALSE;
    }
  }
  return TRUE;
}

/* The daemon's: it made net.sock before QEMU and the proxy started side
 * by side, so that QEMU's stream finds it listening (QEMU 7.2's stream
 * netdev connects once, at its start, and never again). It must be what
 * listen_on() would have made. */
static int
take_listener (int fd, GError **error)
{
  int type = 0, domain = 0, listening = 0;
  socklen_t len = sizeof type;

  if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      (len = sizeof domain, getsockopt (fd, SOL_SOCKET, SO_DOMAIN, &domain, &len)) != 0 ||
      (len = sizeof listening, getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len)) != 0 ||
      type != SOCK_STREAM || domain != AF_UNIX || !listening) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "descriptor %d is not a listening unix stream socket for QEMU", fd);
    return -1;
  }
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK) != 0 || fcntl (fd, F_SETFD, FD_CLOEXEC) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "descriptor %d: %s", fd, g_strerror (errno));
    return -1;
  }
  return fd;
}

gboolean
vivarium_egress_net_start (const VivariumEgressNetConfig *config, GError **error)
{
  g_autofree gchar *path = g_build_filename (config->dir, "net.sock", NULL);
  Net *net = g_new0 (Net, 1);

  net->peer_uid = config->peer_uid;
  net->conn_fd = -1;
  net->pollfds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
  net->timers = g_ptr_array_new_with_free_func (g_free);
  net->in = g_malloc (LENGTH_BYTES + VIVARIUM_EGRESS_NET_MAX_FRAME);
  net->out = g_malloc (VIVARIUM_EGRESS_NET_MAX_QUEUED);
  net->slirp = new_slirp (net);
  if (net->slirp == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot set up the guest's network (libslirp)");
    return FALSE;
  }
  if (!add_forwards (net, config, error))
    return FALSE;
  net->listen_fd = config->listen_fd >= 0 ? take_listener (config->listen_fd, error) : listen_on (path, error);
  if (net->listen_fd < 0)
    return FALSE;
  /* It lives as long as the process: the stream is the guest's only way
   * out, and a proxy that ends takes it along (fail closed). */
  g_thread_unref (g_thread_new ("slirp", net_thread, net));
  return TRUE;
}
