/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/* A declared list of steps with weights (like fwupd's FuProgress). The
 * current step may have a child list whose progress fills that step's
 * share, so a long operation is one tree and later steps have one place to
 * go. signal "changed" (gdouble fraction, const gchar *message), on the
 * root, for every change anywhere in the tree.
 *
 * A step may carry a typed id (an enum of the caller's): the caller asks
 * which step runs by its id, never by comparing names, and moves on to a
 * later step by its id — forward only, so the declaration is the order. */

/* vd_progress_get_step_id() once every step is done. */
#define VD_PROGRESS_NO_STEP G_MAXUINT

#define VD_TYPE_PROGRESS (vd_progress_get_type ())
G_DECLARE_FINAL_TYPE (VdProgress, vd_progress, VD, PROGRESS, GObject)

VdProgress  *vd_progress_new          (void);
/* Its id is its place in the list. */
void         vd_progress_add_step     (VdProgress  *self,
                                       const gchar *name,
                                       guint        weight);
/* @id: the caller's own, unique in this list; not VD_PROGRESS_NO_STEP. */
void         vd_progress_add_step_id  (VdProgress  *self,
                                       guint        id,
                                       const gchar *name,
                                       guint        weight);
guint        vd_progress_get_n_steps  (VdProgress  *self);
guint        vd_progress_get_step_id  (VdProgress  *self);
const gchar *vd_progress_get_step_name (VdProgress *self);
gboolean     vd_progress_step_to      (VdProgress  *self,
                                       guint        id);
VdProgress  *vd_progress_get_child    (VdProgress  *self);
void         vd_progress_set_message  (VdProgress  *self,
                                       const gchar *message);
void         vd_progress_step_done    (VdProgress  *self);
void         vd_progress_finish       (VdProgress  *self);
gdouble      vd_progress_get_fraction (VdProgress  *self);
guint        vd_progress_get_percent  (VdProgress  *self);
const gchar *vd_progress_get_message  (VdProgress  *self);

G_END_DECLS
