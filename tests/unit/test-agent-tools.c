/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's checks on what a model sends, its limits, the HTTP it speaks
 * to the gateway, and the daemon's transcript caps: no model, no bus. */

#include "config.h"

#include <string.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>

#include "vivarium-agent-model.h"
#include "vivarium-agent-tools.h"
#include "vivarium-dbus-generated.h"
#include "vivarium-report.h"
#include "vd-transcript.h"
#include "vivarium-error.h"

static JsonNode *
parse (const gchar *text)
{
  g_autoptr(JsonParser) p = json_parser_new ();

  g_assert_true (json_parser_load_from_data (p, text, -1, NULL));
  return json_node_copy (json_parser_get_root (p));
}

static VivariumToolCall *
call_of (const gchar *json, gchar **error_text)
{
  g_autoptr(JsonNode) node = parse (json);
  VivariumAgentLimits limits;

  vivarium_agent_limits_defaults (&limits);
  limits.max_tool_call_bytes = 1024;
  return vivarium_agent_parse_tool_call (node, &limits, error_text);
}

static void
test_tool_call_valid (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(VivariumToolCall) c = call_of ("{\"id\":\"c1\",\"function\":{\"name\":\"exec\","
                                           "\"arguments\":\"{\\\"argv\\\":[\\\"ls\\\"]}\"}}", &why);

  g_assert_nonnull (c);
  g_assert_null (why);
  g_assert_cmpstr (c->name, ==, "exec");
  g_assert_true (json_object_has_member (c->args, "argv"));
}

static void
test_tool_call_unknown (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(VivariumToolCall) c = call_of ("{\"id\":\"c1\",\"function\":{\"name\":\"rm_rf\",\"arguments\":\"{}\"}}",
                                           &why);

  g_assert_nonnull (c);
  g_assert_nonnull (strstr (why, "error: there is no tool rm_rf"));
  g_assert_null (c->args);
}

static void
test_tool_call_malformed (void)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *why2 = NULL;
  g_autoptr(VivariumToolCall) c = call_of ("{\"id\":\"c1\",\"function\":{\"name\":\"exec\",\"arguments\":\"{\\\"argv\\\"\"}}",
                                           &why);
  g_autoptr(VivariumToolCall) c2 = call_of ("{\"id\":\"c2\",\"function\":{\"name\":\"exec\",\"arguments\":\"[1]\"}}",
                                            &why2);

  g_assert_nonnull (strstr (why, "not a JSON object"));
  g_assert_nonnull (strstr (why2, "not a JSON object"));
}

static void
test_tool_call_oversize (void)
{
  g_autofree gchar *big = g_strnfill (2000, 'A');
  g_autofree gchar *json = g_strdup_printf ("{\"id\":\"c1\",\"function\":{\"name\":\"write_file\","
                                            "\"arguments\":\"%s\"}}", big);
  g_autofree gchar *why = NULL;
  g_autoptr(VivariumToolCall) c = call_of (json, &why);

  g_assert_nonnull (c);
  g_assert_nonnull (strstr (why, "are 2000 bytes; at most 1024"));
  /* Refused arguments are not kept: never echoed, never stored twice. */
  g_assert_null (c->arguments);
}

static void
test_tool_call_no_id (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(VivariumToolCall) c = call_of ("{\"function\":{\"name\":\"exec\",\"arguments\":\"{}\"}}", &why);
  g_autofree gchar *why2 = NULL;
  g_autoptr(VivariumToolCall) c2 = call_of ("\"not an object\"", &why2);

  g_assert_null (c);
  g_assert_nonnull (why);
  g_assert_null (c2);
}

static void
test_limits (void)
{
  VivariumAgentLimits l;
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GKeyFile) bad = g_key_file_new ();
  g_autoptr(GError) error = NULL;

  vivarium_agent_limits_defaults (&l);
  g_assert_true (g_key_file_load_from_data (kf, "[Agent]\nMaxTurns=7\nMaxToolCallKiB=2\nTemperature=0.5\nTakesImages=true\n",
                                            -1, 0, NULL));
  g_assert_true (vivarium_agent_limits_load (&l, kf, NULL));
  g_assert_cmpuint (l.max_turns, ==, 7);
  g_assert_cmpuint (l.max_tool_call_bytes, ==, 2048);
  g_assert_cmpfloat (l.temperature, ==, 0.5);
  g_assert_true (l.takes_images);
  g_assert_true (g_key_file_load_from_data (bad, "[Agent]\nMaxTurns=100000\n", -1, 0, NULL));
  g_assert_false (vivarium_agent_limits_load (&l, bad, &error));
  g_assert_nonnull (strstr (error->message, "MaxTurns"));
}

static void
test_guest_text (void)
{
  const guint8 data[] = { 'o', 'k', 0xff, 0xfe, 'x', 'y', 'z' };
  gboolean cut = FALSE;
  g_autofree gchar *t = vivarium_agent_guest_text (data, sizeof data, 5, &cut);

  g_assert_true (cut);
  g_assert_true (g_utf8_validate (t, -1, NULL));
  g_assert_true (g_str_has_prefix (t, "ok"));
  g_assert_null (strchr (t, 'y'));
}

/* A gateway that answers with the bytes a test wrote: one connection, the
 * request read (head and Content-Length body) and kept, then @reply, then
 * the connection closed. A NULL @reply holds the connection open until
 * the client gives up. */
typedef struct {
  gchar   *dir;
  gchar   *path;
  gchar   *reply;
  guint    bind_after_ms;
  GString *request;
  GThread *thread;
  GSocket *listener;
} FakeGateway;

static gboolean
read_request (GSocket *conn, GString *request)
{
  gchar buf[4096];
  const gchar *end = NULL;
  const gchar *length;

  while ((end = strstr (request->str, "\r\n\r\n")) == NULL) {
    gssize n = g_socket_receive (conn, buf, sizeof buf, NULL, NULL);
    if (n <= 0)
      return FALSE;
    g_string_append_len (request, buf, n);
  }
  length = strstr (request->str, "Content-Length: ");
  if (length != NULL) {
    gsize want = (end - request->str) + 4 + g_ascii_strtoull (length + 16, NULL, 10);
    while (request->len < want) {
      gssize n = g_socket_receive (conn, buf, sizeof buf, NULL, NULL);
      if (n <= 0)
        return FALSE;
      g_string_append_len (request, buf, n);
    }
  }
  return TRUE;
}

static gpointer
fake_gateway_thread (gpointer data)
{
  FakeGateway *gw = data;
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (gw->path);
  g_autoptr(GSocket) conn = NULL;
  gchar c;

  g_usleep (gw->bind_after_ms * 1000);
  gw->listener = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, NULL);
  g_assert_true (g_socket_bind (gw->listener, addr, FALSE, NULL));
  g_assert_true (g_socket_listen (gw->listener, NULL));
  conn = g_socket_accept (gw->listener, NULL, NULL);
  if (conn == NULL || !read_request (conn, gw->request))
    return NULL;
  if (gw->reply != NULL) {
    for (gsize sent = 0, len = strlen (gw->reply); sent < len;) {
      gssize n = g_socket_send (conn, gw->reply + sent, len - sent, NULL, NULL);
      if (n <= 0)
        break;
      sent += (gsize) n;
    }
  } else {
    /* Until the client closes its end. */
    while (g_socket_receive (conn, &c, 1, NULL, NULL) > 0)
      ;
  }
  g_socket_close (conn, NULL);
  return NULL;
}

static FakeGateway *
fake_gateway_new (const gchar *reply, guint bind_after_ms)
{
  FakeGateway *gw = g_new0 (FakeGateway, 1);

  gw->dir = g_dir_make_tmp ("vivarium-agent-model-XXXXXX", NULL);
  gw->path = g_build_filename (gw->dir, "model.sock", NULL);
  gw->reply = g_strdup (reply);
  gw->bind_after_ms = bind_after_ms;
  gw->request = g_string_new (NULL);
  gw->thread = g_thread_new ("fake-gateway", fake_gateway_thread, gw);
  return gw;
}

static void
fake_gateway_free (FakeGateway *gw)
{
  if (gw->thread != NULL)
    g_thread_join (gw->thread);
  g_clear_object (&gw->listener);
  g_unlink (gw->path);
  g_rmdir (gw->dir);
  g_string_free (gw->request, TRUE);
  g_free (gw->reply);
  g_free (gw->path);
  g_free (gw->dir);
  g_free (gw);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FakeGateway, fake_gateway_free)

/* One POST of "{}" to the fake gateway answering @reply, bound to @max bytes. */
static VivariumAgentReply *
post_to (FakeGateway *gw, gsize max, guint timeout, GCancellable *cancellable, GError **error)
{
  g_autoptr(SoupSession) session = vivarium_agent_model_session_new (gw->path);
  g_autoptr(GBytes) body = g_bytes_new_static ("{}", 2);

  return vivarium_agent_model_post (session, "/v1/chat/completions", body, max, timeout, cancellable, error);
}

static VivariumAgentReply *
post_reply (const gchar *reply, gsize max, GError **error)
{
  g_autoptr(FakeGateway) gw = fake_gateway_new (reply, 0);

  g_usleep (50 * 1000);
  return post_to (gw, max, 10, NULL, error);
}

/* What the agent sends: one POST of JSON, on a connection of its own. */
static void
test_model_request (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeGateway) gw = fake_gateway_new ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                                                300);
  g_autoptr(VivariumAgentReply) reply = post_to (gw, 10, 10, NULL, &error);
  g_autofree gchar *head = NULL;

  /* Bound 300 ms late: the client waits for the socket. */
  g_assert_no_error (error);
  g_assert_cmpuint (reply->status, ==, 200);
  g_assert_cmpuint (g_bytes_get_size (reply->body), ==, 2);
  g_thread_join (g_steal_pointer (&gw->thread));
  head = g_ascii_strdown (gw->request->str, -1);
  g_assert_true (g_str_has_prefix (gw->request->str, "POST /v1/chat/completions HTTP/1."));
  g_assert_nonnull (strstr (head, "\r\ncontent-type: application/json\r\n"));
  g_assert_nonnull (strstr (head, "\r\ncontent-length: 2\r\n"));
  g_assert_nonnull (strstr (head, "\r\nconnection: close\r\n"));
  g_assert_null (strstr (head, "accept-encoding"));
  g_assert_true (g_str_has_suffix (gw->request->str, "\r\n\r\n{}"));
}

/* Every size the gateway can send is bounded, each with its sentence. */
static void
test_model_bounds (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumAgentReply) ok = post_reply ("HTTP/1.0 200 OK\r\n\r\nhello", 10, &error);
  g_autoptr(VivariumAgentReply) big = NULL;
  g_autoptr(VivariumAgentReply) big_eof = NULL;
  g_autoptr(VivariumAgentReply) chunked = NULL;
  g_autoptr(VivariumAgentReply) huge = NULL;
  g_autofree gchar *hs = g_strnfill (20000, 'h');
  g_autofree gchar *huge_head = g_strdup_printf ("HTTP/1.1 200 OK\r\nX: %s\r\nContent-Length: 2\r\n\r\n{}", hs);

  /* A reply without a length ends with the connection, still capped. */
  g_assert_no_error (error);
  g_assert_cmpuint (ok->status, ==, 200);
  g_assert_cmpuint (g_bytes_get_size (ok->body), ==, 5);

  big = post_reply ("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n01234567890", 10, &error);
  g_assert_null (big);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
  g_assert_cmpstr (error->message, ==, "HTTP: the body is larger than allowed");
  g_clear_error (&error);

  big_eof = post_reply ("HTTP/1.0 200 OK\r\n\r\n01234567890", 10, &error);
  g_assert_null (big_eof);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
  g_assert_cmpstr (error->message, ==, "HTTP: the body is larger than allowed");
  g_clear_error (&error);

  chunked = post_reply ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 10, &error);
  g_assert_null (chunked);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  huge = post_reply (huge_head, 10, &error);
  g_assert_null (huge);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
  g_assert_cmpstr (error->message, ==, "HTTP: the headers are larger than 16 KiB");
}

/* A gateway that drops the request: the error the agent asks again on. */
static void
test_model_dropped (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumAgentReply) none = post_reply ("", 10, &error);
  g_autoptr(VivariumAgentReply) cut = NULL;

  g_assert_null (none);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
  g_assert_cmpstr (error->message, ==, "HTTP: the peer closed the connection before the headers ended");
  g_clear_error (&error);

  cut = post_reply ("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}", 10, &error);
  g_assert_null (cut);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
  g_assert_cmpstr (error->message, ==, "HTTP: the body ended early");
}

static gpointer
cancel_later (gpointer data)
{
  g_usleep (300 * 1000);
  g_cancellable_cancel (data);
  return NULL;
}

/* A gateway that says nothing is given up after the timeout; a
 * cancellation ends a request at once, also one still waiting for the
 * socket to appear. */
static void
test_model_timeout_cancel (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(FakeGateway) silent = fake_gateway_new (NULL, 0);
  g_autoptr(SoupSession) absent = vivarium_agent_model_session_new ("/nonexistent/vivarium/model.sock");
  g_autoptr(GBytes) body = g_bytes_new_static ("{}", 2);
  g_autoptr(VivariumAgentReply) timed_out = NULL;
  g_autoptr(VivariumAgentReply) cancelled = NULL;
  g_autoptr(GThread) canceller = NULL;
  gint64 start;

  g_usleep (50 * 1000);
  start = g_get_monotonic_time ();
  timed_out = post_to (silent, 10, 1, NULL, &error);
  g_assert_null (timed_out);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_clear_error (&error);

  start = g_get_monotonic_time ();
  canceller = g_thread_new ("cancel", cancel_later, cancellable);
  cancelled = vivarium_agent_model_post (absent, "/v1/chat/completions", body, 10, 10, cancellable, &error);
  g_assert_null (cancelled);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 2 * G_USEC_PER_SEC);
  g_thread_join (g_steal_pointer (&canceller));
}

static void
test_transcript_caps (void)
{
  g_autoptr(VivariumDBusTask) skeleton = vivarium_dbus_task_skeleton_new ();
  g_autoptr(VdTranscript) t = vd_transcript_new (G_DBUS_INTERFACE_SKELETON (skeleton));
  g_autofree gchar *big = g_strnfill (VD_TRANSCRIPT_ENTRY_MAX + 10, 'x');
  g_autoptr(GVariant) v = NULL;
  g_autofree gchar *failure = NULL;
  g_autofree gchar *long_failure = g_strnfill (5000, 'f');
  const gchar *kind, *text;
  gboolean truncated;
  guint64 time;

  vd_transcript_add (t, "tool-result", big);
  vd_transcript_add (t, "model", "line\r\n\x1b[31mred");
  v = vd_transcript_to_variant (t);
  g_variant_get_child (v, 0, "(t&s&sb)", &time, &kind, &text, &truncated);
  g_assert_true (truncated);
  g_assert_cmpuint (strlen (text), ==, VD_TRANSCRIPT_ENTRY_MAX);
  g_variant_get_child (v, 1, "(t&s&sb)", &time, &kind, &text, &truncated);
  /* Escaped: no carriage return, no escape sequence survives. */
  g_assert_null (strchr (text, '\r'));
  g_assert_null (strchr (text, 0x1b));
  g_clear_pointer (&v, g_variant_unref);

  vd_transcript_add (t, "failed", long_failure);
  failure = vd_transcript_dup_failure (t);
  g_assert_cmpuint (g_utf8_strlen (failure, -1), ==, VD_TRANSCRIPT_REASON_MAX);

  for (guint i = 0; i < VD_TRANSCRIPT_ENTRIES_MAX + 100; i++)
    vd_transcript_add (t, "note", "n");
  g_assert_cmpuint (vd_transcript_get_n_entries (t), <=, VD_TRANSCRIPT_ENTRIES_MAX);
  v = vd_transcript_to_variant (t);
  g_variant_get_child (v, g_variant_n_children (v) - 1, "(t&s&sb)", &time, &kind, &text, &truncated);
  g_assert_true (truncated);
  g_assert_nonnull (strstr (text, "reached its cap"));
}

static void
test_transcript_total (void)
{
  g_autoptr(VivariumDBusTask) skeleton = vivarium_dbus_task_skeleton_new ();
  g_autoptr(VdTranscript) t = vd_transcript_new (G_DBUS_INTERFACE_SKELETON (skeleton));
  g_autofree gchar *entry = g_strnfill (VD_TRANSCRIPT_ENTRY_MAX, 'y');
  g_autoptr(GVariant) v = NULL;
  gsize total = 0;

  for (guint i = 0; i < 200; i++)
    vd_transcript_add (t, "tool-result", entry);
  v = vd_transcript_to_variant (t);
  for (gsize i = 0; i < g_variant_n_children (v); i++) {
    const gchar *kind, *text;
    gboolean truncated;
    guint64 time;
    g_variant_get_child (v, i, "(t&s&sb)", &time, &kind, &text, &truncated);
    total += strlen (text);
  }
  g_assert_cmpuint (total, <=, VD_TRANSCRIPT_TOTAL_MAX);
  g_assert_cmpuint (g_variant_n_children (v), <, 200);
}

static void
fill_report (VivariumReport *r, const gchar *id)
{
  vivarium_report_set_id (r, id);
  vivarium_report_set_task_id (r, id);
  vivarium_report_set_session_id (r, "s-0001");
  vivarium_report_set_image (r, "tiny", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  vivarium_report_set_project (r, "demo");
  vivarium_report_set_times (r, 1700000000000000, 1700000090000000);
  vivarium_report_set_host (r, "h");
  vivarium_report_set_daemon_version (r, "0.1.0");
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_DONE, NULL);
  vivarium_report_set_verification (r, NULL, VIVARIUM_VERIFY_WHOSE_NONE, -1, VIVARIUM_VERDICT_NEVER_RUN, NULL);
}

static void
test_report_model (void)
{
  g_autoptr(VivariumReport) r = vivarium_report_new ();
  g_autoptr(VivariumReport) plain = vivarium_report_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) plain_node = NULL;
  g_autoptr(VivariumReport) back = NULL;
  g_autoptr(GError) error = NULL;
  guint64 u[VIVARIUM_REPORT_MODEL_N];
  JsonObject *model;

  fill_report (r, "a1");
  vivarium_report_set_model_usage (r, 5, 1, 500, 50);
  node = vivarium_report_to_json (r);
  back = vivarium_report_from_json (node, &error);
  g_assert_no_error (error);
  g_assert_true (vivarium_report_get_model_usage (back, u));
  g_assert_cmpuint (u[VIVARIUM_REPORT_MODEL_REQUESTS], ==, 5);
  g_assert_cmpuint (u[VIVARIUM_REPORT_MODEL_REFUSED], ==, 1);
  g_assert_cmpuint (u[VIVARIUM_REPORT_MODEL_PROMPT_TOKENS], ==, 500);
  g_assert_cmpuint (u[VIVARIUM_REPORT_MODEL_COMPLETION_TOKENS], ==, 50);

  {
    g_autofree gchar *text = vivarium_report_render_text (back, NULL);
    g_assert_nonnull (strstr (text, "\nModel: 5 requests through the gateway (1 refused); 500 prompt and 50 completion"));
  }

  /* A script task's report is as before: no "model". */
  fill_report (plain, "a2");
  plain_node = vivarium_report_to_json (plain);
  g_assert_false (json_object_has_member (json_node_get_object (plain_node), "model"));
  g_clear_object (&back);
  back = vivarium_report_from_json (plain_node, &error);
  g_assert_no_error (error);
  g_assert_false (vivarium_report_get_model_usage (back, u));

  /* Its members are checked like every other object's. */
  model = json_object_get_object_member (json_node_get_object (node), "model");
  json_object_set_int_member (model, "extra", 1);
  g_clear_object (&back);
  back = vivarium_report_from_json (node, &error);
  g_assert_null (back);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  json_object_remove_member (model, "extra");
  json_object_set_int_member (model, "requests", -1);
  back = vivarium_report_from_json (node, &error);
  g_assert_null (back);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
}

/* Arguments are a string inside the model's answer, so the gateway's depth
 * bound never reached them: 100 000 levels must be an error result, not a
 * crash in json-glib. */
static void
test_tool_call_deep (void)
{
  g_autoptr(GString) args = g_string_new ("");
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(VivariumToolCall) c = NULL;
  g_autofree gchar *why = NULL;
  VivariumAgentLimits limits;

  for (guint i = 0; i < 100000; i++)
    g_string_append_c (args, '[');
  for (guint i = 0; i < 100000; i++)
    g_string_append_c (args, ']');
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, "c1");
  json_builder_set_member_name (b, "function");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, "exec");
  json_builder_set_member_name (b, "arguments");
  json_builder_add_string_value (b, args->str);
  json_builder_end_object (b);
  json_builder_end_object (b);
  node = json_builder_get_root (b);
  vivarium_agent_limits_defaults (&limits);
  c = vivarium_agent_parse_tool_call (node, &limits, &why);
  g_assert_nonnull (c);
  g_assert_null (c->args);
  g_assert_nonnull (strstr (why, "nested deeper"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent/tool-call/valid", test_tool_call_valid);
  g_test_add_func ("/agent/tool-call/unknown", test_tool_call_unknown);
  g_test_add_func ("/agent/tool-call/malformed", test_tool_call_malformed);
  g_test_add_func ("/agent/tool-call/oversize", test_tool_call_oversize);
  g_test_add_func ("/agent/tool-call/no-id", test_tool_call_no_id);
  g_test_add_func ("/agent/tool-call/deep", test_tool_call_deep);
  g_test_add_func ("/agent/limits", test_limits);
  g_test_add_func ("/agent/guest-text", test_guest_text);
  g_test_add_func ("/agent/model/request", test_model_request);
  g_test_add_func ("/agent/model/bounds", test_model_bounds);
  g_test_add_func ("/agent/model/dropped", test_model_dropped);
  g_test_add_func ("/agent/model/timeout-cancel", test_model_timeout_cancel);
  g_test_add_func ("/agent/transcript/caps", test_transcript_caps);
  g_test_add_func ("/agent/transcript/total", test_transcript_total);
  g_test_add_func ("/agent/report-model", test_report_model);
  return g_test_run ();
}
