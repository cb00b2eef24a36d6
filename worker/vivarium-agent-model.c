/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumAgent"

#include "config.h"

#include <string.h>
#include <gio/gunixsocketaddress.h>

#include "vivarium-agent-model.h"

/* Any host: every connection goes to the socket (remote-connectable). */
#define GATEWAY_URI "http://vivarium-gateway"

void
vivarium_agent_reply_free (VivariumAgentReply *reply)
{
  g_clear_pointer (&reply->body, g_bytes_unref);
  g_free (reply);
}

static gboolean
fail (GError **error, gint code, const gchar *what)
{
  g_set_error (error, G_IO_ERROR, code, "HTTP: %s", what);
  return FALSE;
}

SoupSession *
vivarium_agent_model_session_new (const gchar *socket_path)
{
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (socket_path);
  SoupSession *session = soup_session_new_with_options ("remote-connectable", address, "proxy-resolver", NULL,
                                                        "user-agent", "vivarium-agent", NULL);

  /* The gateway sends JSON as it is; an encoded body is not unpacked. */
  soup_session_remove_feature_by_type (session, SOUP_TYPE_CONTENT_DECODER);
  return session;
}

static SoupMessage *
request_new (const gchar *path, GBytes *body)
{
  g_autofree gchar *uri = g_strconcat (GATEWAY_URI, path, NULL);
  SoupMessage *msg = soup_message_new (SOUP_METHOD_POST, uri);
  SoupMessageHeaders *headers = soup_message_get_request_headers (msg);

  soup_message_headers_replace (headers, "Accept", "application/json");
  soup_message_headers_replace (headers, "Connection", "close");
  soup_message_set_request_body_from_bytes (msg, "application/json", body);
  return msg;
}

static void
network_event_cb (SoupMessage *msg, GSocketClientEvent event, GIOStream *connection, gpointer user_data)
{
  if (event == G_SOCKET_CLIENT_CONNECTED)
    *(gboolean *) user_data = TRUE;
}

/* 100 ms, or less when @cancellable fires. */
static gboolean
pause_before_retry (GCancellable *cancellable, GError **error)
{
  for (guint i = 0; i < 10; i++) {
    if (g_cancellable_set_error_if_cancelled (cancellable, error))
      return FALSE;
    g_usleep (10 * 1000);
  }
  return !g_cancellable_set_error_if_cancelled (cancellable, error);
}

/* Once connected, a failure before the head is the gateway dropping the
 * request (a restart, a kill): said as the old client said it, which the
 * agent takes as its cue to ask once more. */
static void
failed_after_connecting (GError *local, GError **error)
{
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT) ||
      g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED) ||
      g_error_matches (local, G_IO_ERROR, G_IO_ERROR_BROKEN_PIPE)) {
    fail (error, G_IO_ERROR_CONNECTION_CLOSED, "the peer closed the connection before the headers ended");
    return;
  }
  g_propagate_error (error, g_steal_pointer (&local));
}

/* The reply's head, or NULL. Connecting is tried again while nothing was
 * connected (nothing was sent); anything after that is not repeated here. */
static GInputStream *
send_connecting (SoupSession *session, const gchar *path, GBytes *body, GCancellable *cancellable,
                 SoupMessage **msg_out, GError **error)
{
  for (guint i = 1;; i++) {
    g_autoptr(SoupMessage) msg = request_new (path, body);
    g_autoptr(GError) local = NULL;
    gboolean connected = FALSE;
    GInputStream *in;

    g_signal_connect (msg, "network-event", G_CALLBACK (network_event_cb), &connected);
    in = soup_session_send (session, msg, cancellable, &local);
    g_signal_handlers_disconnect_by_data (msg, &connected);
    if (in != NULL) {
      *msg_out = g_steal_pointer (&msg);
      return in;
    }
    if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED) ||
        g_error_matches (local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
    if (connected) {
      failed_after_connecting (g_steal_pointer (&local), error);
      return NULL;
    }
    if (i >= VIVARIUM_AGENT_MODEL_CONNECT_TRIES) {
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "the model gateway is not reachable: ");
      return NULL;
    }
    if (!pause_before_retry (cancellable, error))
      return NULL;
  }
}

static void
add_header_size (const gchar *name, const gchar *value, gpointer user_data)
{
  *(gsize *) user_data += strlen (name) + strlen (value) + 4;
}

/* libsoup reads a head of up to 64 KiB; the agent takes 16. */
static gboolean
check_head (SoupMessage *msg, gsize max_body, GError **error)
{
  SoupMessageHeaders *headers = soup_message_get_response_headers (msg);
  const gchar *reason = soup_message_get_reason_phrase (msg);
  gsize size = strlen ("HTTP/1.1 200 \r\n\r\n") + (reason != NULL ? strlen (reason) : 0);
  SoupEncoding encoding = soup_message_headers_get_encoding (headers);

  soup_message_headers_foreach (headers, add_header_size, &size);
  if (size > VIVARIUM_AGENT_MODEL_HEAD_MAX)
    return fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the headers are larger than 16 KiB");
  if (encoding == SOUP_ENCODING_CHUNKED ||
      (soup_message_headers_get_one (headers, "Content-Encoding") != NULL &&
       g_ascii_strcasecmp (soup_message_headers_get_one (headers, "Content-Encoding"), "identity") != 0))
    return fail (error, G_IO_ERROR_NOT_SUPPORTED, "chunked or encoded bodies are not accepted");
  if (encoding == SOUP_ENCODING_CONTENT_LENGTH &&
      soup_message_headers_get_content_length (headers) > (goffset) max_body)
    return fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the body is larger than allowed");
  return TRUE;
}

/* Up to the end (its length, or the connection's close), never past @max_body. */
static GBytes *
read_body (GInputStream *in, gsize max_body, GCancellable *cancellable, GError **error)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  g_autofree guint8 *buf = g_malloc (65536);

  for (;;) {
    g_autoptr(GError) local = NULL;
    gssize n = g_input_stream_read (in, buf, 65536, cancellable, &local);
    if (n < 0 && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT)) {
      fail (error, G_IO_ERROR_CONNECTION_CLOSED, "the body ended early");
      return NULL;
    }
    if (n < 0) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
    if (n == 0)
      return g_byte_array_free_to_bytes (g_steal_pointer (&body));
    if (body->len + (gsize) n > max_body) {
      fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the body is larger than allowed");
      return NULL;
    }
    g_byte_array_append (body, buf, (guint) n);
  }
}

VivariumAgentReply *
vivarium_agent_model_post (SoupSession *session, const gchar *path, GBytes *body, gsize max_body,
                           guint timeout_sec, GCancellable *cancellable, GError **error)
{
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) in = NULL;
  g_autoptr(VivariumAgentReply) reply = g_new0 (VivariumAgentReply, 1);
  SoupMessageHeaders *headers;

  /* Each request has a connection of its own, made with the session's
   * timeout of the moment. */
  soup_session_set_timeout (session, timeout_sec);
  in = send_connecting (session, path, body, cancellable, &msg, error);
  if (in == NULL || !check_head (msg, max_body, error))
    return NULL;
  reply->status = soup_message_get_status (msg);
  reply->body = read_body (in, max_body, cancellable, error);
  if (reply->body == NULL)
    return NULL;
  /* libsoup ends a body cut short as if it were whole. */
  headers = soup_message_get_response_headers (msg);
  if (soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH &&
      soup_message_headers_get_content_length (headers) != (goffset) g_bytes_get_size (reply->body)) {
    fail (error, G_IO_ERROR_CONNECTION_CLOSED, "the body ended early");
    return NULL;
  }
  g_input_stream_close (in, NULL, NULL);
  return g_steal_pointer (&reply);
}
