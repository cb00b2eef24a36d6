/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

#include "config.h"

#include "vivarium-denylist.h"
#include "vivarium-gateway-resolver.h"

struct _VivariumGatewayResolver {
  GResolver             parent_instance;
  GResolver            *inner;
  VivariumGatewayAdmit  admit;
  gpointer              user_data;
  GMutex                lock;
  gchar                *refusal;   /* why the last lookup was refused, or NULL */
};

G_DEFINE_FINAL_TYPE (VivariumGatewayResolver, vivarium_gateway_resolver, G_TYPE_RESOLVER)

GList *
vivarium_gateway_resolver_filter (const gchar *host, GList *addresses, gchar **reason)
{
  GList *kept = NULL;
  g_autofree gchar *first_denied = NULL;
  guint n = 0;

  for (GList *l = addresses; l != NULL; l = l->next) {
    const VivariumDenyEntry *entry = vivarium_denylist_match (l->data);
    if (entry == NULL && n < VIVARIUM_GATEWAY_RESOLVER_MAX) {
      kept = g_list_prepend (kept, g_object_ref (l->data));
      n++;
    } else if (entry != NULL && first_denied == NULL) {
      g_autofree gchar *text = g_inet_address_to_string (l->data);
      first_denied = g_strdup_printf ("%s is in %s/%u, %s", text, entry->address, entry->prefix, entry->why);
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
  kept = vivarium_gateway_resolver_filter (host, all, &reason);
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
vivarium_gateway_resolver_new (GResolver *inner, VivariumGatewayAdmit admit, gpointer user_data)
{
  VivariumGatewayResolver *self = g_object_new (VIVARIUM_TYPE_GATEWAY_RESOLVER, NULL);

  self->inner = g_object_ref (inner);
  self->admit = admit;
  self->user_data = user_data;
  return self;
}
