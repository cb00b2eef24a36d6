/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-state.h"

static const gchar *const session_states[] = {
  [VIVARIUM_SESSION_STATE_STARTING] = "starting",
  [VIVARIUM_SESSION_STATE_RUNNING]  = "running",
  [VIVARIUM_SESSION_STATE_PAUSED]   = "paused",
  [VIVARIUM_SESSION_STATE_STOPPING] = "stopping",
  [VIVARIUM_SESSION_STATE_STOPPED]  = "stopped",
  [VIVARIUM_SESSION_STATE_FAILED]   = "failed",
};

static const gchar *const job_states[] = {
  [VIVARIUM_JOB_STATE_RUNNING]   = "running",
  [VIVARIUM_JOB_STATE_SUCCEEDED] = "succeeded",
  [VIVARIUM_JOB_STATE_FAILED]    = "failed",
  [VIVARIUM_JOB_STATE_CANCELLED] = "cancelled",
};

static const gchar *const egress_states[] = {
  [VIVARIUM_EGRESS_STATE_OFF]      = "off",
  [VIVARIUM_EGRESS_STATE_STARTING] = "starting",
  [VIVARIUM_EGRESS_STATE_RUNNING]  = "running",
  [VIVARIUM_EGRESS_STATE_FAILED]   = "failed",
};

static const gchar *const outcomes[] = {
  [VIVARIUM_OUTCOME_IN_PROGRESS] = "IN_PROGRESS",
  [VIVARIUM_OUTCOME_NEEDS_INPUT] = "NEEDS_INPUT",
  [VIVARIUM_OUTCOME_DONE]        = "DONE",
  [VIVARIUM_OUTCOME_FAILED]      = "FAILED",
};

static const gchar *const verdicts[] = {
  [VIVARIUM_VERDICT_NEVER_RUN]    = "never-run",
  [VIVARIUM_VERDICT_PASS]         = "pass",
  [VIVARIUM_VERDICT_FAIL]         = "fail",
  [VIVARIUM_VERDICT_INCONCLUSIVE] = "inconclusive",
};

static const gchar *
to_string (const gchar *const *table, guint n, guint value)
{
  g_return_val_if_fail (value < n, NULL);
  return table[value];
}

static gboolean
from_string (const gchar *const *table, guint n, const gchar *str, guint *value)
{
  for (guint i = 0; i < n; i++) {
    if (g_strcmp0 (table[i], str) == 0) {
      *value = i;
      return TRUE;
    }
  }
  return FALSE;
}

#define DEFINE_STATE_STRINGS(prefix, Type, table)                              \
  const gchar *                                                                \
  prefix##_to_string (Type value)                                              \
  {                                                                            \
    return to_string (table, G_N_ELEMENTS (table), (guint) value);             \
  }                                                                            \
  gboolean                                                                     \
  prefix##_from_string (const gchar *str, Type *value)                         \
  {                                                                            \
    guint v = 0;                                                               \
    if (!from_string (table, G_N_ELEMENTS (table), str, &v))                   \
      return FALSE;                                                            \
    *value = (Type) v;                                                         \
    return TRUE;                                                               \
  }

DEFINE_STATE_STRINGS (vivarium_session_state, VivariumSessionState, session_states)
DEFINE_STATE_STRINGS (vivarium_job_state, VivariumJobState, job_states)
DEFINE_STATE_STRINGS (vivarium_egress_state, VivariumEgressState, egress_states)
DEFINE_STATE_STRINGS (vivarium_outcome, VivariumOutcome, outcomes)
DEFINE_STATE_STRINGS (vivarium_verdict, VivariumVerdict, verdicts)

/* A session that still holds a uid, a unit and an overlay. */
gboolean
vivarium_session_state_is_active (VivariumSessionState state)
{
  return state == VIVARIUM_SESSION_STATE_STARTING || state == VIVARIUM_SESSION_STATE_RUNNING ||
         state == VIVARIUM_SESSION_STATE_PAUSED || state == VIVARIUM_SESSION_STATE_STOPPING;
}
