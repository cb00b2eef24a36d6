/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium-canary-net: makes the isolation self-test's canary network and
 * hands its listeners to vivariumd, so that the daemon itself never opens
 * an AF_INET/AF_INET6 socket nor enters a namespace. Started by vivariumd
 * in a transient unit of its own, once per self-test run, with one end of
 * a socketpair as its standard input: it opens the listeners on host
 * loopback, makes the canary netns (vd-canary-net.h) and the listeners on
 * each canary address inside it, sends every listener in one message
 * (SCM_RIGHTS) and exits. The namespace has no pin: it lives as long as
 * the daemon keeps those sockets, and its veth pair goes with it. */
#define G_LOG_DOMAIN "vivarium-canary-net"

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vivarium-error.h"
#include "vd-canary-net.h"
#include "vd-netns.h"

#define MAX_PORT_TRIES 16

typedef struct {
  GArray  *fds;        /* gint */
  guint16  tcp_port;
  guint16  udp_port;
} Listeners;

static void
close_fds (GArray *fds)
{
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, gint, i));
  g_array_set_size (fds, 0);
}

static gboolean
add_listener (Listeners *l, const gchar *address, gboolean tcp, guint16 port, guint16 *bound, GError **error)
{
  gint fd = vd_netns_open_listener (address, tcp, port, bound, error);

  if (fd < 0) {
    g_prefix_error (error, "%s (%s): ", address, tcp ? "tcp" : "udp");
    return FALSE;
  }
  g_array_append_val (l->fds, fd);
  return TRUE;
}

/* One port for every listener of a transport, so it must be free on each
 * loopback: the first picks it, the others take it or the lot is tried
 * again. */
static gboolean
open_loopback_listeners (Listeners *l, gboolean tcp, GError **error)
{
  const gchar * const *loopbacks = vd_canary_net_loopbacks ();

  for (guint try = 0; try < MAX_PORT_TRIES; try++) {
    guint first = l->fds->len;
    guint16 port = 0;
    g_autoptr(GError) local_error = NULL;
    gboolean all = TRUE;

    if (!add_listener (l, loopbacks[0], tcp, 0, &port, error))
      return FALSE;
    for (guint i = 1; all && loopbacks[i] != NULL; i++)
      all = add_listener (l, loopbacks[i], tcp, port, NULL, &local_error);
    if (all) {
      if (tcp)
        l->tcp_port = port;
      else
        l->udp_port = port;
      return TRUE;
    }
    for (guint i = first; i < l->fds->len; i++)
      close (g_array_index (l->fds, gint, i));
    g_array_set_size (l->fds, first);
    if (try + 1 == MAX_PORT_TRIES) {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  }
  return FALSE;
}

/* Called inside the canary netns (vd_netns_create's thread). */
static gboolean
open_canary_listeners (gpointer user_data, GError **error)
{
  Listeners *l = user_data;
  const gchar * const *addresses = vd_canary_net_addresses ();

  for (guint i = 0; addresses[i] != NULL; i++) {
    if (!add_listener (l, addresses[i], TRUE, l->tcp_port, NULL, error) ||
        !add_listener (l, addresses[i], FALSE, l->udp_port, NULL, error))
      return FALSE;
  }
  return TRUE;
}

/* All of them in one message: the daemon takes the set or nothing. The one
 * byte of payload is there because a message carries rights only with
 * data; the daemon ignores it and tells each socket by asking the kernel. */
static gboolean
send_listeners (gint fd, GArray *fds, GError **error)
{
  gsize size = sizeof (gint) * fds->len;
  g_autofree guint8 *control = g_malloc0 (CMSG_SPACE (size));
  guint8 byte = 0;
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                        .msg_controllen = CMSG_SPACE (size) };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  ssize_t n;

  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (size);
  memcpy (CMSG_DATA (cmsg), fds->data, size);
  do
    n = sendmsg (fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "sending the listeners to vivariumd: %s",
                 n < 0 ? g_strerror (errno) : "short write");
    return FALSE;
  }
  return TRUE;
}

static gboolean
stdin_is_a_unix_socket (void)
{
  gint domain = 0;
  socklen_t len = sizeof domain;

  return getsockopt (STDIN_FILENO, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
}

int
main (int argc, char **argv)
{
  g_autoptr(GArray) fds = g_array_new (FALSE, FALSE, sizeof (gint));
  Listeners listeners = { .fds = fds };
  g_autoptr(GError) error = NULL;
  VdNetns *netns;

  setlocale (LC_ALL, "");
  vivarium_error_quark ();
  if (argc != 1 || !stdin_is_a_unix_socket ()) {
    g_printerr ("vivarium-canary-net is started by vivariumd, with its socket as standard input, "
                "and takes no argument\n");
    return EXIT_FAILURE;
  }
  if (!open_loopback_listeners (&listeners, TRUE, &error) || !open_loopback_listeners (&listeners, FALSE, &error)) {
    g_printerr ("Cannot open the loopback canaries: %s\n", error->message);
    close_fds (fds);
    return EXIT_FAILURE;
  }
  netns = vd_netns_new (NULL, VD_CANARY_HOST_LINK, VD_CANARY_PEER_LINK, VD_CANARY_MAC_TAG);
  if (!vd_netns_create (netns, vd_canary_net_addresses (), VD_CANARY_HOST_ADDR4, VD_CANARY_HOST_ADDR6,
                        open_canary_listeners, &listeners, &error)) {
    g_printerr ("Cannot make the canary network: %s\n", error->message);
    g_object_unref (netns);
    close_fds (fds);
    return EXIT_FAILURE;
  }
  if (!send_listeners (STDIN_FILENO, fds, &error)) {
    g_printerr ("%s\n", error->message);
    g_object_unref (netns);   /* deletes the veth pair, before its namespace goes with the sockets */
    close_fds (fds);
    return EXIT_FAILURE;
  }
  /* The veth pair is the daemon's now, with the namespace its sockets keep. */
  vd_netns_disown (netns);
  g_object_unref (netns);
  g_debug ("handed %u listeners to vivariumd (tcp port %u, udp port %u)", fds->len, listeners.tcp_port,
           listeners.udp_port);
  close_fds (fds);
  return EXIT_SUCCESS;
}
