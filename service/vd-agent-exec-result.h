/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* How a guest command ended: parsed by the session helper from the agent's
 * reply (vd-agent-exec-status.c), carried to the daemon typed. Header-only,
 * so the daemon holds one without linking a guest parser. */
typedef struct {
  gint      exit_status;     /* as the guest reported it; -1 if it did not report one */
  gboolean  signaled;        /* terminated by a signal (exit_status holds the signal) */
  GBytes   *out;             /* capped */
  GBytes   *err;             /* capped */
  gboolean  out_truncated;   /* the guest said so, or we cut it at the cap */
  gboolean  err_truncated;
} VdAgentExecResult;

static inline void
vd_agent_exec_result_free (VdAgentExecResult *r)
{
  if (r == NULL)
    return;
  g_clear_pointer (&r->out, g_bytes_unref);
  g_clear_pointer (&r->err, g_bytes_unref);
  g_free (r);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdAgentExecResult, vd_agent_exec_result_free)

G_END_DECLS
