/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-dns-relay"

/* vivarium-dns-relay: the guests' DNS relay, out of vivariumd (issue 18).
 * vivariumd starts it in a transient unit of its own (vd-dns-relay.c says
 * which sandbox) with the host's nameservers as arguments. It makes its own
 * netns behind the veth vv-dns, binds port 53 there, gives up every
 * capability it was started with, and only then reads a guest's byte. The
 * netns has no pin: it lives as long as the relay's sockets, and the veth
 * pair goes with it, so a relay that dies leaves nothing behind. */

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <glib-unix.h>
#include <systemd/sd-daemon.h>

#include "vd-dns-forwarder.h"
#include "vd-dns-relay.h"
#include "vd-netns.h"

#define DNS_PORT         53
#define MAX_NAMESERVERS  3

typedef struct {
  gint udp_fd;
  gint tcp_fd;
} Listeners;

static GPtrArray *
parse_nameservers (gint argc, gchar **argv, GError **error)
{
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func (g_object_unref);

  if (argc < 2 || argc > 1 + MAX_NAMESERVERS) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "give 1 to %d nameserver addresses",
                 MAX_NAMESERVERS);
    return NULL;
  }
  for (gint i = 1; i < argc; i++) {
    GSocketAddress *addr = g_inet_socket_address_new_from_string (argv[i], DNS_PORT);
    if (addr == NULL) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "“%s” is not an IP address", argv[i]);
      return NULL;
    }
    g_ptr_array_add (out, addr);
  }
  return g_steal_pointer (&out);
}

/* On the netns thread, inside the relay's netns: port 53 needs
 * CAP_NET_BIND_SERVICE, which the unit gives until drop_capabilities(). */
static gboolean
open_inside (gpointer user_data, GError **error)
{
  Listeners *l = user_data;

  l->udp_fd = vd_netns_open_listener (VD_DNS_RELAY_ADDRESS, FALSE, DNS_PORT, NULL, error);
  if (l->udp_fd < 0)
    return FALSE;
  l->tcp_fd = vd_netns_open_listener (VD_DNS_RELAY_ADDRESS, TRUE, DNS_PORT, NULL, error);
  return l->tcp_fd >= 0;
}

/* Capabilities are a thread's own; the netns thread is joined by now and
 * no other thread has been started, so this is all of the process. Not
 * root and with no_new_privs, it cannot get them back. */
static gboolean
drop_capabilities (GError **error)
{
  struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 ||
      syscall (SYS_capset, &header, data) != 0) {
    gint errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot drop capabilities: %s",
                 g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

static gchar *
describe (GPtrArray *nameservers)
{
  g_autoptr(GString) s = g_string_new (NULL);

  for (guint i = 0; i < nameservers->len; i++) {
    g_autofree gchar *text = g_socket_connectable_to_string (g_ptr_array_index (nameservers, i));
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", text);
  }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

/* A veth left by a relay whose netns the kernel has not freed yet (a
 * restart right after a crash) would make the new pair's name taken. */
static gboolean
set_up (VdNetns *netns, Listeners *l, GError **error)
{
  const gchar *inside[] = { VD_DNS_RELAY_ADDRESS, NULL };

  vd_netns_remove_link (VD_DNS_RELAY_HOST_LINK);
  if (!vd_netns_create (netns, inside, VD_DNS_RELAY_HOST_ADDRESS, NULL, open_inside, l, error))
    return FALSE;
  vd_netns_disown (netns);
  return drop_capabilities (error);
}

gint
main (gint argc, gchar **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) nameservers = NULL;
  g_autoptr(VdNetns) netns = NULL;
  g_autoptr(VdDnsForwarder) forwarder = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autofree gchar *upstreams = NULL;
  Listeners l = { -1, -1 };

  setlocale (LC_ALL, "");
  nameservers = parse_nameservers (argc, argv, &error);
  if (nameservers == NULL) {
    g_printerr ("vivarium-dns-relay: %s\n", error->message);
    return 2;
  }
  netns = vd_netns_new (NULL, VD_DNS_RELAY_HOST_LINK, VD_DNS_RELAY_PEER_LINK, VD_DNS_RELAY_MAC_TAG);
  forwarder = vd_dns_forwarder_new (nameservers);
  if (!set_up (netns, &l, &error) || !vd_dns_forwarder_start (forwarder, l.udp_fd, l.tcp_fd, &error)) {
    g_printerr ("vivarium-dns-relay: %s\n", error->message);
    return 1;
  }
  upstreams = describe (nameservers);
  g_message ("relaying %s:%u (in its own netns behind veth %s) to %s, with no capability left",
             VD_DNS_RELAY_ADDRESS, DNS_PORT, VD_DNS_RELAY_HOST_LINK, upstreams);
  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, quit_cb, loop);
  g_unix_signal_add (SIGINT, quit_cb, loop);
  sd_notify (0, "READY=1");
  g_main_loop_run (loop);
  sd_notify (0, "STOPPING=1");
  /* The netns, and the veth with it, go with the last socket. */
  vd_dns_forwarder_stop (forwarder);
  g_message ("stopped: %" G_GUINT64_FORMAT " answers relayed, %" G_GUINT64_FORMAT " queries dropped",
             vd_dns_forwarder_get_relayed (forwarder), vd_dns_forwarder_get_dropped (forwarder));
  return 0;
}
