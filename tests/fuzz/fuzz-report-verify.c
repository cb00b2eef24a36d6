/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The offline check of a signed report (common/vivarium-report-signed.c)
 * and the report reader under it (vivarium_report_from_json): what
 * `vivariumctl report verify FILE` and the app do with a file anyone may
 * hand them. The input is a signed file, or a bare report's JSON.
 *
 * Checked: a refusal is a VIVARIUM_ERROR with a UTF-8 sentence and no
 * control byte; whatever
 * verifies also parses unverified, to the same report; every report the
 * reader accepts re-serialises (to_canonical cannot fail on it), reads back
 * to the same canonical bytes, and, signed with the harness's own key (the
 * daemon's code), verifies again with that key's fingerprint and no other;
 * a file that verified is byte for byte what assemble() makes of it; and
 * its text passes the renderer's check (fuzz-report-text.c). */

#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "fuzz-common.h"
#include "fuzz-report-text.h"
#include "vivarium-error.h"
#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"
#include "vd-signing-key.h"

static VdSigningKey *key;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = NULL;

  fuzz_setup ();
  dir = g_dir_make_tmp ("vivarium-fuzz-key-XXXXXX", &error);
  g_assert_no_error (error);
  key = vd_signing_key_load_or_generate (dir, &error);
  g_assert_no_error (error);
  /* The key is in memory now; its file is not needed. */
  {
    g_autofree gchar *file = g_build_filename (dir, VD_SIGNING_KEY_FILE, NULL);
    g_unlink (file);
    g_rmdir (dir);
  }
  return 0;
}

static void
check_refusal (const GError *error)
{
  g_assert_nonnull (error);
  g_assert_true (error->domain == VIVARIUM_ERROR);
  /* vivariumctl prints it: UTF-8, and no control byte of the file's. */
  for (const gchar *c = error->message; *c != '\0'; c++) {
    if ((guchar) *c < 0x20 || *c == 0x7f || !g_utf8_validate (error->message, -1, NULL)) {
      g_autofree gchar *shown = g_strescape (error->message, NULL);
      g_error ("the refusal holds the file's raw bytes: %s", shown);
    }
  }
}

static GBytes *
canonical_of (VivariumReport *report)
{
  g_autoptr(GError) error = NULL;
  GBytes *canonical = vivarium_report_to_canonical (report, &error);

  /* from_json refuses what to_canonical would: an accepted report always
   * writes back. */
  g_assert_no_error (error);
  g_assert_nonnull (canonical);
  return canonical;
}

/* Any report the reader accepted: it round-trips, and the daemon's own
 * signature over it verifies, for its key only. */
static void
check_accepted (VivariumReport *report)
{
  g_autoptr(GBytes) canonical = canonical_of (report);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(VivariumReport) again = NULL;
  g_autoptr(GBytes) again_canonical = NULL;
  g_autoptr(GBytes) file = NULL;
  g_autoptr(VivariumReport) verified = NULL;
  g_autoptr(GBytes) verified_canonical = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *fingerprint = NULL;
  FuzzReportText text = { 0 };

  g_assert_true (json_parser_load_from_data (parser, g_bytes_get_data (canonical, NULL),
                                             (gssize) g_bytes_get_size (canonical), &error));
  again = vivarium_report_from_json (json_parser_get_root (parser), &error);
  g_assert_no_error (error);
  again_canonical = canonical_of (again);
  g_assert_true (g_bytes_equal (canonical, again_canonical));

  file = vd_signing_key_sign_report (key, report, &error);
  g_assert_no_error (error);
  verified = vivarium_signed_report_verify (g_bytes_get_data (file, NULL), g_bytes_get_size (file),
                                            vd_signing_key_get_fingerprint (key), &fingerprint, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (fingerprint, ==, vd_signing_key_get_fingerprint (key));
  verified_canonical = canonical_of (verified);
  g_assert_true (g_bytes_equal (canonical, verified_canonical));
  g_clear_object (&verified);
  verified = vivarium_signed_report_verify (g_bytes_get_data (file, NULL), g_bytes_get_size (file),
                                            "sha256:0000", NULL, &error);
  g_assert_null (verified);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH);

  fuzz_report_text_check (report, NULL, &text);
  fuzz_report_text_clear (&text);
}

/* A file that verified: it is exactly the file its parts assemble to. */
static void
check_verified (const uint8_t *data, size_t size, VivariumReport *report, const gchar *fingerprint)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumReport) unverified = NULL;
  g_autoptr(GBytes) a = NULL;
  g_autoptr(GBytes) b = NULL;
  FuzzReportText text = { 0 };

  g_assert_true (g_str_has_prefix (fingerprint, "sha256:"));
  unverified = vivarium_signed_report_parse_unverified ((const gchar *) data, size, &error);
  g_assert_no_error (error);
  a = canonical_of (report);
  b = canonical_of (unverified);
  g_assert_true (g_bytes_equal (a, b));
  fuzz_report_text_check (report, fingerprint, &text);
  fuzz_report_text_clear (&text);
}

/* The input as a bare report: the reader under the envelope. */
static void
check_bare (const uint8_t *data, size_t size)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(VivariumReport) report = NULL;
  g_autoptr(GError) error = NULL;

  /* The verifier's own checks before json-glib: depth (it recurses) and
   * \u escapes (it makes strings that are not UTF-8 of some). */
  if (!vivarium_json_depth_within ((const gchar *) data, size, 16) ||
      !vivarium_json_escapes_valid ((const gchar *) data, size) ||
      !json_parser_load_from_data (parser, (const gchar *) data, (gssize) size, NULL) ||
      json_parser_get_root (parser) == NULL)
    return;
  report = vivarium_report_from_json (json_parser_get_root (parser), &error);
  if (report == NULL) {
    check_refusal (error);
    return;
  }
  check_accepted (report);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) parse_error = NULL;
  g_autoptr(VivariumReport) verified = NULL;
  g_autoptr(VivariumReport) parsed = NULL;
  g_autofree gchar *fingerprint = NULL;

  verified = vivarium_signed_report_verify ((const gchar *) data, size, NULL, &fingerprint, &error);
  if (verified != NULL)
    check_verified (data, size, verified, fingerprint);
  else
    check_refusal (error);
  parsed = vivarium_signed_report_parse_unverified ((const gchar *) data, size, &parse_error);
  if (parsed != NULL)
    check_accepted (parsed);
  else
    check_refusal (parse_error);
  check_bare (data, size);
  return 0;
}
