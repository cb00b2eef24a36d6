/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "vd-agent-exec-status.h"

G_BEGIN_DECLS

/* qemu-ga hands back up to 16 MiB of each output stream in one base64 reply;
 * a cap below that would turn a chatty command into a dead agent. */
#define VD_AGENT_CLIENT_DEFAULT_MAX_RESPONSE (48 * 1024 * 1024)

#define VD_TYPE_AGENT_CLIENT (vd_agent_client_get_type ())
G_DECLARE_FINAL_TYPE (VdAgentClient, vd_agent_client, VD, AGENT_CLIENT, GObject)

VdAgentClient     *vd_agent_client_new_for_stream        (GIOStream           *stream);
void               vd_agent_client_set_max_response_size (VdAgentClient       *self,
                                                          gsize                max_size);
void               vd_agent_client_connect_async         (const gchar         *socket_path,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
VdAgentClient     *vd_agent_client_connect_finish        (GAsyncResult        *result,
                                                          GError             **error);
/* 0xFF + guest-sync-delimited with a random id; discards everything before
 * the 0xFF-prefixed matching reply */
void               vd_agent_client_sync_async            (VdAgentClient       *self,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
gboolean           vd_agent_client_sync_finish           (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
/* connect + sync, retried with short bounded tries until timeout_ms */
void               vd_agent_client_wait_ready_async      (const gchar         *socket_path,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
VdAgentClient     *vd_agent_client_wait_ready_finish     (GAsyncResult        *result,
                                                          GError             **error);
/* @cwd: NULL or "" for the agent's default; otherwise the guest's shell
 * changes there first. The limits apply to @argv as given. */
void               vd_agent_client_exec_async            (VdAgentClient       *self,
                                                          const gchar * const *argv,
                                                          const gchar * const *env,
                                                          const gchar         *cwd,
                                                          guint                timeout_ms,
                                                          gsize                output_cap,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
/* @pid (nullable): the guest's process id once guest-exec answered, -1
 * before; set on failure too, so a timed-out command can be waited for. */
VdAgentExecResult *vd_agent_client_exec_finish           (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          gint64              *pid,
                                                          GError             **error);
/* Waits for a guest process started by exec (polling guest-exec-status). */
void               vd_agent_client_exec_wait_async       (VdAgentClient       *self,
                                                          gint64               pid,
                                                          guint                timeout_ms,
                                                          gsize                output_cap,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
VdAgentExecResult *vd_agent_client_exec_wait_finish      (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_agent_client_read_file_async       (VdAgentClient       *self,
                                                          const gchar         *path,
                                                          gsize                max_size,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
GBytes            *vd_agent_client_read_file_finish      (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_agent_client_write_file_async      (VdAgentClient       *self,
                                                          const gchar         *path,
                                                          GBytes              *data,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
gboolean           vd_agent_client_write_file_finish     (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_agent_client_command_async         (VdAgentClient       *self,
                                                          const gchar         *command,
                                                          JsonObject          *arguments,
                                                          guint                timeout_ms,
                                                          GCancellable        *cancellable,
                                                          GAsyncReadyCallback  callback,
                                                          gpointer             user_data);
JsonNode          *vd_agent_client_command_finish        (VdAgentClient       *self,
                                                          GAsyncResult        *result,
                                                          GError             **error);
void               vd_agent_client_close                 (VdAgentClient       *self);
gboolean           vd_agent_client_is_closed             (VdAgentClient       *self);

/* signal: "closed" (no args) */

G_END_DECLS
