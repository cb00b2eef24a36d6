/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <string.h>

#include "vivarium-denylist.h"
#include "vivarium-egress-upstream.h"

typedef struct {
  GInetAddressMask *mask;
  gchar            *text;
} DenyRange;

struct _VivariumEgressDenyList {
  GPtrArray *ranges;   /* DenyRange */
};

static void
deny_range_free (DenyRange *range)
{
  g_object_unref (range->mask);
  g_free (range->text);
  g_free (range);
}

void
vivarium_egress_deny_free (VivariumEgressDenyList *deny)
{
  g_ptr_array_unref (deny->ranges);
  g_free (deny);
}

static gboolean
add_range (VivariumEgressDenyList *deny, const gchar *line, guint number, GError **error)
{
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GError) local = NULL;
  DenyRange *range;
  guint prefix;
  GInetAddressMask *mask;

  if (!vivarium_cidr_parse (line, &address, &prefix, &local) ||
      (mask = g_inet_address_mask_new (address, prefix, &local)) == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "line %u of the deny list: %s", number, local->message);
    return FALSE;
  }
  range = g_new0 (DenyRange, 1);
  range->mask = mask;
  range->text = g_strdup (line);
  g_ptr_array_add (deny->ranges, range);
  return TRUE;
}

VivariumEgressDenyList *
vivarium_egress_deny_load (const gchar *path, GError **error)
{
  g_autoptr(VivariumEgressDenyList) deny = g_new0 (VivariumEgressDenyList, 1);
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;

  deny->ranges = g_ptr_array_new_with_free_func ((GDestroyNotify) deny_range_free);
  if (!g_file_get_contents (path, &text, NULL, error))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  if (g_strv_length (lines) > VIVARIUM_EGRESS_MAX_DENY) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the deny list %s has more than %u lines", path,
                 VIVARIUM_EGRESS_MAX_DENY);
    return NULL;
  }
  for (guint i = 0; lines[i] != NULL; i++) {
    g_strstrip (lines[i]);
    if (lines[i][0] != '\0' && lines[i][0] != '#' && !add_range (deny, lines[i], i + 1, error))
      return NULL;
  }
  /* The guard's list always has its built-in ranges: an empty one is a
   * mistake, and would let the proxy reach the host's own networks. */
  if (deny->ranges->len == 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the deny list %s names no range", path);
    return NULL;
  }
  return g_steal_pointer (&deny);
}

static GInetAddress *
unmap_v4 (GInetAddress *address)
{
  const guint8 *b = g_inet_address_to_bytes (address);
  static const guint8 prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

  if (g_inet_address_get_family (address) != G_SOCKET_FAMILY_IPV6 || memcmp (b, prefix, 12) != 0)
    return NULL;
  return g_inet_address_new_from_bytes (b + 12, G_SOCKET_FAMILY_IPV4);
}

const gchar *
vivarium_egress_deny_match (VivariumEgressDenyList *deny, GInetAddress *address)
{
  g_autoptr(GInetAddress) v4 = unmap_v4 (address);

  for (guint i = 0; i < deny->ranges->len; i++) {
    DenyRange *range = deny->ranges->pdata[i];
    if (g_inet_address_mask_matches (range->mask, address) ||
        (v4 != NULL && g_inet_address_mask_matches (range->mask, v4)))
      return range->text;
  }
  return NULL;
}

static gboolean
is_literal (const gchar *host)
{
  g_autoptr(GInetAddress) address = g_inet_address_new_from_string (host);

  return address != NULL;
}

static gint lookups;   /* atomic */

guint
vivarium_egress_lookups (void)
{
  return (guint) g_atomic_int_get (&lookups);
}

typedef struct {
  GList   *addresses;
  GError  *error;
  gboolean done;
} Lookup;

static void
lookup_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Lookup *l = user_data;

  l->addresses = g_resolver_lookup_by_name_finish (G_RESOLVER (source), res, &l->error);
  l->done = TRUE;
}

static gboolean
lookup_timeout_cb (gpointer user_data)
{
  g_cancellable_cancel (user_data);
  return G_SOURCE_REMOVE;
}

/* The host's resolver has timeouts of its own (resolv.conf's, per server
 * and attempt, longer still for a server that takes TCP and never
 * answers), not ours to count on: the connection's thread waits at most
 * VIVARIUM_EGRESS_LOOKUP_TIMEOUT. GResolver's lookups return at once when
 * cancelled (the resolver's thread finishes on its own). */
static GList *
lookup (const gchar *host, gboolean *timed_out, GError **error)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GResolver) resolver = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GSource) timeout = g_timeout_source_new_seconds (VIVARIUM_EGRESS_LOOKUP_TIMEOUT);
  Lookup l = { 0 };

  g_main_context_push_thread_default (context);
  resolver = g_resolver_get_default ();
  g_source_set_callback (timeout, lookup_timeout_cb, cancellable, NULL);
  g_source_attach (timeout, context);
  g_atomic_int_inc (&lookups);
  g_resolver_lookup_by_name_async (resolver, host, cancellable, lookup_done_cb, &l);
  while (!l.done)
    g_main_context_iteration (context, TRUE);
  g_source_destroy (timeout);
  g_main_context_pop_thread_default (context);
  *timed_out = g_error_matches (l.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  if (l.error != NULL)
    g_propagate_error (error, l.error);
  return l.addresses;
}

static GList *
resolve (const gchar *host, gchar **reason)
{
  g_autoptr(GError) error = NULL;
  GInetAddress *literal = g_inet_address_new_from_string (host);
  gboolean timed_out = FALSE;
  GList *addresses;

  if (literal != NULL)
    return g_list_prepend (NULL, literal);
  addresses = lookup (host, &timed_out, &error);
  if (timed_out)
    *reason = g_strdup_printf ("the lookup of %s timed out (%u s)", host, VIVARIUM_EGRESS_LOOKUP_TIMEOUT);
  else if (addresses == NULL)
    *reason = g_strdup_printf ("%s does not resolve: %s", host, error->message);
  return addresses;
}

/* The addresses outside every denied range, in the resolver's order; the
 * reason names the first denied one when none is left. */
static GPtrArray *
allowed_addresses (VivariumEgressDenyList *deny, const gchar *host, GList *addresses, gchar **reason)
{
  g_autoptr(GPtrArray) allowed = g_ptr_array_new_with_free_func (g_object_unref);
  g_autofree gchar *first_denied = NULL;

  for (GList *l = addresses; l != NULL; l = l->next) {
    const gchar *range = vivarium_egress_deny_match (deny, l->data);
    if (range == NULL)
      g_ptr_array_add (allowed, g_object_ref (l->data));
    else if (first_denied == NULL) {
      g_autofree gchar *text = g_inet_address_to_string (l->data);
      first_denied = g_strdup_printf ("%s is in %s", text, range);
    }
  }
  if (allowed->len == 0) {
    if (is_literal (host))
      *reason = g_strdup_printf ("%s is in a denied range (%s)", host, first_denied);
    else
      *reason = g_strdup_printf ("%s resolves only into denied ranges (%s)", host, first_denied);
    return NULL;
  }
  return g_steal_pointer (&allowed);
}

GSocketConnection *
vivarium_egress_connect (VivariumEgressDenyList *deny, const gchar *host, guint16 port, gchar **reason)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GPtrArray) allowed = NULL;
  g_autoptr(GError) error = NULL;
  GList *addresses = resolve (host, reason);

  if (addresses == NULL)
    return NULL;
  allowed = allowed_addresses (deny, host, addresses, reason);
  g_resolver_free_addresses (addresses);
  if (allowed == NULL)
    return NULL;
  /* The environment's proxy settings are not ours to follow. */
  g_socket_client_set_enable_proxy (client, FALSE);
  g_socket_client_set_timeout (client, VIVARIUM_EGRESS_CONNECT_TIMEOUT);
  for (guint i = 0; i < allowed->len && i < VIVARIUM_EGRESS_MAX_TRIED; i++) {
    g_autoptr(GSocketAddress) address = g_inet_socket_address_new (allowed->pdata[i], port);
    GSocketConnection *conn;
    g_clear_error (&error);
    conn = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (address), NULL, &error);
    if (conn != NULL)
      return conn;
  }
  *reason = g_strdup_printf ("%s:%u does not answer: %s", host, port, error->message);
  return NULL;
}
