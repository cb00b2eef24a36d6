/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdJobStore"

#include "config.h"

#include <string.h>

#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-job-store.h"

/* Finished jobs stay on disk and on the bus, the newest this many: a
 * restarted daemon shows them again, and memory stays bounded (each log is
 * capped at 1 MiB). */
#define JOB_HISTORY 20

struct _VdJobStore {
  GObject       parent_instance;
  VdIdle       *idle;
  gchar        *dir;
  VdExportFunc  export_func;
  gpointer      export_data;
  GHashTable   *jobs;   /* id → VdJob */
};

G_DEFINE_TYPE (VdJobStore, vd_job_store, G_TYPE_OBJECT)

static void
vd_job_store_finalize (GObject *object)
{
  VdJobStore *self = VD_JOB_STORE (object);

  g_hash_table_unref (self->jobs);
  g_clear_object (&self->idle);
  g_free (self->dir);
  G_OBJECT_CLASS (vd_job_store_parent_class)->finalize (object);
}

static void
vd_job_store_class_init (VdJobStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_job_store_finalize;
}

static void
vd_job_store_init (VdJobStore *self)
{
  self->jobs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
}

VdJobStore *
vd_job_store_new (VdConfig *config, VdIdle *idle, VdExportFunc export_func, gpointer export_data)
{
  VdJobStore *self = g_object_new (VD_TYPE_JOB_STORE, NULL);

  self->idle = g_object_ref (idle);
  self->dir = vd_config_build_state_path (config, "jobs", NULL);
  self->export_func = export_func;
  self->export_data = export_data;
  return self;
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
prune_jobs (VdJobStore *self)
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
add_job (VdJobStore *self, VdJob *job, GError **error)
{
  if (!self->export_func (vd_job_get_skeleton (job), vd_job_get_object_path (job), self->export_data, error))
    return FALSE;
  g_hash_table_insert (self->jobs, g_strdup (vd_job_get_id (job)), g_object_ref (job));
  return TRUE;
}

void
vd_job_store_load (VdJobStore *self)
{
  g_auto(GStrv) names = vd_fs_list_dir (self->dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *id = NULL;
    g_autoptr(VdJob) job = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.' || !g_str_has_suffix (names[i], ".json"))
      continue;
    id = g_strndup (names[i], strlen (names[i]) - strlen (".json"));
    if (!vivarium_name_validate ("job", id, &error) || (job = vd_job_load (self->dir, id, &error)) == NULL ||
        !add_job (self, job, &error))
      g_warning ("skipping job record %s: %s", names[i], error->message);
  }
  prune_jobs (self);
}

typedef struct {
  VdJobStore *store;   /* unowned: the store outlives its jobs' runs */
  guint       inhibit;
} JobHold;

static void
job_finished_cb (VdJob *job, gpointer user_data)
{
  g_autofree JobHold *hold = user_data;

  g_signal_handlers_disconnect_by_data (job, hold);
  vd_idle_uninhibit (hold->store->idle, hold->inhibit);
  prune_jobs (hold->store);
}

/* Authorized and exported before anyone learns its path; it keeps the
 * daemon on the bus until it finishes. */
VdJob *
vd_job_store_new_job (VdJobStore *self, const gchar *operation, gboolean cancelable, GError **error)
{
  g_autofree gchar *id = vd_job_new_id ();
  g_autofree gchar *reason = NULL;
  g_autoptr(VdJob) job = NULL;
  JobHold *hold;

  while (g_hash_table_contains (self->jobs, id)) {
    g_free (id);
    id = vd_job_new_id ();
  }
  job = vd_job_new (operation, id, self->dir, cancelable);
  if (!add_job (self, job, error)) {
    vd_job_delete_files (job, NULL);
    return NULL;
  }
  hold = g_new0 (JobHold, 1);
  hold->store = self;
  reason = g_strdup_printf ("job %s (%s)", id, operation);
  hold->inhibit = vd_idle_inhibit (self->idle, reason);
  g_signal_connect (job, "finished", G_CALLBACK (job_finished_cb), hold);
  return g_steal_pointer (&job);
}
