/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-deadline"

#include "config.h"

#include "vivarium-error.h"
#include "vd-deadline.h"

struct _VdDeadline {
  gint64          deadline_us;
  GSource        *timeout_source;
  GSource        *cancel_source;
  VdDeadlineFunc  func;
  gpointer        user_data;
};

guint
vd_deadline_ms_until (gint64 deadline_us)
{
  gint64 left = deadline_us - g_get_monotonic_time ();

  return left <= 0 ? 0 : (guint) MIN ((left + 999) / 1000, G_MAXUINT);
}

void
vd_deadline_stop (VdDeadline *self)
{
  if (self->timeout_source != NULL) {
    g_source_destroy (self->timeout_source);
    g_clear_pointer (&self->timeout_source, g_source_unref);
  }
  if (self->cancel_source != NULL) {
    g_source_destroy (self->cancel_source);
    g_clear_pointer (&self->cancel_source, g_source_unref);
  }
}

/* Both sources go before @func runs: it usually frees us. */
static void
vd_deadline_fire (VdDeadline *self, gint code)
{
  VdDeadlineFunc func = self->func;
  gpointer user_data = self->user_data;

  vd_deadline_stop (self);
  func (code, user_data);
}

static gboolean
vd_deadline_on_timeout (gpointer user_data)
{
  vd_deadline_fire (user_data, VIVARIUM_ERROR_TIMED_OUT);
  return G_SOURCE_REMOVE;
}

static gboolean
vd_deadline_on_cancelled (GCancellable *cancellable, gpointer user_data)
{
  vd_deadline_fire (user_data, VIVARIUM_ERROR_CANCELLED);
  return G_SOURCE_REMOVE;
}

VdDeadline *
vd_deadline_new_at (gint64 deadline_us, GCancellable *cancellable, GMainContext *context,
                    VdDeadlineFunc func, gpointer user_data)
{
  VdDeadline *self = g_new0 (VdDeadline, 1);

  self->deadline_us = deadline_us;
  self->func = func;
  self->user_data = user_data;
  /* Never 0 ms: a zero timeout would fire before the call it bounds. */
  self->timeout_source = g_timeout_source_new (MAX (vd_deadline_ms_until (deadline_us), 1));
  g_source_set_callback (self->timeout_source, vd_deadline_on_timeout, self, NULL);
  g_source_attach (self->timeout_source, context);
  if (cancellable != NULL) {
    self->cancel_source = g_cancellable_source_new (cancellable);
    g_source_set_callback (self->cancel_source, G_SOURCE_FUNC (vd_deadline_on_cancelled), self, NULL);
    g_source_attach (self->cancel_source, context);
  }
  return self;
}

VdDeadline *
vd_deadline_new (guint timeout_ms, GCancellable *cancellable, GMainContext *context,
                 VdDeadlineFunc func, gpointer user_data)
{
  return vd_deadline_new_at (g_get_monotonic_time () + (gint64) timeout_ms * 1000, cancellable, context,
                             func, user_data);
}

void
vd_deadline_free (VdDeadline *self)
{
  if (self == NULL)
    return;
  vd_deadline_stop (self);
  g_free (self);
}

gint64
vd_deadline_get_us (VdDeadline *self)
{
  return self->deadline_us;
}

guint
vd_deadline_remaining_ms (VdDeadline *self)
{
  return vd_deadline_ms_until (self->deadline_us);
}
