/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vd-capacity.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* One "Key:   123 kB" line of /proc/meminfo, in bytes. */
static gboolean
meminfo_field (const gchar *text, const gchar *key, guint64 *bytes)
{
  gsize key_len = strlen (key);
  const gchar *line = text;

  for (; line != NULL && *line != '\0'; line = strchr (line, '\n') != NULL ? strchr (line, '\n') + 1 : NULL) {
    const gchar *p = line + key_len;
    gchar *end = NULL;
    guint64 kib;

    if (strncmp (line, key, key_len) != 0 || *p != ':')
      continue;
    for (p++; *p == ' ' || *p == '\t'; p++)
      ;
    if (!g_ascii_isdigit (*p))
      return FALSE;
    errno = 0;
    kib = g_ascii_strtoull (p, &end, 10);
    if (errno != 0 || kib > G_MAXUINT64 / 1024 || !g_str_has_prefix (end, " kB"))
      return FALSE;
    *bytes = kib * 1024;
    return TRUE;
  }
  return FALSE;
}

gboolean
vd_capacity_parse_meminfo (const gchar *text, guint64 *total, guint64 *available)
{
  return meminfo_field (text, "MemTotal", total) && meminfo_field (text, "MemAvailable", available);
}

gboolean
vd_capacity_parse_loadavg (const gchar *text, gdouble *load)
{
  gchar *end = NULL;
  gdouble value;

  if (!g_ascii_isdigit (text[0]))
    return FALSE;
  value = g_ascii_strtod (text, &end);
  if (end == text || (*end != ' ' && *end != '\0' && *end != '\n') || value < 0 || value > 1e6)
    return FALSE;
  *load = value;
  return TRUE;
}

static guint
count_cpus (void)
{
  cpu_set_t set;

  if (sched_getaffinity (0, sizeof set, &set) == 0 && CPU_COUNT (&set) > 0)
    return CPU_COUNT (&set);
  return g_get_num_processors ();
}

static gboolean
read_proc (const gchar *path, gchar **text, GError **error)
{
  if (g_file_get_contents (path, text, NULL, error))
    return TRUE;
  g_prefix_error (error, "The host's figures could not be read: ");
  return FALSE;
}

gboolean
vd_capacity_read_host (VdCapacityHost *host, GError **error)
{
  g_autofree gchar *meminfo = NULL;
  g_autofree gchar *loadavg = NULL;

  if (!read_proc ("/proc/meminfo", &meminfo, error) || !read_proc ("/proc/loadavg", &loadavg, error))
    return FALSE;
  if (!vd_capacity_parse_meminfo (meminfo, &host->memory_total, &host->memory_available) ||
      !vd_capacity_parse_loadavg (loadavg, &host->load)) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                         "The host's figures could not be read: /proc/meminfo or /proc/loadavg is not as expected");
    return FALSE;
  }
  host->cpus = count_cpus ();
  return TRUE;
}

GVariant *
vd_capacity_to_variant (const VdCapacitySlots *slots, const VdCapacityHost *host)
{
  GVariantBuilder b;
  guint free_slots = slots->slots > slots->slots_in_use ? slots->slots - slots->slots_in_use : 0;
  guint queue_free = slots->max_queued > slots->queued ? slots->max_queued - slots->queued : 0;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "slots", g_variant_new_uint32 (slots->slots));
  g_variant_builder_add (&b, "{sv}", "slots-free", g_variant_new_uint32 (free_slots));
  g_variant_builder_add (&b, "{sv}", "queued", g_variant_new_uint32 (slots->queued));
  g_variant_builder_add (&b, "{sv}", "queue-free", g_variant_new_uint32 (queue_free));
  g_variant_builder_add (&b, "{sv}", "memory-total", g_variant_new_uint64 (host->memory_total));
  g_variant_builder_add (&b, "{sv}", "memory-available", g_variant_new_uint64 (host->memory_available));
  g_variant_builder_add (&b, "{sv}", "load", g_variant_new_double (host->load));
  g_variant_builder_add (&b, "{sv}", "cpus", g_variant_new_uint32 (host->cpus));
  return g_variant_builder_end (&b);
}
