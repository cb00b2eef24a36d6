/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdCanary"

#include "config.h"

#include <sys/socket.h>
#include <unistd.h>
#include <glib-unix.h>

#include "vivarium-error.h"
#include "vd-canary.h"
#include "vd-netns.h"

/* Addresses no real network uses, one in each denied range the self-test
 * probes, plus the positive controls outside the deny list (TEST-NET-2 and
 * the IPv6 documentation prefix). Behind the veth they are not local
 * addresses of the daemon's netns, so a probe tests its range's rule and not
 * the "host's own addresses" rule. */
static const gchar *canary_addresses[] = {
  "10.255.255.254", "172.31.255.254", "192.168.255.254", "100.127.255.254",
  "169.254.255.254", "fd00::ffff:254", "198.51.100.1", "2001:db8:ffff::254", NULL
};
/* The daemon's end of the veth: the source of every re-originated probe. */
#define HOST_ADDR4 "169.254.255.253"
#define HOST_ADDR6 "fd00::ffff:253"
#define MAC_TAG    0x00
#define MAX_PORT_TRIES 16

typedef struct {
  gchar    *address;
  gboolean  tcp;
  gint      fd;
  GSource  *source;
  guint     count;
  gchar    *first_peer;
} Listener;

struct _VdCanary {
  GObject    parent_instance;
  VdNetns   *netns;
  GPtrArray *listeners;   /* Listener */
  guint16    tcp_port;
  guint16    udp_port;
  gboolean   set_up;
};

G_DEFINE_TYPE (VdCanary, vd_canary, G_TYPE_OBJECT)

static void
listener_free (Listener *l)
{
  if (l->source != NULL) {
    g_source_destroy (l->source);
    g_source_unref (l->source);
  }
  if (l->fd >= 0)
    close (l->fd);
  g_free (l->address);
  g_free (l->first_peer);
  g_free (l);
}

static void
vd_canary_finalize (GObject *object)
{
  VdCanary *self = VD_CANARY (object);

  vd_canary_teardown (self);
  g_ptr_array_unref (self->listeners);
  g_clear_object (&self->netns);
  G_OBJECT_CLASS (vd_canary_parent_class)->finalize (object);
}

static void
vd_canary_class_init (VdCanaryClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_canary_finalize;
}

static void
vd_canary_init (VdCanary *self)
{
  self->listeners = g_ptr_array_new_with_free_func ((GDestroyNotify) listener_free);
}

VdCanary *
vd_canary_new (const gchar *runtime_dir)
{
  VdCanary *self = g_object_new (VD_TYPE_CANARY, NULL);
  g_autofree gchar *dir = g_build_filename (runtime_dir, "canary", NULL);

  self->netns = vd_netns_new (dir, VD_CANARY_HOST_LINK, VD_CANARY_PEER_LINK, MAC_TAG);
  return self;
}

guint16 vd_canary_get_tcp_port (VdCanary *self) { return self->tcp_port; }
guint16 vd_canary_get_udp_port (VdCanary *self) { return self->udp_port; }
const gchar * const *vd_canary_get_addresses (void) { return canary_addresses; }

/* --- listeners --------------------------------------------------------- */

static gchar *
sockaddr_to_string (const struct sockaddr_storage *ss)
{
  g_autoptr(GSocketAddress) addr = g_socket_address_new_from_native ((gpointer) ss, sizeof *ss);

  if (addr == NULL || !G_IS_INET_SOCKET_ADDRESS (addr))
    return g_strdup ("?");
  return g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (addr));
}

static void
listener_saw (Listener *l, const struct sockaddr_storage *peer)
{
  l->count++;
  if (l->first_peer == NULL)
    l->first_peer = sockaddr_to_string (peer);
}

/* Takes everything that is waiting; never blocks (the sockets are
 * non-blocking). Bounded so a flood cannot hold the main loop. */
static void
listener_drain (Listener *l)
{
  for (guint i = 0; i < 1024; i++) {
    struct sockaddr_storage peer = { 0 };
    socklen_t len = sizeof peer;

    if (l->tcp) {
      gint fd = accept4 (l->fd, (struct sockaddr *) &peer, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0)
        return;
      close (fd);
    } else {
      guint8 byte[512];
      if (recvfrom (l->fd, byte, sizeof byte, MSG_DONTWAIT, (struct sockaddr *) &peer, &len) < 0)
        return;
    }
    listener_saw (l, &peer);
  }
}

static gboolean
listener_ready_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  listener_drain (user_data);
  return G_SOURCE_CONTINUE;
}

static gboolean
add_listener (VdCanary *self, const gchar *address, gboolean tcp, guint16 port, guint16 *bound, GError **error)
{
  Listener *l;
  guint16 bound_port = 0;
  gint fd = vd_netns_open_listener (address, tcp, port, &bound_port, error);

  if (fd < 0)
    return FALSE;
  l = g_new0 (Listener, 1);
  l->address = g_strdup (address);
  l->tcp = tcp;
  l->fd = fd;
  g_ptr_array_add (self->listeners, l);
  if (bound != NULL)
    *bound = bound_port;
  return TRUE;
}

static void
remove_listeners_from (VdCanary *self, guint first)
{
  if (self->listeners->len > first)
    g_ptr_array_remove_range (self->listeners, first, self->listeners->len - first);
}

/* Loopback in the daemon's netns: the guest reaches 127.0.0.1 through the
 * slirp gateway 10.0.2.2 and ::1 through fec0::2. One port for every
 * listener of a transport, so it must be free on both loopbacks. */
static gboolean
open_loopback_listeners (VdCanary *self, gboolean tcp, GError **error)
{
  for (guint i = 0; i < MAX_PORT_TRIES; i++) {
    guint first = self->listeners->len;
    guint16 port = 0;
    g_autoptr(GError) local_error = NULL;

    if (!add_listener (self, "127.0.0.1", tcp, 0, &port, error))
      return FALSE;
    if (add_listener (self, "::1", tcp, port, NULL, &local_error)) {
      if (tcp)
        self->tcp_port = port;
      else
        self->udp_port = port;
      return TRUE;
    }
    remove_listeners_from (self, first);
    if (i + 1 == MAX_PORT_TRIES) {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  }
  return FALSE;
}

/* --- the namespace ----------------------------------------------------- */

/* Called inside the canary netns. */
static gboolean
open_canary_listeners (gpointer user_data, GError **error)
{
  VdCanary *self = user_data;

  for (guint i = 0; canary_addresses[i] != NULL; i++) {
    if (!add_listener (self, canary_addresses[i], TRUE, self->tcp_port, NULL, error) ||
        !add_listener (self, canary_addresses[i], FALSE, self->udp_port, NULL, error))
      return FALSE;
  }
  return TRUE;
}

static void
attach_sources (VdCanary *self)
{
  for (guint i = 0; i < self->listeners->len; i++) {
    Listener *l = g_ptr_array_index (self->listeners, i);
    l->source = g_unix_fd_source_new (l->fd, G_IO_IN);
    g_source_set_callback (l->source, (GSourceFunc) (GCallback) listener_ready_cb, l, NULL);
    g_source_attach (l->source, NULL);
  }
}

gboolean
vd_canary_setup (VdCanary *self, GError **error)
{
  g_return_val_if_fail (!self->set_up, FALSE);
  self->set_up = TRUE;
  if (!open_loopback_listeners (self, TRUE, error) || !open_loopback_listeners (self, FALSE, error) ||
      !vd_netns_create (self->netns, canary_addresses, HOST_ADDR4, HOST_ADDR6, open_canary_listeners, self, error)) {
    g_prefix_error (error, "canary: ");
    return FALSE;
  }
  attach_sources (self);
  g_info ("canary up: tcp port %u, udp port %u", self->tcp_port, self->udp_port);
  return TRUE;
}

/* --- counting ---------------------------------------------------------- */

void
vd_canary_drain (VdCanary *self)
{
  for (guint i = 0; i < self->listeners->len; i++)
    listener_drain (g_ptr_array_index (self->listeners, i));
}

void
vd_canary_reset (VdCanary *self)
{
  vd_canary_drain (self);
  for (guint i = 0; i < self->listeners->len; i++) {
    Listener *l = g_ptr_array_index (self->listeners, i);
    l->count = 0;
    g_clear_pointer (&l->first_peer, g_free);
  }
}

gboolean
vd_canary_lookup (VdCanary *self, const gchar *address, const gchar *transport, guint *count,
                  const gchar **first_peer)
{
  gboolean tcp = g_strcmp0 (transport, "tcp") == 0;

  for (guint i = 0; i < self->listeners->len; i++) {
    Listener *l = g_ptr_array_index (self->listeners, i);
    if (l->tcp == tcp && g_strcmp0 (l->address, address) == 0) {
      *count = l->count;
      *first_peer = l->first_peer;
      return TRUE;
    }
  }
  return FALSE;
}

/* --- removal ----------------------------------------------------------- */

void
vd_canary_teardown (VdCanary *self)
{
  if (!self->set_up)
    return;
  g_ptr_array_set_size (self->listeners, 0);
  vd_netns_teardown (self->netns);
  self->set_up = FALSE;
}

void
vd_canary_sweep (const gchar *runtime_dir)
{
  g_autofree gchar *dir = g_build_filename (runtime_dir, "canary", NULL);

  vd_netns_sweep (dir, VD_CANARY_HOST_LINK, "canary");
}
