/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-new-task-dialog.h"

#include <glib/gi18n.h>

#include "vivarium-names.h"
#include "vivarium-proxy-list.h"
#include "vivarium-submit-form.h"
#include "vivarium-util.h"

/* SubmitTask boots the work session before it answers, and may first wait
 * for a password prompt (the daemon allows that 5 min). */
#define SUBMIT_TIMEOUT_MS (15 * 60 * 1000)

struct _VivariumNewTaskDialog {
  AdwWindow          parent_instance;

  GtkDropDown       *project_dropdown;
  GtkDropDown       *image_dropdown;
  GtkToggleButton   *agent_check;
  GtkToggleButton   *script_check;
  GtkLabel          *worker_label;
  GtkWidget         *instructions_box;
  GtkTextView       *instructions_view;
  GtkWidget         *script_box;
  GtkEditable       *script_entry;
  GtkEditable       *verify_entry;
  GtkEditable       *timeout_entry;
  GtkDropDown       *egress_dropdown;
  GtkEditable       *groups_entry;
  GtkEditable       *secrets_entry;
  GtkEditable       *ssh_keys_entry;
  GtkLabel          *status_label;
  GtkLabel          *error_label;
  GtkWidget         *submit_button;

  VivariumClient    *client;
  VivariumProxyList *projects;
  VivariumProxyList *images;
  GBytes            *script;        /* the chosen file's bytes */
  char              *script_error;  /* why they could not be read */
  GCancellable      *cancellable;
  gboolean           submitting;
};

G_DEFINE_FINAL_TYPE (VivariumNewTaskDialog, vivarium_new_task_dialog, ADW_TYPE_WINDOW)

enum { SUBMITTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const char *
project_name (gpointer proxy)
{
  return vivarium_dbus_project_get_name (VIVARIUM_DBUS_PROJECT (proxy));
}

/* Only a frozen image can carry a task: the others are not offered. */
static const char *
frozen_image_name (gpointer proxy)
{
  VivariumDBusImage *image = VIVARIUM_DBUS_IMAGE (proxy);

  return vivarium_dbus_image_get_frozen (image) ? vivarium_dbus_image_get_name (image) : NULL;
}

static char *
instructions_text (VivariumNewTaskDialog *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->instructions_view);
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

static VivariumSubmitWorker
chosen_worker (VivariumNewTaskDialog *self)
{
  return gtk_toggle_button_get_active (self->script_check) ? VIVARIUM_SUBMIT_WORKER_SCRIPT
                                                          : VIVARIUM_SUBMIT_WORKER_AGENT;
}

/* The form as typed; the strings belong to the widgets (and @instructions
 * to the caller), valid until the next change. */
static VivariumTaskForm
read_form (VivariumNewTaskDialog *self, const char *instructions)
{
  VivariumTaskForm form = {
    .project = vivarium_dropdown_get_name (self->project_dropdown),
    .image = vivarium_dropdown_get_name (self->image_dropdown),
    .worker = chosen_worker (self),
    .instructions = instructions,
    .script = self->script,
    .script_error = self->script_error,
    .verify = gtk_editable_get_text (self->verify_entry),
    .timeout = gtk_editable_get_text (self->timeout_entry),
    .egress = vivarium_egress_mode_at (gtk_drop_down_get_selected (self->egress_dropdown)),
    .groups = gtk_editable_get_text (self->groups_entry),
    .secrets = gtk_editable_get_text (self->secrets_entry),
    .ssh_keys = gtk_editable_get_text (self->ssh_keys_entry),
  };

  return form;
}

/* As the person types: Submit is offered only for a request the service
 * will not refuse for its form, and the reason is said when it is not. */
static void
validate (VivariumNewTaskDialog *self)
{
  g_autofree char *instructions = instructions_text (self);
  VivariumTaskForm form = read_form (self, instructions);
  g_autofree char *why = vivarium_task_form_check (&form);
  gboolean script = form.worker == VIVARIUM_SUBMIT_WORKER_SCRIPT;

  gtk_widget_set_visible (self->script_box, script);
  gtk_label_set_text (self->worker_label,
                      script ? _("Your program, run on the host in its own unit; it acts through vivariumctl’s worker verbs, and is given the instructions too.")
                             : _("vivarium-agent, the model loop: it follows your instructions, reaching its model only through the gateway."));
  if (self->submitting) {
    gtk_label_set_text (self->status_label, _("Submitting… the service boots the work machine first."));
  } else {
    gtk_label_set_text (self->status_label, why != NULL ? why : _("Ready to submit."));
  }
  gtk_widget_remove_css_class (GTK_WIDGET (self->status_label), why != NULL ? "success" : "error");
  gtk_widget_add_css_class (GTK_WIDGET (self->status_label), why != NULL ? "error" : "success");
  gtk_widget_set_sensitive (self->submit_button, why == NULL && !self->submitting);
}

/* --- the script file ------------------------------------------------------
 * Read here, with the user's rights, and sent as bytes: the service never
 * opens the user's path. Only a regular file, and only up to the cap. */

static GBytes *
read_script_file (const char *path, char **why)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GError) error = NULL;
  g_autoptr(GFileInfo) info = NULL;
  g_autoptr(GFileInputStream) in = NULL;
  g_autoptr(GBytes) bytes = NULL;

  info = g_file_query_info (file, G_FILE_ATTRIBUTE_STANDARD_TYPE "," G_FILE_ATTRIBUTE_STANDARD_SIZE,
                            G_FILE_QUERY_INFO_NONE, NULL, &error);
  if (info == NULL) {
    *why = g_strdup_printf (_("Cannot read the script: %s"), error->message);
    return NULL;
  }
  /* A FIFO or a device would block or never end. */
  if (g_file_info_get_file_type (info) != G_FILE_TYPE_REGULAR) {
    *why = g_strdup (_("The script must be a regular file."));
    return NULL;
  }
  if (g_file_info_get_size (info) > VIVARIUM_TASK_SCRIPT_MAX) {
    *why = g_strdup_printf (_("The script is larger than %u MiB."), (guint) (VIVARIUM_TASK_SCRIPT_MAX >> 20));
    return NULL;
  }
  in = g_file_read (file, NULL, &error);
  if (in != NULL)
    bytes = g_input_stream_read_bytes (G_INPUT_STREAM (in), VIVARIUM_TASK_SCRIPT_MAX + 1, NULL, &error);
  if (bytes == NULL) {
    *why = g_strdup_printf (_("Cannot read the script: %s"), error->message);
    return NULL;
  }
  return g_steal_pointer (&bytes);
}

static void
script_path_changed_cb (VivariumNewTaskDialog *self)
{
  const char *path = gtk_editable_get_text (self->script_entry);

  g_clear_pointer (&self->script, g_bytes_unref);
  g_clear_pointer (&self->script_error, g_free);
  if (*path == '\0')
    ;  /* nothing chosen: the form says so */
  else if (!g_path_is_absolute (path))
    self->script_error = g_strdup (_("Give the script’s full path, starting with “/”."));
  else
    self->script = read_script_file (path, &self->script_error);
  validate (self);
}

static void
chooser_response_cb (GtkNativeDialog *chooser, int response, gpointer user_data)
{
  VivariumNewTaskDialog *self = user_data;

  if (response == GTK_RESPONSE_ACCEPT) {
    g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
    g_autofree char *path = file != NULL ? g_file_get_path (file) : NULL;

    if (path != NULL)
      gtk_editable_set_text (self->script_entry, path);
  }
  gtk_native_dialog_destroy (chooser);
  g_object_unref (chooser);
  g_object_unref (self);
}

static void
choose_clicked_cb (VivariumNewTaskDialog *self)
{
  GtkFileChooserNative *chooser = gtk_file_chooser_native_new (_("Choose the Worker Script"), GTK_WINDOW (self),
                                                               GTK_FILE_CHOOSER_ACTION_OPEN, _("_Choose"),
                                                               _("_Cancel"));

  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (chooser_response_cb), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

/* --- submitting ------------------------------------------------------------ */

static void
show_error (VivariumNewTaskDialog *self, const GError *error)
{
  g_autofree char *why = vivarium_client_describe_error (error);
  g_autofree char *plain = vivarium_plain_text (why, 600);
  g_autofree char *text = g_strdup_printf (_("The service did not take the task: %s"), plain);

  gtk_label_set_text (self->error_label, text);
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), TRUE);
}

static void
submit_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumNewTaskDialog) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  const char *path = NULL;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  self->submitting = FALSE;
  if (reply == NULL) {
    show_error (self, error);
    validate (self);
    return;
  }
  g_variant_get (reply, "(&o)", &path);
  g_signal_emit (self, signals[SUBMITTED], 0, path);
  gtk_window_close (GTK_WINDOW (self));
}

static void
submit_clicked_cb (VivariumNewTaskDialog *self)
{
  VivariumDBusManager *manager = vivarium_client_get_manager (self->client);
  g_autofree char *instructions = instructions_text (self);
  VivariumTaskForm form = read_form (self, instructions);
  g_autofree char *why = vivarium_task_form_check (&form);

  if (why != NULL || manager == NULL || self->submitting)
    return;
  self->submitting = TRUE;
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), FALSE);
  validate (self);
  /* Interactive: the desktop's polkit agent may ask for a password. */
  vivarium_dbus_manager_call_submit_task (manager, form.project, form.image, instructions,
                                          vivarium_task_form_options (&form), vivarium_call_flags (TRUE),
                                          SUBMIT_TIMEOUT_MS, self->cancellable, submit_done_cb, g_object_ref (self));
}

static void
cancel_clicked_cb (VivariumNewTaskDialog *self)
{
  gtk_window_close (GTK_WINDOW (self));
}

/* --- the object ------------------------------------------------------------- */

static void
vivarium_new_task_dialog_dispose (GObject *object)
{
  VivariumNewTaskDialog *self = VIVARIUM_NEW_TASK_DIALOG (object);

  /* A submit under way goes on in the service; only its answer is dropped. */
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_NEW_TASK_DIALOG);
  g_clear_object (&self->projects);
  g_clear_object (&self->images);
  g_clear_object (&self->client);
  g_clear_pointer (&self->script, g_bytes_unref);
  g_clear_pointer (&self->script_error, g_free);
  G_OBJECT_CLASS (vivarium_new_task_dialog_parent_class)->dispose (object);
}

static void
vivarium_new_task_dialog_class_init (VivariumNewTaskDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_new_task_dialog_dispose;
  signals[SUBMITTED] = g_signal_new ("submitted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                     NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-new-task-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, project_dropdown);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, image_dropdown);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, agent_check);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, script_check);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, worker_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, instructions_box);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, instructions_view);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, script_box);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, script_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, verify_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, timeout_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, egress_dropdown);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, groups_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, secrets_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, ssh_keys_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, status_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, error_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumNewTaskDialog, submit_button);
  gtk_widget_class_bind_template_callback (widget_class, submit_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, cancel_clicked_cb);
  /* A dialog: Escape closes it, as it would an AdwMessageDialog. */
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
  gtk_widget_class_bind_template_callback (widget_class, choose_clicked_cb);
}

static void
vivarium_new_task_dialog_init (VivariumNewTaskDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
  g_signal_connect_swapped (self->project_dropdown, "notify::selected", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->image_dropdown, "notify::selected", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->agent_check, "toggled", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->script_check, "toggled", G_CALLBACK (validate), self);
  g_signal_connect_swapped (gtk_text_view_get_buffer (self->instructions_view), "changed",
                            G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->script_entry, "changed", G_CALLBACK (script_path_changed_cb), self);
  g_signal_connect_swapped (self->verify_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->timeout_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->egress_dropdown, "notify::selected", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->groups_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->secrets_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->ssh_keys_entry, "changed", G_CALLBACK (validate), self);
}

VivariumNewTaskDialog *
vivarium_new_task_dialog_new (GtkWindow *parent, VivariumClient *client, const char *project)
{
  VivariumNewTaskDialog *self = g_object_new (VIVARIUM_TYPE_NEW_TASK_DIALOG, "transient-for", parent, NULL);
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  self->client = g_object_ref (client);
  if (manager != NULL) {
    /* Lists of its own: they load while the dialog opens, and follow
     * projects and images that appear or are frozen meanwhile. */
    self->projects = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_PROJECTS);
    self->images = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_IMAGES);
    vivarium_bind_name_dropdown (self->project_dropdown, G_LIST_MODEL (self->projects), project_name, project);
    vivarium_bind_name_dropdown (self->image_dropdown, G_LIST_MODEL (self->images), frozen_image_name, NULL);
  }
  validate (self);
  return self;
}
