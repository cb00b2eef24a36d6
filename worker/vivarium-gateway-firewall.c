/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

#include "config.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vivarium-gateway-firewall.h"

/* glibc's resolver reads at most three nameserver lines (MAXNS). */
#define RESOLVERS_MAX 3
/* Bounds the list systemd holds: 16 per lookup, kept for a request's life. */
#define FOLLOWED_MAX 64

typedef struct {
  GInetAddress *address;
  gint64        until;   /* monotonic µs */
} Followed;

static GDBusConnection *bus;
static gchar *unit_path;
static GMutex lock;
static GPtrArray *resolvers;   /* GInetAddress, always allowed: the resolvers, or the one address */
static GPtrArray *followed;    /* Followed */
static guint keep_sec;

static gchar *
prefix_string (GInetAddress *a, guint prefix)
{
  g_autofree gchar *text = g_inet_address_to_string (a);

  return g_strdup_printf ("%s/%u", text, prefix);
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const gchar *const *) a, *(const gchar *const *) b);
}

static void
followed_free (Followed *f)
{
  g_object_unref (f->address);
  g_free (f);
}

gboolean
vivarium_gateway_firewall_open (GError **error)
{
  g_autoptr(GVariant) unit = NULL;

  bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, error);
  if (bus == NULL)
    return FALSE;
  unit = g_dbus_connection_call_sync (bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", "GetUnitByPID",
                                      g_variant_new ("(u)", (guint32) getpid ()), G_VARIANT_TYPE ("(o)"),
                                      G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);
  if (unit == NULL)
    return FALSE;
  g_variant_get (unit, "(o)", &unit_path);
  return TRUE;
}

static GVariant *
get_list (const gchar *name, GError **error)
{
  g_autoptr(GVariant) prop = g_dbus_connection_call_sync (bus, "org.freedesktop.systemd1", unit_path,
                                                          "org.freedesktop.DBus.Properties", "Get",
                                                          g_variant_new ("(ss)", "org.freedesktop.systemd1.Service",
                                                                         name),
                                                          G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NONE, 10000,
                                                          NULL, error);
  GVariant *list = NULL;

  if (prop != NULL)
    g_variant_get (prop, "(v)", &list);
  return list;
}

/* "ADDRESS/PREFIX" for each entry of an a(iayu), sorted. */
static GPtrArray *
list_strings (GVariant *list)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  GVariantIter iter;
  gint32 family;
  guint32 prefix;
  GVariant *bytes;

  g_variant_iter_init (&iter, list);
  while (g_variant_iter_next (&iter, "(i@ayu)", &family, &bytes, &prefix)) {
    gsize len = g_variant_get_size (bytes);
    g_autoptr(GInetAddress) a = NULL;
    if (len == 4 || len == 16)
      a = g_inet_address_new_from_bytes (g_variant_get_data (bytes), len == 4 ? G_SOCKET_FAMILY_IPV4 : G_SOCKET_FAMILY_IPV6);
    if (a != NULL)
      g_ptr_array_add (out, prefix_string (a, prefix));
    g_variant_unref (bytes);
  }
  g_ptr_array_sort (out, compare_strings);
  return out;
}

/* The resolvers glibc will ask: the unit must reach them to resolve at all. */
static GPtrArray *
read_resolvers (void)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_object_unref);
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/etc/resolv.conf", &text, NULL, NULL))
    return out;
  lines = g_strsplit (text, "\n", 256);
  for (guint i = 0; lines[i] != NULL && out->len < RESOLVERS_MAX; i++) {
    g_auto(GStrv) words = g_strsplit_set (g_strstrip (lines[i]), " \t", 3);
    GInetAddress *a;
    if (words[0] == NULL || !g_str_equal (words[0], "nameserver") || words[1] == NULL)
      continue;
    a = g_inet_address_new_from_string (words[1]);
    if (a != NULL)
      g_ptr_array_add (out, a);
  }
  return out;
}

static GVariant *
entry_variant (GInetAddress *a)
{
  gsize len = g_inet_address_get_native_size (a);

  return g_variant_new ("(i@ayu)", g_inet_address_get_family (a) == G_SOCKET_FAMILY_IPV4 ? AF_INET : AF_INET6,
                        g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, g_inet_address_to_bytes (a), len, 1),
                        (guint32) len * 8);
}

/* The list systemd gets, and the same as strings for the read-back. */
static GVariant *
wanted_list (GPtrArray *strings)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(iayu)"));
  for (guint i = 0; i < resolvers->len; i++) {
    g_variant_builder_add_value (&b, entry_variant (resolvers->pdata[i]));
    g_ptr_array_add (strings, prefix_string (resolvers->pdata[i], g_inet_address_get_native_size (resolvers->pdata[i]) * 8));
  }
  for (guint i = 0; i < followed->len; i++) {
    GInetAddress *a = ((Followed *) followed->pdata[i])->address;
    g_autofree gchar *s = prefix_string (a, g_inet_address_get_native_size (a) * 8);
    if (g_ptr_array_find_with_equal_func (strings, s, g_str_equal, NULL))
      continue;
    g_variant_builder_add_value (&b, entry_variant (a));
    g_ptr_array_add (strings, g_steal_pointer (&s));
  }
  g_ptr_array_sort (strings, compare_strings);
  return g_variant_builder_end (&b);
}

/* An empty list first resets what the unit file and earlier calls set:
 * systemd otherwise adds to it. The read-back is also a second round trip,
 * after which systemd has applied the new program to the cgroup. */
static gboolean
apply (GError **error)
{
  g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) have = NULL;
  g_autoptr(GVariant) back = NULL;
  g_autoptr(GVariant) reply = NULL;
  GVariantBuilder props;

  g_variant_builder_init (&props, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&props, "(sv)", "IPAddressAllow", g_variant_new_array (G_VARIANT_TYPE ("(iayu)"), NULL, 0));
  g_variant_builder_add (&props, "(sv)", "IPAddressAllow", wanted_list (want));
  reply = g_dbus_connection_call_sync (bus, "org.freedesktop.systemd1", unit_path, "org.freedesktop.systemd1.Unit",
                                       "SetProperties", g_variant_new ("(ba(sv))", TRUE, &props), NULL,
                                       G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);
  if (reply == NULL)
    return FALSE;
  back = get_list ("IPAddressAllow", error);
  if (back == NULL)
    return FALSE;
  have = list_strings (back);
  for (guint i = 0; i < MAX (have->len, want->len); i++) {
    if (i >= have->len || i >= want->len || !g_str_equal (have->pdata[i], want->pdata[i])) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "systemd did not take the gateway's firewall (IPAddressAllow= holds %u entries, %u were set)",
                   have->len, want->len);
      return FALSE;
    }
  }
  return TRUE;
}

/* Without IPAddressDeny=any an allow list allows nothing more than the
 * rest: the gateway refuses to run in a unit that would let it reach
 * anything. */
static gboolean
check_denies_any (GError **error)
{
  g_autoptr(GVariant) deny = get_list ("IPAddressDeny", error);
  g_autoptr(GPtrArray) denied = NULL;

  if (deny == NULL)
    return FALSE;
  denied = list_strings (deny);
  if (g_ptr_array_find_with_equal_func (denied, "0.0.0.0/0", g_str_equal, NULL) &&
      g_ptr_array_find_with_equal_func (denied, "::/0", g_str_equal, NULL))
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
               "the unit must have IPAddressDeny=any (the gateway allows the endpoint's addresses itself); "
               "it denies %u entries: remove the drop-in that changed it", denied->len);
  return FALSE;
}

gboolean
vivarium_gateway_firewall_fixed (GInetAddress *address, GError **error)
{
  if (!check_denies_any (error))
    return FALSE;
  resolvers = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (resolvers, g_object_ref (address));
  followed = g_ptr_array_new_with_free_func ((GDestroyNotify) followed_free);
  return apply (error);
}

gboolean
vivarium_gateway_firewall_follow_init (guint keep, GError **error)
{
  if (!check_denies_any (error))
    return FALSE;
  keep_sec = keep;
  resolvers = read_resolvers ();
  followed = g_ptr_array_new_with_free_func ((GDestroyNotify) followed_free);
  return apply (error);
}

gboolean
vivarium_gateway_firewall_follow (GList *addresses, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&lock);
  gint64 now = g_get_monotonic_time ();

  for (guint i = followed->len; i > 0; i--) {
    if (((Followed *) followed->pdata[i - 1])->until < now)
      g_ptr_array_remove_index (followed, i - 1);
  }
  for (GList *l = addresses; l != NULL; l = l->next) {
    Followed *f = g_new0 (Followed, 1);
    for (guint i = followed->len; i > 0; i--) {
      if (g_inet_address_equal (((Followed *) followed->pdata[i - 1])->address, l->data))
        g_ptr_array_remove_index (followed, i - 1);
    }
    f->address = g_object_ref (l->data);
    f->until = now + (gint64) keep_sec * G_USEC_PER_SEC;
    g_ptr_array_add (followed, f);
  }
  while (followed->len > FOLLOWED_MAX)
    g_ptr_array_remove_index (followed, 0);   /* the oldest */
  return apply (error);
}
