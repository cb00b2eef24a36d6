/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumHttp"

#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <json-glib/json-glib.h>

#include "vivarium-http.h"

void
vivarium_http_message_free (VivariumHttpMessage *msg)
{
  g_free (msg->method);
  g_free (msg->path);
  g_clear_pointer (&msg->headers, g_hash_table_unref);
  g_clear_pointer (&msg->body, g_bytes_unref);
  g_free (msg);
}

static gboolean
fail (GError **error, gint code, const gchar *what)
{
  g_set_error (error, G_IO_ERROR, code, "HTTP: %s", what);
  return FALSE;
}

/* Byte by byte up to the blank line: never reads into the body, never
 * holds more than the cap. */
static gchar *
read_head (GInputStream *in, GError **error)
{
  GString *head = g_string_sized_new (512);

  while (head->len < VIVARIUM_HTTP_HEAD_MAX) {
    gchar c;
    gssize n = g_input_stream_read (in, &c, 1, NULL, error);
    if (n < 0) {
      g_string_free (head, TRUE);
      return NULL;
    }
    if (n == 0) {
      g_string_free (head, TRUE);
      fail (error, G_IO_ERROR_CONNECTION_CLOSED, "the peer closed the connection before the headers ended");
      return NULL;
    }
    g_string_append_c (head, c);
    if (g_str_has_suffix (head->str, "\r\n\r\n") || g_str_has_suffix (head->str, "\n\n"))
      return g_string_free (head, FALSE);
  }
  g_string_free (head, TRUE);
  fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the headers are larger than 16 KiB");
  return NULL;
}

static gboolean
parse_start (VivariumHttpMessage *msg, const gchar *line, gboolean request, GError **error)
{
  g_auto(GStrv) parts = g_strsplit (line, " ", 3);

  if (g_strv_length (parts) < 2)
    return fail (error, G_IO_ERROR_INVALID_DATA, "a malformed start line");
  if (request) {
    if (g_strv_length (parts) != 3 || !g_str_has_prefix (parts[2], "HTTP/1."))
      return fail (error, G_IO_ERROR_INVALID_DATA, "a malformed request line");
    msg->method = g_strdup (parts[0]);
    msg->path = g_strdup (parts[1]);
    return TRUE;
  }
  if (!g_str_has_prefix (parts[0], "HTTP/1.") || strlen (parts[1]) != 3 || !g_ascii_isdigit (parts[1][0]))
    return fail (error, G_IO_ERROR_INVALID_DATA, "a malformed status line");
  msg->status = (guint) atoi (parts[1]);
  return TRUE;
}

static gboolean
parse_head (VivariumHttpMessage *msg, const gchar *head, gboolean request, GError **error)
{
  g_auto(GStrv) lines = g_strsplit (head, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    g_strchomp (lines[i]);
  if (!parse_start (msg, lines[0], request, error))
    return FALSE;
  for (guint i = 1; lines[i] != NULL && lines[i][0] != '\0'; i++) {
    const gchar *colon = strchr (lines[i], ':');
    g_autofree gchar *name = NULL;
    if (colon == NULL || colon == lines[i])
      return fail (error, G_IO_ERROR_INVALID_DATA, "a malformed header line");
    name = g_ascii_strdown (lines[i], colon - lines[i]);
    g_hash_table_replace (msg->headers, g_steal_pointer (&name), g_strstrip (g_strdup (colon + 1)));
  }
  return TRUE;
}

static GBytes *
read_to_end (GInputStream *in, gsize max_body, GError **error)
{
  g_autoptr(GByteArray) body = g_byte_array_new ();
  guint8 buf[65536];

  for (;;) {
    gssize n = g_input_stream_read (in, buf, sizeof buf, NULL, error);
    if (n < 0)
      return NULL;
    if (n == 0)
      return g_byte_array_free_to_bytes (g_steal_pointer (&body));
    if (body->len + (gsize) n > max_body) {
      fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the body is larger than allowed");
      return NULL;
    }
    g_byte_array_append (body, buf, (guint) n);
  }
}

static GBytes *
read_body (VivariumHttpMessage *msg, GInputStream *in, gboolean request, gsize max_body, GError **error)
{
  const gchar *length = g_hash_table_lookup (msg->headers, "content-length");
  const gchar *encoding = g_hash_table_lookup (msg->headers, "transfer-encoding");
  guint64 n = 0;
  g_autofree guint8 *data = NULL;
  gsize got = 0;

  if (encoding != NULL && g_ascii_strcasecmp (encoding, "identity") != 0) {
    fail (error, G_IO_ERROR_NOT_SUPPORTED, "chunked or encoded bodies are not accepted");
    return NULL;
  }
  if (length == NULL)
    return request ? g_bytes_new (NULL, 0) : read_to_end (in, max_body, error);
  if (!g_ascii_string_to_unsigned (length, 10, 0, G_MAXUINT64, &n, NULL)) {
    fail (error, G_IO_ERROR_INVALID_DATA, "a malformed Content-Length");
    return NULL;
  }
  if (n > max_body) {
    fail (error, G_IO_ERROR_MESSAGE_TOO_LARGE, "the body is larger than allowed");
    return NULL;
  }
  data = g_malloc (n + 1);
  if (!g_input_stream_read_all (in, data, n, &got, NULL, error))
    return NULL;
  if (got != n) {
    fail (error, G_IO_ERROR_CONNECTION_CLOSED, "the body ended early");
    return NULL;
  }
  return g_bytes_new_take (g_steal_pointer (&data), n);
}

VivariumHttpMessage *
vivarium_http_read (GInputStream *in, gboolean request, gsize max_body, GError **error)
{
  g_autoptr(VivariumHttpMessage) msg = g_new0 (VivariumHttpMessage, 1);
  g_autofree gchar *head = read_head (in, error);

  msg->headers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (head == NULL || !parse_head (msg, head, request, error))
    return NULL;
  msg->body = read_body (msg, in, request, max_body, error);
  if (msg->body == NULL)
    return NULL;
  return g_steal_pointer (&msg);
}

static gboolean
write_all (GOutputStream *out, GString *head, GBytes *body, GError **error)
{
  gsize len = body != NULL ? g_bytes_get_size (body) : 0;

  g_string_append_printf (head, "Content-Length: %zu\r\nConnection: close\r\n\r\n", len);
  if (!g_output_stream_write_all (out, head->str, head->len, NULL, NULL, error))
    return FALSE;
  if (len > 0 && !g_output_stream_write_all (out, g_bytes_get_data (body, NULL), len, NULL, NULL, error))
    return FALSE;
  return g_output_stream_flush (out, NULL, error);
}

gboolean
vivarium_http_write_request (GOutputStream *out, const gchar *method, const gchar *path, const gchar *host,
                             const gchar *const *extra_headers, GBytes *body, GError **error)
{
  g_autoptr(GString) head = g_string_new (NULL);

  /* 1.0: the server ends the body by closing, never by chunks. */
  g_string_append_printf (head, "%s %s HTTP/1.0\r\nHost: %s\r\nAccept: application/json\r\n", method, path, host);
  if (body != NULL)
    g_string_append (head, "Content-Type: application/json\r\n");
  for (guint i = 0; extra_headers != NULL && extra_headers[i] != NULL; i++)
    g_string_append_printf (head, "%s\r\n", extra_headers[i]);
  return write_all (out, head, body, error);
}

static const gchar *
reason_of (guint status)
{
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 413: return "Payload Too Large";
  case 429: return "Too Many Requests";
  case 502: return "Bad Gateway";
  default:  return "Status";
  }
}

gboolean
vivarium_http_write_response (GOutputStream *out, guint status, const gchar *content_type, GBytes *body,
                              GError **error)
{
  g_autoptr(GString) head = g_string_new (NULL);

  g_string_append_printf (head, "HTTP/1.1 %u %s\r\nContent-Type: %s\r\n", status, reason_of (status), content_type);
  return write_all (out, head, body, error);
}

GBytes *
vivarium_http_error_body (const gchar *text)
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
