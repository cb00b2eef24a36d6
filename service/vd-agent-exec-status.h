/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct {
  gint      exit_status;     /* as the guest reported it; -1 if it did not report one */
  gboolean  signaled;        /* terminated by a signal (exit_status holds the signal) */
  GBytes   *out;             /* capped */
  GBytes   *err;             /* capped */
  gboolean  out_truncated;   /* the guest said so, or we cut it at the cap */
  gboolean  err_truncated;
} VdAgentExecResult;

void vd_agent_exec_result_free (VdAgentExecResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdAgentExecResult, vd_agent_exec_result_free)

/* A guest-exec-status reply of a process that exited, checked for shape
 * and range; each output stream decoded and cut at @cap bytes. */
VdAgentExecResult *vd_agent_exec_parse_status (JsonObject *status,
                                               gsize       cap,
                                               GError    **error);

G_END_DECLS
