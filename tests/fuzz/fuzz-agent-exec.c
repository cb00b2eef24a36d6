/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The decoding of guest-exec output: vd_agent_exec_parse_status()
 * (service/vd-agent-exec-status.c: exit code or signal, base64 out-data and
 * err-data, the truncation flags) and the capped base64 decoder under it
 * (vd_base64_decode_capped, service/vd-json-stream.c), which guest-file-read
 * uses too. The input is the "return" object of a guest-exec-status reply;
 * its length picks the output cap.
 *
 * Checked against GLib's decoder as the reference: a stream is decoded to
 * exactly the first cap bytes of what the text holds, "truncated" exactly
 * when the guest said so or the cap cut it; only strict base64 is taken;
 * the exit status is the guest's number (a DWORD kept as its bit pattern)
 * or its signal, never both. The raw input is also fed to the decoder as
 * base64 text. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vivarium-error.h"
#include "vivarium-json-depth.h"
#include "vd-agent-exec-status.h"
#include "vd-json-stream.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

static gboolean
strict_base64 (const gchar *text)
{
  gsize len = strlen (text);
  gsize body = len;

  if (len % 4 != 0)
    return FALSE;
  while (body > 0 && len - body < 2 && text[body - 1] == '=')
    body--;
  for (gsize i = 0; i < body; i++) {
    if (!g_ascii_isalnum (text[i]) && text[i] != '+' && text[i] != '/')
      return FALSE;
  }
  return TRUE;
}

/* The decoder against the reference, for one text and cap. */
static void
check_decode (const gchar *text, gsize cap)
{
  g_autoptr(GError) error = NULL;
  gboolean truncated = TRUE;
  g_autoptr(GBytes) got = vd_base64_decode_capped (text, cap, &truncated, &error);
  gsize full_len = 0;
  g_autofree guchar *full = NULL;

  if (!strict_base64 (text)) {
    g_assert_null (got);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
    return;
  }
  g_assert_no_error (error);
  g_assert_nonnull (got);
  full = g_base64_decode (text, &full_len);
  g_assert_cmpuint (g_bytes_get_size (got), ==, MIN (full_len, cap));
  g_assert_true (truncated == (full_len > cap));
  g_assert_true (g_bytes_get_size (got) == 0 || memcmp (g_bytes_get_data (got, NULL), full, g_bytes_get_size (got)) == 0);
}

static void
check_stream (JsonObject *status, const gchar *data_member, const gchar *trunc_member, gsize cap,
              GBytes *got, gboolean got_truncated)
{
  const gchar *text = json_object_has_member (status, data_member)
                      ? json_object_get_string_member (status, data_member) : "";
  gboolean said = json_object_has_member (status, trunc_member) &&
                  json_object_get_boolean_member (status, trunc_member);
  gsize full_len = 0;
  g_autofree guchar *full = g_base64_decode (text, &full_len);

  g_assert_cmpuint (g_bytes_get_size (got), ==, MIN (full_len, cap));
  g_assert_true (g_bytes_get_size (got) == 0 || memcmp (g_bytes_get_data (got, NULL), full, g_bytes_get_size (got)) == 0);
  g_assert_true (got_truncated == (said || full_len > cap));
}

static void
check_status (JsonObject *status, gsize cap)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) r = vd_agent_exec_parse_status (status, cap, &error);

  if (r == NULL) {
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL);
    g_assert_true (g_utf8_validate (error->message, -1, NULL));
    return;
  }
  g_assert_no_error (error);
  g_assert_false (json_object_has_member (status, "exitcode") && json_object_has_member (status, "signal"));
  if (json_object_has_member (status, "exitcode")) {
    gint64 v = json_object_get_int_member (status, "exitcode");
    g_assert_false (r->signaled);
    g_assert_cmpint (r->exit_status, ==, (gint) (guint32) v);
  } else if (json_object_has_member (status, "signal")) {
    g_assert_true (r->signaled);
    g_assert_cmpint (r->exit_status, ==, json_object_get_int_member (status, "signal"));
    g_assert_cmpint (r->exit_status, >=, 0);
  } else {
    g_assert_false (r->signaled);
    g_assert_cmpint (r->exit_status, ==, -1);
  }
  check_stream (status, "out-data", "out-truncated", cap, r->out, r->out_truncated);
  check_stream (status, "err-data", "err-truncated", cap, r->err, r->err_truncated);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const gsize caps[] = { 0, 1, 2, 3, 4, 5, 16, 100, 4096, 16 * 1024 * 1024 };
  gsize cap = caps[size % G_N_ELEMENTS (caps)];
  g_autofree gchar *text = fuzz_string (data, size);
  g_autoptr(JsonParser) parser = json_parser_new ();

  /* The raw bytes as one stream's text (up to a NUL, as a JSON string is). */
  check_decode (text, cap);
  /* What reaches the parser has passed the stream's checks: UTF-8, no NUL,
   * bounded depth. */
  if (memchr (data, '\0', size) != NULL || !g_utf8_validate_len (text, size, NULL) ||
      !vivarium_json_depth_within (text, size, VD_JSON_STREAM_MAX_DEPTH) ||
      !json_parser_load_from_data (parser, text, (gssize) size, NULL) ||
      json_parser_get_root (parser) == NULL || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return 0;
  check_status (json_node_get_object (json_parser_get_root (parser)), cap);
  return 0;
}
