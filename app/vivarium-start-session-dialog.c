/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-start-session-dialog.h"

#include <glib/gi18n.h>

#include "vivarium-proxy-list.h"
#include "vivarium-submit-form.h"
#include "vivarium-util.h"

/* StartSession answers once the guest agent does, after a password prompt
 * perhaps (the daemon allows that 5 min). */
#define START_TIMEOUT_MS (10 * 60 * 1000)

struct _VivariumStartSessionDialog {
  AdwWindow          parent_instance;

  GtkDropDown       *image_dropdown;
  GtkEditable       *memory_entry;
  GtkEditable       *cpus_entry;
  GtkEditable       *timeout_entry;
  GtkDropDown       *egress_dropdown;
  GtkEditable       *groups_entry;
  GtkEditable       *secrets_entry;
  GtkEditable       *ssh_keys_entry;
  GtkLabel          *status_label;
  GtkLabel          *error_label;
  GtkWidget         *submit_button;

  VivariumClient    *client;
  VivariumProxyList *images;
  GCancellable      *cancellable;
  gboolean           starting;
};

G_DEFINE_FINAL_TYPE (VivariumStartSessionDialog, vivarium_start_session_dialog, ADW_TYPE_WINDOW)

enum { STARTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const char *
frozen_image_name (gpointer proxy)
{
  VivariumDBusImage *image = VIVARIUM_DBUS_IMAGE (proxy);

  return vivarium_dbus_image_get_frozen (image) ? vivarium_dbus_image_get_name (image) : NULL;
}

static VivariumSessionForm
read_form (VivariumStartSessionDialog *self)
{
  VivariumSessionForm form = {
    .image = vivarium_dropdown_get_name (self->image_dropdown),
    .memory = gtk_editable_get_text (self->memory_entry),
    .cpus = gtk_editable_get_text (self->cpus_entry),
    .timeout = gtk_editable_get_text (self->timeout_entry),
    .egress = vivarium_egress_mode_at (gtk_drop_down_get_selected (self->egress_dropdown)),
    .groups = gtk_editable_get_text (self->groups_entry),
    .secrets = gtk_editable_get_text (self->secrets_entry),
    .ssh_keys = gtk_editable_get_text (self->ssh_keys_entry),
  };

  return form;
}

static void
validate (VivariumStartSessionDialog *self)
{
  VivariumSessionForm form = read_form (self);
  g_autofree char *why = vivarium_session_form_check (&form);

  if (self->starting)
    gtk_label_set_text (self->status_label, _("Starting… the session is ready when its guest answers."));
  else
    gtk_label_set_text (self->status_label, why != NULL ? why : _("Ready to start."));
  gtk_widget_remove_css_class (GTK_WIDGET (self->status_label), why != NULL ? "success" : "error");
  gtk_widget_add_css_class (GTK_WIDGET (self->status_label), why != NULL ? "error" : "success");
  gtk_widget_set_sensitive (self->submit_button, why == NULL && !self->starting);
}

static void
start_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumStartSessionDialog) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  const char *path = NULL;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  self->starting = FALSE;
  if (reply == NULL) {
    g_autofree char *why = vivarium_client_describe_error (error);
    g_autofree char *plain = vivarium_plain_text (why, 600);
    g_autofree char *text = g_strdup_printf (_("The service did not start the session: %s"), plain);

    gtk_label_set_text (self->error_label, text);
    gtk_widget_set_visible (GTK_WIDGET (self->error_label), TRUE);
    validate (self);
    return;
  }
  g_variant_get (reply, "(&o)", &path);
  g_signal_emit (self, signals[STARTED], 0, path);
  gtk_window_close (GTK_WINDOW (self));
}

static void
submit_clicked_cb (VivariumStartSessionDialog *self)
{
  VivariumDBusManager *manager = vivarium_client_get_manager (self->client);
  VivariumSessionForm form = read_form (self);
  g_autofree char *why = vivarium_session_form_check (&form);

  if (why != NULL || manager == NULL || self->starting)
    return;
  self->starting = TRUE;
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), FALSE);
  validate (self);
  /* No project: a session from the Images page is a machine to try
   * things on; a task's session is the task's. */
  vivarium_dbus_manager_call_start_session (manager, "", form.image, vivarium_session_form_options (&form),
                                            vivarium_call_flags (TRUE), START_TIMEOUT_MS, self->cancellable,
                                            start_done_cb, g_object_ref (self));
}

static void
cancel_clicked_cb (VivariumStartSessionDialog *self)
{
  gtk_window_close (GTK_WINDOW (self));
}

static void
vivarium_start_session_dialog_dispose (GObject *object)
{
  VivariumStartSessionDialog *self = VIVARIUM_START_SESSION_DIALOG (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_START_SESSION_DIALOG);
  g_clear_object (&self->images);
  g_clear_object (&self->client);
  G_OBJECT_CLASS (vivarium_start_session_dialog_parent_class)->dispose (object);
}

static void
vivarium_start_session_dialog_class_init (VivariumStartSessionDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_start_session_dialog_dispose;
  signals[STARTED] = g_signal_new ("started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                   NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/org/vivarium/Vivarium/vivarium-start-session-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, image_dropdown);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, memory_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, cpus_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, timeout_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, egress_dropdown);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, groups_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, secrets_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, ssh_keys_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, status_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, error_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumStartSessionDialog, submit_button);
  gtk_widget_class_bind_template_callback (widget_class, submit_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, cancel_clicked_cb);
  /* A dialog: Escape closes it, as it would an AdwMessageDialog. */
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
vivarium_start_session_dialog_init (VivariumStartSessionDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
  g_signal_connect_swapped (self->image_dropdown, "notify::selected", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->memory_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->cpus_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->timeout_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->egress_dropdown, "notify::selected", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->groups_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->secrets_entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (self->ssh_keys_entry, "changed", G_CALLBACK (validate), self);
}

VivariumStartSessionDialog *
vivarium_start_session_dialog_new (GtkWindow *parent, VivariumClient *client, const char *image)
{
  VivariumStartSessionDialog *self = g_object_new (VIVARIUM_TYPE_START_SESSION_DIALOG, "transient-for", parent,
                                                   NULL);
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  self->client = g_object_ref (client);
  if (manager != NULL) {
    self->images = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_IMAGES);
    vivarium_bind_name_dropdown (self->image_dropdown, G_LIST_MODEL (self->images), frozen_image_name, image);
  }
  validate (self);
  return self;
}
