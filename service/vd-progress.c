/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdProgress"

#include "config.h"

#include "vd-progress.h"

typedef struct {
  gchar *name;
  guint  weight;
  guint  id;
} Step;

struct _VdProgress {
  GObject     parent_instance;
  GArray     *steps;       /* of Step */
  guint       total_weight;
  guint       done_weight;
  guint       current;     /* index of the step running now */
  gboolean    finished;
  gchar      *message;     /* overrides the current step's name */
  VdProgress *child;       /* the current step's own steps, if asked for */
  VdProgress *parent;      /* unowned: the parent owns us */
};

G_DEFINE_TYPE (VdProgress, vd_progress, G_TYPE_OBJECT)

enum { SIGNAL_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
step_clear (gpointer data)
{
  g_free (((Step *) data)->name);
}

static void
vd_progress_finalize (GObject *object)
{
  VdProgress *self = VD_PROGRESS (object);

  g_clear_object (&self->child);
  g_array_unref (self->steps);
  g_free (self->message);
  G_OBJECT_CLASS (vd_progress_parent_class)->finalize (object);
}

static void
vd_progress_class_init (VdProgressClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_progress_finalize;
  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                          NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_DOUBLE, G_TYPE_STRING);
}

static void
vd_progress_init (VdProgress *self)
{
  self->steps = g_array_new (FALSE, TRUE, sizeof (Step));
  g_array_set_clear_func (self->steps, step_clear);
}

VdProgress *
vd_progress_new (void)
{
  return g_object_new (VD_TYPE_PROGRESS, NULL);
}

static VdProgress *
root_of (VdProgress *self)
{
  while (self->parent != NULL)
    self = self->parent;
  return self;
}

static void
emit_changed (VdProgress *self)
{
  VdProgress *root = root_of (self);

  g_signal_emit (root, signals[SIGNAL_CHANGED], 0, vd_progress_get_fraction (root), vd_progress_get_message (root));
}

static gint
find_step (VdProgress *self, guint id)
{
  for (guint i = 0; i < self->steps->len; i++) {
    if (g_array_index (self->steps, Step, i).id == id)
      return (gint) i;
  }
  return -1;
}

/* Weights are relative: 1, 1, 8 gives the last step 80 %. */
void
vd_progress_add_step_id (VdProgress *self, guint id, const gchar *name, guint weight)
{
  Step step = { g_strdup (name), MAX (weight, 1u), id };

  g_return_if_fail (!self->finished);
  g_return_if_fail (id != VD_PROGRESS_NO_STEP && find_step (self, id) < 0);
  g_array_append_val (self->steps, step);
  self->total_weight += step.weight;
}

/* Its id is its place in the list. */
void
vd_progress_add_step (VdProgress *self, const gchar *name, guint weight)
{
  vd_progress_add_step_id (self, self->steps->len, name, weight);
}

guint
vd_progress_get_n_steps (VdProgress *self)
{
  return self->steps->len;
}

/* The current step's child: created empty on first use, dropped when the
 * step is done. */
VdProgress *
vd_progress_get_child (VdProgress *self)
{
  if (self->child == NULL) {
    self->child = vd_progress_new ();
    self->child->parent = self;
  }
  return self->child;
}

void
vd_progress_set_message (VdProgress *self, const gchar *message)
{
  g_free (self->message);
  self->message = g_strdup (message);
  emit_changed (self);
}

void
vd_progress_step_done (VdProgress *self)
{
  if (self->finished || self->current >= self->steps->len) {
    g_warning ("vd_progress_step_done() past the last of %u steps", self->steps->len);
    return;
  }
  self->done_weight += g_array_index (self->steps, Step, self->current).weight;
  self->current++;
  g_clear_object (&self->child);
  g_clear_pointer (&self->message, g_free);
  if (self->current == self->steps->len)
    self->finished = TRUE;
  emit_changed (self);
}

/* Also on failure: whatever steps are left count as done. */
void
vd_progress_finish (VdProgress *self)
{
  self->finished = TRUE;
  self->done_weight = self->total_weight;
  self->current = self->steps->len;
  g_clear_object (&self->child);
  emit_changed (self);
}

guint
vd_progress_get_step_id (VdProgress *self)
{
  if (self->finished || self->current >= self->steps->len)
    return VD_PROGRESS_NO_STEP;
  return g_array_index (self->steps, Step, self->current).id;
}

/* The current step's own name: not a message, not a child's step. */
const gchar *
vd_progress_get_step_name (VdProgress *self)
{
  if (self->finished || self->current >= self->steps->len)
    return NULL;
  return g_array_index (self->steps, Step, self->current).name;
}

/* The steps passed over count as done (a task with nothing to verify
 * passes its verification by). Back, or to an id never declared: FALSE
 * and nothing changes — the declaration is the order, and a caller that
 * goes against it has a bug to report. Already there: TRUE, no change. */
gboolean
vd_progress_step_to (VdProgress *self, guint id)
{
  gint at = find_step (self, id);

  if (self->finished || at < 0 || (guint) at < self->current)
    return FALSE;
  if ((guint) at == self->current)
    return TRUE;
  for (; self->current < (guint) at; self->current++)
    self->done_weight += g_array_index (self->steps, Step, self->current).weight;
  g_clear_object (&self->child);
  g_clear_pointer (&self->message, g_free);
  emit_changed (self);
  return TRUE;
}

gdouble
vd_progress_get_fraction (VdProgress *self)
{
  gdouble done;

  if (self->finished)
    return 1.0;
  if (self->total_weight == 0)
    return 0.0;
  done = self->done_weight;
  if (self->child != NULL && self->current < self->steps->len)
    done += g_array_index (self->steps, Step, self->current).weight * vd_progress_get_fraction (self->child);
  return CLAMP (done / self->total_weight, 0.0, 1.0);
}

/* 100 only when finished: a rounded 99.6 % is still running. */
guint
vd_progress_get_percent (VdProgress *self)
{
  guint percent = (guint) (vd_progress_get_fraction (self) * 100.0);

  return self->finished ? 100 : MIN (percent, 99u);
}

/* The deepest message or step name that says what runs now. */
const gchar *
vd_progress_get_message (VdProgress *self)
{
  const gchar *deeper = self->child != NULL ? vd_progress_get_message (self->child) : NULL;

  if (deeper != NULL)
    return deeper;
  if (self->message != NULL)
    return self->message;
  if (self->current < self->steps->len)
    return g_array_index (self->steps, Step, self->current).name;
  return NULL;
}
