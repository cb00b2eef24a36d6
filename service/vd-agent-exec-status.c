/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-agent-client"

#include "config.h"

#include "vivarium-error.h"
#include "vd-json-stream.h"
#include "vd-agent-exec-status.h"

/* The decoding of a guest-exec-status reply, apart from the client so that
 * its fuzz harness (tests/fuzz) links it without a socket or a daemon. */

static gboolean
vd_agent_exec_get_stream (JsonObject *status, const gchar *data_member, const gchar *trunc_member,
                          gsize cap, GBytes **out, gboolean *truncated, GError **error)
{
  gboolean cut = FALSE;
  const gchar *text;

  *truncated = FALSE;
  if (json_object_has_member (status, trunc_member) &&
      !vd_json_get_bool (status, trunc_member, truncated, error))
    return FALSE;
  if (!json_object_has_member (status, data_member)) {
    *out = g_bytes_new (NULL, 0);
    return TRUE;
  }
  text = vd_json_get_string (status, data_member, error);
  if (text == NULL)
    return FALSE;
  *out = vd_base64_decode_capped (text, cap, &cut, error);
  if (*out == NULL)
    return FALSE;
  *truncated = *truncated || cut;
  return TRUE;
}

/* The guest's word on how the command ended, checked for shape and range:
 * exit codes are ints (Windows reports a DWORD, kept as its bit pattern). */
VdAgentExecResult *
vd_agent_exec_parse_status (JsonObject *status, gsize cap, GError **error)
{
  g_autoptr(VdAgentExecResult) r = g_new0 (VdAgentExecResult, 1);
  gboolean has_code = json_object_has_member (status, "exitcode");
  gboolean has_signal = json_object_has_member (status, "signal");
  gint64 v = 0;

  r->exit_status = -1;
  if (has_code && has_signal) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Guest reported both an exit code and a signal");
    return NULL;
  }
  if (has_code) {
    if (!vd_json_get_int (status, "exitcode", G_MININT32, G_MAXUINT32, &v, error))
      return NULL;
    r->exit_status = (gint) (guint32) v;
  } else if (has_signal) {
    if (!vd_json_get_int (status, "signal", 0, G_MAXINT32, &v, error))
      return NULL;
    r->exit_status = (gint) v;
    r->signaled = TRUE;
  }
  if (!vd_agent_exec_get_stream (status, "out-data", "out-truncated", cap, &r->out, &r->out_truncated, error))
    return NULL;
  if (!vd_agent_exec_get_stream (status, "err-data", "err-truncated", cap, &r->err, &r->err_truncated, error))
    return NULL;
  return g_steal_pointer (&r);
}
