/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-add-host-dialog.h"

#include <glib/gi18n.h>

#include "vivarium-util.h"

struct _VivariumAddHostDialog {
  AdwWindow         parent_instance;

  GtkEditable      *user_entry;
  GtkEditable      *host_entry;
  GtkLabel         *error_label;
  GtkWidget        *add_button;

  VivariumHostList *hosts;
};

G_DEFINE_FINAL_TYPE (VivariumAddHostDialog, vivarium_add_host_dialog, ADW_TYPE_WINDOW)

enum { ADDED, N_SIGNALS };
static guint signals[N_SIGNALS];

/* "[USER@]HOST" from the two fields, as ssh takes it. */
static char *
destination (VivariumAddHostDialog *self)
{
  g_autofree char *user = g_strstrip (g_strdup (gtk_editable_get_text (self->user_entry)));
  g_autofree char *host = g_strstrip (g_strdup (gtk_editable_get_text (self->host_entry)));

  if (user[0] == '\0')
    return g_steal_pointer (&host);
  return g_strdup_printf ("%s@%s", user, host);
}

static void
show_error (VivariumAddHostDialog *self, const char *text)
{
  /* Plain text: it quotes what was typed. */
  gtk_label_set_text (self->error_label, text != NULL ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), text != NULL);
}

static void
changed_cb (VivariumAddHostDialog *self)
{
  show_error (self, NULL);
  gtk_widget_set_sensitive (self->add_button, gtk_editable_get_text (self->host_entry)[0] != '\0');
}

static void
add_clicked_cb (VivariumAddHostDialog *self)
{
  g_autofree char *dest = destination (self);
  g_autoptr(GError) error = NULL;
  VivariumClient *client = vivarium_host_list_add (self->hosts, dest, &error);

  if (client == NULL) {
    show_error (self, error->message);
    return;
  }
  g_signal_emit (self, signals[ADDED], 0, client);
  gtk_window_close (GTK_WINDOW (self));
}

static void
cancel_clicked_cb (VivariumAddHostDialog *self)
{
  gtk_window_close (GTK_WINDOW (self));
}

static void
vivarium_add_host_dialog_dispose (GObject *object)
{
  VivariumAddHostDialog *self = VIVARIUM_ADD_HOST_DIALOG (object);

  g_clear_object (&self->hosts);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_ADD_HOST_DIALOG);
  G_OBJECT_CLASS (vivarium_add_host_dialog_parent_class)->dispose (object);
}

static void
vivarium_add_host_dialog_class_init (VivariumAddHostDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_add_host_dialog_dispose;
  signals[ADDED] = g_signal_new ("added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                 NULL, G_TYPE_NONE, 1, VIVARIUM_TYPE_CLIENT);
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-add-host-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumAddHostDialog, user_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumAddHostDialog, host_entry);
  gtk_widget_class_bind_template_child (widget_class, VivariumAddHostDialog, error_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumAddHostDialog, add_button);
  gtk_widget_class_bind_template_callback (widget_class, add_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, cancel_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, changed_cb);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
vivarium_add_host_dialog_init (VivariumAddHostDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  changed_cb (self);
}

VivariumAddHostDialog *
vivarium_add_host_dialog_new (GtkWindow *parent, VivariumHostList *hosts)
{
  VivariumAddHostDialog *self = g_object_new (VIVARIUM_TYPE_ADD_HOST_DIALOG, "transient-for", parent, NULL);

  self->hosts = g_object_ref (hosts);
  return self;
}
