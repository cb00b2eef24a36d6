/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdIdle"

#include "config.h"

#include "vd-idle.h"

/* Like fwupd's FuIdle: everything that must keep the daemon on the bus holds
 * a token with a reason (a session, a job, a self-test), and every call to
 * the daemon resets the clock. The timer is re-armed on each event instead
 * of polled, so the exit comes one timeout after the last event, not up to
 * two (a poll every timeout that needs a whole quiet period between two
 * looks came 105 s after the last call with a 60 s timeout). A timeout of 0
 * means never. */
struct _VdIdle {
  GObject     parent_instance;
  guint       timeout_ms;
  guint       source;
  guint       next_token;
  gboolean    started;      /* the clock runs from the first reset on */
  GHashTable *inhibitors;   /* token → reason */
};

G_DEFINE_TYPE (VdIdle, vd_idle, G_TYPE_OBJECT)

enum { SIGNAL_TIMEOUT, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_idle_finalize (GObject *object)
{
  VdIdle *self = VD_IDLE (object);

  g_clear_handle_id (&self->source, g_source_remove);
  g_hash_table_unref (self->inhibitors);
  G_OBJECT_CLASS (vd_idle_parent_class)->finalize (object);
}

static void
vd_idle_class_init (VdIdleClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_idle_finalize;
  signals[SIGNAL_TIMEOUT] = g_signal_new ("timeout", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                          NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
vd_idle_init (VdIdle *self)
{
  self->inhibitors = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
}

static gboolean
timeout_cb (gpointer user_data)
{
  VdIdle *self = VD_IDLE (user_data);

  self->source = 0;
  g_debug ("idle for %u ms with nothing held", self->timeout_ms);
  g_signal_emit (self, signals[SIGNAL_TIMEOUT], 0);
  return G_SOURCE_REMOVE;
}

/* The clock runs only while nothing is held. */
static void
rearm (VdIdle *self)
{
  g_clear_handle_id (&self->source, g_source_remove);
  if (!self->started || self->timeout_ms == 0 || g_hash_table_size (self->inhibitors) > 0)
    return;
  self->source = g_timeout_add (self->timeout_ms, timeout_cb, self);
}

VdIdle *
vd_idle_new (guint timeout_ms)
{
  VdIdle *self = g_object_new (VD_TYPE_IDLE, NULL);

  self->timeout_ms = timeout_ms;
  return self;
}

/* Returns a token for vd_idle_uninhibit(), never 0. */
guint
vd_idle_inhibit (VdIdle *self, const gchar *reason)
{
  guint token = ++self->next_token;

  if (token == 0)
    token = ++self->next_token;
  g_debug ("inhibit %u: %s", token, reason);
  g_hash_table_insert (self->inhibitors, GUINT_TO_POINTER (token), g_strdup (reason));
  rearm (self);
  return token;
}

void
vd_idle_uninhibit (VdIdle *self, guint token)
{
  if (!g_hash_table_remove (self->inhibitors, GUINT_TO_POINTER (token))) {
    g_warning ("idle inhibitor %u is not held", token);
    return;
  }
  g_debug ("uninhibit %u", token);
  rearm (self);
}

/* The first call starts the clock: the daemon makes it once it serves its
 * name, so that a slow start-up does not count as idle time. */
void
vd_idle_reset (VdIdle *self)
{
  self->started = TRUE;
  rearm (self);
}

guint
vd_idle_get_n_inhibitors (VdIdle *self)
{
  return g_hash_table_size (self->inhibitors);
}
