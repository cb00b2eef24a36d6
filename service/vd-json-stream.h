/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* A newline-framed stream of JSON objects, as QMP and the QEMU guest agent
 * speak it, read from a peer we do not trust: every message is capped,
 * validated and parsed before anyone looks at it. */
#define VD_TYPE_JSON_STREAM (vd_json_stream_get_type ())
G_DECLARE_FINAL_TYPE (VdJsonStream, vd_json_stream, VD, JSON_STREAM, GObject)

/* Deeper than this is not a QMP or agent message; json-glib parses
 * recursively, so the limit is also what keeps the stack safe. */
#define VD_JSON_STREAM_MAX_DEPTH 64

/* Exactly one of @message and @error is set: @error for a line that is not a
 * well-formed JSON object (the stream stays open; the owner decides). */
typedef void (*VdJsonStreamMessageFunc) (JsonObject   *message,
                                         const GError *error,
                                         gpointer      user_data);
/* The stream closed by itself (EOF, I/O error, oversized message). */
typedef void (*VdJsonStreamClosedFunc)  (const GError *error,
                                         gpointer      user_data);

VdJsonStream *vd_json_stream_new                 (GIOStream               *stream,
                                                  gsize                    max_message_size);
void          vd_json_stream_set_max_message_size (VdJsonStream           *self,
                                                  gsize                    max_message_size);
void          vd_json_stream_start               (VdJsonStream            *self,
                                                  VdJsonStreamMessageFunc  message_func,
                                                  VdJsonStreamClosedFunc   closed_func,
                                                  gpointer                 user_data);
void          vd_json_stream_skip_to_delimiter   (VdJsonStream            *self);
void          vd_json_stream_send                (VdJsonStream            *self,
                                                  GBytes                  *data);
void          vd_json_stream_send_object         (VdJsonStream            *self,
                                                  gboolean                 delimiter,
                                                  JsonObject              *object);
void          vd_json_stream_close               (VdJsonStream            *self);
gboolean      vd_json_stream_is_closed           (VdJsonStream            *self);

/* Connect to a unix socket, bounded by @timeout_ms. */
void          vd_unix_connect_async              (const gchar             *socket_path,
                                                  guint                    timeout_ms,
                                                  GCancellable            *cancellable,
                                                  GAsyncReadyCallback      callback,
                                                  gpointer                 user_data);
GIOStream    *vd_unix_connect_finish             (GAsyncResult            *result,
                                                  GError                 **error);

/* Typed accessors for untrusted objects: a missing member or a wrong type is a
 * VIVARIUM_ERROR_PROTOCOL error, never a critical warning. */
const gchar  *vd_json_get_string                 (JsonObject              *object,
                                                  const gchar             *member,
                                                  GError                 **error);
gboolean      vd_json_get_int                    (JsonObject              *object,
                                                  const gchar             *member,
                                                  gint64                   min,
                                                  gint64                   max,
                                                  gint64                  *value,
                                                  GError                 **error);
gboolean      vd_json_get_bool                   (JsonObject              *object,
                                                  const gchar             *member,
                                                  gboolean                *value,
                                                  GError                 **error);
JsonObject   *vd_json_get_object                 (JsonObject              *object,
                                                  const gchar             *member,
                                                  GError                 **error);
gboolean      vd_json_node_get_int               (JsonNode                *node,
                                                  gint64                  *value);
GBytes       *vd_base64_decode_capped            (const gchar             *text,
                                                  gsize                    cap,
                                                  gboolean                *truncated,
                                                  GError                 **error);
gchar        *vd_json_escape_untrusted           (const gchar             *text);

G_END_DECLS
