/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-agent-exec-result.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* The daemon's side of one session's vivarium-session-helper: the helper
 * runs in its own transient unit (vivarium-helper-<session>.service),
 * unprivileged as the session's uid, owns the QMP and guest-agent sockets
 * and answers over a peer-to-peer D-Bus connection on a socketpair
 * (dbus/org.vivarium.Vivarium1.SessionHelper.xml). The daemon never opens
 * those sockets nor parses a byte of guest JSON: it reads typed replies,
 * and every string in them is escaped and capped as the guest's.
 *
 * signals: "qmp-closed" (QEMU exited), "agent-closed" (const gchar *reason),
 * "block-io-error" (const gchar *reason, gboolean nospace), "guest-stopped",
 * "guest-resumed", and "died" (const gchar *reason): the helper's
 * connection ended without the daemon closing it. */

#define VD_TYPE_SESSION_HELPER (vd_session_helper_get_type ())
G_DECLARE_FINAL_TYPE (VdSessionHelper, vd_session_helper, VD, SESSION_HELPER, GObject)

typedef struct {
  const gchar *session_id;
  guint32      uid;
  /* the session's own runtime directory (its sockets), and the root of
   * every session's (hidden from the helper but for its own) */
  const gchar *runtime_dir;
  const gchar *runtime_root;
  const gchar *qmp_socket;
  const gchar *agent_socket;
} VdSessionHelperOptions;

gchar             *vd_session_helper_unit_for        (const gchar *session_id);

void               vd_session_helper_start_async     (VdSystemd                    *systemd,
                                                      const VdSessionHelperOptions *options,
                                                      GCancellable                 *cancellable,
                                                      GAsyncReadyCallback           callback,
                                                      gpointer                      user_data);
VdSessionHelper   *vd_session_helper_start_finish    (GAsyncResult  *result,
                                                      GError       **error);
VdSessionHelper   *vd_session_helper_new_for_connection (GDBusConnection *connection,
                                                        const gchar     *session_id);
const gchar       *vd_session_helper_get_unit        (VdSessionHelper *self);
/* Hangs up (the helper then exits) and stops its unit; idempotent. */
void               vd_session_helper_close           (VdSessionHelper *self);
/* close, then waits (bounded) until its unit is gone */
void               vd_session_helper_stop_sync       (VdSessionHelper *self);
gboolean           vd_session_helper_is_closed       (VdSessionHelper *self);
gboolean           vd_session_helper_has_agent       (VdSessionHelper *self);
/* How its unit ended, in systemd's words ("signal, SIGKILL"), or NULL. */
gchar             *vd_session_helper_describe_end    (VdSessionHelper *self);

void               vd_session_helper_connect_qmp_async   (VdSessionHelper     *self,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
void               vd_session_helper_query_kvm_async     (VdSessionHelper     *self,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
gboolean           vd_session_helper_query_kvm_finish    (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          gboolean            *enabled,
                                                          GError             **error);
/* @arguments: a{sv} (floating is sunk) or NULL */
void               vd_session_helper_qmp_async           (VdSessionHelper     *self,
                                                          const gchar         *command,
                                                          GVariant            *arguments,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
void               vd_session_helper_query_migrate_async (VdSessionHelper     *self,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
gboolean           vd_session_helper_query_migrate_finish (VdSessionHelper    *self,
                                                          GAsyncResult        *result,
                                                          gchar              **status,
                                                          gchar              **error_desc,
                                                          GError             **error);
/* QEMU gets its own copy of @fd (the caller keeps its), named @name. */
void               vd_session_helper_pass_fd_async       (VdSessionHelper     *self,
                                                          int                  fd,
                                                          const gchar         *name,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
void               vd_session_helper_connect_agent_async (VdSessionHelper     *self,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
/* finishes connect_qmp, qmp, pass_fd, connect_agent, write_file, set_time */
gboolean           vd_session_helper_call_finish         (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);

void               vd_session_helper_exec_async          (VdSessionHelper     *self,
                                                          const gchar * const *argv,
                                                          const gchar * const *env,
                                                          const gchar         *cwd,
                                                          guint                timeout_ms,
                                                          gsize                output_cap,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
/* @pid (nullable): the guest's process id, -1 when guest-exec never
 * answered; set on failure too (a timed-out command can be waited for). */
VdAgentExecResult *vd_session_helper_exec_finish         (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          gint64              *pid,
                                                          GError             **error);
void               vd_session_helper_exec_wait_async     (VdSessionHelper     *self,
                                                          gint64               pid,
                                                          guint                timeout_ms,
                                                          gsize                output_cap,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
VdAgentExecResult *vd_session_helper_exec_wait_finish    (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_session_helper_read_file_async     (VdSessionHelper     *self,
                                                          const gchar         *path,
                                                          gsize                max_size,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
GBytes            *vd_session_helper_read_file_finish    (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_session_helper_write_file_async    (VdSessionHelper     *self,
                                                          const gchar         *path,
                                                          GBytes              *data,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
void               vd_session_helper_set_time_async      (VdSessionHelper     *self,
                                                          gint64               time_ns,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
void               vd_session_helper_get_time_async      (VdSessionHelper     *self,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
gboolean           vd_session_helper_get_time_finish     (VdSessionHelper     *self,
                                                          GAsyncResult        *result,
                                                          gint64              *time_ns,
                                                          GError             **error);

G_END_DECLS
