/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-file.h"
#include "vivarium-secret.h"
#include "vivarium-ssh-key.h"

/* Eight keys of the largest size, base64 and key-file escaping included. */
#define SSH_KEYS_FILE_MAX (512 * 1024)

static gboolean
is_printable (const gchar *s)
{
  for (; *s != '\0'; s++)
    if (*s < 0x20 || *s > 0x7e)
      return FALSE;
  return TRUE;
}

GBytes *
vivarium_ssh_key_public_blob (const gchar *public_key)
{
  g_auto(GStrv) fields = NULL;
  guchar *data;
  gsize len = 0;

  if (public_key == NULL || strlen (public_key) > VIVARIUM_SSH_KEY_MAX_PUBLIC || !is_printable (public_key))
    return NULL;
  fields = g_strsplit (public_key, " ", 3);
  if (g_strv_length (fields) < 2 || fields[0][0] == '\0' || fields[1][0] == '\0')
    return NULL;
  for (const gchar *c = fields[1]; *c != '\0'; c++)
    if (!g_ascii_isalnum (*c) && *c != '+' && *c != '/' && *c != '=')
      return NULL;
  data = g_base64_decode (fields[1], &len);
  /* The blob starts with the key type as an SSH string: a check that the
   * base64 is a key's and not any bytes. */
  if (len < 4 + strlen (fields[0]) || ((gsize) data[0] << 24 | (gsize) data[1] << 16 | (gsize) data[2] << 8 | data[3]) != strlen (fields[0]) ||
      memcmp (data + 4, fields[0], strlen (fields[0])) != 0) {
    g_free (data);
    return NULL;
  }
  return g_bytes_new_take (data, len);
}

gchar *
vivarium_ssh_key_fingerprint (const gchar *public_key)
{
  g_autoptr(GBytes) blob = vivarium_ssh_key_public_blob (public_key);
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;
  g_autofree gchar *b64 = NULL;
  gchar *end;

  if (blob == NULL)
    return NULL;
  g_checksum_update (sum, g_bytes_get_data (blob, NULL), g_bytes_get_size (blob));
  g_checksum_get_digest (sum, digest, &len);
  b64 = g_base64_encode (digest, len);
  /* ssh-keygen -l prints it unpadded. */
  end = strchr (b64, '=');
  if (end != NULL)
    *end = '\0';
  return g_strconcat ("SHA256:", b64, NULL);
}

static gboolean
refuse (GError **error, const gchar *name, const gchar *what)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "the SSH key %s %s", name != NULL ? name : "(unnamed)",
               what);
  return FALSE;
}

static gboolean
private_is_valid (GBytes *private_key)
{
  gsize len = 0;
  const gchar *data = private_key != NULL ? g_bytes_get_data (private_key, &len) : NULL;

  return data != NULL && len >= strlen (VIVARIUM_SSH_KEY_PEM_BEGIN) && len <= VIVARIUM_SSH_KEY_MAX_PRIVATE &&
         memchr (data, '\0', len) == NULL && memcmp (data, VIVARIUM_SSH_KEY_PEM_BEGIN,
                                                    strlen (VIVARIUM_SSH_KEY_PEM_BEGIN)) == 0;
}

gboolean
vivarium_ssh_key_check (const VivariumSshKey *key, GError **error)
{
  g_autofree gchar *fingerprint = NULL;

  if (!vivarium_secret_name_is_valid (key->name))
    return refuse (error, NULL, "has a name that is not [A-Za-z_][A-Za-z0-9_]{0,63}");
  fingerprint = vivarium_ssh_key_fingerprint (key->public_key);
  if (fingerprint == NULL)
    return refuse (error, key->name, "has a public key that is not \"TYPE BASE64\"");
  if (g_strcmp0 (fingerprint, key->fingerprint) != 0)
    return refuse (error, key->name, "has a fingerprint that is not its public key's");
  if (!private_is_valid (key->private_key))
    return refuse (error, key->name, "is not an OpenSSH private key of at most 16384 bytes");
  return TRUE;
}

void
vivarium_ssh_key_drop_private (VivariumSshKey *key)
{
  gsize len = 0;
  gpointer data;

  if (key->private_key == NULL)
    return;
  /* Our own copy (load or the store's read): wipe it. */
  data = (gpointer) g_bytes_get_data (key->private_key, &len);
  if (data != NULL)
    memset (data, 0, len);
  g_clear_pointer (&key->private_key, g_bytes_unref);
}

void
vivarium_ssh_key_free (VivariumSshKey *key)
{
  if (key == NULL)
    return;
  vivarium_ssh_key_drop_private (key);
  g_free (key->name);
  g_free (key->public_key);
  g_free (key->fingerprint);
  g_free (key);
}

static void
save_one (GKeyFile *file, guint i, const VivariumSshKey *key)
{
  g_autofree gchar *group = g_strdup_printf ("SshKey %u", i);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (key->private_key, &len);
  g_autofree gchar *encoded = g_base64_encode (data, len);

  g_key_file_set_string (file, group, "Name", key->name);
  g_key_file_set_string (file, group, "PublicKey", key->public_key);
  g_key_file_set_string (file, group, "Fingerprint", key->fingerprint);
  g_key_file_set_int64 (file, group, "AddedAt", key->added_at);
  g_key_file_set_string (file, group, "PrivateKey", encoded);
  memset (encoded, 0, strlen (encoded));
}

gboolean
vivarium_ssh_keys_save (GPtrArray *keys, const gchar *path, gint mode, GError **error)
{
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gboolean ok;

  for (guint i = 0; i < keys->len; i++) {
    if (!vivarium_ssh_key_check (keys->pdata[i], error))
      return FALSE;
    save_one (file, i, keys->pdata[i]);
  }
  g_key_file_set_integer (file, "End", "SshKeys", (gint) keys->len);
  text = g_key_file_to_data (file, &len, NULL);
  ok = vivarium_file_write_durably (path, text, len, mode, error);
  memset (text, 0, len);
  return ok;
}

static VivariumSshKey *
load_one (GKeyFile *file, guint i, const gchar *path, GError **error)
{
  g_autofree gchar *group = g_strdup_printf ("SshKey %u", i);
  g_autoptr(VivariumSshKey) key = g_new0 (VivariumSshKey, 1);
  g_autofree gchar *encoded = NULL;
  guchar *data;
  gsize len = 0;
  g_autoptr(GError) local = NULL;

  key->name = g_key_file_get_string (file, group, "Name", &local);
  if (local == NULL)
    key->public_key = g_key_file_get_string (file, group, "PublicKey", &local);
  if (local == NULL)
    key->fingerprint = g_key_file_get_string (file, group, "Fingerprint", &local);
  if (local == NULL)
    key->added_at = g_key_file_get_int64 (file, group, "AddedAt", &local);
  if (local == NULL)
    encoded = g_key_file_get_string (file, group, "PrivateKey", &local);
  if (local != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not an SSH keys file: [%s] %s", path, group,
                 local->message);
    return NULL;
  }
  data = g_base64_decode (encoded, &len);
  memset (encoded, 0, strlen (encoded));
  key->private_key = g_bytes_new_take (data, len);
  if (!vivarium_ssh_key_check (key, &local)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not an SSH keys file: %s", path, local->message);
    return NULL;
  }
  return g_steal_pointer (&key);
}

GPtrArray *
vivarium_ssh_keys_load (const gchar *path, GError **error)
{
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_ssh_key_free);
  g_autoptr(GError) local = NULL;
  gsize len = 0;
  g_autofree gchar *text = vivarium_file_read_bounded (path, SSH_KEYS_FILE_MAX, &len, error);
  gint n;

  if (text == NULL)
    return NULL;
  if (memchr (text, '\0', len) != NULL || !g_key_file_load_from_data (file, text, len, G_KEY_FILE_NONE, &local)) {
    memset (text, 0, len);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not an SSH keys file", path);
    return NULL;
  }
  memset (text, 0, len);
  n = g_key_file_get_integer (file, "End", "SshKeys", &local);
  if (local != NULL || n < 0 || n > 4096) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a whole SSH keys file (no [End])", path);
    return NULL;
  }
  for (gint i = 0; i < n; i++) {
    VivariumSshKey *key = load_one (file, (guint) i, path, error);
    if (key == NULL)
      return NULL;
    g_ptr_array_add (keys, key);
  }
  return g_steal_pointer (&keys);
}
