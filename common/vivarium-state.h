/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The states of the daemon's objects. The daemon works with these enums;
 * the strings exist only at the D-Bus edge (properties, signals, JSON), and
 * these tables are the one place that spells them. */

typedef enum {
  VIVARIUM_SESSION_STATE_STARTING,
  VIVARIUM_SESSION_STATE_RUNNING,
  VIVARIUM_SESSION_STATE_PAUSED,     /* QEMU stopped the guest (e.g. a disk I/O error) */
  VIVARIUM_SESSION_STATE_STOPPING,
  VIVARIUM_SESSION_STATE_STOPPED,
  VIVARIUM_SESSION_STATE_FAILED,
} VivariumSessionState;

typedef enum {
  VIVARIUM_JOB_STATE_RUNNING,
  VIVARIUM_JOB_STATE_SUCCEEDED,
  VIVARIUM_JOB_STATE_FAILED,
  VIVARIUM_JOB_STATE_CANCELLED,
} VivariumJobState;

/* The outcome of a Task (handed-off work). */
typedef enum {
  VIVARIUM_OUTCOME_IN_PROGRESS,
  VIVARIUM_OUTCOME_NEEDS_INPUT,
  VIVARIUM_OUTCOME_DONE,
  VIVARIUM_OUTCOME_FAILED,
} VivariumOutcome;

/* A session's egress proxy (EgressState): none in modes "none" and "open". */
typedef enum {
  VIVARIUM_EGRESS_STATE_OFF,
  VIVARIUM_EGRESS_STATE_STARTING,
  VIVARIUM_EGRESS_STATE_RUNNING,
  VIVARIUM_EGRESS_STATE_FAILED,    /* the proxy is gone: the guest has no way out */
} VivariumEgressState;

/* The verdict of an isolation self-test, of one probe or of a whole run. */
typedef enum {
  VIVARIUM_VERDICT_NEVER_RUN,
  VIVARIUM_VERDICT_PASS,
  VIVARIUM_VERDICT_FAIL,
  VIVARIUM_VERDICT_INCONCLUSIVE,
} VivariumVerdict;

const gchar *vivarium_session_state_to_string   (VivariumSessionState state);
gboolean     vivarium_session_state_from_string (const gchar          *str,
                                                 VivariumSessionState *state);
gboolean     vivarium_session_state_is_active   (VivariumSessionState state);
const gchar *vivarium_job_state_to_string       (VivariumJobState state);
gboolean     vivarium_job_state_from_string     (const gchar      *str,
                                                 VivariumJobState *state);
const gchar *vivarium_egress_state_to_string    (VivariumEgressState state);
gboolean     vivarium_egress_state_from_string  (const gchar         *str,
                                                 VivariumEgressState *state);
const gchar *vivarium_outcome_to_string         (VivariumOutcome outcome);
gboolean     vivarium_outcome_from_string       (const gchar     *str,
                                                 VivariumOutcome *outcome);
const gchar *vivarium_verdict_to_string         (VivariumVerdict verdict);
gboolean     vivarium_verdict_from_string       (const gchar     *str,
                                                 VivariumVerdict *verdict);

G_END_DECLS
