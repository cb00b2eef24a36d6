/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-json-stream"

#include "config.h"

#include <string.h>
#include <sys/un.h>
#include <gio/gunixsocketaddress.h>

#include "vivarium-error.h"
#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"
#include "vivarium-names.h"
#include "vd-deadline.h"
#include "vd-json-stream.h"

#define VD_JSON_STREAM_READ_CHUNK (64 * 1024)
/* What we quote of a peer's text in an error message. */
#define VD_JSON_ESCAPE_CAP 512
/* The agent protocol's reset byte: it never occurs in UTF-8. */
#define VD_JSON_DELIMITER 0xff
/* After a message this long the buffer is made anew (vd_json_stream_consume). */
#define VD_JSON_STREAM_KEEP_BYTES (1024 * 1024)

struct _VdJsonStream {
  GObject                  parent_instance;
  GIOStream               *stream;
  GCancellable            *cancellable;
  GByteArray              *buffer;
  guint8                  *chunk;
  gsize                    max_message_size;
  GQueue                   outgoing;        /* of GBytes, head being written */
  gboolean                 reading;
  gboolean                 started;
  gboolean                 skipping;
  gboolean                 closed;
  gboolean                 stream_closed;
  VdJsonStreamMessageFunc  message_func;
  VdJsonStreamClosedFunc   closed_func;
  gpointer                 user_data;
};

G_DEFINE_TYPE (VdJsonStream, vd_json_stream, G_TYPE_OBJECT)

static void vd_json_stream_read_next (VdJsonStream *self);
static void vd_json_stream_write_next (VdJsonStream *self);

gchar *
vd_json_escape_untrusted (const gchar *text)
{
  if (text == NULL)
    return g_strdup ("(null)");
  return vivarium_escape_untrusted (text, strlen (text), VD_JSON_ESCAPE_CAP, NULL);
}

static void
vd_json_stream_on_io_closed (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdJsonStream) self = VD_JSON_STREAM (user_data);
  g_autoptr(GError) error = NULL;

  if (!g_io_stream_close_finish (G_IO_STREAM (source), res, &error))
    g_debug ("closing the stream: %s", error->message);
}

/* The underlying stream is closed only once no operation is outstanding on
 * it, since GIO refuses to close a stream with a pending read or write. */
static void
vd_json_stream_maybe_close_io (VdJsonStream *self)
{
  if (!self->closed || self->stream_closed || self->reading)
    return;
  if (!g_queue_is_empty (&self->outgoing))
    return;
  self->stream_closed = TRUE;
  g_io_stream_close_async (self->stream, G_PRIORITY_DEFAULT, NULL,
                           vd_json_stream_on_io_closed, g_object_ref (self));
}

void
vd_json_stream_close (VdJsonStream *self)
{
  g_return_if_fail (VD_IS_JSON_STREAM (self));

  if (self->closed)
    return;
  self->closed = TRUE;
  self->message_func = NULL;
  self->closed_func = NULL;
  self->user_data = NULL;
  g_byte_array_set_size (self->buffer, 0);
  g_cancellable_cancel (self->cancellable);
  vd_json_stream_maybe_close_io (self);
}

gboolean
vd_json_stream_is_closed (VdJsonStream *self)
{
  g_return_val_if_fail (VD_IS_JSON_STREAM (self), TRUE);
  return self->closed;
}

/* Closed from our side because of what the peer did: tell the owner once. */
static void
vd_json_stream_fail (VdJsonStream *self, GError *error)
{
  VdJsonStreamClosedFunc func = self->closed_func;
  gpointer user_data = self->user_data;

  if (self->closed)
    return;
  vd_json_stream_close (self);
  if (func != NULL)
    func (error, user_data);
}

/* json-glib wraps integers that do not fit in 64 bits (2^64 reads as 0), so
 * a peer could make a huge number look small: refuse it instead. */
static gboolean
vd_json_check_integer (const gchar *text, gsize len, gsize *used, GError **error)
{
  gsize n = 0;
  gboolean integral = TRUE;
  g_autofree gchar *token = NULL;

  while (n < len && (g_ascii_isdigit (text[n]) || strchr ("+-.eE", text[n]) != NULL)) {
    if (strchr (".eE", text[n]) != NULL)
      integral = FALSE;
    n++;
  }
  *used = n;
  if (!integral)
    return TRUE;
  token = g_strndup (text, n);
  if (!g_ascii_string_to_signed (token, 10, G_MININT64, G_MAXINT64, NULL, NULL)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Message holds an integer out of range");
    return FALSE;
  }
  return TRUE;
}

/* What json-glib does not check for us: nesting depth (its parser recurses;
 * the one count in common/) and integer range. */
static gboolean
vd_json_prescan (const gchar *text, gsize len, GError **error)
{
  gboolean in_string = FALSE;
  gboolean escaped = FALSE;

  if (!vivarium_json_depth_within (text, len, VD_JSON_STREAM_MAX_DEPTH)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Message nested deeper than %u levels", VD_JSON_STREAM_MAX_DEPTH);
    return FALSE;
  }
  for (gsize i = 0; i < len; i++) {
    gchar c = text[i];
    if (in_string) {
      if (escaped)
        escaped = FALSE;
      else if (c == '\\')
        escaped = TRUE;
      else if (c == '"')
        in_string = FALSE;
      continue;
    }
    if (c == '"') {
      in_string = TRUE;
    } else if (c == '-' || g_ascii_isdigit (c)) {
      gsize used = 0;
      if (!vd_json_check_integer (text + i, len - i, &used, error))
        return FALSE;
      i += used - 1;
    }
  }
  return TRUE;
}

static JsonObject *
vd_json_parse_line (const gchar *line, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) error_local = NULL;
  JsonNode *root;

  if (memchr (line, '\0', len) != NULL) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Message contains a NUL byte");
    return NULL;
  }
  if (!g_utf8_validate_len (line, len, NULL)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Message is not valid UTF-8");
    return NULL;
  }
  /* "\ud800" is ASCII, but json-glib makes a string of it that is not
   * UTF-8 (tests/fuzz). */
  if (!vivarium_json_escapes_valid (line, len)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Message holds a \\u escape that is not a character");
    return NULL;
  }
  if (!vd_json_prescan (line, len, error))
    return NULL;

  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, line, (gssize) len, &error_local)) {
    g_autofree gchar *msg = vd_json_escape_untrusted (error_local->message);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Malformed JSON: %s", msg);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Message is not a JSON object");
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

static gboolean
vd_json_line_is_blank (const gchar *line, gsize len)
{
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_isspace (line[i]))
      return FALSE;
  }
  return TRUE;
}

/* Drops the first @len bytes of the buffer. A GByteArray keeps the
 * allocation of the longest content it ever held: after a guest-exec reply
 * carrying the agent's 16 MiB of output (22 MiB of base64), the session
 * would hold that much for as long as it runs. After a long message what
 * is left moves into a new, small array and the big one is freed. */
static void
vd_json_stream_consume (VdJsonStream *self, gsize len)
{
  GByteArray *rest;

  if (len < VD_JSON_STREAM_KEEP_BYTES) {
    g_byte_array_remove_range (self->buffer, 0, (guint) len);
    return;
  }
  rest = g_byte_array_sized_new (self->buffer->len - (guint) len);
  g_byte_array_append (rest, self->buffer->data + len, self->buffer->len - (guint) len);
  g_byte_array_unref (self->buffer);
  self->buffer = rest;
}

/* Drops everything up to and including the next delimiter byte; FALSE when
 * the buffer ran out first (all of it was discarded). */
static gboolean
vd_json_stream_skip_buffer (VdJsonStream *self)
{
  const guint8 *hit = NULL;

  if (self->buffer->len > 0)
    hit = memchr (self->buffer->data, VD_JSON_DELIMITER, self->buffer->len);
  if (hit == NULL) {
    vd_json_stream_consume (self, self->buffer->len);
    return FALSE;
  }
  vd_json_stream_consume (self, (gsize) (hit - self->buffer->data) + 1);
  self->skipping = FALSE;
  return TRUE;
}

static void
vd_json_stream_dispatch_line (VdJsonStream *self, const gchar *line, gsize len)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) message = NULL;

  if (vd_json_line_is_blank (line, len))
    return;
  message = vd_json_parse_line (line, len, &error);
  if (self->message_func != NULL)
    self->message_func (message, error, self->user_data);
}

/* Hands out every complete line in the buffer. The owner may close the
 * stream or ask for a skip from inside its callback, so the state is
 * re-read after each message. */
static void
vd_json_stream_process (VdJsonStream *self)
{
  g_autoptr(VdJsonStream) keep = g_object_ref (self);

  while (!self->closed) {
    const guint8 *nl = NULL;
    g_autofree gchar *line = NULL;
    gsize len;

    if (self->skipping && !vd_json_stream_skip_buffer (self))
      return;
    if (self->buffer->len > 0)
      nl = memchr (self->buffer->data, '\n', self->buffer->len);
    if (nl == NULL) {
      if (self->buffer->len > self->max_message_size) {
        g_autoptr(GError) error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                               "Message larger than %" G_GSIZE_FORMAT " bytes",
                                               self->max_message_size);
        vd_json_stream_fail (self, error);
      }
      return;
    }
    len = (gsize) (nl - self->buffer->data);
    if (len > self->max_message_size) {
      g_autoptr(GError) error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                                             "Message larger than %" G_GSIZE_FORMAT " bytes",
                                             self->max_message_size);
      vd_json_stream_fail (self, error);
      return;
    }
    line = g_strndup ((const gchar *) self->buffer->data, len);
    vd_json_stream_consume (self, len + 1);
    vd_json_stream_dispatch_line (self, line, len);
  }
}

static void
vd_json_stream_on_read (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdJsonStream) self = VD_JSON_STREAM (user_data);
  g_autoptr(GError) error = NULL;
  gssize n;

  self->reading = FALSE;
  n = g_input_stream_read_finish (G_INPUT_STREAM (source), res, &error);
  if (self->closed) {
    vd_json_stream_maybe_close_io (self);
    return;
  }
  if (n < 0) {
    g_autoptr(GError) error_io = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                              "Reading from the peer failed: %s",
                                              error->message);
    vd_json_stream_fail (self, error_io);
    return;
  }
  if (n == 0) {
    g_autoptr(GError) error_eof = NULL;
    if (self->buffer->len > 0 && !self->skipping)
      error_eof = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                       "The peer closed the connection in the middle of a message");
    else
      error_eof = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                       "The peer closed the connection");
    vd_json_stream_fail (self, error_eof);
    return;
  }
  if (self->skipping) {
    const guint8 *hit = memchr (self->chunk, VD_JSON_DELIMITER, (gsize) n);
    /* Discarded bytes never reach the buffer, so skipping costs no memory. */
    if (hit != NULL) {
      gsize off = (gsize) (hit - self->chunk) + 1;
      self->skipping = FALSE;
      g_byte_array_set_size (self->buffer, 0);
      g_byte_array_append (self->buffer, self->chunk + off, (guint) ((gsize) n - off));
    }
  } else {
    g_byte_array_append (self->buffer, self->chunk, (guint) n);
  }
  vd_json_stream_process (self);
  vd_json_stream_read_next (self);
}

static void
vd_json_stream_read_next (VdJsonStream *self)
{
  if (self->closed || self->reading)
    return;
  self->reading = TRUE;
  g_input_stream_read_async (g_io_stream_get_input_stream (self->stream),
                             self->chunk, VD_JSON_STREAM_READ_CHUNK,
                             G_PRIORITY_DEFAULT, self->cancellable,
                             vd_json_stream_on_read, g_object_ref (self));
}

void
vd_json_stream_start (VdJsonStream *self,
                      VdJsonStreamMessageFunc message_func,
                      VdJsonStreamClosedFunc closed_func,
                      gpointer user_data)
{
  g_return_if_fail (VD_IS_JSON_STREAM (self));
  g_return_if_fail (!self->started);

  self->started = TRUE;
  self->message_func = message_func;
  self->closed_func = closed_func;
  self->user_data = user_data;
  vd_json_stream_read_next (self);
}

void
vd_json_stream_skip_to_delimiter (VdJsonStream *self)
{
  g_return_if_fail (VD_IS_JSON_STREAM (self));
  /* Outside a callback the buffer holds at most a partial line; the next
   * read applies the skip to it, in order. */
  self->skipping = TRUE;
}

static void
vd_json_stream_on_written (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdJsonStream) self = VD_JSON_STREAM (user_data);
  g_autoptr(GError) error = NULL;
  GBytes *done = g_queue_pop_head (&self->outgoing);

  g_bytes_unref (done);
  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), res, NULL, &error)) {
    if (!self->closed) {
      g_autoptr(GError) error_io = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                                "Writing to the peer failed: %s",
                                                error->message);
      vd_json_stream_fail (self, error_io);
    }
  }
  if (self->closed) {
    g_queue_clear_full (&self->outgoing, (GDestroyNotify) g_bytes_unref);
    vd_json_stream_maybe_close_io (self);
    return;
  }
  vd_json_stream_write_next (self);
}

static void
vd_json_stream_write_next (VdJsonStream *self)
{
  GBytes *data = g_queue_peek_head (&self->outgoing);
  gsize size = 0;
  gconstpointer buf;

  if (data == NULL)
    return;
  buf = g_bytes_get_data (data, &size);
  g_output_stream_write_all_async (g_io_stream_get_output_stream (self->stream),
                                   buf, size, G_PRIORITY_DEFAULT, self->cancellable,
                                   vd_json_stream_on_written, g_object_ref (self));
}

void
vd_json_stream_send (VdJsonStream *self, GBytes *data)
{
  gboolean idle;

  g_return_if_fail (VD_IS_JSON_STREAM (self));
  g_return_if_fail (data != NULL);

  if (self->closed)
    return;
  idle = g_queue_is_empty (&self->outgoing);
  g_queue_push_tail (&self->outgoing, g_bytes_ref (data));
  if (idle)
    vd_json_stream_write_next (self);
}

void
vd_json_stream_send_object (VdJsonStream *self, gboolean delimiter, JsonObject *object)
{
  g_autoptr(JsonNode) node = json_node_init_object (json_node_alloc (), object);
  g_autofree gchar *text = json_to_string (node, FALSE);
  GString *line = g_string_new (NULL);
  g_autoptr(GBytes) data = NULL;

  if (delimiter)
    g_string_append_c (line, (gchar) VD_JSON_DELIMITER);
  g_string_append (line, text);
  g_string_append_c (line, '\n');
  data = g_string_free_to_bytes (line);
  vd_json_stream_send (self, data);
}

void
vd_json_stream_set_max_message_size (VdJsonStream *self, gsize max_message_size)
{
  g_return_if_fail (VD_IS_JSON_STREAM (self));
  self->max_message_size = MAX (max_message_size, 1);
}

static void
vd_json_stream_finalize (GObject *object)
{
  VdJsonStream *self = VD_JSON_STREAM (object);

  g_queue_clear_full (&self->outgoing, (GDestroyNotify) g_bytes_unref);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->stream);
  g_byte_array_unref (self->buffer);
  g_free (self->chunk);
  G_OBJECT_CLASS (vd_json_stream_parent_class)->finalize (object);
}

static void
vd_json_stream_dispose (GObject *object)
{
  VdJsonStream *self = VD_JSON_STREAM (object);

  /* Reads and writes hold a reference, so by now none is outstanding. */
  if (!self->stream_closed && self->stream != NULL) {
    self->closed = TRUE;
    self->stream_closed = TRUE;
    g_io_stream_close (self->stream, NULL, NULL);
  }
  G_OBJECT_CLASS (vd_json_stream_parent_class)->dispose (object);
}

static void
vd_json_stream_class_init (VdJsonStreamClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vd_json_stream_dispose;
  object_class->finalize = vd_json_stream_finalize;
}

static void
vd_json_stream_init (VdJsonStream *self)
{
  self->cancellable = g_cancellable_new ();
  self->buffer = g_byte_array_new ();
  self->chunk = g_malloc (VD_JSON_STREAM_READ_CHUNK);
  g_queue_init (&self->outgoing);
}

VdJsonStream *
vd_json_stream_new (GIOStream *stream, gsize max_message_size)
{
  VdJsonStream *self;

  g_return_val_if_fail (G_IS_IO_STREAM (stream), NULL);

  self = g_object_new (VD_TYPE_JSON_STREAM, NULL);
  self->stream = g_object_ref (stream);
  vd_json_stream_set_max_message_size (self, max_message_size);
  return self;
}

/* Connecting ------------------------------------------------------------- */

typedef struct {
  GCancellable *connect_cancellable;  /* ours: cancelled on timeout or by the caller */
  VdDeadline   *deadline;
  gboolean      timed_out;
} VdConnectData;

static void
vd_connect_data_free (VdConnectData *data)
{
  vd_deadline_free (data->deadline);
  g_clear_object (&data->connect_cancellable);
  g_free (data);
}

/* Either end stops the connect; its callback tells them apart. */
static void
vd_connect_on_deadline (gint code, gpointer user_data)
{
  VdConnectData *data = user_data;

  data->timed_out = code == VIVARIUM_ERROR_TIMED_OUT;
  g_cancellable_cancel (data->connect_cancellable);
}

static void
vd_connect_on_connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdConnectData *data = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketConnection) conn = NULL;

  conn = g_socket_client_connect_finish (G_SOCKET_CLIENT (source), res, &error);
  if (conn != NULL) {
    g_task_return_pointer (task, g_steal_pointer (&conn), g_object_unref);
    return;
  }
  if (data->timed_out) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                             "Timed out connecting to the socket");
    return;
  }
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                             "Connecting was cancelled");
    return;
  }
  g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                           "Cannot connect: %s", error->message);
}

void
vd_unix_connect_async (const gchar *socket_path,
                       guint timeout_ms,
                       GCancellable *cancellable,
                       GAsyncReadyCallback callback,
                       gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketAddress) address = NULL;
  VdConnectData *data = g_new0 (VdConnectData, 1);

  g_task_set_source_tag (task, vd_unix_connect_async);
  g_task_set_check_cancellable (task, FALSE);
  g_task_set_task_data (task, data, (GDestroyNotify) vd_connect_data_free);

  if (socket_path == NULL || socket_path[0] == '\0' ||
      strlen (socket_path) >= sizeof (((struct sockaddr_un *) NULL)->sun_path)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                             "Invalid socket path");
    return;
  }
  data->connect_cancellable = g_cancellable_new ();
  data->deadline = vd_deadline_new (timeout_ms, cancellable, g_task_get_context (task),
                                    vd_connect_on_deadline, data);
  address = g_unix_socket_address_new (socket_path);
  g_socket_client_connect_async (client, G_SOCKET_CONNECTABLE (address),
                                 data->connect_cancellable,
                                 vd_connect_on_connected, g_steal_pointer (&task));
}

GIOStream *
vd_unix_connect_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* Untrusted accessors ---------------------------------------------------- */

static JsonNode *
vd_json_get_member (JsonObject *object, const gchar *member, GError **error)
{
  JsonNode *node = json_object_get_member (object, member);

  if (node == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is missing", member);
    return NULL;
  }
  return node;
}

const gchar *
vd_json_get_string (JsonObject *object, const gchar *member, GError **error)
{
  JsonNode *node = vd_json_get_member (object, member, error);

  if (node == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is not a string", member);
    return NULL;
  }
  return json_node_get_string (node);
}

gboolean
vd_json_node_get_int (JsonNode *node, gint64 *value)
{
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_INT64)
    return FALSE;
  *value = json_node_get_int (node);
  return TRUE;
}

gboolean
vd_json_get_int (JsonObject *object, const gchar *member,
                 gint64 min, gint64 max, gint64 *value, GError **error)
{
  JsonNode *node = vd_json_get_member (object, member, error);
  gint64 v = 0;

  if (node == NULL)
    return FALSE;
  if (!vd_json_node_get_int (node, &v)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is not an integer", member);
    return FALSE;
  }
  if (v < min || v > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is out of range", member);
    return FALSE;
  }
  *value = v;
  return TRUE;
}

gboolean
vd_json_get_bool (JsonObject *object, const gchar *member, gboolean *value, GError **error)
{
  JsonNode *node = vd_json_get_member (object, member, error);

  if (node == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is not a boolean", member);
    return FALSE;
  }
  *value = json_node_get_boolean (node);
  return TRUE;
}

JsonObject *
vd_json_get_object (JsonObject *object, const gchar *member, GError **error)
{
  JsonNode *node = vd_json_get_member (object, member, error);

  if (node == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "Member \"%s\" is not an object", member);
    return NULL;
  }
  return json_node_get_object (node);
}

static gboolean
vd_base64_validate (const gchar *text, gsize len)
{
  gsize pad = 0;

  if (len % 4 != 0)
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    gchar c = text[i];
    if (c == '=') {
      /* Padding only at the very end, at most two. */
      if (i < len - 2)
        return FALSE;
      pad++;
      continue;
    }
    if (pad > 0)
      return FALSE;
    if (!g_ascii_isalnum (c) && c != '+' && c != '/')
      return FALSE;
  }
  return TRUE;
}

/* g_base64_decode() accepts anything; the guest's text is checked first,
 * and only as much of it as the cap needs is decoded. */
GBytes *
vd_base64_decode_capped (const gchar *text, gsize cap, gboolean *truncated, GError **error)
{
  gsize len = strlen (text);
  gsize take = len;
  gsize out_len = 0;
  g_autofree gchar *prefix = NULL;
  guchar *out;

  if (truncated != NULL)
    *truncated = FALSE;
  if (!vd_base64_validate (text, len)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                         "Invalid base64 data");
    return NULL;
  }
  if (len == 0)
    return g_bytes_new (NULL, 0);
  if (cap / 3 < len / 4)
    take = (cap / 3 + 1) * 4;
  prefix = g_strndup (text, take);
  out = g_base64_decode (prefix, &out_len);
  if (out_len > cap) {
    out_len = cap;
    if (truncated != NULL)
      *truncated = TRUE;
  }
  return g_bytes_new_take (out, out_len);
}
