/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What vivarium-gateway does to the bytes it passes on (the model forced,
 * the member allow-list, the n and max_tokens clamps, the depth bound on
 * requests and answers, the endpoint's error text replaced, the counters it
 * persists), the shared JSON depth pre-check, and the configuration layers
 * with the shipped defaults.conf: no gateway, no model, no bus. */

#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-config-layers.h"
#include "vivarium-denylist.h"
#include "vivarium-gateway-resolver.h"
#include "vivarium-gateway-rewrite.h"
#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"

#define MODEL "served-model"
#define DEEP 100000

static const VivariumGatewayPolicy policy = { MODEL, 4096 };

/* The rewritten request as an object, or NULL with @why. */
static JsonObject *
rewrite (const gchar *json, gchar **why)
{
  g_autoptr(GBytes) in = g_bytes_new (json, strlen (json));
  g_autoptr(GBytes) out = vivarium_gateway_rewrite_chat (in, &policy, why);
  g_autoptr(JsonParser) p = json_parser_new ();

  if (out == NULL) {
    g_assert_nonnull (*why);
    return NULL;
  }
  g_assert_null (*why);
  g_assert_true (json_parser_load_from_data (p, g_bytes_get_data (out, NULL), (gssize) g_bytes_get_size (out), NULL));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p)));
  return json_object_ref (json_node_get_object (json_parser_get_root (p)));
}

/* '[' × n, then a 1, then ']' × n */
static gchar *
nested (guint n)
{
  GString *s = g_string_sized_new (2 * n + 2);

  for (guint i = 0; i < n; i++)
    g_string_append_c (s, '[');
  g_string_append_c (s, '1');
  for (guint i = 0; i < n; i++)
    g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* --- the model ------------------------------------------------------------------ */

static void
test_model_other_refused (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(JsonObject) o = rewrite ("{\"model\":\"other-model\",\"messages\":[]}", &why);

  g_assert_null (o);
  g_assert_nonnull (strstr (why, "serves one model"));
}

static void
test_model_absent_forced (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(JsonObject) o = rewrite ("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &why);

  g_assert_nonnull (o);
  g_assert_cmpstr (json_object_get_string_member (o, "model"), ==, MODEL);
}

static void
test_model_same_kept (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(JsonObject) o = rewrite ("{\"model\":\"" MODEL "\",\"messages\":[]}", &why);

  g_assert_nonnull (o);
  g_assert_cmpstr (json_object_get_string_member (o, "model"), ==, MODEL);
}

static void
test_model_not_a_string_refused (void)
{
  const gchar *bodies[] = {
    "{\"model\":[\"" MODEL "\"],\"messages\":[]}",
    "{\"model\":{\"name\":\"" MODEL "\"},\"messages\":[]}",
    "{\"model\":7,\"messages\":[]}",
    /* a prefix, a suffix, another case: another model */
    "{\"model\":\"served\",\"messages\":[]}",
    "{\"model\":\"" MODEL "-2\",\"messages\":[]}",
    "{\"model\":\"SERVED-MODEL\",\"messages\":[]}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++) {
    g_autofree gchar *why = NULL;
    g_autoptr(JsonObject) o = rewrite (bodies[i], &why);
    g_assert_null (o);
  }
}

static void
test_refusals (void)
{
  const gchar *bodies[] = {
    "{\"messages\":[],\"stream\":true}",
    "{\"model\":\"" MODEL "\"}",                          /* no messages */
    "{\"messages\":\"hello\"}",                           /* not an array */
    "[1,2,3]", "\"text\"", "not json", "",
    /* Found by tests/fuzz/fuzz-gateway-chat: blank text parses to no root
     * (json-glib was critical about it). */
    " ", "\n\t",
    /* Half a surrogate pair: json-glib makes a string that is not UTF-8 of
     * it, and wrote the endpoint a body that was not (tests/fuzz). */
    "{\"messages\":[{\"role\":\"user\",\"\\ud800t\":\"hi\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\\ud800\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ma\\udEchine\"}]}",
    "{\"messages\":[],\"max_tokens\":0}",
    "{\"messages\":[],\"max_tokens\":-5}",
    "{\"messages\":[],\"max_tokens\":\"lots\"}",
    "{\"messages\":[],\"max_tokens\":10.5}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++) {
    g_autofree gchar *why = NULL;
    g_autoptr(JsonObject) o = rewrite (bodies[i], &why);
    g_assert_null (o);
  }
}

/* A "stream" that is an array or an object asks for nothing json-glib's
 * boolean getter can read (it was critical about it, tests/fuzz); it is
 * not a request to stream, and is dropped like every member off the list. */
static void
test_stream_not_a_value (void)
{
  const gchar *bodies[] = {
    "{\"messages\":[],\"stream\":[]}",
    "{\"messages\":[],\"stream\":{\"on\":true}}",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bodies); i++) {
    g_autofree gchar *why = NULL;
    g_autoptr(JsonObject) o = rewrite (bodies[i], &why);
    g_assert_nonnull (o);
    g_assert_false (json_object_has_member (o, "stream"));
  }
}

/* The check under every reader's refusal of half a surrogate pair. */
static void
test_json_escapes (void)
{
  const gchar *good[] = { "", "{\"a\":\"\\u00e9\\ud83d\\ude00\"}", "\"\\\\ud800\"", "\\n\\t", "\"\\uD83D\\uDE00\"" };
  /* json-glib read "\udEch" as a surrogate: four hex digits or nothing. */
  const gchar *bad[] = { "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"", "\"\\uDBFF",
                         "\\\\\\ud800", "\"\\udEch\"", "\"\\u12\"", "\\u" };

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    g_assert_true (vivarium_json_escapes_valid (good[i], strlen (good[i])));
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    g_assert_false (vivarium_json_escapes_valid (bad[i], strlen (bad[i])));
}

/* --- the members -------------------------------------------------------------------- */

static void
test_member_allow_list (void)
{
  g_autofree gchar *why = NULL;
  g_autoptr(JsonObject) o = rewrite (
    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"exec\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"temperature\":0.2,\"top_p\":0.9,"
    "\"stop\":[\"END\"],\"seed\":42,\"response_format\":{\"type\":\"text\"},"
    "\"frequency_penalty\":0.1,\"presence_penalty\":0.3,"
    "\"stream\":false,\"stream_options\":{\"include_usage\":true},\"logit_bias\":{\"50256\":100},"
    "\"logprobs\":true,\"top_logprobs\":20,\"store\":true,\"metadata\":{\"a\":\"b\"},\"user\":\"someone\","
    "\"max_completion_tokens\":999999,\"audio\":{},\"modalities\":[\"audio\"],\"prediction\":{},"
    "\"extra_body\":{\"x\":1},\"options\":{\"num_ctx\":1000000}}", &why);
  g_autoptr(GList) members = NULL;
  const gchar *kept[] = { "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p",
                          "stop", "seed", "response_format", "frequency_penalty", "presence_penalty", "max_tokens" };

  g_assert_nonnull (o);
  for (gsize i = 0; i < G_N_ELEMENTS (kept); i++)
    g_assert_true (json_object_has_member (o, kept[i]));
  /* Nothing else: every member the worker sent outside the list is gone. */
  members = json_object_get_members (o);
  g_assert_cmpuint (g_list_length (members), ==, G_N_ELEMENTS (kept));
  for (GList *l = members; l != NULL; l = l->next)
    g_assert_true (g_strv_contains (vivarium_gateway_chat_members, l->data));
  /* Kept members keep their values. */
  g_assert_cmpint (json_object_get_int_member (o, "seed"), ==, 42);
  g_assert_cmpfloat (json_object_get_double_member (o, "top_p"), ==, 0.9);
  g_assert_cmpstr (json_object_get_string_member (o, "tool_choice"), ==, "auto");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "tools")), ==, 1);
}

static void
test_n_clamped (void)
{
  g_autofree gchar *why = NULL;
  g_autofree gchar *why2 = NULL;
  g_autoptr(JsonObject) five = rewrite ("{\"messages\":[],\"n\":5}", &why);
  g_autoptr(JsonObject) absent = rewrite ("{\"messages\":[]}", &why2);

  g_assert_nonnull (five);
  g_assert_cmpint (json_object_get_int_member (five, "n"), ==, 1);
  g_assert_nonnull (absent);
  g_assert_false (json_object_has_member (absent, "n"));
}

static void
test_max_tokens_clamped (void)
{
  struct { const gchar *body; gint64 want; } cases[] = {
    { "{\"messages\":[],\"max_tokens\":1000000}", 4096 },
    { "{\"messages\":[],\"max_tokens\":4097}", 4096 },
    { "{\"messages\":[],\"max_tokens\":4096}", 4096 },
    { "{\"messages\":[],\"max_tokens\":100}", 100 },
    { "{\"messages\":[]}", 4096 },   /* absent: the bound, so the endpoint's own default cannot exceed it */
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree gchar *why = NULL;
    g_autoptr(JsonObject) o = rewrite (cases[i].body, &why);
    g_assert_nonnull (o);
    g_assert_cmpint (json_object_get_int_member (o, "max_tokens"), ==, cases[i].want);
  }
}

/* --- depth ------------------------------------------------------------------------------ */

static void
test_depth_prescan (void)
{
  g_autofree gchar *deep = nested (DEEP);
  g_autofree gchar *ok = nested (VIVARIUM_GATEWAY_JSON_DEPTH_MAX);
  g_autofree gchar *over = nested (VIVARIUM_GATEWAY_JSON_DEPTH_MAX + 1);
  const gchar *quoted = "{\"a\":\"[[[[[[[[[[[[[[[[[[[[\\\"[[[[[[[[[[\"}";

  g_assert_false (vivarium_json_depth_within (deep, strlen (deep), 64));
  g_assert_true (vivarium_json_depth_within (ok, strlen (ok), VIVARIUM_GATEWAY_JSON_DEPTH_MAX));
  g_assert_false (vivarium_json_depth_within (over, strlen (over), VIVARIUM_GATEWAY_JSON_DEPTH_MAX));
  /* Brackets in strings (an escaped quote does not end one) do not count. */
  g_assert_true (vivarium_json_depth_within (quoted, strlen (quoted), 1));
  g_assert_false (vivarium_json_depth_within (quoted, strlen (quoted), 0));
  /* Closing brackets do not make room below zero. */
  g_assert_false (vivarium_json_depth_within ("]]]]]][[", 8, 1));
  g_assert_true (vivarium_json_depth_within ("]]]]]][", 7, 1));
}

static void
test_depth_request (void)
{
  g_autofree gchar *deep = nested (DEEP);
  g_autofree gchar *body = g_strdup_printf ("{\"messages\":[{\"role\":\"user\",\"content\":%s}]}", deep);
  g_autofree gchar *why = NULL;
  g_autoptr(JsonObject) o = rewrite (body, &why);

  g_assert_null (o);
  g_assert_nonnull (strstr (why, "nested at most 64"));
}

static void
test_depth_response (void)
{
  g_autofree gchar *deep = nested (DEEP);
  g_autofree gchar *text = g_strdup_printf ("{\"choices\":%s,\"usage\":{\"prompt_tokens\":5}}", deep);
  g_autoptr(GBytes) body = g_bytes_new (text, strlen (text));
  g_autofree gchar *why = NULL;
  guint64 prompt = 7, completion = 7;

  g_assert_false (vivarium_gateway_check_response (body, &prompt, &completion, &why));
  g_assert_nonnull (strstr (why, "nested at most 64"));
  g_assert_cmpuint (prompt, ==, 0);
}

static void
test_response_usage (void)
{
  struct { const gchar *text; gboolean ok; guint64 prompt, completion; } cases[] = {
    { "{\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10}}", TRUE, 100, 10 },
    { "{\"choices\":[]}", TRUE, 0, 0 },
    { "{\"usage\":{\"prompt_tokens\":-100,\"completion_tokens\":\"9\"}}", TRUE, 0, 0 },
    { "{\"usage\":[1,2]}", TRUE, 0, 0 },
    { "[]", FALSE, 0, 0 },
    { "<html>busy</html>", FALSE, 0, 0 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GBytes) body = g_bytes_new (cases[i].text, strlen (cases[i].text));
    g_autofree gchar *why = NULL;
    guint64 p = 1, c = 1;
    g_assert_cmpint (vivarium_gateway_check_response (body, &p, &c, &why), ==, cases[i].ok);
    g_assert_cmpuint (p, ==, cases[i].prompt);
    g_assert_cmpuint (c, ==, cases[i].completion);
  }
}

/* --- the endpoint's errors ------------------------------------------------------------------ */

static void
test_upstream_error_replaced (void)
{
  guint statuses[] = { 400, 401, 404, 429, 500, 503 };

  for (gsize i = 0; i < G_N_ELEMENTS (statuses); i++) {
    g_autoptr(GBytes) body = vivarium_gateway_upstream_error (statuses[i]);
    g_autoptr(JsonParser) p = json_parser_new ();
    g_autofree gchar *code = g_strdup_printf ("%u", statuses[i]);
    JsonObject *err;
    const gchar *message;

    g_assert_true (json_parser_load_from_data (p, g_bytes_get_data (body, NULL), (gssize) g_bytes_get_size (body),
                                               NULL));
    err = json_object_get_object_member (json_node_get_object (json_parser_get_root (p)), "error");
    message = json_object_get_string_member (err, "message");
    g_assert_true (g_str_has_prefix (message, "the model endpoint "));
    g_assert_nonnull (strstr (message, code));
  }
}

/* --- counters --------------------------------------------------------------------------------- */

static void
test_usage_round_trip (void)
{
  VivariumGatewayUsage in = { 31, 25, 6, 2500, G_MAXUINT64 };
  VivariumGatewayUsage out;
  g_autofree gchar *text = vivarium_gateway_usage_to_text (&in);
  g_autoptr(GKeyFile) kf = g_key_file_new ();

  g_assert_true (vivarium_gateway_usage_parse (text, &out));
  g_assert_cmpmem (&in, sizeof in, &out, sizeof out);
  /* The daemon's reader (vd-gateway-client.c) finds its four keys. */
  g_assert_true (g_key_file_load_from_data (kf, text, -1, 0, NULL));
  g_assert_cmpuint (g_key_file_get_uint64 (kf, "Usage", "Requests", NULL), ==, 25);
  g_assert_cmpuint (g_key_file_get_uint64 (kf, "Usage", "Refused", NULL), ==, 6);
  g_assert_cmpuint (g_key_file_get_uint64 (kf, "Usage", "PromptTokens", NULL), ==, 2500);
}

static void
test_usage_garbage (void)
{
  const gchar *texts[] = {
    "", "garbage", "[Usage]\nAttempts=1\n",
    "[Usage]\nAttempts=-1\nRequests=0\nRefused=0\nPromptTokens=0\nCompletionTokens=0\n",
    "[Usage]\nAttempts=1x\nRequests=0\nRefused=0\nPromptTokens=0\nCompletionTokens=0\n",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (texts); i++) {
    VivariumGatewayUsage out = { 1, 1, 1, 1, 1 };
    VivariumGatewayUsage zero = { 0 };
    g_assert_false (vivarium_gateway_usage_parse (texts[i], &out));
    g_assert_cmpmem (&zero, sizeof zero, &out, sizeof out);
  }
}

/* --- the configuration layers ------------------------------------------------------------------ */

static void
write_file (const gchar *dir, const gchar *name, const gchar *text)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static void
assert_value (GKeyFile *kf, const gchar *group, const gchar *key, const gchar *want)
{
  g_autofree gchar *value = g_key_file_get_value (kf, group, key, NULL);

  g_assert_cmpstr (value, ==, want);
}

static void
remove_tree (const gchar *root)
{
  g_autofree gchar *command = g_strdup_printf ("rm -rf '%s'", root);

  g_assert_cmpint (system (command), ==, 0);
}

static void
test_layers_order (void)
{
  g_autofree gchar *root = g_dir_make_tmp ("vivarium-layers-XXXXXX", NULL);
  g_autofree gchar *data = g_build_filename (root, "data", NULL);
  g_autofree gchar *conf = g_build_filename (root, "etc", NULL);
  g_autofree gchar *dropins = g_build_filename (conf, "conf.d", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GKeyFile) kf = NULL;
  g_autofree gchar *where = NULL;
  g_auto(GStrv) groups = NULL;

  g_assert_cmpint (g_mkdir_with_parents (data, 0700), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (dropins, 0700), ==, 0);
  write_file (data, "defaults.conf", "[A]\nx=defaults\ny=defaults\nz=defaults\nw=defaults\n[B]\nonly=defaults\n");
  write_file (conf, "vivarium.conf", "[A]\nx=admin\ny=admin\nz=admin\n");
  write_file (dropins, "20-b.conf", "[A]\nx=20\n");
  write_file (dropins, "10-a.conf", "[A]\nx=10\ny=10\n");
  write_file (dropins, ".50-hidden.conf", "[A]\nx=hidden\n");
  write_file (dropins, "90-z.conf.disabled", "[A]\nx=disabled\n");
  kf = vivarium_config_load_layers (data, conf, &error);
  g_assert_no_error (error);
  assert_value (kf, "A", "x", "20");
  assert_value (kf, "A", "y", "10");
  assert_value (kf, "A", "z", "admin");
  assert_value (kf, "A", "w", "defaults");
  assert_value (kf, "B", "only", "defaults");
  where = vivarium_config_layers_describe (data, conf);
  g_assert_nonnull (strstr (where, "defaults.conf"));
  g_assert_nonnull (strstr (where, "conf.d/*.conf"));

  /* A file that is not a key file stops the load, and says which. */
  write_file (dropins, "30-broken.conf", "this is not [ a key file\n");
  g_clear_pointer (&kf, g_key_file_unref);
  kf = vivarium_config_load_layers (data, conf, &error);
  g_assert_null (kf);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "30-broken.conf"));
  g_clear_error (&error);

  /* No layer at all: an empty configuration, no error. */
  g_clear_pointer (&kf, g_key_file_unref);
  kf = vivarium_config_load_layers ("/nonexistent-vivarium", "/nonexistent-vivarium", &error);
  g_assert_no_error (error);
  g_assert_nonnull (kf);
  groups = g_key_file_get_groups (kf, NULL);
  g_assert_null (groups[0]);
  remove_tree (root);
}

/* The package's defaults.conf alone makes a gateway configuration that
 * serves: a model, an http:// IP-literal endpoint, caps in range. */
static void
test_shipped_defaults (void)
{
  const gchar *data = g_getenv ("VIVARIUM_SOURCE_SERVICE_DIR");
  g_autoptr(GError) error = NULL;
  g_autoptr(GKeyFile) kf = NULL;
  g_autofree gchar *model = NULL;
  g_autofree gchar *endpoint = NULL;
  g_autoptr(GUri) uri = NULL;
  g_autoptr(GInetAddress) addr = NULL;

  g_assert_nonnull (data);
  kf = vivarium_config_load_layers (data, "/nonexistent-vivarium", &error);
  g_assert_no_error (error);
  model = g_key_file_get_string (kf, "Agent", "Model", NULL);
  endpoint = g_key_file_get_string (kf, "Agent", "Endpoint", NULL);
  g_assert_nonnull (model);
  g_assert_cmpuint (strlen (model), >, 0);
  g_assert_nonnull (endpoint);
  uri = g_uri_parse (endpoint, G_URI_FLAGS_NONE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_uri_get_scheme (uri), ==, "http");
  addr = g_inet_address_new_from_string (g_uri_get_host (uri));
  g_assert_nonnull (addr);
  /* The gateway unit's IPAddressAllow= is this address. */
  g_assert_true (g_inet_address_get_is_loopback (addr));
  g_assert_cmpuint (g_key_file_get_uint64 (kf, "Agent", "MaxTokens", NULL), >=, 16);
}

static GList *
addresses (const gchar *const *texts)
{
  GList *out = NULL;

  for (guint i = 0; texts[i] != NULL; i++)
    out = g_list_append (out, g_inet_address_new_from_string (texts[i]));
  return out;
}

static gchar *
joined (GList *list)
{
  GString *s = g_string_new (NULL);

  for (GList *l = list; l != NULL; l = l->next) {
    g_autofree gchar *text = g_inet_address_to_string (l->data);
    g_string_append_printf (s, "%s%s", s->len > 0 ? " " : "", text);
  }
  return g_string_free (s, FALSE);
}

/* What a name resolves to is checked against the guard's one deny list:
 * the denied addresses are dropped, a name with nothing else refused with
 * the range named, IPv4-mapped addresses checked as the IPv4 they are. */
static void
test_resolver_filter (void)
{
  const gchar *mixed[] = { "10.0.0.5", "203.0.113.10", "::ffff:127.0.0.1", "2001:db8::1", "169.254.169.254", NULL };
  const gchar *denied[] = { "10.0.0.5", "fd00::1", NULL };
  g_autolist(GInetAddress) in = addresses (mixed);
  g_autolist(GInetAddress) bad = addresses (denied);
  g_autolist(GInetAddress) kept = NULL;
  g_autolist(GInetAddress) none = NULL;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *text = NULL;
  g_autoptr(GInetAddress) mapped = g_inet_address_new_from_string ("::ffff:192.168.1.1");
  g_autoptr(GInetAddress) public = g_inet_address_new_from_string ("198.51.100.7");

  kept = vivarium_gateway_resolver_filter ("model.example", in, NULL, &reason);
  text = joined (kept);
  g_assert_cmpstr (text, ==, "203.0.113.10 2001:db8::1");
  g_assert_null (reason);
  none = vivarium_gateway_resolver_filter ("rebind.example", bad, NULL, &reason);
  g_assert_null (none);
  g_assert_cmpstr (reason, ==, "rebind.example resolves only into denied ranges "
                               "(10.0.0.5 is in 10.0.0.0/8, private (RFC 1918))");
  g_assert_nonnull (vivarium_denylist_match (mapped));
  g_assert_null (vivarium_denylist_match (public));
}

/* The daemon's guard adds the host's own addresses and [Guard] ExtraDeny=
 * to the built-in ranges; the gateway gets them from the daemon's file and
 * refuses a name that resolves there, naming what the range is. */
static void
test_resolver_host_deny (void)
{
  const gchar *own[] = { "203.0.113.1", NULL };
  const gchar *mixed[] = { "192.0.2.77", "198.51.100.7", "2001:db8::5", NULL };
  g_autolist(GInetAddress) to_own = addresses (own);
  g_autolist(GInetAddress) to_mixed = addresses (mixed);
  g_autolist(GInetAddress) none = NULL;
  g_autolist(GInetAddress) kept = NULL;
  g_autoptr(GPtrArray) deny = NULL;
  g_autoptr(GPtrArray) bad = NULL;
  g_autofree gchar *reason = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *many = NULL;
  g_autofree gchar *long_line = NULL;
  g_autoptr(GString) lines = g_string_new (NULL);
  g_autoptr(GError) error = NULL;

  deny = vivarium_gateway_deny_parse ("# the guard's additions\n203.0.113.1/32 one of the host's own addresses\n"
                                      "192.0.2.5/24 denied by [Guard] ExtraDeny=\n2001:db8::5/128 one of the host's "
                                      "own addresses\n", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (deny->len, ==, 3);
  none = vivarium_gateway_resolver_filter ("self.example", to_own, deny, &reason);
  g_assert_null (none);
  g_assert_cmpstr (reason, ==, "self.example resolves only into denied ranges "
                               "(203.0.113.1 is in 203.0.113.1/32, one of the host's own addresses)");
  g_clear_pointer (&reason, g_free);
  kept = vivarium_gateway_resolver_filter ("mixed.example", to_mixed, deny, &reason);
  text = joined (kept);
  g_assert_cmpstr (text, ==, "198.51.100.7");
  g_assert_null (reason);

  bad = vivarium_gateway_deny_parse ("203.0.113.1/32\n", &error);
  g_assert_null (bad);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_assert_nonnull (strstr (error->message, "line 1"));
  g_clear_error (&error);
  bad = vivarium_gateway_deny_parse ("203.0.113.1/32 ok\nnot-an-address what\n", &error);
  g_assert_null (bad);
  g_assert_nonnull (strstr (error->message, "line 2"));
  g_clear_error (&error);
  for (guint i = 0; i <= VIVARIUM_GATEWAY_DENY_MAX; i++)
    g_string_append (lines, "203.0.113.1/32 x\n");
  bad = vivarium_gateway_deny_parse (lines->str, &error);
  g_assert_null (bad);
  g_assert_nonnull (strstr (error->message, "more than 4096 lines"));
  g_clear_error (&error);
  many = g_strnfill (VIVARIUM_GATEWAY_DENY_LINE_MAX, 'x');
  long_line = g_strconcat ("203.0.113.1/32 ", many, NULL);
  bad = vivarium_gateway_deny_parse (long_line, &error);
  g_assert_null (bad);
  g_assert_nonnull (strstr (error->message, "longer than allowed"));
}

/* A name with many addresses opens the firewall to a bounded number. */
static void
test_resolver_bounded (void)
{
  GList *in = NULL;
  g_autolist(GInetAddress) kept = NULL;
  g_autofree gchar *reason = NULL;

  for (guint i = 1; i <= 200; i++) {
    g_autofree gchar *t = g_strdup_printf ("203.0.113.%u", i);
    in = g_list_append (in, g_inet_address_new_from_string (t));
  }
  kept = vivarium_gateway_resolver_filter ("many.example", in, NULL, &reason);
  g_assert_cmpuint (g_list_length (kept), ==, VIVARIUM_GATEWAY_RESOLVER_MAX);
  g_list_free_full (in, g_object_unref);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gateway/model/other-refused", test_model_other_refused);
  g_test_add_func ("/gateway/model/absent-forced", test_model_absent_forced);
  g_test_add_func ("/gateway/model/same-kept", test_model_same_kept);
  g_test_add_func ("/gateway/model/not-a-string-refused", test_model_not_a_string_refused);
  g_test_add_func ("/gateway/request/refusals", test_refusals);
  g_test_add_func ("/gateway/request/stream-not-a-value", test_stream_not_a_value);
  g_test_add_func ("/gateway/request/member-allow-list", test_member_allow_list);
  g_test_add_func ("/gateway/request/n-clamped", test_n_clamped);
  g_test_add_func ("/gateway/request/max-tokens-clamped", test_max_tokens_clamped);
  g_test_add_func ("/gateway/depth/prescan", test_depth_prescan);
  g_test_add_func ("/gateway/json-escapes", test_json_escapes);
  g_test_add_func ("/gateway/depth/request", test_depth_request);
  g_test_add_func ("/gateway/depth/response", test_depth_response);
  g_test_add_func ("/gateway/response/usage", test_response_usage);
  g_test_add_func ("/gateway/response/upstream-error-replaced", test_upstream_error_replaced);
  g_test_add_func ("/gateway/usage/round-trip", test_usage_round_trip);
  g_test_add_func ("/gateway/usage/garbage", test_usage_garbage);
  g_test_add_func ("/gateway/resolver/filter", test_resolver_filter);
  g_test_add_func ("/gateway/resolver/host-deny", test_resolver_host_deny);
  g_test_add_func ("/gateway/resolver/bounded", test_resolver_bounded);
  g_test_add_func ("/config/layers/order", test_layers_order);
  g_test_add_func ("/config/layers/shipped-defaults", test_shipped_defaults);
  return g_test_run ();
}
