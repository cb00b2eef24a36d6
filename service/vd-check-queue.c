/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdCheckQueue"

#include "config.h"

#include "vd-check-queue.h"

struct _VdCheckQueue {
  GHashTable *waiting;   /* caller → GQueue of GTask */
  GQueue      turns;     /* callers with a task waiting, next first; the table's keys */
  guint       n_waiting;
};

static void
queue_free (gpointer data)
{
  g_queue_free_full (data, g_object_unref);
}

VdCheckQueue *
vd_check_queue_new (void)
{
  VdCheckQueue *self = g_new0 (VdCheckQueue, 1);

  self->waiting = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, queue_free);
  g_queue_init (&self->turns);
  return self;
}

void
vd_check_queue_free (VdCheckQueue *self)
{
  if (self == NULL)
    return;
  g_queue_clear (&self->turns);
  g_hash_table_unref (self->waiting);
  g_free (self);
}

gboolean
vd_check_queue_push (VdCheckQueue *self, const gchar *caller, GTask *task)
{
  GQueue *queue = g_hash_table_lookup (self->waiting, caller);

  if (self->n_waiting >= VD_CHECK_QUEUE_TOTAL || (queue != NULL && queue->length >= VD_CHECK_QUEUE_PER_CALLER))
    return FALSE;
  if (queue == NULL) {
    gchar *key = g_strdup (caller);

    queue = g_queue_new ();
    g_hash_table_insert (self->waiting, key, queue);
    g_queue_push_tail (&self->turns, key);
  }
  g_queue_push_tail (queue, g_object_ref (task));
  self->n_waiting++;
  return TRUE;
}

/* The caller whose turn it is gives its oldest; it goes to the back of the
 * turns while it has more, and leaves them when it has none. */
GTask *
vd_check_queue_pop (VdCheckQueue *self)
{
  gchar *caller = g_queue_pop_head (&self->turns);
  GQueue *queue;
  GTask *task;

  if (caller == NULL)
    return NULL;
  queue = g_hash_table_lookup (self->waiting, caller);
  task = g_queue_pop_head (queue);
  self->n_waiting--;
  if (queue->length > 0)
    g_queue_push_tail (&self->turns, caller);
  else
    g_hash_table_remove (self->waiting, caller);
  return task;
}

guint
vd_check_queue_get_waiting (VdCheckQueue *self)
{
  return self->n_waiting;
}
