/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>

#include "vivarium-error.h"
#include "vivarium-json-depth.h"
#include "vivarium-json-unicode.h"
#include "vivarium-report.h"

/* The signed file and its offline check. Only the public key is needed, so
 * this lives in common/: vivariumctl and the app check a copy themselves. */

/* A report is five levels deep; json-glib's parser recurses once per level,
 * so a file of a million '[' would take the reader's stack with it. */
#define SIGNED_REPORT_DEPTH_MAX 16

gchar *
vivarium_key_fingerprint (GBytes *public_key)
{
  g_autofree gchar *hex = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, public_key);

  return g_strdup_printf ("sha256:%s", hex);
}

static gchar *
base64_of (GBytes *bytes)
{
  gsize len = 0;
  const guchar *data = g_bytes_get_data (bytes, &len);

  return g_base64_encode (data, len);
}

static gchar *
signature_json (GBytes *public_key, GBytes *signature)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree gchar *key = base64_of (public_key);
  g_autofree gchar *fingerprint = vivarium_key_fingerprint (public_key);
  g_autofree gchar *value = base64_of (signature);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "algorithm");
  json_builder_add_string_value (b, VIVARIUM_SIGNATURE_ALGORITHM);
  json_builder_set_member_name (b, "public-key");
  json_builder_add_string_value (b, key);
  json_builder_set_member_name (b, "key-fingerprint");
  json_builder_add_string_value (b, fingerprint);
  json_builder_set_member_name (b, "value");
  json_builder_add_string_value (b, value);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (generator, root);
  return json_generator_to_data (generator, NULL);
}

GBytes *
vivarium_signed_report_assemble (GBytes *canonical_report, GBytes *public_key, GBytes *signature,
                                 GError **error)
{
  g_autofree gchar *sig = NULL;
  GString *out;

  g_return_val_if_fail (canonical_report != NULL && public_key != NULL && signature != NULL, NULL);
  if (g_bytes_get_size (public_key) != VIVARIUM_ED25519_PUBLIC_KEY_SIZE ||
      g_bytes_get_size (signature) != VIVARIUM_ED25519_SIGNATURE_SIZE) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "An Ed25519 public key has 32 bytes and a signature 64");
    return NULL;
  }
  sig = signature_json (public_key, signature);
  out = g_string_new ("{\"report\":");
  g_string_append_len (out, g_bytes_get_data (canonical_report, NULL),
                       (gssize) g_bytes_get_size (canonical_report));
  g_string_append (out, ",\"signature\":");
  g_string_append (out, sig);
  g_string_append (out, "}\n");
  return g_string_free_to_bytes (out);
}

/* --- reading ----------------------------------------------------------- */

static JsonParser *
parse_bounded (const gchar *data, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error_local = NULL;

  if (len > VIVARIUM_REPORT_DOCUMENT_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 "A signed report is at most %d bytes; this one has %" G_GSIZE_FORMAT,
                 VIVARIUM_REPORT_DOCUMENT_MAX, len);
    return NULL;
  }
  if (!vivarium_json_depth_within (data, len, SIGNED_REPORT_DEPTH_MAX)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "This is not a signed report: its JSON is nested deeper than a report's");
    return NULL;
  }
  /* json-glib makes strings that are not UTF-8 of some \u escapes. */
  if (!vivarium_json_escapes_valid (data, len)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "This is not a signed report: it holds a \\u escape that is not a character");
    return NULL;
  }
  if (!json_parser_load_from_data (parser, data, (gssize) len, &error_local)) {
    /* json-glib quotes the token it choked on: the file's bytes, escaped
     * like any untrusted text before anyone prints them (tests/fuzz). */
    g_autofree gchar *why = vivarium_report_escape_untrusted (error_local->message, FALSE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "This is not a signed report: %.512s", why);
    return NULL;
  }
  return g_steal_pointer (&parser);
}

static JsonObject *
envelope_object (JsonParser *parser, GError **error)
{
  JsonNode *root = json_parser_get_root (parser);
  JsonObject *obj;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "This is not a signed report: it is not a JSON object");
    return NULL;
  }
  obj = json_node_get_object (root);
  if (json_object_get_size (obj) != 2 || !json_object_has_member (obj, "report") ||
      !json_object_has_member (obj, "signature")) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "A signed report has exactly the members “report” and “signature”");
    return NULL;
  }
  return obj;
}

static GBytes *
decode_exact (JsonObject *sig, const gchar *member, gsize size, GError **error)
{
  JsonNode *node = json_object_get_member (sig, member);
  guchar *data;
  gsize len = 0;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The signature's member “%s” must be a base64 string", member);
    return NULL;
  }
  /* GLib's decoder skips what is not base64; the canonical comparison
   * later refuses any such spelling. */
  data = g_base64_decode (json_node_get_string (node), &len);
  if (len != size) {
    g_free (data);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The signature's member “%s” must hold %" G_GSIZE_FORMAT " bytes", member, size);
    return NULL;
  }
  return g_bytes_new_take (data, len);
}

static gboolean
read_signature (JsonObject *envelope, GBytes **public_key, GBytes **value, GError **error)
{
  JsonNode *node = json_object_get_member (envelope, "signature");
  JsonNode *algorithm;
  JsonObject *sig;

  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "The member “signature” must be an object");
    return FALSE;
  }
  sig = json_node_get_object (node);
  algorithm = json_object_get_member (sig, "algorithm");
  /* Not json_object_get_string_member_with_default(): it calls a member
   * that is not a value a programming error (a critical; tests/fuzz). */
  if (algorithm == NULL || !JSON_NODE_HOLDS_VALUE (algorithm) ||
      g_strcmp0 (json_node_get_string (algorithm), VIVARIUM_SIGNATURE_ALGORITHM) != 0) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "The signature's algorithm must be “" VIVARIUM_SIGNATURE_ALGORITHM "”");
    return FALSE;
  }
  *public_key = decode_exact (sig, "public-key", VIVARIUM_ED25519_PUBLIC_KEY_SIZE, error);
  if (*public_key == NULL)
    return FALSE;
  *value = decode_exact (sig, "value", VIVARIUM_ED25519_SIGNATURE_SIZE, error);
  return *value != NULL;
}

static gboolean
ed25519_verify (GBytes *public_key, GBytes *message, GBytes *signature, GError **error)
{
  gnutls_pubkey_t key = NULL;
  gnutls_datum_t x = { (guchar *) g_bytes_get_data (public_key, NULL),
                       (guint) g_bytes_get_size (public_key) };
  gnutls_datum_t data = { (guchar *) g_bytes_get_data (message, NULL),
                          (guint) g_bytes_get_size (message) };
  gnutls_datum_t sig = { (guchar *) g_bytes_get_data (signature, NULL),
                         (guint) g_bytes_get_size (signature) };
  gint rc;

  rc = gnutls_pubkey_init (&key);
  if (rc >= 0)
    rc = gnutls_pubkey_import_ecc_raw (key, GNUTLS_ECC_CURVE_ED25519, &x, NULL);
  if (rc < 0) {
    gnutls_pubkey_deinit (key);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The signature's public key cannot be used: %s", gnutls_strerror (rc));
    return FALSE;
  }
  rc = gnutls_pubkey_verify_data2 (key, GNUTLS_SIGN_EDDSA_ED25519, 0, &data, &sig);
  gnutls_pubkey_deinit (key);
  if (rc < 0) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                         "The signature does not match the report: the report was changed "
                         "after it was signed, or was not signed with this key");
    return FALSE;
  }
  return TRUE;
}

/* The file must be exactly what assemble() makes of its own content: then
 * whitespace, member order, number and string spellings, a duplicated
 * member or a stray byte can change nothing without being noticed. */
static gboolean
check_canonical (const gchar *data, gsize len, GBytes *canonical, GBytes *public_key,
                 GBytes *value, GError **error)
{
  g_autoptr(GBytes) expected = vivarium_signed_report_assemble (canonical, public_key, value,
                                                                error);

  if (expected == NULL)
    return FALSE;
  if (g_bytes_get_size (expected) != len || memcmp (g_bytes_get_data (expected, NULL), data, len) != 0) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                         "The file is not byte for byte the signed report the daemon wrote: "
                         "it was changed");
    return FALSE;
  }
  return TRUE;
}

VivariumReport *
vivarium_signed_report_parse_unverified (const gchar *data, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = parse_bounded (data, len, error);
  JsonObject *envelope;

  if (parser == NULL)
    return NULL;
  envelope = envelope_object (parser, error);
  if (envelope == NULL)
    return NULL;
  return vivarium_report_from_json (json_object_get_member (envelope, "report"), error);
}

VivariumReport *
vivarium_signed_report_verify (const gchar *data, gsize len, const gchar *expected_fingerprint,
                               gchar **fingerprint, GError **error)
{
  g_autoptr(JsonParser) parser = parse_bounded (data, len, error);
  g_autoptr(VivariumReport) report = NULL;
  g_autoptr(GBytes) canonical = NULL;
  g_autoptr(GBytes) public_key = NULL;
  g_autoptr(GBytes) value = NULL;
  g_autofree gchar *found = NULL;
  JsonObject *envelope;

  if (parser == NULL)
    return NULL;
  envelope = envelope_object (parser, error);
  if (envelope == NULL)
    return NULL;
  report = vivarium_report_from_json (json_object_get_member (envelope, "report"), error);
  if (report == NULL)
    return NULL;
  canonical = vivarium_report_to_canonical (report, error);
  if (canonical == NULL || !read_signature (envelope, &public_key, &value, error) ||
      !check_canonical (data, len, canonical, public_key, value, error) ||
      !ed25519_verify (public_key, canonical, value, error))
    return NULL;
  found = vivarium_key_fingerprint (public_key);
  if (expected_fingerprint != NULL && g_strcmp0 (found, expected_fingerprint) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                 "The report was signed by the key %s, not by %s", found, expected_fingerprint);
    return NULL;
  }
  if (fingerprint != NULL)
    *fingerprint = g_steal_pointer (&found);
  return g_steal_pointer (&report);
}
