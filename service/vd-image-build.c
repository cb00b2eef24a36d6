/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdImageBuild"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gunixinputstream.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-image.h"
#include "vd-image-build.h"
#include "vd-log.h"

/* One build: the recipe's builder runs in its own transient unit
 * (vivarium-build-<task>.service); its output becomes the task log and the
 * image's build.log, and its progress lines arrive through a FIFO. The
 * image appears under images/ only by one rename at the very end, so a
 * failed or cancelled build leaves nothing but its task. */
struct _VdImageBuild {
  GObject       parent_instance;
  VdConfig     *config;
  VdSystemd    *systemd;
  VdJob       *task;
  gchar        *recipe;
  gchar        *name;
  gchar        *unit;
  gchar        *staging;
  gchar        *outdir;
  FILE         *log_file;
  GTask        *gtask;
  gint          fifo_keepalive;
  gulong        cancel_id;
  gchar        *last_line;     /* the builder's last words, for the error */
  gchar        *no_space_line; /* its first "no space" line in this step */
  GError       *job_error;     /* set when the unit finished badly */
  gboolean      job_done;
  gboolean      builder_failed;
  gboolean      log_done;
  guint         log_wait_id;
};

G_DEFINE_TYPE (VdImageBuild, vd_image_build, G_TYPE_OBJECT)

/* Bytes of the builder's own words that go into an error message. */
#define BUILDER_LINE_CAP 300
#define BUILDER_PREFIX   "vivarium-image-builder: "

static void
vd_image_build_finalize (GObject *object)
{
  VdImageBuild *self = VD_IMAGE_BUILD (object);

  if (self->log_file != NULL)
    fclose (self->log_file);
  if (self->fifo_keepalive >= 0)
    close (self->fifo_keepalive);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_object (&self->task);
  g_free (self->recipe);
  g_free (self->name);
  g_free (self->unit);
  g_free (self->staging);
  g_free (self->outdir);
  g_free (self->last_line);
  g_free (self->no_space_line);
  g_clear_error (&self->job_error);
  g_clear_handle_id (&self->log_wait_id, g_source_remove);
  G_OBJECT_CLASS (vd_image_build_parent_class)->finalize (object);
}

static void
vd_image_build_class_init (VdImageBuildClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_image_build_finalize;
}

static void
vd_image_build_init (VdImageBuild *self)
{
  self->fifo_keepalive = -1;
}

gchar *
vd_image_build_recipe_path (VdConfig *config, const gchar *recipe)
{
  g_autofree gchar *file = g_strconcat (recipe, ".recipe", NULL);
  return g_build_filename (vd_config_get_data_dir (config), "recipes", file, NULL);
}

GStrv
vd_image_build_list_recipes (VdConfig *config)
{
  g_autofree gchar *dir = g_build_filename (vd_config_get_data_dir (config), "recipes", NULL);
  g_auto(GStrv) files = vd_fs_list_dir (dir);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; files[i] != NULL; i++) {
    if (g_str_has_suffix (files[i], ".recipe")) {
      g_autofree gchar *name = g_strndup (files[i], strlen (files[i]) - strlen (".recipe"));
      g_strv_builder_add (builder, name);
    }
  }
  return g_strv_builder_end (builder);
}

VdImageBuild *
vd_image_build_new (VdConfig *config, VdSystemd *systemd, VdJob *task, const gchar *recipe, const gchar *name)
{
  VdImageBuild *self = g_object_new (VD_TYPE_IMAGE_BUILD, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->task = g_object_ref (task);
  self->recipe = g_strdup (recipe);
  self->name = g_strdup (name);
  self->unit = g_strdup_printf ("vivarium-build-%s.service", vd_job_get_id (task));
  self->staging = vd_config_build_state_path (config, "images", ".staging", vd_job_get_id (task), NULL);
  self->outdir = g_build_filename (self->staging, "out", NULL);
  return self;
}

const gchar *
vd_image_build_get_name (VdImageBuild *self)
{
  return self->name;
}

/* The builder's own narration, "[  12s] text" (its log()), or NULL. */
static const gchar *
narration (const gchar *line)
{
  const gchar *end;

  if (line[0] != '[' || (end = strstr (line, "s] ")) == NULL)
    return NULL;
  for (const gchar *p = line + 1; p < end; p++) {
    if (*p != ' ' && !g_ascii_isdigit (*p))
      return NULL;
  }
  return end + 3;
}

/* A line of the builder's narration starts a step; what a tool says
 * after it belongs to that step. */
gboolean
vd_image_build_is_step (const gchar *line)
{
  return narration (line) != NULL;
}

/* The builder's closing words ("build failed (status 1); removed …") and
 * its clean-up warnings say nothing about the cause: the line before them
 * does. */
gboolean
vd_image_build_is_epilogue (const gchar *line)
{
  const gchar *text = narration (line);

  if (g_str_has_prefix (line, BUILDER_PREFIX "warning: "))
    return TRUE;
  return text != NULL && g_str_has_prefix (text, "build failed (status ");
}

/* The error a failed build returns. @builder_line, already escaped and
 * capped, is the builder's last meaningful line when the builder itself
 * failed (NULL otherwise): quoted and labelled as the builder's words,
 * since they are output of a program, not the daemon's findings. */
GError *
vd_image_build_failure (const gchar *name, const gchar *recipe, const gchar *builder_line, const GError *cause)
{
  g_autoptr(GError) e = g_error_copy (cause);

  vivarium_error_convert (&e);
  if (e->code == VIVARIUM_ERROR_CANCELLED)
    return g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                        "Building “%s” from the recipe “%s” was cancelled", name, recipe);
  if (builder_line == NULL)
    return g_error_new (VIVARIUM_ERROR, e->code, "Building “%s” from the recipe “%s” failed: %s",
                        name, recipe, e->message);
  return g_error_new (VIVARIUM_ERROR, vd_fs_says_no_space (builder_line) ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
                      "Building “%s” from the recipe “%s” failed. The builder's last words: “%s”",
                      name, recipe, builder_line);
}

static void maybe_finish (VdImageBuild *self);

static void
read_log_line_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdImageBuild) self = VD_IMAGE_BUILD (user_data);
  GDataInputStream *in = G_DATA_INPUT_STREAM (source);
  g_autofree gchar *line = g_data_input_stream_read_line_finish_utf8 (in, res, NULL, NULL);

  if (line == NULL) {
    self->log_done = TRUE;
    maybe_finish (self);
    return;
  }
  if (line[0] != '\0' && !vd_image_build_is_epilogue (line)) {
    if (vd_image_build_is_step (line))
      g_clear_pointer (&self->no_space_line, g_free);
    if (self->no_space_line == NULL && vd_fs_says_no_space (line))
      self->no_space_line = vivarium_escape_untrusted (line, strlen (line), BUILDER_LINE_CAP, NULL);
    g_free (self->last_line);
    self->last_line = vivarium_escape_untrusted (line, strlen (line), BUILDER_LINE_CAP, NULL);
  }
  vd_job_append_log (self->task, line);
  if (self->log_file != NULL)
    fprintf (self->log_file, "%s\n", line);
  g_data_input_stream_read_line_async (in, G_PRIORITY_DEFAULT, NULL, read_log_line_cb, g_object_ref (self));
}

static void
read_progress_line_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdImageBuild) self = VD_IMAGE_BUILD (user_data);
  GDataInputStream *in = G_DATA_INPUT_STREAM (source);
  g_autofree gchar *line = g_data_input_stream_read_line_finish_utf8 (in, res, NULL, NULL);
  guint64 percent;
  gchar *space;

  if (line == NULL || vd_job_is_finished (self->task))
    return;
  space = strchr (line, ' ');
  if (space != NULL) {
    *space = '\0';
    if (g_ascii_string_to_unsigned (line, 10, 0, 100, &percent, NULL))
      vd_job_progress (self->task, (guint) percent, space + 1);
  }
  g_data_input_stream_read_line_async (in, G_PRIORITY_DEFAULT, NULL, read_progress_line_cb, g_object_ref (self));
}

static void
watch_stream (VdImageBuild *self, gint fd, GAsyncReadyCallback callback)
{
  g_autoptr(GInputStream) raw = g_unix_input_stream_new (fd, TRUE);
  g_autoptr(GDataInputStream) in = g_data_input_stream_new (raw);

  g_data_input_stream_read_line_async (in, G_PRIORITY_DEFAULT, NULL, callback, g_object_ref (self));
}

/* The FIFO is held open for writing by us too, so the reader never sees
 * an end-of-file before the builder has even opened it. */
static gboolean
open_progress_fifo (VdImageBuild *self, gchar **path_out, GError **error)
{
  g_autofree gchar *path = g_build_filename (self->staging, "progress", NULL);
  gint rfd;

  if (mkfifo (path, 0600) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot create %s", path);
  rfd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  self->fifo_keepalive = open (path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (rfd < 0 || self->fifo_keepalive < 0) {
    vd_fs_set_error_errno (error, errno, "Cannot open %s", path);
    if (rfd >= 0)
      close (rfd);
    return FALSE;
  }
  watch_stream (self, rfd, read_progress_line_cb);
  *path_out = g_steal_pointer (&path);
  return TRUE;
}

static GVariant *
unit_properties (VdImageBuild *self, const gchar *fifo)
{
  g_autofree gchar *builder = g_build_filename (vd_config_get_libexec_dir (self->config), "vivarium-image-builder", NULL);
  g_autofree gchar *recipe = vd_image_build_recipe_path (self->config, self->recipe);
  g_autofree gchar *description = g_strdup_printf ("Vivarium image build %s (%s)", self->name, self->recipe);
  const gchar *argv[] = {
    "/bin/sh", "-c", "exec \"$0\" --recipe \"$1\" --output \"$2\" --progress-fd 3 3>\"$3\"",
    builder, recipe, self->outdir, fifo, NULL
  };
  const gchar *environment[] = { "LC_ALL=C.UTF-8", NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string (description));
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("oneshot"));
  g_variant_builder_add (&b, "(sv)", "Slice", g_variant_new_string (VIVARIUM_SLICE));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (&b, "(sv)", "TimeoutStartUSec", g_variant_new_uint64 (G_GUINT64_CONSTANT (7200) * G_USEC_PER_SEC));
  /* The builder's messages, the tools' included, in one known language:
   * the log is read by people, and "No space left on device" by us. */
  g_variant_builder_add (&b, "(sv)", "Environment", g_variant_new_strv (environment, -1));
  g_variant_builder_add (&b, "(sv)", "StandardOutputFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "StandardErrorFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "ExecStart",
                         g_variant_new_parsed ("[(%s, %^as, false)]", argv[0], argv));
  return g_variant_builder_end (&b);
}

static void
cleanup_staging (VdImageBuild *self)
{
  g_autoptr(GError) error = NULL;

  if (!vd_fs_rm_rf (self->staging, &error))
    g_warning ("cannot remove %s: %s", self->staging, error->message);
}

static gboolean
publish_image (VdImageBuild *self, gchar **final_dir, GError **error)
{
  g_autofree gchar *target = vd_config_build_state_path (self->config, "images", self->name, NULL);
  g_autofree gchar *log_src = g_build_filename (self->staging, "build.log", NULL);
  g_autofree gchar *log_dst = g_build_filename (self->outdir, "build.log", NULL);
  g_autofree gchar *disk = g_build_filename (self->outdir, "disk.qcow2", NULL);

  if (!g_file_test (disk, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The builder finished without producing disk.qcow2");
    return FALSE;
  }
  g_clear_pointer (&self->log_file, fclose);
  if (g_rename (log_src, log_dst) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot move the build log to %s", log_dst);
  if (!vd_image_write_metadata (self->outdir, self->recipe, error))
    return FALSE;
  if (chmod (self->outdir, 0755) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot set the mode of %s", self->outdir);
  /* renameat2(RENAME_NOREPLACE) semantics by hand: rename() would replace an
   * empty directory, and an image of the same name may have appeared. */
  if (g_file_test (target, G_FILE_TEST_EXISTS) || g_rename (self->outdir, target) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "An image named “%s” appeared meanwhile", self->name);
    return FALSE;
  }
  *final_dir = g_steal_pointer (&target);
  return TRUE;
}

/* What the builder said that names the cause, when the builder is what
 * failed. In a pipeline the tool that ran out of space speaks first and the
 * others follow ("Broken pipe"): its line wins over the last one. */
static const gchar *
builder_words (VdImageBuild *self)
{
  if (!self->builder_failed)
    return NULL;
  return self->no_space_line != NULL ? self->no_space_line : self->last_line;
}

static void
finish (VdImageBuild *self)
{
  g_autoptr(GTask) gtask = g_steal_pointer (&self->gtask);
  g_autoptr(GError) error = g_steal_pointer (&self->job_error);
  g_autofree gchar *final_dir = NULL;

  g_clear_handle_id (&self->log_wait_id, g_source_remove);
  /* Dropping our writer lets the progress reader see its end and let go. */
  if (self->fifo_keepalive >= 0) {
    close (self->fifo_keepalive);
    self->fifo_keepalive = -1;
  }
  /* A cancelled build's unit was stopped, so it "failed" too: what the
   * caller asked for decides how it is reported. */
  if (g_cancellable_is_cancelled (vd_job_get_cancellable (self->task))) {
    g_clear_error (&error);
    g_cancellable_set_error_if_cancelled (vd_job_get_cancellable (self->task), &error);
  } else if (error == NULL) {
    publish_image (self, &final_dir, &error);
  }
  cleanup_staging (self);
  if (error != NULL) {
    vd_log_image (G_LOG_LEVEL_WARNING, self->name, "build of %s from %s failed: %s", self->name, self->recipe, error->message);
    g_task_return_error (gtask, vd_image_build_failure (self->name, self->recipe, builder_words (self), error));
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, self->name, "built image %s from %s", self->name, self->recipe);
  g_task_return_pointer (gtask, g_steal_pointer (&final_dir), g_free);
}

static gboolean
log_wait_expired_cb (gpointer user_data)
{
  VdImageBuild *self = VD_IMAGE_BUILD (user_data);

  self->log_wait_id = 0;
  self->log_done = TRUE;
  maybe_finish (self);
  return G_SOURCE_REMOVE;
}

/* The unit's end and the end of its output arrive in either order; the
 * outcome is decided once both are in (or the output is late by 5 s). */
static void
maybe_finish (VdImageBuild *self)
{
  if (!self->job_done || self->gtask == NULL)
    return;
  if (!self->log_done) {
    if (self->log_wait_id == 0)
      self->log_wait_id = g_timeout_add_seconds (5, log_wait_expired_cb, self);
    return;
  }
  finish (self);
}

static void
build_unit_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdImageBuild) self = VD_IMAGE_BUILD (user_data);

  g_cancellable_disconnect (vd_job_get_cancellable (self->task), self->cancel_id);
  self->cancel_id = 0;
  /* Only this failure is the builder's own; the ones before and after it
   * (staging, publishing) are the daemon's and say so themselves. */
  self->builder_failed = !vd_systemd_start_transient_finish (self->systemd, res, &self->job_error);
  self->job_done = TRUE;
  maybe_finish (self);
}

static void
cancelled_cb (GCancellable *cancellable, gpointer user_data)
{
  VdImageBuild *self = VD_IMAGE_BUILD (user_data);

  /* The start job of a oneshot unit finishes (as failed) once the unit is
   * stopped, which brings us to build_unit_done_cb. */
  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, NULL, NULL);
}

static gboolean
prepare (VdImageBuild *self, GUnixFDList **fds_out, gchar **fifo, GError **error)
{
  g_autofree gchar *log_path = g_build_filename (self->staging, "build.log", NULL);
  g_autofree gchar *parent = g_path_get_dirname (self->staging);
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  gint pipefd[2];

  if (!vd_fs_mkdir (parent, 0700, 0, 0, error) || !vd_fs_mkdir (self->staging, 0700, 0, 0, error))
    return FALSE;
  self->log_file = fopen (log_path, "we");
  if (self->log_file == NULL)
    return vd_fs_set_error_errno (error, errno, "Cannot create the build log %s", log_path);
  if (!open_progress_fifo (self, fifo, error))
    return FALSE;
  if (pipe2 (pipefd, O_CLOEXEC) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot make a pipe for the builder's output");
  if (g_unix_fd_list_append (fds, pipefd[1], error) < 0) {
    close (pipefd[0]);
    close (pipefd[1]);
    return FALSE;
  }
  close (pipefd[1]);
  watch_stream (self, pipefd[0], read_log_line_cb);
  *fds_out = g_steal_pointer (&fds);
  return TRUE;
}

void
vd_image_build_run_async (VdImageBuild *self, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GUnixFDList) fds = NULL;
  g_autofree gchar *fifo = NULL;
  g_autoptr(GError) error = NULL;

  self->gtask = g_task_new (self, NULL, callback, user_data);
  if (!prepare (self, &fds, &fifo, &error)) {
    cleanup_staging (self);
    g_task_return_error (g_steal_pointer (&self->gtask),
                         vd_image_build_failure (self->name, self->recipe, NULL, error));
    return;
  }
  vd_job_progress (self->task, 1, "Starting the builder");
  self->cancel_id = g_cancellable_connect (vd_job_get_cancellable (self->task), G_CALLBACK (cancelled_cb), self, NULL);
  vd_systemd_start_transient_async (self->systemd, self->unit, unit_properties (self, fifo), fds,
                                    NULL, build_unit_done_cb, g_object_ref (self));
}

gchar *
vd_image_build_run_finish (VdImageBuild *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
