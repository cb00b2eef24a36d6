/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-policy.h"
#include "vivarium-file.h"
#include "vivarium-secret.h"

#define SECRETS_FILE_MAX (1024 * 1024)
#define HEADER_MAX 64
#define FORMAT_MAX 256

gboolean
vivarium_secret_name_is_valid (const gchar *name)
{
  gsize len;

  if (name == NULL || !(g_ascii_isalpha (name[0]) || name[0] == '_'))
    return FALSE;
  len = strlen (name);
  if (len > 64)
    return FALSE;
  for (gsize i = 1; i < len; i++)
    if (!g_ascii_isalnum (name[i]) && name[i] != '_')
      return FALSE;
  return TRUE;
}

/* RFC 9110 tchar. */
static gboolean
is_token (const gchar *s)
{
  if (s == NULL || *s == '\0' || strlen (s) > HEADER_MAX)
    return FALSE;
  for (; *s != '\0'; s++)
    if (!g_ascii_isalnum (*s) && strchr ("!#$%&'*+-.^_`|~", *s) == NULL)
      return FALSE;
  return TRUE;
}

static gboolean
format_is_valid (const gchar *format)
{
  const gchar *first;

  if (format == NULL || strlen (format) > FORMAT_MAX)
    return FALSE;
  for (const gchar *p = format; *p != '\0'; p++)
    if (*p < 0x20 || *p > 0x7e)
      return FALSE;
  first = strstr (format, "{}");
  return first != NULL && strstr (first + 2, "{}") == NULL;
}

static gboolean
value_is_valid (GBytes *value)
{
  gsize len = 0;
  const gchar *data = value != NULL ? g_bytes_get_data (value, &len) : NULL;

  if (data == NULL || len == 0 || len > VIVARIUM_SECRET_MAX_VALUE || !g_utf8_validate (data, (gssize) len, NULL))
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if ((guchar) data[i] < 0x20 || data[i] == 0x7f)
      return FALSE;
  return TRUE;
}

static gboolean
host_is_valid (const gchar *host)
{
  g_autofree gchar *normal = NULL;
  guint16 port = 0;

  if (host == NULL || strchr (host, ':') != NULL || strchr (host, '[') != NULL)
    return FALSE;
  if (!vivarium_egress_rule_parse (host, &normal, &port, NULL) || port != 0 || g_strcmp0 (normal, host) != 0)
    return FALSE;
  /* A name, never an address: an IPv4 literal normalises to itself. */
  return !g_hostname_is_ip_address (host);
}

static gboolean
placeholder_is_valid (const gchar *placeholder)
{
  const gsize prefix = strlen (VIVARIUM_SECRET_PLACEHOLDER_PREFIX);

  if (strlen (placeholder) != VIVARIUM_SECRET_PLACEHOLDER_LEN ||
      !g_str_has_prefix (placeholder, VIVARIUM_SECRET_PLACEHOLDER_PREFIX))
    return FALSE;
  for (const gchar *p = placeholder + prefix; *p != '\0'; p++)
    if (!g_ascii_isxdigit (*p) || g_ascii_isupper (*p))
      return FALSE;
  return TRUE;
}

static gboolean
refuse (GError **error, const gchar *name, const gchar *what)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "The secret %s %s", name, what);
  return FALSE;
}

gboolean
vivarium_secret_check (const VivariumSecret *secret, GError **error)
{
  guint n;

  if (!vivarium_secret_name_is_valid (secret->name)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "A secret's name is a letter or '_' and then at most 63 letters, digits or '_' (an environment "
                 "variable's name)");
    return FALSE;
  }
  n = secret->hosts != NULL ? g_strv_length (secret->hosts) : 0;
  if (n == 0 || n > VIVARIUM_SECRET_MAX_HOSTS)
    return refuse (error, secret->name, "needs 1 to 16 hosts");
  for (guint i = 0; i < n; i++)
    if (!host_is_valid (secret->hosts[i]))
      return refuse (error, secret->name,
                     "has a host that is not a lower-case name or *.wildcard without a port (no IP address)");
  if (!is_token (secret->header))
    return refuse (error, secret->name, "names a header that is not an HTTP field name of at most 64 characters");
  if (!format_is_valid (secret->format))
    return refuse (error, secret->name, "has a format that is not printable ASCII of at most 256 characters with "
                                        "exactly one {}");
  if (!value_is_valid (secret->value))
    return refuse (error, secret->name, "has a value that is empty, longer than 16384 bytes, not UTF-8 or holds a "
                                        "control character");
  if (secret->placeholder != NULL && !placeholder_is_valid (secret->placeholder))
    return refuse (error, secret->name, "has a placeholder not made by vivarium_secret_placeholder_new()");
  return TRUE;
}

VivariumSecret *
vivarium_secret_copy (const VivariumSecret *secret)
{
  VivariumSecret *copy = g_new0 (VivariumSecret, 1);

  copy->name = g_strdup (secret->name);
  copy->hosts = g_strdupv (secret->hosts);
  copy->header = g_strdup (secret->header);
  copy->format = g_strdup (secret->format);
  copy->placeholder = g_strdup (secret->placeholder);
  copy->value = secret->value != NULL ? g_bytes_ref (secret->value) : NULL;
  copy->added_at = secret->added_at;
  return copy;
}

void
vivarium_secret_free (VivariumSecret *secret)
{
  if (secret == NULL)
    return;
  g_free (secret->name);
  g_strfreev (secret->hosts);
  g_free (secret->header);
  g_free (secret->format);
  g_free (secret->placeholder);
  g_clear_pointer (&secret->value, g_bytes_unref);
  g_free (secret);
}

gchar *
vivarium_secret_placeholder_new (void)
{
  GString *s = g_string_new (VIVARIUM_SECRET_PLACEHOLDER_PREFIX);

  for (guint i = 0; i < 4; i++)
    g_string_append_printf (s, "%08x", g_random_int ());
  return g_string_free (s, FALSE);
}

gboolean
vivarium_secret_applies_to (const VivariumSecret *secret, const gchar *host)
{
  for (guint i = 0; secret->hosts != NULL && secret->hosts[i] != NULL; i++) {
    const gchar *h = secret->hosts[i];

    if (g_str_has_prefix (h, "*.") ? (g_str_has_suffix (host, h + 1) && strlen (host) > strlen (h) - 1)
                                   : g_strcmp0 (h, host) == 0)
      return TRUE;
  }
  return FALSE;
}

gchar *
vivarium_secret_render (const VivariumSecret *secret)
{
  const gchar *at = strstr (secret->format, "{}");
  gsize len = 0;
  const gchar *value = g_bytes_get_data (secret->value, &len);
  GString *s = g_string_sized_new (strlen (secret->format) + len);

  g_string_append_len (s, secret->format, at - secret->format);
  g_string_append_len (s, value, (gssize) len);
  g_string_append (s, at + 2);
  return g_string_free (s, FALSE);
}

static void
save_one (GKeyFile *file, guint i, const VivariumSecret *secret)
{
  g_autofree gchar *group = g_strdup_printf ("Secret %u", i);
  gsize len = 0;
  const guchar *data = g_bytes_get_data (secret->value, &len);
  g_autofree gchar *encoded = g_base64_encode (data, len);

  g_key_file_set_string (file, group, "Name", secret->name);
  g_key_file_set_string_list (file, group, "Hosts", (const gchar * const *) secret->hosts,
                              g_strv_length (secret->hosts));
  g_key_file_set_string (file, group, "Header", secret->header);
  g_key_file_set_string (file, group, "Format", secret->format);
  if (secret->placeholder != NULL)
    g_key_file_set_string (file, group, "Placeholder", secret->placeholder);
  g_key_file_set_int64 (file, group, "AddedAt", secret->added_at);
  g_key_file_set_string (file, group, "Value", encoded);
  memset (encoded, 0, strlen (encoded));
}

gboolean
vivarium_secrets_save (GPtrArray *secrets, const gchar *path, gint mode, GError **error)
{
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autofree gchar *text = NULL;
  gsize len = 0;
  gboolean ok;

  for (guint i = 0; i < secrets->len; i++) {
    if (!vivarium_secret_check (secrets->pdata[i], error))
      return FALSE;
    save_one (file, i, secrets->pdata[i]);
  }
  g_key_file_set_integer (file, "End", "Secrets", (gint) secrets->len);
  text = g_key_file_to_data (file, &len, NULL);
  ok = vivarium_file_write_durably (path, text, len, mode, error);
  memset (text, 0, len);
  return ok;
}

static VivariumSecret *
load_one (GKeyFile *file, guint i, const gchar *path, GError **error)
{
  g_autofree gchar *group = g_strdup_printf ("Secret %u", i);
  g_autoptr(VivariumSecret) secret = g_new0 (VivariumSecret, 1);
  g_autofree gchar *encoded = NULL;
  guchar *data;
  gsize len = 0;
  g_autoptr(GError) local = NULL;

  secret->name = g_key_file_get_string (file, group, "Name", &local);
  if (local == NULL)
    secret->hosts = g_key_file_get_string_list (file, group, "Hosts", NULL, &local);
  if (local == NULL)
    secret->header = g_key_file_get_string (file, group, "Header", &local);
  if (local == NULL)
    secret->format = g_key_file_get_string (file, group, "Format", &local);
  if (local == NULL)
    secret->added_at = g_key_file_get_int64 (file, group, "AddedAt", &local);
  if (local == NULL)
    encoded = g_key_file_get_string (file, group, "Value", &local);
  if (local != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a secrets file: [%s] %s", path, group,
                 local->message);
    return NULL;
  }
  secret->placeholder = g_key_file_get_string (file, group, "Placeholder", NULL);
  data = g_base64_decode (encoded, &len);
  memset (encoded, 0, strlen (encoded));
  secret->value = g_bytes_new_take (data, len);
  if (!vivarium_secret_check (secret, &local)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a secrets file: %s", path, local->message);
    return NULL;
  }
  return g_steal_pointer (&secret);
}

GPtrArray *
vivarium_secrets_load (const gchar *path, GError **error)
{
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autoptr(GPtrArray) secrets = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  g_autoptr(GError) local = NULL;
  gsize len = 0;
  g_autofree gchar *text = vivarium_file_read_bounded (path, SECRETS_FILE_MAX, &len, error);
  gint n;

  if (text == NULL)
    return NULL;
  if (memchr (text, '\0', len) != NULL || !g_key_file_load_from_data (file, text, len, G_KEY_FILE_NONE, &local)) {
    memset (text, 0, len);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a secrets file", path);
    return NULL;
  }
  memset (text, 0, len);
  n = g_key_file_get_integer (file, "End", "Secrets", &local);
  if (local != NULL || n < 0 || n > 4096) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a whole secrets file (no [End])", path);
    return NULL;
  }
  for (gint i = 0; i < n; i++) {
    VivariumSecret *secret = load_one (file, (guint) i, path, error);
    if (secret == NULL)
      return NULL;
    g_ptr_array_add (secrets, secret);
  }
  return g_steal_pointer (&secrets);
}
