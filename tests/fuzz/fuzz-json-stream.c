/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The JSON stream QMP and the guest agent speak (service/vd-json-stream.c),
 * fed the input as the peer's bytes through a real GIOStream, in reads of
 * a size the input picks. The input: two bytes of settings, then the
 * stream. Settings: the message cap (64 bytes to 16 KiB, what the harness
 * reaches; the daemon's are larger, the code the same), the read size, and
 * whether the owner asks for a skip to the next 0xFF after a line that is
 * not an object, as the agent client does while it waits for a sync reply.
 *
 * Checked against a reference reading of the same bytes (without skips):
 * one callback per non-blank line, in order, exactly one of message and
 * error; a message is the object json-glib makes of that line, no deeper
 * than VD_JSON_STREAM_MAX_DEPTH, every string in it UTF-8; a refusal is typed with a UTF-8 sentence;
 * a line past the cap closes the stream with "larger than", and nothing
 * after it is delivered. With skips: the same typing, and no message is
 * ever made of bytes before a delimiter the skip consumed. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vivarium-error.h"
#include "vd-json-stream.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

/* A memory stream that hands out at most @chunk bytes a read. */
typedef struct {
  GMemoryInputStream parent_instance;
  gsize              chunk;
} FuzzChunkStream;
typedef GMemoryInputStreamClass FuzzChunkStreamClass;
static GType fuzz_chunk_stream_get_type (void);
G_DEFINE_TYPE (FuzzChunkStream, fuzz_chunk_stream, G_TYPE_MEMORY_INPUT_STREAM)

static gssize
fuzz_chunk_stream_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
  FuzzChunkStream *self = (FuzzChunkStream *) stream;

  return G_INPUT_STREAM_CLASS (fuzz_chunk_stream_parent_class)->read_fn (stream, buffer, MIN (count, self->chunk),
                                                                         cancellable, error);
}

static void
fuzz_chunk_stream_class_init (FuzzChunkStreamClass *klass)
{
  G_INPUT_STREAM_CLASS (klass)->read_fn = fuzz_chunk_stream_read;
}

static void
fuzz_chunk_stream_init (FuzzChunkStream *self)
{
}

typedef struct {
  VdJsonStream *stream;
  gboolean      skip;
  GPtrArray    *got;      /* of JsonNode (a message) or NULL (an error) */
  gboolean      closed;
  gchar        *closed_message;
} Run;

static guint
depth_of (JsonNode *node)
{
  guint deepest = 0;

  if (JSON_NODE_HOLDS_OBJECT (node)) {
    g_autoptr(GList) members = json_object_get_values (json_node_get_object (node));
    for (GList *l = members; l != NULL; l = l->next)
      deepest = MAX (deepest, depth_of (l->data));
    return deepest + 1;
  }
  if (JSON_NODE_HOLDS_ARRAY (node)) {
    JsonArray *array = json_node_get_array (node);
    for (guint i = 0; i < json_array_get_length (array); i++)
      deepest = MAX (deepest, depth_of (json_array_get_element (array, i)));
    return deepest + 1;
  }
  return 0;
}

/* Every string a message holds, member names included, is UTF-8: the
 * owner copies them into D-Bus strings and the journal. */
static void
check_strings (JsonNode *node)
{
  if (JSON_NODE_HOLDS_OBJECT (node)) {
    JsonObject *object = json_node_get_object (node);
    g_autoptr(GList) names = json_object_get_members (object);
    for (GList *l = names; l != NULL; l = l->next) {
      g_assert_true (g_utf8_validate (l->data, -1, NULL));
      check_strings (json_object_get_member (object, l->data));
    }
  } else if (JSON_NODE_HOLDS_ARRAY (node)) {
    JsonArray *array = json_node_get_array (node);
    for (guint i = 0; i < json_array_get_length (array); i++)
      check_strings (json_array_get_element (array, i));
  } else if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING) {
    g_assert_true (g_utf8_validate (json_node_get_string (node), -1, NULL));
  }
}

static void
node_free (gpointer node)
{
  if (node != NULL)
    json_node_unref (node);
}

static void
on_message (JsonObject *message, const GError *error, gpointer user_data)
{
  Run *run = user_data;

  g_assert_false (run->closed);
  g_assert_true ((message == NULL) != (error == NULL));
  if (error != NULL) {
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
    g_assert_true (g_utf8_validate (error->message, -1, NULL));
    g_ptr_array_add (run->got, NULL);
    if (run->skip)
      vd_json_stream_skip_to_delimiter (run->stream);
    return;
  }
  {
    JsonNode *node = json_node_init_object (json_node_alloc (), message);
    g_assert_cmpuint (depth_of (node), <=, VD_JSON_STREAM_MAX_DEPTH);
    check_strings (node);
    g_ptr_array_add (run->got, node);
  }
}

static void
on_closed (const GError *error, gpointer user_data)
{
  Run *run = user_data;

  g_assert_false (run->closed);
  g_assert_nonnull (error);
  g_assert_true (error->domain == VIVARIUM_ERROR);
  g_assert_true (g_utf8_validate (error->message, -1, NULL));
  run->closed = TRUE;
  run->closed_message = g_strdup (error->message);
}

static gboolean
is_blank (const gchar *line, gsize len)
{
  for (gsize i = 0; i < len; i++) {
    if (!g_ascii_isspace (line[i]))
      return FALSE;
  }
  return TRUE;
}

/* What a line must give: the object json-glib parses it to, or NULL for
 * a refusal. The stream refuses more than json-glib (NULs, bad UTF-8,
 * integers past 64 bits, depth), never less. */
static void
check_line (const gchar *line, gsize len, JsonNode *got)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;

  if (got == NULL)
    return;
  g_assert_null (memchr (line, '\0', len));
  g_assert_true (g_utf8_validate_len (line, len, NULL));
  g_assert_true (json_parser_load_from_data (parser, line, (gssize) len, NULL));
  root = json_parser_get_root (parser);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  g_assert_true (json_node_equal (root, got));
}

/* The reference reading: split at newlines, in order, until a line (or
 * the unfinished rest) passes the cap. */
static void
check_reference (const gchar *data, gsize size, gsize cap, Run *run)
{
  gsize at = 0;
  guint next = 0;

  for (;;) {
    const gchar *nl = memchr (data + at, '\n', size - at);
    gsize len;
    if (nl == NULL) {
      if (size - at > cap)
        g_assert_true (strstr (run->closed_message, "larger than") != NULL);
      else if (size - at > 0)
        g_assert_cmpstr (run->closed_message, ==, "The peer closed the connection in the middle of a message");
      else
        g_assert_cmpstr (run->closed_message, ==, "The peer closed the connection");
      break;
    }
    len = (gsize) (nl - (data + at));
    if (len > cap) {
      g_assert_true (strstr (run->closed_message, "larger than") != NULL);
      break;
    }
    if (!is_blank (data + at, len)) {
      g_assert_cmpuint (next, <, run->got->len);
      check_line (data + at, len, g_ptr_array_index (run->got, next));
      next++;
    }
    at += len + 1;
  }
  g_assert_cmpuint (next, ==, run->got->len);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const gsize caps[] = { 64, 256, 1024, 4096, 16384 };
  static const gsize chunks[] = { 1, 7, 64, 4096, 65536 };
  g_autoptr(GInputStream) in = NULL;
  g_autoptr(GOutputStream) out = NULL;
  g_autoptr(GIOStream) io = NULL;
  Run run = { 0 };
  gsize cap;

  if (size < 2)
    return 0;
  cap = caps[data[0] % G_N_ELEMENTS (caps)];
  run.skip = (data[0] & 0x80) != 0;
  in = g_object_new (fuzz_chunk_stream_get_type (), NULL);
  ((FuzzChunkStream *) in)->chunk = chunks[data[1] % G_N_ELEMENTS (chunks)];
  g_memory_input_stream_add_data (G_MEMORY_INPUT_STREAM (in), data + 2, (gssize) (size - 2), NULL);
  out = g_memory_output_stream_new_resizable ();
  io = g_simple_io_stream_new (in, out);
  run.got = g_ptr_array_new_with_free_func (node_free);
  run.stream = vd_json_stream_new (io, cap);
  vd_json_stream_start (run.stream, on_message, on_closed, &run);
  while (!run.closed)
    g_main_context_iteration (NULL, TRUE);
  /* Let the close of the underlying stream finish, so nothing outlives the run. */
  g_clear_object (&run.stream);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  if (!run.skip)
    check_reference ((const gchar *) data + 2, size - 2, cap, &run);
  g_ptr_array_unref (run.got);
  g_free (run.closed_message);
  return 0;
}
