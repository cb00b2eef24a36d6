/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSessionSnapshot"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-session-snapshot.h"

#define QMP_TIMEOUT_MS        10000
#define AGENT_TIMEOUT_MS      30000
/* A 512 MiB guest saves ~95 MiB in under a second here; a minute is far
 * past any sane save or load, short of a daemon waiting for ever. */
#define MIGRATE_TIMEOUT_US    (60 * G_USEC_PER_SEC)
#define MIGRATE_POLL_MS       10
/* The guest clock must agree with the host's this closely after the set. */
#define CLOCK_SLACK_NS        (2 * G_GINT64_CONSTANT (1000000000))
#define FD_NAME               "vd-boot-state"
/* QEMU's default is 32 MiB/s, which would make a save take seconds for no
 * reason: the destination is a local file. */
#define SAVE_BANDWIDTH        (G_GINT64_CONSTANT (100) * 1024 * 1024 * 1024)

typedef struct {
  VdSessionHelper *helper;
  gchar         *overlay;
  gchar         *image_dir;
  gchar         *state_path;
  JsonObject    *info;
  int            fd;
  gint64         deadline;
  gint64         started;
  gboolean       mount_project;
  gboolean       machine_id;     /* the image has /etc/machine-id to renew */
  gchar         *resolver;       /* the guest's nameserver to be, or NULL */
  guint          reseed_pending; /* branches of the reseed still running */
  GError        *reseed_error;   /* the first branch's failure */
  gint64         time_asked_ns;  /* the host clock when the guest's was asked for */
} Op;

static void
op_free (Op *op)
{
  g_clear_object (&op->helper);
  g_free (op->resolver);
  g_clear_pointer (&op->info, json_object_unref);
  g_clear_error (&op->reseed_error);
  if (op->fd >= 0)
    close (op->fd);
  g_free (op->overlay);
  g_free (op->image_dir);
  g_free (op->state_path);
  g_free (op);
}

static GTask *
op_task_new (gpointer tag, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data, Op **out)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  Op *op = g_new0 (Op, 1);

  op->fd = -1;
  op->started = g_get_monotonic_time ();
  g_task_set_source_tag (task, tag);
  g_task_set_task_data (task, op, (GDestroyNotify) op_free);
  *out = op;
  return task;
}

static void
fail (GTask *task, GError *error, const gchar *step)
{
  g_prefix_error (&error, "%s: ", step);
  g_task_return_error (task, error);
  g_object_unref (task);
}

static void
fail_literal (GTask *task, const gchar *message)
{
  g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s", message);
  g_object_unref (task);
}

/* @args: a{sv} or NULL */
static void
qmp (GTask *task, const gchar *command, GVariant *args, GAsyncReadyCallback cb)
{
  Op *op = g_task_get_task_data (task);

  vd_session_helper_qmp_async (op->helper, command, args, QMP_TIMEOUT_MS, g_task_get_cancellable (task), cb, task);
}

static gboolean
qmp_done (GTask *task, GAsyncResult *res, const gchar *step)
{
  Op *op = g_task_get_task_data (task);
  GError *error = NULL;

  if (!vd_session_helper_call_finish (op->helper, res, &error)) {
    fail (task, error, step);
    return FALSE;
  }
  return TRUE;
}

static GVariant *
one_argument (const gchar *name, GVariant *value)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", name, value);
  return g_variant_builder_end (&b);
}

/* --- waiting for a migration ----------------------------------------- */

/* Both sides: "completed" ends the wait, "failed" or "cancelled" fails it
 * with QEMU's reason (escaped and capped: QEMU runs beside the guest). */
static void poll_migration (GTask *task);

static gboolean
poll_again_cb (gpointer user_data)
{
  poll_migration (G_TASK (user_data));
  return G_SOURCE_REMOVE;
}

static void
migration_status_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  void (*next) (GTask *) = g_object_get_data (G_OBJECT (task), "after-migration");
  g_autofree gchar *status = NULL;
  g_autofree gchar *why = NULL;
  GError *error = NULL;

  if (!vd_session_helper_query_migrate_finish (op->helper, res, &status, &why, &error)) {
    fail (task, error, "Cannot ask QEMU how the migration goes");
    return;
  }
  if (g_strcmp0 (status, "completed") == 0) {
    next (task);
    return;
  }
  if (g_strcmp0 (status, "failed") == 0 || g_strcmp0 (status, "cancelled") == 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "QEMU says the migration %s: %s", status,
                             why[0] != '\0' ? why : "no reason given");
    g_object_unref (task);
    return;
  }
  if (g_get_monotonic_time () > op->deadline) {
    fail_literal (task, "The saved state did not finish moving within a minute");
    return;
  }
  g_timeout_add (MIGRATE_POLL_MS, poll_again_cb, task);
}

static void
poll_migration (GTask *task)
{
  Op *op = g_task_get_task_data (task);

  vd_session_helper_query_migrate_async (op->helper, g_task_get_cancellable (task), migration_status_cb, task);
}

static void
wait_migration (GTask *task, void (*next) (GTask *))
{
  Op *op = g_task_get_task_data (task);

  op->deadline = g_get_monotonic_time () + MIGRATE_TIMEOUT_US;
  g_object_set_data (G_OBJECT (task), "after-migration", next);
  poll_migration (task);
}

/* Hands op->fd to QEMU (through the helper) under FD_NAME; QEMU has its
 * own copy afterwards. */
static void
pass_fd (GTask *task, GAsyncReadyCallback cb)
{
  Op *op = g_task_get_task_data (task);

  vd_session_helper_pass_fd_async (op->helper, op->fd, FD_NAME, g_task_get_cancellable (task), cb, task);
}

/* --- save -------------------------------------------------------------- */

static gboolean
move_overlay (Op *op, GError **error)
{
  g_autofree gchar *dest = g_build_filename (op->image_dir, VD_BOOT_SNAPSHOT_DISK, NULL);
  int fd;

  if (g_rename (op->overlay, dest) != 0) {
    g_autoptr(GFile) from = g_file_new_for_path (op->overlay);
    g_autoptr(GFile) to = g_file_new_for_path (dest);

    if (errno != EXDEV)
      return vd_fs_set_error_errno (error, errno, "Cannot move the saved disk to %s", dest);
    if (!g_file_copy (from, to, G_FILE_COPY_OVERWRITE | G_FILE_COPY_NOFOLLOW_SYMLINKS, NULL, NULL, NULL, error)) {
      vivarium_error_convert (error);
      return FALSE;
    }
  }
  fd = open (dest, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return vd_fs_set_error_errno (error, errno, "Cannot open %s", dest);
  if (fchown (fd, 0, 0) != 0 || fchmod (fd, 0644) != 0 || fsync (fd) != 0) {
    int saved = errno;
    close (fd);
    return vd_fs_set_error_errno (error, saved, "Cannot settle %s", dest);
  }
  close (fd);
  return TRUE;
}

static gboolean
settle_state (Op *op, GError **error)
{
  g_autofree gchar *tmp = g_strconcat (op->state_path, ".tmp", NULL);
  struct stat st;

  if (fsync (op->fd) != 0 || fstat (op->fd, &st) != 0 || fchmod (op->fd, 0644) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot write %s", tmp);
  close (op->fd);
  op->fd = -1;
  if (g_rename (tmp, op->state_path) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot rename %s", tmp);
  if (op->info != NULL)
    json_object_set_int_member (op->info, "state-size", st.st_size);
  return TRUE;
}

static void
save_finish (GTask *task)
{
  Op *op = g_task_get_task_data (task);
  g_autofree gchar *info_path = g_build_filename (op->image_dir, VD_BOOT_SNAPSHOT_INFO, NULL);
  g_autoptr(JsonNode) node = NULL;
  g_autofree gchar *text = NULL;
  GError *error = NULL;

  if (!settle_state (op, &error)) {
    fail (task, error, "Cannot keep the saved guest");
    return;
  }
  /* The memory alone (SaveAsImage of a paused session). */
  if (op->overlay == NULL) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  if (!move_overlay (op, &error)) {
    fail (task, error, "Cannot keep the saved guest");
    return;
  }
  json_object_set_int_member (op->info, "saved-at", g_get_real_time ());
  json_object_set_int_member (op->info, "save-usec", g_get_monotonic_time () - op->started);
  node = json_node_init_object (json_node_alloc (), op->info);
  text = json_to_string (node, TRUE);
  if (!vd_fs_write_durably (info_path, text, 0644, &error) || !vd_fs_fsync_dir (op->image_dir, &error)) {
    fail (task, error, "Cannot write boot.json");
    return;
  }
  g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
migrate_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  if (qmp_done (task, res, "QEMU refused to save the guest"))
    wait_migration (task, save_finish);
}

static void
save_fd_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  if (!qmp_done (task, res, "QEMU did not take the descriptor"))
    return;
  qmp (task, "migrate", one_argument ("uri", g_variant_new_string ("fd:" FD_NAME)), migrate_started_cb);
}

static void
stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  g_autofree gchar *tmp = g_strconcat (op->state_path, ".tmp", NULL);

  if (!qmp_done (task, res, "Cannot stop the guest"))
    return;
  /* Root's file in the image directory; QEMU only ever holds the
   * descriptor, so its uid needs no way into the directory. */
  op->fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (op->fd < 0) {
    GError *error = NULL;
    vd_fs_set_error_errno (&error, errno, "Cannot create %s", tmp);
    fail (task, error, "Cannot save the guest");
    return;
  }
  pass_fd (task, save_fd_cb);
}

static void
bandwidth_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  if (qmp_done (task, res, "Cannot lift QEMU's migration speed limit"))
    qmp (task, "stop", NULL, stopped_cb);
}

/* QEMU refuses to migrate while the guest has a 9p share mounted. */
static void
unmounted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  g_autoptr(VdAgentExecResult) result = NULL;
  GError *error = NULL;

  result = vd_session_helper_exec_finish (op->helper, res, NULL, &error);
  if (result == NULL) {
    fail (task, error, "Cannot unmount the share in the scratch guest");
    return;
  }
  if (result->exit_status != 0) {
    fail_literal (task, "The scratch guest could not unmount /project before the save");
    return;
  }
  /* Whether restored guests have a machine id to renew: asked once here,
   * so that a restore with nothing to renew and no project runs no
   * command at all. */
  json_object_set_boolean_member (op->info, "machine-id",
                                  g_bytes_get_size (result->out) >= 10 &&
                                  memcmp (g_bytes_get_data (result->out, NULL), "machine-id", 10) == 0);
  qmp (task, "migrate-set-parameters", one_argument ("max-bandwidth", g_variant_new_int64 (SAVE_BANDWIDTH)),
       bandwidth_cb);
}

void
vd_session_snapshot_save_async (VdSessionHelper *helper, const gchar *overlay,
                                const gchar *image_dir, JsonObject *info, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
  const gchar *argv[] = { "sh", "-c", "if grep -q ' /project ' /proc/mounts; then umount /project || exit 1; fi; sync; "
                          "if [ -e /etc/machine-id ]; then echo machine-id; fi", NULL };
  Op *op;
  GTask *task = op_task_new (vd_session_snapshot_save_async, cancellable, callback, user_data, &op);

  op->helper = g_object_ref (helper);
  op->overlay = g_strdup (overlay);
  op->image_dir = g_strdup (image_dir);
  op->state_path = g_build_filename (image_dir, VD_BOOT_SNAPSHOT_STATE, NULL);
  op->info = json_object_ref (info);
  vd_session_helper_exec_async (helper, argv, NULL, NULL, AGENT_TIMEOUT_MS, 4096, cancellable, unmounted_cb, task);
}

gboolean
vd_session_snapshot_save_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* A guest already stopped, its disk copied elsewhere: only its memory. */
void
vd_session_snapshot_save_state_async (VdSessionHelper *helper, const gchar *state_path, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data)
{
  Op *op;
  GTask *task = op_task_new (vd_session_snapshot_save_async, cancellable, callback, user_data, &op);

  op->helper = g_object_ref (helper);
  op->state_path = g_strdup (state_path);
  qmp (task, "migrate-set-parameters", one_argument ("max-bandwidth", g_variant_new_int64 (SAVE_BANDWIDTH)),
       bandwidth_cb);
}

/* --- restore ----------------------------------------------------------- */

static void
continued_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  if (!qmp_done (task, res, "Cannot let the restored guest run"))
    return;
  g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

/* It was saved stopped, so it arrives stopped. */
static void
restore_finish (GTask *task)
{
  qmp (task, "cont", NULL, continued_cb);
}

static void
incoming_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);

  if (qmp_done (task, res, "QEMU refused the saved state"))
    wait_migration (task, restore_finish);
}

static void
restore_fd_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);

  close (op->fd);
  op->fd = -1;
  if (!qmp_done (task, res, "QEMU did not take the saved state's descriptor"))
    return;
  qmp (task, "migrate-incoming", one_argument ("uri", g_variant_new_string ("fd:" FD_NAME)), incoming_started_cb);
}

void
vd_session_snapshot_restore_async (VdSessionHelper *helper, const gchar *state_path, GCancellable *cancellable,
                                   GAsyncReadyCallback callback, gpointer user_data)
{
  Op *op;
  GTask *task = op_task_new (vd_session_snapshot_restore_async, cancellable, callback, user_data, &op);

  op->helper = g_object_ref (helper);
  /* Read-only, by the daemon: QEMU gets a descriptor it cannot write
   * through, to a file its uid could not open. */
  op->fd = open (state_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (op->fd < 0) {
    GError *error = NULL;
    vd_fs_set_error_errno (&error, errno, "Cannot open %s", state_path);
    fail (task, error, "Cannot restore the boot snapshot");
    return;
  }
  pass_fd (task, restore_fd_cb);
}

gboolean
vd_session_snapshot_restore_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* --- reseed ------------------------------------------------------------ */

/* $1: a fresh machine id; $2: 1 to mount the project share; $3: the
 * nameserver, or empty. The machine id is written only where the image has
 * one at all, as a boot would have made one. The nameserver (an egress
 * proxy's DNS, which speaks TCP only) is set here rather than by a guest
 * command of its own: under TCG each one costs tens of milliseconds. */
#define RESEED_SCRIPT \
  "if [ -e /etc/machine-id ]; then printf '%s\\n' \"$1\" > /etc/machine-id || exit 2; fi; " \
  "if [ \"$2\" = 1 ]; then mkdir -p /project && " \
  "mount -t 9p -o trans=virtio,version=9p2000.L project /project || exit 3; fi; " \
  "if [ -n \"$3\" ]; then printf 'nameserver %s\\noptions use-vc\\n' \"$3\" > /etc/resolv.conf || exit 4; fi; exit 0"

/* The clock and the script are two branches run at once: guest-exec only
 * starts the script, so the agent sets and reads the clock while the
 * script runs, and the restore waits for the slower of the two, not for
 * their sum. Each branch holds a reference on the task; the first error
 * is the one told. */
static void
reseed_branch_done (GTask *task, GError *error)
{
  Op *op = g_task_get_task_data (task);

  if (error != NULL && op->reseed_error == NULL)
    op->reseed_error = error;
  else if (error != NULL)
    g_error_free (error);
  if (--op->reseed_pending > 0) {
    g_object_unref (task);
    return;
  }
  if (op->reseed_error != NULL)
    g_task_return_error (task, g_steal_pointer (&op->reseed_error));
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
reseeded_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  g_autoptr(VdAgentExecResult) result = NULL;
  GError *error = NULL;

  result = vd_session_helper_exec_finish (op->helper, res, NULL, &error);
  if (result == NULL) {
    g_prefix_error (&error, "Cannot make the restored guest unique: ");
    reseed_branch_done (task, error);
    return;
  }
  if (result->exit_status != 0)
    error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                         "The restored guest could not %s (exit status %d)",
                         result->exit_status == 3 ? "mount the project share" :
                         result->exit_status == 4 ? "take its nameserver" :
                         result->exit_status == 2 ? "take a fresh machine id" : "run its first-start step",
                         result->exit_status);
  reseed_branch_done (task, error);
}

static void
run_reseed_script (GTask *task)
{
  Op *op = g_task_get_task_data (task);
  g_autofree gchar *uuid = g_uuid_string_random ();
  g_autoptr(GString) id = g_string_new (NULL);
  const gchar *argv[] = { "sh", "-c", RESEED_SCRIPT, "sh", NULL, NULL, NULL, NULL };

  for (const gchar *p = uuid; *p != '\0'; p++) {
    if (*p != '-')
      g_string_append_c (id, *p);
  }
  argv[4] = id->str;
  argv[5] = op->mount_project ? "1" : "0";
  argv[6] = op->resolver != NULL ? op->resolver : "";
  vd_session_helper_exec_async (op->helper, argv, NULL, NULL, AGENT_TIMEOUT_MS, 4096, g_task_get_cancellable (task),
                                reseeded_cb, g_object_ref (task));
}

static void
got_time_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  GError *error = NULL;
  gint64 guest = 0, answered_ns = g_get_real_time () * 1000;

  /* The guest read its clock somewhere between the question and the
   * answer: a loaded host (48 restores at once) may take seconds over the
   * round trip, which says nothing of the guest's clock. */
  if (!vd_session_helper_get_time_finish (op->helper, res, &guest, &error))
    g_prefix_error (&error, "Cannot read the restored guest's clock: ");
  else if (guest < op->time_asked_ns - CLOCK_SLACK_NS || guest > answered_ns + CLOCK_SLACK_NS)
    error = g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                 "The restored guest's clock could not be set from the host's");
  reseed_branch_done (task, error);
}

/* qemu-ga sets the clock, then runs hwclock to copy it to the RTC; an
 * image without hwclock reports an error although the clock was set. The
 * reading that follows is what decides. */
static void
set_time_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Op *op = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  if (!vd_session_helper_call_finish (op->helper, res, &error))
    g_debug ("guest-set-time: %s", error->message);
  op->time_asked_ns = g_get_real_time () * 1000;
  vd_session_helper_get_time_async (op->helper, g_task_get_cancellable (task), got_time_cb, task);
}

static void
set_clock (GTask *task)
{
  Op *op = g_task_get_task_data (task);

  vd_session_helper_set_time_async (op->helper, g_get_real_time () * 1000, g_task_get_cancellable (task),
                                    set_time_cb, g_object_ref (task));
}

void
vd_session_snapshot_reseed_async (VdSessionHelper *helper, gboolean mount_project, gboolean machine_id,
                                  const gchar *resolver,
                                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  Op *op;
  GTask *task = op_task_new (vd_session_snapshot_reseed_async, cancellable, callback, user_data, &op);

  op->helper = g_object_ref (helper);
  op->mount_project = mount_project;
  op->machine_id = machine_id;
  op->resolver = g_strdup (resolver);
  op->reseed_pending = mount_project || machine_id || resolver != NULL ? 2 : 1;
  /* The script first: guest-exec returns as soon as it runs. */
  if (op->reseed_pending == 2)
    run_reseed_script (task);
  set_clock (task);
  /* Each branch took its own reference. */
  g_object_unref (task);
}

gboolean
vd_session_snapshot_reseed_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}
