/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSessionPool"

#include "config.h"

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-log.h"
#include "vd-session-pool.h"

/* Stopped sessions stay visible this long, so that a caller can still read
 * how they ended. */
#define FORGET_AFTER_SEC 300
/* Ended sessions lingering at once, at most: past it the oldest is
 * forgotten at once (tasks end two sessions each, and a busy host ends
 * hundreds in FORGET_AFTER_SEC). */
#define LINGER_MAX       64

/* The pool keeps no connection (vd_session_pool_new's is not used) and
 * gives none to its sessions: the daemon replaces it after losing the bus,
 * and GDBus makes a new system bus connection only once nobody holds the
 * old one. Exporting goes through export_func, and the connection's life
 * cycle (name, reconnects) stays with the daemon. */
struct _VdSessionPool {
  GObject          parent_instance;
  VdConfig        *config;
  VdSystemd       *systemd;
  VdGuard         *guard;
  VdDnsRelay      *dns_relay;
  VdIdle          *idle;
  VdExportFunc     export_func;
  gpointer         export_data;
  GHashTable      *sessions;   /* id → VdSession */
  GHashTable      *uids;       /* uid → session id */
  GHashTable      *inhibits;   /* session id → idle token */
  GQueue           lingering;  /* ForgetData of the ended sessions still listed, oldest first
                                * (each owned by its timeout, which holds a reference on us) */
};

G_DEFINE_TYPE (VdSessionPool, vd_session_pool, G_TYPE_OBJECT)

enum { SIGNAL_SESSION_ADDED, SIGNAL_SESSION_ENDED, SIGNAL_SESSION_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_session_pool_finalize (GObject *object)
{
  VdSessionPool *self = VD_SESSION_POOL (object);

  g_hash_table_unref (self->sessions);
  g_hash_table_unref (self->uids);
  g_hash_table_unref (self->inhibits);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_object (&self->guard);
  g_clear_object (&self->dns_relay);
  g_clear_object (&self->idle);
  G_OBJECT_CLASS (vd_session_pool_parent_class)->finalize (object);
}

static void
vd_session_pool_class_init (VdSessionPoolClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_session_pool_finalize;
  signals[SIGNAL_SESSION_ADDED] = g_signal_new ("session-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 1, VD_TYPE_SESSION);
  signals[SIGNAL_SESSION_ENDED] = g_signal_new ("session-ended", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 1, VD_TYPE_SESSION);
  signals[SIGNAL_SESSION_REMOVED] = g_signal_new ("session-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                  NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_session_pool_init (VdSessionPool *self)
{
  self->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->uids = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  self->inhibits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

VdSessionPool *
vd_session_pool_new (VdConfig *config, VdSystemd *systemd, VdGuard *guard, VdDnsRelay *dns_relay, VdIdle *idle,
                     GDBusConnection *connection, VdExportFunc export_func, gpointer export_data)
{
  VdSessionPool *self = g_object_new (VD_TYPE_SESSION_POOL, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->guard = g_object_ref (guard);
  self->dns_relay = g_object_ref (dns_relay);
  self->idle = g_object_ref (idle);
  self->export_func = export_func;
  self->export_data = export_data;
  return self;
}

/* @taken: a uid claimed but not yet tracked (0: none). */
static guint32
allocate_uid (VdSessionPool *self, guint32 taken, GError **error)
{
  guint32 base = vd_config_get_uid_base (self->config);
  guint32 last_covered = vd_guard_get_uncovered_uid (self->guard) - 1;

  for (guint32 uid = base; uid <= last_covered; uid++) {
    if (uid != taken && !g_hash_table_contains (self->uids, GUINT_TO_POINTER (uid)))
      return uid;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "No session uid is free");
  return 0;
}

typedef struct {
  VdSessionPool *pool;
  VdSession     *session;
  guint          source;  /* the timeout that forgets it */
} ForgetData;

static void
forget_data_free (gpointer data)
{
  ForgetData *f = data;

  g_object_unref (f->pool);
  g_object_unref (f->session);
  g_free (f);
}

static gboolean
forget_session_cb (gpointer user_data)
{
  ForgetData *f = user_data;
  g_autofree gchar *path = g_strdup (vd_session_get_object_path (f->session));

  g_queue_remove (&f->pool->lingering, f);
  if (g_hash_table_remove (f->pool->sessions, vd_session_get_id (f->session)))
    g_signal_emit (f->pool, signals[SIGNAL_SESSION_REMOVED], 0, path);
  return G_SOURCE_REMOVE;
}

/* The oldest lingering session goes now rather than at its time. */
static void
forget_oldest (VdSessionPool *self)
{
  ForgetData *oldest = g_queue_peek_head (&self->lingering);
  guint source = oldest->source;

  forget_session_cb (oldest);
  g_source_remove (source);  /* frees it */
}

static void release_egress_uid (VdSessionPool *self, VdSession *session);

static void
session_ended_cb (VdSession *session, gpointer user_data)
{
  VdSessionPool *self = VD_SESSION_POOL (user_data);
  guint32 uid = vd_session_get_uid (session);
  guint64 packets = 0, bytes = 0;
  gpointer token = NULL;
  ForgetData *f = g_new0 (ForgetData, 1);

  if (vd_guard_get_counters (self->guard, uid, &packets, &bytes))
    vd_log_session (G_LOG_LEVEL_INFO, vd_session_get_id (session),
                    "session %s: the guard dropped %" G_GUINT64_FORMAT " packets", vd_session_get_id (session), packets);
  vd_guard_remove_session (self->guard, uid);
  g_hash_table_remove (self->uids, GUINT_TO_POINTER (uid));
  release_egress_uid (self, session);
  vd_image_remove_user (vd_session_get_image (session), vd_session_get_object_path (session));
  if (g_hash_table_steal_extended (self->inhibits, vd_session_get_id (session), NULL, &token))
    vd_idle_uninhibit (self->idle, GPOINTER_TO_UINT (token));
  f->pool = g_object_ref (self);
  f->session = g_object_ref (session);
  while (g_queue_get_length (&self->lingering) >= LINGER_MAX)
    forget_oldest (self);
  /* Freeze's scratch boot is the daemon's own business: it leaves the list
   * as soon as it has ended, so that callers only ever see their sessions
   * linger. */
  f->source = g_timeout_add_seconds_full (G_PRIORITY_DEFAULT,
                                          vd_session_get_options (session)->boot_snapshot ? 0 : FORGET_AFTER_SEC,
                                          forget_session_cb, f, forget_data_free);
  g_queue_push_tail (&self->lingering, f);
  /* Its slot of MaxSessions is free now (a queued task may take it). */
  g_signal_emit (self, signals[SIGNAL_SESSION_ENDED], 0, session);
}

static void
release_egress_uid (VdSessionPool *self, VdSession *session)
{
  guint32 uid = vd_session_get_egress_uid (session);

  if (uid == 0)
    return;
  vd_guard_remove_session (self->guard, uid);
  g_hash_table_remove (self->uids, GUINT_TO_POINTER (uid));
}

/* The egress proxy gets a uid of its own from the same range, so the
 * nftables table holds it to the deny list exactly as it holds QEMU. */
static gboolean
claim_egress_uid (VdSessionPool *self, VdSession *session, GError **error)
{
  g_autofree gchar *owner = NULL;
  guint32 uid;

  if (vd_session_get_options (session)->egress_mode != VD_EGRESS_MODE_ALLOWLIST)
    return TRUE;
  uid = allocate_uid (self, vd_session_get_uid (session), error);
  if (uid == 0 || !vd_guard_add_session (self->guard, uid, error))
    return FALSE;
  owner = g_strdup_printf ("%s egress", vd_session_get_id (session));
  g_hash_table_insert (self->uids, GUINT_TO_POINTER (uid), g_steal_pointer (&owner));
  vd_session_set_egress_uid (session, uid);
  return TRUE;
}

static gboolean
claim_uid (VdSessionPool *self, guint32 *uid, GError **error)
{
  if (*uid == 0) {
    *uid = allocate_uid (self, 0, error);
    return *uid != 0;
  }
  if (g_hash_table_contains (self->uids, GUINT_TO_POINTER (*uid))) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "The session uid %u is in use", *uid);
    return FALSE;
  }
  return TRUE;
}

static void
track (VdSessionPool *self, VdSession *session, guint32 uid)
{
  g_autofree gchar *reason = g_strdup_printf ("session %s", vd_session_get_id (session));
  guint token = vd_idle_inhibit (self->idle, reason);

  g_hash_table_insert (self->uids, GUINT_TO_POINTER (uid), g_strdup (vd_session_get_id (session)));
  g_hash_table_insert (self->sessions, g_strdup (vd_session_get_id (session)), g_object_ref (session));
  g_hash_table_insert (self->inhibits, g_strdup (vd_session_get_id (session)), GUINT_TO_POINTER (token));
  g_signal_connect_object (session, "ended", G_CALLBACK (session_ended_cb), self, 0);
}

/* uid 0 means "pick a free slot"; the self-test passes the one slot the
 * nftables table does not cover. */
VdSession *
vd_session_pool_create (VdSessionPool *self, VdImage *image, const VdSessionOptions *options, guint32 uid,
                        const gchar *project_name, const gchar *project_dir, GError **error)
{
  g_autoptr(VdSession) session = NULL;
  gint64 guard_started = g_get_monotonic_time ();

  if (!claim_uid (self, &uid, error) || !vd_guard_add_session (self->guard, uid, error))
    return NULL;
  session = vd_session_new (self->config, self->systemd, NULL, image, project_dir, uid, options,
                            vd_guard_get_deny_list (self->guard));
  vivarium_dbus_session_set_project (VIVARIUM_DBUS_SESSION (vd_session_get_skeleton (session)),
                                     project_name != NULL ? project_name : "");
  vd_session_set_resolv_conf (session, vd_dns_relay_get_resolv_conf (self->dns_relay));
  if (!claim_egress_uid (self, session, error)) {
    vd_guard_remove_session (self->guard, uid);
    return NULL;
  }
  vd_session_record_timing (session, "guard", (guint64) (g_get_monotonic_time () - guard_started));
  if (!self->export_func (vd_session_get_skeleton (session), vd_session_get_object_path (session),
                          self->export_data, error)) {
    vd_guard_remove_session (self->guard, uid);
    release_egress_uid (self, session);
    return NULL;
  }
  track (self, session, uid);
  g_signal_emit (self, signals[SIGNAL_SESSION_ADDED], 0, session);
  return g_steal_pointer (&session);
}

/* An open session's unit carries the deny list; a closed one (egress none
 * or allowlist) denies every address, and its proxy carries the list. */
static gboolean
check_layer1 (VdSessionPool *self, VdSession *session, GError **error)
{
  const VdSessionOptions *options = vd_session_get_options (session);
  VdEgress *egress = vd_session_get_egress (session);

  if (options->egress_mode != VD_EGRESS_MODE_OPEN &&
      !vd_guard_check_unit_closed (self->guard, vd_session_get_unit (session), error))
    return FALSE;
  if (egress != NULL && !vd_guard_check_unit (self->guard, vd_egress_get_unit (egress), error))
    return FALSE;
  return options->egress_mode != VD_EGRESS_MODE_OPEN || !options->guard_layer1 ||
         vd_guard_check_unit (self->guard, vd_session_get_unit (session), error);
}

/* Layer 1 is checked on the unit as systemd holds it, not as we asked. */
gboolean
vd_session_pool_start_finish (VdSessionPool *self, VdSession *session, GAsyncResult *result, GError **error)
{
  if (!vd_session_start_finish (session, result, error))
    return FALSE;
  if (!check_layer1 (self, session, error)) {
    vd_session_stop_async (session, NULL, NULL);
    return FALSE;
  }
  return TRUE;
}

guint
vd_session_pool_count_active (VdSessionPool *self)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    n += vd_session_is_active (value) ? 1 : 0;
  return n;
}

/* Sorted, NULL-terminated; the strings belong to the sessions. */
const gchar **
vd_session_pool_list_paths (VdSessionPool *self)
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, (gpointer) vd_session_get_object_path (value));
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

/* For the self-test's live-session mode: a caller's running session. */
VdSession *
vd_session_pool_lookup_running (VdSessionPool *self, const gchar *id, GError **error)
{
  VdSession *session;

  if (!vivarium_name_validate ("session", id, error))
    return NULL;
  session = g_hash_table_lookup (self->sessions, id);
  if (session == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no session “%s”", id);
    return NULL;
  }
  if (g_strcmp0 (vd_session_get_state (session), "running") != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The session %s is %s, not running",
                 id, vd_session_get_state (session));
    return NULL;
  }
  return session;
}

/* SIGTERM or idle exit: synchronously, so that the next instance finds
 * nothing to sweep. */
void
vd_session_pool_stop_all_sync (VdSessionPool *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    vd_session_stop_sync (VD_SESSION (value));
}

static void
scratch_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSessionPool *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_pool_start_finish (self, VD_SESSION (source), res, &error)) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, g_object_ref (source), g_object_unref);
}

/* A session for the daemon's own use (the isolation self-test): the same
 * path as StartSession, but with a layer of the guard possibly left out,
 * or in egress allowlist mode with the self-test's own rules and no group
 * of the configuration's (what the operator's groups allow is not the
 * self-test's business). */
void
vd_session_pool_start_scratch_async (VdSessionPool *self, VdImage *image, gboolean layer1, gboolean layer2,
                                     const gchar * const *egress_allow, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  VdSessionOptions opts = { 0 };
  g_autoptr(VdSession) session = NULL;
  guint32 uid = layer2 ? 0 : vd_guard_get_uncovered_uid (self->guard);
  GError *error = NULL;

  opts.memory_mib = vd_config_get_default_memory_mib (self->config);
  opts.cpus = 1;
  opts.guard_layer1 = layer1;
  opts.guard_layer2 = layer2;
  opts.egress_mode = egress_allow != NULL ? VD_EGRESS_MODE_ALLOWLIST : VD_EGRESS_MODE_OPEN;
  opts.egress_allow = egress_allow;
  session = vd_session_pool_create (self, image, &opts, uid, NULL, NULL, &error);
  if (session == NULL) {
    g_task_return_error (task, error);
    return;
  }
  vd_session_start_async (session, cancellable, scratch_started_cb, g_steal_pointer (&task));
}

VdSession *
vd_session_pool_start_scratch_finish (VdSessionPool *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* --- Freeze's boot snapshot ------------------------------------------- */

typedef struct {
  VdSession *session;
  gchar     *image_dir;
  GError    *error;
} SnapshotData;

static void
snapshot_data_free (SnapshotData *data)
{
  g_clear_object (&data->session);
  g_free (data->image_dir);
  g_clear_error (&data->error);
  g_free (data);
}

static void
snapshot_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  SnapshotData *data = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!vd_session_stop_finish (VD_SESSION (source), res, &error))
    g_debug ("stopping the scratch session: %s", error->message);
  if (data->error != NULL) {
    g_task_return_error (task, g_steal_pointer (&data->error));
    return;
  }
  g_task_return_boolean (task, TRUE);
}

/* Saved or not, the scratch guest goes before the freeze goes on. */
static void
snapshot_saved_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  SnapshotData *data = g_task_get_task_data (task);

  vd_session_save_boot_snapshot_finish (VD_SESSION (source), res, &data->error);
  vd_session_stop_async (data->session, snapshot_stopped_cb, task);
}

static void
snapshot_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSessionPool *self = g_task_get_source_object (task);
  SnapshotData *data = g_task_get_task_data (task);
  GError *error = NULL;

  if (!vd_session_pool_start_finish (self, VD_SESSION (source), res, &error)) {
    g_prefix_error (&error, "The scratch guest did not boot: ");
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  vd_session_save_boot_snapshot_async (data->session, data->image_dir, g_task_get_cancellable (task),
                                       snapshot_saved_cb, task);
}

/* Boots the (not yet frozen) image once with the options a default session
 * has, both guard layers in force, and saves it into the image directory
 * (see VdSessionOptions.boot_snapshot). */
void
vd_session_pool_take_boot_snapshot_async (VdSessionPool *self, VdImage *image, GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  SnapshotData *data = g_new0 (SnapshotData, 1);
  VdSessionOptions opts = { 0 };
  GError *error = NULL;

  g_task_set_task_data (task, data, (GDestroyNotify) snapshot_data_free);
  opts.memory_mib = vd_config_get_default_memory_mib (self->config);
  opts.cpus = vd_config_get_default_cpus (self->config);
  opts.guard_layer1 = TRUE;
  opts.guard_layer2 = TRUE;
  opts.boot_snapshot = TRUE;
  data->image_dir = g_strdup (vd_image_get_dir (image));
  data->session = vd_session_pool_create (self, image, &opts, 0, NULL, NULL, &error);
  if (data->session == NULL) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  vd_session_start_async (data->session, cancellable, snapshot_started_cb, task);
}

gboolean
vd_session_pool_take_boot_snapshot_finish (VdSessionPool *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}
