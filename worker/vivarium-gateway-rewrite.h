/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* What vivarium-gateway does to the bytes that pass through it, as pure
 * functions (no sockets, no configuration files), so unit tests reach them
 * without a worker, a guest or a model. */

/* Chat-completions requests and responses nest a few levels (messages →
 * content parts → image_url; tools → parameters → a JSON Schema); tool-call
 * arguments travel as strings. Deeper than this is refused before json-glib
 * (which recurses) sees it. */
#define VIVARIUM_GATEWAY_JSON_DEPTH_MAX 64

typedef struct {
  const gchar *model;        /* [Agent] Model=: every request goes to it */
  guint        max_tokens;   /* [Agent] MaxTokens=: the most a request may ask for */
} VivariumGatewayPolicy;

/* The request body the endpoint gets, made from the worker's: only the
 * members of the allow-list below, the model forced to @policy->model (a
 * request naming another is refused), "n" 1, "max_tokens" at most
 * @policy->max_tokens (set to it when absent), no streaming. NULL with @why
 * (a sentence for the worker) when refused. */
GBytes   *vivarium_gateway_rewrite_chat   (GBytes                      *body,
                                           const VivariumGatewayPolicy *policy,
                                           gchar                      **why);
/* The members forwarded (the rest are dropped), NULL-terminated. */
extern const gchar *const vivarium_gateway_chat_members[];

/* Reads the token counts of a 200 answer's "usage" into @prompt and
 * @completion (0 when absent). FALSE, with @why, when the answer is not a
 * JSON object within the depth bound: the gateway then refuses to pass it on. */
gboolean  vivarium_gateway_check_response (GBytes   *body,
                                           guint64  *prompt,
                                           guint64  *completion,
                                           gchar   **why);

/* A JSON body {"error": {"message": TEXT}}, as chat-completions servers
 * send: how the gateway says each of its refusals. */
GBytes   *vivarium_gateway_error_body     (const gchar *text);

/* The body the worker gets instead of an endpoint's error answer (status
 * @status kept): the gateway's own sentence, never the endpoint's words. */
GBytes   *vivarium_gateway_upstream_error (guint status);

/* A task's counters, persisted by the gateway so that a restart of it
 * neither resets the task's request cap nor undercounts the report. */
typedef struct {
  guint64 attempts;            /* every request the worker made: what the cap counts */
  guint64 requests;            /* forwarded to the endpoint */
  guint64 refused;
  guint64 prompt_tokens;
  guint64 completion_tokens;
} VivariumGatewayUsage;

gchar    *vivarium_gateway_usage_to_text  (const VivariumGatewayUsage *usage);
/* FALSE when @text is not usage the gateway wrote (then @usage is zeroed). */
gboolean  vivarium_gateway_usage_parse    (const gchar          *text,
                                           VivariumGatewayUsage *usage);

G_END_DECLS
