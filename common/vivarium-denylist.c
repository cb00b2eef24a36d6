/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vivarium-denylist.h"
#include "vivarium-error.h"

static const VivariumDenyEntry builtin_denylist[] = {
  { G_SOCKET_FAMILY_IPV4, "127.0.0.0",       8,  "loopback (QEMU maps the guest gateway 10.0.2.2 here)" },
  { G_SOCKET_FAMILY_IPV4, "0.0.0.0",         8,  "this network" },
  { G_SOCKET_FAMILY_IPV4, "10.0.0.0",        8,  "private (RFC 1918)" },
  { G_SOCKET_FAMILY_IPV4, "172.16.0.0",      12, "private (RFC 1918)" },
  { G_SOCKET_FAMILY_IPV4, "192.168.0.0",     16, "private (RFC 1918)" },
  { G_SOCKET_FAMILY_IPV4, "100.64.0.0",      10, "carrier-grade NAT (RFC 6598)" },
  { G_SOCKET_FAMILY_IPV4, "169.254.0.0",     16, "link-local, cloud metadata" },
  { G_SOCKET_FAMILY_IPV4, "224.0.0.0",       4,  "multicast" },
  { G_SOCKET_FAMILY_IPV4, "255.255.255.255", 32, "limited broadcast" },
  { G_SOCKET_FAMILY_IPV6, "::1",             128, "loopback" },
  { G_SOCKET_FAMILY_IPV6, "fe80::",          10, "link-local" },
  { G_SOCKET_FAMILY_IPV6, "fc00::",          7,  "unique local (ULA)" },
  { G_SOCKET_FAMILY_IPV6, "ff00::",          8,  "multicast" },
  { G_SOCKET_FAMILY_IPV6, "::ffff:0.0.0.0",  96, "IPv4-mapped" },
  { G_SOCKET_FAMILY_IPV6, "64:ff9b::",       96, "NAT64 (reaches IPv4 through a translator)" },
};

const VivariumDenyEntry *
vivarium_denylist_builtin (gsize *n_entries)
{
  *n_entries = G_N_ELEMENTS (builtin_denylist);
  return builtin_denylist;
}

GPtrArray *
vivarium_denylist_to_strings (void)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  for (gsize i = 0; i < G_N_ELEMENTS (builtin_denylist); i++)
    g_ptr_array_add (out, g_strdup_printf ("%s/%u", builtin_denylist[i].address,
                                           builtin_denylist[i].prefix));
  return out;
}

gboolean
vivarium_cidr_parse (const gchar *cidr, GInetAddress **address, guint *prefix, GError **error)
{
  g_auto(GStrv) parts = NULL;
  g_autoptr(GInetAddress) addr = NULL;
  guint max_prefix;
  guint64 value;

  parts = g_strsplit (cidr, "/", 2);
  addr = g_inet_address_new_from_string (parts[0]);
  if (addr == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "“%s” is not an IP address or network", cidr);
    return FALSE;
  }
  max_prefix = g_inet_address_get_family (addr) == G_SOCKET_FAMILY_IPV4 ? 32 : 128;
  value = max_prefix;
  if (parts[1] != NULL &&
      (!g_ascii_string_to_unsigned (parts[1], 10, 0, max_prefix, &value, NULL))) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "“%s” has a prefix length outside 0–%u", cidr, max_prefix);
    return FALSE;
  }
  *address = g_steal_pointer (&addr);
  *prefix = (guint) value;
  return TRUE;
}

static gboolean
entry_holds (const VivariumDenyEntry *entry, GInetAddress *address)
{
  g_autoptr(GInetAddress) net = g_inet_address_new_from_string (entry->address);
  g_autoptr(GInetAddressMask) mask = net != NULL ? g_inet_address_mask_new (net, entry->prefix, NULL) : NULL;

  return mask != NULL && g_inet_address_mask_matches (mask, address);
}

const VivariumDenyEntry *
vivarium_denylist_match (GInetAddress *address)
{
  g_autoptr(GInetAddress) v4 = NULL;

  if (g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV6) {
    const guint8 *b = g_inet_address_to_bytes (address);
    static const guint8 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (memcmp (b, mapped, sizeof mapped) == 0)
      v4 = g_inet_address_new_from_bytes (b + 12, G_SOCKET_FAMILY_IPV4);
  }
  for (gsize i = 0; i < G_N_ELEMENTS (builtin_denylist); i++) {
    if (entry_holds (&builtin_denylist[i], address) || (v4 != NULL && entry_holds (&builtin_denylist[i], v4)))
      return &builtin_denylist[i];
  }
  return NULL;
}
