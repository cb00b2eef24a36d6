/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "fake-peer"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <glib/gstdio.h>
#include <gio/gunixsocketaddress.h>
#include <json-glib/json-glib.h>

#include "fake-peer.h"

/* A blocked peer is a test bug: fail rather than hang. */
#define FAKE_PEER_IO_TIMEOUT_S 30
#define TEST_WATCHDOG_S        60

struct _FakePeer {
  GThread     *thread;
  GSocket     *socket;
  gchar       *listen_path;  /* accept one connection there first */
  guint        listen_delay_ms;
  gchar      **lines;
  GHashTable  *captures;     /* name → JSON text */
  GByteArray  *inbuf;
  GMutex       lock;
  GCond        cond;
  gboolean     resumed;
  gint         done;         /* atomic */
  gboolean     completed;
  gchar       *error;
};

static void
fake_peer_fail (FakePeer *peer, const gchar *format, ...) G_GNUC_PRINTF (2, 3);

static void
fake_peer_fail (FakePeer *peer, const gchar *format, ...)
{
  va_list args;

  if (peer->error != NULL)
    return;
  va_start (args, format);
  peer->error = g_strdup_vprintf (format, args);
  va_end (args);
}

/* One line from the client, without its newline; NULL at EOF or error. */
static gchar *
fake_peer_read_line (FakePeer *peer, gboolean *delimited)
{
  for (guint i = 0; i < 100000; i++) {
    const guint8 *nl = peer->inbuf->len > 0 ? memchr (peer->inbuf->data, '\n', peer->inbuf->len) : NULL;
    guint8 chunk[4096];
    gssize n;

    if (nl != NULL) {
      gsize len = (gsize) (nl - peer->inbuf->data);
      gsize skip = 0;
      gchar *line;
      while (skip < len && peer->inbuf->data[skip] == 0xff)
        skip++;
      *delimited = skip > 0;
      line = g_strndup ((const gchar *) peer->inbuf->data + skip, len - skip);
      g_byte_array_remove_range (peer->inbuf, 0, (guint) len + 1);
      return line;
    }
    n = g_socket_receive (peer->socket, (gchar *) chunk, sizeof (chunk), NULL, NULL);
    if (n <= 0)
      return NULL;
    g_byte_array_append (peer->inbuf, chunk, (guint) n);
  }
  return NULL;
}

static gboolean
fake_peer_send (FakePeer *peer, const gchar *data, gsize len)
{
  gsize done = 0;

  while (done < len) {
    gssize n = g_socket_send (peer->socket, data + done, len - done, NULL, NULL);
    if (n <= 0)
      return FALSE;
    done += (gsize) n;
  }
  return TRUE;
}

static gboolean fake_peer_match (FakePeer *peer, JsonNode *expected, JsonNode *actual);

static gboolean
fake_peer_match_object (FakePeer *peer, JsonObject *expected, JsonObject *actual)
{
  g_autoptr(GList) names = json_object_get_members (expected);

  if (json_object_get_size (expected) != json_object_get_size (actual))
    return FALSE;
  for (GList *l = names; l != NULL; l = l->next) {
    JsonNode *a = json_object_get_member (actual, l->data);
    if (a == NULL || !fake_peer_match (peer, json_object_get_member (expected, l->data), a))
      return FALSE;
  }
  return TRUE;
}

/* A string "$NAME" in the expected message matches anything and captures it. */
static gboolean
fake_peer_match (FakePeer *peer, JsonNode *expected, JsonNode *actual)
{
  if (JSON_NODE_HOLDS_VALUE (expected) && json_node_get_value_type (expected) == G_TYPE_STRING &&
      json_node_get_string (expected)[0] == '$') {
    g_hash_table_insert (peer->captures, g_strdup (json_node_get_string (expected) + 1),
                         json_to_string (actual, FALSE));
    return TRUE;
  }
  if (JSON_NODE_TYPE (expected) != JSON_NODE_TYPE (actual))
    return FALSE;
  if (JSON_NODE_HOLDS_OBJECT (expected))
    return fake_peer_match_object (peer, json_node_get_object (expected), json_node_get_object (actual));
  if (JSON_NODE_HOLDS_ARRAY (expected)) {
    JsonArray *e = json_node_get_array (expected);
    JsonArray *a = json_node_get_array (actual);
    if (json_array_get_length (e) != json_array_get_length (a))
      return FALSE;
    for (guint i = 0; i < json_array_get_length (e); i++) {
      if (!fake_peer_match (peer, json_array_get_element (e, i), json_array_get_element (a, i)))
        return FALSE;
    }
    return TRUE;
  }
  return json_node_equal (expected, actual);
}

static gchar *
fake_peer_substitute (FakePeer *peer, const gchar *text)
{
  GString *out = g_string_new (NULL);

  for (const gchar *p = text; *p != '\0'; p++) {
    gsize n = 0;
    if (*p == '$') {
      while (g_ascii_isupper (p[1 + n]) || g_ascii_isdigit (p[1 + n]) || p[1 + n] == '_')
        n++;
    }
    if (n > 0) {
      g_autofree gchar *name = g_strndup (p + 1, n);
      const gchar *value = g_hash_table_lookup (peer->captures, name);
      if (value == NULL)
        fake_peer_fail (peer, "nothing captured as $%s", name);
      g_string_append (out, value != NULL ? value : "");
      p += n;
      continue;
    }
    g_string_append_c (out, *p);
  }
  return g_string_free (out, FALSE);
}

static gboolean
fake_peer_expect (FakePeer *peer, const gchar *text, gboolean want_delimiter)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonParser) actual_parser = json_parser_new ();
  g_autofree gchar *line = NULL;
  gboolean delimited = FALSE;

  if (!json_parser_load_from_data (parser, text, -1, NULL)) {
    fake_peer_fail (peer, "bad transcript line: %s", text);
    return FALSE;
  }
  line = fake_peer_read_line (peer, &delimited);
  if (line == NULL) {
    fake_peer_fail (peer, "client went away, expected %s", text);
    return FALSE;
  }
  if (want_delimiter && !delimited) {
    fake_peer_fail (peer, "expected a 0xFF delimiter before %s", line);
    return FALSE;
  }
  if (!json_parser_load_from_data (actual_parser, line, -1, NULL) ||
      !fake_peer_match (peer, json_parser_get_root (parser), json_parser_get_root (actual_parser))) {
    fake_peer_fail (peer, "expected %s, got %s", text, line);
    return FALSE;
  }
  return TRUE;
}

static void
fake_peer_wait_resumed (FakePeer *peer)
{
  gint64 end = g_get_monotonic_time () + TEST_WATCHDOG_S * G_TIME_SPAN_SECOND;

  g_mutex_lock (&peer->lock);
  while (!peer->resumed) {
    if (!g_cond_wait_until (&peer->cond, &peer->lock, end)) {
      fake_peer_fail (peer, "never resumed");
      break;
    }
  }
  peer->resumed = FALSE;
  g_mutex_unlock (&peer->lock);
}

/* Reads until the client closes; data it sends meanwhile is noted. */
static void
fake_peer_expect_eof (FakePeer *peer)
{
  g_autofree gchar *line = NULL;
  gboolean delimited = FALSE;

  line = fake_peer_read_line (peer, &delimited);
  if (line != NULL)
    fake_peer_fail (peer, "expected the client to close, got %s", line);
}

/* Returns FALSE to stop the script. */
static gboolean
fake_peer_step (FakePeer *peer, const gchar *line)
{
  if (line[0] == '\0' || line[0] == '#')
    return TRUE;
  if (g_str_has_prefix (line, ">>ff "))
    return fake_peer_expect (peer, line + 5, TRUE);
  if (g_str_has_prefix (line, ">> "))
    return fake_peer_expect (peer, line + 3, FALSE);
  if (g_str_has_prefix (line, "<<raw ")) {
    g_autofree gchar *text = fake_peer_substitute (peer, line + 6);
    g_autofree gchar *bytes = g_strcompress (text);
    return fake_peer_send (peer, bytes, strlen (bytes));
  }
  if (g_str_has_prefix (line, "<<ff ")) {
    g_autofree gchar *text = fake_peer_substitute (peer, line + 5);
    g_autofree gchar *msg = g_strdup_printf ("\xff%s\n", text);
    return fake_peer_send (peer, msg, strlen (msg));
  }
  if (g_str_has_prefix (line, "<< ")) {
    g_autofree gchar *text = fake_peer_substitute (peer, line + 3);
    g_autofree gchar *msg = g_strconcat (text, "\n", NULL);
    return fake_peer_send (peer, msg, strlen (msg));
  }
  if (g_str_has_prefix (line, "<<repeat ")) {
    gchar *end = NULL;
    guint64 count = g_ascii_strtoull (line + 9, &end, 10);
    g_autofree gchar *unit = g_strcompress (end != NULL && *end == ' ' ? end + 1 : "");
    g_autoptr(GString) block = g_string_new (NULL);
    for (guint64 i = 0; i < count; i++) {
      g_string_append (block, unit);
      if (block->len >= 65536 || i + 1 == count) {
        if (!fake_peer_send (peer, block->str, block->len))
          return FALSE;
        g_string_truncate (block, 0);
      }
    }
    return TRUE;
  }
  if (g_str_equal (line, "pause")) {
    fake_peer_wait_resumed (peer);
    return TRUE;
  }
  if (g_str_equal (line, "close")) {
    g_socket_shutdown (peer->socket, TRUE, TRUE, NULL);
    return TRUE;
  }
  if (g_str_equal (line, "eof")) {
    fake_peer_expect_eof (peer);
    return TRUE;
  }
  fake_peer_fail (peer, "unknown transcript directive: %s", line);
  return FALSE;
}

/* Binds late on purpose, so the client meets a missing socket first. */
static gboolean
fake_peer_accept (FakePeer *peer)
{
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GSocketAddress) address = g_unix_socket_address_new (peer->listen_path);
  g_autoptr(GError) error = NULL;

  g_usleep (peer->listen_delay_ms * 1000);
  listener = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, 0, &error);
  if (listener == NULL || !g_socket_bind (listener, address, FALSE, &error) ||
      !g_socket_listen (listener, &error)) {
    fake_peer_fail (peer, "cannot listen: %s", error->message);
    return FALSE;
  }
  g_socket_set_timeout (listener, FAKE_PEER_IO_TIMEOUT_S);
  peer->socket = g_socket_accept (listener, NULL, &error);
  g_unlink (peer->listen_path);
  if (peer->socket == NULL) {
    fake_peer_fail (peer, "nobody connected: %s", error->message);
    return FALSE;
  }
  g_socket_set_blocking (peer->socket, TRUE);
  g_socket_set_timeout (peer->socket, FAKE_PEER_IO_TIMEOUT_S);
  return TRUE;
}

static gpointer
fake_peer_thread (gpointer data)
{
  FakePeer *peer = data;
  guint i;

  if (peer->listen_path != NULL && !fake_peer_accept (peer)) {
    g_atomic_int_set (&peer->done, 1);
    g_main_context_wakeup (NULL);
    return NULL;
  }
  for (i = 0; peer->lines[i] != NULL; i++) {
    if (!fake_peer_step (peer, peer->lines[i]) || peer->error != NULL)
      break;
  }
  peer->completed = peer->lines[i] == NULL && peer->error == NULL;
  g_socket_close (peer->socket, NULL);
  g_atomic_int_set (&peer->done, 1);
  g_main_context_wakeup (NULL);
  return NULL;
}

static FakePeer *
fake_peer_load (const gchar *transcript)
{
  g_autofree gchar *path = g_build_filename (VIVARIUM_SOURCE_ROOT, "tests", "unit", "transcripts",
                                             transcript, NULL);
  g_autofree gchar *contents = NULL;
  g_autoptr(GError) error = NULL;
  FakePeer *peer = g_new0 (FakePeer, 1);

  if (!g_file_get_contents (path, &contents, NULL, &error))
    g_error ("cannot read transcript %s: %s", path, error->message);
  peer->lines = g_strsplit (contents, "\n", -1);
  peer->captures = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  peer->inbuf = g_byte_array_new ();
  g_mutex_init (&peer->lock);
  g_cond_init (&peer->cond);
  return peer;
}

FakePeer *
fake_peer_new_listen (const gchar *transcript, const gchar *socket_path, guint delay_ms)
{
  FakePeer *peer = fake_peer_load (transcript);

  peer->listen_path = g_strdup (socket_path);
  peer->listen_delay_ms = delay_ms;
  peer->thread = g_thread_new ("fake-peer", fake_peer_thread, peer);
  return peer;
}

FakePeer *
fake_peer_new (const gchar *transcript, GIOStream **client_stream)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) client = NULL;
  FakePeer *peer = fake_peer_load (transcript);
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  peer->socket = g_socket_new_from_fd (sv[1], &error);
  g_assert_no_error (error);
  g_socket_set_timeout (peer->socket, FAKE_PEER_IO_TIMEOUT_S);
  client = g_socket_new_from_fd (sv[0], &error);
  g_assert_no_error (error);
  *client_stream = G_IO_STREAM (g_socket_connection_factory_create_connection (client));
  peer->thread = g_thread_new ("fake-peer", fake_peer_thread, peer);
  return peer;
}

void
fake_peer_resume (FakePeer *peer)
{
  g_mutex_lock (&peer->lock);
  peer->resumed = TRUE;
  g_cond_signal (&peer->cond);
  g_mutex_unlock (&peer->lock);
}

gboolean
fake_peer_is_done (FakePeer *peer)
{
  return g_atomic_int_get (&peer->done) != 0;
}

void
fake_peer_finish (FakePeer *peer, gboolean complete)
{
  g_thread_join (peer->thread);
  g_assert_cmpstr (peer->error, ==, NULL);
  if (complete)
    g_assert_true (peer->completed);
  g_clear_object (&peer->socket);
  g_free (peer->listen_path);
  g_strfreev (peer->lines);
  g_hash_table_unref (peer->captures);
  g_byte_array_unref (peer->inbuf);
  g_mutex_clear (&peer->lock);
  g_cond_clear (&peer->cond);
  g_free (peer->error);
  g_free (peer);
}

static gboolean
test_watchdog (gpointer data)
{
  g_error ("test watchdog: nothing happened for %d s", TEST_WATCHDOG_S);
  return G_SOURCE_REMOVE;
}

void
test_wait_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  TestWait *w = user_data;

  w->result = g_object_ref (result);
  w->done = TRUE;
}

void
test_run_until (const gboolean *flag)
{
  guint id = g_timeout_add_seconds (TEST_WATCHDOG_S, test_watchdog, NULL);

  while (!*flag)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
}

void
test_run_until_peer (FakePeer *peer)
{
  guint id = g_timeout_add_seconds (TEST_WATCHDOG_S, test_watchdog, NULL);

  /* The thread wakes the context as it ends; a wakeup stays pending until
   * the next poll, so none is lost between the check and the wait. */
  while (!fake_peer_is_done (peer))
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
}
