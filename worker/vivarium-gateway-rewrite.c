/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "vivarium-gateway-rewrite.h"
#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"

/* What a tool-calling agent needs of chat-completions, and nothing that
 * reaches past its own one answer: no "stream" (refused), no "n" > 1 (more
 * answers than the cap counts), no "logit_bias"/"logprobs" (probing the
 * model), no "store"/"metadata"/"user" (things kept upstream in the
 * operator's name), no "audio"/"modalities"/"prediction" or vendor
 * extensions the gateway has not read. "max_completion_tokens" is dropped
 * too: "max_tokens" is the bound the gateway enforces. */
const gchar *const vivarium_gateway_chat_members[] = {
  "model", "messages", "tools", "tool_choice", "parallel_tool_calls",
  "temperature", "top_p", "max_tokens", "n", "stop", "seed", "response_format",
  "frequency_penalty", "presence_penalty",
  NULL
};

static JsonObject *
parse_object (GBytes *body, JsonParser *parser)
{
  gsize len = 0;
  const gchar *data = g_bytes_get_data (body, &len);

  /* Blank text parses, to no root at all; a lone surrogate's escape to a
   * string that is not UTF-8, which would go on to the endpoint as such. */
  if (data == NULL || !vivarium_json_depth_within (data, len, VIVARIUM_GATEWAY_JSON_DEPTH_MAX) ||
      !vivarium_json_escapes_valid (data, len) ||
      !json_parser_load_from_data (parser, data, (gssize) len, NULL) ||
      json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return NULL;
  return json_node_get_object (json_parser_get_root (parser));
}

static gboolean
is_integer (JsonNode *node)
{
  return node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64;
}

/* The worker's own choices that the gateway refuses rather than rewrites. */
static gboolean
check_request (JsonObject *o, const VivariumGatewayPolicy *policy, gchar **why)
{
  JsonNode *model = json_object_get_member (o, "model");
  JsonNode *max_tokens = json_object_get_member (o, "max_tokens");
  JsonNode *messages = json_object_get_member (o, "messages");
  JsonNode *stream = json_object_get_member (o, "stream");

  if (model != NULL && !JSON_NODE_HOLDS_NULL (model) &&
      (json_node_get_value_type (model) != G_TYPE_STRING || g_strcmp0 (json_node_get_string (model), policy->model) != 0)) {
    *why = g_strdup ("this gateway serves one model; the request named another");
    return FALSE;
  }
  /* json-glib's _with_default() calls a non-value member a programming
   * error (a critical); the worker's body is not our program. */
  if (stream != NULL && JSON_NODE_HOLDS_VALUE (stream) && json_node_get_boolean (stream)) {
    *why = g_strdup ("streaming is not served");
    return FALSE;
  }
  if (messages == NULL || !JSON_NODE_HOLDS_ARRAY (messages)) {
    *why = g_strdup ("the request has no \"messages\" array");
    return FALSE;
  }
  if (max_tokens != NULL && (!is_integer (max_tokens) || json_node_get_int (max_tokens) < 1)) {
    *why = g_strdup ("\"max_tokens\" must be a whole number from 1");
    return FALSE;
  }
  return TRUE;
}

GBytes *
vivarium_gateway_rewrite_chat (GBytes *body, const VivariumGatewayPolicy *policy, gchar **why)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  JsonObject *in = parse_object (body, parser);
  JsonObject *out;
  gsize len = 0;
  gchar *text;

  if (in == NULL) {
    *why = g_strdup_printf ("the request is not a JSON object nested at most %u levels",
                            VIVARIUM_GATEWAY_JSON_DEPTH_MAX);
    return NULL;
  }
  if (!check_request (in, policy, why))
    return NULL;
  root = json_node_init_object (json_node_alloc (), json_object_new ());
  out = json_node_get_object (root);
  json_object_unref (out);   /* the node holds it */
  for (guint i = 0; vivarium_gateway_chat_members[i] != NULL; i++) {
    JsonNode *member = json_object_get_member (in, vivarium_gateway_chat_members[i]);
    if (member != NULL)
      json_object_set_member (out, vivarium_gateway_chat_members[i], json_node_copy (member));
  }
  json_object_set_string_member (out, "model", policy->model);
  if (json_object_has_member (out, "n"))
    json_object_set_int_member (out, "n", 1);
  if (!json_object_has_member (out, "max_tokens") ||
      json_object_get_int_member (out, "max_tokens") > (gint64) policy->max_tokens)
    json_object_set_int_member (out, "max_tokens", policy->max_tokens);
  json_generator_set_root (gen, root);
  text = json_generator_to_data (gen, &len);
  return g_bytes_new_take (text, len);
}

static guint64
count_member (JsonObject *usage, const gchar *name)
{
  JsonNode *n = json_object_get_member (usage, name);

  return is_integer (n) && json_node_get_int (n) > 0 ? (guint64) json_node_get_int (n) : 0;
}

gboolean
vivarium_gateway_check_response (GBytes *body, guint64 *prompt, guint64 *completion, gchar **why)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o = parse_object (body, parser);
  JsonNode *usage;

  *prompt = *completion = 0;
  if (o == NULL) {
    *why = g_strdup_printf ("the model's answer is not a JSON object nested at most %u levels",
                            VIVARIUM_GATEWAY_JSON_DEPTH_MAX);
    return FALSE;
  }
  usage = json_object_get_member (o, "usage");
  if (usage != NULL && JSON_NODE_HOLDS_OBJECT (usage)) {
    *prompt = count_member (json_node_get_object (usage), "prompt_tokens");
    *completion = count_member (json_node_get_object (usage), "completion_tokens");
  }
  return TRUE;
}

GBytes *
vivarium_gateway_error_body (const gchar *text)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  gsize len = 0;
  gchar *data;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "error");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "message");
  json_builder_add_string_value (b, text);
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  data = json_generator_to_data (gen, &len);
  return g_bytes_new_take (data, len);
}

GBytes *
vivarium_gateway_upstream_error (guint status)
{
  g_autofree gchar *text = NULL;

  if (status == 429)
    text = g_strdup ("the model endpoint is busy or over its own limit (status 429); try again later");
  else if (status == 401 || status == 403)
    text = g_strdup_printf ("the model endpoint refused the gateway's credentials (status %u)", status);
  else if (status >= 500)
    text = g_strdup_printf ("the model endpoint failed (status %u)", status);
  else
    text = g_strdup_printf ("the model endpoint refused the request (status %u)", status);
  return vivarium_gateway_error_body (text);
}

static const gchar *const usage_keys[] = {
  "Attempts", "Requests", "Refused", "PromptTokens", "CompletionTokens", NULL
};

static guint64 *
usage_field (VivariumGatewayUsage *usage, guint i)
{
  guint64 *fields[] = { &usage->attempts, &usage->requests, &usage->refused,
                        &usage->prompt_tokens, &usage->completion_tokens };

  return fields[i];
}

gchar *
vivarium_gateway_usage_to_text (const VivariumGatewayUsage *usage)
{
  GString *s = g_string_new ("[Usage]\n");
  VivariumGatewayUsage copy = *usage;

  for (guint i = 0; usage_keys[i] != NULL; i++)
    g_string_append_printf (s, "%s=%" G_GUINT64_FORMAT "\n", usage_keys[i], *usage_field (&copy, i));
  return g_string_free (s, FALSE);
}

gboolean
vivarium_gateway_usage_parse (const gchar *text, VivariumGatewayUsage *usage)
{
  g_autoptr(GKeyFile) kf = g_key_file_new ();

  memset (usage, 0, sizeof *usage);
  if (text == NULL || !g_key_file_load_from_data (kf, text, -1, G_KEY_FILE_NONE, NULL))
    return FALSE;
  for (guint i = 0; usage_keys[i] != NULL; i++) {
    g_autofree gchar *value = g_key_file_get_value (kf, "Usage", usage_keys[i], NULL);
    guint64 v = 0;
    if (value == NULL || !g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64, &v, NULL)) {
      memset (usage, 0, sizeof *usage);
      return FALSE;
    }
    *usage_field (usage, i) = v;
  }
  return TRUE;
}
