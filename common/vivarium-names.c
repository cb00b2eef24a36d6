/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <gio/gio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"

static gboolean
name_char_ok (gchar c, gboolean first)
{
  if (g_ascii_isalnum (c))
    return TRUE;
  return !first && (c == '-' || c == '_' || c == '.');
}

/* Names become directory names, unit names and object path elements, so the
 * alphabet is deliberately small: no '/', no "..", nothing a shell or a
 * terminal would interpret. */
gboolean
vivarium_name_validate (const gchar *kind, const gchar *name, GError **error)
{
  gsize len;

  if (name == NULL || name[0] == '\0') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The %s name is empty", kind);
    return FALSE;
  }
  len = strlen (name);
  if (len > VIVARIUM_NAME_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The %s name is %" G_GSIZE_FORMAT " bytes long; the limit is %d",
                 kind, len, VIVARIUM_NAME_MAX);
    return FALSE;
  }
  for (gsize i = 0; i < len; i++) {
    if (!name_char_ok (name[i], i == 0)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "The %s name may only hold letters, digits, '-', '_' and '.', "
                   "and must start with a letter or digit (byte %" G_GSIZE_FORMAT " is not allowed)",
                   kind, i);
      return FALSE;
    }
  }
  if (strstr (name, "..") != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The %s name may not contain \"..\"", kind);
    return FALSE;
  }
  return TRUE;
}

static gboolean
project_name_char_ok (gchar c, gboolean first)
{
  if (g_ascii_isdigit (c) || (c >= 'a' && c <= 'z'))
    return TRUE;
  return !first && (c == '-' || c == '_' || c == '.');
}

/* The pattern is [a-z0-9][a-z0-9._-]{0,62}: no '/', and "." or ".." cannot
 * be spelt because the first byte is alphanumeric. */
gboolean
vivarium_project_name_validate (const gchar *name, GError **error)
{
  gsize len;

  if (name == NULL || name[0] == '\0') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The project name is empty");
    return FALSE;
  }
  len = strlen (name);
  if (len > VIVARIUM_PROJECT_NAME_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The project name is %" G_GSIZE_FORMAT " bytes long; the limit is %d",
                 len, VIVARIUM_PROJECT_NAME_MAX);
    return FALSE;
  }
  for (gsize i = 0; i < len; i++) {
    if (!project_name_char_ok (name[i], i == 0)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "A project name may only hold lower-case letters, digits, '.', '_' and '-', "
                   "and must start with a letter or digit (byte %" G_GSIZE_FORMAT " is not allowed)",
                   i);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
has_control_chars (const gchar *s)
{
  for (; *s != '\0'; s++) {
    if ((guchar) *s < 0x20 || *s == 0x7f)
      return TRUE;
  }
  return FALSE;
}

gboolean
vivarium_guest_path_validate (const gchar *path, GError **error)
{
  if (path == NULL || path[0] != '/') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A guest path must be absolute");
    return FALSE;
  }
  if (strlen (path) > VIVARIUM_PATH_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The guest path is longer than %d bytes", VIVARIUM_PATH_MAX);
    return FALSE;
  }
  if (!g_utf8_validate (path, -1, NULL) || has_control_chars (path)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The guest path must be UTF-8 without control characters");
    return FALSE;
  }
  return TRUE;
}

static gboolean
strv_validate (const gchar *what, const gchar * const *v, guint max_items,
               gboolean allow_empty_list, GError **error)
{
  guint n = v != NULL ? g_strv_length ((gchar **) v) : 0;

  if (n == 0 && !allow_empty_list) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The %s is empty", what);
    return FALSE;
  }
  if (n > max_items) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The %s has %u items; the limit is %u", what, n, max_items);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    if (strlen (v[i]) > VIVARIUM_ARG_LEN_MAX) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Item %u of the %s is longer than %d bytes", i, what, VIVARIUM_ARG_LEN_MAX);
      return FALSE;
    }
    if (!g_utf8_validate (v[i], -1, NULL)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Item %u of the %s is not valid UTF-8", i, what);
      return FALSE;
    }
  }
  return TRUE;
}

/* D-Bus strings cannot carry NUL bytes, so an argv with an embedded NUL
 * arrives as a refusal from the bus itself; what is left to check is size
 * and encoding, because the guest agent speaks JSON. */
gboolean
vivarium_argv_validate (const gchar * const *argv, GError **error)
{
  if (!strv_validate ("command line", argv, VIVARIUM_ARGV_MAX, FALSE, error))
    return FALSE;
  if (argv[0][0] == '\0') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The program name is empty");
    return FALSE;
  }
  return TRUE;
}

gboolean
vivarium_env_validate (const gchar * const *env, GError **error)
{
  if (!strv_validate ("environment", env, VIVARIUM_ENV_MAX, TRUE, error))
    return FALSE;
  for (guint i = 0; env != NULL && env[i] != NULL; i++) {
    const gchar *eq = strchr (env[i], '=');
    if (eq == NULL || eq == env[i]) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Environment item %u is not of the form NAME=VALUE", i);
      return FALSE;
    }
  }
  return TRUE;
}

gchar *
vivarium_object_path_for (const gchar *collection_path, const gchar *id)
{
  g_autofree gchar *escaped = g_dbus_escape_object_path (id);
  return g_strconcat (collection_path, "/", escaped, NULL);
}

/* Guest text is data: cap it, and escape every byte that is not printable
 * ASCII (or a newline/tab) so that it can never move a cursor, fake a
 * trusted prefix after a carriage return, or smuggle an escape sequence. */
gchar *
vivarium_escape_untrusted (const gchar *data, gsize len, gsize cap, gboolean *truncated)
{
  GString *out = g_string_sized_new (MIN (len, cap) + 16);
  gsize n = MIN (len, cap);

  for (gsize i = 0; i < n; i++) {
    guchar c = (guchar) data[i];
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f))
      g_string_append_c (out, (gchar) c);
    else
      g_string_append_printf (out, "\\x%02x", c);
  }
  if (truncated != NULL)
    *truncated = len > cap;
  return g_string_free (out, FALSE);
}
