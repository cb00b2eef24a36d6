/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-proxy-list.h"
#include "vivarium-call.h"
#include "vivarium-dbus-generated.h"

/* A GListModel of the daemon's sessions, images, projects, tasks or
 * reports, fed by signals only: one List* call at the start (which also
 * makes this peer a subscriber), then the manager's *Added / *Removed (a
 * task or report the daemon pruned past its retention bound is Removed like
 * a stopped session) and each object's PropertiesChanged (an items-changed of that one row). Items are the
 * generated proxies, sorted by object path so the order does not depend on
 * which reply came first. */

struct _VivariumProxyList {
  GObject                parent_instance;
  VivariumProxyListKind  kind;
  GDBusProxy            *manager;
  GPtrArray             *items;    /* GDBusProxy, sorted by object path */
  GHashTable            *pending;  /* object paths being fetched */
  GCancellable          *cancellable;
  GError                *error;
  gboolean               loaded;
  gulong                 signal_id;
};

static void list_model_iface_init (GListModelInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (VivariumProxyList, vivarium_proxy_list, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (G_TYPE_LIST_MODEL, list_model_iface_init))

enum { PROP_0, PROP_LOADED, N_PROPS };
static GParamSpec *props[N_PROPS];

enum { SIGNAL_OBJECT_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* The Manager's List* call of a kind, e.g. vivarium_dbus_manager_call_list_sessions. */
typedef void (*ListCall) (VivariumDBusManager *proxy, GDBusCallFlags call_flags, gint timeout_msec,
                          GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);

static const struct {
  ListCall    list;
  const char *added;
  const char *removed;
  const char *interface;
} kinds[] = {
  [VIVARIUM_PROXY_LIST_SESSIONS] = { vivarium_dbus_manager_call_list_sessions, "SessionAdded", "SessionRemoved", "org.vivarium.Vivarium1.Session" },
  [VIVARIUM_PROXY_LIST_IMAGES] = { vivarium_dbus_manager_call_list_images, "ImageAdded", "ImageRemoved", "org.vivarium.Vivarium1.Image" },
  [VIVARIUM_PROXY_LIST_PROJECTS] = { vivarium_dbus_manager_call_list_projects, "ProjectAdded", "ProjectRemoved", "org.vivarium.Vivarium1.Project" },
  [VIVARIUM_PROXY_LIST_TASKS] = { vivarium_dbus_manager_call_list_tasks, "TaskAdded", "TaskRemoved", "org.vivarium.Vivarium1.Task" },
  [VIVARIUM_PROXY_LIST_REPORTS] = { vivarium_dbus_manager_call_list_reports, "ReportAdded", "ReportRemoved", "org.vivarium.Vivarium1.Report" },
};

static GType
item_type (VivariumProxyList *self)
{
  switch (self->kind) {
  case VIVARIUM_PROXY_LIST_SESSIONS: return VIVARIUM_DBUS_TYPE_SESSION_PROXY;
  case VIVARIUM_PROXY_LIST_IMAGES: return VIVARIUM_DBUS_TYPE_IMAGE_PROXY;
  case VIVARIUM_PROXY_LIST_PROJECTS: return VIVARIUM_DBUS_TYPE_PROJECT_PROXY;
  case VIVARIUM_PROXY_LIST_TASKS: return VIVARIUM_DBUS_TYPE_TASK_PROXY;
  case VIVARIUM_PROXY_LIST_REPORTS: return VIVARIUM_DBUS_TYPE_REPORT_PROXY;
  default: g_assert_not_reached ();
  }
}

/* Binary search: the index of @path, or where it would go (*found FALSE). */
static guint
find_position (VivariumProxyList *self, const char *path, gboolean *found)
{
  guint lo = 0, hi = self->items->len;

  *found = FALSE;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    int cmp = g_strcmp0 (g_dbus_proxy_get_object_path (g_ptr_array_index (self->items, mid)), path);

    if (cmp == 0) {
      *found = TRUE;
      return mid;
    }
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void
properties_changed_cb (GDBusProxy *proxy, GVariant *changed, GStrv invalidated, gpointer user_data)
{
  VivariumProxyList *self = user_data;
  gboolean found;
  guint pos = find_position (self, g_dbus_proxy_get_object_path (proxy), &found);

  if (found)
    g_list_model_items_changed (G_LIST_MODEL (self), pos, 1, 1);
}

static void
proxy_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumProxyList) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GObject) object = g_async_initable_new_finish (G_ASYNC_INITABLE (source), res, &error);
  GDBusProxy *proxy;
  gboolean found;
  guint pos;

  if (object == NULL) {
    /* It went away between the signal and our GetAll: nothing to show. */
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      g_debug ("an object could not be read: %s", error->message);
    return;
  }
  proxy = G_DBUS_PROXY (object);
  /* Removed while we were fetching it. */
  if (!g_hash_table_remove (self->pending, g_dbus_proxy_get_object_path (proxy)))
    return;
  pos = find_position (self, g_dbus_proxy_get_object_path (proxy), &found);
  if (found)
    return;
  g_signal_connect_object (proxy, "g-properties-changed", G_CALLBACK (properties_changed_cb), self, 0);
  g_ptr_array_insert (self->items, pos, g_steal_pointer (&object));
  g_list_model_items_changed (G_LIST_MODEL (self), pos, 0, 1);
}

static void
fetch_object (VivariumProxyList *self, const char *path)
{
  gboolean found;

  find_position (self, path, &found);
  if (found || g_hash_table_contains (self->pending, path))
    return;
  g_hash_table_add (self->pending, g_strdup (path));
  g_async_initable_new_async (item_type (self), G_PRIORITY_DEFAULT, self->cancellable,
                              proxy_ready_cb, g_object_ref (self),
                              "g-flags", G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                              "g-name", g_dbus_proxy_get_name (self->manager),
                              "g-connection", g_dbus_proxy_get_connection (self->manager),
                              "g-object-path", path,
                              "g-interface-name", kinds[self->kind].interface,
                              NULL);
}

static void
forget_object (VivariumProxyList *self, const char *path)
{
  gboolean found;
  guint pos;

  g_hash_table_remove (self->pending, path);
  pos = find_position (self, path, &found);
  if (found) {
    g_ptr_array_remove_index (self->items, pos);
    g_list_model_items_changed (G_LIST_MODEL (self), pos, 1, 0);
  }
  /* Said apart from items-changed: a row also leaves a filtered view, but
   * only this means the object is gone from the daemon. */
  g_signal_emit (self, signals[SIGNAL_OBJECT_REMOVED], 0, path);
}

static void
manager_signal_cb (GDBusProxy *manager, const char *sender, const char *signal_name,
                   GVariant *parameters, gpointer user_data)
{
  VivariumProxyList *self = user_data;
  const char *path = NULL;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(o)")))
    return;
  g_variant_get (parameters, "(&o)", &path);
  if (g_strcmp0 (signal_name, kinds[self->kind].added) == 0)
    fetch_object (self, path);
  else if (g_strcmp0 (signal_name, kinds[self->kind].removed) == 0)
    forget_object (self, path);
}

static void
list_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumProxyList) self = user_data;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &self->error);
  g_autoptr(GVariantIter) iter = NULL;
  const char *path;

  if (reply == NULL && g_error_matches (self->error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (reply != NULL) {
    g_variant_get (reply, "(ao)", &iter);
    while (g_variant_iter_next (iter, "&o", &path))
      fetch_object (self, path);
  }
  self->loaded = TRUE;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_LOADED]);
}

static void
start (VivariumProxyList *self)
{
  /* Subscribe before listing, so nothing added in between is missed; an
   * object both listed and announced is fetched once. */
  self->signal_id = g_signal_connect (self->manager, "g-signal", G_CALLBACK (manager_signal_cb), self);
  kinds[self->kind].list (VIVARIUM_DBUS_MANAGER (self->manager), vivarium_call_flags (FALSE),
                          VIVARIUM_CALL_TIMEOUT_DEFAULT, self->cancellable, list_ready_cb, g_object_ref (self));
}

gboolean
vivarium_proxy_list_is_loaded (VivariumProxyList *self)
{
  return self->loaded;
}

const GError *
vivarium_proxy_list_get_error (VivariumProxyList *self)
{
  return self->error;
}

GDBusProxy *
vivarium_proxy_list_lookup (VivariumProxyList *self, const char *object_path)
{
  gboolean found;
  guint pos = find_position (self, object_path, &found);

  return found ? g_ptr_array_index (self->items, pos) : NULL;
}

static GType
list_get_item_type (GListModel *model)
{
  return item_type (VIVARIUM_PROXY_LIST (model));
}

static guint
list_get_n_items (GListModel *model)
{
  return VIVARIUM_PROXY_LIST (model)->items->len;
}

static gpointer
list_get_item (GListModel *model, guint position)
{
  VivariumProxyList *self = VIVARIUM_PROXY_LIST (model);

  if (position >= self->items->len)
    return NULL;
  return g_object_ref (g_ptr_array_index (self->items, position));
}

static void
list_model_iface_init (GListModelInterface *iface)
{
  iface->get_item_type = list_get_item_type;
  iface->get_n_items = list_get_n_items;
  iface->get_item = list_get_item;
}

static void
vivarium_proxy_list_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  switch (prop_id) {
  case PROP_LOADED:
    g_value_set_boolean (value, VIVARIUM_PROXY_LIST (object)->loaded);
    break;
  default:
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
vivarium_proxy_list_dispose (GObject *object)
{
  VivariumProxyList *self = VIVARIUM_PROXY_LIST (object);

  g_cancellable_cancel (self->cancellable);
  if (self->manager != NULL)
    g_clear_signal_handler (&self->signal_id, self->manager);
  g_clear_object (&self->manager);
  if (self->items != NULL)
    g_ptr_array_set_size (self->items, 0);
  G_OBJECT_CLASS (vivarium_proxy_list_parent_class)->dispose (object);
}

static void
vivarium_proxy_list_finalize (GObject *object)
{
  VivariumProxyList *self = VIVARIUM_PROXY_LIST (object);

  g_ptr_array_unref (self->items);
  g_hash_table_unref (self->pending);
  g_clear_object (&self->cancellable);
  g_clear_error (&self->error);
  G_OBJECT_CLASS (vivarium_proxy_list_parent_class)->finalize (object);
}

static void
vivarium_proxy_list_class_init (VivariumProxyListClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->get_property = vivarium_proxy_list_get_property;
  object_class->dispose = vivarium_proxy_list_dispose;
  object_class->finalize = vivarium_proxy_list_finalize;
  props[PROP_LOADED] = g_param_spec_boolean ("loaded", NULL, NULL, FALSE,
                                             G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
  signals[SIGNAL_OBJECT_REMOVED] = g_signal_new ("object-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                 NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vivarium_proxy_list_init (VivariumProxyList *self)
{
  self->items = g_ptr_array_new_with_free_func (g_object_unref);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->cancellable = g_cancellable_new ();
}

VivariumProxyList *
vivarium_proxy_list_new (GDBusProxy *manager, VivariumProxyListKind kind)
{
  VivariumProxyList *self;

  g_return_val_if_fail (G_IS_DBUS_PROXY (manager), NULL);
  g_return_val_if_fail (kind <= VIVARIUM_PROXY_LIST_REPORTS, NULL);

  self = g_object_new (VIVARIUM_TYPE_PROXY_LIST, NULL);
  self->kind = kind;
  self->manager = g_object_ref (manager);
  start (self);
  return self;
}
