/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* QEMU answers far below this; a bigger reply is an attack or a bug. */
#define VD_QMP_CLIENT_DEFAULT_MAX_RESPONSE (4 * 1024 * 1024)

#define VD_TYPE_QMP_CLIENT (vd_qmp_client_get_type ())
G_DECLARE_FINAL_TYPE (VdQmpClient, vd_qmp_client, VD, QMP_CLIENT, GObject)

VdQmpClient *vd_qmp_client_new_for_stream          (GIOStream           *stream);
void         vd_qmp_client_set_max_response_size   (VdQmpClient         *self,
                                                    gsize                max_size);
void         vd_qmp_client_connect_async           (const gchar         *socket_path,
                                                    guint                timeout_ms,
                                                    GCancellable        *cancellable,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
VdQmpClient *vd_qmp_client_connect_finish          (GAsyncResult        *result,
                                                    GError             **error);
/* reads the greeting and sends qmp_capabilities */
void         vd_qmp_client_handshake_async         (VdQmpClient         *self,
                                                    guint                timeout_ms,
                                                    GCancellable        *cancellable,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
gboolean     vd_qmp_client_handshake_finish        (VdQmpClient         *self,
                                                    GAsyncResult        *result,
                                                    GError             **error);
void         vd_qmp_client_execute_async           (VdQmpClient         *self,
                                                    const gchar         *command,
                                                    JsonObject          *arguments,
                                                    guint                timeout_ms,
                                                    GCancellable        *cancellable,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
/* the "return" value */
JsonNode    *vd_qmp_client_execute_finish          (VdQmpClient         *self,
                                                    GAsyncResult        *result,
                                                    GError             **error);
/* Hands @fd (the caller keeps its copy) to QEMU for a following "getfd". */
gboolean     vd_qmp_client_send_fd                 (VdQmpClient         *self,
                                                    int                  fd,
                                                    GError             **error);
void         vd_qmp_client_close                   (VdQmpClient         *self);
gboolean     vd_qmp_client_is_closed               (VdQmpClient         *self);

gchar       *vd_qmp_block_io_error_describe        (JsonObject          *data,
                                                    gboolean            *nospace);

/* signals: "event" (const gchar *name, JsonObject *data nullable), "closed",
 * and for the events a session acts on: "block-io-error" (const gchar
 * *reason, gboolean nospace), "guest-stopped" (STOP), "guest-resumed" (RESUME) */

G_END_DECLS
