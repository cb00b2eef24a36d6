/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-egress-log.h"
#include "vivarium-egress-policy.h"
#include "vivarium-egress-upstream.h"

/* The daemon (root) reads both files; nobody else needs to. */
#define LOG_FILE_MODE 0600

struct _VivariumEgressLog {
  GMutex                lock;
  int                   fd;
  gchar                *usage_path;
  VivariumEgressBudget *budget;
  guint                 max_entries;
  guint                 entries;      /* lines written, the log-full line excluded */
  gboolean              full;         /* the log-full line is written */
  guint64               allowed, denied, dropped;
};

static gchar *
now_text (void)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree gchar *seconds = g_date_time_format (now, "%Y-%m-%dT%H:%M:%S");

  return g_strdup_printf ("%s.%03dZ", seconds, g_date_time_get_microsecond (now) / 1000);
}

/* A proxy started again on the same directory goes on counting its lines:
 * the bound holds for the file, not for one run. */
static guint
count_lines (int fd)
{
  gchar buf[8192];
  gssize n;
  guint lines = 0;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    for (gssize i = 0; i < n; i++)
      lines += buf[i] == '\n';
  return lines;
}

VivariumEgressLog *
vivarium_egress_log_new (const gchar *dir, guint max_entries, VivariumEgressBudget *budget, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, VIVARIUM_EGRESS_LOG_NAME, NULL);
  VivariumEgressLog *log;
  int fd = open (path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, LOG_FILE_MODE);

  if (fd < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot open the decision log %s: %s", path,
                 g_strerror (errno));
    return NULL;
  }
  log = g_new0 (VivariumEgressLog, 1);
  g_mutex_init (&log->lock);
  log->fd = fd;
  log->usage_path = g_build_filename (dir, VIVARIUM_EGRESS_USAGE_NAME, NULL);
  log->budget = budget;
  log->max_entries = max_entries;
  log->entries = count_lines (fd);
  log->full = log->entries > max_entries;
  return log;
}

void
vivarium_egress_log_free (VivariumEgressLog *log)
{
  close (log->fd);
  g_mutex_clear (&log->lock);
  g_free (log->usage_path);
  g_free (log);
}

static gchar *
decision_line (const VivariumEgressDecision *d)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree gchar *time = now_text ();
  g_autofree gchar *host = d->host != NULL ? vivarium_egress_normalize_host (d->host) : NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "time");
  json_builder_add_string_value (b, time);
  json_builder_set_member_name (b, "host");
  json_builder_add_string_value (b, host != NULL ? host : "(invalid)");
  json_builder_set_member_name (b, "port");
  json_builder_add_int_value (b, d->port);
  json_builder_set_member_name (b, "via");
  json_builder_add_string_value (b, d->via);
  json_builder_set_member_name (b, "verdict");
  json_builder_add_string_value (b, d->allowed ? "allowed" : "denied");
  json_builder_set_member_name (b, "reason");
  json_builder_add_string_value (b, d->reason);
  json_builder_set_member_name (b, "bytes_up");
  json_builder_add_int_value (b, (gint64) d->bytes_up);
  json_builder_set_member_name (b, "bytes_down");
  json_builder_add_int_value (b, (gint64) d->bytes_down);
  json_builder_set_member_name (b, "duration_ms");
  json_builder_add_int_value (b, d->duration_ms);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

static gchar *
full_line (guint max_entries)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree gchar *time = now_text ();
  g_autofree gchar *reason = g_strdup_printf ("the decision log holds its %u entries; later decisions are only "
                                              "counted in the usage file", max_entries);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "time");
  json_builder_add_string_value (b, time);
  json_builder_set_member_name (b, "verdict");
  json_builder_add_string_value (b, "log-full");
  json_builder_set_member_name (b, "reason");
  json_builder_add_string_value (b, reason);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

static void
append_line (VivariumEgressLog *log, const gchar *line)
{
  g_autofree gchar *text = g_strconcat (line, "\n", NULL);
  gsize len = strlen (text);

  /* One write of a whole line with O_APPEND: a reader never sees half. */
  if (write (log->fd, text, len) != (gssize) len)
    g_warning ("cannot append to the decision log: %s", g_strerror (errno));
}

static void
write_usage (VivariumEgressLog *log)
{
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;
  guint64 up, down;

  vivarium_egress_budget_totals (log->budget, &up, &down);
  g_key_file_set_uint64 (kf, "Usage", "Allowed", log->allowed);
  g_key_file_set_uint64 (kf, "Usage", "Denied", log->denied);
  g_key_file_set_uint64 (kf, "Usage", "BytesUp", up);
  g_key_file_set_uint64 (kf, "Usage", "BytesDown", down);
  g_key_file_set_uint64 (kf, "Usage", "LogDropped", log->dropped);
  g_key_file_set_uint64 (kf, "Usage", "Lookups", vivarium_egress_lookups ());
  text = g_key_file_to_data (kf, NULL, NULL);
  if (!g_file_set_contents_full (log->usage_path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, LOG_FILE_MODE, &error))
    g_warning ("cannot write the usage file: %s", error->message);
}

void
vivarium_egress_log_record (VivariumEgressLog *log, const VivariumEgressDecision *decision)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&log->lock);
  g_autofree gchar *line = NULL;

  if (decision->allowed)
    log->allowed++;
  else
    log->denied++;
  if (log->entries < log->max_entries) {
    line = decision_line (decision);
    log->entries++;
  } else {
    log->dropped++;
    if (!log->full)
      line = full_line (log->max_entries);
    log->full = TRUE;
  }
  /* The counts first: whoever reads a line finds them counted. */
  write_usage (log);
  if (line != NULL)
    append_line (log, line);
}
