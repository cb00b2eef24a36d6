/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

#include "config.h"

#include <string.h>

#include "vivarium-denylist.h"
#include "vivarium-gateway-resolver.h"

struct _VivariumGatewayResolver {
  GResolver             parent_instance;
  GResolver            *inner;
  GPtrArray            *host_deny;   /* VivariumGatewayDeny: the daemon's guard's additions */
  VivariumGatewayAdmit  admit;
  gpointer              user_data;
  GMutex                lock;
  gchar                *refusal;   /* why the last lookup was refused, or NULL */
};

G_DEFINE_FINAL_TYPE (VivariumGatewayResolver, vivarium_gateway_resolver, G_TYPE_RESOLVER)

static void
deny_free (VivariumGatewayDeny *deny)
{
  g_clear_object (&deny->mask);
  g_free (deny->cidr);
  g_free (deny->why);
  g_free (deny);
}

static gboolean
deny_line_refused (guint number, const gchar *what, GError **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "line %u of the guard's list for the gateway: %s",
               number, what);
  return FALSE;
}

/* 192.0.2.5/24 as 192.0.2.0/24: GInetAddressMask takes only the latter,
 * the guard both. */
static GInetAddressMask *
mask_new (GInetAddress *address, guint prefix, GError **error)
{
  guint8 bytes[16];
  gsize size = g_inet_address_get_native_size (address);
  g_autoptr(GInetAddress) network = NULL;

  memcpy (bytes, g_inet_address_to_bytes (address), size);
  for (gsize i = 0; i < size; i++) {
    guint kept = prefix >= (i + 1) * 8 ? 8 : prefix > i * 8 ? prefix - i * 8 : 0;
    bytes[i] &= (guint8) (0xff00 >> kept);
  }
  network = g_inet_address_new_from_bytes (bytes, g_inet_address_get_family (address));
  return g_inet_address_mask_new (network, prefix, error);
}

/* "CIDR WHY": the range, a space, what it is. */
static gboolean
add_deny_line (GPtrArray *list, const gchar *line, guint number, GError **error)
{
  const gchar *space = strchr (line, ' ');
  g_autofree gchar *cidr = space != NULL ? g_strndup (line, space - line) : NULL;
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GInetAddressMask) mask = NULL;
  g_autoptr(GError) local = NULL;
  VivariumGatewayDeny *deny;
  guint prefix;

  if (strlen (line) > VIVARIUM_GATEWAY_DENY_LINE_MAX)
    return deny_line_refused (number, "longer than allowed", error);
  if (cidr == NULL || space[1] == '\0' || !g_utf8_validate (space + 1, -1, NULL))
    return deny_line_refused (number, "not a range and what it is", error);
  if (!vivarium_cidr_parse (cidr, &address, &prefix, &local) ||
      (mask = mask_new (address, prefix, &local)) == NULL)
    return deny_line_refused (number, local->message, error);
  deny = g_new0 (VivariumGatewayDeny, 1);
  deny->mask = g_steal_pointer (&mask);
  deny->cidr = g_steal_pointer (&cidr);
  deny->why = g_strdup (space + 1);
  g_ptr_array_add (list, deny);
  return TRUE;
}

GPtrArray *
vivarium_gateway_deny_parse (const gchar *text, GError **error)
{
  g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func ((GDestroyNotify) deny_free);
  g_auto(GStrv) lines = g_strsplit (text, "\n", VIVARIUM_GATEWAY_DENY_MAX + 2);

  if (g_strv_length (lines) > VIVARIUM_GATEWAY_DENY_MAX + 1) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "the guard's list for the gateway has more than %u lines", VIVARIUM_GATEWAY_DENY_MAX);
    return NULL;
  }
  for (guint i = 0; lines[i] != NULL; i++) {
    if (lines[i][0] != '\0' && lines[i][0] != '#' && !add_deny_line (list, lines[i], i + 1, error))
      return NULL;
  }
  return g_steal_pointer (&list);
}

/* The range that holds @address and what it is, as a sentence; NULL when
 * no range does. */
static gchar *
denied_because (GInetAddress *address, GPtrArray *host_deny)
{
  const VivariumDenyEntry *entry = vivarium_denylist_match (address);
  g_autofree gchar *text = g_inet_address_to_string (address);

  if (entry != NULL)
    return g_strdup_printf ("%s is in %s/%u, %s", text, entry->address, entry->prefix, entry->why);
  for (guint i = 0; host_deny != NULL && i < host_deny->len; i++) {
    VivariumGatewayDeny *deny = host_deny->pdata[i];
    if (g_inet_address_mask_matches (deny->mask, address))
      return g_strdup_printf ("%s is in %s, %s", text, deny->cidr, deny->why);
  }
  return NULL;
}

GList *
vivarium_gateway_resolver_filter (const gchar *host, GList *addresses, GPtrArray *host_deny, gchar **reason)
{
  GList *kept = NULL;
  g_autofree gchar *first_denied = NULL;
  guint n = 0;

  for (GList *l = addresses; l != NULL; l = l->next) {
    g_autofree gchar *denied = denied_because (l->data, host_deny);
    if (denied == NULL && n < VIVARIUM_GATEWAY_RESOLVER_MAX) {
      kept = g_list_prepend (kept, g_object_ref (l->data));
      n++;
    } else if (denied != NULL && first_denied == NULL) {
      first_denied = g_steal_pointer (&denied);
    }
  }
  if (kept == NULL)
    *reason = g_strdup_printf ("%s resolves only into denied ranges (%s)", host,
                               first_denied != NULL ? first_denied : "no address at all");
  return g_list_reverse (kept);
}

static void
set_refusal (VivariumGatewayResolver *self, const gchar *reason)
{
  g_mutex_lock (&self->lock);
  g_free (self->refusal);
  self->refusal = g_strdup (reason);
  g_mutex_unlock (&self->lock);
}

gchar *
vivarium_gateway_resolver_last_refusal (VivariumGatewayResolver *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return g_strdup (self->refusal);
}

/* The inner resolver's answer, filtered and admitted, or NULL with @error.
 * A refusal of ours is kept: GIO may report a lookup of the other address
 * family instead (happy eyeballs asks for both). */
static GList *
resolve_checked (VivariumGatewayResolver *self, const gchar *host, GResolverNameLookupFlags flags,
                 GCancellable *cancellable, GError **error)
{
  g_autolist(GInetAddress) all = g_resolver_lookup_by_name_with_flags (self->inner, host, flags, cancellable, error);
  g_autolist(GInetAddress) kept = NULL;
  g_autofree gchar *reason = NULL;
  g_autoptr(GError) local = NULL;

  if (all == NULL)
    return NULL;
  kept = vivarium_gateway_resolver_filter (host, all, self->host_deny, &reason);
  if (kept == NULL) {
    g_message ("%s", reason);
    set_refusal (self, reason);
    g_set_error_literal (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, reason);
    return NULL;
  }
  if (!self->admit (host, kept, self->user_data, &local)) {
    g_message ("a lookup of %s is refused: %s", host, local->message);
    set_refusal (self, local->message);
    g_propagate_error (error, g_steal_pointer (&local));
    return NULL;
  }
  set_refusal (self, NULL);
  return g_steal_pointer (&kept);
}

static GList *
lookup_by_name_with_flags (GResolver *resolver, const gchar *host, GResolverNameLookupFlags flags,
                           GCancellable *cancellable, GError **error)
{
  return resolve_checked (VIVARIUM_GATEWAY_RESOLVER (resolver), host, flags, cancellable, error);
}

static GList *
lookup_by_name (GResolver *resolver, const gchar *host, GCancellable *cancellable, GError **error)
{
  return lookup_by_name_with_flags (resolver, host, G_RESOLVER_NAME_LOOKUP_FLAGS_DEFAULT, cancellable, error);
}

static void
lookup_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GError *error = NULL;
  GList *found = resolve_checked (source, task_data, GPOINTER_TO_INT (g_object_get_data (G_OBJECT (task), "flags")),
                                  cancellable, &error);

  if (found == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, found, (GDestroyNotify) g_resolver_free_addresses);
}

static void
lookup_by_name_with_flags_async (GResolver *resolver, const gchar *host, GResolverNameLookupFlags flags,
                                 GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (resolver, cancellable, callback, user_data);

  g_task_set_task_data (task, g_strdup (host), g_free);
  g_object_set_data (G_OBJECT (task), "flags", GINT_TO_POINTER (flags));
  g_task_run_in_thread (task, lookup_thread);
}

static void
lookup_by_name_async (GResolver *resolver, const gchar *host, GCancellable *cancellable,
                      GAsyncReadyCallback callback, gpointer user_data)
{
  lookup_by_name_with_flags_async (resolver, host, G_RESOLVER_NAME_LOOKUP_FLAGS_DEFAULT, cancellable, callback,
                                   user_data);
}

static GList *
lookup_by_name_finish (GResolver *resolver, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* Reverse lookups and records: nothing of the gateway's asks; refused
 * rather than answered unchecked. */
static gchar *
lookup_by_address (GResolver *resolver, GInetAddress *address, GCancellable *cancellable, GError **error)
{
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "the gateway makes no reverse lookups");
  return NULL;
}

static void
vivarium_gateway_resolver_finalize (GObject *object)
{
  VivariumGatewayResolver *self = VIVARIUM_GATEWAY_RESOLVER (object);

  g_clear_object (&self->inner);
  g_clear_pointer (&self->host_deny, g_ptr_array_unref);
  g_free (self->refusal);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (vivarium_gateway_resolver_parent_class)->finalize (object);
}

static void
vivarium_gateway_resolver_class_init (VivariumGatewayResolverClass *klass)
{
  GResolverClass *resolver_class = G_RESOLVER_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = vivarium_gateway_resolver_finalize;
  resolver_class->lookup_by_name = lookup_by_name;
  resolver_class->lookup_by_name_async = lookup_by_name_async;
  resolver_class->lookup_by_name_finish = lookup_by_name_finish;
  resolver_class->lookup_by_name_with_flags = lookup_by_name_with_flags;
  resolver_class->lookup_by_name_with_flags_async = lookup_by_name_with_flags_async;
  resolver_class->lookup_by_name_with_flags_finish = lookup_by_name_finish;
  resolver_class->lookup_by_address = lookup_by_address;
}

static void
vivarium_gateway_resolver_init (VivariumGatewayResolver *self)
{
  g_mutex_init (&self->lock);
}

VivariumGatewayResolver *
vivarium_gateway_resolver_new (GResolver *inner, GPtrArray *host_deny, VivariumGatewayAdmit admit,
                               gpointer user_data)
{
  VivariumGatewayResolver *self = g_object_new (VIVARIUM_TYPE_GATEWAY_RESOLVER, NULL);

  self->inner = g_object_ref (inner);
  self->host_deny = host_deny != NULL ? g_ptr_array_ref (host_deny) : NULL;
  self->admit = admit;
  self->user_data = user_data;
  return self;
}
