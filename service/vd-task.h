/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "vivarium-state.h"

G_BEGIN_DECLS

/* One task's org.vivarium.Vivarium1.Task object: its typed outcome (strings
 * only on the bus), the question between Ask and Answer, the callers
 * waiting in Wait (at most VD_TASK_WAITS_MAX at once, VD_TASK_WAITS_PER_CALLER
 * of them from one caller). It decides nothing
 * about the work: Finish and Cancel are handed to the runner by signals.
 *
 * signal "finish-requested" (const gchar *summary, const gchar *verify_command)
 * signal "cancel-requested" () */

#define VD_TASK_WAITS_MAX        32
/* Of which one caller (unique bus name) may hold this many at once. */
#define VD_TASK_WAITS_PER_CALLER 4
/* The contract's bounds (Wait's timeout, Ask, Answer, Finish's summary)
 * are VIVARIUM_TASK_* in common/vivarium-names.h. */

/* What the daemon does for the task now, in the order a task runs; its
 * name is Task.Step (the contract: clients and tests read the names). */
typedef enum {
  VD_TASK_STEP_QUEUED,   /* "queued": it waits for a session ([Sessions] MaxSessions) */
  VD_TASK_STEP_WORK,     /* "work": the work session starts, the worker works */
  VD_TASK_STEP_COMMIT,   /* "commit": the work session stops, the daemon commits */
  VD_TASK_STEP_VERIFY,   /* "verify": the re-run in a fresh session */
  VD_TASK_STEP_REPORT,   /* "report": signed, stored; the task lets go of what it held */
  VD_TASK_STEP_DONE,     /* "done" */
} VdTaskStep;

const gchar     *vd_task_step_to_string  (VdTaskStep step);

#define VD_TYPE_TASK (vd_task_get_type ())
G_DECLARE_FINAL_TYPE (VdTask, vd_task, VD, TASK, GObject)

VdTask          *vd_task_new             (const gchar *id,
                                          const gchar *project,
                                          const gchar *image,
                                          const gchar *worker);
const gchar     *vd_task_get_id          (VdTask *self);
const gchar     *vd_task_get_object_path (VdTask *self);
GDBusInterfaceSkeleton *vd_task_get_skeleton (VdTask *self);
VivariumOutcome  vd_task_get_outcome     (VdTask *self);
gboolean         vd_task_is_finished     (VdTask *self);
gint64           vd_task_get_submitted_at (VdTask *self);

/* The runner's, from its declared steps; vd_task_finish() makes it DONE. */
void             vd_task_set_step        (VdTask      *self,
                                          VdTaskStep   step);
VdTaskStep       vd_task_get_step        (VdTask      *self);
void             vd_task_set_session     (VdTask      *self,
                                          const gchar *session_path);
/* The work session's kept egress decision log (Task.GetEgressLog). */
void             vd_task_set_egress_log  (VdTask      *self,
                                          const gchar *path);
/* @timings: a{st}, floating or not (the Timings property). */
void             vd_task_set_timings     (VdTask      *self,
                                          GVariant    *timings);
/* While the task runs: IN_PROGRESS or NEEDS_INPUT (Ask does that). */
void             vd_task_set_report      (VdTask      *self,
                                          const gchar *report_path);
/* The end: outcome and reason are final; waits return, a pending Ask fails
 * with Cancelled, Finish and Cancel are refused from now on. */
void             vd_task_finish          (VdTask          *self,
                                          VivariumOutcome  outcome,
                                          const gchar     *reason);
/* Refuses further Ask/Finish once the runner started to wind down, and
 * fails a pending Ask with Cancelled. */
void             vd_task_close_worker    (VdTask *self);
/* After the daemon lost the bus: drops the waits and the pending Ask that
 * came over any connection but @keep (NULL: all of them). */
void             vd_task_forget_connection (VdTask          *self,
                                            GDBusConnection *keep);

/* The record of a finished task (STATE/tasks/done/<id>.json): what it
 * was, how it ended, its report, its times; the restarted daemon lists it
 * again from there. */
#define VD_TASK_RECORD_STRING_MAX 4096
JsonNode        *vd_task_to_record        (VdTask      *self);
VdTask          *vd_task_new_from_record  (const gchar *id,
                                           JsonObject  *record,
                                           GError     **error);

G_END_DECLS
