/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumAgent"

#include "config.h"

#include <string.h>

#include "vivarium-agent-tools.h"
#include "vivarium-json-depth.h"

#define VIVARIUM_AGENT_ARGS_DEPTH_MAX 16

static const gchar *const tools[] = {
  "exec", "read_file", "write_file", "list_dir", "screenshot", "ask", "finish", NULL
};

void
vivarium_agent_limits_defaults (VivariumAgentLimits *limits)
{
  limits->temperature = 0.2;
  limits->max_turns = 40;
  limits->max_tokens = 4096;
  limits->wall_clock_sec = 1500;
  limits->max_tool_call_bytes = 256 * 1024;
  limits->guest_output_max = 16 * 1024;
  limits->max_errors = 5;
  limits->max_repeats = 3;
  limits->exec_timeout_max = 900;
  limits->takes_images = FALSE;
}

static gboolean
load_uint (GKeyFile *kf, const gchar *key, guint min, guint max, guint *out, GError **error)
{
  g_autoptr(GError) local = NULL;
  gint64 v;

  if (!g_key_file_has_key (kf, "Agent", key, NULL))
    return TRUE;
  v = g_key_file_get_int64 (kf, "Agent", key, &local);
  if (local != NULL || v < min || v > max) {
    g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                 "[Agent] %s must be a number from %u to %u", key, min, max);
    return FALSE;
  }
  *out = (guint) v;
  return TRUE;
}

gboolean
vivarium_agent_limits_load (VivariumAgentLimits *limits, GKeyFile *kf, GError **error)
{
  guint call_kib = (guint) (limits->max_tool_call_bytes / 1024);
  guint output_kib = (guint) (limits->guest_output_max / 1024);

  if (g_key_file_has_key (kf, "Agent", "Temperature", NULL)) {
    g_autoptr(GError) local = NULL;
    gdouble t = g_key_file_get_double (kf, "Agent", "Temperature", &local);
    if (local != NULL || t < 0.0 || t > 2.0) {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE, "[Agent] Temperature must be 0 to 2");
      return FALSE;
    }
    limits->temperature = t;
  }
  if (!load_uint (kf, "MaxTurns", 1, 1000, &limits->max_turns, error) ||
      !load_uint (kf, "MaxTokens", 16, 1000000, &limits->max_tokens, error) ||
      !load_uint (kf, "WallClockSec", 10, 86400, &limits->wall_clock_sec, error) ||
      !load_uint (kf, "MaxToolCallKiB", 1, 16384, &call_kib, error) ||
      !load_uint (kf, "GuestOutputKiB", 1, 1024, &output_kib, error) ||
      !load_uint (kf, "MaxErrors", 1, 100, &limits->max_errors, error) ||
      !load_uint (kf, "MaxRepeats", 1, 100, &limits->max_repeats, error) ||
      !load_uint (kf, "ExecTimeoutMaxSec", 1, 86400, &limits->exec_timeout_max, error))
    return FALSE;
  if (g_key_file_has_key (kf, "Agent", "TakesImages", NULL)) {
    g_autoptr(GError) local = NULL;
    limits->takes_images = g_key_file_get_boolean (kf, "Agent", "TakesImages", &local);
    if (local != NULL) {
      g_set_error (error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE, "[Agent] TakesImages must be true or false");
      return FALSE;
    }
  }
  limits->max_tool_call_bytes = (gsize) call_kib * 1024;
  limits->guest_output_max = (gsize) output_kib * 1024;
  return TRUE;
}

void
vivarium_tool_call_free (VivariumToolCall *call)
{
  g_free (call->id);
  g_free (call->name);
  g_free (call->arguments);
  g_clear_pointer (&call->args, json_object_unref);
  g_free (call);
}

gboolean
vivarium_agent_tool_known (const gchar *name)
{
  return name != NULL && g_strv_contains (tools, name);
}

static const gchar *
member_string (JsonObject *o, const gchar *name)
{
  JsonNode *n = o != NULL ? json_object_get_member (o, name) : NULL;

  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
         ? json_node_get_string (n) : NULL;
}

/* The model's text goes back to it in an error: short, and never its own
 * megabytes echoed. */
static gchar *
shown_name (const gchar *name)
{
  if (name == NULL)
    return g_strdup ("(none)");
  if (!g_utf8_validate (name, -1, NULL) || strlen (name) > 64)
    return g_strdup ("(an invalid or over-long name)");
  return g_strdup (name);
}

VivariumToolCall *
vivarium_agent_parse_tool_call (JsonNode *node, const VivariumAgentLimits *limits, gchar **error_text)
{
  g_autoptr(VivariumToolCall) call = g_new0 (VivariumToolCall, 1);
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  JsonNode *fn_node = o != NULL ? json_object_get_member (o, "function") : NULL;
  JsonObject *fn = fn_node != NULL && JSON_NODE_HOLDS_OBJECT (fn_node) ? json_node_get_object (fn_node) : NULL;
  const gchar *id = member_string (o, "id");
  const gchar *args = member_string (fn, "arguments");
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *name = shown_name (member_string (fn, "name"));

  *error_text = NULL;
  if (id == NULL || strlen (id) > 256 || !g_utf8_validate (id, -1, NULL)) {
    *error_text = g_strdup ("a tool call without a usable id");
    return NULL;
  }
  call->id = g_strdup (id);
  call->name = g_strdup (member_string (fn, "name"));
  if (args != NULL && strlen (args) > limits->max_tool_call_bytes) {
    *error_text = g_strdup_printf ("error: the arguments of %s are %zu bytes; at most %zu are accepted", name,
                                   strlen (args), limits->max_tool_call_bytes);
    return g_steal_pointer (&call);
  }
  call->arguments = g_strdup (args != NULL ? args : "");
  if (!vivarium_agent_tool_known (call->name)) {
    *error_text = g_strdup_printf ("error: there is no tool %s; the tools are exec, read_file, write_file, "
                                   "list_dir, screenshot, ask and finish", name);
    return g_steal_pointer (&call);
  }
  /* The arguments are a string in the model's answer: the gateway's depth
   * bound never saw inside it. Tools take flat objects. */
  if (args != NULL && !vivarium_json_depth_within (args, strlen (args), VIVARIUM_AGENT_ARGS_DEPTH_MAX)) {
    *error_text = g_strdup_printf ("error: the arguments of %s are nested deeper than %u levels", name,
                                   VIVARIUM_AGENT_ARGS_DEPTH_MAX);
    return g_steal_pointer (&call);
  }
  if (args == NULL || !json_parser_load_from_data (parser, args, -1, &error) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    *error_text = g_strdup_printf ("error: the arguments of %s are not a JSON object%s%s", name,
                                   error != NULL ? ": " : "", error != NULL ? error->message : "");
    return g_steal_pointer (&call);
  }
  call->args = json_object_ref (json_node_get_object (json_parser_get_root (parser)));
  return g_steal_pointer (&call);
}

gchar *
vivarium_agent_guest_text (const guint8 *data, gsize len, gsize cap, gboolean *truncated)
{
  gsize n = MIN (len, cap);

  *truncated = len > cap;
  if (data == NULL || n == 0)
    return g_strdup ("");
  return g_utf8_make_valid ((const gchar *) data, (gssize) n);
}
