/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-report.h"
#include "vd-fs.h"
#include "vd-signing-key.h"

/* The daemon's signing key on disk and the signed file: a real key made in
 * a temporary directory, a real signature, and a check that no byte of the
 * file can change without the check failing. */

typedef struct {
  gchar *tmp;
  gchar *keys;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->tmp = g_dir_make_tmp ("vivarium-signing-XXXXXX", &error);
  g_assert_no_error (error);
  f->keys = g_build_filename (f->tmp, "keys", NULL);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_fs_rm_rf (f->tmp, &error));
  g_assert_no_error (error);
  g_free (f->keys);
  g_free (f->tmp);
}

static VivariumReport *
make_report (void)
{
  VivariumReport *r = vivarium_report_new ();
  const gchar *argv[] = { "sh", "-c", "make check\n\x1b[2J", NULL };
  g_autoptr(GString) summary = g_string_new ("Outcome: DONE\nVerification: pass\n");

  for (guint i = 0; i < 200; i++)
    g_string_append (summary, "all good ");
  vivarium_report_set_id (r, "r-1");
  vivarium_report_set_task_id (r, "t-1");
  vivarium_report_set_session_id (r, "s-1");
  vivarium_report_set_image (r, "tiny", "sha256:00ff");
  vivarium_report_set_times (r, 1764583200000000, 1764583290000000);
  vivarium_report_set_host (r, "host");
  vivarium_report_set_outcome (r, VIVARIUM_OUTCOME_DONE, NULL);
  vivarium_report_add_command (r, "exec", argv, 1764583200000001, 5, 0, 1, 2, NULL);
  vivarium_report_add_file (r, "a\nb", VIVARIUM_FILE_CHANGE_ADDED, VIVARIUM_FILE_KIND_FILE, 1, 0);
  vivarium_report_set_commit (r, "abc123");
  vivarium_report_set_verification (r, "make check", VIVARIUM_VERIFY_WHOSE_CALLER, 1,
                                    VIVARIUM_VERDICT_FAIL, "s-2");
  vivarium_report_set_summary (r, summary->str, (gssize) summary->len);
  return r;
}

static GBytes *
sign (VdSigningKey *key)
{
  g_autoptr(VivariumReport) r = make_report ();
  g_autoptr(GError) error = NULL;
  GBytes *signed_file = vd_signing_key_sign_report (key, r, &error);

  g_assert_no_error (error);
  g_assert_nonnull (signed_file);
  return signed_file;
}

static guint
mode_of (const gchar *path)
{
  struct stat st;

  g_assert_cmpint (lstat (path, &st), ==, 0);
  return st.st_mode & 07777;
}

static void
test_key_files (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(VdSigningKey) again = NULL;
  g_autofree gchar *path = g_build_filename (f->keys, VD_SIGNING_KEY_FILE, NULL);
  g_autofree gchar *b64 = NULL;
  g_autofree guchar *raw = NULL;
  g_autoptr(GBytes) pub = NULL;
  g_autofree gchar *fingerprint = NULL;
  g_auto(GStrv) names = NULL;
  gsize len = 0;

  g_assert_no_error (error);
  g_assert_nonnull (key);
  g_assert_cmphex (mode_of (f->keys), ==, 0700);
  g_assert_cmphex (mode_of (path), ==, 0600);
  /* Written atomically: nothing but the key is left in the directory. */
  names = vd_fs_list_dir (f->keys);
  g_assert_cmpuint (g_strv_length (names), ==, 1);
  g_assert_cmpstr (names[0], ==, VD_SIGNING_KEY_FILE);

  pub = vd_signing_key_get_public_key (key);
  g_assert_cmpuint (g_bytes_get_size (pub), ==, VIVARIUM_ED25519_PUBLIC_KEY_SIZE);
  b64 = vd_signing_key_get_public_key_base64 (key);
  raw = g_base64_decode (b64, &len);
  g_assert_cmpuint (len, ==, VIVARIUM_ED25519_PUBLIC_KEY_SIZE);
  g_assert_cmpmem (raw, len, g_bytes_get_data (pub, NULL), len);
  fingerprint = vivarium_key_fingerprint (pub);
  g_assert_cmpstr (vd_signing_key_get_fingerprint (key), ==, fingerprint);
  g_assert_true (g_str_has_prefix (fingerprint, "sha256:"));
  g_assert_cmpuint (strlen (fingerprint), ==, strlen ("sha256:") + 64);

  /* The second start loads the same key instead of making another. */
  again = vd_signing_key_load_or_generate (f->keys, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (vd_signing_key_get_fingerprint (again), ==, fingerprint);
}

static void
test_key_refusals (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autofree gchar *path = g_build_filename (f->keys, VD_SIGNING_KEY_FILE, NULL);
  g_autofree gchar *elsewhere = g_build_filename (f->tmp, "elsewhere.pem", NULL);
  g_autoptr(VdSigningKey) none = NULL;

  g_assert_no_error (error);
  g_clear_object (&key);

  /* A key others could read may have leaked: refused, not fixed. */
  g_assert_cmpint (chmod (path, 0644), ==, 0);
  key = vd_signing_key_load_or_generate (f->keys, &error);
  g_assert_null (key);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "leaked"));
  g_clear_error (&error);

  /* A symlink is never followed. */
  g_assert_cmpint (rename (path, elsewhere), ==, 0);
  g_assert_cmpint (chmod (elsewhere, 0600), ==, 0);
  g_assert_cmpint (symlink (elsewhere, path), ==, 0);
  key = vd_signing_key_load_or_generate (f->keys, &error);
  g_assert_null (key);
  g_assert_nonnull (error);
  g_clear_error (&error);
  g_assert_cmpint (unlink (path), ==, 0);

  /* Not a key. */
  g_assert_true (g_file_set_contents_full (path, "not a key\n", -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
  key = vd_signing_key_load_or_generate (f->keys, &error);
  g_assert_null (key);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_cmpint (unlink (path), ==, 0);

  /* Load alone never makes one. */
  none = vd_signing_key_load (f->keys, &error);
  g_assert_null (none);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* A directory we own but others may enter is closed before use. */
  g_assert_cmpint (chmod (f->keys, 0755), ==, 0);
  key = vd_signing_key_load_or_generate (f->keys, &error);
  g_assert_no_error (error);
  g_assert_cmphex (mode_of (f->keys), ==, 0700);
}

static gpointer
load_in_thread (gpointer keys_dir)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (keys_dir, &error);

  g_assert_no_error (error);
  return g_strdup (vd_signing_key_get_fingerprint (key));
}

/* Daemons starting at once: whoever renames first wins, nobody replaces
 * the key another one already handed out, all end with the same key. */
static void
test_key_race (Fixture *f, gconstpointer data)
{
  GThread *threads[6];
  g_autofree gchar *first = NULL;
  g_auto(GStrv) names = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("keygen", load_in_thread, f->keys);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++) {
    g_autofree gchar *fp = g_thread_join (threads[i]);

    if (first == NULL)
      first = g_strdup (fp);
    g_assert_cmpstr (fp, ==, first);
  }
  names = vd_fs_list_dir (f->keys);
  g_assert_cmpuint (g_strv_length (names), ==, 1);
}

static void
assert_verifies (GBytes *file, const gchar *expected_fp, const gchar *want_fp)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *fp = NULL;
  g_autoptr(VivariumReport) r = vivarium_signed_report_verify (g_bytes_get_data (file, NULL),
                                                               g_bytes_get_size (file), expected_fp,
                                                               &fp, &error);

  g_assert_no_error (error);
  g_assert_nonnull (r);
  g_assert_cmpstr (fp, ==, want_fp);
  g_assert_cmpstr (vivarium_report_get_id (r), ==, "r-1");
}

static void
assert_refused (const gchar *data, gsize len, const gchar *what)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *fp = NULL;
  g_autoptr(VivariumReport) r = vivarium_signed_report_verify (data, len, NULL, &fp, &error);

  if (r != NULL)
    g_error ("a signed report verified after %s", what);
  g_test_message ("%s: %s", what, error->message);
  g_assert_nonnull (error);
  g_assert_true (error->domain == VIVARIUM_ERROR);
  g_assert_null (fp);
}

static void
test_sign_verify (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(GBytes) file = NULL;
  g_autofree gchar *copy = NULL;
  const gchar *text;
  gsize len = 0;
  const gchar *marks[] = { "all good", "\"value\":\"", "\"public-key\":\"", "\"key-fingerprint\":\"sha256:",
                           "\"outcome\":\"", "\"exit-status\":", "a\\nb", NULL };

  g_assert_no_error (error);
  file = sign (key);
  text = g_bytes_get_data (file, &len);
  g_assert_true (g_str_has_prefix (text, "{\"report\":{\"version\":1,"));
  g_assert_true (g_str_has_suffix (text, "}}\n"));
  assert_verifies (file, NULL, vd_signing_key_get_fingerprint (key));
  assert_verifies (file, vd_signing_key_get_fingerprint (key), vd_signing_key_get_fingerprint (key));

  /* Every single byte, each flipped in turn. */
  copy = g_memdup2 (text, len);
  for (gsize i = 0; i < len; i++) {
    g_autofree gchar *what = g_strdup_printf ("flipping byte %" G_GSIZE_FORMAT " (“%c”)", i, g_ascii_isprint (text[i]) ? text[i] : '?');

    copy[i] ^= 0x01;
    assert_refused (copy, len, what);
    copy[i] ^= 0x01;
  }
  g_test_message ("%" G_GSIZE_FORMAT " one-byte changes refused", len);

  /* Other one-byte changes in the places that matter most. */
  for (guint m = 0; marks[m] != NULL; m++) {
    const gchar *at = strstr (text, marks[m]);
    gsize pos;

    g_assert_nonnull (at);
    pos = (gsize) (at - text) + strlen (marks[m]);
    for (guint delta = 1; delta < 0x80; delta <<= 1) {
      copy[pos] ^= (gchar) delta;
      assert_refused (copy, len, marks[m]);
      copy[pos] ^= (gchar) delta;
    }
  }

  /* Lengths: a byte added, a byte taken, a space where a reader would not mind. */
  {
    g_autofree gchar *longer = g_strdup_printf ("%s ", text);
    g_autofree gchar *spaced = g_strdup_printf ("{ %s", text + 1);

    assert_refused (longer, len + 1, "appending a space");
    assert_refused (text, len - 1, "dropping the final newline");
    assert_refused (spaced, len + 1, "inserting a space");
  }
  g_assert_cmpmem (copy, len, text, len);
}

static void
test_other_key (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir_b = g_build_filename (f->tmp, "keys-b", NULL);
  g_autoptr(VdSigningKey) a = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(VdSigningKey) b = vd_signing_key_load_or_generate (dir_b, &error);
  g_autoptr(GBytes) by_b = NULL;
  g_autoptr(VivariumReport) r = NULL;
  g_autoptr(GBytes) canonical = NULL;
  g_autoptr(GBytes) sig_b = NULL;
  g_autoptr(GBytes) pub_a = NULL;
  g_autoptr(GBytes) forged = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (vd_signing_key_get_fingerprint (a), !=, vd_signing_key_get_fingerprint (b));
  by_b = sign (b);
  assert_verifies (by_b, NULL, vd_signing_key_get_fingerprint (b));
  assert_verifies (by_b, vd_signing_key_get_fingerprint (b), vd_signing_key_get_fingerprint (b));
  r = vivarium_signed_report_verify (g_bytes_get_data (by_b, NULL), g_bytes_get_size (by_b),
                                     vd_signing_key_get_fingerprint (a), NULL, &error);
  g_assert_null (r);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH);
  g_clear_error (&error);

  /* B's signature presented as A's: the public key does not make it A's. */
  r = make_report ();
  canonical = vivarium_report_to_canonical (r, &error);
  g_assert_no_error (error);
  sig_b = vd_signing_key_sign (b, canonical, &error);
  g_assert_no_error (error);
  pub_a = vd_signing_key_get_public_key (a);
  forged = vivarium_signed_report_assemble (canonical, pub_a, sig_b, &error);
  g_assert_no_error (error);
  assert_refused (g_bytes_get_data (forged, NULL), g_bytes_get_size (forged), "swapping the public key");
}

static void
test_hostile_files (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(VivariumReport) unsigned_report = vivarium_report_new ();
  g_autoptr(GBytes) none = NULL;
  g_autoptr(GBytes) file = NULL;
  g_autofree gchar *deep = NULL;
  g_autofree gchar *huge = NULL;
  g_autofree gchar *tampered = NULL;
  g_autoptr(VivariumReport) parsed = NULL;
  const gsize n = 1000 * 1000;

  g_assert_no_error (error);
  /* A report that would not read back is not signed. */
  none = vd_signing_key_sign_report (key, unsigned_report, &error);
  g_assert_null (none);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* A million '[' would take json-glib's recursive parser's stack. */
  deep = g_malloc (2 * n + 1);
  memset (deep, '[', n);
  memset (deep + n, ']', n);
  deep[2 * n] = '\0';
  assert_refused (deep, 2 * n, "nesting a million arrays");

  huge = g_malloc0 (VIVARIUM_REPORT_DOCUMENT_MAX + 1);
  parsed = vivarium_signed_report_verify (huge, VIVARIUM_REPORT_DOCUMENT_MAX + 1, NULL, NULL, &error);
  g_assert_null (parsed);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE);
  g_clear_error (&error);

  assert_refused ("", 0, "nothing");
  assert_refused ("{}", 2, "an empty object");
  assert_refused ("{\"report\":{},\"signature\":{}}", 29, "empty members");

  /* --no-verify reads a changed file, and still refuses a malformed one. */
  file = sign (key);
  tampered = g_strndup (g_bytes_get_data (file, NULL), g_bytes_get_size (file));
  g_assert_nonnull (strstr (tampered, "\"verdict\":\"fail\""));
  memcpy (strstr (tampered, "\"verdict\":\"fail\"") + strlen ("\"verdict\":"), "\"pass\"", 6);
  assert_refused (tampered, strlen (tampered), "changing the verdict");
  parsed = vivarium_signed_report_parse_unverified (tampered, strlen (tampered), &error);
  g_assert_no_error (error);
  g_assert_cmpint (vivarium_report_get_verify_verdict (parsed), ==, VIVARIUM_VERDICT_PASS);
  g_clear_object (&parsed);
  parsed = vivarium_signed_report_parse_unverified (deep, 2 * n, &error);
  g_assert_null (parsed);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
}

/* The signature's members are the file's words, of any JSON type: a
 * non-string algorithm is a refusal, never a json-glib critical (found by
 * tests/fuzz/fuzz-report-verify). */
static void
test_signature_member_types (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(GBytes) file = NULL;
  const gchar *algorithms[] = { "[]", "{\"name\":\"ed25519\"}", "25519", "null", "true" };

  g_assert_no_error (error);
  file = sign (key);
  for (gsize i = 0; i < G_N_ELEMENTS (algorithms); i++) {
    g_autofree gchar *text = g_strndup (g_bytes_get_data (file, NULL), g_bytes_get_size (file));
    g_auto(GStrv) parts = g_strsplit (text, "\"algorithm\":\"ed25519\"", 2);
    g_autofree gchar *changed = NULL;
    g_autofree gchar *what = g_strdup_printf ("an algorithm of %s", algorithms[i]);
    g_autoptr(VivariumReport) parsed = NULL;

    g_assert_cmpuint (g_strv_length (parts), ==, 2);
    changed = g_strconcat (parts[0], "\"algorithm\":", algorithms[i], parts[1], NULL);
    assert_refused (changed, strlen (changed), what);
    /* --no-verify does not look at the signature at all. */
    parsed = vivarium_signed_report_parse_unverified (changed, strlen (changed), &error);
    g_assert_no_error (error);
    g_assert_nonnull (parsed);
  }
}

/* What the file says is shown escaped in a refusal, never as its raw
 * bytes: a member the reader does not know (escaped and cut) and the token
 * json-glib choked on. tests/fuzz found both: an invalid UTF-8 name, and a
 * newline and U+202E from a string in the sentence; an escape sequence
 * would reach the terminal of whoever runs `vivariumctl report verify`. */
static void
test_unknown_member_escaped (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(GBytes) file = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *changed = NULL;
  g_autofree gchar *long_name = g_strnfill (5000, 'x');
  const gchar *names[] = { "\\u001b[2J\xff\xfe", "Outcome: DONE\\n\\u0007", NULL };

  g_assert_no_error (error);
  file = sign (key);
  text = g_strndup (g_bytes_get_data (file, NULL), g_bytes_get_size (file));
  g_assert_true (g_str_has_prefix (text, "{\"report\":{"));
  names[2] = long_name;
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++) {
    g_autoptr(VivariumReport) r = NULL;
    g_free (changed);
    changed = g_strdup_printf ("{\"report\":{\"%s\":1,%s", names[i], text + strlen ("{\"report\":{"));
    r = vivarium_signed_report_verify (changed, strlen (changed), NULL, NULL, &error);
    g_assert_null (r);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_assert_true (g_utf8_validate (error->message, -1, NULL));
    for (const gchar *c = error->message; *c != '\0'; c++)
      g_assert_false ((guchar) *c < 0x20 || *c == 0x7f);
    g_assert_cmpuint (strlen (error->message), <, 256);
    g_clear_error (&error);
  }
  /* json-glib's own sentence quotes the token it choked on. */
  {
    const gchar *bad = "{\"report\" \"\\u001b[2J\\nOutcome: DONE\xff\"}";
    g_autoptr(VivariumReport) r = vivarium_signed_report_verify (bad, strlen (bad), NULL, NULL, &error);
    g_assert_null (r);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_assert_true (g_utf8_validate (error->message, -1, NULL));
    for (const gchar *c = error->message; *c != '\0'; c++)
      g_assert_false ((guchar) *c < 0x20 || *c == 0x7f);
  }
}

/* Half a surrogate pair (or a \u json-glib reads a non-digit of) made a
 * string that is not UTF-8 of a file that is ASCII: read even unverified,
 * such a report re-serialised to bytes that are not JSON (tests/fuzz). */
static void
test_escapes_not_characters (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VdSigningKey) key = vd_signing_key_load_or_generate (f->keys, &error);
  g_autoptr(GBytes) file = NULL;
  g_autofree gchar *text = NULL;
  const gchar *escapes[] = { "\\ud800xxxxxx", "\\udEch" };

  g_assert_no_error (error);
  file = sign (key);
  text = g_strndup (g_bytes_get_data (file, NULL), g_bytes_get_size (file));
  for (gsize i = 0; i < G_N_ELEMENTS (escapes); i++) {
    g_auto(GStrv) parts = g_strsplit (text, "\"host\":\"", 2);
    g_autofree gchar *changed = NULL;
    g_autoptr(VivariumReport) r = NULL;

    g_assert_cmpuint (g_strv_length (parts), ==, 2);
    changed = g_strconcat (parts[0], "\"host\":\"", escapes[i], parts[1], NULL);
    r = vivarium_signed_report_parse_unverified (changed, strlen (changed), &error);
    g_assert_null (r);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    assert_refused (changed, strlen (changed), escapes[i]);
  }
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) \
  g_test_add ("/report-signing/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)
  ADD ("key-files", test_key_files);
  ADD ("key-refusals", test_key_refusals);
  ADD ("key-race", test_key_race);
  ADD ("sign-verify", test_sign_verify);
  ADD ("other-key", test_other_key);
  ADD ("hostile-files", test_hostile_files);
  ADD ("signature-member-types", test_signature_member_types);
  ADD ("unknown-member-escaped", test_unknown_member_escaped);
  ADD ("escapes-not-characters", test_escapes_not_characters);
  return g_test_run ();
}
