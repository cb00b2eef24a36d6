/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define VD_TYPE_TASK (vd_task_get_type ())
G_DECLARE_FINAL_TYPE (VdTask, vd_task, VD, TASK, GObject)

VdTask       *vd_task_new              (const gchar      *kind,
                                        GDBusConnection  *connection,
                                        GError          **error);
const gchar  *vd_task_get_id           (VdTask *self);
const gchar  *vd_task_get_object_path  (VdTask *self);
GCancellable *vd_task_get_cancellable  (VdTask *self);
gboolean      vd_task_is_finished      (VdTask *self);
GDBusInterfaceSkeleton *vd_task_get_skeleton (VdTask *self);
void          vd_task_progress         (VdTask *self, guint percent, const gchar *step);
void          vd_task_append_log       (VdTask *self, const gchar *line);
void          vd_task_succeed          (VdTask *self, const gchar *result_path);
void          vd_task_fail             (VdTask *self, const GError *error);

G_END_DECLS
