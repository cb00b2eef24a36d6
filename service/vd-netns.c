/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdNetns"

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

#include "vivarium-error.h"
#include "vd-netns.h"

#define PIN_NAME "net"

struct _VdNetns {
  GObject    parent_instance;
  gchar     *dir;
  gchar     *pin;
  gchar     *host_link;
  gchar     *peer_link;
  /* Fixed, locally administered MACs: the neighbour entries are written
   * by hand, so no packet is lost to address resolution. */
  guint8     host_mac[6];
  guint8     peer_mac[6];
  gboolean   created;
};

G_DEFINE_TYPE (VdNetns, vd_netns, G_TYPE_OBJECT)

static void
vd_netns_finalize (GObject *object)
{
  VdNetns *self = VD_NETNS (object);

  vd_netns_teardown (self);
  g_free (self->dir);
  g_free (self->pin);
  g_free (self->host_link);
  g_free (self->peer_link);
  G_OBJECT_CLASS (vd_netns_parent_class)->finalize (object);
}

static void
vd_netns_class_init (VdNetnsClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_netns_finalize;
}

static void
vd_netns_init (VdNetns *self)
{
}

/* mac_tag keeps the MACs of two namespaces apart (02:76:76:<tag>:00:0x). */
VdNetns *
vd_netns_new (const gchar *dir, const gchar *host_link, const gchar *peer_link, guint8 mac_tag)
{
  VdNetns *self = g_object_new (VD_TYPE_NETNS, NULL);
  const guint8 mac[6] = { 0x02, 0x76, 0x76, mac_tag, 0x00, 0x00 };

  self->dir = g_strdup (dir);
  self->pin = dir != NULL ? g_build_filename (dir, PIN_NAME, NULL) : NULL;
  self->host_link = g_strdup (host_link);
  self->peer_link = g_strdup (peer_link);
  memcpy (self->host_mac, mac, 6);
  memcpy (self->peer_mac, mac, 6);
  self->host_mac[5] = 0x01;
  self->peer_mac[5] = 0x02;
  return self;
}

const gchar *vd_netns_get_dir (VdNetns *self) { return self->dir; }
const gchar *vd_netns_get_pin (VdNetns *self) { return self->pin; }

/* --- netlink ----------------------------------------------------------- */

static gboolean
set_errno_error (GError **error, gint errsv, const gchar *what)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s: %s", what, g_strerror (errsv));
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

/* Created inside the new netns; the peer is moved to the daemon's. */
static gboolean
nl_create_veth (VdNetns *self, struct mnl_socket *nl, gint host_ns_fd, GError **error)
{
  g_autofree guint8 *buf = g_malloc0 (MNL_SOCKET_BUFFER_SIZE);
  struct nlmsghdr *nlh = nl_link_msg (buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, self->peer_link);
  struct nlattr *info, *data, *peer;
  struct ifinfomsg *peer_ifm;

  mnl_attr_put (nlh, IFLA_ADDRESS, sizeof self->peer_mac, self->peer_mac);
  info = mnl_attr_nest_start (nlh, IFLA_LINKINFO);
  mnl_attr_put_strz (nlh, IFLA_INFO_KIND, "veth");
  data = mnl_attr_nest_start (nlh, IFLA_INFO_DATA);
  peer = mnl_attr_nest_start (nlh, VETH_INFO_PEER);
  peer_ifm = mnl_nlmsg_get_payload_tail (nlh);
  memset (peer_ifm, 0, sizeof *peer_ifm);
  nlh->nlmsg_len += MNL_ALIGN (sizeof *peer_ifm);
  mnl_attr_put_strz (nlh, IFLA_IFNAME, self->host_link);
  mnl_attr_put (nlh, IFLA_ADDRESS, sizeof self->host_mac, self->host_mac);
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
  if (text == NULL)
    return FALSE;
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

/* --- sockets ----------------------------------------------------------- */

/* A non-blocking listener (TCP) or bound socket (UDP) in the calling
 * thread's netns; port 0 picks a free one, returned in bound_port. */
gint
vd_netns_open_listener (const gchar *address, gboolean tcp, guint16 port, guint16 *bound_port, GError **error)
{
  struct sockaddr_storage ss = { 0 };
  socklen_t len;
  gint one = 1;
  Addr a;
  gint fd;

  if (!parse_addr (address, &a)) {
    set_errno_error (error, EINVAL, address);
    return -1;
  }
  fd = socket (a.family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    set_errno_error (error, errno, "opening a listener");
    return -1;
  }
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a.family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
    setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons (port);
    memcpy (&s6->sin6_addr, a.bytes, 16);
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons (port);
    memcpy (&s4->sin_addr, a.bytes, 4);
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
  if (bound_port != NULL)
    *bound_port = ntohs (a.family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                              : ((struct sockaddr_in *) &ss)->sin_port);
  return fd;
}

/* --- the namespace ----------------------------------------------------- */

typedef struct {
  VdNetns             *self;
  const gchar * const *inside;
  const gchar         *host4;
  const gchar         *host6;
  VdNetnsInsideFunc    inside_func;
  gpointer             user_data;
  gint                 host_ns_fd;
  GError              *error;
} CreateData;

static gboolean
pin_namespace (VdNetns *self, GError **error)
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
    return set_errno_error (error, errsv, "pinning the netns");
  }
  return TRUE;
}

static guint
link_index (const gchar *name, GError **error)
{
  guint ifindex = if_nametoindex (name);

  if (ifindex == 0)
    set_errno_error (error, errno, name);
  return ifindex;
}

static gboolean
configure_inside (CreateData *data, struct mnl_socket *nl, GError **error)
{
  VdNetns *self = data->self;
  guint ifindex;
  Addr host4, host6, a;

  if (!nl_create_veth (self, nl, data->host_ns_fd, error) || !nl_link_up (nl, "lo", error) ||
      !nl_link_up (nl, self->peer_link, error))
    return FALSE;
  ifindex = link_index (self->peer_link, error);
  if (ifindex == 0)
    return FALSE;
  for (guint i = 0; data->inside[i] != NULL; i++) {
    if (!parse_addr (data->inside[i], &a))
      return set_errno_error (error, EINVAL, data->inside[i]);
    if (!nl_add_address (nl, ifindex, &a, error))
      return FALSE;
  }
  if (parse_addr (data->host4, &host4) &&
      (!nl_add_neighbour (nl, ifindex, &host4, self->host_mac, error) ||
       !nl_add_route (nl, ifindex, NULL, NULL, AF_INET, error)))
    return FALSE;
  if (parse_addr (data->host6, &host6) &&
      (!nl_add_neighbour (nl, ifindex, &host6, self->host_mac, error) ||
       !nl_add_route (nl, ifindex, NULL, NULL, AF_INET6, error)))
    return FALSE;
  return TRUE;
}

static gboolean
configure_host_side (CreateData *data, struct mnl_socket *nl, GError **error)
{
  VdNetns *self = data->self;
  gboolean have4, have6;
  guint ifindex;
  Addr host4, host6, a;

  have4 = parse_addr (data->host4, &host4);
  have6 = parse_addr (data->host6, &host6);
  if (!nl_link_up (nl, self->host_link, error))
    return FALSE;
  ifindex = link_index (self->host_link, error);
  if (ifindex == 0 || (have4 && !nl_add_address (nl, ifindex, &host4, error)) ||
      (have6 && !nl_add_address (nl, ifindex, &host6, error)))
    return FALSE;
  for (guint i = 0; data->inside[i] != NULL; i++) {
    parse_addr (data->inside[i], &a);
    if ((a.family == AF_INET && !have4) || (a.family == AF_INET6 && !have6))
      return set_errno_error (error, EAFNOSUPPORT, data->inside[i]);
    if (!nl_add_neighbour (nl, ifindex, &a, self->peer_mac, error) ||
        !nl_add_route (nl, ifindex, &a, a.family == AF_INET ? &host4 : &host6, a.family, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
with_netlink (CreateData *data, gboolean (*func) (CreateData *, struct mnl_socket *, GError **), GError **error)
{
  struct mnl_socket *nl = nl_open (error);
  gboolean ok;

  if (nl == NULL)
    return FALSE;
  ok = func (data, nl, error);
  mnl_socket_close (nl);
  return ok;
}

/* Runs in a thread of its own: unshare() and setns() change the netns of
 * the calling thread only, and the main loop's thread must stay where it is.
 * Every socket keeps the netns it was opened in. */
static gpointer
create_thread (gpointer user_data)
{
  CreateData *data = user_data;

  if (unshare (CLONE_NEWNET) != 0) {
    set_errno_error (&data->error, errno, "unshare(CLONE_NEWNET)");
    return NULL;
  }
  if ((data->self->pin != NULL && !pin_namespace (data->self, &data->error)) ||
      !with_netlink (data, configure_inside, &data->error) ||
      (data->inside_func != NULL && !data->inside_func (data->user_data, &data->error)))
    return NULL;
  if (setns (data->host_ns_fd, CLONE_NEWNET) != 0) {
    set_errno_error (&data->error, errno, "returning to the daemon's netns");
    return NULL;
  }
  with_netlink (data, configure_host_side, &data->error);
  return NULL;
}

/* On failure everything already made is removed again. */
gboolean
vd_netns_create (VdNetns *self, const gchar * const *inside_addresses, const gchar *host_address4,
                 const gchar *host_address6, VdNetnsInsideFunc inside_func, gpointer user_data, GError **error)
{
  CreateData data = { .self = self, .inside = inside_addresses, .host4 = host_address4, .host6 = host_address6,
                      .inside_func = inside_func, .user_data = user_data, .host_ns_fd = -1 };
  GThread *thread;

  g_return_val_if_fail (!self->created, FALSE);
  data.host_ns_fd = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (data.host_ns_fd < 0)
    return set_errno_error (error, errno, "opening the daemon's netns");
  self->created = TRUE;
  thread = g_thread_new ("vd-netns", create_thread, &data);
  g_thread_join (thread);
  close (data.host_ns_fd);
  if (data.error != NULL) {
    vd_netns_teardown (self);
    g_propagate_error (error, data.error);
    return FALSE;
  }
  return TRUE;
}

/* --- removal ----------------------------------------------------------- */

/* Deleting the daemon's end of the veth takes the peer, the host routes
 * and the neighbour entries with it; dropping the mount (and the caller's
 * sockets) frees the namespace. Safe to call when nothing is there. */
static void
remove_everything (const gchar *dir, const gchar *pin, const gchar *host_link)
{
  g_autoptr(GError) error = NULL;

  if (if_nametoindex (host_link) != 0) {
    struct mnl_socket *nl = nl_open (&error);
    if (nl != NULL) {
      if (!nl_link_delete (nl, host_link, &error))
        g_warning ("%s: %s", host_link, error->message);
      mnl_socket_close (nl);
    } else {
      g_warning ("%s: %s", host_link, error->message);
    }
  }
  if (pin == NULL)
    return;
  if (umount2 (pin, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
    g_warning ("unmounting %s: %s", pin, g_strerror (errno));
  if (g_unlink (pin) != 0 && errno != ENOENT)
    g_warning ("removing %s: %s", pin, g_strerror (errno));
  if (g_rmdir (dir) != 0 && errno != ENOENT)
    g_warning ("removing %s: %s", dir, g_strerror (errno));
}

void
vd_netns_teardown (VdNetns *self)
{
  if (!self->created)
    return;
  remove_everything (self->dir, self->pin, self->host_link);
  self->created = FALSE;
}

void
vd_netns_remove_link (const gchar *host_link)
{
  remove_everything (NULL, NULL, host_link);
}

/* A daemon that died leaves its veth end behind (the netns itself died
 * with the daemon's private mount namespace). */
void
vd_netns_sweep (const gchar *dir, const gchar *host_link, const gchar *what)
{
  g_autofree gchar *pin = g_build_filename (dir, PIN_NAME, NULL);

  if (if_nametoindex (host_link) != 0 || g_file_test (dir, G_FILE_TEST_EXISTS)) {
    g_warning ("sweep: removing a leftover %s network", what);
    remove_everything (dir, pin, host_link);
  }
}
