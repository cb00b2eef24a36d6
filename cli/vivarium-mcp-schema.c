/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include <string.h>
#include <gio/gio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-mcp-schema.h"
#include "vivarium-mcp-tools.h"

#define TOOLS_RESOURCE "/org/vivarium/mcp/vivarium-mcp-tools.json"

struct _VmcpSchema {
  JsonNode   *root;
  JsonObject *tools;        /* name → the tool as tools/list shows it */
  GPtrArray  *names;        /* NULL-terminated */
};

/* The limits the file names by token: each is defined once, in common/. */
static const struct {
  const gchar *token;
  guint        value;
} limits[] = {
  { "@VIVARIUM_NAME_MAX@", VIVARIUM_NAME_MAX },
  { "@VIVARIUM_PROJECT_NAME_MAX@", VIVARIUM_PROJECT_NAME_MAX },
  { "@VIVARIUM_TASK_INSTRUCTIONS_MAX@", VIVARIUM_TASK_INSTRUCTIONS_MAX },
  { "@VIVARIUM_TASK_ANSWER_MAX@", VIVARIUM_TASK_ANSWER_MAX },
  { "@VIVARIUM_TASK_WAIT_MAX_SEC@", VIVARIUM_TASK_WAIT_MAX_SEC },
  { "@VIVARIUM_REPORT_VERIFY_CMD_MAX@", VIVARIUM_REPORT_VERIFY_CMD_MAX },
  { "@VMCP_WAIT_DEFAULT_SEC@", VMCP_WAIT_DEFAULT_SEC },
};

static gchar *
substitute_limits (const gchar *text)
{
  g_autoptr(GString) s = g_string_new (text);

  for (gsize i = 0; i < G_N_ELEMENTS (limits); i++) {
    g_autofree gchar *value = g_strdup_printf ("%u", limits[i].value);
    g_string_replace (s, limits[i].token, value, 0);
  }
  return g_string_free (g_steal_pointer (&s), FALSE);
}

/* identity and error are required in every result; an error result holds
 * `error` instead of the tool's own required members. */
static JsonNode *
output_schema (JsonObject *file, const gchar *kind, GError **error)
{
  JsonObject *outputs = json_object_get_object_member (file, "outputs");
  JsonObject *out = outputs != NULL && json_object_has_member (outputs, kind) ?
                    json_object_get_object_member (outputs, kind) : NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(GList) members = NULL;
  JsonObject *props;

  if (out == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "No output “%s” in the tool file", kind);
    return NULL;
  }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "object");
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "identity");
  json_builder_add_value (b, json_node_copy (json_object_get_member (file, "identity")));
  json_builder_set_member_name (b, "error");
  json_builder_add_value (b, json_node_copy (json_object_get_member (file, "error")));
  props = json_object_get_object_member (out, "properties");
  members = json_object_get_members (props);
  for (GList *l = members; l != NULL; l = l->next) {
    json_builder_set_member_name (b, l->data);
    json_builder_add_value (b, json_node_copy (json_object_get_member (props, l->data)));
  }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "required");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "identity");
  json_builder_end_array (b);
  json_builder_set_member_name (b, "oneOf");
  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "required");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "error");
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "required");
  json_builder_add_value (b, json_node_copy (json_object_get_member (out, "required")));
  json_builder_set_member_name (b, "not");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "required");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "error");
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "additionalProperties");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
tool_definition (JsonObject *file, JsonObject *tool, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  JsonNode *output = output_schema (file, json_object_get_string_member (tool, "output"), error);
  gboolean read_only = json_object_get_boolean_member_with_default (tool, "readOnly", FALSE);

  if (output == NULL)
    return NULL;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, json_object_get_string_member (tool, "name"));
  json_builder_set_member_name (b, "title");
  json_builder_add_string_value (b, json_object_get_string_member (tool, "title"));
  json_builder_set_member_name (b, "description");
  json_builder_add_string_value (b, json_object_get_string_member (tool, "description"));
  json_builder_set_member_name (b, "inputSchema");
  json_builder_add_value (b, json_node_copy (json_object_get_member (tool, "inputSchema")));
  json_builder_set_member_name (b, "outputSchema");
  json_builder_add_value (b, output);
  json_builder_set_member_name (b, "annotations");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "readOnlyHint");
  json_builder_add_boolean_value (b, read_only);
  /* The machine is throwaway and the daemon only commits, never rewrites
   * history; and nothing a tool does leaves this host. */
  json_builder_set_member_name (b, "destructiveHint");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_set_member_name (b, "openWorldHint");
  json_builder_add_boolean_value (b, FALSE);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static gboolean
load_tools (VmcpSchema *self, GError **error)
{
  JsonObject *file = json_node_get_object (self->root);
  JsonArray *tools = json_object_get_array_member (file, "tools");

  self->tools = json_object_new ();
  self->names = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < json_array_get_length (tools); i++) {
    JsonObject *tool = json_array_get_object_element (tools, i);
    JsonNode *def = tool_definition (file, tool, error);

    if (def == NULL)
      return FALSE;
    g_ptr_array_add (self->names, g_strdup (json_object_get_string_member (tool, "name")));
    json_object_set_member (self->tools, json_object_get_string_member (tool, "name"), def);
  }
  g_ptr_array_add (self->names, NULL);
  return TRUE;
}

VmcpSchema *
vmcp_schema_load (GError **error)
{
  g_autoptr(VmcpSchema) self = g_new0 (VmcpSchema, 1);
  g_autoptr(GBytes) bytes = g_resources_lookup_data (TOOLS_RESOURCE, 0, error);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree gchar *text = NULL;

  if (bytes == NULL)
    return NULL;
  text = substitute_limits (g_bytes_get_data (bytes, NULL));
  if (!json_parser_load_from_data (parser, text, -1, error))
    return NULL;
  self->root = json_node_ref (json_parser_get_root (parser));
  if (!load_tools (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

void
vmcp_schema_free (VmcpSchema *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->root, json_node_unref);
  g_clear_pointer (&self->tools, json_object_unref);
  g_clear_pointer (&self->names, g_ptr_array_unref);
  g_free (self);
}

const gchar * const *
vmcp_schema_tool_names (VmcpSchema *self)
{
  return (const gchar * const *) self->names->pdata;
}

JsonNode *
vmcp_schema_tool_definition (VmcpSchema *self, const gchar *name)
{
  JsonNode *def = json_object_get_member (self->tools, name);
  g_autofree gchar *text = NULL;

  /* A deep copy: json_node_copy shares the objects inside, and a caller
   * that narrows its copy must not narrow the schema. */
  if (def == NULL)
    return NULL;
  text = json_to_string (def, FALSE);
  return json_from_string (text, NULL);
}

/* --- arguments ------------------------------------------------------------ */

static gboolean
check_string (const gchar *member, JsonObject *schema, JsonNode *value, GError **error)
{
  const gchar *text;
  gsize len;

  if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” must be a string", member);
    return FALSE;
  }
  text = json_node_get_string (value);
  len = strlen (text);
  if (json_object_has_member (schema, "minLength") &&
      len < (gsize) json_object_get_int_member (schema, "minLength")) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” is empty", member);
    return FALSE;
  }
  if (json_object_has_member (schema, "maxLength") &&
      len > (gsize) json_object_get_int_member (schema, "maxLength")) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "“%s” is %" G_GSIZE_FORMAT " bytes long; the limit is %" G_GINT64_FORMAT,
                 member, len, json_object_get_int_member (schema, "maxLength"));
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_integer (const gchar *member, JsonObject *schema, JsonNode *value, GError **error)
{
  gint64 n;

  if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_INT64) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” must be an integer", member);
    return FALSE;
  }
  n = json_node_get_int (value);
  if ((json_object_has_member (schema, "minimum") && n < json_object_get_int_member (schema, "minimum")) ||
      (json_object_has_member (schema, "maximum") && n > json_object_get_int_member (schema, "maximum"))) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "“%s” must be between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                 member, json_object_get_int_member_with_default (schema, "minimum", G_MININT64),
                 json_object_get_int_member_with_default (schema, "maximum", G_MAXINT64));
    return FALSE;
  }
  return TRUE;
}

/* A string schema may name its values ("enum"). */
static gboolean
check_enum (const gchar *member, JsonObject *schema, JsonNode *value, GError **error)
{
  JsonArray *values = json_object_has_member (schema, "enum") ? json_object_get_array_member (schema, "enum") : NULL;
  const gchar *text = json_node_get_string (value);

  for (guint i = 0; values != NULL && i < json_array_get_length (values); i++)
    if (g_strcmp0 (json_array_get_string_element (values, i), text) == 0)
      return TRUE;
  if (values == NULL)
    return TRUE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” is not one of its allowed values", member);
  return FALSE;
}

static gboolean check_member (const gchar *member, JsonObject *schema, JsonNode *value, GError **error);

static gboolean
check_array (const gchar *member, JsonObject *schema, JsonNode *value, GError **error)
{
  JsonObject *items = json_object_get_object_member (schema, "items");
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (value)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” must be an array", member);
    return FALSE;
  }
  array = json_node_get_array (value);
  if (json_object_has_member (schema, "maxItems") &&
      json_array_get_length (array) > (guint) json_object_get_int_member (schema, "maxItems")) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "“%s” has more than %" G_GINT64_FORMAT " items",
                 member, json_object_get_int_member (schema, "maxItems"));
    return FALSE;
  }
  for (guint i = 0; i < json_array_get_length (array); i++)
    if (items == NULL || g_str_equal (json_object_get_string_member_with_default (items, "type", ""), "array") ||
        !check_member (member, items, json_array_get_element (array, i), error))
      return items == NULL ? (g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                           "The schema of “%s” has no items", member), FALSE)
                           : FALSE;
  return TRUE;
}

static gboolean
check_member (const gchar *member, JsonObject *schema, JsonNode *value, GError **error)
{
  const gchar *type = json_object_get_string_member_with_default (schema, "type", "");

  if (g_str_equal (type, "string"))
    return check_string (member, schema, value, error) && check_enum (member, schema, value, error);
  if (g_str_equal (type, "array"))
    return check_array (member, schema, value, error);
  if (g_str_equal (type, "integer"))
    return check_integer (member, schema, value, error);
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The schema of “%s” has no checker", member);
  return FALSE;
}

gboolean
vmcp_schema_check_arguments (VmcpSchema *self, const gchar *name, JsonObject *arguments,
                             const gchar * const *optional, GError **error)
{
  JsonNode *def = json_object_get_member (self->tools, name);
  JsonObject *input = json_object_get_object_member (json_node_get_object (def), "inputSchema");
  JsonObject *props = json_object_get_object_member (input, "properties");
  JsonArray *required = json_object_has_member (input, "required") ?
                        json_object_get_array_member (input, "required") : NULL;
  g_autoptr(GList) members = arguments != NULL ? json_object_get_members (arguments) : NULL;

  for (GList *l = members; l != NULL; l = l->next) {
    if (!json_object_has_member (props, l->data)) {
      g_autofree gchar *shown = vivarium_report_escape_untrusted (l->data, TRUE);
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "%s takes no argument %.200s", name, shown);
      return FALSE;
    }
    if (!check_member (l->data, json_object_get_object_member (props, l->data),
                       json_object_get_member (arguments, l->data), error))
      return FALSE;
  }
  for (guint i = 0; required != NULL && i < json_array_get_length (required); i++) {
    const gchar *member = json_array_get_string_element (required, i);
    if (optional != NULL && g_strv_contains (optional, member))
      continue;
    if (arguments == NULL || !json_object_has_member (arguments, member)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "%s needs the argument “%s”", name, member);
      return FALSE;
    }
  }
  return TRUE;
}
