/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model gateway's pure parts (worker/vivarium-gateway-rewrite.c): the
 * rewrite of the worker's chat-completions body, the check of the model's
 * answer, the usage file. The HTTP layer is libsoup's; what the gateway
 * decides about the bytes is here. The input is a request body; the same
 * bytes are read as an answer and as a usage file.
 *
 * Checked: a refusal says why in UTF-8; a forwarded body is a JSON object
 * holding only the allow-listed members, the policy's model, no "stream",
 * "n" 1 when present, "max_tokens" an integer from 1 to the policy's; the
 * rewrite of a rewritten body is the same JSON (nothing the first pass let through
 * changes on a second); token counts are read only from a JSON object. */

#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "fuzz-common.h"
#include "vivarium-gateway-rewrite.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

static void
check_forwarded (GBytes *body, const VivariumGatewayPolicy *policy)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *o;
  JsonNode *max_tokens;
  g_autoptr(GList) names = NULL;

  g_assert_true (json_parser_load_from_data (parser, g_bytes_get_data (body, NULL),
                                             (gssize) g_bytes_get_size (body), &error));
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  o = json_node_get_object (json_parser_get_root (parser));
  names = json_object_get_members (o);
  for (GList *l = names; l != NULL; l = l->next)
    g_assert_true (g_strv_contains (vivarium_gateway_chat_members, l->data));
  g_assert_cmpstr (json_object_get_string_member (o, "model"), ==, policy->model);
  g_assert_false (json_object_has_member (o, "stream"));
  g_assert_true (JSON_NODE_HOLDS_ARRAY (json_object_get_member (o, "messages")));
  if (json_object_has_member (o, "n"))
    g_assert_cmpint (json_object_get_int_member (o, "n"), ==, 1);
  max_tokens = json_object_get_member (o, "max_tokens");
  g_assert_true (max_tokens != NULL && JSON_NODE_HOLDS_VALUE (max_tokens) &&
                 json_node_get_value_type (max_tokens) == G_TYPE_INT64);
  g_assert_cmpint (json_node_get_int (max_tokens), >=, 1);
  g_assert_cmpint (json_node_get_int (max_tokens), <=, policy->max_tokens);
}

/* The same JSON value (the member order may differ: a second pass finds
 * "model" in the body and keeps the allow-list's order). */
static gboolean
same_json (GBytes *a, GBytes *b)
{
  g_autoptr(JsonParser) pa = json_parser_new ();
  g_autoptr(JsonParser) pb = json_parser_new ();

  g_assert_true (json_parser_load_from_data (pa, g_bytes_get_data (a, NULL), (gssize) g_bytes_get_size (a), NULL));
  g_assert_true (json_parser_load_from_data (pb, g_bytes_get_data (b, NULL), (gssize) g_bytes_get_size (b), NULL));
  return json_node_equal (json_parser_get_root (pa), json_parser_get_root (pb));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* The input's length picks the bound, so both sides of it are reached. */
  const VivariumGatewayPolicy policy = { "qwen2.5-coder:7b", 1 + (guint) (size % 4096) };
  g_autoptr(GBytes) body = g_bytes_new (data, size);
  g_autoptr(GBytes) out = NULL;
  g_autofree gchar *why = NULL;
  g_autofree gchar *text = NULL;
  guint64 prompt = 1, completion = 1;
  VivariumGatewayUsage usage;

  out = vivarium_gateway_rewrite_chat (body, &policy, &why);
  if (out == NULL) {
    g_assert_nonnull (why);
    g_assert_true (g_utf8_validate (why, -1, NULL));
  } else {
    g_autoptr(GBytes) again = NULL;
    g_autofree gchar *why_again = NULL;
    g_assert_null (why);
    check_forwarded (out, &policy);
    again = vivarium_gateway_rewrite_chat (out, &policy, &why_again);
    g_assert_nonnull (again);
    g_assert_true (same_json (out, again));
  }
  g_clear_pointer (&why, g_free);

  if (!vivarium_gateway_check_response (body, &prompt, &completion, &why)) {
    g_assert_nonnull (why);
    g_assert_true (prompt == 0 && completion == 0);
  } else {
    g_assert_cmpuint (prompt, <=, G_MAXINT64);
    g_assert_cmpuint (completion, <=, G_MAXINT64);
  }

  /* The usage file is the gateway's own; a restart reads it back. */
  text = fuzz_string (data, size);
  if (vivarium_gateway_usage_parse (text, &usage)) {
    g_autofree gchar *written = vivarium_gateway_usage_to_text (&usage);
    VivariumGatewayUsage back;
    g_assert_true (vivarium_gateway_usage_parse (written, &back));
    g_assert_true (memcmp (&usage, &back, sizeof usage) == 0);
  }
  return 0;
}
