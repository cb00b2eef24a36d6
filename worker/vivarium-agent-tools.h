/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The agent's limits (agent.conf, [Agent]) and the checks on what a model
 * sends: pure functions, so the unit tests reach them without a model. */
typedef struct {
  gdouble temperature;
  guint   max_turns;          /* model requests per task */
  guint   max_tokens;         /* max_tokens of each request */
  guint   wall_clock_sec;
  gsize   max_tool_call_bytes;
  gsize   guest_output_max;   /* bytes of guest output fed back per stream */
  guint   max_errors;         /* error tool results in a row before giving up */
  guint   max_repeats;        /* the same call in a row before it is refused */
  guint   exec_timeout_max;
  gboolean takes_images;      /* screenshots go to the model as images */
} VivariumAgentLimits;

void      vivarium_agent_limits_defaults (VivariumAgentLimits *limits);
/* Reads [Agent] of @kf over the defaults; values out of range are errors. */
gboolean  vivarium_agent_limits_load     (VivariumAgentLimits *limits,
                                          GKeyFile            *kf,
                                          GError             **error);

/* A tool call as the model sent it, checked. On refusal @error_text says
 * why, for the model (as the tool result) and the transcript. */
typedef struct {
  gchar      *id;
  gchar      *name;
  gchar      *arguments;   /* the raw JSON text, as sent */
  JsonObject *args;        /* parsed, when it parsed */
} VivariumToolCall;

void      vivarium_tool_call_free (VivariumToolCall *call);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumToolCall, vivarium_tool_call_free)

/* The tools the agent knows (the names in tools.json). */
gboolean  vivarium_agent_tool_known      (const gchar *name);
/* Parses one element of message.tool_calls. Returns NULL and sets
 * @error_text when the call cannot even be answered (no id). Otherwise a
 * call whose @error_text, when set, is the error tool result to send. */
VivariumToolCall *vivarium_agent_parse_tool_call (JsonNode                  *node,
                                                  const VivariumAgentLimits *limits,
                                                  gchar                    **error_text);
/* Guest bytes as a JSON-safe, capped string (invalid UTF-8 replaced). */
gchar    *vivarium_agent_guest_text      (const guint8 *data,
                                          gsize         len,
                                          gsize         cap,
                                          gboolean     *truncated);

G_END_DECLS
