/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <string.h>
#include <time.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>

#include "vivarium-egress-ca.h"
#include "vivarium-file.h"

#define BEFORE_START_SEC (60 * 60)
#define VALID_SEC (30 * 24 * 60 * 60)
#define SERIAL_LEN 16

struct _VivariumEgressCa {
  gnutls_x509_privkey_t key;        /* the CA's; never exported */
  gnutls_x509_crt_t     crt;
  gnutls_x509_privkey_t leaf_key;   /* one for every minted certificate */
  gchar                *pem;
  time_t                not_before, not_after;
  GMutex                lock;
  GHashTable           *cache;      /* name → GTlsCertificate */
};

static gboolean
check (int ret, const gchar *what, GError **error)
{
  if (ret >= 0)
    return TRUE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "cannot make the session's CA (%s): %s", what,
               gnutls_strerror (ret));
  return FALSE;
}

static gboolean
new_p256_key (gnutls_x509_privkey_t *key, GError **error)
{
  return check (gnutls_x509_privkey_init (key), "key", error) &&
         check (gnutls_x509_privkey_generate (*key, GNUTLS_PK_ECDSA,
                                              GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), 0),
                "ECDSA P-256 key", error);
}

/* Common to the CA's certificate and the leaves. */
static gboolean
set_basics (gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, time_t not_before, time_t not_after, GError **error)
{
  guint8 serial[SERIAL_LEN];

  if (!check (gnutls_rnd (GNUTLS_RND_NONCE, serial, sizeof serial), "serial", error))
    return FALSE;
  serial[0] &= 0x7f;   /* a positive number */
  return check (gnutls_x509_crt_set_version (crt, 3), "version", error) &&
         check (gnutls_x509_crt_set_serial (crt, serial, sizeof serial), "serial", error) &&
         check (gnutls_x509_crt_set_activation_time (crt, not_before), "validity", error) &&
         check (gnutls_x509_crt_set_expiration_time (crt, not_after), "validity", error) &&
         check (gnutls_x509_crt_set_key (crt, key), "key", error);
}

/* Only the secrets' names: a guest that somehow got the CA's key could
 * still not vouch for any other name, nor for an address. */
static gboolean
set_constraints (gnutls_x509_crt_t crt, const gchar *const *hosts, GError **error)
{
  gnutls_x509_name_constraints_t nc;
  static const guint8 any[32] = { 0 };
  gnutls_datum_t v4 = { (guint8 *) any, 8 }, v6 = { (guint8 *) any, 32 };
  gboolean ok;

  if (!check (gnutls_x509_name_constraints_init (&nc), "name constraints", error))
    return FALSE;
  ok = TRUE;
  for (guint i = 0; ok && hosts[i] != NULL; i++) {
    /* A dNSName constraint covers the name and every name below it. */
    const gchar *base = g_str_has_prefix (hosts[i], "*.") ? hosts[i] + 2 : hosts[i];
    gnutls_datum_t d = { (guint8 *) base, (guint) strlen (base) };
    ok = check (gnutls_x509_name_constraints_add_permitted (nc, GNUTLS_SAN_DNSNAME, &d), "name constraints", error);
  }
  ok = ok && check (gnutls_x509_name_constraints_add_excluded (nc, GNUTLS_SAN_IPADDRESS, &v4), "name constraints",
                    error) &&
       check (gnutls_x509_name_constraints_add_excluded (nc, GNUTLS_SAN_IPADDRESS, &v6), "name constraints", error) &&
       check (gnutls_x509_crt_set_name_constraints (crt, nc, 1), "name constraints", error);
  gnutls_x509_name_constraints_deinit (nc);
  return ok;
}

static gchar *
export_pem (gnutls_x509_crt_t crt, GError **error)
{
  gnutls_datum_t out = { NULL, 0 };
  gchar *pem;

  if (!check (gnutls_x509_crt_export2 (crt, GNUTLS_X509_FMT_PEM, &out), "PEM", error))
    return NULL;
  pem = g_strndup ((const gchar *) out.data, out.size);
  gnutls_free (out.data);
  return pem;
}

static gboolean
make_ca (VivariumEgressCa *ca, const gchar *session, const gchar *const *hosts, GError **error)
{
  g_autofree gchar *dn = NULL;
  guint8 id[64];
  size_t id_len = sizeof id;
  g_autofree gchar *safe = g_strdup (session);

  /* The subject is a DN string: nothing in it may read as a separator. */
  g_strcanon (safe, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.", '_');
  dn = g_strdup_printf ("CN=Vivarium session CA %s", safe);
  if (!new_p256_key (&ca->key, error) || !check (gnutls_x509_crt_init (&ca->crt), "certificate", error) ||
      !set_basics (ca->crt, ca->key, ca->not_before, ca->not_after, error))
    return FALSE;
  return check (gnutls_x509_crt_set_dn (ca->crt, dn, NULL), "subject", error) &&
         check (gnutls_x509_crt_set_basic_constraints (ca->crt, 1, 0), "basic constraints", error) &&
         check (gnutls_x509_crt_set_key_usage (ca->crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN), "key usage",
                error) &&
         check (gnutls_x509_crt_get_key_id (ca->crt, 0, id, &id_len), "key id", error) &&
         check (gnutls_x509_crt_set_subject_key_id (ca->crt, id, id_len), "key id", error) &&
         set_constraints (ca->crt, hosts, error) &&
         check (gnutls_x509_crt_sign2 (ca->crt, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0), "signature", error) &&
         (ca->pem = export_pem (ca->crt, error)) != NULL;
}

VivariumEgressCa *
vivarium_egress_ca_new (const gchar *session, const gchar *const *hosts, GError **error)
{
  g_autoptr(VivariumEgressCa) ca = g_new0 (VivariumEgressCa, 1);
  time_t now = time (NULL);

  g_mutex_init (&ca->lock);
  ca->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  ca->not_before = now - BEFORE_START_SEC;
  ca->not_after = now + VALID_SEC;
  if (!make_ca (ca, session, hosts, error) || !new_p256_key (&ca->leaf_key, error))
    return NULL;
  return g_steal_pointer (&ca);
}

void
vivarium_egress_ca_free (VivariumEgressCa *ca)
{
  if (ca == NULL)
    return;
  if (ca->crt != NULL)
    gnutls_x509_crt_deinit (ca->crt);
  if (ca->key != NULL)
    gnutls_x509_privkey_deinit (ca->key);
  if (ca->leaf_key != NULL)
    gnutls_x509_privkey_deinit (ca->leaf_key);
  g_hash_table_unref (ca->cache);
  g_mutex_clear (&ca->lock);
  g_free (ca->pem);
  g_free (ca);
}

gboolean
vivarium_egress_ca_write (VivariumEgressCa *ca, const gchar *path, GError **error)
{
  return vivarium_file_write_durably (path, ca->pem, strlen (ca->pem), 0644, error);
}

static gboolean
sign_leaf (VivariumEgressCa *ca, gnutls_x509_crt_t leaf, const gchar *name, GError **error)
{
  g_autofree gchar *dn = g_strdup_printf ("CN=%s", name);
  guint8 id[64];
  size_t id_len = sizeof id;

  return set_basics (leaf, ca->leaf_key, ca->not_before, ca->not_after, error) &&
         check (gnutls_x509_crt_set_dn (leaf, dn, NULL), "subject", error) &&
         check (gnutls_x509_crt_set_subject_alt_name (leaf, GNUTLS_SAN_DNSNAME, name, strlen (name),
                                                      GNUTLS_FSAN_SET),
                "subject alternative name", error) &&
         check (gnutls_x509_crt_set_basic_constraints (leaf, 0, -1), "basic constraints", error) &&
         check (gnutls_x509_crt_set_key_usage (leaf, GNUTLS_KEY_DIGITAL_SIGNATURE), "key usage", error) &&
         check (gnutls_x509_crt_set_key_purpose_oid (leaf, GNUTLS_KP_TLS_WWW_SERVER, 0), "key purpose", error) &&
         check (gnutls_x509_crt_get_subject_key_id (ca->crt, id, &id_len, NULL), "key id", error) &&
         check (gnutls_x509_crt_set_authority_key_id (leaf, id, id_len), "key id", error) &&
         check (gnutls_x509_crt_sign2 (leaf, ca->crt, ca->key, GNUTLS_DIG_SHA256, 0), "signature", error);
}

/* The leaf, then the CA (a chain GIO sends whole), then the leaf's key;
 * the key's PEM is wiped once GIO holds it. */
static GTlsCertificate *
mint (VivariumEgressCa *ca, const gchar *name, GError **error)
{
  gnutls_x509_crt_t leaf;
  gnutls_datum_t key = { NULL, 0 };
  g_autofree gchar *leaf_pem = NULL;
  g_autofree gchar *text = NULL;
  GTlsCertificate *cert;
  gboolean ok;

  if (!check (gnutls_x509_crt_init (&leaf), "certificate", error))
    return NULL;
  ok = sign_leaf (ca, leaf, name, error) && (leaf_pem = export_pem (leaf, error)) != NULL &&
       check (gnutls_x509_privkey_export2_pkcs8 (ca->leaf_key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &key),
              "key", error);
  gnutls_x509_crt_deinit (leaf);
  if (!ok)
    return NULL;
  text = g_strdup_printf ("%s%s%.*s", leaf_pem, ca->pem, (int) key.size, (const gchar *) key.data);
  memset (key.data, 0, key.size);
  gnutls_free (key.data);
  cert = g_tls_certificate_new_from_pem (text, -1, error);
  memset (text, 0, strlen (text));
  return cert;
}

GTlsCertificate *
vivarium_egress_ca_certificate_for (VivariumEgressCa *ca, const gchar *name, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ca->lock);
  GTlsCertificate *cert = g_hash_table_lookup (ca->cache, name);

  if (cert != NULL)
    return g_object_ref (cert);
  cert = mint (ca, name, error);
  if (cert == NULL)
    return NULL;
  /* Wildcard hosts could name without end: the cache starts over. */
  if (g_hash_table_size (ca->cache) >= VIVARIUM_EGRESS_CA_MAX_CACHED)
    g_hash_table_remove_all (ca->cache);
  g_hash_table_insert (ca->cache, g_strdup (name), g_object_ref (cert));
  return cert;
}
