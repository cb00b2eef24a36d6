/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

#include "vd-agent-exec-result.h"

G_BEGIN_DECLS

/* A guest-exec-status reply of a process that exited, checked for shape
 * and range; each output stream decoded and cut at @cap bytes. */
VdAgentExecResult *vd_agent_exec_parse_status (JsonObject *status,
                                               gsize       cap,
                                               GError    **error);

G_END_DECLS
