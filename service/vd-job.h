/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-state.h"

G_BEGIN_DECLS

/* A long operation (an image build, a self-test run) with a face on the
 * bus and a record on disk: DIR/<id>.json, rewritten atomically on each
 * change of state, and DIR/<id>.log, appended in bounded batches.
 * signal "finished": the job reached its final state. */

#define VD_TYPE_JOB (vd_job_get_type ())
G_DECLARE_FINAL_TYPE (VdJob, vd_job, VD, JOB, GObject)

VdJob        *vd_job_new               (const gchar  *operation,
                                        const gchar  *id,
                                        const gchar  *dir,
                                        gboolean      cancelable);
VdJob        *vd_job_load              (const gchar  *dir,
                                        const gchar  *id,
                                        GError      **error);
const gchar  *vd_job_get_id            (VdJob *self);
const gchar  *vd_job_get_object_path   (VdJob *self);
const gchar  *vd_job_get_operation     (VdJob *self);
VivariumJobState vd_job_get_state      (VdJob *self);
gint64        vd_job_get_started_at    (VdJob *self);
GCancellable *vd_job_get_cancellable   (VdJob *self);
gboolean      vd_job_is_finished       (VdJob *self);
GDBusInterfaceSkeleton *vd_job_get_skeleton (VdJob *self);
void          vd_job_progress          (VdJob *self, guint percent, const gchar *step);
void          vd_job_set_progress      (VdJob *self, gdouble fraction, const gchar *step);
void          vd_job_append_log        (VdJob *self, const gchar *line);
void          vd_job_succeed           (VdJob *self, const gchar *result_path);
void          vd_job_fail              (VdJob *self, const GError *error);
gboolean      vd_job_delete_files      (VdJob *self, GError **error);

gchar        *vd_job_new_id            (void);

G_END_DECLS
