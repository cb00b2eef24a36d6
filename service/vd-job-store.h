/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-idle.h"
#include "vd-job.h"
#include "vd-session-pool.h"

G_BEGIN_DECLS

/* The Jobs on the bus (image builds, saved sessions, self-test runs): their
 * records under STATE/jobs/, loaded again at start, the newest finished
 * ones kept (running ones always), each exported through the VdExportFunc
 * it was handed before anyone learns its path, and each keeping the daemon
 * on the bus (a VdIdle inhibitor) until it finishes. Handed to whoever
 * starts jobs, so none of them needs the manager. */

#define VD_TYPE_JOB_STORE (vd_job_store_get_type ())
G_DECLARE_FINAL_TYPE (VdJobStore, vd_job_store, VD, JOB_STORE, GObject)

VdJobStore *vd_job_store_new  (VdConfig     *config,
                               VdIdle       *idle,
                               VdExportFunc  export_func,
                               gpointer      export_data);
/* Exports the records a previous instance left, then prunes. */
void        vd_job_store_load (VdJobStore   *self);
/* A new running job, exported; NULL with @error when it cannot be. */
VdJob      *vd_job_store_new_job (VdJobStore   *self,
                                  const gchar  *operation,
                                  gboolean      cancelable,
                                  GError      **error);

G_END_DECLS
