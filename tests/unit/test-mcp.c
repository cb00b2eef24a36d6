/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium-mcp without the daemon: the line reader's cap, the JSON-RPC
 * answers to whatever a client sends, the tool schemas, argument checks
 * and the manifest. What needs vivariumd is tests/system/test-mcp.sh. */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-mcp-identity.h"
#include "vivarium-mcp-rpc.h"
#include "vd-fs.h"
#include "vd-signing-key.h"

typedef struct {
  VmcpSchema   *schema;
  VmcpManifest *manifest;
  VmcpDaemon   *daemon;
  VmcpTools    *tools;
  VmcpServer   *server;
} Fixture;

static void
fixture_open (Fixture *f, const gchar *config, const gchar *client)
{
  g_autoptr(GError) error = NULL;

  f->schema = vmcp_schema_load (&error);
  g_assert_no_error (error);
  f->manifest = vmcp_manifest_load (config, client, vmcp_schema_tool_names (f->schema), &error);
  g_assert_no_error (error);
  f->daemon = vmcp_daemon_new (NULL);
  f->tools = vmcp_tools_new (f->schema, f->manifest, f->daemon);
  f->server = vmcp_server_new (f->tools);
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  fixture_open (f, NULL, NULL);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  vmcp_server_free (f->server);
  vmcp_tools_free (f->tools);
  vmcp_daemon_free (f->daemon);
  vmcp_manifest_free (f->manifest);
  vmcp_schema_free (f->schema);
}

/* Sends one line, parses the answer (NULL when there is none). */
static JsonObject *
send_line (Fixture *f, const gchar *line)
{
  g_autofree gchar *answer = vmcp_server_handle_line (f->server, line, strlen (line));
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  if (answer == NULL)
    return NULL;
  g_assert_null (strchr (answer, '\n'));
  json_parser_load_from_data (parser, answer, -1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "jsonrpc"), ==, "2.0");
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static gint64
error_code (JsonObject *reply)
{
  g_assert_true (json_object_has_member (reply, "error"));
  g_assert_false (json_object_has_member (reply, "result"));
  return json_object_get_int_member (json_object_get_object_member (reply, "error"), "code");
}

static void
initialize (Fixture *f)
{
  g_autoptr(JsonObject) r = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                                          "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                                          "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
  g_assert_nonnull (r);
  g_assert_null (send_line (f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
}

/* --- the line reader ------------------------------------------------------ */

typedef struct {
  gint fd;
  gsize big;
} Writer;

static gpointer
write_lines (gpointer data)
{
  Writer *w = data;
  g_autofree gchar *big = g_malloc (w->big);

  memset (big, 'x', w->big);
  g_assert_cmpint (write (w->fd, "one\ntwo\r\n", 9), ==, 9);
  for (gsize done = 0; done < w->big;) {
    gssize n = write (w->fd, big + done, w->big - done);
    g_assert_cmpint (n, >, 0);
    done += (gsize) n;
  }
  g_assert_cmpint (write (w->fd, "\nthree", 6), ==, 6);
  close (w->fd);
  return NULL;
}

static void
test_line_reader (void)
{
  gint fds[2];
  Writer w;
  g_autoptr(GThread) thread = NULL;
  g_autoptr(VmcpLineReader) reader = NULL;
  const gchar *expected[] = { "one", "two", NULL, "three" };

  g_assert_cmpint (pipe (fds), ==, 0);
  w.fd = fds[1];
  w.big = VMCP_LINE_MAX * 3 + 7;   /* several caps' worth: dropped as it comes */
  thread = g_thread_new ("writer", write_lines, &w);
  reader = vmcp_line_reader_new (fds[0], VMCP_LINE_MAX);
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++) {
    g_autofree gchar *line = NULL;
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    VmcpLineStatus status = vmcp_line_reader_next (reader, &line, &len, &error);

    g_assert_no_error (error);
    if (expected[i] == NULL) {
      g_assert_cmpint (status, ==, VMCP_LINE_TOO_LONG);
      g_assert_null (line);
    } else {
      g_assert_cmpint (status, ==, VMCP_LINE_OK);
      g_assert_cmpstr (line, ==, expected[i]);
      g_assert_cmpuint (len, ==, strlen (expected[i]));
    }
  }
  {
    g_autofree gchar *line = NULL;
    gsize len = 0;
    g_assert_cmpint (vmcp_line_reader_next (reader, &line, &len, NULL), ==, VMCP_LINE_EOF);
  }
  close (fds[0]);
}

/* A line of exactly the cap is a message; one byte more is not. */
static void
test_line_cap_edge (void)
{
  for (guint extra = 0; extra <= 1; extra++) {
    gint fds[2];
    Writer w;
    g_autoptr(GThread) thread = NULL;
    g_autoptr(VmcpLineReader) reader = NULL;
    g_autofree gchar *line = NULL;
    gsize len = 0;

    g_assert_cmpint (pipe (fds), ==, 0);
    w.fd = fds[1];
    w.big = 4096 + extra;
    thread = g_thread_new ("writer", write_lines, &w);
    reader = vmcp_line_reader_new (fds[0], 4096);
    for (guint i = 0; i < 2; i++) {
      g_autofree gchar *skip = NULL;
      g_assert_cmpint (vmcp_line_reader_next (reader, &skip, &len, NULL), ==, VMCP_LINE_OK);
    }
    /* The line and its newline come in one read: the cap still holds. */
    if (extra == 0) {
      g_assert_cmpint (vmcp_line_reader_next (reader, &line, &len, NULL), ==, VMCP_LINE_OK);
      g_assert_cmpuint (len, ==, 4096);
    } else {
      g_assert_cmpint (vmcp_line_reader_next (reader, &line, &len, NULL), ==, VMCP_LINE_TOO_LONG);
      g_assert_null (line);
    }
    g_clear_pointer (&line, g_free);
    g_assert_cmpint (vmcp_line_reader_next (reader, &line, &len, NULL), ==, VMCP_LINE_OK);
    g_assert_cmpstr (line, ==, "three");
    g_clear_pointer (&line, g_free);
    close (fds[0]);
  }
}

/* --- JSON-RPC ------------------------------------------------------------- */

static void
test_initialize (Fixture *f, gconstpointer data)
{
  g_autoptr(JsonObject) r = NULL;
  g_autoptr(JsonObject) early = NULL;
  g_autoptr(JsonObject) ping = NULL;
  JsonObject *result;

  /* Before initialize only ping is served. */
  early = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  g_assert_cmpint (error_code (early), ==, VMCP_RPC_INVALID_REQUEST);
  ping = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
  g_assert_cmpstr (json_object_get_string_member (ping, "id"), ==, "p");
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member (ping, "result")), ==, 0);

  /* A client asking for a newer revision gets ours, and decides. */
  r = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":"
                    "{\"protocolVersion\":\"2099-01-01\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
  g_assert_cmpint (json_object_get_int_member (r, "id"), ==, 7);
  result = json_object_get_object_member (r, "result");
  g_assert_cmpstr (json_object_get_string_member (result, "protocolVersion"), ==, "2025-06-18");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (result, "serverInfo"), "name"),
                   ==, "vivarium-mcp");
  g_assert_true (json_object_has_member (json_object_get_object_member (result, "capabilities"), "tools"));
  /* Whose verdict to trust is said before any tool is called. */
  g_assert_nonnull (strstr (json_object_get_string_member (result, "instructions"),
                            "Trust its verification verdict only when report.verification.by is \"caller\""));
}

static void
test_malformed (Fixture *f, gconstpointer data)
{
  struct { const gchar *line; gint64 code; } cases[] = {
    { "{", VMCP_RPC_PARSE_ERROR },
    { "not json", VMCP_RPC_PARSE_ERROR },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing", VMCP_RPC_PARSE_ERROR },
    { "\"a string\"", VMCP_RPC_INVALID_REQUEST },
    { "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", VMCP_RPC_INVALID_REQUEST },
    { "{\"id\":1,\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":3}", VMCP_RPC_INVALID_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}", VMCP_RPC_INVALID_PARAMS },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}", VMCP_RPC_METHOD_NOT_FOUND },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", VMCP_RPC_INVALID_PARAMS },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}", VMCP_RPC_INVALID_PARAMS },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"vm_images\",\"arguments\":[]}}",
      VMCP_RPC_INVALID_PARAMS },
    /* Half a surrogate pair: json-glib made a string that is not UTF-8 of
     * it, and the answer that echoed it was not UTF-8 (tests/fuzz). */
    { "{\"jsonrpc\":\"2.0\",\"id\":\"\\udc00\",\"method\":\"ping\"}", VMCP_RPC_PARSE_ERROR },
    { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"vm_an\\ud800\"}}",
      VMCP_RPC_PARSE_ERROR },
  };

  initialize (f);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(JsonObject) r = send_line (f, cases[i].line);
    g_test_message ("%s", cases[i].line);
    g_assert_nonnull (r);
    g_assert_cmpint (error_code (r), ==, cases[i].code);
  }
}

static void
test_hostile_bytes (Fixture *f, gconstpointer data)
{
  const gchar not_utf8[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}";
  const gchar with_nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\0{";
  g_autofree gchar *deep = g_strnfill (100000, '[');
  g_autofree gchar *answer = NULL;
  g_autofree gchar *too_long = NULL;
  g_autoptr(JsonNode) too_long_node = NULL;
  g_autoptr(JsonObject) r1 = NULL;
  g_autoptr(JsonObject) r2 = NULL;
  g_autoptr(JsonObject) r3 = NULL;
  g_autoptr(JsonObject) ok = NULL;

  initialize (f);
  r1 = send_line (f, not_utf8);
  g_assert_cmpint (error_code (r1), ==, VMCP_RPC_PARSE_ERROR);
  answer = vmcp_server_handle_line (f->server, with_nul, sizeof with_nul - 1);
  g_assert_nonnull (strstr (answer, "-32700"));
  r2 = send_line (f, deep);   /* json-glib would recurse 100000 deep */
  g_assert_cmpint (error_code (r2), ==, VMCP_RPC_PARSE_ERROR);
  too_long = vmcp_server_reply_too_long (f->server);
  too_long_node = json_from_string (too_long, NULL);
  r3 = json_object_ref (json_node_get_object (too_long_node));
  g_assert_cmpint (error_code (r3), ==, VMCP_RPC_INVALID_REQUEST);
  g_assert_true (json_object_get_null_member (r3, "id"));
  /* And the session goes on. */
  ok = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
  g_assert_true (json_object_has_member (ok, "result"));
}

static void
test_no_answer (Fixture *f, gconstpointer data)
{
  initialize (f);
  g_assert_null (send_line (f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}"));
  g_assert_null (send_line (f, "{\"jsonrpc\":\"2.0\",\"method\":\"anything/else\"}"));
  g_assert_null (send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
}

/* --- tools ---------------------------------------------------------------- */

static JsonObject *
call_tool (Fixture *f, const gchar *name, const gchar *arguments)
{
  g_autofree gchar *line = g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                                            "\"params\":{\"name\":\"%s\",\"arguments\":%s}}", name, arguments);
  g_autoptr(JsonObject) r = send_line (f, line);

  g_assert_true (json_object_has_member (r, "result"));
  return json_object_ref (json_object_get_object_member (r, "result"));
}

static const gchar *const identity_members[] = {
  "task", "session", "image", "image_digest", "report", "signature", "signed_by", "key_fingerprint",
  "signature_verified", NULL
};

/* isError, the error's D-Bus name, a text block, and the identity block. */
static void
assert_error_result (JsonObject *result, const gchar *name)
{
  JsonObject *sc = json_object_get_object_member (result, "structuredContent");
  JsonObject *identity = json_object_get_object_member (sc, "identity");
  JsonArray *content = json_object_get_array_member (result, "content");

  g_assert_true (json_object_get_boolean_member (result, "isError"));
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (sc, "error"), "name"), ==, name);
  g_assert_cmpuint (json_array_get_length (content), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (content, 0), "type"), ==, "text");
  g_assert_nonnull (strstr (json_object_get_string_member (json_array_get_object_element (content, 0), "text"), name));
  g_assert_cmpuint (json_object_get_size (identity), ==, g_strv_length ((gchar **) identity_members));
  for (guint i = 0; identity_members[i] != NULL; i++)
    g_assert_true (json_object_has_member (identity, identity_members[i]));
  g_assert_false (json_object_get_boolean_member (identity, "signature_verified"));
}

static void
test_tools_list (Fixture *f, gconstpointer data)
{
  g_autoptr(JsonObject) r = NULL;
  g_autofree gchar *text = NULL;
  JsonArray *tools;
  const gchar *names[] = { "vm_task", "vm_answer", "vm_wait", "vm_report", "vm_cancel", "vm_images", "vm_projects" };

  initialize (f);
  r = send_line (f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
  tools = json_object_get_array_member (json_object_get_object_member (r, "result"), "tools");
  g_assert_cmpuint (json_array_get_length (tools), ==, G_N_ELEMENTS (names));
  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    JsonObject *tool = json_array_get_object_element (tools, i);
    JsonObject *in = json_object_get_object_member (tool, "inputSchema");
    JsonObject *out = json_object_get_object_member (tool, "outputSchema");
    JsonObject *props = json_object_get_object_member (out, "properties");

    g_assert_cmpstr (json_object_get_string_member (tool, "name"), ==, names[i]);
    g_assert_cmpstr (json_object_get_string_member (in, "type"), ==, "object");
    g_assert_false (json_object_get_boolean_member (in, "additionalProperties"));
    g_assert_cmpstr (json_object_get_string_member (out, "type"), ==, "object");
    g_assert_true (json_object_has_member (props, "identity"));
    g_assert_true (json_object_has_member (props, "error"));
    g_assert_cmpstr (json_array_get_string_element (json_object_get_array_member (out, "required"), 0), ==, "identity");
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (out, "oneOf")), ==, 2);
  }
  /* Every limit token was replaced by common/'s value. */
  text = json_to_string (json_object_get_member (json_object_get_object_member (r, "result"), "tools"), FALSE);
  g_assert_null (strchr (text, '@'));
  {
    JsonObject *task_in = json_object_get_object_member (json_array_get_object_element (tools, 0), "inputSchema");
    JsonObject *instr = json_object_get_object_member (json_object_get_object_member (task_in, "properties"), "instructions");
    JsonObject *project = json_object_get_object_member (json_object_get_object_member (task_in, "properties"), "project");
    g_assert_cmpint (json_object_get_int_member (instr, "maxLength"), ==, VIVARIUM_TASK_INSTRUCTIONS_MAX);
    g_assert_cmpint (json_object_get_int_member (project, "maxLength"), ==, VIVARIUM_PROJECT_NAME_MAX);
  }
}

static void
test_arguments (Fixture *f, gconstpointer data)
{
  g_autofree gchar *long_instructions = g_strnfill (VIVARIUM_TASK_INSTRUCTIONS_MAX + 1, 'a');
  g_autofree gchar *too_long = g_strdup_printf ("{\"project\":\"demo\",\"image\":\"tiny\",\"verify\":\"true\",\"instructions\":\"%s\"}",
                                                long_instructions);
  struct { const gchar *tool, *args; } cases[] = {
    { "vm_task", "{\"project\":\"../etc\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"Demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"a/b\",\"instructions\":\"x\",\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"\",\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":7,\"verify\":\"true\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"worker\":\"script\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"wait_seconds\":3601}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"wait_seconds\":-1}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"wait_seconds\":1.5}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\"}" },
    { "vm_task", too_long },
    /* An assistant may narrow a machine's way out, never open it. */
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress\":\"open\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress\":1}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress_groups\":\"debian\"}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress_allow\":[7]}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress_allow\":[\"\"]}" },
    { "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\",\"egress_allow\":[[\"a\"]]}" },
    { "vm_wait", "{\"task\":\"../../x\"}" },
    { "vm_wait", "{\"task\":\"t\",\"seconds\":\"10\"}" },
    { "vm_answer", "{\"task\":\"t\"}" },
    { "vm_report", "{}" },
    { "vm_images", "{\"all\":true}" },
  };

  initialize (f);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(JsonObject) result = NULL;
    g_test_message ("%s %.200s", cases[i].tool, cases[i].args);
    result = call_tool (f, cases[i].tool, cases[i].args);
    assert_error_result (result, "org.vivarium.Vivarium1.Error.InvalidArgument");
  }
  /* Well-formed egress arguments pass the schema: refused only for the
   * missing daemon. */
  {
    g_autoptr(JsonObject) result = call_tool (f, "vm_task", "{\"project\":\"demo\",\"image\":\"tiny\","
                                              "\"instructions\":\"x\",\"verify\":\"true\",\"egress\":\"allowlist\","
                                              "\"egress_groups\":[\"debian\"],\"egress_allow\":[\"pypi.org:443\"]}");
    assert_error_result (result, "org.vivarium.Vivarium1.Error.Failed");
  }
}

/* No bus at all: a result with the reason, not a dropped connection. */
static void
test_no_daemon (Fixture *f, gconstpointer data)
{
  g_autoptr(JsonObject) result = NULL;

  initialize (f);
  result = call_tool (f, "vm_projects", "{}");
  assert_error_result (result, "org.vivarium.Vivarium1.Error.Failed");
  g_assert_true (json_object_get_null_member (
    json_object_get_object_member (json_object_get_object_member (result, "structuredContent"), "identity"),
    "key_fingerprint"));
}

/* --- the manifest --------------------------------------------------------- */

static gchar *
write_config (const gchar *text)
{
  g_autoptr(GError) error = NULL;
  gchar *path = NULL;
  gint fd = g_file_open_tmp ("vivarium-mcp-XXXXXX.conf", &path, &error);

  g_assert_no_error (error);
  close (fd);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
  return path;
}

static void
test_manifest (void)
{
  g_autofree gchar *path = write_config ("[Client narrow]\nTools=vm_task;vm_images\nProjects=demo\nImages=tiny\n"
                                         "[Client none]\nTools=\n");
  Fixture f = { 0 };
  g_autoptr(JsonObject) list = NULL;
  g_autoptr(JsonObject) denied_tool = NULL;
  g_autoptr(JsonObject) denied_project = NULL;
  g_autoptr(JsonObject) denied_image = NULL;
  JsonArray *tools;

  fixture_open (&f, path, "narrow");
  initialize (&f);
  list = send_line (&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
  tools = json_object_get_array_member (json_object_get_object_member (list, "result"), "tools");
  g_assert_cmpuint (json_array_get_length (tools), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (tools, 0), "name"), ==, "vm_task");
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (tools, 1), "name"), ==, "vm_images");
  denied_tool = call_tool (&f, "vm_cancel", "{\"task\":\"t\"}");
  assert_error_result (denied_tool, "org.vivarium.Vivarium1.Error.NotAuthorized");
  /* Refused before the daemon is asked: no bus here, yet NotAuthorized. */
  denied_project = call_tool (&f, "vm_task", "{\"project\":\"other\",\"image\":\"tiny\",\"instructions\":\"x\",\"verify\":\"true\"}");
  assert_error_result (denied_project, "org.vivarium.Vivarium1.Error.NotAuthorized");
  denied_image = call_tool (&f, "vm_task", "{\"project\":\"demo\",\"image\":\"debian\",\"instructions\":\"x\",\"verify\":\"true\"}");
  assert_error_result (denied_image, "org.vivarium.Vivarium1.Error.NotAuthorized");
  fixture_teardown (&f, NULL);

  /* An empty list allows nothing. */
  {
    Fixture g = { 0 };
    g_autoptr(JsonObject) none = NULL;
    fixture_open (&g, path, "none");
    initialize (&g);
    none = send_line (&g, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (
                        json_object_get_object_member (none, "result"), "tools")), ==, 0);
    fixture_teardown (&g, NULL);
  }
  g_unlink (path);
}

static void
test_manifest_refusals (void)
{
  struct { const gchar *text; const gchar *client; } cases[] = {
    { "[Client a]\nTools=vm_task;vm_shell\n", "a" },
    { "[Client a]\nProjects=../x\n", "a" },
    { "[Client a]\nImages=a/b\n", "a" },
    { "[Client a]\nTools=vm_task\n", "b" },
    { "not a key file", "a" },
  };
  g_autoptr(VmcpSchema) schema = vmcp_schema_load (NULL);
  g_autoptr(GError) missing = NULL;
  g_autoptr(VmcpManifest) none = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree gchar *path = write_config (cases[i].text);
    g_autoptr(GError) error = NULL;
    g_autoptr(VmcpManifest) m = vmcp_manifest_load (path, cases[i].client, vmcp_schema_tool_names (schema), &error);
    g_test_message ("%s", cases[i].text);
    g_assert_null (m);
    g_assert_nonnull (error);
    g_unlink (path);
  }
  none = vmcp_manifest_load ("/nonexistent/mcp.conf", "a", vmcp_schema_tool_names (schema), &missing);
  g_assert_null (none);
  g_assert_nonnull (missing);
}


/* --- verify: the caller's, unless the manifest says otherwise ------------- */

static gboolean
requires_verify (JsonObject *list_reply)
{
  JsonArray *tools = json_object_get_array_member (json_object_get_object_member (list_reply, "result"), "tools");
  JsonObject *task = json_array_get_object_element (tools, 0);
  JsonArray *required = json_object_get_array_member (json_object_get_object_member (task, "inputSchema"), "required");

  g_assert_cmpstr (json_object_get_string_member (task, "name"), ==, "vm_task");
  for (guint i = 0; i < json_array_get_length (required); i++)
    if (g_str_equal (json_array_get_string_element (required, i), "verify"))
      return TRUE;
  return FALSE;
}

static void
test_verify_required (void)
{
  g_autofree gchar *path = write_config ("[Client strict]\nTools=vm_task\n"
                                         "[Client lenient]\nTools=vm_task\nWorkerVerify=true\n"
                                         "[Client bad]\nWorkerVerify=maybe\n");
  const gchar *no_verify = "{\"project\":\"demo\",\"image\":\"tiny\",\"instructions\":\"x\"}";
  g_autoptr(VmcpSchema) schema = vmcp_schema_load (NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(VmcpManifest) bad = NULL;
  const gchar *clients[] = { NULL, "strict", "lenient" };

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    Fixture f = { 0 };
    g_autoptr(JsonObject) list = NULL;
    g_autoptr(JsonObject) result = NULL;
    gboolean lenient = g_strcmp0 (clients[i], "lenient") == 0;
    JsonArray *content;

    fixture_open (&f, clients[i] != NULL ? path : NULL, clients[i]);
    initialize (&f);
    list = send_line (&f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    g_assert_cmpint (requires_verify (list), ==, !lenient);
    result = call_tool (&f, "vm_task", no_verify);
    content = json_object_get_array_member (result, "content");
    if (lenient) {
      /* Past the argument check: refused only for the missing daemon. */
      assert_error_result (result, "org.vivarium.Vivarium1.Error.Failed");
    } else {
      assert_error_result (result, "org.vivarium.Vivarium1.Error.InvalidArgument");
      g_assert_nonnull (strstr (json_object_get_string_member (json_array_get_object_element (content, 0), "text"),
                                "the worker's own command would decide the verdict"));
    }
    /* A narrowed copy never narrows the schema itself. */
    g_assert_true (requires_verify (list) || lenient);
    fixture_teardown (&f, NULL);
  }
  {
    g_autoptr(JsonNode) def = vmcp_schema_tool_definition (schema, "vm_task");
    JsonArray *req = json_object_get_array_member (json_object_get_object_member (json_node_get_object (def),
                                                                                   "inputSchema"), "required");
    g_assert_cmpuint (json_array_get_length (req), ==, 4);
  }
  bad = vmcp_manifest_load (path, "bad", vmcp_schema_tool_names (schema), &error);
  g_assert_null (bad);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_unlink (path);
}

/* --- the report: verified, about the task asked, rendered from itself ------ */

typedef struct {
  gchar        *dir;
  VdSigningKey *key;
  VdSigningKey *other;
} Keys;

static void
keys_open (Keys *k)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *a = NULL;
  g_autofree gchar *b = NULL;

  k->dir = g_dir_make_tmp ("vivarium-mcp-keys-XXXXXX", &error);
  g_assert_no_error (error);
  a = g_build_filename (k->dir, "daemon", NULL);
  b = g_build_filename (k->dir, "stranger", NULL);
  g_assert_cmpint (g_mkdir (a, 0700), ==, 0);
  g_assert_cmpint (g_mkdir (b, 0700), ==, 0);
  k->key = vd_signing_key_load_or_generate (a, &error);
  g_assert_no_error (error);
  k->other = vd_signing_key_load_or_generate (b, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (vd_signing_key_get_fingerprint (k->key), !=, vd_signing_key_get_fingerprint (k->other));
}

static void
keys_close (Keys *k)
{
  g_assert_true (vd_fs_rm_rf (k->dir, NULL));
  g_free (k->dir);
  g_clear_object (&k->key);
  g_clear_object (&k->other);
}

static GBytes *
signed_report (VdSigningKey *key, const gchar *task, const gchar *project, VivariumVerifyWhose whose)
{
  g_autoptr(VivariumReport) r = vivarium_report_new ();
  g_autoptr(GError) error = NULL;
  const gchar *cmd[] = { "sh", "-c", "make check", NULL };
  GBytes *file;

  vivarium_report_set_id (r, task);
  vivarium_report_set_task_id (r, task);
  vivarium_report_set_session_id (r, "s-1");
  vivarium_report_set_image (r, "tiny", "sha256:00");
  vivarium_report_set_project (r, project);
  vivarium_report_set_times (r, 1764583200000000, 1764583290000000);
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_DONE, NULL);
  vivarium_report_add_command (r, "exec", cmd, 1764583200000001, 5, 0, 1, 2, NULL);
  vivarium_report_set_verification (r, "make check", whose, 0, VIVARIUM_VERDICT_PASS, "s-2");
  vivarium_report_set_summary (r, "All tests pass.\nVerification: pass\n", -1);
  file = vd_signing_key_sign_report (key, r, &error);
  g_assert_no_error (error);
  return file;
}

/* The identity block as a client gets it. */
static gboolean
identity_verified (VmcpIdentity *identity)
{
  g_autoptr(JsonNode) node = vmcp_identity_to_json (identity);

  return json_object_get_boolean_member (json_node_get_object (node), "signature_verified");
}

/* Takes @file as the report of task "t-1" of "demo"; NULL and the error
 * when refused. */
static JsonNode *
take (VdSigningKey *daemon_key, GBytes *file, const gchar *task, const gchar *project, gboolean *verified,
      GError **error)
{
  g_autoptr(VmcpIdentity) identity = vmcp_identity_new_for_key (vd_signing_key_get_fingerprint (daemon_key));
  gsize len = 0;
  const gchar *data = g_bytes_get_data (file, &len);
  JsonNode *node = vmcp_identity_take_report (identity, data, len, task, project, error);

  *verified = identity_verified (identity);
  return node;
}

static void
test_report_verified (void)
{
  Keys k = { 0 };
  g_autoptr(GBytes) good = NULL;
  g_autoptr(GBytes) by_worker = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) worker_node = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *expected_sig = NULL;
  JsonObject *report, *verification;
  const gchar *text;
  gboolean verified = FALSE;

  keys_open (&k);
  good = signed_report (k.key, "t-1", "demo", VIVARIUM_VERIFY_WHOSE_CALLER);
  node = take (k.key, good, "t-1", "demo", &verified, &error);
  g_assert_no_error (error);
  g_assert_nonnull (node);
  g_assert_true (verified);
  report = json_node_get_object (node);
  verification = json_object_get_object_member (report, "verification");
  g_assert_cmpstr (json_object_get_string_member (verification, "by"), ==, "caller");
  g_assert_cmpstr (json_object_get_string_member (verification, "whose"), ==, "caller");
  /* The text is the verified report's own rendering, key and all. */
  text = json_object_get_string_member (report, "text");
  expected_sig = g_strdup_printf ("\nSignature: valid, made with the key %s\n", vd_signing_key_get_fingerprint (k.key));
  g_assert_nonnull (strstr (text, expected_sig));
  g_assert_nonnull (strstr (text, "\nTask: t-1\n"));
  g_assert_nonnull (strstr (text, "\nVerification: pass (the caller's command, exit status 0 in a fresh session)\n"));
  g_assert_nonnull (strstr (text, "\n> Verification: pass\n"));

  by_worker = signed_report (k.key, "t-1", "demo", VIVARIUM_VERIFY_WHOSE_WORKER);
  worker_node = take (k.key, by_worker, "t-1", "demo", &verified, &error);
  g_assert_no_error (error);
  g_assert_true (verified);
  verification = json_object_get_object_member (json_node_get_object (worker_node), "verification");
  g_assert_cmpstr (json_object_get_string_member (verification, "by"), ==, "worker");
  g_assert_nonnull (strstr (json_object_get_string_member (json_node_get_object (worker_node), "text"),
                            "(the worker's own command, exit status 0 in a fresh session)"));
  keys_close (&k);
}

/* One byte changed anywhere that matters, another key, another task or
 * project: an error, and signature_verified false. */
static void
test_report_refused (void)
{
  Keys k = { 0 };
  g_autoptr(GBytes) good = NULL;
  g_autoptr(GBytes) stranger = NULL;
  g_autoptr(GBytes) other_task = NULL;
  g_autoptr(GBytes) other_project = NULL;
  gsize len = 0;
  const gchar *data;
  /* The byte right after each of these: inside the report's facts, the
   * signature, the public key. */
  const gchar *spots[] = { "\"DO", "\"de", "\"make ", "\"value\":\"", "\"public-key\":\"" };
  guint refused = 0;

  keys_open (&k);
  good = signed_report (k.key, "t-1", "demo", VIVARIUM_VERIFY_WHOSE_CALLER);
  data = g_bytes_get_data (good, &len);
  for (guint i = 0; i < G_N_ELEMENTS (spots); i++) {
    g_autofree gchar *copy = g_strndup (data, len);
    g_autoptr(GBytes) bad = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = NULL;
    gchar *at = strstr (copy, spots[i]);
    gboolean verified = TRUE;

    g_assert_nonnull (at);
    at += strlen (spots[i]);
    *at = *at == 'A' ? 'B' : 'A';
    bad = g_bytes_new (copy, len);
    node = take (k.key, bad, "t-1", "demo", &verified, &error);
    g_test_message ("%s: %s", spots[i], error != NULL ? error->message : "accepted");
    g_assert_null (node);
    g_assert_nonnull (error);
    g_assert_true (error->domain == VIVARIUM_ERROR);
    g_assert_false (verified);
    refused++;
  }
  g_assert_cmpuint (refused, ==, G_N_ELEMENTS (spots));

  stranger = signed_report (k.other, "t-1", "demo", VIVARIUM_VERIFY_WHOSE_CALLER);
  other_task = signed_report (k.key, "t-2", "demo", VIVARIUM_VERIFY_WHOSE_CALLER);
  other_project = signed_report (k.key, "t-1", "other", VIVARIUM_VERIFY_WHOSE_CALLER);
  {
    GBytes *files[] = { stranger, other_task, other_project };
    const gchar *words[] = { "does not verify against the daemon's key", "about the task \"t-2\"",
                             "about the project \"other\"" };

    for (guint i = 0; i < G_N_ELEMENTS (files); i++) {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonNode) node = NULL;
      gboolean verified = TRUE;

      node = take (k.key, files[i], "t-1", "demo", &verified, &error);
      g_assert_null (node);
      g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, words[i]));
      g_assert_false (verified);
    }
  }
  /* No key to check against: never verified either. */
  {
    g_autoptr(VmcpIdentity) identity = vmcp_identity_new_for_key (NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) node = vmcp_identity_take_report (identity, data, len, "t-1", "demo", &error);

    g_assert_null (node);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH);
    g_assert_false (identity_verified (identity));
  }
  keys_close (&k);
}

int
main (int argc, char **argv)
{
  /* Never the machine's system bus: the tools that reach for one must fail
   * as they would with no daemon. */
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/vivarium-test-bus", TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mcp/line-reader", test_line_reader);
  g_test_add_func ("/mcp/line-cap-edge", test_line_cap_edge);
  g_test_add ("/mcp/initialize", Fixture, NULL, fixture_setup, test_initialize, fixture_teardown);
  g_test_add ("/mcp/malformed", Fixture, NULL, fixture_setup, test_malformed, fixture_teardown);
  g_test_add ("/mcp/hostile-bytes", Fixture, NULL, fixture_setup, test_hostile_bytes, fixture_teardown);
  g_test_add ("/mcp/no-answer", Fixture, NULL, fixture_setup, test_no_answer, fixture_teardown);
  g_test_add ("/mcp/tools-list", Fixture, NULL, fixture_setup, test_tools_list, fixture_teardown);
  g_test_add ("/mcp/arguments", Fixture, NULL, fixture_setup, test_arguments, fixture_teardown);
  g_test_add ("/mcp/no-daemon", Fixture, NULL, fixture_setup, test_no_daemon, fixture_teardown);
  g_test_add_func ("/mcp/manifest", test_manifest);
  g_test_add_func ("/mcp/manifest-refusals", test_manifest_refusals);
  g_test_add_func ("/mcp/verify-required", test_verify_required);
  g_test_add_func ("/mcp/report/verified", test_report_verified);
  g_test_add_func ("/mcp/report/refused", test_report_refused);
  return g_test_run ();
}
