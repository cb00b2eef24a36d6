/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium-mcp's side of the assistant's connection (cli/vivarium-mcp-rpc.c,
 * -schema.c, -tools.c): the line framing, the JSON-RPC handling and each
 * tool's argument checks. The input is what the client writes on stdin,
 * run through the server's own loop (vmcp_server_run) on a memfd; the
 * daemon is out of reach (the system bus address points nowhere), so a
 * call that passes its checks ends in a typed "cannot reach" result.
 *
 * Checked: every reply is one line of a JSON-RPC 2.0 object with exactly
 * one of "result" and "error" and an id that is null, a string or an
 * integer; at most one reply a line; the line reader, with a cap the
 * input picks, gives back exactly the lines of a reference split (without a
 * trailing '\r'), and a line past the cap as TOO_LONG; and arguments a tool's
 * check accepts hold only the members of its input schema and every
 * required one. */

#include "config.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "vivarium-json-depth.h"
#include "vivarium-mcp-rpc.h"

static VmcpSchema *schema;
static VmcpManifest *manifest;
static VmcpDaemon *daemon_;
static VmcpTools *tools;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;

  fuzz_setup ();
  /* Never the machine's daemon: nothing answers at this address. */
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/vivarium-fuzz-bus", TRUE);
  schema = vmcp_schema_load (&error);
  g_assert_no_error (error);
  manifest = vmcp_manifest_load (NULL, NULL, vmcp_schema_tool_names (schema), &error);
  g_assert_no_error (error);
  daemon_ = vmcp_daemon_new (NULL);
  tools = vmcp_tools_new (schema, manifest, daemon_);
  return 0;
}

static gint
memfd_with (const uint8_t *data, size_t size)
{
  gint fd = memfd_create ("fuzz-mcp", MFD_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, data, size), ==, (gssize) size);
  g_assert_cmpint (lseek (fd, 0, SEEK_SET), ==, 0);
  return fd;
}

static void
check_reply (const gchar *line)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;
  JsonNode *id;

  g_assert_true (g_utf8_validate (line, -1, NULL));
  g_assert_true (json_parser_load_from_data (parser, line, -1, NULL));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  o = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (o, "jsonrpc"), ==, "2.0");
  g_assert_true (json_object_has_member (o, "result") != json_object_has_member (o, "error"));
  g_assert_cmpuint (json_object_get_size (o), ==, 3);
  id = json_object_get_member (o, "id");
  g_assert_nonnull (id);
  g_assert_true (JSON_NODE_HOLDS_NULL (id) ||
                 (JSON_NODE_HOLDS_VALUE (id) && (json_node_get_value_type (id) == G_TYPE_STRING ||
                                                 json_node_get_value_type (id) == G_TYPE_INT64)));
  if (json_object_has_member (o, "error")) {
    JsonObject *e = json_object_get_object_member (o, "error");
    g_assert_nonnull (e);
    g_assert_true (json_object_has_member (e, "code") && json_object_has_member (e, "message"));
  }
}

/* The server's own loop over the input; its output read back. */
static void
check_server (const uint8_t *data, size_t size)
{
  g_autoptr(VmcpServer) server = vmcp_server_new (tools);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *out = NULL;
  g_auto(GStrv) replies = NULL;
  gint in_fd = memfd_with (data, size);
  gint out_fd = memfd_create ("fuzz-mcp-out", MFD_CLOEXEC);
  off_t out_len;
  guint lines = 1, n_replies = 0;

  g_assert_cmpint (out_fd, >=, 0);
  g_assert_true (vmcp_server_run (server, in_fd, out_fd, &error));
  g_assert_no_error (error);
  out_len = lseek (out_fd, 0, SEEK_END);
  out = g_malloc0 ((gsize) out_len + 1);
  g_assert_cmpint (pread (out_fd, out, (size_t) out_len, 0), ==, out_len);
  close (in_fd);
  close (out_fd);
  for (size_t i = 0; i < size; i++)
    lines += data[i] == '\n';
  g_assert_true (out_len == 0 || out[out_len - 1] == '\n');
  g_assert_null (memchr (out, '\0', (size_t) out_len));
  replies = g_strsplit (out, "\n", -1);
  for (off_t i = 0; i < out_len; i++)
    n_replies += out[i] == '\n';
  g_assert_cmpuint (n_replies, <=, lines);
  for (guint i = 0; replies[i] != NULL && replies[i][0] != '\0'; i++)
    check_reply (replies[i]);
}

/* The reader with a small cap, against a split of the same bytes. */
static void
check_reader (const uint8_t *data, size_t size, gsize cap)
{
  gint fd = memfd_with (data, size);
  g_autoptr(VmcpLineReader) reader = vmcp_line_reader_new (fd, cap);
  gsize at = 0;

  for (;;) {
    g_autofree gchar *line = NULL;
    g_autoptr(GError) error = NULL;
    gsize len = 0, want;
    const uint8_t *nl;
    VmcpLineStatus status = vmcp_line_reader_next (reader, &line, &len, &error);

    g_assert_no_error (error);
    if (at == size) {
      g_assert_cmpint (status, ==, VMCP_LINE_EOF);
      break;
    }
    nl = memchr (data + at, '\n', size - at);
    want = nl != NULL ? (gsize) (nl - (data + at)) : size - at;
    if (want > cap) {
      g_assert_cmpint (status, ==, VMCP_LINE_TOO_LONG);
    } else {
      gsize trimmed = want > 0 && data[at + want - 1] == '\r' ? want - 1 : want;
      g_assert_cmpint (status, ==, VMCP_LINE_OK);
      g_assert_cmpuint (len, ==, trimmed);
      g_assert_true (memcmp (line, data + at, len) == 0 || memchr (data + at, '\0', len) != NULL);
    }
    at += want + (nl != NULL ? 1 : 0);
  }
  close (fd);
}

/* Accepted arguments fit the tool's input schema. */
static void
check_arguments (JsonObject *arguments)
{
  const gchar * const *names = vmcp_schema_tool_names (schema);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) definition = NULL;
    JsonObject *input, *properties;
    JsonArray *required;
    g_autoptr(GList) members = NULL;

    if (!vmcp_schema_check_arguments (schema, names[i], arguments, NULL, &error)) {
      g_assert_nonnull (error);
      g_assert_true (g_utf8_validate (error->message, -1, NULL));
      continue;
    }
    definition = vmcp_schema_tool_definition (schema, names[i]);
    input = json_object_get_object_member (json_node_get_object (definition), "inputSchema");
    properties = json_object_get_object_member (input, "properties");
    members = json_object_get_members (arguments);
    for (GList *l = members; l != NULL; l = l->next)
      g_assert_true (json_object_has_member (properties, l->data));
    required = json_object_has_member (input, "required") ? json_object_get_array_member (input, "required") : NULL;
    for (guint j = 0; required != NULL && j < json_array_get_length (required); j++)
      g_assert_true (json_object_has_member (arguments, json_array_get_string_element (required, j)));
  }
}

static void
check_lines_arguments (const uint8_t *data, size_t size)
{
  g_autofree gchar *text = fuzz_string (data, size);
  g_auto(GStrv) lines = g_strsplit (text, "\n", 16);

  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonParser) parser = json_parser_new ();
    JsonObject *o, *params;
    /* The server's own bounds come first (depth 32). */
    if (!g_utf8_validate (lines[i], -1, NULL) ||
        !vivarium_json_depth_within (lines[i], strlen (lines[i]), VMCP_JSON_DEPTH_MAX) ||
        !json_parser_load_from_data (parser, lines[i], -1, NULL) ||
        json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
      continue;
    o = json_node_get_object (json_parser_get_root (parser));
    params = json_object_has_member (o, "params") && JSON_NODE_HOLDS_OBJECT (json_object_get_member (o, "params"))
             ? json_object_get_object_member (o, "params") : NULL;
    if (params != NULL && json_object_has_member (params, "arguments") &&
        JSON_NODE_HOLDS_OBJECT (json_object_get_member (params, "arguments")))
      check_arguments (json_object_get_object_member (params, "arguments"));
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  check_server (data, size);
  check_reader (data, size, 1 + size % 97);
  check_lines_arguments (data, size);
  return 0;
}
