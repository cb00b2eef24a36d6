/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-guard.h"
#include "vd-idle.h"
#include "vd-image.h"
#include "vd-project-store.h"
#include "vd-report-store.h"
#include "vd-session-pool.h"
#include "vd-secret-store.h"
#include "vd-systemd.h"
#include "vd-task.h"
#include "vd-worker-grants.h"

G_BEGIN_DECLS

/* The tasks: SubmitTask's options, the work session with the project
 * shared, the worker and its grants, and the end — commit, the
 * verification re-run in a fresh session with the committed tree shared
 * read-only, the signed report. One task per project (the project store
 * says Busy). A record TASKS/<id>.json exists while a task runs, so that a
 * daemon killed meanwhile reports it FAILED at its next start. The steps
 * of a task are declared once, in vd-task-runner.c (run_steps[]): Task.Step
 * and Timings come from there.
 *
 * At most [Tasks] MaxFinishedTasks= finished tasks stay on the bus; past
 * it the oldest leave the bus and the disk.
 *
 * signal "task-added" (const gchar *object_path),
 * signal "task-removed" (const gchar *object_path): pruned, to leave the bus */

#define VD_TASK_DEFAULT_TIMEOUT  1800
/* The verification command's own limit in the fresh session. */
#define VD_TASK_VERIFY_TIMEOUT   600

#define VD_TYPE_TASK_RUNNER (vd_task_runner_get_type ())
G_DECLARE_FINAL_TYPE (VdTaskRunner, vd_task_runner, VD, TASK_RUNNER, GObject)

VdTaskRunner *vd_task_runner_new        (VdConfig       *config,
                                         VdSystemd      *systemd,
                                         VdSessionPool  *pool,
                                         VdGuard        *guard,
                                         VdProjectStore *projects,
                                         VdReportStore  *reports,
                                         VdWorkerGrants *grants,
                                         VdIdle         *idle,
                                         VdExportFunc    export_func,
                                         gpointer        export_data);
/* Where SubmitTask's "secrets" come from. */
void          vd_task_runner_set_secret_store (VdTaskRunner  *self,
                                               VdSecretStore *store);
/* Sessions counted against [Sessions] MaxSessions: the active ones and a
 * slot for each running task between its two sessions. */
guint         vd_task_runner_count_slots_in_use (VdTaskRunner *self);
/* Tasks waiting for a slot (Task.Step "queued"). */
guint         vd_task_runner_count_queued       (VdTaskRunner *self);
/* @image: frozen and verified bootable by the caller (the manager). A
 * task that finds every slot in use waits (Task.Step "queued") while
 * fewer than [Tasks] MaxQueuedTasks wait; else Busy. */
VdTask       *vd_task_runner_submit     (VdTaskRunner *self,
                                         const gchar  *project,
                                         VdImage      *image,
                                         const gchar  *instructions,
                                         GVariant     *options,
                                         GError      **error);
const gchar **vd_task_runner_list_paths (VdTaskRunner *self);
/* At start: the records of tasks a killed daemon left become FAILED
 * reports. */
void          vd_task_runner_recover    (VdTaskRunner *self);
/* At shutdown: stops every worker (their sessions go with the pool). */
void          vd_task_runner_stop_all   (VdTaskRunner *self);
/* After the daemon lost the bus: lets go of every call from another
 * connection than @connection (NULL: from any). */
void          vd_task_runner_set_connection (VdTaskRunner    *self,
                                             GDBusConnection *connection);

G_END_DECLS
