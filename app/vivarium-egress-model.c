/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-egress-model.h"
#include "vivarium-client.h"

/* A refresh asks from where the last one stopped ("next") until the daemon
 * says there is no more. When more than MAX_KEPT entries are new, it jumps
 * to the newest MAX_KEPT instead of reading pages it would drop. A round
 * reads at most MAX_ROUND_PAGES pages whatever the daemon answers, so a
 * reply that never advances cannot keep the app busy. */
#define MAX_ROUND_PAGES (VIVARIUM_EGRESS_MODEL_MAX_KEPT / VIVARIUM_EGRESS_MODEL_PAGE + 2)

struct _VivariumEgressModel {
  GObject       parent_instance;
  GDBusProxy   *source;
  GPtrArray    *items;       /* VivariumEgressEntry, newest first */
  guint64       next;        /* the log offset to ask for next */
  guint64       total;
  guint64       first_kept;  /* the log offset of the oldest entry held */
  gboolean      loading;
  gboolean      loaded;
  gboolean      again;       /* a refresh was asked while one ran */
  guint         round_pages;
  GCancellable *cancellable;
  GError       *error;
};

static void list_model_iface_init (GListModelInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (VivariumEgressModel, vivarium_egress_model, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (G_TYPE_LIST_MODEL, list_model_iface_init))

enum { PROP_0, PROP_LOADING, PROP_TOTAL, PROP_HIDDEN, N_PROPS };
static GParamSpec *props[N_PROPS];

static void fetch_page (VivariumEgressModel *self);

static void
clear_items (VivariumEgressModel *self)
{
  guint n = self->items->len;

  g_ptr_array_set_size (self->items, 0);
  if (n > 0)
    g_list_model_items_changed (G_LIST_MODEL (self), 0, n, 0);
}

/* A page arrives oldest first; the list is newest first. Returns how
 * many entries it added (never more than a page). */
static gsize
add_page (VivariumEgressModel *self, GVariant *entries, guint64 offset)
{
  gsize n = MIN (g_variant_n_children (entries), VIVARIUM_EGRESS_MODEL_PAGE);
  guint excess;

  if (n == 0)
    return 0;
  if (self->items->len == 0)
    self->first_kept = offset;
  for (gsize i = 0; i < n; i++) {
    g_autoptr(GVariant) entry = g_variant_get_child_value (entries, i);

    g_ptr_array_insert (self->items, 0, vivarium_egress_entry_new (entry, offset + i));
  }
  g_list_model_items_changed (G_LIST_MODEL (self), 0, 0, n);
  if (self->items->len <= VIVARIUM_EGRESS_MODEL_MAX_KEPT)
    return n;
  excess = self->items->len - VIVARIUM_EGRESS_MODEL_MAX_KEPT;
  g_ptr_array_remove_range (self->items, VIVARIUM_EGRESS_MODEL_MAX_KEPT, excess);
  self->first_kept += excess;
  g_list_model_items_changed (G_LIST_MODEL (self), VIVARIUM_EGRESS_MODEL_MAX_KEPT, excess, 0);
  return n;
}

static void
finish_round (VivariumEgressModel *self)
{
  self->loading = FALSE;
  self->loaded = TRUE;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_TOTAL]);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_HIDDEN]);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_LOADING]);
  if (self->again) {
    self->again = FALSE;
    vivarium_egress_model_refresh (self);
  }
}

/* Where the next page starts, or FALSE when the round is over. */
static gboolean
plan_next (VivariumEgressModel *self)
{
  if (self->next >= self->total || self->round_pages >= MAX_ROUND_PAGES)
    return FALSE;
  if (self->total - self->next > VIVARIUM_EGRESS_MODEL_MAX_KEPT) {
    /* Everything held would be pushed out anyway; the gap would make the
     * "older entries not shown" count wrong. */
    clear_items (self);
    self->next = self->total - VIVARIUM_EGRESS_MODEL_MAX_KEPT;
  }
  return TRUE;
}

static void
page_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumEgressModel) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  g_autoptr(GVariant) entries = NULL;
  guint64 asked = self->next, next = 0, total = 0;
  gsize added;

  if (reply == NULL) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      return;
    g_clear_error (&self->error);
    self->error = g_steal_pointer (&error);
    finish_round (self);
    return;
  }
  g_clear_error (&self->error);
  g_variant_get (reply, "(@aa{sv}tt)", &entries, &next, &total);
  if (total < asked) {
    /* The log is shorter than what we hold: not the one we read before
     * (a daemon restarted on another log). Start over, within the round. */
    clear_items (self);
    self->next = self->first_kept = 0;
    self->total = total;
  } else {
    added = add_page (self, entries, asked);
    self->total = total;
    self->next = next;
    /* A reply that does not move on ends the round instead of looping,
     * and what it sent is not asked for (and added) again. */
    if (next <= asked) {
      self->round_pages = MAX_ROUND_PAGES;
      self->next = asked + added;
    }
  }
  if (plan_next (self))
    fetch_page (self);
  else
    finish_round (self);
}

static void
fetch_page (VivariumEgressModel *self)
{
  self->round_pages++;
  /* Sessions and tasks keep the same log under the same method. */
  if (VIVARIUM_DBUS_IS_SESSION (self->source))
    vivarium_dbus_session_call_get_egress_log (VIVARIUM_DBUS_SESSION (self->source), self->next,
                                               VIVARIUM_EGRESS_MODEL_PAGE, vivarium_call_flags (FALSE),
                                               VIVARIUM_CALL_TIMEOUT_DEFAULT, self->cancellable, page_cb,
                                               g_object_ref (self));
  else
    vivarium_dbus_task_call_get_egress_log (VIVARIUM_DBUS_TASK (self->source), self->next,
                                            VIVARIUM_EGRESS_MODEL_PAGE, vivarium_call_flags (FALSE),
                                            VIVARIUM_CALL_TIMEOUT_DEFAULT, self->cancellable, page_cb,
                                            g_object_ref (self));
}

void
vivarium_egress_model_refresh (VivariumEgressModel *self)
{
  g_return_if_fail (VIVARIUM_IS_EGRESS_MODEL (self));

  if (self->loading) {
    self->again = TRUE;
    return;
  }
  self->loading = TRUE;
  self->round_pages = 0;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_LOADING]);
  fetch_page (self);
}

VivariumEgressModel *
vivarium_egress_model_new (GDBusProxy *source)
{
  VivariumEgressModel *self;

  g_return_val_if_fail (G_IS_DBUS_PROXY (source), NULL);
  self = g_object_new (VIVARIUM_TYPE_EGRESS_MODEL, NULL);
  self->source = g_object_ref (source);
  return self;
}

GDBusProxy *
vivarium_egress_model_get_source (VivariumEgressModel *self)
{
  return self->source;
}

gboolean
vivarium_egress_model_get_loading (VivariumEgressModel *self)
{
  return self->loading;
}

gboolean
vivarium_egress_model_get_loaded (VivariumEgressModel *self)
{
  return self->loaded;
}

guint64
vivarium_egress_model_get_total (VivariumEgressModel *self)
{
  return self->total;
}

guint64
vivarium_egress_model_get_hidden (VivariumEgressModel *self)
{
  return self->items->len > 0 ? self->first_kept : self->next;
}

/* The proxy's last line once the log reached its bound. */
gboolean
vivarium_egress_model_get_log_full (VivariumEgressModel *self)
{
  return self->items->len > 0 &&
         vivarium_egress_entry_get_verdict (g_ptr_array_index (self->items, 0)) == VIVARIUM_EGRESS_VERDICT_LOG_FULL;
}

const GError *
vivarium_egress_model_get_error (VivariumEgressModel *self)
{
  return self->error;
}

static GType
get_item_type (GListModel *model)
{
  return VIVARIUM_TYPE_EGRESS_ENTRY;
}

static guint
get_n_items (GListModel *model)
{
  return VIVARIUM_EGRESS_MODEL (model)->items->len;
}

static gpointer
get_item (GListModel *model, guint position)
{
  VivariumEgressModel *self = VIVARIUM_EGRESS_MODEL (model);

  if (position >= self->items->len)
    return NULL;
  return g_object_ref (g_ptr_array_index (self->items, position));
}

static void
list_model_iface_init (GListModelInterface *iface)
{
  iface->get_item_type = get_item_type;
  iface->get_n_items = get_n_items;
  iface->get_item = get_item;
}

static void
vivarium_egress_model_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  VivariumEgressModel *self = VIVARIUM_EGRESS_MODEL (object);

  switch (prop_id) {
  case PROP_LOADING: g_value_set_boolean (value, self->loading); break;
  case PROP_TOTAL: g_value_set_uint64 (value, self->total); break;
  case PROP_HIDDEN: g_value_set_uint64 (value, vivarium_egress_model_get_hidden (self)); break;
  default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
vivarium_egress_model_dispose (GObject *object)
{
  VivariumEgressModel *self = VIVARIUM_EGRESS_MODEL (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->source);
  G_OBJECT_CLASS (vivarium_egress_model_parent_class)->dispose (object);
}

static void
vivarium_egress_model_finalize (GObject *object)
{
  VivariumEgressModel *self = VIVARIUM_EGRESS_MODEL (object);

  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->items, g_ptr_array_unref);
  g_clear_error (&self->error);
  G_OBJECT_CLASS (vivarium_egress_model_parent_class)->finalize (object);
}

static void
vivarium_egress_model_class_init (VivariumEgressModelClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->get_property = vivarium_egress_model_get_property;
  object_class->dispose = vivarium_egress_model_dispose;
  object_class->finalize = vivarium_egress_model_finalize;
  /* "loading" is notified last when a round ends: a view reads the
   * counts and the error then. */
  props[PROP_LOADING] = g_param_spec_boolean ("loading", NULL, NULL, FALSE,
                                              G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_TOTAL] = g_param_spec_uint64 ("total", NULL, NULL, 0, G_MAXUINT64, 0,
                                           G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_HIDDEN] = g_param_spec_uint64 ("hidden", NULL, NULL, 0, G_MAXUINT64, 0,
                                            G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
}

static void
vivarium_egress_model_init (VivariumEgressModel *self)
{
  self->items = g_ptr_array_new_with_free_func (g_object_unref);
  self->cancellable = g_cancellable_new ();
}
