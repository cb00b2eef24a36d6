/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The canary network's hand-over: the real vivarium-canary-net into the
 * daemon's VdCanary, a probe of a loopback and of an inside canary counted,
 * and the sets the daemon must refuse (built here by hand). Needs root: it
 * runs in a private network namespace of its own, which is also "the
 * host's" for the program it starts.
 *   test-canary --tap PATH-TO-vivarium-canary-net */
#define G_LOG_DOMAIN "test-canary"

#include "config.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gio/gio.h>

#include "vd-canary.h"
#include "vd-netns.h"

static const gchar *program;

static gint
run_program (void)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  gint pair[2];

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair));
  g_subprocess_launcher_take_stdin_fd (launcher, pair[1]);
  process = g_subprocess_launcher_spawn (launcher, &error, program, NULL);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_wait_check (process, NULL, &error));
  g_assert_no_error (error);
  return pair[0];
}

static gboolean
probe_tcp (const gchar *address, guint16 port)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;

  g_socket_client_set_timeout (client, 5);
  connection = g_socket_client_connect_to_host (client, address, port, NULL, &error);
  if (connection == NULL)
    g_printerr ("# %s:%u: %s\n", address, port, error->message);
  return connection != NULL;
}

static guint
seen (VdCanary *canary, const gchar *address, const gchar *transport)
{
  const gchar *peer = NULL;
  guint count = 0;

  vd_canary_drain (canary);
  g_assert_true (vd_canary_lookup (canary, address, transport, &count, &peer));
  return count;
}

static void
test_handover (void)
{
  g_autoptr(VdCanary) canary = vd_canary_new ();
  g_autoptr(GError) error = NULL;
  const gchar * const *addresses = vd_canary_get_addresses ();
  guint16 tcp;

  vd_canary_take_listeners (canary, run_program (), &error);
  g_assert_no_error (error);
  tcp = vd_canary_get_tcp_port (canary);
  g_assert_cmpuint (tcp, >, 0);
  g_assert_cmpuint (vd_canary_get_udp_port (canary), >, 0);
  for (guint i = 0; addresses[i] != NULL; i++)
    g_assert_cmpuint (seen (canary, addresses[i], "udp"), ==, 0);
  /* The program is gone; its namespace and veth live on in the sockets. */
  g_assert_cmpuint (if_nametoindex (VD_CANARY_HOST_LINK), !=, 0);
  g_assert_true (probe_tcp ("127.0.0.1", tcp));
  g_assert_true (probe_tcp ("10.255.255.254", tcp));
  g_assert_true (probe_tcp ("fd00::ffff:254", tcp));
  g_assert_cmpuint (seen (canary, "127.0.0.1", "tcp"), ==, 1);
  g_assert_cmpuint (seen (canary, "10.255.255.254", "tcp"), ==, 1);
  g_assert_cmpuint (seen (canary, "fd00::ffff:254", "tcp"), ==, 1);
  g_assert_cmpuint (seen (canary, "::1", "tcp"), ==, 0);
  vd_canary_teardown (canary);
  g_assert_cmpuint (if_nametoindex (VD_CANARY_HOST_LINK), ==, 0);
}

/* --- sets made here: each wrong in one way ------------------------------ */

static gint
listener (const gchar *address, gboolean tcp, guint16 port)
{
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string (address);
  g_autoptr(GSocketAddress) sa = g_inet_socket_address_new (inet, port);
  struct sockaddr_storage ss;
  gint family = g_inet_address_get_family (inet) == G_SOCKET_FAMILY_IPV4 ? AF_INET : AF_INET6;
  gint fd = socket (family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
  gint one = 1;

  g_assert_cmpint (fd, >=, 0);
  g_assert_true (g_socket_address_to_native (sa, &ss, sizeof ss, NULL));
  /* A canary address is no address of this namespace: bound all the same. */
  g_assert_no_errno (setsockopt (fd, SOL_IP, IP_FREEBIND, &one, sizeof one));
  /* and twice, for the set that has one twice */
  g_assert_no_errno (setsockopt (fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one));
  g_assert_no_errno (bind (fd, (struct sockaddr *) &ss, g_socket_address_get_native_size (sa)));
  if (tcp)
    g_assert_no_errno (listen (fd, 4));
  return fd;
}

typedef enum {
  WRONG_NOTHING, WRONG_NAMESPACE, WRONG_PORT, WRONG_PIPE, WRONG_MISSING, WRONG_EXTRA, WRONG_TWICE, WRONG_STRANGER
} Wrong;

#define TCP_PORT 40001
#define UDP_PORT 40002

typedef struct {
  GArray *fds;
  Wrong   wrong;
} Inside;

static void
add (GArray *fds, const gchar *address, gboolean tcp, guint16 port)
{
  gint fd = listener (address, tcp, port);

  g_array_append_val (fds, fd);
}

/* The canaries, in a namespace of this thread's own; what is wrong is the
 * last address's TCP listener. */
static gpointer
make_inside (gpointer user_data)
{
  Inside *inside = user_data;
  const gchar * const *addresses = vd_canary_net_addresses ();

  g_assert_no_errno (unshare (CLONE_NEWNET));
  for (guint i = 0; addresses[i] != NULL; i++) {
    gboolean target = addresses[i + 1] == NULL;
    add (inside->fds, addresses[i], FALSE, UDP_PORT);
    if (!target || inside->wrong == WRONG_NOTHING || inside->wrong == WRONG_PIPE || inside->wrong == WRONG_EXTRA ||
        inside->wrong == WRONG_STRANGER)
      add (inside->fds, addresses[i], TRUE, TCP_PORT);
    else if (inside->wrong == WRONG_PORT)
      add (inside->fds, addresses[i], TRUE, TCP_PORT + 10);
    else if (inside->wrong == WRONG_TWICE)
      add (inside->fds, addresses[0], TRUE, TCP_PORT);
  }
  return NULL;
}

static GArray *
make_set (Wrong wrong)
{
  GArray *fds = g_array_new (FALSE, FALSE, sizeof (gint));
  const gchar * const *loopbacks = vd_canary_net_loopbacks ();
  const gchar * const *addresses = vd_canary_net_addresses ();
  Inside inside = { fds, wrong };

  for (guint i = 0; loopbacks[i] != NULL; i++) {
    add (fds, wrong == WRONG_STRANGER && i == 0 ? "127.0.0.2" : loopbacks[i], TRUE, TCP_PORT);
    add (fds, loopbacks[i], FALSE, UDP_PORT);
  }
  g_thread_join (g_thread_new ("inside", make_inside, &inside));
  if (wrong == WRONG_NAMESPACE)
    add (fds, addresses[g_strv_length ((gchar **) addresses) - 1], TRUE, TCP_PORT);
  if (wrong == WRONG_EXTRA)
    add (fds, "127.0.0.2", TRUE, TCP_PORT);
  if (wrong == WRONG_PIPE) {
    gint pipe_fds[2];
    g_assert_no_errno (pipe (pipe_fds));
    close (pipe_fds[1]);
    close (g_array_index (fds, gint, 0));
    g_array_index (fds, gint, 0) = pipe_fds[0];
  }
  return fds;
}

static gint
send_set (GArray *fds)
{
  gsize size = sizeof (gint) * fds->len;
  g_autofree guint8 *control = g_malloc0 (CMSG_SPACE (size));
  guint8 byte = 0;
  struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = CMSG_SPACE (size) };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  gint pair[2];

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair));
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (size);
  memcpy (CMSG_DATA (cmsg), fds->data, size);
  g_assert_cmpint (sendmsg (pair[1], &msg, 0), ==, 1);
  close (pair[1]);
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, gint, i));
  return pair[0];
}

static void
refused (Wrong wrong, const gchar *message)
{
  g_autoptr(VdCanary) canary = vd_canary_new ();
  g_autoptr(GArray) fds = make_set (wrong);
  g_autoptr(GError) error = NULL;

  g_assert_false (vd_canary_take_listeners (canary, send_set (fds), &error));
  g_assert_nonnull (error);
  g_printerr ("# %s\n", error->message);
  g_assert_nonnull (strstr (error->message, message));
  g_assert_cmpuint (vd_canary_get_tcp_port (canary), ==, 0);
}

/* The control: a set made here the way the program makes it is taken, so
 * the others are refused for their own fault. */
static void
test_taken (void)
{
  g_autoptr(VdCanary) canary = vd_canary_new ();
  g_autoptr(GArray) fds = make_set (WRONG_NOTHING);
  g_autoptr(GError) error = NULL;

  vd_canary_take_listeners (canary, send_set (fds), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vd_canary_get_tcp_port (canary), ==, TCP_PORT);
  g_assert_cmpuint (vd_canary_get_udp_port (canary), ==, UDP_PORT);
}

static void
test_refused (void)
{
  refused (WRONG_NAMESPACE, "the canary on 2001:db8:ffff::254 is not in the canary network namespace");
  refused (WRONG_PORT, "are not all on one port");
  refused (WRONG_PIPE, "not a socket");
  refused (WRONG_MISSING, "not the 20 canaries");
  refused (WRONG_EXTRA, "more than the 20 canaries");
  refused (WRONG_TWICE, "two sockets on 10.255.255.254 (tcp)");
  refused (WRONG_STRANGER, "a socket on 127.0.0.2 (tcp), which is no canary");
}

static void
test_nothing (void)
{
  g_autoptr(VdCanary) canary = vd_canary_new ();
  g_autoptr(GError) error = NULL;
  gint pair[2];

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair));
  close (pair[1]);
  g_assert_false (vd_canary_take_listeners (canary, pair[0], &error));
  g_assert_nonnull (strstr (error->message, "without handing over"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  if (argc != 2) {
    g_printerr ("usage: test-canary [--tap] PATH-TO-vivarium-canary-net\n");
    return 1;
  }
  program = argv[1];
  /* a missing prerequisite fails, loudly; it never skips */
  if (geteuid () != 0) {
    g_printerr ("test-canary needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) for its namespaces\n");
    return 1;
  }
  if (unshare (CLONE_NEWNET) < 0) {
    g_printerr ("cannot enter a private network namespace: %s\n", g_strerror (errno));
    return 1;
  }
  if (!g_spawn_command_line_sync ("ip link set lo up", NULL, NULL, NULL, NULL)) {
    g_printerr ("cannot set lo up\n");
    return 1;
  }
  g_test_add_func ("/canary/handover", test_handover);
  g_test_add_func ("/canary/taken", test_taken);
  g_test_add_func ("/canary/refused", test_refused);
  g_test_add_func ("/canary/nothing", test_nothing);
  return g_test_run ();
}
