/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdImageImport"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gunixfdlist.h>
#include <gio/gunixinputstream.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-image.h"
#include "vd-image-import.h"

#define IMPORT_MAX_BYTES (G_GUINT64_CONSTANT (64) * 1024 * 1024 * 1024)

/* One import: the caller's descriptor is copied into a staging directory
 * (in a worker thread), checked with qemu-img, converted when raw, and
 * renamed into images/ only once all of it succeeded. The daemon never
 * opens a path on the caller's behalf. */
struct _VdImageImport {
  GObject  parent_instance;
  gint     fd;
  gchar   *name;
  gchar   *staging;
  gchar   *target;
};

G_DEFINE_TYPE (VdImageImport, vd_image_import, G_TYPE_OBJECT)

static void
vd_image_import_finalize (GObject *object)
{
  VdImageImport *self = VD_IMAGE_IMPORT (object);

  if (self->fd >= 0)
    close (self->fd);
  g_free (self->name);
  g_free (self->staging);
  g_free (self->target);
  G_OBJECT_CLASS (vd_image_import_parent_class)->finalize (object);
}

static void
vd_image_import_class_init (VdImageImportClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_image_import_finalize;
}

static void
vd_image_import_init (VdImageImport *self)
{
  self->fd = -1;
}

VdImageImport *
vd_image_import_new (VdConfig *config, const gchar *name, gint fd)
{
  VdImageImport *self = g_object_new (VD_TYPE_IMAGE_IMPORT, NULL);
  g_autofree gchar *id = g_uuid_string_random ();

  self->fd = fd;
  self->name = g_strdup (name);
  self->staging = vd_config_build_state_path (config, "images", ".staging", id, NULL);
  self->target = vd_config_build_state_path (config, "images", name, NULL);
  return self;
}

const gchar *
vd_image_import_get_name (VdImageImport *self)
{
  return self->name;
}

static gboolean
copy_fd_to (gint fd, const gchar *path, GError **error)
{
  g_autoptr(GInputStream) in = g_unix_input_stream_new (fd, FALSE);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileOutputStream) out = g_file_create (file, G_FILE_CREATE_PRIVATE, NULL, error);

  /* A full disk is the likely failure here, and NoSpace says so. */
  if (out == NULL ||
      g_output_stream_splice (G_OUTPUT_STREAM (out), in, G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET, NULL, error) < 0) {
    g_prefix_error (error, "Cannot copy the disk to %s: ", path);
    vivarium_error_convert (error);
    return FALSE;
  }
  return TRUE;
}

/* A tool that ran out of space says so on its last line (qemu-img: "error
 * while writing …: No space left on device"): NoSpace, in its own words,
 * escaped. Anything else is what it always was: the disk was not usable. */
static gboolean
tool_failed (GError **error, const gchar *what, GBytes *err)
{
  gsize len = 0;
  const gchar *data = err != NULL ? g_bytes_get_data (err, &len) : NULL;
  g_autofree gchar *text = g_strstrip (g_strndup (data != NULL ? data : "", len));
  const gchar *last = strrchr (text, '\n') != NULL ? strrchr (text, '\n') + 1 : text;
  g_autofree gchar *said = vivarium_escape_untrusted (last, strlen (last), 300, NULL);

  if (vd_fs_says_no_space (last)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE, "%s failed; the tool said: “%s”", what, said);
    return FALSE;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "%s failed", what);
  return FALSE;
}

static gboolean
run_tool (GError **error, const gchar *what, const gchar *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                                                      G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GBytes) err = NULL;
  va_list args;

  va_start (args, first);
  for (const gchar *a = first; a != NULL; a = va_arg (args, const gchar *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  /* The C locale, so that a full disk reads as the words we look for. */
  g_subprocess_launcher_setenv (launcher, "LC_ALL", "C.UTF-8", TRUE);
  proc = g_subprocess_launcher_spawnv (launcher, (const gchar * const *) argv->pdata, error);
  if (proc == NULL || !g_subprocess_communicate (proc, NULL, NULL, NULL, &err, error)) {
    g_prefix_error (error, "%s failed: ", what);
    vivarium_error_convert (error);
    return FALSE;
  }
  if (g_subprocess_get_successful (proc))
    return TRUE;
  return tool_failed (error, what, err);
}

/* Only self-contained qcow2 or raw disks: other formats (and qcow2 with a
 * backing or external data file) can make QEMU open host files by name. */
static gboolean
check_import_format (const gchar *disk, gchar **format, GError **error)
{
  g_autoptr(JsonObject) info = vd_image_query_disk (disk, error);
  g_autoptr(JsonNode) node = NULL;
  g_autofree gchar *text = NULL;

  if (info == NULL)
    return FALSE;
  node = json_node_init_object (json_node_alloc (), info);
  text = json_to_string (node, FALSE);
  if (json_object_has_member (info, "backing-filename") || strstr (text, "\"data-file\"") != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The disk refers to other files (a backing or data file); import a self-contained disk");
    return FALSE;
  }
  *format = g_strdup (json_object_get_string_member_with_default (info, "format", ""));
  if (g_strcmp0 (*format, "qcow2") != 0 && g_strcmp0 (*format, "raw") != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The disk is in %s format; only qcow2 and raw disks are accepted", *format);
    return FALSE;
  }
  return TRUE;
}

static gboolean
import_into_staging (VdImageImport *self, GError **error)
{
  g_autofree gchar *incoming = g_build_filename (self->staging, "incoming", NULL);
  g_autofree gchar *disk = g_build_filename (self->staging, "disk.qcow2", NULL);
  g_autofree gchar *format = NULL;

  if (!copy_fd_to (self->fd, incoming, error) || !check_import_format (incoming, &format, error))
    return FALSE;
  if (g_strcmp0 (format, "raw") == 0) {
    if (!run_tool (error, "Converting the raw disk to qcow2", "qemu-img", "convert", "-f", "raw", "-O", "qcow2",
                   incoming, disk, NULL))
      return FALSE;
    g_unlink (incoming);
  } else if (g_rename (incoming, disk) != 0) {
    return vd_fs_set_error_errno (error, errno, "Cannot move the imported disk to %s", disk);
  }
  return vd_image_write_metadata (self->staging, "import", error);
}

static void
import_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *c)
{
  VdImageImport *self = VD_IMAGE_IMPORT (source);
  g_autofree gchar *parent = g_path_get_dirname (self->staging);
  GError *error = NULL;

  if (!vd_fs_mkdir (parent, 0700, 0, 0, &error) || !vd_fs_mkdir (self->staging, 0755, 0, 0, &error) ||
      !import_into_staging (self, &error) ||
      g_file_test (self->target, G_FILE_TEST_EXISTS) || g_rename (self->staging, self->target) != 0) {
    if (error == NULL)
      error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "An image named “%s” appeared meanwhile", self->name);
    vd_fs_rm_rf (self->staging, NULL);
    vivarium_error_convert (&error);
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, g_strdup (self->target), g_free);
}

void
vd_image_import_run_async (VdImageImport *self, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);

  g_task_run_in_thread (task, import_thread);
}

gchar *
vd_image_import_run_finish (VdImageImport *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

gint
vd_image_import_take_fd (GDBusMethodInvocation *invocation, GVariant *handle, GError **error)
{
  GUnixFDList *fds = g_dbus_message_get_unix_fd_list (g_dbus_method_invocation_get_message (invocation));
  gint fd;
  struct stat st;

  if (fds == NULL || g_variant_get_handle (handle) >= g_unix_fd_list_get_length (fds)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "No file descriptor was passed");
    return -1;
  }
  fd = g_unix_fd_list_get (fds, g_variant_get_handle (handle), error);
  if (fd < 0) {
    vivarium_error_convert (error);
    return -1;
  }
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || (fcntl (fd, F_GETFL) & O_ACCMODE) == O_WRONLY) {
    close (fd);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The descriptor is not a readable regular file");
    return -1;
  }
  if ((guint64) st.st_size > IMPORT_MAX_BYTES) {
    close (fd);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "The disk is larger than 64 GiB");
    return -1;
  }
  return fd;
}

