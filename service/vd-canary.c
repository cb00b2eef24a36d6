/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdCanary"

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <glib-unix.h>

#include "vivarium-error.h"
#include "vd-canary.h"

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
#define PIN_NAME   "net"
#define MAX_PORT_TRIES 16

/* Fixed, locally administered MACs: the neighbour entries are written by
 * hand, so no probe is lost to address resolution. */
static const guint8 host_mac[6] = { 0x02, 0x76, 0x76, 0x00, 0x00, 0x01 };
static const guint8 peer_mac[6] = { 0x02, 0x76, 0x76, 0x00, 0x00, 0x02 };

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
  gchar     *dir;
  gchar     *pin;
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
  g_free (self->dir);
  g_free (self->pin);
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

  self->dir = g_build_filename (runtime_dir, "canary", NULL);
  self->pin = g_build_filename (self->dir, PIN_NAME, NULL);
  return self;
}

guint16 vd_canary_get_tcp_port (VdCanary *self) { return self->tcp_port; }
guint16 vd_canary_get_udp_port (VdCanary *self) { return self->udp_port; }
const gchar * const *vd_canary_get_addresses (void) { return canary_addresses; }

/* --- netlink ----------------------------------------------------------- */

static gboolean
set_errno_error (GError **error, gint errsv, const gchar *what)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "canary: %s: %s", what, g_strerror (errsv));
  return FALSE;
}

static gboolean
nl_talk (struct mnl_socket *nl, struct nlmsghdr *nlh, const gchar *what, GError **error)
{
  static guint32 seq = 0;
  g_autofree guint8 *buf = g_malloc (MNL_SOCKET_BUFFER_SIZE);
  ssize_t n;
  gint ret;

  nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = g_atomic_int_add (&seq, 1) + 1;
  if (mnl_socket_sendto (nl, nlh, nlh->nlmsg_len) < 0)
    return set_errno_error (error, errno, what);
  do {
    n = mnl_socket_recvfrom (nl, buf, MNL_SOCKET_BUFFER_SIZE);
    if (n < 0)
      return set_errno_error (error, errno, what);
    ret = mnl_cb_run (buf, (size_t) n, nlh->nlmsg_seq, mnl_socket_get_portid (nl), NULL, NULL);
  } while (ret > 0);
  if (ret < 0)
    return set_errno_error (error, errno, what);
  return TRUE;
}

static struct mnl_socket *
nl_open (GError **error)
{
  struct mnl_socket *nl = mnl_socket_open (NETLINK_ROUTE);

  if (nl == NULL) {
    set_errno_error (error, errno, "opening a netlink socket");
    return NULL;
  }
  if (mnl_socket_bind (nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    set_errno_error (error, errno, "binding a netlink socket");
    mnl_socket_close (nl);
    return NULL;
  }
  return nl;
}

static struct nlmsghdr *
nl_link_msg (guint8 *buf, guint16 type, guint16 flags, const gchar *name)
{
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (buf);
  struct ifinfomsg *ifm;

  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = flags;
  ifm = mnl_nlmsg_put_extra_header (nlh, sizeof *ifm);
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz (nlh, IFLA_IFNAME, name);
  return nlh;
}

/* Created inside the canary netns; the peer is moved to the daemon's. */
static gboolean
nl_create_veth (struct mnl_socket *nl, gint host_ns_fd, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = nl_link_msg (buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, VD_CANARY_PEER_LINK);
  struct nlattr *info, *data, *peer;
  struct ifinfomsg *peer_ifm;

  mnl_attr_put (nlh, IFLA_ADDRESS, sizeof peer_mac, peer_mac);
  info = mnl_attr_nest_start (nlh, IFLA_LINKINFO);
  mnl_attr_put_strz (nlh, IFLA_INFO_KIND, "veth");
  data = mnl_attr_nest_start (nlh, IFLA_INFO_DATA);
  peer = mnl_attr_nest_start (nlh, VETH_INFO_PEER);
  peer_ifm = mnl_nlmsg_get_payload_tail (nlh);
  memset (peer_ifm, 0, sizeof *peer_ifm);
  nlh->nlmsg_len += MNL_ALIGN (sizeof *peer_ifm);
  mnl_attr_put_strz (nlh, IFLA_IFNAME, VD_CANARY_HOST_LINK);
  mnl_attr_put (nlh, IFLA_ADDRESS, sizeof host_mac, host_mac);
  mnl_attr_put_u32 (nlh, IFLA_NET_NS_FD, (guint32) host_ns_fd);
  mnl_attr_nest_end (nlh, peer);
  mnl_attr_nest_end (nlh, data);
  mnl_attr_nest_end (nlh, info);
  return nl_talk (nl, nlh, "creating the veth pair", error);
}

static gboolean
nl_link_up (struct mnl_socket *nl, const gchar *name, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = nl_link_msg (buf, RTM_NEWLINK, 0, name);
  struct ifinfomsg *ifm = mnl_nlmsg_get_payload (nlh);

  ifm->ifi_flags = IFF_UP;
  ifm->ifi_change = IFF_UP;
  return nl_talk (nl, nlh, "setting a link up", error);
}

static gboolean
nl_link_delete (struct mnl_socket *nl, const gchar *name, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = nl_link_msg (buf, RTM_DELLINK, 0, name);

  return nl_talk (nl, nlh, "deleting the veth pair", error);
}

typedef struct {
  gint    family;
  guint8  bytes[16];
  guint   len;
  guint   prefix;
} Addr;

static gboolean
parse_addr (const gchar *text, Addr *out)
{
  memset (out, 0, sizeof *out);
  if (inet_pton (AF_INET, text, out->bytes) == 1) {
    out->family = AF_INET;
    out->len = 4;
  } else if (inet_pton (AF_INET6, text, out->bytes) == 1) {
    out->family = AF_INET6;
    out->len = 16;
  } else {
    return FALSE;
  }
  out->prefix = out->len * 8;
  return TRUE;
}

static gboolean
nl_add_address (struct mnl_socket *nl, guint ifindex, const Addr *a, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (buf);
  struct ifaddrmsg *ifa;

  nlh->nlmsg_type = RTM_NEWADDR;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  ifa = mnl_nlmsg_put_extra_header (nlh, sizeof *ifa);
  ifa->ifa_family = (guint8) a->family;
  ifa->ifa_prefixlen = (guint8) a->prefix;
  /* No duplicate address detection: nothing else is on this link, and a
   * tentative address could neither be bound nor answer. */
  ifa->ifa_flags = IFA_F_NODAD;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = ifindex;
  if (a->family == AF_INET)
    mnl_attr_put (nlh, IFA_LOCAL, a->len, a->bytes);
  mnl_attr_put (nlh, IFA_ADDRESS, a->len, a->bytes);
  mnl_attr_put_u32 (nlh, IFA_FLAGS, IFA_F_NODAD);
  return nl_talk (nl, nlh, "adding an address", error);
}

/* dst NULL: the default route of that family. */
static gboolean
nl_add_route (struct mnl_socket *nl, guint ifindex, const Addr *dst, const Addr *src, gint family, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (buf);
  struct rtmsg *rtm;

  nlh->nlmsg_type = RTM_NEWROUTE;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  rtm = mnl_nlmsg_put_extra_header (nlh, sizeof *rtm);
  rtm->rtm_family = (guint8) family;
  rtm->rtm_dst_len = dst != NULL ? (guint8) dst->prefix : 0;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_scope = family == AF_INET ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  if (dst != NULL)
    mnl_attr_put (nlh, RTA_DST, dst->len, dst->bytes);
  if (src != NULL)
    mnl_attr_put (nlh, RTA_PREFSRC, src->len, src->bytes);
  mnl_attr_put_u32 (nlh, RTA_OIF, ifindex);
  return nl_talk (nl, nlh, "adding a route", error);
}

static gboolean
nl_add_neighbour (struct mnl_socket *nl, guint ifindex, const Addr *a, const guint8 *mac, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = mnl_nlmsg_put_header (buf);
  struct ndmsg *ndm;

  nlh->nlmsg_type = RTM_NEWNEIGH;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
  ndm = mnl_nlmsg_put_extra_header (nlh, sizeof *ndm);
  ndm->ndm_family = (guint8) a->family;
  ndm->ndm_ifindex = (gint) ifindex;
  ndm->ndm_state = NUD_PERMANENT;
  mnl_attr_put (nlh, NDA_DST, a->len, a->bytes);
  mnl_attr_put (nlh, NDA_LLADDR, 6, mac);
  return nl_talk (nl, nlh, "adding a neighbour entry", error);
}

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

static gint
open_listener_fd (const Addr *a, gboolean tcp, guint16 port, guint16 *bound_port, GError **error)
{
  struct sockaddr_storage ss = { 0 };
  socklen_t len;
  gint one = 1;
  gint fd = socket (a->family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  if (fd < 0) {
    set_errno_error (error, errno, "opening a listener");
    return -1;
  }
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a->family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
    setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons (port);
    memcpy (&s6->sin6_addr, a->bytes, 16);
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons (port);
    memcpy (&s4->sin_addr, a->bytes, 4);
    len = sizeof *s4;
  }
  if (bind (fd, (struct sockaddr *) &ss, len) != 0 || (tcp && listen (fd, 64) != 0)) {
    gint errsv = errno;
    close (fd);
    set_errno_error (error, errsv, "binding a listener");
    return -1;
  }
  len = sizeof ss;
  getsockname (fd, (struct sockaddr *) &ss, &len);
  *bound_port = ntohs (a->family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                             : ((struct sockaddr_in *) &ss)->sin_port);
  return fd;
}

static gboolean
add_listener (VdCanary *self, const gchar *address, gboolean tcp, guint16 port, guint16 *bound, GError **error)
{
  Listener *l;
  Addr a;
  guint16 bound_port = 0;
  gint fd;

  if (!parse_addr (address, &a))
    return set_errno_error (error, EINVAL, address);
  fd = open_listener_fd (&a, tcp, port, &bound_port, error);
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

typedef struct {
  VdCanary *self;
  gint      host_ns_fd;
  GError   *error;
} SetupData;

static gboolean
pin_namespace (VdCanary *self, GError **error)
{
  gint fd;

  if (g_mkdir_with_parents (self->dir, 0700) != 0)
    return set_errno_error (error, errno, self->dir);
  fd = open (self->pin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return set_errno_error (error, errno, self->pin);
  close (fd);
  /* The mount keeps the netns alive after the helper thread is gone; it
   * lives in the daemon's private mount namespace only. */
  if (mount ("/proc/thread-self/ns/net", self->pin, NULL, MS_BIND, NULL) != 0) {
    gint errsv = errno;
    g_unlink (self->pin);
    return set_errno_error (error, errsv, "pinning the canary netns");
  }
  return TRUE;
}

static gboolean
configure_inside (VdCanary *self, gint host_ns_fd, GError **error)
{
  struct mnl_socket *nl = nl_open (error);
  guint ifindex;
  Addr host4, host6, a;
  gboolean ok;

  if (nl == NULL)
    return FALSE;
  parse_addr (HOST_ADDR4, &host4);
  parse_addr (HOST_ADDR6, &host6);
  ok = nl_create_veth (nl, host_ns_fd, error) && nl_link_up (nl, "lo", error) &&
       nl_link_up (nl, VD_CANARY_PEER_LINK, error);
  ifindex = ok ? if_nametoindex (VD_CANARY_PEER_LINK) : 0;
  if (ok && ifindex == 0)
    ok = set_errno_error (error, errno, VD_CANARY_PEER_LINK);
  for (guint i = 0; ok && canary_addresses[i] != NULL; i++) {
    parse_addr (canary_addresses[i], &a);
    ok = nl_add_address (nl, ifindex, &a, error);
  }
  ok = ok && nl_add_neighbour (nl, ifindex, &host4, host_mac, error) &&
       nl_add_neighbour (nl, ifindex, &host6, host_mac, error) &&
       nl_add_route (nl, ifindex, NULL, NULL, AF_INET, error) &&
       nl_add_route (nl, ifindex, NULL, NULL, AF_INET6, error);
  mnl_socket_close (nl);
  return ok;
}

static gboolean
open_canary_listeners (VdCanary *self, GError **error)
{
  for (guint i = 0; canary_addresses[i] != NULL; i++) {
    if (!add_listener (self, canary_addresses[i], TRUE, self->tcp_port, NULL, error) ||
        !add_listener (self, canary_addresses[i], FALSE, self->udp_port, NULL, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
configure_host_side (VdCanary *self, GError **error)
{
  struct mnl_socket *nl = nl_open (error);
  guint ifindex;
  Addr host4, host6, a;
  gboolean ok;

  if (nl == NULL)
    return FALSE;
  parse_addr (HOST_ADDR4, &host4);
  parse_addr (HOST_ADDR6, &host6);
  ok = nl_link_up (nl, VD_CANARY_HOST_LINK, error);
  ifindex = ok ? if_nametoindex (VD_CANARY_HOST_LINK) : 0;
  if (ok && ifindex == 0)
    ok = set_errno_error (error, errno, VD_CANARY_HOST_LINK);
  ok = ok && nl_add_address (nl, ifindex, &host4, error) && nl_add_address (nl, ifindex, &host6, error);
  for (guint i = 0; ok && canary_addresses[i] != NULL; i++) {
    parse_addr (canary_addresses[i], &a);
    ok = nl_add_neighbour (nl, ifindex, &a, peer_mac, error) &&
         nl_add_route (nl, ifindex, &a, a.family == AF_INET ? &host4 : &host6, a.family, error);
  }
  mnl_socket_close (nl);
  return ok;
}

/* Runs in a thread of its own: unshare() and setns() change the netns of
 * the calling thread only, and the main loop's thread must stay where it is.
 * Every socket keeps the netns it was opened in. */
static gpointer
setup_thread (gpointer user_data)
{
  SetupData *data = user_data;
  VdCanary *self = data->self;

  if (unshare (CLONE_NEWNET) != 0) {
    set_errno_error (&data->error, errno, "unshare(CLONE_NEWNET)");
    return NULL;
  }
  if (!pin_namespace (self, &data->error) ||
      !configure_inside (self, data->host_ns_fd, &data->error) ||
      !open_canary_listeners (self, &data->error))
    return NULL;
  if (setns (data->host_ns_fd, CLONE_NEWNET) != 0) {
    set_errno_error (&data->error, errno, "returning to the daemon's netns");
    return NULL;
  }
  configure_host_side (self, &data->error);
  return NULL;
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
  SetupData data = { .self = self, .host_ns_fd = -1 };
  GThread *thread;

  g_return_val_if_fail (!self->set_up, FALSE);
  self->set_up = TRUE;
  if (!open_loopback_listeners (self, TRUE, error) || !open_loopback_listeners (self, FALSE, error))
    return FALSE;
  data.host_ns_fd = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (data.host_ns_fd < 0)
    return set_errno_error (error, errno, "opening the daemon's netns");
  thread = g_thread_new ("vd-canary", setup_thread, &data);
  g_thread_join (thread);
  close (data.host_ns_fd);
  if (data.error != NULL) {
    g_propagate_error (error, data.error);
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

/* Deleting the daemon's end of the veth takes the peer, the host routes
 * and the neighbour entries with it; dropping the mount and the listeners
 * frees the namespace. Safe to call when nothing is there. */
static void
remove_everything (const gchar *dir, const gchar *pin)
{
  g_autoptr(GError) error = NULL;

  if (if_nametoindex (VD_CANARY_HOST_LINK) != 0) {
    struct mnl_socket *nl = nl_open (&error);
    if (nl != NULL) {
      if (!nl_link_delete (nl, VD_CANARY_HOST_LINK, &error))
        g_warning ("%s", error->message);
      mnl_socket_close (nl);
    } else {
      g_warning ("%s", error->message);
    }
  }
  if (umount2 (pin, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
    g_warning ("canary: unmounting %s: %s", pin, g_strerror (errno));
  if (g_unlink (pin) != 0 && errno != ENOENT)
    g_warning ("canary: removing %s: %s", pin, g_strerror (errno));
  if (g_rmdir (dir) != 0 && errno != ENOENT)
    g_warning ("canary: removing %s: %s", dir, g_strerror (errno));
}

void
vd_canary_teardown (VdCanary *self)
{
  if (!self->set_up)
    return;
  g_ptr_array_set_size (self->listeners, 0);
  remove_everything (self->dir, self->pin);
  self->set_up = FALSE;
}

/* A daemon that died mid-run leaves its veth end behind (the netns itself
 * died with the daemon's private mount namespace). */
void
vd_canary_sweep (const gchar *runtime_dir)
{
  g_autofree gchar *dir = g_build_filename (runtime_dir, "canary", NULL);
  g_autofree gchar *pin = g_build_filename (dir, PIN_NAME, NULL);

  if (if_nametoindex (VD_CANARY_HOST_LINK) != 0 || g_file_test (dir, G_FILE_TEST_EXISTS)) {
    g_warning ("sweep: removing a leftover canary network");
    remove_everything (dir, pin);
  }
}
