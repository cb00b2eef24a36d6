/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdManager"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-canary.h"
#include "vd-dns-relay.h"
#include "vd-exported.h"
#include "vd-fs.h"
#include "vd-gateway-client.h"
#include "vd-guard.h"
#include "vd-idle.h"
#include "vd-image.h"
#include "vd-image-build.h"
#include "vd-image-import.h"
#include "vd-job.h"
#include "vd-log.h"
#include "vd-manager.h"
#include "vd-secret-store.h"
#include "vd-ssh-key-store.h"
#include "vd-egress-options.h"
#include "vd-egress-rules.h"
#include "vd-progress.h"
#include "vd-project-store.h"
#include "vd-report-store.h"
#include "vd-selftest.h"
#include "vd-session.h"
#include "vd-session-pool.h"
#include "vd-session-save.h"
#include "vd-systemd.h"
#include "vd-task-runner.h"
#include "vd-worker-grants.h"

/* Finished jobs stay on disk and on the bus, the newest this many: a
 * restarted daemon shows them again, and memory stays bounded (each log is
 * capped at 1 MiB). */
#define JOB_HISTORY        20
/* Stored self-test results kept under the state dir's selftest/. */
#define SELF_TEST_HISTORY  50

/* The engine: images, builds, the session pool, the guard and its
 * self-test. It exports its objects through export_protected() on the
 * connection it was given and keeps the daemon on the bus with VdIdle
 * inhibitors; the bus name and the daemon's life are not its business. */
struct _VdManager {
  GObject               parent_instance;
  VdConfig             *config;
  VdAuthority          *authority;
  VdIdle               *idle;
  VdExported           *exported;     /* the only way onto the bus */
  GDBusConnection      *connection;
  VdSystemd            *systemd;
  VdGuard              *guard;
  VdDnsRelay           *dns_relay;
  VdSessionPool        *pool;
  VdProjectStore       *projects;
  VdReportStore        *reports;
  VdWorkerGrants       *grants;
  VdTaskRunner         *runner;
  VdSecretStore        *secrets;
  VdSshKeyStore        *ssh_keys;
  VdSelfTest           *self_test;    /* the run in progress, if any */
  VivariumDBusManager  *skeleton;
  GHashTable           *images;       /* name → VdImage */
  GHashTable           *pending;      /* names of images being built or imported */
  GHashTable           *jobs;         /* id → VdJob */
};

G_DEFINE_TYPE (VdManager, vd_manager, G_TYPE_OBJECT)

static void
vd_manager_finalize (GObject *object)
{
  VdManager *self = VD_MANAGER (object);

  g_clear_object (&self->exported);   /* takes every object off the bus */
  g_hash_table_unref (self->images);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->jobs);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->self_test);
  g_clear_object (&self->pool);
  g_clear_object (&self->projects);
  g_clear_object (&self->runner);
  g_clear_object (&self->secrets);
  g_clear_object (&self->ssh_keys);
  g_clear_object (&self->reports);
  g_clear_object (&self->grants);
  g_clear_object (&self->guard);
  g_clear_object (&self->dns_relay);   /* stops it */
  g_clear_object (&self->systemd);
  g_clear_object (&self->config);
  g_clear_object (&self->authority);
  g_clear_object (&self->idle);
  g_clear_object (&self->connection);
  G_OBJECT_CLASS (vd_manager_parent_class)->finalize (object);
}

static void
vd_manager_class_init (VdManagerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_manager_finalize;
}

static void
vd_manager_init (VdManager *self)
{
  self->images = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->jobs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
}

static const gchar **
object_paths (GHashTable *table, const gchar *(*path_of) (gpointer))
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, table);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, (gpointer) path_of (value));
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

/* The one place objects go on the bus: through the boundary, which
 * authorizes their methods, properties, signals and place in the tree. The
 * pool gets it as its VdExportFunc. */
static gboolean
export_protected (VdManager *self, GDBusInterfaceSkeleton *skeleton, const gchar *path, GError **error)
{
  return vd_exported_add (self->exported, path, skeleton, error);
}

static gboolean
export_func (GDBusInterfaceSkeleton *skeleton, const gchar *path, gpointer user_data, GError **error)
{
  return export_protected (VD_MANAGER (user_data), skeleton, path, error);
}

/* --- listing --------------------------------------------------------- */

static gboolean
handle_list_sessions (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_session_pool_list_paths (self->pool);

  vivarium_dbus_manager_complete_list_sessions (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_images (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = object_paths (self->images, (const gchar *(*) (gpointer)) vd_image_get_object_path);

  vivarium_dbus_manager_complete_list_images (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_projects (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_project_store_list_paths (self->projects);

  vivarium_dbus_manager_complete_list_projects (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_reports (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_report_store_list_paths (self->reports);

  vivarium_dbus_manager_complete_list_reports (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_tasks (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_task_runner_list_paths (self->runner);

  vivarium_dbus_manager_complete_list_tasks (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static VdImage *lookup_bootable_image (VdManager *self, const gchar *name, GError **error);

static gboolean
handle_submit_task (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *project,
                    const gchar *image_name, const gchar *instructions, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdImage *image;
  VdTask *task;
  GError *error = NULL;

  if (vd_report_store_get_fingerprint (self->reports)[0] == '\0') {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                           "The daemon has no report-signing key; a task could not be reported");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  /* A task needs a work session now and a fresh one at its end. */
  if (vd_session_pool_count_active (self->pool) >= vd_config_get_max_sessions (self->config)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "%u sessions are running, the configured maximum",
                                           vd_config_get_max_sessions (self->config));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (vd_project_store_lookup (self->projects, project, &error) == NULL ||
      (image = lookup_bootable_image (self, image_name, &error)) == NULL ||
      !vd_guard_check_can_start (self->guard, &error) ||
      (task = vd_task_runner_submit (self->runner, project, image, instructions, options, &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_submit_task (iface, invocation, vd_task_get_object_path (task));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* Pruned or deleted objects leave the bus: the boundary holds every object
 * it serves until it is told. */
static void
object_removed_cb (GObject *owner, const gchar *path, gpointer user_data)
{
  vd_exported_remove (VD_MANAGER (user_data)->exported, path);
}

static void
task_added_cb (VdTaskRunner *runner, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_task_added (VD_MANAGER (user_data)->skeleton, path);
}

static void
report_added_cb (VdReportStore *store, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_report_added (VD_MANAGER (user_data)->skeleton, path);
}

/* --- projects -------------------------------------------------------- */

static void
project_created_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdProjectStore *store = VD_PROJECT_STORE (source);
  GError *error = NULL;
  g_autoptr(VdProject) project = vd_project_store_create_finish (store, res, &error);

  if (project == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation,
                                         g_variant_new ("(o)", vd_project_store_get_path (store, vd_project_get_name (project))));
}

static gboolean
handle_create_project (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *name,
                       guint64 quota_bytes, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_project_store_create_async (self->projects, name, quota_bytes, options, project_created_cb,
                                 g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
project_added_cb (VdProjectStore *store, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_project_added (VD_MANAGER (user_data)->skeleton, path);
}

static void
project_removed_cb (VdProjectStore *store, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_project_removed (self->skeleton, path);
}

static gboolean
handle_list_recipes (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_auto(GStrv) recipes = vd_image_build_list_recipes (self->config);

  vivarium_dbus_manager_complete_list_recipes (iface, invocation, (const gchar * const *) recipes);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- images ---------------------------------------------------------- */

static gboolean handle_image_freeze (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_image_verify (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_image_delete (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);

static gboolean
add_image (VdManager *self, VdImage *image, gboolean announce, GError **error)
{
  GDBusInterfaceSkeleton *skeleton = vd_image_get_skeleton (image);

  g_signal_connect (skeleton, "handle-freeze", G_CALLBACK (handle_image_freeze), self);
  g_signal_connect (skeleton, "handle-verify", G_CALLBACK (handle_image_verify), self);
  g_signal_connect (skeleton, "handle-delete", G_CALLBACK (handle_image_delete), self);
  if (!export_protected (self, skeleton, vd_image_get_object_path (image), error))
    return FALSE;
  g_hash_table_insert (self->images, g_strdup (vd_image_get_name (image)), g_object_ref (image));
  if (announce)
    vivarium_dbus_manager_emit_image_added (self->skeleton, vd_image_get_object_path (image));
  return TRUE;
}

static void
load_images (VdManager *self)
{
  g_autofree gchar *dir = vd_config_build_state_path (self->config, "images", NULL);
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(VdImage) image = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.')
      continue;
    image = vd_image_load (path, &error);
    if (image == NULL || !add_image (self, image, FALSE, &error))
      g_warning ("skipping image %s: %s", path, error->message);
  }
}

static VdImage *
image_for_skeleton (VdManager *self, VivariumDBusImage *iface)
{
  return g_hash_table_lookup (self->images, vivarium_dbus_image_get_name (iface));
}

static void
freeze_step_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;

  if (!vd_image_freeze_finish (VD_IMAGE (source), res, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
boot_snapshot_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdImage *image = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_pool_take_boot_snapshot_finish (VD_SESSION_POOL (source), res, &error)) {
    vd_image_snapshot_abort (image);
    g_prefix_error (&error, "Cannot freeze the image “%s”: the boot snapshot failed (nothing was changed; "
                    "BootSnapshots=false in the configuration freezes without one): ", vd_image_get_name (image));
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  vd_image_freeze_async (image, NULL, freeze_step_done_cb, task);
}

/* With boot snapshots on, the image boots once before it is sealed, and
 * the saved guest is sealed with it (see the XML); an image that already
 * carries one (a paused session saved with its memory) is sealed as it is. */
static void
freeze_image_async (VdManager *self, VdImage *image, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (image, NULL, callback, user_data);
  g_autofree gchar *state = vd_image_get_file (image, "boot.state");
  g_autofree gchar *kernel = vd_image_get_file (image, "vmlinuz");
  GError *error = NULL;

  /* Only a direct-kernel-boot image (what the builder makes, guest agent
   * included) is known to reach a guest agent; an imported disk may never
   * answer, and boots cold. */
  if (!vd_config_get_boot_snapshots (self->config) || vd_image_is_frozen (image) || state != NULL || kernel == NULL) {
    vd_image_freeze_async (image, NULL, freeze_step_done_cb, task);
    return;
  }
  if (!vd_image_snapshot_begin (image, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  vd_session_pool_take_boot_snapshot_async (self->pool, image, NULL, boot_snapshot_done_cb, task);
}

static gboolean
freeze_image_finish (GAsyncResult *res, GError **error)
{
  return g_task_propagate_boolean (G_TASK (res), error);
}

static void
freeze_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  GError *error = NULL;

  if (!freeze_image_finish (res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_image_freeze (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  freeze_image_async (self, image_for_skeleton (self, iface), freeze_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
verify_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = vd_image_verify_finish (VD_IMAGE (source), res, &error);

  if (!ok && !g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH)) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(b)", ok));
}

static gboolean
handle_image_verify (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdImage *image = image_for_skeleton (VD_MANAGER (user_data), iface);

  vd_image_verify_async (image, TRUE, NULL, verify_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_image_delete (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdImage) image = g_object_ref (image_for_skeleton (self, iface));
  g_autofree gchar *path = g_strdup (vd_image_get_object_path (image));
  GError *error = NULL;

  if (!vd_image_delete (image, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_image_complete_delete (iface, invocation);
  vd_exported_remove (self->exported, path);
  g_hash_table_remove (self->images, vd_image_get_name (image));
  vivarium_dbus_manager_emit_image_removed (self->skeleton, path);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
check_new_image_name (VdManager *self, const gchar *name, GError **error)
{
  g_autofree gchar *dir = NULL;

  if (!vivarium_name_validate ("image", name, error))
    return FALSE;
  dir = vd_config_build_state_path (self->config, "images", name, NULL);
  if (g_hash_table_contains (self->images, name) || g_hash_table_contains (self->pending, name) ||
      g_file_test (dir, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "An image named “%s” already exists", name);
    return FALSE;
  }
  return TRUE;
}

/* --- jobs ------------------------------------------------------------ */

static gchar *
jobs_dir (VdManager *self)
{
  return vd_config_build_state_path (self->config, "jobs", NULL);
}

static gint
compare_started (gconstpointer a, gconstpointer b)
{
  gint64 x = vd_job_get_started_at (*(VdJob **) a);
  gint64 y = vd_job_get_started_at (*(VdJob **) b);

  return x < y ? -1 : x > y ? 1 : g_strcmp0 (vd_job_get_id (*(VdJob **) a), vd_job_get_id (*(VdJob **) b));
}

/* Oldest finished jobs go, from the bus and from the disk, until at most
 * JOB_HISTORY remain; running ones always stay. */
static void
prune_jobs (VdManager *self)
{
  g_autoptr(GPtrArray) finished = g_ptr_array_new_with_free_func (g_object_unref);
  GHashTableIter iter;
  gpointer value;
  guint excess;

  g_hash_table_iter_init (&iter, self->jobs);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    if (vd_job_is_finished (value))
      g_ptr_array_add (finished, g_object_ref (value));
  }
  if (g_hash_table_size (self->jobs) <= JOB_HISTORY)
    return;
  g_ptr_array_sort (finished, compare_started);
  excess = MIN (g_hash_table_size (self->jobs) - JOB_HISTORY, finished->len);
  for (guint i = 0; i < excess; i++) {
    VdJob *job = g_ptr_array_index (finished, i);
    g_autoptr(GError) error = NULL;
    if (!vd_job_delete_files (job, &error))
      g_warning ("%s", error->message);
    g_hash_table_remove (self->jobs, vd_job_get_id (job));
  }
}

static gboolean
add_job (VdManager *self, VdJob *job, GError **error)
{
  if (!export_protected (self, vd_job_get_skeleton (job), vd_job_get_object_path (job), error))
    return FALSE;
  g_hash_table_insert (self->jobs, g_strdup (vd_job_get_id (job)), g_object_ref (job));
  return TRUE;
}

static void
load_jobs (VdManager *self)
{
  g_autofree gchar *dir = jobs_dir (self);
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *id = NULL;
    g_autoptr(VdJob) job = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.' || !g_str_has_suffix (names[i], ".json"))
      continue;
    id = g_strndup (names[i], strlen (names[i]) - strlen (".json"));
    if (!vivarium_name_validate ("job", id, &error) || (job = vd_job_load (dir, id, &error)) == NULL ||
        !add_job (self, job, &error))
      g_warning ("skipping job record %s: %s", names[i], error->message);
  }
  prune_jobs (self);
}

typedef struct {
  VdManager *manager;
  guint      inhibit;
} JobHold;

static void
job_finished_cb (VdJob *job, gpointer user_data)
{
  g_autofree JobHold *hold = user_data;

  g_signal_handlers_disconnect_by_data (job, hold);
  vd_idle_uninhibit (hold->manager->idle, hold->inhibit);
  prune_jobs (hold->manager);
}

/* Authorized and exported before anyone learns its path; it keeps the
 * daemon on the bus until it finishes. */
static VdJob *
new_job (VdManager *self, const gchar *operation, gboolean cancelable, GError **error)
{
  g_autofree gchar *dir = jobs_dir (self);
  g_autofree gchar *id = vd_job_new_id ();
  g_autofree gchar *reason = NULL;
  g_autoptr(VdJob) job = NULL;
  JobHold *hold;

  while (g_hash_table_contains (self->jobs, id)) {
    g_free (id);
    id = vd_job_new_id ();
  }
  job = vd_job_new (operation, id, dir, cancelable);
  if (!add_job (self, job, error)) {
    vd_job_delete_files (job, NULL);
    return NULL;
  }
  hold = g_new0 (JobHold, 1);
  hold->manager = self;
  reason = g_strdup_printf ("job %s (%s)", id, operation);
  hold->inhibit = vd_idle_inhibit (self->idle, reason);
  g_signal_connect (job, "finished", G_CALLBACK (job_finished_cb), hold);
  return g_steal_pointer (&job);
}

/* --- building -------------------------------------------------------- */

typedef struct {
  VdManager *manager;
  VdJob     *job;
} BuildData;

static void
build_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree BuildData *data = user_data;
  VdManager *self = data->manager;
  VdImageBuild *build = VD_IMAGE_BUILD (source);
  g_autoptr(VdJob) job = data->job;
  g_autofree gchar *name = g_strdup (vd_image_build_get_name (build));
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  g_autoptr(GError) error = NULL;

  dir = vd_image_build_run_finish (build, res, &error);
  if (dir != NULL)
    image = vd_image_load (dir, &error);
  if (image != NULL && add_image (self, image, TRUE, &error))
    vd_job_succeed (job, vd_image_get_object_path (image));
  else
    vd_job_fail (job, error);
  g_hash_table_remove (self->pending, name);
}

static gboolean
check_recipe (VdManager *self, const gchar *recipe, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vivarium_name_validate ("recipe", recipe, error))
    return FALSE;
  path = vd_image_build_recipe_path (self->config, recipe);
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no recipe named “%s”", recipe);
    return FALSE;
  }
  return TRUE;
}

static gboolean
handle_build_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *recipe,
                    const gchar *name, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdJob) job = NULL;
  g_autoptr(VdImageBuild) build = NULL;
  BuildData *data;
  GError *error = NULL;

  if (!check_recipe (self, recipe, &error) || !check_new_image_name (self, name, &error) ||
      (job = new_job (self, "build-image", TRUE, &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  build = vd_image_build_new (self->config, self->systemd, job, recipe, name);
  data = g_new0 (BuildData, 1);
  data->manager = self;
  data->job = g_object_ref (job);
  g_hash_table_add (self->pending, g_strdup (name));
  vd_log_image (G_LOG_LEVEL_INFO, name, "building image %s from recipe %s (job %s)", name, recipe, vd_job_get_id (job));
  vd_image_build_run_async (build, build_done_cb, data);
  vivarium_dbus_manager_complete_build_image (iface, invocation, vd_job_get_object_path (job));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- importing ------------------------------------------------------- */

typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
  guint                  inhibit;
} ImportData;

static void
import_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree ImportData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  VdImageImport *import = VD_IMAGE_IMPORT (source);
  VdManager *self = data->manager;
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  GError *error = NULL;

  g_hash_table_remove (self->pending, vd_image_import_get_name (import));
  vd_idle_uninhibit (self->idle, data->inhibit);
  dir = vd_image_import_run_finish (import, res, &error);
  if (dir == NULL || (image = vd_image_load (dir, &error)) == NULL || !add_image (self, image, TRUE, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, vd_image_get_name (image), "imported image %s", vd_image_get_name (image));
  vivarium_dbus_manager_complete_import_image (self->skeleton, invocation, vd_image_get_object_path (image));
}

static gboolean
handle_import_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation,
                     const gchar *name, GVariant *handle, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdImageImport) import = NULL;
  ImportData *data;
  GError *error = NULL;
  gint fd;

  if (!check_new_image_name (self, name, &error) || (fd = vd_image_import_take_fd (invocation, handle, &error)) < 0) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  import = vd_image_import_new (self->config, name, fd);
  data = g_new0 (ImportData, 1);
  data->manager = self;
  data->invocation = g_object_ref (invocation);
  data->inhibit = vd_idle_inhibit (self->idle, "an image import");
  g_hash_table_add (self->pending, g_strdup (name));
  vd_image_import_run_async (import, import_done_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}
/* --- sessions -------------------------------------------------------- */

static gboolean
parse_uint_option (GVariantDict *dict, const gchar *key, guint min, guint max, guint *value, GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, key, NULL);

  if (v == NULL)
    return TRUE;
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” must be an unsigned 32-bit number (type u)", key);
    return FALSE;
  }
  *value = g_variant_get_uint32 (v);
  if (*value < min || *value > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” is %u; it must be between %u and %u", key, *value, min, max);
    return FALSE;
  }
  return TRUE;
}

static gboolean
parse_session_options (VdManager *self, const gchar *project, GVariant *options, VdSessionOptions *out,
                       VdEgressOptions *egress, GError **error)
{
  VdProject *p = project[0] != '\0' ? vd_project_store_lookup (self->projects, project, NULL) : NULL;
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  const gchar *known[] = { "memory", "cpus", "timeout", "egress", "egress_groups", "egress_allow", "secrets",
                           "ssh_keys", NULL };
  GVariantIter iter;
  const gchar *key;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL)) {
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown session option “%s” (known: memory, cpus, timeout, egress, egress_groups, egress_allow, "
                   "secrets, ssh_keys)", key);
      return FALSE;
    }
  }
  out->memory_mib = vd_config_get_default_memory_mib (self->config);
  out->cpus = vd_config_get_default_cpus (self->config);
  out->timeout_sec = 0;
  out->guard_layer1 = TRUE;
  out->guard_layer2 = TRUE;
  if (!parse_uint_option (dict, "memory", VIVARIUM_MEMORY_MIN_MIB, VIVARIUM_MEMORY_MAX_MIB, &out->memory_mib, error) ||
      !parse_uint_option (dict, "cpus", 1, VIVARIUM_CPUS_MAX, &out->cpus, error) ||
      !parse_uint_option (dict, "timeout", 0, VIVARIUM_TIMEOUT_MAX_SEC, &out->timeout_sec, error) ||
      !vd_egress_options_parse (self->config, p, dict, VD_EGRESS_FOR_SESSION, egress, error) ||
      !vd_egress_options_parse_secrets (self->config, self->secrets, p, dict, egress, error) ||
      !vd_ssh_key_store_parse_option (self->config, dict, egress->mode, &egress->ssh_keys, error))
    return FALSE;
  out->secrets = egress->secrets;
  out->ssh_keys = egress->ssh_keys;
  out->egress_mode = egress->mode;
  out->egress_groups = (const gchar * const *) egress->groups;
  out->egress_allow = (const gchar * const *) egress->allow;
  return TRUE;
}

static VdImage *
lookup_bootable_image (VdManager *self, const gchar *name, GError **error)
{
  VdImage *image;

  if (!vivarium_name_validate ("image", name, error))
    return NULL;
  image = g_hash_table_lookup (self->images, name);
  if (image == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no image named “%s”", name);
    return NULL;
  }
  if (!vd_image_is_frozen (image)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FROZEN,
                 "The image “%s” is not frozen; freeze it before starting sessions from it", name);
    return NULL;
  }
  return image;
}

static gboolean
check_project (VdManager *self, const gchar *project, GError **error)
{
  if (project[0] == '\0')
    return TRUE;
  return vd_project_store_lookup (self->projects, project, error) != NULL;
}

/* A session's hold on its project: the tree is its uid's while it runs,
 * root's again (and the project free) once it has ended. */
typedef struct {
  VdManager *manager;
  gchar     *project;
} ProjectHold;

static void
project_hold_free (gpointer data, GClosure *closure)
{
  ProjectHold *hold = data;

  g_free (hold->project);
  g_free (hold);
}

/* The tree goes back to root in a thread (a long walk for a big tree), and
 * only then is the project free for the next holder. */
typedef struct {
  VdManager *manager;
  gchar     *project;
} GiveBack;

static void
given_back_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GiveBack *gb = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error))
    g_warning ("project %s: cannot take the tree back: %s", gb->project, error->message);
  if (gb->manager->projects != NULL)
    vd_project_store_release (gb->manager->projects, gb->project);
  g_object_unref (gb->manager);
  g_free (gb->project);
  g_free (gb);
}

static void
give_back_project (VdManager *self, const gchar *name)
{
  VdProject *project = self->projects != NULL ? vd_project_store_lookup (self->projects, name, NULL) : NULL;
  GiveBack *gb;

  if (project == NULL) {
    if (self->projects != NULL)
      vd_project_store_release (self->projects, name);
    return;
  }
  gb = g_new0 (GiveBack, 1);
  gb->manager = g_object_ref (self);
  gb->project = g_strdup (name);
  vd_project_revoke_async (project, given_back_cb, gb);
}

static void
session_ended_release_cb (VdSession *session, gpointer user_data)
{
  ProjectHold *hold = user_data;

  if (hold->manager->projects != NULL)
    give_back_project (hold->manager, hold->project);
  g_signal_handlers_disconnect_by_data (session, hold);
}

/* Once the tree is the session's uid's: gives both back when it ends. */
static void
hold_project (VdManager *self, VdSession *session, const gchar *name)
{
  ProjectHold *hold = g_new0 (ProjectHold, 1);

  hold->manager = self;
  hold->project = g_strdup (name);
  g_signal_connect_data (session, "ended", G_CALLBACK (session_ended_release_cb), hold, project_hold_free, 0);
}

typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
} StartData;

static void
session_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree StartData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  VdSession *session = VD_SESSION (source);
  VdManager *self = data->manager;
  GError *error = NULL;

  if (!vd_session_pool_start_finish (self->pool, session, res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vivarium_dbus_manager_complete_start_session (self->skeleton, invocation, vd_session_get_object_path (session));
}

/* The project is held for @session: its tree becomes the session's uid's
 * (in a thread), then the session starts and StartSession returns. */
typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
  VdSession             *session;
  gchar                 *project;
} GrantData;

static void
session_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GrantData *g = user_data;
  GError *error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error)) {
    vd_session_stop_async (g->session, NULL, NULL);
    give_back_project (g->manager, g->project);
    g_dbus_method_invocation_take_error (g->invocation, error);
  } else {
    StartData *data = g_new0 (StartData, 1);
    hold_project (g->manager, g->session, g->project);
    data->manager = g->manager;
    data->invocation = g_object_ref (g->invocation);
    vd_session_start_async (g->session, NULL, session_started_cb, data);
  }
  g_object_unref (g->invocation);
  g_object_unref (g->session);
  g_free (g->project);
  g_free (g);
}

static void
grant_project (VdManager *self, GDBusMethodInvocation *invocation, VdSession *session, const gchar *name)
{
  GrantData *g = g_new0 (GrantData, 1);

  g->manager = self;
  g->invocation = g_object_ref (invocation);
  g->session = g_object_ref (session);
  g->project = g_strdup (name);
  vd_project_grant_async (vd_project_store_lookup (self->projects, name, NULL), vd_session_get_uid (session),
                          session_granted_cb, g);
}

static VivariumEgressPolicy *
policy_of_session (VdManager *self, const gchar *path, gchar **no_policy, GError **error)
{
  const gchar *slash = strrchr (path, '/');
  VdSession *session = vd_session_pool_lookup_running (self->pool, slash != NULL ? slash + 1 : path, error);
  VdEgress *egress;

  if (session == NULL)
    return NULL;
  egress = vd_session_get_egress (session);
  if (egress == NULL) {
    *no_policy = g_strdup_printf ("the session's egress mode is “%s”, it has no allowlist",
                                  vd_egress_mode_to_string (vd_session_get_options (session)->egress_mode));
    return NULL;
  }
  return vd_egress_get_policy (egress);
}

/* A dry run: what the proxy of a session, or of a new one, would decide. */
static gboolean
handle_check_egress (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *destination,
                     GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  g_autoptr(VivariumEgressPolicy) built = NULL;
  g_auto(VdEgressOptions) egress = { 0 };
  g_autofree gchar *reason = NULL;
  VivariumEgressPolicy *policy = NULL;
  const gchar *session = NULL;
  gboolean allowed = FALSE;
  GError *error = NULL;

  if (g_variant_dict_lookup (dict, "session", "&o", &session)) {
    policy = policy_of_session (self, session, &reason, &error);
  } else {
    g_variant_dict_insert (dict, "egress", "s", "allowlist");
    if (vd_egress_options_parse (self->config, NULL, dict, VD_EGRESS_FOR_SESSION, &egress, &error))
      policy = built = vd_egress_rules_build (self->config, (const gchar * const *) egress.groups,
                                              (const gchar * const *) egress.allow, &error);
  }
  if (reason != NULL) {
    vivarium_dbus_manager_complete_check_egress (iface, invocation, FALSE, reason);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (policy == NULL || !vd_egress_check (policy, destination, &allowed, &reason, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_check_egress (iface, invocation, allowed, reason);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_start_session (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *project,
                      const gchar *image_name, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdSessionOptions opts = { 0 };
  g_auto(VdEgressOptions) egress = { 0 };
  VdImage *image;
  g_autoptr(VdSession) session = NULL;
  const gchar *project_dir = NULL;
  StartData *data;
  GError *error = NULL;

  if (!parse_session_options (self, project, options, &opts, &egress, &error) || !check_project (self, project, &error) ||
      (image = lookup_bootable_image (self, image_name, &error)) == NULL ||
      !vd_guard_check_can_start (self->guard, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (vd_session_pool_count_active (self->pool) >= vd_config_get_max_sessions (self->config)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "%u sessions are running, the configured maximum",
                                           vd_config_get_max_sessions (self->config));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (project[0] != '\0') {
    VdProject *p = vd_project_store_lookup (self->projects, project, &error);
    project_dir = p != NULL ? vd_project_get_work_path (p) : NULL;
  }
  session = vd_session_pool_create (self->pool, image, &opts, 0, project[0] != '\0' ? project : NULL, project_dir,
                                    &error);
  if (session != NULL && project_dir != NULL) {
    g_autofree gchar *holder = g_strdup_printf ("session %s", vd_session_get_id (session));
    if (!vd_project_store_acquire (self->projects, project, holder, &error)) {
      vd_session_stop_async (session, NULL, NULL);
      g_clear_object (&session);
    } else {
      grant_project (self, invocation, session, project);
      return G_DBUS_METHOD_INVOCATION_HANDLED;
    }
  }
  if (session == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  data = g_new0 (StartData, 1);
  data->manager = self;
  data->invocation = g_object_ref (invocation);
  vd_session_start_async (session, NULL, session_started_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- Session.SaveAsImage ---------------------------------------------- */

typedef struct {
  VdManager *manager;
  VdJob     *job;
  gchar     *name;
} SaveJob;

static void
save_job_free (SaveJob *d)
{
  g_hash_table_remove (d->manager->pending, d->name);
  g_clear_object (&d->job);
  g_free (d->name);
  g_free (d);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (SaveJob, save_job_free)

/* A saved image that could not be frozen goes again: SaveAsImage makes a
 * frozen image or none. */
static void
drop_image (VdManager *self, VdImage *image)
{
  g_autofree gchar *path = g_strdup (vd_image_get_object_path (image));
  g_autoptr(GError) error = NULL;

  if (!vd_image_delete (image, &error))
    g_warning ("cannot remove the unfrozen saved image %s: %s", vd_image_get_name (image), error->message);
  vd_exported_remove (self->exported, path);
  g_hash_table_remove (self->images, vd_image_get_name (image));
  vivarium_dbus_manager_emit_image_removed (self->skeleton, path);
}

static void
saved_image_frozen_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(SaveJob) d = user_data;
  VdImage *image = VD_IMAGE (source);
  g_autoptr(GError) error = NULL;

  if (!freeze_image_finish (res, &error)) {
    vd_job_fail (d->job, error);
    drop_image (d->manager, image);
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, d->name, "saved a session as the image %s", d->name);
  vd_job_succeed (d->job, vd_image_get_object_path (image));
}

static void
session_saved_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(SaveJob) d = user_data;
  VdManager *self = d->manager;
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  g_autoptr(GError) error = NULL;

  dir = vd_session_save_as_image_finish (res, &error);
  if (dir != NULL)
    image = vd_image_load (dir, &error);
  if (image == NULL || !add_image (self, image, TRUE, &error)) {
    if (dir != NULL && image == NULL)
      vd_fs_rm_rf (dir, NULL);
    vd_job_fail (d->job, error);
    return;
  }
  vd_job_progress (d->job, 80, "Freezing the new image");
  freeze_image_async (self, image, saved_image_frozen_cb, g_steal_pointer (&d));
}

static gboolean
handle_session_save_as_image (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, const gchar *name,
                              gpointer user_data)
{
  VdSession *session = VD_SESSION (user_data);
  VdManager *self = g_object_get_data (G_OBJECT (session), "vd-manager");
  g_autoptr(VdJob) job = NULL;
  SaveJob *d;
  GError *error = NULL;
  VivariumSessionState state = vd_session_get_session_state (session);

  if (!check_new_image_name (self, name, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (state != VIVARIUM_SESSION_STATE_RUNNING && state != VIVARIUM_SESSION_STATE_PAUSED) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The session %s is %s, not running or paused",
                                           vd_session_get_id (session), vd_session_get_state (session));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  job = new_job (self, "save-session", FALSE, &error);
  if (job == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  d = g_new0 (SaveJob, 1);
  d->manager = self;
  d->job = g_object_ref (job);
  d->name = g_strdup (name);
  g_hash_table_add (self->pending, g_strdup (name));
  vd_log_session (G_LOG_LEVEL_INFO, vd_session_get_id (session), "saving session %s as the image %s (job %s)",
                  vd_session_get_id (session), name, vd_job_get_id (job));
  vd_session_save_as_image_async (session, self->config, job, name, session_saved_cb, d);
  vivarium_dbus_session_complete_save_as_image (iface, invocation, vd_job_get_object_path (job));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
session_added_cb (VdSessionPool *pool, VdSession *session, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  g_object_set_data (G_OBJECT (session), "vd-manager", self);
  g_signal_connect_object (vd_session_get_skeleton (session), "handle-save-as-image",
                           G_CALLBACK (handle_session_save_as_image), session, 0);

  vivarium_dbus_manager_emit_session_added (self->skeleton, vd_session_get_object_path (session));
}

static void
session_removed_cb (VdSessionPool *pool, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_session_removed (self->skeleton, path);
}

/* --- the isolation self-test ----------------------------------------- */

static gchar *
self_test_dir (VdManager *self)
{
  return vd_config_build_state_path (self->config, "selftest", NULL);
}

/* Oldest first by name: the names are UTC timestamps. */
static void
prune_history (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) results = g_ptr_array_new ();
  guint n;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.')
      g_ptr_array_add (results, names[i]);
  }
  g_ptr_array_sort (results, (GCompareFunc) g_strcmp0);
  n = results->len;
  for (guint i = 0; n > SELF_TEST_HISTORY && i < n - SELF_TEST_HISTORY; i++) {
    g_autofree gchar *path = g_build_filename (dir, *(gchar **) g_ptr_array_index (results, i), NULL);
    if (g_unlink (path) != 0)
      g_warning ("cannot remove old self-test result %s: %s", path, g_strerror (errno));
  }
}

/* g_file_set_contents() writes a temporary file and renames it over the
 * target: a reader never sees half a result. */
static gboolean
store_result (VdManager *self, const gchar *json, gint64 finished_at, GError **error)
{
  g_autofree gchar *dir = self_test_dir (self);
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc (finished_at / G_USEC_PER_SEC);
  g_autofree gchar *stamp = g_date_time_format (dt, "%Y%m%dT%H%M%S");
  g_autofree gchar *name = g_strdup_printf ("%s.%06" G_GINT64_FORMAT "Z.json", stamp, finished_at % G_USEC_PER_SEC);
  g_autofree gchar *path = g_build_filename (dir, name, NULL);

  if (g_mkdir_with_parents (dir, 0700) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "Cannot create %s: %s", dir, g_strerror (errno));
    return FALSE;
  }
  if (!g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    return FALSE;
  prune_history (dir);
  return TRUE;
}

static gboolean
parse_stored (const gchar *json, VivariumVerdict *verdict, gint64 *finished_at)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *root;

  if (!json_parser_load_from_data (parser, json, -1, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  root = json_node_get_object (json_parser_get_root (parser));
  if (!vivarium_verdict_from_string (json_object_get_string_member_with_default (root, "verdict", ""), verdict))
    *verdict = VIVARIUM_VERDICT_INCONCLUSIVE;
  *finished_at = json_object_get_int_member_with_default (root, "finished-at-usec", 0);
  return TRUE;
}

/* The newest stored result becomes LastResult/Verdict/LastRunAt, so a
 * restarted (or re-activated) daemon still shows the last run. */
static void
load_last_result (VdManager *self)
{
  g_autofree gchar *dir = self_test_dir (self);
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  const gchar *newest = NULL;
  g_autofree gchar *path = NULL;
  g_autofree gchar *json = NULL;
  VivariumVerdict verdict = VIVARIUM_VERDICT_NEVER_RUN;
  gint64 finished_at = 0;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.' && g_strcmp0 (names[i], newest) > 0)
      newest = names[i];
  }
  if (newest == NULL)
    return;
  path = g_build_filename (dir, newest, NULL);
  if (!g_file_get_contents (path, &json, NULL, &error) || !parse_stored (json, &verdict, &finished_at)) {
    g_warning ("cannot load the last self-test result %s: %s", path, error != NULL ? error->message : "not JSON");
    return;
  }
  vd_guard_set_self_test_result (self->guard, json, verdict, finished_at);
}

typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
  VdJob                 *job;
} SelfTestData;

static void
self_test_progress_cb (VdSelfTest *test, guint percent, const gchar *step, gpointer user_data)
{
  SelfTestData *data = user_data;
  VivariumDBusGuard *guard = VIVARIUM_DBUS_GUARD (vd_guard_get_skeleton (data->manager->guard));

  vivarium_dbus_guard_emit_self_test_progress (guard, percent, step);
  vd_job_set_progress (data->job, vd_progress_get_fraction (vd_self_test_get_progress (test)), step);
}

static void
self_test_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree SelfTestData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  g_autoptr(VdJob) job = data->job;
  VdManager *self = data->manager;
  VivariumDBusGuard *guard = VIVARIUM_DBUS_GUARD (vd_guard_get_skeleton (self->guard));
  VdSelfTest *test = VD_SELF_TEST (source);
  GError *error = NULL;
  g_autofree gchar *json = vd_self_test_run_finish (test, res, &error);
  g_autoptr(GError) store_error = NULL;
  VivariumVerdict verdict = vd_self_test_get_verdict (test);
  g_autofree gchar *verdict_line = NULL;

  g_signal_handlers_disconnect_by_data (test, data);
  g_clear_object (&self->self_test);
  if (json == NULL) {
    vd_job_append_log (job, error->message);
    vd_job_fail (job, error);
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  verdict_line = g_strdup_printf ("verdict: %s", vivarium_verdict_to_string (verdict));
  vd_job_append_log (job, verdict_line);
  vd_guard_set_self_test_result (self->guard, json, verdict, vd_self_test_get_finished_at (test));
  if (!store_result (self, json, vd_self_test_get_finished_at (test), &store_error))
    g_warning ("cannot store the self-test result: %s", store_error->message);
  vivarium_dbus_guard_emit_self_test_progress (guard, 100, vivarium_verdict_to_string (verdict));
  vd_job_succeed (job, NULL);
  vivarium_dbus_guard_complete_run_self_test (guard, invocation, json);
}

static gboolean
parse_self_test_options (VdManager *self, GVariant *options, const gchar **image, gboolean *negative,
                         const gchar **session, GError **error)
{
  const gchar *known[] = { "image", "negative-control", "session", NULL };
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  *image = "tiny";
  *negative = FALSE;
  *session = NULL;
  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_autoptr(GVariant) v = value;
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown self-test option “%s” (known: image, negative-control, session)", key);
      return FALSE;
    }
    if (g_str_equal (key, "image") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *image = g_variant_get_string (v, NULL);
    } else if (g_str_equal (key, "negative-control") && g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN)) {
      *negative = g_variant_get_boolean (v);
    } else if (g_str_equal (key, "session") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *session = g_variant_get_string (v, NULL);
    } else {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "The self-test option “%s” has the wrong type", key);
      return FALSE;
    }
  }
  if (*session != NULL && *negative) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A live session keeps both layers; it cannot be the negative control");
    return FALSE;
  }
  /* A run with neither layer is a guest with the host's networks open:
   * only an administrator can allow it, in the configuration file. */
  if (*negative && !vd_config_get_allow_negative_control (self->config)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED,
                 "The negative control needs [Guard] AllowNegativeControl=true in the configuration");
    return FALSE;
  }
  return vivarium_name_validate ("image", *image, error);
}

/* Everything a caller can get wrong is refused here, before the canary
 * network exists: options, the live session, the guard, the image. */
static gboolean
prepare_self_test (VdManager *self, GVariant *options, const gchar **image_name, VdImage **image,
                   VdSession **live, gboolean *negative, GError **error)
{
  const gchar *session_id = NULL;

  *image = NULL;
  *live = NULL;
  if (!parse_self_test_options (self, options, image_name, negative, &session_id, error))
    return FALSE;
  if (session_id != NULL && (*live = vd_session_pool_lookup_running (self->pool, session_id, error)) == NULL)
    return FALSE;
  if (!vd_guard_check_can_start (self->guard, error))
    return FALSE;
  return *live != NULL || (*image = lookup_bootable_image (self, *image_name, error)) != NULL;
}

static gboolean
handle_run_self_test (VivariumDBusGuard *iface, GDBusMethodInvocation *invocation, GVariant *options,
                      gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  const gchar *image_name = NULL;
  VdImage *image = NULL;
  VdSession *live = NULL;
  gboolean negative = FALSE;
  SelfTestData *data;
  VdJob *job;
  GError *error = NULL;

  if (self->self_test != NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "A self-test is already running");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!prepare_self_test (self, options, &image_name, &image, &live, &negative, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if ((job = new_job (self, "self-test", FALSE, &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_info ("self-test started (image %s%s, job %s)", image_name, negative ? ", with the negative control" : "",
          vd_job_get_id (job));
  vivarium_dbus_guard_set_job (VIVARIUM_DBUS_GUARD (iface), vd_job_get_object_path (job));
  self->self_test = vd_self_test_new (self->pool, self->guard, self->systemd, self->config, image_name, image, negative);
  if (live != NULL)
    vd_self_test_set_live_session (self->self_test, live);
  data = g_new0 (SelfTestData, 1);
  data->manager = self;
  data->invocation = g_object_ref (invocation);
  data->job = job;   /* the table holds one reference, this the other */
  g_signal_connect (self->self_test, "progress", G_CALLBACK (self_test_progress_cb), data);
  vd_self_test_run_async (self->self_test, self_test_done_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- start-up sweep -------------------------------------------------- */

static void
sweep_units (VdManager *self, const gchar *pattern)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) units = vd_systemd_list_units (self->systemd, pattern, &error);

  if (units == NULL) {
    g_info ("cannot list %s units (no systemd?): %s", pattern, error->message);
    return;
  }
  for (guint i = 0; units[i] != NULL; i++) {
    g_autoptr(GError) stop_error = NULL;
    g_warning ("sweep: stopping leftover unit %s", units[i]);
    if (!vd_systemd_stop_unit_sync (self->systemd, units[i], 30000, &stop_error))
      g_warning ("sweep: cannot stop %s: %s", units[i], stop_error->message);
    /* A worker unit that failed stays loaded until reset (vd-worker.c). */
    vd_systemd_reset_failed_unit (self->systemd, units[i]);
  }
}

static void
sweep_dir (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(GError) error = NULL;
    g_warning ("sweep: removing leftover %s", path);
    if (!vd_fs_rm_rf (path, &error))
      g_warning ("sweep: %s", error->message);
  }
}

/* A daemon that crashed, or was killed, leaves units (already stopped by
 * BindsTo= in the normal case), overlays and sockets behind. Nothing of a
 * previous instance can still be in use, so everything of it goes, except
 * the record of what happened: its Jobs stay (load_jobs() shows them). */
static void
sweep_leftovers (VdManager *self)
{
  g_autofree gchar *state_sessions = vd_config_build_state_path (self->config, "sessions", NULL);
  g_autofree gchar *staging = vd_config_build_state_path (self->config, "images", ".staging", NULL);
  g_autofree gchar *runtime_sessions = g_build_filename (vd_config_get_runtime_dir (self->config), "sessions", NULL);
  g_autofree gchar *runtime_workers = g_build_filename (vd_config_get_runtime_dir (self->config), "workers", NULL);
  g_autofree gchar *runtime_egress = g_build_filename (vd_config_get_runtime_dir (self->config), "egress", NULL);

  sweep_units (self, VIVARIUM_SESSION_UNIT_PREFIX "*.service");
  sweep_units (self, "vivarium-egress-*.service");
  sweep_units (self, "vivarium-build-*.service");
  sweep_units (self, "vivarium-worker-*.service");
  sweep_dir (state_sessions);
  sweep_dir (runtime_sessions);
  sweep_dir (runtime_workers);
  sweep_dir (runtime_egress);
  sweep_dir (staging);
  vd_canary_sweep (vd_config_get_runtime_dir (self->config));
  vd_dns_relay_sweep (vd_config_get_runtime_dir (self->config));
}

/* --- life cycle ------------------------------------------------------ */

/* Where the administrator keeps the bare repositories that file:// URLs
 * may name (vd-project-store.h): root's alone. */
static void
make_remotes_dir (VdManager *self)
{
  g_autofree gchar *dir = vd_config_build_state_path (self->config, "remotes", NULL);

  if (g_mkdir_with_parents (dir, 0700) != 0)
    g_warning ("cannot create %s: %s", dir, g_strerror (errno));
}

VdManager *
vd_manager_new (VdConfig *config, VdAuthority *authority, VdIdle *idle, GDBusConnection *connection)
{
  VdManager *self = g_object_new (VD_TYPE_MANAGER, NULL);

  self->config = g_object_ref (config);
  self->authority = g_object_ref (authority);
  self->idle = g_object_ref (idle);
  self->connection = g_object_ref (connection);
  self->exported = vd_exported_new (authority, connection);
  vd_exported_set_read_grant_sec (self->exported, vd_config_get_read_grant_sec (config));
  self->systemd = vd_systemd_new (connection);
  self->guard = vd_guard_new (config, self->systemd);
  self->dns_relay = vd_dns_relay_new (config);
  self->pool = vd_session_pool_new (config, self->systemd, self->guard, self->dns_relay, idle, connection,
                                    export_func, self);
  {
    g_autofree gchar *projects = vd_config_build_state_path (config, "projects", NULL);
    g_autofree gchar *keys = vd_config_build_state_path (config, "keys", NULL);
    g_autofree gchar *remotes = vd_config_build_state_path (config, "remotes", NULL);
    g_autofree gchar *reports = vd_config_build_state_path (config, "reports", NULL);
    self->projects = vd_project_store_new (projects, keys, remotes, export_func, self);
    vd_project_store_set_config (self->projects, self->config);
    self->reports = vd_report_store_new (reports, keys, VD_REPORT_STORE_MAX, export_func, self);
  }
  /* The authority judges workers by these before it asks polkit. */
  self->grants = vd_worker_grants_new (VIVARIUM_WORKER_UID_BASE, VIVARIUM_SESSION_UID_COUNT);
  vd_authority_set_worker_grants (authority, self->grants);
  self->runner = vd_task_runner_new (config, self->systemd, self->pool, self->guard, self->projects, self->reports,
                                     self->grants, idle, export_func, self);
  {
    g_autofree gchar *secrets = vd_config_build_state_path (config, "secrets", NULL);
    self->secrets = vd_secret_store_new (secrets);
    self->ssh_keys = vd_ssh_key_store_new (secrets);
    vd_task_runner_set_secret_store (self->runner, self->secrets);
    vd_project_store_set_secret_store (self->projects, self->secrets);
  }
  return self;
}

/* The daemon got a new connection after it lost the bus (NULL: it lost it
 * and has none yet). Only the boundary and the systemd client talk over
 * it; the tasks only let go of the calls that came over the old one. */
gboolean
vd_manager_set_connection (VdManager *self, GDBusConnection *connection, GError **error)
{
  g_set_object (&self->connection, connection);
  vd_systemd_set_connection (self->systemd, connection);
  vd_task_runner_set_connection (self->runner, connection);
  return vd_exported_set_connection (self->exported, connection, error);
}

static void
connect_handlers (VdManager *self)
{
  VivariumDBusManager *s = self->skeleton;

  g_signal_connect (s, "handle-list-sessions", G_CALLBACK (handle_list_sessions), self);
  g_signal_connect (s, "handle-list-images", G_CALLBACK (handle_list_images), self);
  g_signal_connect (s, "handle-list-projects", G_CALLBACK (handle_list_projects), self);
  g_signal_connect (s, "handle-create-project", G_CALLBACK (handle_create_project), self);
  g_signal_connect (self->projects, "project-added", G_CALLBACK (project_added_cb), self);
  g_signal_connect (self->projects, "project-removed", G_CALLBACK (project_removed_cb), self);
  g_signal_connect (self->reports, "report-removed", G_CALLBACK (object_removed_cb), self);
  g_signal_connect (self->runner, "task-removed", G_CALLBACK (object_removed_cb), self);
  g_signal_connect (s, "handle-list-reports", G_CALLBACK (handle_list_reports), self);
  g_signal_connect (self->reports, "report-added", G_CALLBACK (report_added_cb), self);
  g_signal_connect (s, "handle-list-tasks", G_CALLBACK (handle_list_tasks), self);
  g_signal_connect (s, "handle-submit-task", G_CALLBACK (handle_submit_task), self);
  g_signal_connect (self->runner, "task-added", G_CALLBACK (task_added_cb), self);
  g_signal_connect (s, "handle-list-recipes", G_CALLBACK (handle_list_recipes), self);
  g_signal_connect (s, "handle-build-image", G_CALLBACK (handle_build_image), self);
  g_signal_connect (s, "handle-import-image", G_CALLBACK (handle_import_image), self);
  g_signal_connect (s, "handle-start-session", G_CALLBACK (handle_start_session), self);
  g_signal_connect (s, "handle-check-egress", G_CALLBACK (handle_check_egress), self);
  vd_secret_store_connect (self->secrets, s);
  vd_ssh_key_store_connect (self->ssh_keys, s);
  g_signal_connect (vd_guard_get_skeleton (self->guard), "handle-run-self-test", G_CALLBACK (handle_run_self_test), self);
  g_signal_connect (self->pool, "session-added", G_CALLBACK (session_added_cb), self);
  g_signal_connect (self->pool, "session-removed", G_CALLBACK (session_removed_cb), self);
}

gboolean
vd_manager_start (VdManager *self, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!vd_systemd_subscribe (self->systemd, &local_error)) {
    g_info ("systemd is not reachable; sessions and builds will fail: %s", local_error->message);
    g_clear_error (&local_error);
  }
  sweep_leftovers (self);
  /* Before the guard: its deny list takes in the host's own addresses,
   * and the relay's end of the veth must be one of them. Without the
   * relay guests only lose DNS, so the daemon carries on. */
  if (!vd_dns_relay_start (self->dns_relay, &local_error)) {
    g_warning ("%s; guests may have no DNS", local_error->message);
    g_clear_error (&local_error);
  }
  vd_guard_start (self->guard);
  /* The gateway checks an endpoint's name against the same list. */
  if (!vd_gateway_write_host_deny (self->config, vd_guard_get_deny_list (self->guard), &local_error)) {
    g_message ("the model gateway will refuse an https endpoint: %s", local_error->message);
    g_clear_error (&local_error);
  }
  load_last_result (self);
  self->skeleton = vivarium_dbus_manager_skeleton_new ();
  vivarium_dbus_manager_set_version (self->skeleton, PACKAGE_VERSION);
  vivarium_dbus_manager_set_state (self->skeleton, "running");
  vivarium_dbus_manager_set_accelerator (self->skeleton, vd_config_use_kvm (self->config) ? "kvm" : "tcg");
  /* Without its key the daemon could sign nothing: tasks would end with
   * no report. It still serves sessions; SubmitTask refuses. */
  if (!vd_report_store_load (self->reports, &local_error)) {
    g_warning ("no report-signing key, reports are unavailable: %s", local_error->message);
    g_clear_error (&local_error);
  }
  {
    g_autofree gchar *public_key = vd_report_store_get_public_key (self->reports);
    vivarium_dbus_manager_set_public_key (self->skeleton, public_key);
    vivarium_dbus_manager_set_key_fingerprint (self->skeleton, vd_report_store_get_fingerprint (self->reports));
  }
  connect_handlers (self);
  if (!export_protected (self, G_DBUS_INTERFACE_SKELETON (self->skeleton), VIVARIUM_DBUS_PATH, error) ||
      !export_protected (self, vd_guard_get_skeleton (self->guard), VIVARIUM_DBUS_PATH, error))
    return FALSE;
  load_images (self);
  load_jobs (self);
  make_remotes_dir (self);
  vd_project_store_load (self->projects);
  vd_task_runner_recover (self->runner);
  return TRUE;
}

/* SIGTERM or idle exit: sessions are torn down here, synchronously, so
 * that the next instance finds nothing to sweep. */
void
vd_manager_shutdown (VdManager *self)
{
  if (self->skeleton != NULL)
    vivarium_dbus_manager_set_state (self->skeleton, "stopping");
  vd_task_runner_stop_all (self->runner);
  vd_session_pool_stop_all_sync (self->pool);
  vd_project_store_unmount_all (self->projects);
  vd_dns_relay_stop (self->dns_relay);
}
