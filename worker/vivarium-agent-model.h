/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

/* The agent's client of its model gateway (libsoup 3): a SoupSession whose
 * every connection goes to the task's unix socket, one request per
 * connection (the gateway answers each with Content-Length and closes), no
 * proxy, no content decoding, every size capped. The sentences of its
 * refusals are those of the hand-written client it replaced ("HTTP: …"). */

/* The reply's head (status line and headers) larger than this is refused. */
#define VIVARIUM_AGENT_MODEL_HEAD_MAX (16 * 1024)
/* Connecting is tried this many times, 100 ms apart: the gateway binds the
 * socket soon after the daemon asked for it, or comes back after a crash. */
#define VIVARIUM_AGENT_MODEL_CONNECT_TRIES 100

typedef struct {
  guint   status;
  GBytes *body;
} VivariumAgentReply;

void                vivarium_agent_reply_free        (VivariumAgentReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumAgentReply, vivarium_agent_reply_free)

SoupSession        *vivarium_agent_model_session_new (const gchar  *socket_path);

/* POSTs @body (JSON) to @path and reads the reply. A body over @max_body
 * fails with G_IO_ERROR_MESSAGE_TOO_LARGE, a head over the bound too; a
 * connection the gateway closed before its answer with
 * G_IO_ERROR_CONNECTION_CLOSED (the agent asks once more); no byte for
 * @timeout_sec seconds (0: no bound) with G_IO_ERROR_TIMED_OUT; @cancellable
 * with G_IO_ERROR_CANCELLED, also while it waits for the socket. */
VivariumAgentReply *vivarium_agent_model_post        (SoupSession  *session,
                                                      const gchar  *path,
                                                      GBytes       *body,
                                                      gsize         max_body,
                                                      guint         timeout_sec,
                                                      GCancellable *cancellable,
                                                      GError      **error);

G_END_DECLS
