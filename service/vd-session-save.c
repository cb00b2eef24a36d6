/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSessionSave"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-command-log.h"
#include "vd-fs.h"
#include "vd-log.h"
#include "vd-qemu-command.h"
#include "vd-session.h"
#include "vd-session-private.h"
#include "vd-session-save.h"
#include "vd-session-snapshot.h"
#include "vd-unit-sandbox.h"

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

/* --- SaveAsImage: the disk, and the memory of a paused guest ---------- */

typedef struct {
  gchar      *dir;          /* where the new image's files go */
  gchar      *final_dir;    /* where they will be once it is an image */
  gboolean    was_running;  /* held still for the copy, let go after */
  gboolean    memory;       /* the memory is being saved too */
  gchar      *memory_note;  /* why not, when it is not */
  GError     *error;
} SaveDiskData;

static void
save_disk_data_free (SaveDiskData *d)
{
  g_free (d->dir);
  g_free (d->final_dir);
  g_free (d->memory_note);
  g_clear_error (&d->error);
  g_free (d);
}

static void
save_disk_end (GTask *task)
{
  SaveDiskData *d = g_task_get_task_data (task);

  if (d->error != NULL)
    g_task_return_error (task, g_steal_pointer (&d->error));
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
save_disk_resumed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  SaveDiskData *d = g_task_get_task_data (task);
  vd_session_helper_call_finish (VD_SESSION_HELPER (source), res, d->error == NULL ? &d->error : NULL);
  save_disk_end (task);
}

/* Whatever happened, a guest that was running runs again. */
static void
save_disk_let_go (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  SaveDiskData *d = g_task_get_task_data (task);

  if (!d->was_running || self->helper == NULL) {
    save_disk_end (task);
    return;
  }
  vd_session_helper_qmp_async (self->helper, "cont", NULL, QMP_TIMEOUT_MS, NULL, save_disk_resumed_cb, task);
}

static void
save_memory_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  SaveDiskData *d = g_task_get_task_data (task);
  g_autofree gchar *info_path = g_build_filename (d->dir, VD_BOOT_SNAPSHOT_INFO, NULL);
  g_autoptr(JsonObject) info = json_object_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree gchar *text = NULL;

  if (!vd_session_snapshot_save_finish (res, &d->error)) {
    save_disk_let_go (task);
    return;
  }
  json_object_set_int_member (info, "schema", 1);
  json_object_set_int_member (info, "memory-mib", self->options.memory_mib);
  json_object_set_int_member (info, "cpus", self->options.cpus);
  json_object_set_string_member (info, "device-set", VD_QEMU_COMMAND_DEVICE_SET);
  json_object_set_boolean_member (info, "kvm", self->kvm);
  json_object_set_string_member (info, "accelerator", vivarium_dbus_session_get_accelerator (self->skeleton));
  json_object_set_string_member (info, "session", self->id);
  json_object_set_int_member (info, "saved-at", g_get_real_time ());
  node = json_node_init_object (json_node_alloc (), info);
  text = json_to_string (node, TRUE);
  vd_fs_write_durably (info_path, text, 0644, &d->error);
  save_disk_let_go (task);
}

static void
boot_overlay_created_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  SaveDiskData *d = g_task_get_task_data (task);
  g_autofree gchar *state = g_build_filename (d->dir, VD_BOOT_SNAPSHOT_STATE, NULL);

  if (!g_subprocess_wait_check_finish (G_SUBPROCESS (source), res, &d->error)) {
    g_prefix_error (&d->error, "Cannot create the new image's boot.qcow2: ");
    save_disk_let_go (task);
    return;
  }
  vd_session_snapshot_save_state_async (self->helper, state, NULL, save_memory_done_cb, task);
}

/* The saved memory goes with an empty overlay over the new disk: the guest
 * saw exactly the disk that was just copied. */
static void
save_memory (GTask *task)
{
  SaveDiskData *d = g_task_get_task_data (task);
  g_autofree gchar *disk = g_build_filename (d->dir, "disk.qcow2", NULL);
  g_autofree gchar *final_disk = g_build_filename (d->final_dir, "disk.qcow2", NULL);
  g_autofree gchar *boot = g_build_filename (d->dir, VD_BOOT_SNAPSHOT_DISK, NULL);
  g_autoptr(JsonObject) info = vd_image_query_disk (disk, &d->error);
  g_autofree gchar *size = NULL;
  g_autoptr(GSubprocess) proc = NULL;

  if (info == NULL) {
    save_disk_let_go (task);
    return;
  }
  size = g_strdup_printf ("%" G_GINT64_FORMAT, json_object_get_int_member_with_default (info, "virtual-size", 0));
  /* -u: the backing file is named where it will be, not where it is now. */
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE, &d->error,
                           "qemu-img", "create", "-q", "-u", "-f", "qcow2", "-F", "qcow2", "-b", final_disk, boot, size, NULL);
  if (proc == NULL) {
    save_disk_let_go (task);
    return;
  }
  g_subprocess_wait_check_async (proc, NULL, boot_overlay_created_cb, task);
}

static void
disk_converted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  SaveDiskData *d = g_task_get_task_data (task);

  g_autofree gchar *disk = g_build_filename (d->dir, "disk.qcow2", NULL);

  if (!vd_systemd_start_transient_finish (VD_SYSTEMD (source), res, &d->error)) {
    g_prefix_error (&d->error, "Cannot copy the session's disk: ");
    vivarium_error_convert (&d->error);
    save_disk_let_go (task);
    return;
  }
  /* Root's again, as every file of an image (see open_output_for). */
  if (chown (disk, 0, 0) != 0 || chmod (disk, 0644) != 0) {
    vd_fs_set_error_errno (&d->error, errno, "Cannot take back %s", disk);
    save_disk_let_go (task);
    return;
  }
  if (d->memory) {
    save_memory (task);
    return;
  }
  save_disk_let_go (task);
}

/* The output, root's inside the root-only staging directory, lent to the
 * session uid through a descriptor only (qemu-img writes /dev/stdout). */
static int
open_output_for (VdSession *self, const gchar *path, GError **error)
{
  struct group *grp = getgrnam (VIVARIUM_QEMU_GROUP);
  int fd;

  if (grp == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The group %s does not exist", VIVARIUM_QEMU_GROUP);
    return -1;
  }
  fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return vd_fs_set_error_errno (error, errno, "Cannot create %s", path), -1;
  if (fchown (fd, self->uid, grp->gr_gid) != 0) {
    int errsv = errno;
    close (fd);
    return vd_fs_set_error_errno (error, errsv, "Cannot lend %s to the session", path), -1;
  }
  return fd;
}

static GVariant *
convert_unit_properties (VdSession *self, const gchar *qemu_img)
{
  g_autofree gchar *description = g_strdup_printf ("Vivarium: saving the disk of session %s", self->id);
  g_autofree gchar *user = g_strdup_printf ("%u", self->uid);
  const gchar *argv[] = { qemu_img, "convert", "-U", "-f", "qcow2", "-O", "qcow2", self->overlay, "/dev/stdout", NULL };
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string (description));
  /* The start job ends when qemu-img does. */
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("oneshot"));
  g_variant_builder_add (&b, "(sv)", "TimeoutStartUSec", g_variant_new_uint64 ((guint64) 3600 * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "Slice", g_variant_new_string (VIVARIUM_SLICE));
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (&b, "(sv)", "User", g_variant_new_string (user));
  g_variant_builder_add (&b, "(sv)", "Group", g_variant_new_string (VIVARIUM_QEMU_GROUP));
  g_variant_builder_add (&b, "(sv)", "ExecStart", g_variant_new_parsed ("[(%s, %^as, false)]", qemu_img, argv));
  g_variant_builder_add (&b, "(sv)", "StandardOutputFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "PrivateNetwork", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "PrivateTmp", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "NoNewPrivileges", g_variant_new_boolean (TRUE));
  return g_variant_builder_end (&b);
}

/* The overlay chain (session → boot.qcow2 → disk.qcow2) flattened into one
 * self-contained disk, as Freeze requires; -U because QEMU holds it.
 * qemu-img runs as the session's uid, in a unit of its own (systemd switches
 * the uid; the daemon has no CAP_SETUID): the overlay's header is QEMU's to
 * write, and a header naming another backing file or an external data file
 * (/etc/shadow, another session's disk, the keys) must get no further than
 * QEMU itself could; root would read anything it names into the image. */
static void
convert_disk (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  SaveDiskData *d = g_task_get_task_data (task);
  g_autofree gchar *disk = g_build_filename (d->dir, "disk.qcow2", NULL);
  g_autofree gchar *qemu_img = g_find_program_in_path ("qemu-img");
  g_autofree gchar *unit = g_strdup_printf ("vivarium-save-%s-%u.service", self->id, ++self->save_seq);
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  int fd;

  if (qemu_img == NULL) {
    g_set_error_literal (&d->error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "qemu-img is not installed");
    save_disk_let_go (task);
    return;
  }
  fd = open_output_for (self, disk, &d->error);
  if (fd < 0 || g_unix_fd_list_append (fds, fd, &d->error) < 0) {
    if (fd >= 0)
      close (fd);
    save_disk_let_go (task);
    return;
  }
  close (fd);
  vd_systemd_start_transient_async (self->systemd, unit, convert_unit_properties (self, qemu_img), fds, NULL,
                                    disk_converted_cb, task);
}

static void
save_disk_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  SaveDiskData *d = g_task_get_task_data (task);
  if (!vd_session_helper_call_finish (VD_SESSION_HELPER (source), res, &d->error)) {
    save_disk_end (task);
    return;
  }
  convert_disk (task);
}

static void
save_disk_synced_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) result = vd_session_helper_exec_finish (VD_SESSION_HELPER (source), res, NULL, &error);

  /* A guest that cannot sync still has a consistent disk as QEMU holds it
   * once stopped; it may only lose what it had not written yet. */
  if (result == NULL)
    vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s: sync before the save failed: %s", self->id, error->message);
  self->pause_requested = TRUE;
  vd_session_helper_qmp_async (self->helper, "stop", NULL, QMP_TIMEOUT_MS, NULL, save_disk_stopped_cb, task);
}

void
vd_session_save_disk_async (VdSession *self, const gchar *dir, const gchar *final_dir, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  SaveDiskData *d = g_new0 (SaveDiskData, 1);
  const gchar *sync_argv[] = { "sync", NULL };

  g_task_set_task_data (task, d, (GDestroyNotify) save_disk_data_free);
  d->dir = g_strdup (dir);
  d->final_dir = g_strdup (final_dir);
  if ((self->state != VIVARIUM_SESSION_STATE_RUNNING && self->state != VIVARIUM_SESSION_STATE_PAUSED) ||
      self->helper == NULL || !vd_session_helper_has_agent (self->helper)) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                             "The session %s is %s, not running or paused", self->id, vd_session_get_state (self));
    g_object_unref (task);
    return;
  }
  d->was_running = self->state == VIVARIUM_SESSION_STATE_RUNNING;
  /* QEMU saves memory only into the device set a boot snapshot has, and
   * not while a 9p share is mounted. */
  if (d->was_running)
    d->memory_note = g_strdup ("the session was running, not paused");
  else if (self->project_dir != NULL)
    d->memory_note = g_strdup ("the project share is mounted in the guest");
  else if (!self->restored)
    d->memory_note = g_strdup ("the session booted cold, without the boot snapshot's device set");
  d->memory = d->memory_note == NULL;
  if (!d->was_running) {
    convert_disk (task);
    return;
  }
  vd_session_helper_exec_async (self->helper, sync_argv, NULL, NULL, 30000, 4096, NULL, save_disk_synced_cb, task);
}

/* @memory_note: (out) why the memory was not saved, or NULL when it was */
gboolean
vd_session_save_disk_finish (VdSession *self, GAsyncResult *result, gchar **memory_note, GError **error)
{
  SaveDiskData *d = g_task_get_task_data (G_TASK (result));

  if (!g_task_propagate_boolean (G_TASK (result), error))
    return FALSE;
  if (memory_note != NULL)
    *memory_note = g_strdup (d->memory_note);
  return TRUE;
}
