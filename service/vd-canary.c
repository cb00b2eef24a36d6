/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdCanary"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib-unix.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-canary.h"
#include "vd-netns.h"

/* vivarium-canary-net starts in well under a second; a run that has no
 * canary by then will not get one. */
#define SETUP_TIMEOUT_S   15
#define STOP_TIMEOUT_MS   10000

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
  VdSystemd *systemd;
  gchar     *unit;
  guint      unit_watch;
  gint       sock;        /* the daemon's end of vivarium-canary-net's socketpair */
  GPtrArray *listeners;   /* Listener, in the order of vd-canary-net.h */
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
  g_clear_object (&self->systemd);
  g_free (self->unit);
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
  self->sock = -1;
  self->listeners = g_ptr_array_new_with_free_func ((GDestroyNotify) listener_free);
}

VdCanary *
vd_canary_new (void)
{
  return g_object_new (VD_TYPE_CANARY, NULL);
}

const gchar *vd_canary_get_unit (VdCanary *self) { return self->unit; }
guint16 vd_canary_get_tcp_port (VdCanary *self) { return self->tcp_port; }
guint16 vd_canary_get_udp_port (VdCanary *self) { return self->udp_port; }
const gchar * const *vd_canary_get_addresses (void) { return vd_canary_net_addresses (); }

static gboolean
set_error (GError **error, const gchar *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
set_error (GError **error, const gchar *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, format, args));
  va_end (args);
  return FALSE;
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

/* --- what vivarium-canary-net handed over ------------------------------ */

/* One listener the set must have, from vd-canary-net.h. */
typedef struct {
  const gchar  *address;
  GInetAddress *inet;
  gboolean      tcp;
  gboolean      inside;   /* in the canary netns, not the host's */
  gint          fd;       /* -1 until a received socket is it */
} Expected;

static void
expected_clear (Expected *e)
{
  g_clear_object (&e->inet);
  if (e->fd >= 0)
    close (e->fd);
  e->fd = -1;
}

static void
add_expected (GArray *set, const gchar * const *addresses, gboolean inside)
{
  for (guint i = 0; addresses[i] != NULL; i++) {
    for (guint t = 0; t < 2; t++) {
      Expected e = { .address = addresses[i], .inet = g_inet_address_new_from_string (addresses[i]),
                     .tcp = t == 0, .inside = inside, .fd = -1 };
      g_array_append_val (set, e);
    }
  }
}

static GArray *
expected_set (void)
{
  GArray *set = g_array_new (FALSE, TRUE, sizeof (Expected));

  g_array_set_clear_func (set, (GDestroyNotify) expected_clear);
  add_expected (set, vd_canary_net_loopbacks (), FALSE);
  add_expected (set, vd_canary_net_addresses (), TRUE);
  return set;
}

static gboolean
get_int_option (gint fd, gint option, gint *value, GError **error)
{
  socklen_t len = sizeof *value;

  if (getsockopt (fd, SOL_SOCKET, option, value, &len) != 0)
    return set_error (error, "a handed-over socket: getsockopt: %s", g_strerror (errno));
  return TRUE;
}

/* The inode of @fd's network namespace (SIOCGSKNS: CAP_NET_ADMIN, which
 * the daemon has for its nftables table). */
static gboolean
socket_netns (gint fd, ino_t *ino, GError **error)
{
  gint ns = ioctl (fd, SIOCGSKNS);
  struct stat st;
  gint errsv;

  if (ns < 0)
    return set_error (error, "a handed-over socket's network namespace: %s", g_strerror (errno));
  errsv = fstat (ns, &st) == 0 ? 0 : errno;
  close (ns);
  if (errsv != 0)
    return set_error (error, "a handed-over socket's network namespace: %s", g_strerror (errsv));
  *ino = st.st_ino;
  return TRUE;
}

typedef struct {
  GInetAddress *address;
  guint16       port;
  gboolean      tcp;
  ino_t         netns;
} Identity;

/* What the kernel says @fd is; never what vivarium-canary-net says. */
static gboolean
identify (gint fd, Identity *id, GError **error)
{
  struct sockaddr_storage ss = { 0 };
  socklen_t len = sizeof ss;
  g_autoptr(GSocketAddress) addr = NULL;
  struct stat st;
  gint domain, type, protocol, listening;

  if (fstat (fd, &st) != 0 || !S_ISSOCK (st.st_mode))
    return set_error (error, "it handed over something that is not a socket");
  if (!get_int_option (fd, SO_DOMAIN, &domain, error) || !get_int_option (fd, SO_TYPE, &type, error) ||
      !get_int_option (fd, SO_PROTOCOL, &protocol, error) || !get_int_option (fd, SO_ACCEPTCONN, &listening, error))
    return FALSE;
  if (domain != AF_INET && domain != AF_INET6)
    return set_error (error, "it handed over a socket of family %d, not AF_INET or AF_INET6", domain);
  if (type == SOCK_STREAM && protocol == IPPROTO_TCP && listening)
    id->tcp = TRUE;
  else if (type == SOCK_DGRAM && protocol == IPPROTO_UDP)
    id->tcp = FALSE;
  else
    return set_error (error, "it handed over a socket that is neither a TCP listener nor a UDP socket");
  if (getsockname (fd, (struct sockaddr *) &ss, &len) != 0)
    return set_error (error, "a handed-over socket: getsockname: %s", g_strerror (errno));
  addr = g_socket_address_new_from_native (&ss, len);
  if (addr == NULL || !G_IS_INET_SOCKET_ADDRESS (addr) || ss.ss_family != domain)
    return set_error (error, "a handed-over socket has no address of its family");
  id->address = g_object_ref (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (addr)));
  id->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (addr));
  return socket_netns (fd, &id->netns, error);
}

static Expected *
find_expected (GArray *set, const Identity *id)
{
  for (guint i = 0; i < set->len; i++) {
    Expected *e = &g_array_index (set, Expected, i);
    if (e->tcp == id->tcp && g_inet_address_equal (e->inet, id->address))
      return e;
  }
  return NULL;
}

/* Puts @fd in its slot of @set, or says why it has none; takes @fd. */
static gboolean
place (VdCanary *self, GArray *set, gint fd, ino_t host_netns, ino_t *inside_netns, GError **error)
{
  Identity id = { 0 };
  g_autoptr(GInetAddress) address = NULL;
  g_autofree gchar *text = NULL;
  Expected *e;
  guint16 *port;
  gboolean ok = identify (fd, &id, error);

  address = id.address;
  if (!ok) {
    close (fd);
    return FALSE;
  }
  text = g_inet_address_to_string (address);
  e = find_expected (set, &id);
  port = id.tcp ? &self->tcp_port : &self->udp_port;
  if (e == NULL || e->fd >= 0) {
    close (fd);
    if (e != NULL)
      return set_error (error, "it handed over two sockets on %s (%s)", text, id.tcp ? "tcp" : "udp");
    return set_error (error, "it handed over a socket on %s (%s), which is no canary", text, id.tcp ? "tcp" : "udp");
  }
  e->fd = fd;
  if (id.port == 0 || (*port != 0 && *port != id.port))
    return set_error (error, "the %s canaries are not all on one port (%s on %u)", id.tcp ? "tcp" : "udp", text,
                      id.port);
  *port = id.port;
  if (!e->inside && id.netns != host_netns)
    return set_error (error, "the canary on %s is not in the daemon's network namespace", text);
  if (e->inside && (id.netns == host_netns || (*inside_netns != 0 && id.netns != *inside_netns)))
    return set_error (error, "the canary on %s is not in the canary network namespace", text);
  if (e->inside)
    *inside_netns = id.netns;
  return TRUE;
}

static gboolean
check_listeners (VdCanary *self, GArray *fds, GError **error)
{
  g_autoptr(GArray) set = expected_set ();
  ino_t inside_netns = 0;
  struct stat host;

  if (stat ("/proc/self/ns/net", &host) != 0)
    return set_error (error, "the daemon's network namespace: %s", g_strerror (errno));
  if (fds->len != set->len)
    return set_error (error, "it handed over %u sockets, not the %u canaries", fds->len, set->len);
  self->tcp_port = self->udp_port = 0;
  for (guint i = 0; i < fds->len; i++) {
    gint fd = g_array_index (fds, gint, i);
    g_array_index (fds, gint, i) = -1;
    if (!place (self, set, fd, host.st_ino, &inside_netns, error))
      return FALSE;
  }
  for (guint i = 0; i < set->len; i++) {
    Expected *e = &g_array_index (set, Expected, i);
    Listener *l = g_new0 (Listener, 1);
    gint flags = fcntl (e->fd, F_GETFL);

    /* Drained on the main loop: it must never wait in accept(). */
    if (flags < 0 || fcntl (e->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      g_free (l);
      return set_error (error, "a canary socket: %s", g_strerror (errno));
    }
    l->address = g_strdup (e->address);
    l->tcp = e->tcp;
    l->fd = g_steal_fd (&e->fd);
    g_ptr_array_add (self->listeners, l);
  }
  return TRUE;
}

static void
close_fd_at (gint *fd)
{
  if (*fd >= 0)
    close (*fd);
}

/* One message, every socket in it: a control buffer for exactly the set,
 * and anything more (MSG_CTRUNC) refused. */
static gboolean
receive_listeners (VdCanary *self, GError **error)
{
  guint expected = vd_canary_net_n_listeners ();
  gsize space = CMSG_SPACE (sizeof (gint) * expected);
  g_autofree guint8 *control = g_malloc0 (space);
  g_autoptr(GArray) fds = g_array_new (FALSE, FALSE, sizeof (gint));
  guint8 byte;
  struct iovec iov = { .iov_base = &byte, .iov_len = sizeof byte };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = space };
  ssize_t n;

  g_array_set_clear_func (fds, (GDestroyNotify) close_fd_at);
  do
    n = recvmsg (self->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return set_error (error, "it exited without handing over its listeners");
  if (n < 0)
    return set_error (error, "receiving its listeners: %s", g_strerror (errno));
  for (struct cmsghdr *c = CMSG_FIRSTHDR (&msg); c != NULL; c = CMSG_NXTHDR (&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    for (gsize i = 0; i < (c->cmsg_len - CMSG_LEN (0)) / sizeof (gint); i++) {
      gint fd;
      memcpy (&fd, CMSG_DATA (c) + i * sizeof (gint), sizeof fd);
      g_array_append_val (fds, fd);
    }
  }
  if (n == 0 && fds->len == 0)
    return set_error (error, "it exited without handing over its listeners");
  if (msg.msg_flags & MSG_CTRUNC)
    return set_error (error, "it handed over more than the %u canaries", expected);
  if (!check_listeners (self, fds, error)) {
    g_ptr_array_set_size (self->listeners, 0);
    self->tcp_port = self->udp_port = 0;
    return FALSE;
  }
  return TRUE;
}

/* --- the unit ---------------------------------------------------------- */

static void
add_bool (GVariantBuilder *b, const gchar *name)
{
  g_variant_builder_add (b, "(sv)", name, g_variant_new_boolean (TRUE));
}

static void
add_string (GVariantBuilder *b, const gchar *name, const gchar *value)
{
  g_variant_builder_add (b, "(sv)", name, g_variant_new_string (value));
}

/* (bas): an allow-list (TRUE) or names taken out of it (FALSE). */
static void
add_list (GVariantBuilder *b, const gchar *name, gboolean allow, const gchar * const *values)
{
  g_variant_builder_add (b, "(sv)", name, g_variant_new ("(b^as)", allow, values));
}

/* Root, because making a netns and a veth pair takes CAP_SYS_ADMIN and
 * CAP_NET_ADMIN; those two and nothing else, no namespace but a network
 * one, nothing writable, and the socket families it uses. Not the
 * worker/QEMU sandbox (vd-unit-sandbox.c): that one allows neither.
 * No IPAddressDeny= here, on purpose: the listeners must receive the
 * probes. A socket stays in the cgroup of the process that created it, so
 * these are this unit's, and the daemon's own IP filters never apply to
 * them. */
static GVariant *
unit_properties (void)
{
  g_autofree gchar *program = g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium-canary-net", NULL);
  const gchar *argv[] = { program, NULL };
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  const gchar *families[] = { "AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@privileged", "@resources", NULL };
  const gchar *native[] = { "native", NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  add_string (&b, "Description", "Vivarium self-test canary network");
  add_string (&b, "Type", "oneshot");
  add_string (&b, "Slice", "system.slice");
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "After", g_variant_new_strv (bind_to, -1));
  add_string (&b, "CollectMode", "inactive-or-failed");
  g_variant_builder_add (&b, "(sv)", "ExecStart", g_variant_new_parsed ("[(%s, %^as, false)]", argv[0], argv));
  g_variant_builder_add (&b, "(sv)", "StandardInputFileDescriptor", g_variant_new_handle (0));
  add_string (&b, "StandardOutput", "journal");
  add_string (&b, "StandardError", "journal");
  g_variant_builder_add (&b, "(sv)", "TimeoutStartUSec", g_variant_new_uint64 (10 * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (8));
  g_variant_builder_add (&b, "(sv)", "CapabilityBoundingSet",
                         g_variant_new_uint64 ((G_GUINT64_CONSTANT (1) << CAP_NET_ADMIN) |
                                               (G_GUINT64_CONSTANT (1) << CAP_SYS_ADMIN)));
  g_variant_builder_add (&b, "(sv)", "RestrictNamespaces", g_variant_new_uint64 (CLONE_NEWNET));
  add_list (&b, "RestrictAddressFamilies", TRUE, families);
  add_string (&b, "ProtectSystem", "strict");
  add_string (&b, "ProtectHome", "yes");
  add_string (&b, "ProtectProc", "invisible");
  add_string (&b, "ProcSubset", "pid");
  add_bool (&b, "PrivateTmp");
  add_bool (&b, "PrivateMounts");
  add_bool (&b, "PrivateDevices");
  add_string (&b, "DevicePolicy", "closed");
  add_bool (&b, "ProtectKernelTunables");
  add_bool (&b, "ProtectKernelModules");
  add_bool (&b, "ProtectKernelLogs");
  add_bool (&b, "ProtectClock");
  add_bool (&b, "ProtectHostname");
  add_bool (&b, "ProtectControlGroups");
  add_bool (&b, "NoNewPrivileges");
  add_bool (&b, "MemoryDenyWriteExecute");
  add_bool (&b, "LockPersonality");
  add_bool (&b, "RestrictRealtime");
  add_bool (&b, "RestrictSUIDSGID");
  g_variant_builder_add (&b, "(sv)", "SystemCallArchitectures", g_variant_new_strv (native, -1));
  /* @system-service has setns() and unshare() (@process); @privileged
   * has neither (and no mount(): the namespace has no pin). */
  add_list (&b, "SystemCallFilter", TRUE, syscalls);
  add_list (&b, "SystemCallFilter", FALSE, denied);
  g_variant_builder_add (&b, "(sv)", "SystemCallErrorNumber", g_variant_new_int32 (EPERM));
  g_variant_builder_add (&b, "(sv)", "UMask", g_variant_new_uint32 (0077));
  add_string (&b, "KeyringMode", "private");
  return g_variant_builder_end (&b);
}

/* The unit ends by itself (a oneshot, collected); this is for one that
 * did not, or failed and stays loaded. Bounded. */
static void
remove_unit (VdCanary *self)
{
  g_autoptr(GError) error = NULL;

  if (self->systemd == NULL || self->unit == NULL)
    return;
  if (self->unit_watch != 0)
    vd_systemd_unwatch_unit (self->systemd, self->unit_watch);
  self->unit_watch = 0;
  if (!vd_systemd_unit_is_loaded (self->systemd, self->unit))
    return;
  if (!vd_systemd_stop_unit_sync (self->systemd, self->unit, STOP_TIMEOUT_MS, &error))
    g_debug ("stopping %s: %s", self->unit, error->message);
  vd_systemd_reset_failed_unit (self->systemd, self->unit);
}

/* --- setup ------------------------------------------------------------- */

typedef struct {
  guint    timeout_id;
  GSource *cancel_source;
  gboolean returned;
} SetupData;

static void
setup_data_free (SetupData *data)
{
  if (data->timeout_id != 0)
    g_source_remove (data->timeout_id);
  if (data->cancel_source != NULL) {
    g_source_destroy (data->cancel_source);
    g_source_unref (data->cancel_source);
  }
  g_free (data);
}

/* The first word is the task's; later ones (the unit's job after a
 * timeout) are dropped. Takes @error. */
static void
setup_return (GTask *task, GError *error)
{
  SetupData *data = g_task_get_task_data (task);
  VdCanary *self = g_task_get_source_object (task);

  if (data->returned) {
    g_clear_error (&error);
    return;
  }
  data->returned = TRUE;
  if (data->timeout_id != 0)
    g_source_remove (data->timeout_id);
  data->timeout_id = 0;
  if (data->cancel_source != NULL)
    g_source_destroy (data->cancel_source);
  if (error != NULL) {
    g_task_return_error (task, error);
    return;
  }
  attach_sources (self);
  g_info ("canary up (%s): %u listeners, tcp port %u, udp port %u", self->unit, self->listeners->len,
          self->tcp_port, self->udp_port);
  g_task_return_boolean (task, TRUE);
}

static void
unit_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  VdCanary *self = g_task_get_source_object (task);
  SetupData *data = g_task_get_task_data (task);
  GError *error = NULL;

  if (data->returned)
    return;
  if (!vd_systemd_start_transient_finish (VD_SYSTEMD (source), res, &error)) {
    g_autofree gchar *end = vd_systemd_describe_unit_end (self->systemd, self->unit_watch);
    if (end != NULL)
      g_prefix_error (&error, "vivarium-canary-net failed (%s; journalctl -u %s says why): ", end, self->unit);
    else
      g_prefix_error (&error, "vivarium-canary-net failed: ");
    setup_return (task, error);
    return;
  }
  if (!receive_listeners (self, &error))
    g_prefix_error (&error, "vivarium-canary-net (%s): ", self->unit);
  setup_return (task, error);
}

static gboolean
setup_timeout_cb (gpointer user_data)
{
  GTask *task = user_data;
  SetupData *data = g_task_get_task_data (task);
  VdCanary *self = g_task_get_source_object (task);

  data->timeout_id = 0;
  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, NULL, NULL);
  setup_return (task, g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                                   "vivarium-canary-net (%s) did not hand over the canaries within %u s",
                                   self->unit, SETUP_TIMEOUT_S));
  return G_SOURCE_REMOVE;
}

static gboolean
setup_cancelled_cb (GCancellable *cancellable, gpointer user_data)
{
  GTask *task = user_data;
  VdCanary *self = g_task_get_source_object (task);

  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, NULL, NULL);
  setup_return (task, g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED, "Setting up the canary was cancelled"));
  return G_SOURCE_REMOVE;
}

static gboolean
make_socketpair (VdCanary *self, GUnixFDList *fds, GError **error)
{
  gint pair[2];
  gint index;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return set_error (error, "Cannot make the canary's socket: %s", g_strerror (errno));
  self->sock = pair[0];
  index = g_unix_fd_list_append (fds, pair[1], error);
  close (pair[1]);
  return index >= 0;
}

/* Starts this run's vivarium-canary-net and takes the listeners it hands
 * over; fails (typed) if they are not there within SETUP_TIMEOUT_S, or are
 * not exactly the canaries of vd-canary-net.h. */
void
vd_canary_setup_async (VdCanary *self, VdSystemd *systemd, GCancellable *cancellable, GAsyncReadyCallback callback,
                       gpointer user_data)
{
  static guint runs = 0;
  g_autoptr(GTask) task = NULL;
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  SetupData *data;
  GError *error = NULL;

  g_return_if_fail (!self->set_up);
  task = g_task_new (self, cancellable, callback, user_data);
  data = g_new0 (SetupData, 1);
  g_task_set_source_tag (task, vd_canary_setup_async);
  g_task_set_task_data (task, data, (GDestroyNotify) setup_data_free);
  self->set_up = TRUE;
  self->systemd = g_object_ref (systemd);
  /* Unique across the daemon's restarts too: a failed unit of an earlier
   * daemon may still be loaded. */
  self->unit = g_strdup_printf ("vivarium-canary-%" G_GINT64_FORMAT "-%u.service", g_get_real_time (), ++runs);
  if (!make_socketpair (self, fds, &error)) {
    vivarium_error_convert (&error);
    setup_return (task, error);
    return;
  }
  /* Before the start: a unit collected at its end says how it ended only
   * to a watch that was there. */
  self->unit_watch = vd_systemd_watch_unit (systemd, self->unit);
  data->timeout_id = g_timeout_add_seconds (SETUP_TIMEOUT_S, setup_timeout_cb, task);
  if (cancellable != NULL) {
    data->cancel_source = g_cancellable_source_new (cancellable);
    g_source_set_callback (data->cancel_source, (GSourceFunc) (GCallback) setup_cancelled_cb, task, NULL);
    g_source_attach (data->cancel_source, NULL);
  }
  vd_systemd_start_transient_async (systemd, self->unit, unit_properties (), fds, NULL, unit_done_cb,
                                    g_object_ref (task));
}

gboolean
vd_canary_setup_finish (VdCanary *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* For tests: what a vivarium-canary-net run by the caller (no unit) sent
 * on @sock, checked as the setup checks it. Takes @sock. */
gboolean
vd_canary_take_listeners (VdCanary *self, gint sock, GError **error)
{
  g_return_val_if_fail (!self->set_up, FALSE);
  self->set_up = TRUE;
  self->sock = sock;
  if (!receive_listeners (self, error))
    return FALSE;
  attach_sources (self);
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

/* The veth goes first, by hand: the namespace (and its veth pair with it)
 * would go with the last socket, but the kernel frees a namespace later,
 * and the run checks that nothing is left. */
void
vd_canary_teardown (VdCanary *self)
{
  if (!self->set_up)
    return;
  vd_netns_remove_link (VD_CANARY_HOST_LINK);
  g_ptr_array_set_size (self->listeners, 0);
  if (self->sock >= 0)
    close (self->sock);
  self->sock = -1;
  remove_unit (self);
  self->set_up = FALSE;
}

/* A veth the kernel had not yet freed with its namespace when the daemon
 * died, and the netns pin directory of a daemon from before
 * vivarium-canary-net. */
void
vd_canary_sweep (const gchar *runtime_dir)
{
  g_autofree gchar *dir = g_build_filename (runtime_dir, "canary", NULL);

  vd_netns_sweep (dir, VD_CANARY_HOST_LINK, "canary");
}
