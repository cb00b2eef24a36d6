/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-size.h"

/* GLib keeps a size in the unit below the next power of 1024, so just under
 * it (1048575 bytes) reads "1024.0 KiB". Such a size is shown as what it
 * rounds to, the next unit ("1.0 MiB"); any other is GLib's, translated. */
static guint64
shown_as (guint64 bytes)
{
  for (guint64 unit = 1024; unit <= (G_GUINT64_CONSTANT (1) << 50); unit *= 1024) {
    gchar buf[G_ASCII_DTOSTR_BUF_SIZE];

    if (bytes < unit || bytes >= unit * 1024)
      continue;
    g_ascii_formatd (buf, sizeof buf, "%.1f", (gdouble) bytes / (gdouble) unit);
    return strcmp (buf, "1024.0") == 0 ? unit * 1024 : bytes;
  }
  return bytes;
}

gchar *
vivarium_format_size (guint64 bytes, gboolean exact)
{
  guint64 shown = shown_as (bytes);
  g_autofree gchar *rounded = g_format_size_full (shown, G_FORMAT_SIZE_IEC_UNITS);
  g_autofree gchar *plain = NULL;
  g_autofree gchar *full = NULL;

  /* Below a KiB the long form would only repeat the number. */
  if (!exact || bytes < 1024)
    return g_steal_pointer (&rounded);
  /* GLib's long form, "1.5 MiB (1572864 bytes)", is translated whole: only
   * its leading short form is swapped for the rounded one. */
  full = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS | G_FORMAT_SIZE_LONG_FORMAT);
  plain = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);
  if (shown == bytes || !g_str_has_prefix (full, plain))
    return g_steal_pointer (&full);
  return g_strconcat (rounded, full + strlen (plain), NULL);
}
