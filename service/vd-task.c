/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdTask"

#include "config.h"

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-task.h"

/* Long work with a face on the bus: progress, a log a person can read,
 * and one Finished signal. The log is builder output: treated as untrusted
 * text, escaped and capped. */
struct _VdTask {
  GObject           parent_instance;
  gchar            *id;
  gchar            *object_path;
  VivariumDBusTask *skeleton;
  GCancellable     *cancellable;
  GString          *log;
  gboolean          finished;
};

G_DEFINE_TYPE (VdTask, vd_task, G_TYPE_OBJECT)

static void
vd_task_finalize (GObject *object)
{
  VdTask *self = VD_TASK (object);

  if (g_dbus_interface_skeleton_get_connection (G_DBUS_INTERFACE_SKELETON (self->skeleton)) != NULL)
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (self->skeleton));
  g_clear_object (&self->skeleton);
  g_clear_object (&self->cancellable);
  g_string_free (self->log, TRUE);
  g_free (self->id);
  g_free (self->object_path);
  G_OBJECT_CLASS (vd_task_parent_class)->finalize (object);
}

static void
vd_task_class_init (VdTaskClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_task_finalize;
}

static gboolean
handle_cancel (VivariumDBusTask *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdTask *self = VD_TASK (user_data);

  if (self->finished) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The task %s has already finished", self->id);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_cancellable_cancel (self->cancellable);
  vivarium_dbus_task_complete_cancel (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
vd_task_init (VdTask *self)
{
  g_autofree gchar *uuid = g_uuid_string_random ();

  self->id = g_strndup (uuid, 8);
  self->object_path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_TASKS, self->id);
  self->skeleton = vivarium_dbus_task_skeleton_new ();
  self->cancellable = g_cancellable_new ();
  self->log = g_string_new (NULL);
  g_signal_connect (self->skeleton, "handle-cancel", G_CALLBACK (handle_cancel), self);
}

VdTask *
vd_task_new (const gchar *kind, GDBusConnection *connection, GError **error)
{
  g_autoptr(VdTask) self = g_object_new (VD_TYPE_TASK, NULL);

  vivarium_dbus_task_set_id (self->skeleton, self->id);
  vivarium_dbus_task_set_kind (self->skeleton, kind);
  vivarium_dbus_task_set_state (self->skeleton, "running");
  vivarium_dbus_task_set_result (self->skeleton, "/");
  vivarium_dbus_task_set_step (self->skeleton, "Starting");
  if (!g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (self->skeleton), connection,
                                         self->object_path, error))
    return NULL;
  return g_steal_pointer (&self);
}

const gchar *vd_task_get_id (VdTask *self) { return self->id; }
const gchar *vd_task_get_object_path (VdTask *self) { return self->object_path; }
GCancellable *vd_task_get_cancellable (VdTask *self) { return self->cancellable; }
gboolean vd_task_is_finished (VdTask *self) { return self->finished; }
GDBusInterfaceSkeleton *vd_task_get_skeleton (VdTask *self) { return G_DBUS_INTERFACE_SKELETON (self->skeleton); }

void
vd_task_progress (VdTask *self, guint percent, const gchar *step)
{
  g_autofree gchar *safe = vivarium_escape_untrusted (step, strlen (step), 200, NULL);

  percent = MIN (percent, 100);
  vivarium_dbus_task_set_percent (self->skeleton, percent);
  vivarium_dbus_task_set_step (self->skeleton, safe);
  vivarium_dbus_task_emit_progress (self->skeleton, percent, safe);
}

void
vd_task_append_log (VdTask *self, const gchar *line)
{
  g_autofree gchar *safe = NULL;

  if (self->log->len >= VIVARIUM_OUTPUT_CAP)
    return;
  safe = vivarium_escape_untrusted (line, strlen (line), VIVARIUM_OUTPUT_CAP - self->log->len, NULL);
  g_string_append (self->log, safe);
  g_string_append_c (self->log, '\n');
  vivarium_dbus_task_set_log (self->skeleton, self->log->str);
}

static void
finish (VdTask *self, const gchar *state, const gchar *message)
{
  self->finished = TRUE;
  vivarium_dbus_task_set_state (self->skeleton, state);
  vivarium_dbus_task_set_error_message (self->skeleton, message);
  vivarium_dbus_task_emit_finished (self->skeleton, state, message);
}

void
vd_task_succeed (VdTask *self, const gchar *result_path)
{
  vivarium_dbus_task_set_percent (self->skeleton, 100);
  vivarium_dbus_task_set_result (self->skeleton, result_path);
  finish (self, "succeeded", "");
}

void
vd_task_fail (VdTask *self, const GError *error)
{
  gboolean cancelled = g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) ||
                       g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
  finish (self, cancelled ? "cancelled" : "failed", error->message);
}
