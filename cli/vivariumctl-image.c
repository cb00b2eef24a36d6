/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivariumctl-commands.h"

/* The common start of every verb that names one image. */
static VivariumDBusImage *
image_from_args (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 1, 1, error))
    return NULL;
  if (!vctl_connect (ctx, error))
    return NULL;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_images_sync,
                           VIVARIUM_DBUS_PATH_IMAGES, _("image"),
                           (*argv)[1], error);
  if (path == NULL)
    return NULL;
  return vivarium_dbus_image_proxy_new_sync (ctx->bus,
                                             G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                             G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                             VIVARIUM_DBUS_NAME, path, NULL, error);
}

static gchar *
short_digest (const gchar *digest)
{
  /* "sha256:" and 12 hex digits tell images apart; --json has it whole. */
  if (digest == NULL || digest[0] == '\0')
    return g_strdup ("-");
  return vctl_escape_line (digest);
}

static void
print_image_row (gpointer proxy)
{
  VivariumDBusImage *image = proxy;
  g_autofree gchar *name = vctl_escape_line (vivarium_dbus_image_get_name (image));
  g_autofree gchar *recipe = vctl_escape_line (vivarium_dbus_image_get_recipe (image));
  g_autofree gchar *format = vctl_escape_line (vivarium_dbus_image_get_format (image));
  g_autofree gchar *size = vivarium_format_size (vivarium_dbus_image_get_size (image), FALSE);
  g_autofree gchar *created = vctl_format_time (vivarium_dbus_image_get_created_at (image));
  g_autofree gchar *digest = short_digest (vivarium_dbus_image_get_digest (image));

  g_print ("%-24s %-6s %10s %-6s %-10s %-19s %.19s\n", name,
           vivarium_dbus_image_get_frozen (image) ? _("yes") : _("no"),
           size, format, recipe, created, digest);
}

gboolean
vctl_cmd_image_list (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *header = g_strdup_printf ("%-24s %-6s %10s %-6s %-10s %-19s %s",
                                             _("NAME"), _("FROZEN"), _("SIZE"), _("FORMAT"),
                                             _("RECIPE"), _("CREATED"), _("DIGEST"));

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  return vctl_print_objects (ctx, vivarium_dbus_manager_call_list_images_sync, VIVARIUM_DBUS_TYPE_IMAGE_PROXY,
                             VIVARIUM_DBUS_IFACE_PREFIX ".Image", header, print_image_row,
                             _("No images."), error);
}

gboolean
vctl_cmd_image_recipes (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_auto(GStrv) names = NULL;
  g_autoptr(GVariant) recipes = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_list_recipes_sync (ctx->manager, vctl_call_flags (ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                                     &names, NULL, error))
    return FALSE;
  recipes = g_variant_ref_sink (g_variant_new_strv ((const gchar * const *) names, -1));
  if (ctx->json) {
    g_autoptr(JsonNode) root = json_gvariant_serialize (recipes);
    vctl_print_json (root);
    return TRUE;
  }
  for (gsize i = 0; i < g_variant_n_children (recipes); i++) {
    g_autoptr(GVariant) item = g_variant_get_child_value (recipes, i);
    g_autofree gchar *shown = vctl_escape_line (g_variant_get_string (item, NULL));
    g_print ("%s\n", shown);
  }
  return TRUE;
}

typedef struct {
  GMainLoop        *loop;
  VctlProgress     *progress;
  VivariumDBusJob  *job;
  VctlContext      *ctx;
  gchar            *state;        /* the daemon's word, for the message */
  gboolean          state_known;  /* …and parsed, once, where it arrives */
  VivariumJobState  state_value;
  gchar            *message;
  gboolean          vanished;
  gboolean          cancelling;
} JobWait;

static void
job_wait_set_state (JobWait *w, gchar *state)
{
  g_free (w->state);
  w->state = state;
  w->state_known = vivarium_job_state_from_string (state, &w->state_value);
}

static gboolean
job_state_is (const JobWait *w, VivariumJobState state)
{
  return w->state_known && w->state_value == state;
}

/* Progress and Step are properties: they arrive as PropertiesChanged. */
static void
on_job_properties_changed (GDBusProxy *proxy, GVariant *changed, GStrv invalidated, gpointer user_data)
{
  JobWait *w = user_data;

  if (!w->cancelling)
    vctl_progress_update (w->progress, vivarium_dbus_job_get_percent (w->job), vivarium_dbus_job_get_step (w->job));
}

static void
on_job_finished (VivariumDBusJob *job, const gchar *state, const gchar *message,
                 gpointer user_data)
{
  JobWait *w = user_data;

  job_wait_set_state (w, g_strdup (state));
  g_free (w->message);
  w->message = g_strdup (message);
  g_main_loop_quit (w->loop);
}

/* Without an owner nobody will ever send Finished; waiting on would hang. */
static void
on_job_name_owner (GObject *object, GParamSpec *pspec, gpointer user_data)
{
  JobWait *w = user_data;
  g_autofree gchar *owner = g_dbus_proxy_get_name_owner (G_DBUS_PROXY (object));

  if (owner == NULL) {
    w->vanished = TRUE;
    g_main_loop_quit (w->loop);
  }
}

static void
on_cancel_done (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GVariant) ret = NULL;
  g_autoptr(GError) error = NULL;

  /* The outcome still arrives as Finished; a refusal here (already
   * finished) changes nothing the user has to act on. */
  ret = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  if (ret == NULL)
    g_debug ("Cancel: %s", error->message);
}

/* Ctrl-C asks the daemon to cancel, which removes what was built so far;
 * the client keeps waiting so that it can say how the job ended. */
static gboolean
on_sigint (gpointer user_data)
{
  JobWait *w = user_data;

  if (!w->cancelling) {
    w->cancelling = TRUE;
    vctl_progress_end (w->progress);
    g_printerr ("%s\n", _("Cancelling…"));
    vivarium_dbus_job_call_cancel (w->job, vctl_call_flags (w->ctx), VIVARIUM_CALL_TIMEOUT_DEFAULT, NULL,
                                   on_cancel_done, NULL);
  }
  return G_SOURCE_CONTINUE;
}

static void
job_wait_run (JobWait *w)
{
  guint sigint_id;

  g_signal_connect (w->job, "g-properties-changed", G_CALLBACK (on_job_properties_changed), w);
  g_signal_connect (w->job, "finished", G_CALLBACK (on_job_finished), w);
  g_signal_connect (w->job, "notify::g-name-owner", G_CALLBACK (on_job_name_owner), w);
  sigint_id = g_unix_signal_add (SIGINT, on_sigint, w);
  g_main_loop_run (w->loop);
  g_source_remove (sigint_id);
  g_signal_handlers_disconnect_by_data (w->job, w);
}

static void
job_wait_clear (JobWait *w)
{
  g_clear_pointer (&w->loop, g_main_loop_unref);
  g_clear_pointer (&w->progress, vctl_progress_free);
  g_clear_object (&w->job);
  g_clear_pointer (&w->state, g_free);
  g_clear_pointer (&w->message, g_free);
}

static gboolean
job_outcome (JobWait *w, GError **error)
{
  if (w->vanished) {
    g_set_error_literal (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY,
                         _("The daemon went away before the job finished"));
    return FALSE;
  }
  if (job_state_is (w, VIVARIUM_JOB_STATE_SUCCEEDED))
    return TRUE;
  if (job_state_is (w, VIVARIUM_JOB_STATE_CANCELLED)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED,
                         _("The job was cancelled"));
    return FALSE;
  }
  if (w->message != NULL && w->message[0] != '\0')
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, _("The job failed: %s"),
                 w->message);
  else
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, _("The job ended as “%s”"),
                 w->state != NULL ? w->state : "?");
  return FALSE;
}

static gboolean
wait_for_job (VctlContext *ctx, const gchar *job_path, GError **error)
{
  JobWait w = { 0 };
  gboolean ok;

  w.ctx = ctx;
  w.job = vivarium_dbus_job_proxy_new_sync (ctx->bus, G_DBUS_PROXY_FLAGS_NONE,
                                            VIVARIUM_DBUS_NAME, job_path, NULL, error);
  if (w.job == NULL || !vctl_ensure_properties (ctx, w.job, error)) {
    job_wait_clear (&w);
    return FALSE;
  }
  w.loop = g_main_loop_new (NULL, FALSE);
  w.progress = vctl_progress_new (stdout);
  /* The proxy subscribed to signals before it read the properties, so a
   * job that ended in between shows its final State here instead. */
  job_wait_set_state (&w, vivarium_dbus_job_dup_state (w.job));
  if (job_state_is (&w, VIVARIUM_JOB_STATE_RUNNING)) {
    vctl_progress_update (w.progress, vivarium_dbus_job_get_percent (w.job),
                          vivarium_dbus_job_get_step (w.job));
    job_wait_run (&w);
  } else {
    w.message = vivarium_dbus_job_dup_error_message (w.job);
  }
  if (job_state_is (&w, VIVARIUM_JOB_STATE_SUCCEEDED))
    vctl_progress_update (w.progress, 100, _("Done"));
  vctl_progress_end (w.progress);
  ok = job_outcome (&w, error);
  job_wait_clear (&w);
  return ok;
}

/* The verbs that answer with a Job's path: follow the job to its end. */
static gboolean
build_and_wait (VctlContext *ctx, const gchar *recipe, const gchar *name, GError **error)
{
  g_autofree gchar *job_path = NULL;

  if (!vivarium_dbus_manager_call_build_image_sync (ctx->manager, recipe, name, vctl_call_flags (ctx),
                                                    VIVARIUM_CALL_TIMEOUT_DEFAULT, &job_path, NULL, error))
    return FALSE;
  return wait_for_job (ctx, job_path, error);
}

static gboolean
save_and_wait (VctlContext *ctx, VivariumDBusSession *session, const gchar *name, GError **error)
{
  g_autofree gchar *job_path = NULL;

  if (!vivarium_dbus_session_call_save_as_image_sync (session, name, vctl_call_flags (ctx),
                                                      VIVARIUM_CALL_TIMEOUT_DEFAULT, &job_path, NULL, error))
    return FALSE;
  return wait_for_job (ctx, job_path, error);
}

gboolean
vctl_cmd_image_build (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!build_and_wait (ctx, (*argv)[1], (*argv)[2], error))
    return FALSE;
  shown = vctl_escape_line ((*argv)[2]);
  g_print (_("Built image “%s”.\n"), shown);
  return TRUE;
}

/* The daemon never opens a path for the caller: the client opens the file
 * with its own rights and hands over the descriptor. */
static GUnixFDList *
open_disk (const gchar *file, GError **error)
{
  struct stat st;
  gint fd = open (file, O_RDONLY | O_CLOEXEC | O_NOCTTY);

  if (fd < 0) {
    gint saved = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                 _("Cannot open “%s”: %s"), file, g_strerror (saved));
    return NULL;
  }
  if (fstat (fd, &st) != 0 || S_ISDIR (st.st_mode)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_IS_DIRECTORY,
                 _("“%s” is not a disk image file"), file);
    close (fd);
    return NULL;
  }
  return g_unix_fd_list_new_from_array (&fd, 1);
}

gboolean
vctl_cmd_image_import (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(GUnixFDList) fds = NULL;
  g_autofree gchar *path = NULL;
  g_autofree gchar *name = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error) ||
      !vctl_check_local (ctx, "image import", error))
    return FALSE;
  fds = open_disk ((*argv)[2], error);
  if (fds == NULL)
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  if (!vivarium_dbus_manager_call_import_image_sync (ctx->manager, (*argv)[1], g_variant_new_handle (0),
                                                     vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, fds, &path, NULL,
                                                     NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  g_print (_("Imported image “%s”.\n"), name);
  return TRUE;
}

gboolean
vctl_cmd_image_freeze (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusImage) image = image_from_args (ctx, cmd, argv, error);
  g_autoptr(GVariant) digest = NULL;
  g_autofree gchar *name = NULL;
  g_autofree gchar *shown = NULL;

  if (image == NULL)
    return FALSE;
  /* Hashing a large disk takes longer than the default call timeout. */
  if (!vivarium_dbus_image_call_freeze_sync (image, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  digest = vctl_get_property (ctx, image, "Digest", error);
  if (digest == NULL)
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  shown = vctl_escape_line (g_variant_get_string (digest, NULL));
  g_print (_("Froze image “%s”: %s\n"), name, shown);
  return TRUE;
}

gboolean
vctl_cmd_image_verify (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusImage) image = image_from_args (ctx, cmd, argv, error);
  g_autofree gchar *name = NULL;
  gboolean ok = FALSE;

  if (image == NULL)
    return FALSE;
  if (!vivarium_dbus_image_call_verify_sync (image, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, &ok, NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  /* A mismatch is an answer, not a failure to check; it still has to end
   * in a non-zero status and a name a script can match. */
  if (!ok) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                 _("Image “%s” does not match its recorded digest"), name);
    return FALSE;
  }
  g_print (_("Image “%s” matches its recorded digest.\n"), name);
  return TRUE;
}

gboolean
vctl_cmd_image_delete (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusImage) image = image_from_args (ctx, cmd, argv, error);
  g_autofree gchar *name = NULL;

  if (image == NULL)
    return FALSE;
  if (!vivarium_dbus_image_call_delete_sync (image, vctl_call_flags (ctx), VCTL_TIMEOUT_LONG, NULL, error))
    return FALSE;
  name = vctl_escape_line ((*argv)[1]);
  g_print (_("Deleted image “%s”.\n"), name);
  return TRUE;
}

/* Everything the Image object says, lineage included: where a saved image
 * came from and the commands run in the session it was saved from. */
static void
print_lineage (GVariant *lineage)
{
  GVariantDict d;
  const gchar *parent = "", *digest = "", *session = "";
  gboolean memory = FALSE;
  guint64 total = 0, saved_at = 0;
  g_autofree const gchar **commands = NULL;

  g_variant_dict_init (&d, lineage);
  if (!g_variant_dict_lookup (&d, "parent", "&s", &parent)) {
    g_print ("%-15s %s\n", _("Lineage:"), _("none (built or imported)"));
    g_variant_dict_clear (&d);
    return;
  }
  g_variant_dict_lookup (&d, "parent-digest", "&s", &digest);
  g_variant_dict_lookup (&d, "session", "&s", &session);
  g_variant_dict_lookup (&d, "memory", "b", &memory);
  g_variant_dict_lookup (&d, "commands-total", "t", &total);
  g_variant_dict_lookup (&d, "saved-at", "t", &saved_at);
  g_variant_dict_lookup (&d, "commands", "^a&s", &commands);
  {
    g_autofree gchar *p = vctl_escape_line (parent);
    g_autofree gchar *dg = vctl_escape_line (digest);
    g_autofree gchar *se = vctl_escape_line (session);
    g_autofree gchar *when = vctl_format_time (saved_at);
    g_print ("%-15s %s (%s)\n", _("Parent:"), p, dg);
    g_print ("%-15s %s, %s\n", _("Saved from:"), se, when);
    g_print ("%-15s %s\n", _("Memory saved:"), memory ? _("yes") : _("no"));
    g_print ("%-15s %" G_GUINT64_FORMAT "\n", _("Commands run:"), total);
  }
  for (guint i = 0; commands != NULL && commands[i] != NULL; i++) {
    g_autofree gchar *line = vctl_escape_line (commands[i]);
    g_print ("  %s\n", line);
  }
  g_variant_dict_clear (&d);
}

gboolean
vctl_cmd_image_show (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusImage) image = image_from_args (ctx, cmd, argv, error);
  const gchar *names[] = { "Name", "Frozen", "Digest", "Recipe", "Size", NULL };
  g_autoptr(GVariant) lineage = NULL;

  if (image == NULL)
    return FALSE;
  for (guint i = 0; names[i] != NULL; i++) {
    g_autoptr(GVariant) v = vctl_get_property (ctx, image, names[i], error);
    g_autofree gchar *text = NULL;
    g_autofree gchar *shown = NULL;
    g_autofree gchar *label = g_strdup_printf ("%s:", names[i]);

    if (v == NULL)
      return FALSE;
    text = g_variant_is_of_type (v, G_VARIANT_TYPE_STRING) ? g_variant_dup_string (v, NULL) : g_variant_print (v, FALSE);
    shown = vctl_escape_line (text);
    g_print ("%-15s %s\n", label, shown);
  }
  lineage = vctl_get_property (ctx, image, "Lineage", error);
  if (lineage == NULL)
    return FALSE;
  print_lineage (lineage);
  return TRUE;
}

/* In this file for wait_for_job: the verb is the session's, its result an
 * image. */
gboolean
vctl_cmd_session_save_as_image (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autofree gchar *path = NULL;
  g_autoptr(VivariumDBusSession) session = NULL;
  g_autofree gchar *shown = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, FALSE, argv, 2, 2, error) || !vctl_connect (ctx, error))
    return FALSE;
  path = vctl_find_object (ctx, vivarium_dbus_manager_call_list_sessions_sync,
                           VIVARIUM_DBUS_PATH_SESSIONS, _("session"), (*argv)[1], error);
  if (path == NULL)
    return FALSE;
  session = vivarium_dbus_session_proxy_new_sync (ctx->bus, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                                                  G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                                  VIVARIUM_DBUS_NAME, path, NULL, error);
  if (session == NULL)
    return FALSE;
  if (!save_and_wait (ctx, session, (*argv)[2], error))
    return FALSE;
  shown = vctl_escape_line ((*argv)[2]);
  g_print (_("Saved the session as the frozen image “%s”.\n"), shown);
  return TRUE;
}
