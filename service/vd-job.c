/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdJob"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-job.h"
#include "vd-record.h"

/* The log reaches the disk in batches: when this much is pending, or this
 * long after the first pending line, and always before the job's record
 * says it finished. */
#define LOG_BATCH_BYTES  (64 * 1024)
#define LOG_BATCH_MS     1000
/* Step changes rewrite the record at most this often; state changes
 * always. */
#define STEP_WRITE_MS    1000

#define DAEMON_STOPPED   "the daemon stopped while it ran"

/* The log is builder output: untrusted text, escaped and capped. */
struct _VdJob {
  GObject           parent_instance;
  gchar            *id;
  gchar            *object_path;
  gchar            *dir;
  gchar            *operation;
  VivariumJobState  state;
  VivariumDBusJob  *skeleton;
  GCancellable     *cancellable;
  GString          *log;
  gsize             log_written;    /* bytes of log already on disk */
  guint             log_flush_id;
  gint64            last_write;     /* monotonic µs of the last record write */
  gint64            started_at;
  gint64            finished_at;
};

G_DEFINE_TYPE (VdJob, vd_job, G_TYPE_OBJECT)

enum { SIGNAL_FINISHED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void flush_log (VdJob *self);

static void
vd_job_finalize (GObject *object)
{
  VdJob *self = VD_JOB (object);

  flush_log (self);
  g_clear_handle_id (&self->log_flush_id, g_source_remove);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->cancellable);
  g_string_free (self->log, TRUE);
  g_free (self->id);
  g_free (self->object_path);
  g_free (self->dir);
  g_free (self->operation);
  G_OBJECT_CLASS (vd_job_parent_class)->finalize (object);
}

static void
vd_job_class_init (VdJobClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_job_finalize;
  signals[SIGNAL_FINISHED] = g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                           NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static gboolean
handle_cancel (VivariumDBusJob *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdJob *self = VD_JOB (user_data);

  if (self->state != VIVARIUM_JOB_STATE_RUNNING) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The job %s has already finished", self->id);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!vivarium_dbus_job_get_cancelable (iface)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED,
                                           "The job %s (%s) cannot be cancelled", self->id, self->operation);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_cancellable_cancel (self->cancellable);
  vivarium_dbus_job_complete_cancel (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
vd_job_init (VdJob *self)
{
  self->skeleton = vivarium_dbus_job_skeleton_new ();
  self->cancellable = g_cancellable_new ();
  self->log = g_string_new (NULL);
  g_signal_connect (self->skeleton, "handle-cancel", G_CALLBACK (handle_cancel), self);
}

gchar *
vd_job_new_id (void)
{
  g_autofree gchar *uuid = g_uuid_string_random ();

  return g_strndup (uuid, 8);
}

static gchar *
record_path (VdJob *self, const gchar *suffix)
{
  g_autofree gchar *name = g_strconcat (self->id, suffix, NULL);

  return g_build_filename (self->dir, name, NULL);
}

static JsonNode *
record_to_json (VdJob *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, self->id);
  json_builder_set_member_name (b, "operation");
  json_builder_add_string_value (b, self->operation);
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, vivarium_job_state_to_string (self->state));
  json_builder_set_member_name (b, "step");
  json_builder_add_string_value (b, vivarium_dbus_job_get_step (self->skeleton));
  json_builder_set_member_name (b, "progress");
  json_builder_add_double_value (b, vivarium_dbus_job_get_progress (self->skeleton));
  json_builder_set_member_name (b, "result");
  json_builder_add_string_value (b, vivarium_dbus_job_get_result (self->skeleton));
  json_builder_set_member_name (b, "error-message");
  json_builder_add_string_value (b, vivarium_dbus_job_get_error_message (self->skeleton));
  json_builder_set_member_name (b, "started-at-usec");
  json_builder_add_int_value (b, self->started_at);
  json_builder_set_member_name (b, "finished-at-usec");
  json_builder_add_int_value (b, self->finished_at);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* The tasks' writer too: a crash leaves the old record or the new one,
 * never half of one. */
static void
write_record (VdJob *self)
{
  g_autofree gchar *name = g_strconcat (self->id, ".json", NULL);
  g_autoptr(JsonNode) root = record_to_json (self);
  g_autoptr(GError) error = NULL;

  self->last_write = g_get_monotonic_time ();
  if (!vd_record_write (self->dir, name, root, &error))
    g_warning ("cannot store job %s: %s", self->id, error->message);
}

static void
flush_log (VdJob *self)
{
  g_autofree gchar *path = NULL;
  gsize pending = self->log->len - self->log_written;
  int fd;

  g_clear_handle_id (&self->log_flush_id, g_source_remove);
  if (pending == 0 || self->dir == NULL)
    return;
  path = record_path (self, ".log");
  fd = g_open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    g_warning ("cannot open %s: %s", path, g_strerror (errno));
    return;
  }
  while (pending > 0) {
    gssize n = write (fd, self->log->str + self->log_written, pending);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      g_warning ("cannot append to %s: %s", path, g_strerror (errno));
      break;
    }
    self->log_written += (gsize) n;
    pending -= (gsize) n;
  }
  g_close (fd, NULL);
}

static gboolean
flush_log_cb (gpointer user_data)
{
  VdJob *self = VD_JOB (user_data);

  self->log_flush_id = 0;
  flush_log (self);
  return G_SOURCE_REMOVE;
}

static void
init_identity (VdJob *self, const gchar *operation, const gchar *id, const gchar *dir)
{
  self->id = g_strdup (id);
  self->dir = g_strdup (dir);
  self->operation = g_strdup (operation);
  self->object_path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_JOBS, self->id);
  vivarium_dbus_job_set_id (self->skeleton, self->id);
  vivarium_dbus_job_set_operation (self->skeleton, operation);
  vivarium_dbus_job_set_result (self->skeleton, "/");
}

static void
set_state (VdJob *self, VivariumJobState state)
{
  self->state = state;
  vivarium_dbus_job_set_state (self->skeleton, vivarium_job_state_to_string (state));
}

/* Not yet on the bus: the caller authorizes and exports it. */
VdJob *
vd_job_new (const gchar *operation, const gchar *id, const gchar *dir, gboolean cancelable)
{
  VdJob *self = g_object_new (VD_TYPE_JOB, NULL);

  init_identity (self, operation, id, dir);
  self->started_at = g_get_real_time ();
  set_state (self, VIVARIUM_JOB_STATE_RUNNING);
  vivarium_dbus_job_set_step (self->skeleton, "Starting");
  vivarium_dbus_job_set_cancelable (self->skeleton, cancelable);
  vivarium_dbus_job_set_started_at (self->skeleton, (guint64) self->started_at);
  write_record (self);
  return self;
}

static gchar *
load_log (VdJob *self)
{
  g_autofree gchar *path = record_path (self, ".log");
  g_autofree gchar *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL))
    return g_strdup ("");
  /* Written by us, escaped and capped; cut again in case the file grew. */
  if (len > VIVARIUM_OUTPUT_CAP + 1)
    text[VIVARIUM_OUTPUT_CAP] = '\0';
  return g_steal_pointer (&text);
}

static gboolean
parse_record (VdJob *self, JsonObject *root, GError **error)
{
  VivariumJobState state;
  const gchar *result = json_object_get_string_member_with_default (root, "result", "/");

  if (!vivarium_job_state_from_string (json_object_get_string_member_with_default (root, "state", ""), &state)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The job record %s has no valid state", self->id);
    return FALSE;
  }
  set_state (self, state);
  self->started_at = json_object_get_int_member_with_default (root, "started-at-usec", 0);
  self->finished_at = json_object_get_int_member_with_default (root, "finished-at-usec", 0);
  vivarium_dbus_job_set_step (self->skeleton, json_object_get_string_member_with_default (root, "step", ""));
  vivarium_dbus_job_set_progress (self->skeleton, json_object_get_double_member_with_default (root, "progress", 0.0));
  vivarium_dbus_job_set_percent (self->skeleton,
                                 (guint) (vivarium_dbus_job_get_progress (self->skeleton) * 100.0));
  vivarium_dbus_job_set_result (self->skeleton, g_variant_is_object_path (result) ? result : "/");
  vivarium_dbus_job_set_error_message (self->skeleton,
                                       json_object_get_string_member_with_default (root, "error-message", ""));
  vivarium_dbus_job_set_started_at (self->skeleton, (guint64) self->started_at);
  vivarium_dbus_job_set_finished_at (self->skeleton, (guint64) self->finished_at);
  return TRUE;
}

/* A job of an earlier daemon instance, read back finished: one that was
 * running then cannot be any more. */
VdJob *
vd_job_load (const gchar *dir, const gchar *id, GError **error)
{
  g_autoptr(VdJob) self = g_object_new (VD_TYPE_JOB, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree gchar *path = NULL;
  g_autofree gchar *log = NULL;
  JsonNode *root;

  self->id = g_strdup (id);
  self->dir = g_strdup (dir);
  path = record_path (self, ".json");
  if (!json_parser_load_from_mapped_file (parser, path, error))
    return NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The job record %s is not a JSON object", path);
    return NULL;
  }
  g_clear_pointer (&self->id, g_free);
  g_clear_pointer (&self->dir, g_free);
  init_identity (self, json_object_get_string_member_with_default (json_node_get_object (root), "operation", ""),
                 id, dir);
  if (!parse_record (self, json_node_get_object (root), error))
    return NULL;
  log = load_log (self);
  g_string_assign (self->log, log);
  self->log_written = self->log->len;
  vivarium_dbus_job_set_log (self->skeleton, self->log->str);
  vivarium_dbus_job_set_cancelable (self->skeleton, FALSE);
  if (self->state == VIVARIUM_JOB_STATE_RUNNING) {
    self->finished_at = g_get_real_time ();
    set_state (self, VIVARIUM_JOB_STATE_FAILED);
    vivarium_dbus_job_set_error_message (self->skeleton, DAEMON_STOPPED);
    vivarium_dbus_job_set_finished_at (self->skeleton, (guint64) self->finished_at);
    write_record (self);
  }
  return g_steal_pointer (&self);
}

const gchar *vd_job_get_id (VdJob *self) { return self->id; }
const gchar *vd_job_get_object_path (VdJob *self) { return self->object_path; }
const gchar *vd_job_get_operation (VdJob *self) { return self->operation; }
VivariumJobState vd_job_get_state (VdJob *self) { return self->state; }
gint64 vd_job_get_started_at (VdJob *self) { return self->started_at; }
GCancellable *vd_job_get_cancellable (VdJob *self) { return self->cancellable; }
gboolean vd_job_is_finished (VdJob *self) { return self->state != VIVARIUM_JOB_STATE_RUNNING; }
GDBusInterfaceSkeleton *vd_job_get_skeleton (VdJob *self) { return G_DBUS_INTERFACE_SKELETON (self->skeleton); }

void
vd_job_set_progress (VdJob *self, gdouble fraction, const gchar *step)
{
  g_autofree gchar *safe = vivarium_escape_untrusted (step, strlen (step), 200, NULL);
  gboolean step_changed = g_strcmp0 (safe, vivarium_dbus_job_get_step (self->skeleton)) != 0;

  if (vd_job_is_finished (self))
    return;
  fraction = CLAMP (fraction, 0.0, 1.0);
  vivarium_dbus_job_set_progress (self->skeleton, fraction);
  vivarium_dbus_job_set_percent (self->skeleton, MIN ((guint) (fraction * 100.0), 100u));
  vivarium_dbus_job_set_step (self->skeleton, safe);
  if (step_changed && g_get_monotonic_time () - self->last_write >= STEP_WRITE_MS * 1000)
    write_record (self);
}

void
vd_job_progress (VdJob *self, guint percent, const gchar *step)
{
  vd_job_set_progress (self, MIN (percent, 100u) / 100.0, step);
}

void
vd_job_append_log (VdJob *self, const gchar *line)
{
  g_autofree gchar *safe = NULL;

  if (self->log->len >= VIVARIUM_OUTPUT_CAP)
    return;
  safe = vivarium_escape_untrusted (line, strlen (line), VIVARIUM_OUTPUT_CAP - self->log->len, NULL);
  g_string_append (self->log, safe);
  g_string_append_c (self->log, '\n');
  vivarium_dbus_job_set_log (self->skeleton, self->log->str);
  if (self->log->len - self->log_written >= LOG_BATCH_BYTES)
    flush_log (self);
  else if (self->log_flush_id == 0)
    self->log_flush_id = g_timeout_add (LOG_BATCH_MS, flush_log_cb, self);
}

/* The record on disk says "finished" only once the whole log is there;
 * the signals go out after the properties, so a client reading State on
 * Completed sees the final one. */
static void
finish (VdJob *self, VivariumJobState state, const gchar *message)
{
  const gchar *state_text = vivarium_job_state_to_string (state);

  if (vd_job_is_finished (self))
    return;
  self->finished_at = g_get_real_time ();
  set_state (self, state);
  vivarium_dbus_job_set_cancelable (self->skeleton, FALSE);
  vivarium_dbus_job_set_error_message (self->skeleton, message);
  vivarium_dbus_job_set_finished_at (self->skeleton, (guint64) self->finished_at);
  flush_log (self);
  write_record (self);
  g_dbus_interface_skeleton_flush (G_DBUS_INTERFACE_SKELETON (self->skeleton));
  vivarium_dbus_job_emit_completed (self->skeleton, state == VIVARIUM_JOB_STATE_SUCCEEDED, message);
  vivarium_dbus_job_emit_finished (self->skeleton, state_text, message);
  g_signal_emit (self, signals[SIGNAL_FINISHED], 0);
}

void
vd_job_succeed (VdJob *self, const gchar *result_path)
{
  vivarium_dbus_job_set_progress (self->skeleton, 1.0);
  vivarium_dbus_job_set_percent (self->skeleton, 100);
  vivarium_dbus_job_set_result (self->skeleton, result_path != NULL ? result_path : "/");
  finish (self, VIVARIUM_JOB_STATE_SUCCEEDED, "");
}

void
vd_job_fail (VdJob *self, const GError *error)
{
  gboolean cancelled = g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) ||
                       g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);

  finish (self, cancelled ? VIVARIUM_JOB_STATE_CANCELLED : VIVARIUM_JOB_STATE_FAILED, error->message);
}

/* Retention: the record and its log go together. */
gboolean
vd_job_delete_files (VdJob *self, GError **error)
{
  const gchar *suffixes[] = { ".json", ".log" };

  g_clear_handle_id (&self->log_flush_id, g_source_remove);
  self->log_written = self->log->len;   /* nothing more to append */
  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++) {
    g_autofree gchar *path = record_path (self, suffixes[i]);
    if (g_unlink (path) != 0 && errno != ENOENT) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot remove %s: %s", path, g_strerror (errno));
      return FALSE;
    }
  }
  return TRUE;
}
