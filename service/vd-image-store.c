/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdImageStore"

#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-image-build.h"
#include "vd-image-import.h"
#include "vd-image-store.h"
#include "vd-log.h"

struct _VdImageStore {
  GObject        parent_instance;
  VdConfig      *config;
  VdSystemd     *systemd;
  VdSessionPool *pool;       /* takes Freeze's boot snapshots */
  VdJobStore    *jobs;
  VdExportFunc   export_func;
  gpointer       export_data;
  gchar         *dir;        /* STATE/images */
  GHashTable    *images;     /* name → VdImage */
  GHashTable    *pending;    /* names of images being built, imported or saved */
};

G_DEFINE_TYPE (VdImageStore, vd_image_store, G_TYPE_OBJECT)

enum { SIGNAL_IMAGE_ADDED, SIGNAL_IMAGE_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_image_store_dispose (GObject *object)
{
  VdImageStore *self = VD_IMAGE_STORE (object);
  GHashTableIter iter;
  gpointer value;

  /* Sessions may keep an image past the store: it must not call back. */
  g_hash_table_iter_init (&iter, self->images);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    g_signal_handlers_disconnect_by_data (value, self);
    vd_image_set_snapshotter (value, NULL, NULL, NULL);
  }
  g_hash_table_remove_all (self->images);
  G_OBJECT_CLASS (vd_image_store_parent_class)->dispose (object);
}

static void
vd_image_store_finalize (GObject *object)
{
  VdImageStore *self = VD_IMAGE_STORE (object);

  g_hash_table_unref (self->images);
  g_hash_table_unref (self->pending);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_object (&self->pool);
  g_clear_object (&self->jobs);
  g_free (self->dir);
  G_OBJECT_CLASS (vd_image_store_parent_class)->finalize (object);
}

static void
vd_image_store_class_init (VdImageStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = vd_image_store_dispose;
  G_OBJECT_CLASS (klass)->finalize = vd_image_store_finalize;
  signals[SIGNAL_IMAGE_ADDED] = g_signal_new ("image-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                              NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_IMAGE_REMOVED] = g_signal_new ("image-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_image_store_init (VdImageStore *self)
{
  self->images = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

VdImageStore *
vd_image_store_new (VdConfig *config, VdSystemd *systemd, VdSessionPool *pool, VdJobStore *jobs,
                    VdExportFunc export_func, gpointer export_data)
{
  VdImageStore *self = g_object_new (VD_TYPE_IMAGE_STORE, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->pool = g_object_ref (pool);
  self->jobs = g_object_ref (jobs);
  self->export_func = export_func;
  self->export_data = export_data;
  self->dir = vd_config_build_state_path (config, "images", NULL);
  return self;
}

/* --- the list ---------------------------------------------------------- */

static void
take_snapshot (VdImage *image, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer callback_data,
               gpointer user_data)
{
  VdImageStore *self = VD_IMAGE_STORE (user_data);

  vd_session_pool_take_boot_snapshot_async (self->pool, image, cancellable, callback, callback_data);
}

static gboolean
take_snapshot_finish (GAsyncResult *result, GError **error, gpointer user_data)
{
  VdImageStore *self = VD_IMAGE_STORE (user_data);

  return vd_session_pool_take_boot_snapshot_finish (self->pool, result, error);
}

static void
forget (VdImageStore *self, VdImage *image)
{
  g_autofree gchar *path = g_strdup (vd_image_get_object_path (image));

  g_signal_handlers_disconnect_by_data (image, self);
  vd_image_set_snapshotter (image, NULL, NULL, NULL);
  g_hash_table_remove (self->images, vd_image_get_name (image));
  g_signal_emit (self, signals[SIGNAL_IMAGE_REMOVED], 0, path);
}

static void
image_deleted_cb (VdImage *image, gpointer user_data)
{
  forget (VD_IMAGE_STORE (user_data), image);
}

static gboolean
add_image (VdImageStore *self, VdImage *image, gboolean announce, GError **error)
{
  if (!self->export_func (vd_image_get_skeleton (image), vd_image_get_object_path (image), self->export_data, error))
    return FALSE;
  if (vd_config_get_boot_snapshots (self->config))
    vd_image_set_snapshotter (image, take_snapshot, take_snapshot_finish, self);
  g_signal_connect (image, "deleted", G_CALLBACK (image_deleted_cb), self);
  g_hash_table_insert (self->images, g_strdup (vd_image_get_name (image)), g_object_ref (image));
  if (announce)
    g_signal_emit (self, signals[SIGNAL_IMAGE_ADDED], 0, vd_image_get_object_path (image));
  return TRUE;
}

gboolean
vd_image_store_add (VdImageStore *self, VdImage *image, GError **error)
{
  return add_image (self, image, TRUE, error);
}

/* A saved image that could not be frozen goes again: SaveAsImage makes a
 * frozen image or none. */
void
vd_image_store_drop (VdImageStore *self, VdImage *image)
{
  g_autoptr(VdImage) held = g_object_ref (image);
  g_autoptr(GError) error = NULL;

  if (!vd_image_delete (held, &error))
    g_warning ("cannot remove the unfrozen saved image %s: %s", vd_image_get_name (held), error->message);
  forget (self, held);
}

void
vd_image_store_load (VdImageStore *self)
{
  g_auto(GStrv) names = vd_fs_list_dir (self->dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (self->dir, names[i], NULL);
    g_autoptr(VdImage) image = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.')
      continue;
    image = vd_image_load (path, &error);
    if (image == NULL || !add_image (self, image, FALSE, &error))
      g_warning ("skipping image %s: %s", path, error->message);
  }
}

const gchar **
vd_image_store_list_paths (VdImageStore *self)
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->images);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, (gpointer) vd_image_get_object_path (value));
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

VdImage *
vd_image_store_lookup_bootable (VdImageStore *self, const gchar *name, GError **error)
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

gboolean
vd_image_store_check_new_name (VdImageStore *self, const gchar *name, GError **error)
{
  g_autofree gchar *dir = NULL;

  if (!vivarium_name_validate ("image", name, error))
    return FALSE;
  dir = g_build_filename (self->dir, name, NULL);
  if (g_hash_table_contains (self->images, name) || g_hash_table_contains (self->pending, name) ||
      g_file_test (dir, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "An image named “%s” already exists", name);
    return FALSE;
  }
  return TRUE;
}

void
vd_image_store_reserve (VdImageStore *self, const gchar *name)
{
  g_hash_table_add (self->pending, g_strdup (name));
}

void
vd_image_store_release (VdImageStore *self, const gchar *name)
{
  g_hash_table_remove (self->pending, name);
}

/* --- building ------------------------------------------------------------ */

typedef struct {
  VdImageStore *store;
  VdJob        *job;
} BuildData;

static void
build_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree BuildData *data = user_data;
  g_autoptr(VdImageStore) self = data->store;
  g_autoptr(VdJob) job = data->job;
  VdImageBuild *build = VD_IMAGE_BUILD (source);
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
  vd_image_store_release (self, name);
}

static gboolean
check_recipe (VdImageStore *self, const gchar *recipe, GError **error)
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

VdJob *
vd_image_store_build (VdImageStore *self, const gchar *recipe, const gchar *name, GError **error)
{
  g_autoptr(VdJob) job = NULL;
  g_autoptr(VdImageBuild) build = NULL;
  BuildData *data;

  if (!check_recipe (self, recipe, error) || !vd_image_store_check_new_name (self, name, error) ||
      (job = vd_job_store_new_job (self->jobs, "build-image", TRUE, error)) == NULL)
    return NULL;
  build = vd_image_build_new (self->config, self->systemd, job, recipe, name);
  data = g_new0 (BuildData, 1);
  data->store = g_object_ref (self);
  data->job = g_object_ref (job);
  vd_image_store_reserve (self, name);
  vd_log_image (G_LOG_LEVEL_INFO, name, "building image %s from recipe %s (job %s)", name, recipe, vd_job_get_id (job));
  vd_image_build_run_async (build, build_done_cb, data);
  return g_steal_pointer (&job);
}

/* --- importing ----------------------------------------------------------- */

static void
import_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  VdImageStore *self = g_task_get_source_object (task);
  VdImageImport *import = VD_IMAGE_IMPORT (source);
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  GError *error = NULL;

  vd_image_store_release (self, vd_image_import_get_name (import));
  dir = vd_image_import_run_finish (import, res, &error);
  if (dir == NULL || (image = vd_image_load (dir, &error)) == NULL || !add_image (self, image, TRUE, &error)) {
    g_task_return_error (task, error);
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, vd_image_get_name (image), "imported image %s", vd_image_get_name (image));
  g_task_return_pointer (task, g_steal_pointer (&image), g_object_unref);
}

void
vd_image_store_import_async (VdImageStore *self, const gchar *name, gint fd, GAsyncReadyCallback callback,
                             gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);
  g_autoptr(VdImageImport) import = vd_image_import_new (self->config, name, fd);

  vd_image_store_reserve (self, name);
  vd_image_import_run_async (import, import_done_cb, task);
}

VdImage *
vd_image_store_import_finish (VdImageStore *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
