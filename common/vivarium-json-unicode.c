/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-json-unicode.h"

/* The value of the four hex digits after "\u" at @p, or -1. */
static gint
escape_value (const gchar *p, const gchar *end)
{
  gint v = 0;

  if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
    return -1;
  for (guint i = 2; i < 6; i++) {
    gint d = g_ascii_xdigit_value (p[i]);
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* A backslash outside a string is not JSON (the parser refuses it), so the
 * escapes are found without tracking strings: each '\' starts one, and
 * "\\" is skipped whole. A "\u" without four hex digits is not JSON
 * either, and is refused here. */
gboolean
vivarium_json_escapes_valid (const gchar *text, gsize len)
{
  const gchar *end = text + len;

  for (const gchar *p = text; p < end; p++) {
    gint v;
    if (*p != '\\')
      continue;
    if (p + 1 < end && p[1] != 'u') {
      p++;   /* past the escaped character */
      continue;
    }
    /* json-glib takes what is not a hex digit for one, too ("\udEch" was
     * a surrogate to it): four hex digits, as JSON has it, or nothing. */
    v = escape_value (p, end);
    if (v < 0)
      return FALSE;
    if (v < 0xd800 || v > 0xdfff) {
      p += 5;
      continue;
    }
    /* A high surrogate, and a low one right after it. */
    if (v > 0xdbff)
      return FALSE;
    v = escape_value (p + 6, end);
    if (v < 0xdc00 || v > 0xdfff)
      return FALSE;
    p += 11;
  }
  return TRUE;
}
