/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include "vd-host-addresses.h"

static GInetAddress *
address_of (const struct sockaddr *sa)
{
  if (sa->sa_family == AF_INET)
    return g_inet_address_new_from_bytes ((const guint8 *) &((const struct sockaddr_in *) sa)->sin_addr,
                                          G_SOCKET_FAMILY_IPV4);
  return g_inet_address_new_from_bytes ((const guint8 *) &((const struct sockaddr_in6 *) sa)->sin6_addr,
                                        G_SOCKET_FAMILY_IPV6);
}

GPtrArray *
vd_host_addresses_list (void)
{
  GPtrArray *list = g_ptr_array_new_with_free_func (g_object_unref);
  struct ifaddrs *ifa = NULL;

  if (getifaddrs (&ifa) != 0)
    return list;
  for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
    if (i->ifa_addr != NULL && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
      g_ptr_array_add (list, address_of (i->ifa_addr));
  }
  freeifaddrs (ifa);
  return list;
}

gboolean
vd_host_addresses_contain (GInetAddress *address)
{
  g_autoptr(GPtrArray) list = vd_host_addresses_list ();

  for (guint i = 0; i < list->len; i++) {
    if (g_inet_address_equal (g_ptr_array_index (list, i), address))
      return TRUE;
  }
  return FALSE;
}
