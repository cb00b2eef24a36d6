/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSigningKey"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <gnutls/gnutls.h>
#include <gnutls/abstract.h>
#include <gnutls/x509.h>

#include "vivarium-error.h"
#include "vd-signing-key.h"

/* A PKCS#8 PEM Ed25519 key is 119 bytes; anything much larger is not ours. */
#define KEY_FILE_MAX (16 * 1024)

struct _VdSigningKey {
  GObject           parent_instance;
  gnutls_privkey_t  key;
  GBytes           *public_key;
  gchar            *fingerprint;
};

G_DEFINE_TYPE (VdSigningKey, vd_signing_key, G_TYPE_OBJECT)

static void
vd_signing_key_finalize (GObject *object)
{
  VdSigningKey *self = VD_SIGNING_KEY (object);

  if (self->key != NULL)
    gnutls_privkey_deinit (self->key);
  g_clear_pointer (&self->public_key, g_bytes_unref);
  g_free (self->fingerprint);
  G_OBJECT_CLASS (vd_signing_key_parent_class)->finalize (object);
}

static void
vd_signing_key_class_init (VdSigningKeyClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_signing_key_finalize;
}

static void
vd_signing_key_init (VdSigningKey *self)
{
}

static gboolean
fail_errno (GError **error, const gchar *what, const gchar *path)
{
  int saved = errno;

  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "Cannot %s %s: %s", what, path,
               g_strerror (saved));
  return FALSE;
}

static gboolean
fail_gnutls (GError **error, const gchar *what, gint rc)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot %s the report-signing key: %s",
               what, gnutls_strerror (rc));
  return FALSE;
}

/* --- the key in memory --------------------------------------------------- */

static gboolean
derive_public (VdSigningKey *self, GError **error)
{
  gnutls_pubkey_t pub = NULL;
  gnutls_ecc_curve_t curve = GNUTLS_ECC_CURVE_INVALID;
  gnutls_datum_t x = { NULL, 0 };
  gint rc;

  rc = gnutls_pubkey_init (&pub);
  if (rc >= 0)
    rc = gnutls_pubkey_import_privkey (pub, self->key, 0, 0);
  if (rc >= 0)
    rc = gnutls_pubkey_export_ecc_raw2 (pub, &curve, &x, NULL, GNUTLS_EXPORT_FLAG_NO_LZ);
  gnutls_pubkey_deinit (pub);
  if (rc < 0)
    return fail_gnutls (error, "read the public half of", rc);
  if (curve != GNUTLS_ECC_CURVE_ED25519 || x.size != VIVARIUM_ED25519_PUBLIC_KEY_SIZE) {
    gnutls_free (x.data);
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                         "The report-signing key is not an Ed25519 key");
    return FALSE;
  }
  self->public_key = g_bytes_new (x.data, x.size);
  gnutls_free (x.data);
  self->fingerprint = vivarium_key_fingerprint (self->public_key);
  return TRUE;
}

static VdSigningKey *
key_from_pem (const gchar *pem, gsize len, const gchar *path, GError **error)
{
  g_autoptr(VdSigningKey) self = g_object_new (VD_TYPE_SIGNING_KEY, NULL);
  gnutls_datum_t datum = { (guchar *) pem, (guint) len };
  gint rc;

  rc = gnutls_privkey_init (&self->key);
  if (rc >= 0)
    rc = gnutls_privkey_import_x509_raw (self->key, &datum, GNUTLS_X509_FMT_PEM, NULL, 0);
  if (rc < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "%s does not hold a usable private key: %s", path, gnutls_strerror (rc));
    return NULL;
  }
  if (gnutls_privkey_get_pk_algorithm (self->key, NULL) != GNUTLS_PK_EDDSA_ED25519) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "%s holds a key that is not Ed25519", path);
    return NULL;
  }
  if (!derive_public (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

/* --- files ----------------------------------------------------------------- */

/* The directory must be ours and closed to others; a looser one we own is
 * tightened (the daemon made it), anyone else's is refused. */
static gboolean
prepare_dir (const gchar *dir, GError **error)
{
  struct stat st;

  if (g_mkdir_with_parents (dir, 0700) != 0)
    return fail_errno (error, "create the keys directory", dir);
  if (lstat (dir, &st) != 0)
    return fail_errno (error, "inspect the keys directory", dir);
  if (!S_ISDIR (st.st_mode) || st.st_uid != geteuid ()) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The keys directory %s is not a directory of this user's", dir);
    return FALSE;
  }
  if ((st.st_mode & 0077) != 0 && chmod (dir, 0700) != 0)
    return fail_errno (error, "restrict the keys directory", dir);
  return TRUE;
}

static gboolean
check_key_file (int fd, const gchar *path, GError **error)
{
  struct stat st;

  if (fstat (fd, &st) != 0)
    return fail_errno (error, "inspect", path);
  if (!S_ISREG (st.st_mode) || st.st_uid != geteuid ()) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "%s is not a regular file owned by this user", path);
    return FALSE;
  }
  if ((st.st_mode & 0077) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "%s may be read by others (mode %04o): the key may have leaked; "
                 "remove it to make a new one", path, (guint) (st.st_mode & 07777));
    return FALSE;
  }
  if (st.st_size > KEY_FILE_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s is too large for a key", path);
    return FALSE;
  }
  return TRUE;
}

static gchar *
read_key_file (const gchar *path, gsize *len, GError **error)
{
  g_autofree gchar *buf = g_malloc (KEY_FILE_MAX + 1);
  gsize got = 0;
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0) {
    fail_errno (error, "open", path);
    return NULL;
  }
  if (!check_key_file (fd, path, error)) {
    close (fd);
    return NULL;
  }
  while (got < KEY_FILE_MAX) {
    gssize n = read (fd, buf + got, KEY_FILE_MAX - got);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      fail_errno (error, "read", path);
      close (fd);
      return NULL;
    }
    if (n == 0)
      break;
    got += (gsize) n;
  }
  close (fd);
  buf[got] = '\0';
  *len = got;
  return g_steal_pointer (&buf);
}

static gboolean
write_all (int fd, const guchar *data, gsize len)
{
  while (len > 0) {
    gssize n = write (fd, data, len);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return FALSE;
    data += n;
    len -= (gsize) n;
  }
  return TRUE;
}

static void
fsync_dir (const gchar *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd >= 0) {
    fsync (fd);
    close (fd);
  }
}

/* Temp file (mkstemp makes it 0600), fsync, then a rename that never
 * replaces: if another process put a key there first, theirs is kept and
 * we load it (EEXIST is reported to the caller as such). */
static gboolean
write_key_file (const gchar *dir, const gchar *path, const gnutls_datum_t *pem, GError **error)
{
  g_autofree gchar *tmp = g_build_filename (dir, "." VD_SIGNING_KEY_FILE ".XXXXXX", NULL);
  int fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0600);
  gboolean ok;

  if (fd < 0)
    return fail_errno (error, "create a file in", dir);
  ok = fchmod (fd, 0600) == 0 && write_all (fd, pem->data, pem->size) && fsync (fd) == 0;
  if (!ok) {
    fail_errno (error, "write", tmp);
    close (fd);
    g_unlink (tmp);
    return FALSE;
  }
  if (close (fd) != 0) {
    fail_errno (error, "write", tmp);
    g_unlink (tmp);
    return FALSE;
  }
  if (renameat2 (AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
    fail_errno (error, "put the new key in place at", path);
    g_unlink (tmp);
    return FALSE;
  }
  fsync_dir (dir);
  return TRUE;
}

static gboolean
generate_pem (gnutls_datum_t *pem, GError **error)
{
  gnutls_privkey_t key = NULL;
  gnutls_x509_privkey_t x509 = NULL;
  gint rc;

  rc = gnutls_privkey_init (&key);
  if (rc >= 0)
    rc = gnutls_privkey_generate2 (key, GNUTLS_PK_EDDSA_ED25519, 256, 0, NULL, 0);
  if (rc >= 0)
    rc = gnutls_privkey_export_x509 (key, &x509);
  if (rc >= 0)
    rc = gnutls_x509_privkey_export2_pkcs8 (x509, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                            pem);
  gnutls_x509_privkey_deinit (x509);
  gnutls_privkey_deinit (key);
  if (rc < 0)
    return fail_gnutls (error, "generate", rc);
  return TRUE;
}

VdSigningKey *
vd_signing_key_load (const gchar *keys_dir, GError **error)
{
  g_autofree gchar *path = g_build_filename (keys_dir, VD_SIGNING_KEY_FILE, NULL);
  g_autofree gchar *pem = NULL;
  VdSigningKey *self;
  gsize len = 0;

  g_return_val_if_fail (keys_dir != NULL, NULL);
  pem = read_key_file (path, &len, error);
  if (pem == NULL)
    return NULL;
  self = key_from_pem (pem, len, path, error);
  /* The private key has no business staying in freed memory. */
  explicit_bzero (pem, len);
  return self;
}

VdSigningKey *
vd_signing_key_load_or_generate (const gchar *keys_dir, GError **error)
{
  g_autofree gchar *path = g_build_filename (keys_dir, VD_SIGNING_KEY_FILE, NULL);
  g_autoptr(GError) error_local = NULL;
  gnutls_datum_t pem = { NULL, 0 };
  VdSigningKey *self;
  gboolean written;

  g_return_val_if_fail (keys_dir != NULL, NULL);
  if (!prepare_dir (keys_dir, error))
    return NULL;
  self = vd_signing_key_load (keys_dir, &error_local);
  if (self != NULL || !g_error_matches (error_local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND)) {
    if (self == NULL)
      g_propagate_error (error, g_steal_pointer (&error_local));
    return self;
  }
  g_clear_error (&error_local);
  if (!generate_pem (&pem, error))
    return NULL;
  written = write_key_file (keys_dir, path, &pem, &error_local);
  explicit_bzero (pem.data, pem.size);
  gnutls_free (pem.data);
  if (!written && !g_error_matches (error_local, G_IO_ERROR, G_IO_ERROR_EXISTS)) {
    g_propagate_error (error, g_steal_pointer (&error_local));
    return NULL;
  }
  if (written)
    g_info ("Made a new report-signing key in %s", path);
  return vd_signing_key_load (keys_dir, error);
}

/* --- use ------------------------------------------------------------------ */

GBytes *
vd_signing_key_sign (VdSigningKey *self, GBytes *data, GError **error)
{
  gnutls_datum_t in = { (guchar *) g_bytes_get_data (data, NULL), (guint) g_bytes_get_size (data) };
  gnutls_datum_t sig = { NULL, 0 };
  GBytes *out;
  gint rc;

  g_return_val_if_fail (VD_IS_SIGNING_KEY (self), NULL);
  rc = gnutls_privkey_sign_data2 (self->key, GNUTLS_SIGN_EDDSA_ED25519, 0, &in, &sig);
  if (rc < 0) {
    fail_gnutls (error, "sign with", rc);
    return NULL;
  }
  out = g_bytes_new (sig.data, sig.size);
  gnutls_free (sig.data);
  return out;
}

GBytes *
vd_signing_key_sign_report (VdSigningKey *self, VivariumReport *report, GError **error)
{
  g_autoptr(GBytes) canonical = NULL;
  g_autoptr(GBytes) signature = NULL;

  g_return_val_if_fail (VD_IS_SIGNING_KEY (self), NULL);
  canonical = vivarium_report_to_canonical (report, error);
  if (canonical == NULL)
    return NULL;
  signature = vd_signing_key_sign (self, canonical, error);
  if (signature == NULL)
    return NULL;
  return vivarium_signed_report_assemble (canonical, self->public_key, signature, error);
}

GBytes *
vd_signing_key_get_public_key (VdSigningKey *self)
{
  g_return_val_if_fail (VD_IS_SIGNING_KEY (self), NULL);
  return g_bytes_ref (self->public_key);
}

gchar *
vd_signing_key_get_public_key_base64 (VdSigningKey *self)
{
  gsize len = 0;
  const guchar *data;

  g_return_val_if_fail (VD_IS_SIGNING_KEY (self), NULL);
  data = g_bytes_get_data (self->public_key, &len);
  return g_base64_encode (data, len);
}

const gchar *
vd_signing_key_get_fingerprint (VdSigningKey *self)
{
  g_return_val_if_fail (VD_IS_SIGNING_KEY (self), NULL);
  return self->fingerprint;
}
