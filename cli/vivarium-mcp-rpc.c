/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <gio/gio.h>

#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"
#include "vivarium-mcp-rpc.h"

/* --- lines ---------------------------------------------------------------- */

#define READ_CHUNK (64 * 1024)

struct _VmcpLineReader {
  gint        fd;
  gsize       line_max;
  GByteArray *buf;
  gboolean    discarding;  /* inside a line past line_max: drop to its newline */
  gboolean    eof;
};

VmcpLineReader *
vmcp_line_reader_new (gint fd, gsize line_max)
{
  VmcpLineReader *self = g_new0 (VmcpLineReader, 1);

  self->fd = fd;
  self->line_max = line_max;
  self->buf = g_byte_array_new ();
  return self;
}

void
vmcp_line_reader_free (VmcpLineReader *self)
{
  if (self == NULL)
    return;
  g_byte_array_unref (self->buf);
  g_free (self);
}

static VmcpLineStatus
take_line (VmcpLineReader *self, gsize end, gsize skip, gchar **line, gsize *len)
{
  gsize n = end;

  if (self->discarding || end > self->line_max) {
    self->discarding = FALSE;
    g_byte_array_remove_range (self->buf, 0, end + skip);
    return VMCP_LINE_TOO_LONG;
  }
  if (n > 0 && self->buf->data[n - 1] == '\r')
    n--;
  *line = g_strndup ((const gchar *) self->buf->data, n);
  *len = n;
  g_byte_array_remove_range (self->buf, 0, end + skip);
  return VMCP_LINE_OK;
}

static gboolean
fill (VmcpLineReader *self, GError **error)
{
  guint8 chunk[READ_CHUNK];
  gssize n;

  do
    n = read (self->fd, chunk, sizeof chunk);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    gint saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                 "Cannot read the client's messages: %s", g_strerror (saved));
    return FALSE;
  }
  if (n == 0)
    self->eof = TRUE;
  else
    g_byte_array_append (self->buf, chunk, (guint) n);
  return TRUE;
}

VmcpLineStatus
vmcp_line_reader_next (VmcpLineReader *self, gchar **line, gsize *len, GError **error)
{
  *line = NULL;
  *len = 0;
  for (;;) {
    const guint8 *nl = self->buf->len > 0 ? memchr (self->buf->data, '\n', self->buf->len) : NULL;

    if (nl != NULL)
      return take_line (self, (gsize) (nl - self->buf->data), 1, line, len);
    /* No newline yet: past the cap the bytes are dropped as they come, so
     * the buffer never holds more than a line's cap and one read. */
    if (self->buf->len > self->line_max) {
      self->discarding = TRUE;
      g_byte_array_set_size (self->buf, 0);
    }
    if (self->eof) {
      if (self->buf->len == 0 && !self->discarding)
        return VMCP_LINE_EOF;
      return take_line (self, self->buf->len, 0, line, len);
    }
    if (!fill (self, error))
      return VMCP_LINE_EOF;
  }
}

/* --- messages ------------------------------------------------------------- */

struct _VmcpServer {
  VmcpTools *tools;
  gboolean   initialized;   /* the client sent initialize */
};

VmcpServer *
vmcp_server_new (VmcpTools *tools)
{
  VmcpServer *self = g_new0 (VmcpServer, 1);

  self->tools = tools;
  return self;
}

void
vmcp_server_free (VmcpServer *self)
{
  g_free (self);
}

static gchar *
to_line (JsonNode *root)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();

  /* Not pretty: json-glib escapes control characters in strings, so the
   * message holds no newline of its own. */
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

static gchar *
reply (JsonNode *id, const gchar *member, JsonNode *value)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "jsonrpc");
  json_builder_add_string_value (b, "2.0");
  json_builder_set_member_name (b, "id");
  json_builder_add_value (b, id != NULL ? json_node_copy (id) : json_node_new (JSON_NODE_NULL));
  json_builder_set_member_name (b, member);
  json_builder_add_value (b, value);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return to_line (root);
}

static gchar *
reply_error (JsonNode *id, gint code, const gchar *message)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "code");
  json_builder_add_int_value (b, code);
  json_builder_set_member_name (b, "message");
  json_builder_add_string_value (b, message);
  json_builder_end_object (b);
  return reply (id, "error", json_builder_get_root (b));
}

gchar *
vmcp_server_reply_too_long (VmcpServer *self)
{
  g_autofree gchar *message = g_strdup_printf ("The message is longer than %u bytes; it was dropped",
                                               (guint) VMCP_LINE_MAX);

  return reply_error (NULL, VMCP_RPC_INVALID_REQUEST, message);
}

static JsonNode *
parse_message (const gchar *line, gsize len, gchar **why)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  g_autoptr(GError) local_error = NULL;

  if (!g_utf8_validate (line, (gssize) len, NULL) || memchr (line, '\0', len) != NULL) {
    *why = g_strdup ("The message is not UTF-8 text");
    return NULL;
  }
  if (!vivarium_json_depth_within (line, len, VMCP_JSON_DEPTH_MAX)) {
    *why = g_strdup_printf ("The message is nested deeper than %u levels", VMCP_JSON_DEPTH_MAX);
    return NULL;
  }
  /* json-glib would make a string that is not UTF-8 of it, and the answer
   * that names it would not be UTF-8 either (tests/fuzz). */
  if (!vivarium_json_escapes_valid (line, len)) {
    *why = g_strdup ("The message holds a \\u escape that is not a character");
    return NULL;
  }
  if (!json_parser_load_from_data (parser, line, (gssize) len, &local_error)) {
    *why = g_strdup_printf ("The message is not JSON: %s", local_error->message);
    return NULL;
  }
  if (json_parser_get_root (parser) == NULL) {
    *why = g_strdup ("The message is empty");
    return NULL;
  }
  return json_node_ref (json_parser_get_root (parser));
}

static gboolean
is_string (JsonNode *node, const gchar *expected)
{
  return node != NULL && JSON_NODE_HOLDS_VALUE (node) &&
         json_node_get_value_type (node) == G_TYPE_STRING &&
         g_strcmp0 (json_node_get_string (node), expected) == 0;
}

static gboolean
id_is_valid (JsonNode *id)
{
  if (JSON_NODE_HOLDS_VALUE (id)) {
    GType t = json_node_get_value_type (id);
    return t == G_TYPE_STRING || t == G_TYPE_INT64;
  }
  return FALSE;
}

static JsonNode *
initialize_result (JsonObject *params)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  /* One revision is spoken; a client asking for another gets this one and
   * decides (the protocol's version negotiation). */
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "protocolVersion");
  json_builder_add_string_value (b, VMCP_PROTOCOL_VERSION);
  json_builder_set_member_name (b, "capabilities");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "tools");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "listChanged");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_end_object (b);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "serverInfo");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, "vivarium-mcp");
  json_builder_set_member_name (b, "title");
  json_builder_add_string_value (b, "Vivarium");
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, PACKAGE_VERSION);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "instructions");
  json_builder_add_string_value (b,
    "vm_task hands work to a model that tries it in a real, throwaway Linux machine and "
    "returns a report signed by the Vivarium daemon. Trust the report's facts only when "
    "identity.signature_verified is true. Trust its verification verdict only when "
    "report.verification.by is \"caller\": then the command that was re-run in a fresh machine "
    "is the one you gave as `verify`. A verdict with by \"worker\" comes from the worker's own "
    "command and proves only what the worker chose to check. The worker's summary is only its claim.");
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
empty_object (void)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_take_object (node, json_object_new ());
  return node;
}

static gchar *
handle_tools_call (VmcpServer *self, JsonNode *id, JsonObject *params)
{
  JsonNode *name = params != NULL ? json_object_get_member (params, "name") : NULL;
  JsonNode *args = params != NULL ? json_object_get_member (params, "arguments") : NULL;
  g_autofree gchar *why = NULL;
  JsonNode *result;

  if (name == NULL || !JSON_NODE_HOLDS_VALUE (name) ||
      json_node_get_value_type (name) != G_TYPE_STRING)
    return reply_error (id, VMCP_RPC_INVALID_PARAMS, "tools/call needs a tool name");
  if (args != NULL && !JSON_NODE_HOLDS_OBJECT (args) && !JSON_NODE_HOLDS_NULL (args))
    return reply_error (id, VMCP_RPC_INVALID_PARAMS, "A tool's arguments are an object");
  result = vmcp_tools_call (self->tools, json_node_get_string (name),
                            args != NULL && JSON_NODE_HOLDS_OBJECT (args) ? json_node_get_object (args) : NULL,
                            &why);
  if (result == NULL)
    return reply_error (id, VMCP_RPC_INVALID_PARAMS, why);
  return reply (id, "result", result);
}

static gchar *
handle_request (VmcpServer *self, JsonNode *id, const gchar *method, JsonObject *params)
{
  if (g_str_equal (method, "initialize")) {
    self->initialized = TRUE;
    return reply (id, "result", initialize_result (params));
  }
  if (g_str_equal (method, "ping"))
    return reply (id, "result", empty_object ());
  if (!self->initialized)
    return reply_error (id, VMCP_RPC_INVALID_REQUEST, "The session is not initialized: send initialize first");
  if (g_str_equal (method, "tools/list"))
    return reply (id, "result", vmcp_tools_list (self->tools));
  if (g_str_equal (method, "tools/call"))
    return handle_tools_call (self, id, params);
  {
    g_autofree gchar *shown = g_strescape (method, NULL);
    g_autofree gchar *message = g_strdup_printf ("Unknown method “%.200s”", shown);
    return reply_error (id, VMCP_RPC_METHOD_NOT_FOUND, message);
  }
}

gchar *
vmcp_server_handle_line (VmcpServer *self, const gchar *line, gsize len)
{
  g_autofree gchar *why = NULL;
  g_autoptr(JsonNode) root = parse_message (line, len, &why);
  JsonObject *msg;
  JsonNode *id, *method, *params;

  if (root == NULL)
    return reply_error (NULL, VMCP_RPC_PARSE_ERROR, why);
  /* 2025-06-18 dropped JSON-RPC batches. */
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return reply_error (NULL, VMCP_RPC_INVALID_REQUEST, "A message is one JSON-RPC object (no batches)");
  msg = json_node_get_object (root);
  id = json_object_get_member (msg, "id");
  method = json_object_get_member (msg, "method");
  params = json_object_get_member (msg, "params");
  if (!is_string (json_object_get_member (msg, "jsonrpc"), "2.0"))
    return reply_error (id != NULL && id_is_valid (id) ? id : NULL, VMCP_RPC_INVALID_REQUEST,
                        "The message is not JSON-RPC 2.0");
  if (method == NULL) {
    /* A response: this server sends no requests, so there is nothing to
     * match it with, and a response is never answered. */
    return NULL;
  }
  if (!JSON_NODE_HOLDS_VALUE (method) || json_node_get_value_type (method) != G_TYPE_STRING)
    return reply_error (id != NULL && id_is_valid (id) ? id : NULL, VMCP_RPC_INVALID_REQUEST,
                        "The method is not a string");
  if (params != NULL && !JSON_NODE_HOLDS_OBJECT (params))
    return reply_error (id != NULL && id_is_valid (id) ? id : NULL, VMCP_RPC_INVALID_PARAMS,
                        "The params are not an object");
  if (id == NULL)
    return NULL;  /* a notification: initialized, cancelled, … need no answer */
  if (!id_is_valid (id))
    return reply_error (NULL, VMCP_RPC_INVALID_REQUEST, "A request's id is a string or an integer");
  return handle_request (self, id, json_node_get_string (method),
                         params != NULL ? json_node_get_object (params) : NULL);
}

/* --- the loop ------------------------------------------------------------- */

static gboolean
write_line (gint fd, const gchar *text, GError **error)
{
  g_autofree gchar *line = g_strconcat (text, "\n", NULL);
  gsize len = strlen (line), done = 0;

  while (done < len) {
    gssize n = write (fd, line + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      gint saved = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                   "Cannot write to the client: %s", g_strerror (saved));
      return FALSE;
    }
    done += (gsize) n;
  }
  return TRUE;
}

gboolean
vmcp_server_run (VmcpServer *self, gint in_fd, gint out_fd, GError **error)
{
  g_autoptr(VmcpLineReader) reader = vmcp_line_reader_new (in_fd, VMCP_LINE_MAX);

  for (;;) {
    g_autofree gchar *line = NULL;
    g_autofree gchar *answer = NULL;
    gsize len = 0;
    VmcpLineStatus status = vmcp_line_reader_next (reader, &line, &len, error);

    if (status == VMCP_LINE_EOF)
      return error == NULL || *error == NULL;
    if (status == VMCP_LINE_TOO_LONG)
      answer = vmcp_server_reply_too_long (self);
    else if (len == 0)
      continue;  /* a blank line carries no message */
    else
      answer = vmcp_server_handle_line (self, line, len);
    if (answer != NULL && !write_line (out_fd, answer, error))
      return FALSE;
  }
}
