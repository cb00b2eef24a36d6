/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSystemd"

#include "config.h"

#include <string.h>
#include <sys/wait.h>

#include "vivarium-error.h"
#include "vd-systemd.h"

#define SYSTEMD_NAME        "org.freedesktop.systemd1"
#define SYSTEMD_PATH        "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER     "org.freedesktop.systemd1.Manager"
#define SYSTEMD_CALL_MS     30000

/* A thin client of systemd's D-Bus API. A job is only finished when
 * JobRemoved says so; the reply to StartUnit only means "queued".
 *
 * The daemon may lose the bus while jobs run (a worker's start job lasts as
 * long as the worker: Type=oneshot). systemd does not lose them: a job
 * survives the daemon's connection, and so does its entry here. Once the
 * daemon is back and subscribed again, each pending job is looked up: one
 * still queued gets its JobRemoved on the new connection; one that ended
 * meanwhile is judged by its unit's state. Calls made while there is no
 * connection wait for the next one (at most SYSTEMD_CALL_MS). */
struct _VdSystemd {
  GObject          parent_instance;
  GDBusConnection *connection;
  gboolean         subscribed;     /* systemd sends us its signals on it */
  guint            job_removed_id;
  guint            watch_id;       /* systemd's name, after a reconnect */
  GHashTable      *pending_jobs;   /* job path → Job */
  GPtrArray       *lost_jobs;      /* of Job: queued as the bus went, path unknown */
  GPtrArray       *deferred;       /* of Call: made while off the bus */
  GHashTable      *watches;        /* id → Watch */
  guint            next_watch;
};

G_DEFINE_TYPE (VdSystemd, vd_systemd, G_TYPE_OBJECT)

/* A start or stop job of @unit that the daemon waits for. */
typedef struct {
  GTask    *task;
  gchar    *unit;
  gboolean  start;
} Job;

static Job *
job_new (GTask *task, const gchar *unit, gboolean start)
{
  Job *job = g_new0 (Job, 1);

  job->task = task;
  job->unit = g_strdup (unit);
  job->start = start;
  return job;
}

static void
job_free (Job *job)
{
  g_clear_object (&job->task);
  g_free (job->unit);
  g_free (job);
}

/* What systemd last said of a unit's service (its PropertiesChanged), so
 * that how it ended can be told even once it is collected. */
typedef struct {
  gchar        *unit;
  gchar        *path;
  guint         subscription;
  VdServiceEnd  end;
} Watch;

static void
watch_free (Watch *watch)
{
  g_free (watch->unit);
  g_free (watch->path);
  vd_service_end_clear (&watch->end);
  g_free (watch);
}

/* A Manager call waiting for a connection. */
typedef struct {
  VdSystemd   *self;
  gchar       *method;
  GVariant    *args;
  GUnixFDList *fds;
  Job         *job;
  guint        timeout_id;
} Call;

static void
call_free (Call *call)
{
  g_clear_handle_id (&call->timeout_id, g_source_remove);
  g_free (call->method);
  g_clear_pointer (&call->args, g_variant_unref);
  g_clear_object (&call->fds);
  g_clear_pointer (&call->job, job_free);
  g_free (call);
}

static void subscribe_watch (VdSystemd *self, Watch *watch);

static void
detach (VdSystemd *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->watches);
  while (self->connection != NULL && g_hash_table_iter_next (&iter, NULL, &value)) {
    Watch *watch = value;
    if (watch->subscription != 0)
      g_dbus_connection_signal_unsubscribe (self->connection, watch->subscription);
    watch->subscription = 0;
  }
  if (self->connection != NULL && self->job_removed_id != 0)
    g_dbus_connection_signal_unsubscribe (self->connection, self->job_removed_id);
  self->job_removed_id = 0;
  g_clear_handle_id (&self->watch_id, g_bus_unwatch_name);
  if (self->connection != NULL)
    g_object_set_data (G_OBJECT (self->connection), "vd-systemd", NULL);
  g_clear_object (&self->connection);
}

static void
vd_systemd_finalize (GObject *object)
{
  VdSystemd *self = VD_SYSTEMD (object);

  detach (self);
  g_hash_table_unref (self->pending_jobs);
  g_ptr_array_unref (self->lost_jobs);
  g_ptr_array_unref (self->deferred);
  g_hash_table_unref (self->watches);
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
  self->pending_jobs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) job_free);
  self->lost_jobs = g_ptr_array_new_with_free_func ((GDestroyNotify) job_free);
  self->deferred = g_ptr_array_new_with_free_func ((GDestroyNotify) call_free);
  self->watches = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify) watch_free);
}

/* The job ended with @result (JobRemoved's word); frees @job. */
static void
job_return (Job *job, const gchar *result)
{
  g_autoptr(GTask) task = g_steal_pointer (&job->task);
  g_autofree gchar *unit = g_strdup (job->unit);

  job_free (job);
  if (g_strcmp0 (result, "done") == 0) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                           "systemd could not finish the job for %s: %s", unit, result);
}

static void
job_removed_cb (GDBusConnection *connection, const gchar *sender, const gchar *path,
                const gchar *interface_name, const gchar *signal_name, GVariant *parameters,
                gpointer user_data)
{
  VdSystemd *self = VD_SYSTEMD (user_data);
  const gchar *job = NULL, *unit = NULL, *result = NULL;
  guint32 id;
  gpointer key = NULL, value = NULL;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(uoss)")))
    return;
  g_variant_get (parameters, "(u&o&s&s)", &id, &job, &unit, &result);
  if (!g_hash_table_steal_extended (self->pending_jobs, job, &key, &value))
    return;
  g_free (key);
  job_return (value, result);
}

static void
attach (VdSystemd *self, GDBusConnection *connection)
{
  self->connection = g_object_ref (connection);
  /* Not a reference: a reply on this connection finds us only while it
   * is ours (detach() takes it off). */
  g_object_set_data (G_OBJECT (connection), "vd-systemd", self);
  self->job_removed_id =
    g_dbus_connection_signal_subscribe (connection, SYSTEMD_NAME, SYSTEMD_MANAGER, "JobRemoved",
                                        SYSTEMD_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                        job_removed_cb, self, NULL);
  {
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init (&iter, self->watches);
    while (g_hash_table_iter_next (&iter, NULL, &value))
      subscribe_watch (self, value);
  }
}

/* The first connection is subscribed by vd_systemd_subscribe() at start. */
VdSystemd *
vd_systemd_new (GDBusConnection *connection)
{
  VdSystemd *self = g_object_new (VD_TYPE_SYSTEMD, NULL);

  attach (self, connection);
  self->subscribed = TRUE;
  return self;
}

static void job_queued_cb (GObject *source, GAsyncResult *res, gpointer user_data);

static void
send_call (VdSystemd *self, const gchar *method, GVariant *args, GUnixFDList *fds, GCancellable *cancellable,
           Job *job)
{
  g_dbus_connection_call_with_unix_fd_list (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                            method, args, G_VARIANT_TYPE ("(o)"), G_DBUS_CALL_FLAGS_NONE,
                                            SYSTEMD_CALL_MS, fds, cancellable, job_queued_cb, job);
}

/* --- after a reconnect: what became of the jobs ------------------------------ */

/* A job that ended while no JobRemoved could reach us: its unit says how.
 * A worker's start job (Type=oneshot, CollectMode=inactive) leaves its
 * unit failed when the program failed, and collected when it succeeded. */
static void
conclude_job (VdSystemd *self, Job *job)
{
  g_autoptr(GVariant) state = vd_systemd_get_unit_property (self, job->unit, "org.freedesktop.systemd1.Unit",
                                                            "ActiveState", NULL);
  const gchar *active = state != NULL ? g_variant_get_string (state, NULL) : "gone";

  g_info ("a job for %s ended while the daemon was off the bus; the unit is %s now", job->unit, active);
  job_return (job, job->start && g_str_equal (active, "failed") ? "failed" : "done");
}

static void
job_looked_up_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree gchar *path = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  VdSystemd *self;
  gpointer key = NULL, value = NULL;

  if (reply != NULL || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CLOSED))
    return;   /* still queued: JobRemoved comes; or lost the bus again: asked again */
  self = g_object_get_data (source, "vd-systemd");
  if (self == NULL || !g_hash_table_steal_extended (self->pending_jobs, path, &key, &value))
    return;   /* JobRemoved came first */
  g_free (key);
  conclude_job (self, value);
}

static void
look_up_job (VdSystemd *self, const gchar *path)
{
  g_dbus_connection_call (self->connection, SYSTEMD_NAME, path, "org.freedesktop.DBus.Properties", "Get",
                          g_variant_new ("(ss)", "org.freedesktop.systemd1.Job", "State"), G_VARIANT_TYPE ("(v)"),
                          G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, NULL, job_looked_up_cb, g_strdup (path));
}

/* A job whose request went with the bus: if systemd queued it, its unit
 * names the job now; otherwise its unit's state is all there is. */
static void
adopt_lost_job (VdSystemd *self, Job *job)
{
  g_autoptr(GVariant) current = vd_systemd_get_unit_property (self, job->unit, "org.freedesktop.systemd1.Unit",
                                                              "Job", NULL);
  guint32 id = 0;
  const gchar *path = NULL;

  if (current != NULL)
    g_variant_get (current, "(u&o)", &id, &path);
  if (id != 0) {
    g_hash_table_insert (self->pending_jobs, g_strdup (path), job);
    look_up_job (self, path);
    return;
  }
  conclude_job (self, job);
}

static void
resolve_jobs (VdSystemd *self)
{
  g_autoptr(GPtrArray) lost = g_steal_pointer (&self->lost_jobs);
  g_autofree gpointer *paths = NULL;
  guint n = 0;

  self->lost_jobs = g_ptr_array_new_with_free_func ((GDestroyNotify) job_free);
  paths = g_hash_table_get_keys_as_array (self->pending_jobs, &n);
  for (guint i = 0; i < n; i++)
    look_up_job (self, paths[i]);
  g_ptr_array_set_free_func (lost, NULL);
  for (guint i = 0; i < lost->len; i++)
    adopt_lost_job (self, g_ptr_array_index (lost, i));
}

/* Calls made while off the bus go now. */
static void
send_deferred (VdSystemd *self)
{
  g_autoptr(GPtrArray) calls = g_steal_pointer (&self->deferred);

  self->deferred = g_ptr_array_new_with_free_func ((GDestroyNotify) call_free);
  for (guint i = 0; i < calls->len; i++) {
    Call *call = g_ptr_array_index (calls, i);
    send_call (self, call->method, call->args, call->fds, NULL, g_steal_pointer (&call->job));
  }
}

static void
subscribed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  VdSystemd *self = g_object_get_data (source, "vd-systemd");

  /* Even unsubscribed, systemd tells the client that queued a job when it
   * ends: what waits goes now rather than time out. */
  if (reply == NULL)
    g_warning ("cannot subscribe to systemd's signals again: %s", error->message);
  else
    g_info ("subscribed to systemd's signals again");
  if (self == NULL || G_DBUS_CONNECTION (source) != self->connection)
    return;
  /* From here JobRemoved reaches us: what ended before can be asked. */
  self->subscribed = TRUE;
  resolve_jobs (self);
  send_deferred (self);
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

/* After the daemon lost the bus: calls and JobRemoved move to @connection
 * (NULL: none until the next). Pending jobs stay pending. */
void
vd_systemd_set_connection (VdSystemd *self, GDBusConnection *connection)
{
  if (connection == self->connection)
    return;
  detach (self);
  self->subscribed = FALSE;
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
  Job *job = user_data;
  VdSystemd *self = g_task_get_source_object (job->task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  const gchar *path = NULL;

  reply = g_dbus_connection_call_with_unix_fd_list_finish (G_DBUS_CONNECTION (source), NULL, res, &error);
  if (reply == NULL && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CLOSED)) {
    /* The bus went with the request: whether systemd queued it is for
     * the next connection to find out. */
    g_ptr_array_add (self->lost_jobs, job);
    if (self->subscribed)
      resolve_jobs (self);
    return;
  }
  if (reply == NULL) {
    g_autoptr(GTask) task = g_steal_pointer (&job->task);
    job_free (job);
    g_dbus_error_strip_remote_error (error);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                             "systemd refused the job: %s", error->message);
    return;
  }
  g_variant_get (reply, "(&o)", &path);
  g_hash_table_insert (self->pending_jobs, g_strdup (path), job);
  /* Queued on a connection that is gone since: its JobRemoved went there. */
  if (G_DBUS_CONNECTION (source) != self->connection && self->subscribed)
    look_up_job (self, path);
}

static gboolean
deferred_timeout_cb (gpointer user_data)
{
  Call *call = user_data;
  VdSystemd *self = call->self;
  GTask *task = g_steal_pointer (&call->job->task);

  call->timeout_id = 0;
  g_ptr_array_remove (self->deferred, call);
  g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                           "systemd could not be reached: the daemon has been off the system bus for %u s",
                           SYSTEMD_CALL_MS / 1000);
  g_object_unref (task);
  return G_SOURCE_REMOVE;
}

/* Sends @method now, or once the daemon is back on the bus and subscribed
 * (so that the job's JobRemoved reaches it). Takes @args. */
static void
call_for_job (VdSystemd *self, const gchar *method, GVariant *args, GUnixFDList *fds, GCancellable *cancellable,
              GTask *task, const gchar *unit, gboolean start)
{
  Job *job = job_new (task, unit, start);
  Call *call;

  if (self->connection != NULL && self->subscribed) {
    send_call (self, method, args, fds, cancellable, job);
    return;
  }
  call = g_new0 (Call, 1);
  call->self = self;
  call->method = g_strdup (method);
  call->args = g_variant_ref_sink (args);
  call->fds = fds != NULL ? g_object_ref (fds) : NULL;
  call->job = job;
  call->timeout_id = g_timeout_add (SYSTEMD_CALL_MS, deferred_timeout_cb, call);
  g_ptr_array_add (self->deferred, call);
}

void
vd_systemd_start_transient_async (VdSystemd *self, const gchar *unit, GVariant *properties,
                                  GUnixFDList *fds, GCancellable *cancellable,
                                  GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);

  call_for_job (self, "StartTransientUnit",
                g_variant_new ("(ss@a(sv)a(sa(sv)))", unit, "fail", properties, NULL),
                fds, cancellable, task, unit, TRUE);
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

  call_for_job (self, "StopUnit", g_variant_new ("(ss)", unit, "replace"), NULL, cancellable, task, unit, FALSE);
}

gboolean
vd_systemd_stop_unit_finish (VdSystemd *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
kill_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  g_autoptr(GVariant) reply = NULL;
  GError *error = NULL;

  reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  if (reply == NULL) {
    g_dbus_error_strip_remote_error (error);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "systemd did not kill %s: %s",
                             (const gchar *) g_task_get_task_data (task), error->message);
    g_error_free (error);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

void
vd_systemd_kill_unit_async (VdSystemd *self, const gchar *unit, gint signal,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);
  GError *error = NULL;

  g_task_set_task_data (task, g_strdup (unit), g_free);
  if (!check_connected (self, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  g_dbus_connection_call (self->connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "KillUnit",
                          g_variant_new ("(ssi)", unit, "main", signal), NULL, G_DBUS_CALL_FLAGS_NONE,
                          SYSTEMD_CALL_MS, NULL, kill_done_cb, task);
}

gboolean
vd_systemd_kill_unit_finish (VdSystemd *self, GAsyncResult *result, GError **error)
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

/* The start's own wait: the job may outlive the caller's deadline, so the
 * callback frees what the caller has given up on. */
typedef struct {
  GMainContext *context;
  GAsyncResult *result;
  gboolean      abandoned;
} StartSyncData;

static void
start_sync_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  StartSyncData *data = user_data;

  if (data->abandoned) {
    g_free (data);
    return;
  }
  data->result = g_object_ref (res);
  g_main_context_wakeup (data->context);
}

static gboolean
flag_cb (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* For the start-up path, where the main loop is not running yet: started
 * means systemd's job is done (for Type=notify, READY=1 was said). A job
 * still running at @timeout_ms fails the call; the unit may still start
 * after, so the caller stops it. */
gboolean
vd_systemd_start_transient_sync (VdSystemd *self, const gchar *unit, GVariant *properties, GUnixFDList *fds,
                                 guint timeout_ms, GError **error)
{
  StartSyncData *data;
  gboolean expired = FALSE;
  guint timeout_id;
  gboolean ok;

  if (!check_connected (self, error)) {
    g_variant_unref (g_variant_ref_sink (properties));
    return FALSE;
  }
  data = g_new0 (StartSyncData, 1);
  data->context = g_main_context_default ();
  timeout_id = g_timeout_add (timeout_ms, flag_cb, &expired);
  vd_systemd_start_transient_async (self, unit, properties, fds, NULL, start_sync_done_cb, data);
  while (data->result == NULL && !expired)
    g_main_context_iteration (data->context, TRUE);
  if (data->result == NULL) {
    data->abandoned = TRUE;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s did not start within %u s", unit,
                 timeout_ms / 1000);
    return FALSE;
  }
  g_source_remove (timeout_id);
  ok = vd_systemd_start_transient_finish (self, data->result, error);
  g_object_unref (data->result);
  g_free (data);
  return ok;
}

/* For the shutdown and sweep paths, where the main loop is not running. */
gboolean
vd_systemd_stop_unit_sync (VdSystemd *self, const gchar *unit, guint timeout_ms, GError **error)
{
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  SyncData data = { g_main_context_default (), NULL };
  guint timeout_id;
  gboolean ok;

  /* A call made off the bus would wait for the next connection. */
  if (!check_connected (self, error))
    return FALSE;
  timeout_id = g_timeout_add (timeout_ms, sync_timeout_cb, cancellable);
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

/* Properties.@method (Get or GetAll) on @unit's object; the reply's one
 * value. */
static GVariant *
call_unit_properties_sync (VdSystemd *self, const gchar *unit, const gchar *method, GVariant *args,
                           const gchar *reply_type, GError **error)
{
  g_autoptr(GVariant) owned_args = g_variant_ref_sink (args);
  g_autofree gchar *path = unit_object_path (self, unit, error);
  g_autoptr(GVariant) reply = NULL;

  if (path == NULL || !check_connected (self, error))
    return NULL;
  reply = g_dbus_connection_call_sync (self->connection, SYSTEMD_NAME, path,
                                       "org.freedesktop.DBus.Properties", method, owned_args,
                                       G_VARIANT_TYPE (reply_type), G_DBUS_CALL_FLAGS_NONE,
                                       SYSTEMD_CALL_MS, NULL, error);
  if (reply == NULL)
    return NULL;
  return g_variant_get_child_value (reply, 0);
}

GVariant *
vd_systemd_get_unit_property (VdSystemd *self, const gchar *unit, const gchar *interface_name,
                              const gchar *property, GError **error)
{
  g_autoptr(GVariant) boxed = call_unit_properties_sync (self, unit, "Get",
                                                         g_variant_new ("(ss)", interface_name, property),
                                                         "(v)", error);

  return boxed != NULL ? g_variant_get_variant (boxed) : NULL;
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
  return call_unit_properties_sync (self, unit, "GetAll", g_variant_new ("(s)", interface_name), "(a{sv})", error);
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

/* --- how a unit ended ------------------------------------------------------------ */

/* systemd's object path of @unit (bus_label_escape: every byte but
 * [A-Za-z0-9], and a leading digit, as _xx). */
gchar *
vd_systemd_unit_path (const gchar *unit)
{
  GString *path = g_string_new (SYSTEMD_PATH "/unit/");

  for (const gchar *c = unit; *c != '\0'; c++) {
    if (g_ascii_isalnum (*c) && !(c == unit && g_ascii_isdigit (*c)))
      g_string_append_c (path, *c);
    else
      g_string_append_printf (path, "_%02x", (guchar) *c);
  }
  return g_string_free (path, FALSE);
}

void
vd_service_end_take (VdServiceEnd *end, GVariant *props)
{
  const gchar *result = NULL;

  if (g_variant_lookup (props, "Result", "&s", &result)) {
    g_free (end->result);
    end->result = g_strdup (result);
  }
  g_variant_lookup (props, "ExecMainCode", "i", &end->code);
  g_variant_lookup (props, "ExecMainStatus", "i", &end->status);
}

gchar *
vd_service_end_describe (const VdServiceEnd *end)
{
  if (end->result == NULL)
    return NULL;
  if (end->code == CLD_KILLED || end->code == CLD_DUMPED) {
    const gchar *abbrev = sigabbrev_np (end->status);
    return abbrev != NULL ? g_strdup_printf ("%s, SIG%s", end->result, abbrev)
                          : g_strdup_printf ("%s, signal %d", end->result, end->status);
  }
  if (end->code == CLD_EXITED && end->status != 0)
    return g_strdup_printf ("%s, status %d", end->result, end->status);
  return g_strdup (end->result);
}

void
vd_service_end_clear (VdServiceEnd *end)
{
  g_clear_pointer (&end->result, g_free);
  end->code = 0;
  end->status = 0;
}

static void
service_changed_cb (GDBusConnection *connection, const gchar *sender, const gchar *path,
                    const gchar *interface_name, const gchar *signal_name, GVariant *parameters,
                    gpointer user_data)
{
  g_autoptr(GVariant) changed = NULL;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sa{sv}as)")))
    return;
  changed = g_variant_get_child_value (parameters, 1);
  vd_service_end_take (&((Watch *) user_data)->end, changed);
}

static void
subscribe_watch (VdSystemd *self, Watch *watch)
{
  watch->subscription =
    g_dbus_connection_signal_subscribe (self->connection, SYSTEMD_NAME, "org.freedesktop.DBus.Properties",
                                        "PropertiesChanged", watch->path, "org.freedesktop.systemd1.Service",
                                        G_DBUS_SIGNAL_FLAGS_NONE, service_changed_cb, watch, NULL);
}

/* systemd tells its subscribers a unit's last state before it collects
 * it (CollectMode=inactive-or-failed), so asking after the fact can be too
 * late: from here on, what it says of @unit's service is kept. */
guint
vd_systemd_watch_unit (VdSystemd *self, const gchar *unit)
{
  Watch *watch = g_new0 (Watch, 1);
  guint id = ++self->next_watch;

  watch->unit = g_strdup (unit);
  watch->path = vd_systemd_unit_path (unit);
  g_hash_table_insert (self->watches, GUINT_TO_POINTER (id), watch);
  if (self->connection != NULL)
    subscribe_watch (self, watch);
  return id;
}

void
vd_systemd_unwatch_unit (VdSystemd *self, guint id)
{
  Watch *watch = g_hash_table_lookup (self->watches, GUINT_TO_POINTER (id));

  if (watch == NULL)
    return;
  if (watch->subscription != 0 && self->connection != NULL)
    g_dbus_connection_signal_unsubscribe (self->connection, watch->subscription);
  g_hash_table_remove (self->watches, GUINT_TO_POINTER (id));
}

/* "signal, SIGKILL", "exit-code, status 1", "success": systemd's Result
 * and how the main process ended; NULL when systemd said nothing. */
gchar *
vd_systemd_describe_unit_end (VdSystemd *self, guint id)
{
  Watch *watch = g_hash_table_lookup (self->watches, GUINT_TO_POINTER (id));
  g_autoptr(GVariant) props = NULL;

  if (watch == NULL)
    return NULL;
  /* Nothing heard (yet): the unit may still be loaded to be asked. */
  if (watch->end.result == NULL || watch->end.code == 0) {
    props = vd_systemd_get_unit_properties (self, watch->unit, "org.freedesktop.systemd1.Service", NULL);
    if (props != NULL)
      vd_service_end_take (&watch->end, props);
  }
  return vd_service_end_describe (&watch->end);
}
