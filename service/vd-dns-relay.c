/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDnsRelay"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-dns-relay.h"
#include "vd-host-addresses.h"
#include "vd-netns.h"
#include "vd-unit-sandbox.h"

#define HOST_RESOLV_CONF   "/etc/resolv.conf"
#define MAX_NAMESERVERS    3          /* glibc's MAXNS: it reads no more */
#define DNS_PORT           53
#define UNIT_START_MS      15000
#define UNIT_STOP_MS       10000

/* The daemon's half of the relay: whether one is needed, the unit that runs
 * vivarium-dns-relay (which forwards; the daemon never sees a query), and
 * the resolv.conf the session units get. */
struct _VdDnsRelay {
  GObject          parent_instance;
  VdConfig        *config;
  VdSystemd       *systemd;
  gchar           *dir;
  gchar           *resolv_conf;
  GPtrArray       *upstreams;     /* GInetSocketAddress, port 53 */
  gboolean         active;
};

G_DEFINE_TYPE (VdDnsRelay, vd_dns_relay, G_TYPE_OBJECT)

static void
vd_dns_relay_finalize (GObject *object)
{
  VdDnsRelay *self = VD_DNS_RELAY (object);

  vd_dns_relay_stop (self);
  g_clear_pointer (&self->upstreams, g_ptr_array_unref);
  g_clear_object (&self->systemd);
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

static void
vd_dns_relay_init (VdDnsRelay *self)
{
}

static gchar *
relay_dir (const gchar *runtime_dir)
{
  return g_build_filename (runtime_dir, "dns", NULL);
}

VdDnsRelay *
vd_dns_relay_new (VdConfig *config, VdSystemd *systemd)
{
  VdDnsRelay *self = g_object_new (VD_TYPE_DNS_RELAY, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->dir = relay_dir (vd_config_get_runtime_dir (config));
  self->resolv_conf = g_build_filename (self->dir, "resolv.conf", NULL);
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

static gboolean
is_denied (VdDnsRelay *self, GInetAddress *addr)
{
  g_auto(GStrv) extra = vd_config_get_extra_deny (self->config);

  if (vivarium_denylist_match (addr) != NULL)
    return TRUE;
  for (guint i = 0; extra[i] != NULL; i++) {
    if (in_cidr (addr, extra[i]))
      return TRUE;
  }
  return vd_host_addresses_contain (addr);
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

/* --- the relay's unit ----------------------------------------------------- */

/* IPAddressAllow= (a(iayu)): the nameservers, and the veth's host end, the
 * source of every guest's query (QEMU's slirp sockets are in the host's
 * netns); IPAddressDeny=any takes the rest. */
static GVariant *
allowed_addresses (VdDnsRelay *self)
{
  g_autoptr(GPtrArray) cidrs = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (cidrs, g_strdup (VD_DNS_RELAY_HOST_ADDRESS "/32"));
  for (guint i = 0; i < self->upstreams->len; i++) {
    GInetAddress *addr = g_inet_socket_address_get_address (g_ptr_array_index (self->upstreams, i));
    g_autofree gchar *text = g_inet_address_to_string (addr);
    g_ptr_array_add (cidrs, g_strdup_printf ("%s/%u", text, g_inet_address_get_family (addr) == G_SOCKET_FAMILY_IPV4 ? 32 : 128));
  }
  return vd_unit_sandbox_ip_deny (cidrs);
}

static GVariant *
unit_properties (VdDnsRelay *self)
{
  const gchar *families[] = { "AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@resources", NULL };
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  /* Until it has bound port 53 in its netns; then it drops them all. */
  VdUnitSandbox sandbox = {
    .address_families = families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .capabilities = (1ULL << CAP_NET_ADMIN) | (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_NET_BIND_SERVICE),
    .namespaces = CLONE_NEWNET,
  };
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  GVariantBuilder b;

  g_ptr_array_add (argv, g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium-dns-relay", NULL));
  for (guint i = 0; i < self->upstreams->len; i++)
    g_ptr_array_add (argv, g_inet_address_to_string (
                             g_inet_socket_address_get_address (g_ptr_array_index (self->upstreams, i))));
  g_ptr_array_add (argv, NULL);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string ("Vivarium DNS relay for guests"));
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("notify"));
  g_variant_builder_add (&b, "(sv)", "NotifyAccess", g_variant_new_string ("main"));
  g_variant_builder_add (&b, "(sv)", "ExecStart",
                         g_variant_new_parsed ("[(%s, %^as, false)]", g_ptr_array_index (argv, 0), argv->pdata));
  /* Stops with the daemon. Not After=: the daemon waits for the relay
   * before it is ready itself, and the relay's start would wait for that. */
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  /* A relay that dies comes back with the same address and veth. */
  g_variant_builder_add (&b, "(sv)", "Restart", g_variant_new_string ("on-failure"));
  g_variant_builder_add (&b, "(sv)", "DynamicUser", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "IPAddressDeny", vd_unit_sandbox_ip_deny_all ());
  g_variant_builder_add (&b, "(sv)", "IPAddressAllow", allowed_addresses (self));
  g_variant_builder_add (&b, "(sv)", "MemoryMax", g_variant_new_uint64 (64 * 1024 * 1024));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (8));
  vd_unit_sandbox_add (&b, &sandbox);
  return g_variant_builder_end (&b);
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
write_resolv_conf (VdDnsRelay *self, GError **error)
{
  if (g_mkdir_with_parents (self->dir, 0711) != 0 || chmod (self->dir, 0711) != 0) {
    gint errsv = errno;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "cannot create %s: %s", self->dir, g_strerror (errsv));
    return FALSE;
  }
  if (!g_file_set_contents_full (self->resolv_conf, "nameserver " VD_DNS_RELAY_ADDRESS "\n", -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT, 0644, error))
    return FALSE;
  if (chmod (self->resolv_conf, 0644) != 0) {
    gint errsv = errno;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "cannot make %s readable: %s", self->resolv_conf,
                 g_strerror (errsv));
    return FALSE;
  }
  return TRUE;
}

/* Not needed (by [Guard] DnsRelay= and /etc/resolv.conf) is success with
 * the relay inactive. Must run before the guard collects the host's own
 * addresses, so that the veth's host end is in the deny list: it returns
 * once the relay said it is ready, its veth up. */
gboolean
vd_dns_relay_start (VdDnsRelay *self, GError **error)
{
  g_autofree gchar *upstreams = NULL;

  g_return_val_if_fail (!self->active, FALSE);
  g_clear_pointer (&self->upstreams, g_ptr_array_unref);
  self->upstreams = read_nameservers (HOST_RESOLV_CONF);
  if (!want_relay (self))
    return TRUE;
  if (!vd_systemd_start_transient_sync (self->systemd, VIVARIUM_DNS_RELAY_UNIT, unit_properties (self), NULL,
                                        UNIT_START_MS, error)) {
    g_prefix_error (error, "DNS relay (%s): ", VIVARIUM_DNS_RELAY_UNIT);
    vd_systemd_stop_unit_sync (self->systemd, VIVARIUM_DNS_RELAY_UNIT, UNIT_STOP_MS, NULL);
    vd_systemd_reset_failed_unit (self->systemd, VIVARIUM_DNS_RELAY_UNIT);
    return FALSE;
  }
  self->active = TRUE;
  if (!write_resolv_conf (self, error)) {
    g_prefix_error (error, "DNS relay: ");
    vd_dns_relay_stop (self);
    return FALSE;
  }
  upstreams = describe_upstreams (self);
  g_message ("DNS relay on %s:%u (%s, in its own netns, veth %s), forwarding to %s", VD_DNS_RELAY_ADDRESS,
             DNS_PORT, VIVARIUM_DNS_RELAY_UNIT, VD_DNS_RELAY_HOST_LINK, upstreams);
  return TRUE;
}

/* Synchronous: called at shutdown, when the main loop no longer runs. */
void
vd_dns_relay_stop (VdDnsRelay *self)
{
  g_autoptr(GError) error = NULL;

  if (!self->active)
    return;
  self->active = FALSE;
  if (g_unlink (self->resolv_conf) != 0 && errno != ENOENT)
    g_warning ("removing %s: %s", self->resolv_conf, g_strerror (errno));
  if (!vd_systemd_stop_unit_sync (self->systemd, VIVARIUM_DNS_RELAY_UNIT, UNIT_STOP_MS, &error))
    g_warning ("stopping %s: %s", VIVARIUM_DNS_RELAY_UNIT, error->message);
  /* Its netns goes with its sockets, the veth with it; now, not whenever
   * the kernel frees the netns. */
  vd_netns_remove_link (VD_DNS_RELAY_HOST_LINK);
  g_message ("DNS relay stopped");
}

/* What a daemon that died left: the resolv.conf; the veth of a relay of
 * before this one (the relay's own dies with it). The relay's unit,
 * bound to the daemon, stopped with it. */
void
vd_dns_relay_sweep (const gchar *runtime_dir)
{
  g_autofree gchar *dir = relay_dir (runtime_dir);
  g_autofree gchar *resolv_conf = g_build_filename (dir, "resolv.conf", NULL);

  g_unlink (resolv_conf);
  vd_netns_sweep (dir, VD_DNS_RELAY_HOST_LINK, "DNS relay");
}
