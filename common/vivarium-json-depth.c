/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "config.h"

#include "vivarium-json-depth.h"

gboolean
vivarium_json_depth_within (const gchar *text, gsize len, guint max_depth)
{
  gboolean in_string = FALSE;
  gboolean escaped = FALSE;
  guint depth = 0;

  for (gsize i = 0; i < len; i++) {
    gchar c = text[i];

    if (in_string) {
      if (escaped)
        escaped = FALSE;
      else if (c == '\\')
        escaped = TRUE;
      else if (c == '"')
        in_string = FALSE;
    } else if (c == '"') {
      in_string = TRUE;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return FALSE;
    } else if ((c == '}' || c == ']') && depth > 0) {
      depth--;
    }
  }
  return TRUE;
}
