/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSystemd"

#include "config.h"

#include "vivarium-error.h"
#include "vd-systemd.h"

#define SYSTEMD_NAME        "org.freedesktop.systemd1"
#define SYSTEMD_PATH        "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER     "org.freedesktop.systemd1.Manager"
#define SYSTEMD_CALL_MS     30000

/* A thin client of systemd's D-Bus API. A job is only finished when
 * JobRemoved says so; the reply to StartUnit only means "queued". */
struct _VdSystemd {
  GObject          parent_instance;
  GDBusConnection *connection;
  guint            job_removed_id;
  guint            watch_id;       /* systemd's name, after a reconnect */
  GHashTable      *pending_jobs;   /* job path → GTask */
};

G_DEFINE_TYPE (VdSystemd, vd_systemd, G_TYPE_OBJECT)

static void
detach (VdSystemd *self)
{
  if (self->connection != NULL && self->job_removed_id != 0)
    g_dbus_connection_signal_unsubscribe (self->connection, self->job_removed_id);
  self->job_removed_id = 0;
  g_clear_handle_id (&self->watch_id, g_bus_unwatch_name);
  g_clear_object (&self->connection);
}

static void
vd_systemd_finalize (GObject *object)
{
  VdSystemd *self = VD_SYSTEMD (object);

  detach (self);
  g_hash_table_unref (self->pending_jobs);
  G_OBJECT_CLASS (vd_systemd_parent_class)->finalize (object);
}

static void
vd_systemd_class_init (VdSystemdClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_systemd_finalize;
}

static void
vd_systemd_init (VdSystemd *self)
{
  self->pending_jobs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
}

static void
job_removed_cb (GDBusConnection *connection, const gchar *sender, const gchar *path,
                const gchar *interface_name, const gchar *signal_name, GVariant *parameters,
                gpointer user_data)
{
  VdSystemd *self = VD_SYSTEMD (user_data);
  const gchar *job = NULL, *unit = NULL, *result = NULL;
  guint32 id;
  g_autoptr(GTask) task = NULL;
  gpointer key = NULL, value = NULL;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(uoss)")))
    return;
  g_variant_get (parameters, "(u&o&s&s)", &id, &job, &unit, &result);
  if (!g_hash_table_steal_extended (self->pending_jobs, job, &key, &value))
    return;
  g_free (key);
  task = value;
  if (g_strcmp0 (result, "done") == 0) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                           "systemd could not finish the job for %s: %s", unit, result);
}

static void
attach (VdSystemd *self, GDBusConnection *connection)
{
  self->connection = g_object_ref (connection);
  self->job_removed_id =
    g_dbus_connection_signal_subscribe (connection, SYSTEMD_NAME, SYSTEMD_MANAGER, "JobRemoved",
                                        SYSTEMD_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                        job_removed_cb, self, NULL);
}

VdSystemd *
vd_systemd_new (GDBusConnection *connection)
{
  VdSystemd *self = g_object_new (VD_TYPE_SYSTEMD, NULL);

  attach (self, connection);
  return self;
}

static void
subscribed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);

  if (reply == NULL)
    g_info ("cannot subscribe to systemd's signals again: %s", error->message);
  else
    g_info ("subscribed to systemd's signals again");
}

/* systemd may come back to the bus after us (a restarted dbus-daemon) and
 * then knows nothing of our old subscription: subscribe whenever its name
 * appears on this connection. */
static void
systemd_appeared_cb (GDBusConnection *connection, const gchar *name, const gchar *owner, gpointer user_data)
{
  g_dbus_connection_call (connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "Subscribe", NULL, NULL,
                          G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, NULL, subscribed_cb, NULL);
}

/* Jobs queued on the old connection may have ended while no JobRemoved
 * could reach us: they fail, saying so, rather than wait forever. */
static void
fail_pending_jobs (VdSystemd *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->pending_jobs);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    GTask *task = g_object_ref (value);
    g_hash_table_iter_remove (&iter);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                             "The daemon lost the bus while systemd was running a job for it");
    g_object_unref (task);
  }
}

/* After the daemon lost the bus: calls and JobRemoved move to @connection
 * (NULL: none until the next). */
void
vd_systemd_set_connection (VdSystemd *self, GDBusConnection *connection)
{
  if (connection == self->connection)
    return;
  detach (self);
  fail_pending_jobs (self);
  if (connection == NULL)
    return;
  attach (self, connection);
  self->watch_id = g_bus_watch_name_on_connection (connection, SYSTEMD_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                   systemd_appeared_cb, NULL, NULL, NULL);
}

/* Between losing the bus and getting it back there is no connection. */
static gboolean
check_connected (VdSystemd *self, GError **error)
{
  if (self->connection != NULL)
    return TRUE;
  g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                       "The daemon is reconnecting to the system bus; systemd cannot be reached yet");
  return FALSE;
}

static GVariant *
call_manager_sync (VdSystemd *self, const gchar *method, GVariant *args,
                   const GVariantType *reply_type, GError **error)
{
  if (!check_connected (self, error))
    return NULL;
  return g_dbus_connection_call_sync (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                      method, args, reply_type, G_DBUS_CALL_FLAGS_NONE,
                                      SYSTEMD_CALL_MS, NULL, error);
}

gboolean
vd_systemd_subscribe (VdSystemd *self, GError **error)
{
  g_autoptr(GVariant) reply = call_manager_sync (self, "Subscribe", NULL, NULL, error);
  return reply != NULL;
}

static void
job_queued_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSystemd *self = g_task_get_source_object (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  const gchar *job = NULL;

  reply = g_dbus_connection_call_with_unix_fd_list_finish (G_DBUS_CONNECTION (source), NULL, res, &error);
  if (reply == NULL) {
    g_dbus_error_strip_remote_error (error);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                             "systemd refused the job: %s", error->message);
    return;
  }
  if (G_DBUS_CONNECTION (source) != self->connection) {
    /* Its JobRemoved went to the connection that was lost. */
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                             "The daemon lost the bus while systemd was running a job for it");
    return;
  }
  g_variant_get (reply, "(&o)", &job);
  g_hash_table_insert (self->pending_jobs, g_strdup (job), g_steal_pointer (&task));
}

void
vd_systemd_start_transient_async (VdSystemd *self, const gchar *unit, GVariant *properties,
                                  GUnixFDList *fds, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  GError *error = NULL;

  if (!check_connected (self, &error)) {
    g_variant_unref (g_variant_ref_sink (properties));
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  g_dbus_connection_call_with_unix_fd_list (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                            "StartTransientUnit",
                                            g_variant_new ("(ss@a(sv)a(sa(sv)))", unit, "fail", properties, NULL),
                                            G_VARIANT_TYPE ("(o)"), G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS,
                                            fds, cancellable, job_queued_cb, task);
}

gboolean
vd_systemd_start_transient_finish (VdSystemd *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
vd_systemd_stop_unit_async (VdSystemd *self, const gchar *unit, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  GError *error = NULL;

  if (!check_connected (self, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  g_dbus_connection_call_with_unix_fd_list (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                            "StopUnit", g_variant_new ("(ss)", unit, "replace"),
                                            G_VARIANT_TYPE ("(o)"), G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS,
                                            NULL, cancellable, job_queued_cb, task);
}

gboolean
vd_systemd_stop_unit_finish (VdSystemd *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

typedef struct {
  GMainContext *context;
  GAsyncResult *result;
} SyncData;

static void
sync_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  SyncData *data = user_data;
  data->result = g_object_ref (res);
  g_main_context_wakeup (data->context);
}

static gboolean
sync_timeout_cb (gpointer user_data)
{
  g_cancellable_cancel (G_CANCELLABLE (user_data));
  return G_SOURCE_REMOVE;
}

/* For the shutdown and sweep paths, where the main loop is not running. */
gboolean
vd_systemd_stop_unit_sync (VdSystemd *self, const gchar *unit, guint timeout_ms, GError **error)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  SyncData data = { g_main_context_default (), NULL };
  guint timeout_id = g_timeout_add (timeout_ms, sync_timeout_cb, cancellable);
  gboolean ok;

  vd_systemd_stop_unit_async (self, unit, cancellable, sync_done_cb, &data);
  while (data.result == NULL)
    g_main_context_iteration (data.context, TRUE);
  if (!g_cancellable_is_cancelled (cancellable))
    g_source_remove (timeout_id);
  ok = vd_systemd_stop_unit_finish (self, data.result, error);
  g_object_unref (data.result);
  return ok;
}

static gchar *
unit_object_path (VdSystemd *self, const gchar *unit, GError **error)
{
  g_autoptr(GVariant) reply = call_manager_sync (self, "GetUnit", g_variant_new ("(s)", unit),
                                                 G_VARIANT_TYPE ("(o)"), error);
  gchar *path = NULL;

  if (reply == NULL)
    return NULL;
  g_variant_get (reply, "(o)", &path);
  return path;
}

GVariant *
vd_systemd_get_unit_property (VdSystemd *self, const gchar *unit, const gchar *interface_name,
                              const gchar *property, GError **error)
{
  g_autofree gchar *path = unit_object_path (self, unit, error);
  g_autoptr(GVariant) reply = NULL;
  GVariant *value = NULL;

  if (path == NULL || !check_connected (self, error))
    return NULL;
  reply = g_dbus_connection_call_sync (self->connection, SYSTEMD_NAME, path,
                                       "org.freedesktop.DBus.Properties", "Get",
                                       g_variant_new ("(ss)", interface_name, property),
                                       G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NONE,
                                       SYSTEMD_CALL_MS, NULL, error);
  if (reply == NULL)
    return NULL;
  g_variant_get (reply, "(v)", &value);
  return value;
}

gboolean
vd_systemd_unit_is_loaded (VdSystemd *self, const gchar *unit)
{
  g_autofree gchar *path = unit_object_path (self, unit, NULL);
  return path != NULL;
}

GStrv
vd_systemd_list_units (VdSystemd *self, const gchar *pattern, GError **error)
{
  const gchar *patterns[] = { pattern, NULL };
  const gchar *states[] = { NULL };
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GVariantIter) iter = NULL;
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  const gchar *name;

  reply = call_manager_sync (self, "ListUnitsByPatterns", g_variant_new ("(^as^as)", states, patterns),
                             G_VARIANT_TYPE ("(a(ssssssouso))"), error);
  if (reply == NULL)
    return NULL;
  g_variant_get (reply, "(a(ssssssouso))", &iter);
  while (g_variant_iter_next (iter, "(&s*********)", &name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL))
    g_strv_builder_add (builder, name);
  return g_strv_builder_end (builder);
}

GVariant *
vd_systemd_get_unit_properties (VdSystemd *self, const gchar *unit, const gchar *interface_name, GError **error)
{
  g_autofree gchar *path = unit_object_path (self, unit, error);
  g_autoptr(GVariant) reply = NULL;
  GVariant *value = NULL;

  if (path == NULL || !check_connected (self, error))
    return NULL;
  reply = g_dbus_connection_call_sync (self->connection, SYSTEMD_NAME, path,
                                       "org.freedesktop.DBus.Properties", "GetAll",
                                       g_variant_new ("(s)", interface_name),
                                       G_VARIANT_TYPE ("(a{sv})"), G_DBUS_CALL_FLAGS_NONE,
                                       SYSTEMD_CALL_MS, NULL, error);
  if (reply == NULL)
    return NULL;
  g_variant_get (reply, "(@a{sv})", &value);
  return value;
}

void
vd_systemd_reset_failed_unit (VdSystemd *self, const gchar *unit)
{
  if (self->connection == NULL)
    return;
  g_dbus_connection_call (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "ResetFailedUnit",
                          g_variant_new ("(s)", unit), NULL, G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS,
                          NULL, NULL, NULL);
}
