/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSessionSave"

#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-command-log.h"
#include "vd-fs.h"
#include "vd-log.h"
#include "vd-session-save.h"

/* The parent's boot files a saved image shares: the guest's disk is the
 * session's own. */
static const gchar *parent_files[] = { "cmdline", "initrd.img", "vmlinuz", NULL };

typedef struct {
  VdSession *session;
  VdJob     *job;
  gchar     *name;
  gchar     *staging;
  gchar     *final_dir;
} SaveData;

static void
save_data_free (SaveData *d)
{
  g_clear_object (&d->session);
  g_clear_object (&d->job);
  g_free (d->name);
  g_free (d->staging);
  g_free (d->final_dir);
  g_free (d);
}

/* Nothing half-made stays behind: the staging directory goes on failure. */
static void
save_fail (GTask *task, GError *error)
{
  SaveData *d = g_task_get_task_data (task);
  g_autoptr(GError) rm_error = NULL;

  if (!vd_fs_rm_rf (d->staging, &rm_error))
    g_warning ("%s", rm_error->message);
  g_task_return_error (task, error);
  g_object_unref (task);
}

static gboolean
copy_parent_files (SaveData *d, GError **error)
{
  VdImage *parent = vd_session_get_image (d->session);

  for (guint i = 0; parent_files[i] != NULL; i++) {
    g_autofree gchar *from_path = vd_image_get_file (parent, parent_files[i]);
    g_autofree gchar *to_path = g_build_filename (d->staging, parent_files[i], NULL);
    g_autoptr(GFile) from = NULL;
    g_autoptr(GFile) to = NULL;

    if (from_path == NULL)
      continue;
    from = g_file_new_for_path (from_path);
    to = g_file_new_for_path (to_path);
    if (!g_file_copy (from, to, G_FILE_COPY_NOFOLLOW_SYMLINKS, NULL, NULL, NULL, error)) {
      g_prefix_error (error, "Cannot copy the parent's %s: ", parent_files[i]);
      vivarium_error_convert (error);
      return FALSE;
    }
  }
  return TRUE;
}

/* The command log as the daemon recorded it, every entry it still holds
 * (bounded by the log's own caps), with the counts of what it held. */
static JsonArray *
collect_commands (VdCommandLog *log)
{
  JsonArray *commands = json_array_new ();
  guint64 offset = 0;

  while (offset < vd_command_log_get_total (log)) {
    guint64 next = 0;
    g_autoptr(GVariant) page = vd_command_log_get_page (log, offset, VIVARIUM_LOG_PAGE_MAX, &next, NULL);
    GVariantIter iter;
    GVariant *entry;

    if (page == NULL || next <= offset)
      break;
    g_variant_iter_init (&iter, page);
    while ((entry = g_variant_iter_next_value (&iter)) != NULL) {
      json_array_add_element (commands, json_gvariant_serialize (entry));
      g_variant_unref (entry);
    }
    offset = next;
  }
  return commands;
}

static gboolean
write_lineage (SaveData *d, const gchar *memory_note, GError **error)
{
  VdImage *parent = vd_session_get_image (d->session);
  VdCommandLog *log = vd_session_get_command_log (d->session);
  g_autoptr(JsonObject) lineage = json_object_new ();
  g_autoptr(JsonObject) meta = json_object_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *lineage_path = g_build_filename (d->staging, "lineage.json", NULL);
  g_autofree gchar *meta_path = g_build_filename (d->staging, "image.json", NULL);
  g_autofree gchar *recipe = NULL;

  json_object_set_int_member (lineage, "schema", 1);
  json_object_set_string_member (lineage, "parent", vd_image_get_name (parent));
  json_object_set_string_member (lineage, "parent-digest", vd_image_get_digest (parent));
  json_object_set_string_member (lineage, "session", vd_session_get_id (d->session));
  json_object_set_int_member (lineage, "saved-at", g_get_real_time ());
  json_object_set_boolean_member (lineage, "memory", memory_note == NULL);
  if (memory_note != NULL)
    json_object_set_string_member (lineage, "memory-not-saved", memory_note);
  json_object_set_int_member (lineage, "commands-total", (gint64) vd_command_log_get_total (log));
  json_object_set_int_member (lineage, "commands-dropped", (gint64) vd_command_log_get_dropped (log));
  json_object_set_array_member (lineage, "commands", collect_commands (log));
  node = json_node_init_object (json_node_alloc (), lineage);
  text = json_to_string (node, TRUE);
  if (!vd_fs_write_durably (lineage_path, text, 0644, error))
    return FALSE;

  recipe = g_strdup_printf ("session %s of %s", vd_session_get_id (d->session), vd_image_get_name (parent));
  json_object_set_string_member (meta, "recipe", recipe);
  json_object_set_int_member (meta, "created-at", g_get_real_time ());
  g_clear_pointer (&node, json_node_unref);
  g_clear_pointer (&text, g_free);
  node = json_node_init_object (json_node_alloc (), meta);
  text = json_to_string (node, TRUE);
  return vd_fs_write_durably (meta_path, text, 0644, error);
}

/* The daemon runs with UMask=0077, but the freeze's scratch boot runs QEMU
 * as a session uid that must read the new image's files: world-readable
 * like a built image's, until the freeze seals them 0444. The staging
 * directory's parent is root's alone (0700), so nobody else gets there. */
static gboolean
open_up_files (const gchar *dir, GError **error)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);

    if (g_chmod (path, 0644) != 0)
      return vd_fs_set_error_errno (error, errno, "Cannot make %s readable", path);
  }
  return TRUE;
}

static void
disk_saved_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  SaveData *d = g_task_get_task_data (task);
  g_autofree gchar *memory_note = NULL;
  g_autofree gchar *images = NULL;
  GError *error = NULL;

  if (!vd_session_save_disk_finish (d->session, res, &memory_note, &error)) {
    save_fail (task, error);
    return;
  }
  vd_job_progress (d->job, 70, memory_note == NULL ? "Saved the disk and the memory" : "Saved the disk");
  if (memory_note != NULL) {
    g_autofree gchar *line = g_strdup_printf ("The memory was not saved: %s", memory_note);
    vd_job_append_log (d->job, line);
  }
  if (!write_lineage (d, memory_note, &error) || !open_up_files (d->staging, &error)) {
    save_fail (task, error);
    return;
  }
  images = g_path_get_dirname (d->final_dir);
  if (g_rename (d->staging, d->final_dir) != 0) {
    vd_fs_set_error_errno (&error, errno, "Cannot move the new image into %s", d->final_dir);
    save_fail (task, error);
    return;
  }
  if (!vd_fs_fsync_dir (images, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  g_task_return_pointer (task, g_strdup (d->final_dir), g_free);
  g_object_unref (task);
}

void
vd_session_save_as_image_async (VdSession *session, VdConfig *config, VdJob *job, const gchar *name,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, vd_job_get_cancellable (job), callback, user_data);
  SaveData *d = g_new0 (SaveData, 1);
  g_autofree gchar *staging_parent = vd_config_build_state_path (config, "images", ".staging", NULL);
  g_autofree gchar *leaf = g_strdup_printf ("save-%s", vd_job_get_id (job));
  GError *error = NULL;

  g_task_set_task_data (task, d, (GDestroyNotify) save_data_free);
  d->session = g_object_ref (session);
  d->job = g_object_ref (job);
  d->name = g_strdup (name);
  d->staging = g_build_filename (staging_parent, leaf, NULL);
  d->final_dir = vd_config_build_state_path (config, "images", name, NULL);
  if (!vd_fs_mkdir (staging_parent, 0700, 0, 0, &error) || !vd_fs_mkdir (d->staging, 0755, 0, 0, &error) ||
      !copy_parent_files (d, &error)) {
    save_fail (task, error);
    return;
  }
  vd_job_progress (d->job, 10, "Copying the session's disk");
  vd_session_save_disk_async (session, d->staging, d->final_dir, NULL, disk_saved_cb, task);
}

gchar *
vd_session_save_as_image_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* --- Session.SaveAsImage ------------------------------------------------ */

typedef struct {
  VdSession    *session;   /* unowned, like the session's own handlers */
  VdConfig     *config;
  VdImageStore *images;
  VdJobStore   *jobs;
} Saver;

typedef struct {
  VdImageStore *images;
  VdJob        *job;
  gchar        *name;
} SaveJob;

static void
save_job_free (SaveJob *d)
{
  vd_image_store_release (d->images, d->name);
  g_clear_object (&d->images);
  g_clear_object (&d->job);
  g_free (d->name);
  g_free (d);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (SaveJob, save_job_free)

static void
saved_image_frozen_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(SaveJob) d = user_data;
  VdImage *image = VD_IMAGE (source);
  g_autoptr(GError) error = NULL;

  if (!vd_image_freeze_finish (image, res, &error)) {
    vd_job_fail (d->job, error);
    vd_image_store_drop (d->images, image);
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, d->name, "saved a session as the image %s", d->name);
  vd_job_succeed (d->job, vd_image_get_object_path (image));
}

static void
session_saved_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(SaveJob) d = user_data;
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  g_autoptr(GError) error = NULL;

  dir = vd_session_save_as_image_finish (res, &error);
  if (dir != NULL)
    image = vd_image_load (dir, &error);
  if (image == NULL || !vd_image_store_add (d->images, image, &error)) {
    if (dir != NULL && image == NULL)
      vd_fs_rm_rf (dir, NULL);
    vd_job_fail (d->job, error);
    return;
  }
  vd_job_progress (d->job, 80, "Freezing the new image");
  vd_image_freeze_async (image, saved_image_frozen_cb, g_steal_pointer (&d));
}

static gboolean
handle_save_as_image (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, const gchar *name,
                      gpointer user_data)
{
  Saver *saver = user_data;
  VdSession *session = saver->session;
  VivariumSessionState state = vd_session_get_session_state (session);
  g_autoptr(VdJob) job = NULL;
  SaveJob *d;
  GError *error = NULL;

  if (!vd_image_store_check_new_name (saver->images, name, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (state != VIVARIUM_SESSION_STATE_RUNNING && state != VIVARIUM_SESSION_STATE_PAUSED) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The session %s is %s, not running or paused",
                                           vd_session_get_id (session), vd_session_get_state (session));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  job = vd_job_store_new_job (saver->jobs, "save-session", FALSE, &error);
  if (job == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  d = g_new0 (SaveJob, 1);
  d->images = g_object_ref (saver->images);
  d->job = g_object_ref (job);
  d->name = g_strdup (name);
  vd_image_store_reserve (saver->images, name);
  vd_log_session (G_LOG_LEVEL_INFO, vd_session_get_id (session), "saving session %s as the image %s (job %s)",
                  vd_session_get_id (session), name, vd_job_get_id (job));
  vd_session_save_as_image_async (session, saver->config, job, name, session_saved_cb, d);
  vivarium_dbus_session_complete_save_as_image (iface, invocation, vd_job_get_object_path (job));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
saver_free (gpointer data, GClosure *closure)
{
  g_free (data);
}

void
vd_session_save_connect (VdSession *session, VdConfig *config, VdImageStore *images, VdJobStore *jobs)
{
  Saver *saver = g_new0 (Saver, 1);
  GClosure *closure = g_cclosure_new (G_CALLBACK (handle_save_as_image), saver, saver_free);

  saver->session = session;
  saver->config = config;
  saver->images = images;
  saver->jobs = jobs;
  /* Gone with the session (as g_signal_connect_object() would): its
   * skeleton may be held a little longer by the bus. */
  g_object_watch_closure (G_OBJECT (session), closure);
  g_signal_connect_closure (vd_session_get_skeleton (session), "handle-save-as-image", closure, FALSE);
}
