/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-host-switcher.h"

#include <glib/gi18n.h>

struct _VivariumHostSwitcher {
  GtkWidget         parent_instance;

  GtkMenuButton    *menu_button;
  GtkLabel         *button_label;
  GtkPopover       *popover;
  GtkListBox       *host_list;

  VivariumHostList *hosts;
  VivariumClient   *shown;
  gboolean          selecting;  /* the selection is ours, not the user's */
};

G_DEFINE_FINAL_TYPE (VivariumHostSwitcher, vivarium_host_switcher, GTK_TYPE_WIDGET)

enum { SELECTED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const char *
state_text (VivariumClient *client)
{
  switch (vivarium_client_get_state (client)) {
  case VIVARIUM_CLIENT_CONNECTED:     return _("Connected");
  case VIVARIUM_CLIENT_CONNECTING:    return _("Connecting…");
  case VIVARIUM_CLIENT_RESTARTING:    return _("Reconnecting…");
  case VIVARIUM_CLIENT_NOT_INSTALLED: return _("Not installed");
  case VIVARIUM_CLIENT_NOT_RUNNING:   return _("Not running");
  case VIVARIUM_CLIENT_NO_BUS:        return _("No system bus");
  case VIVARIUM_CLIENT_UNREACHABLE:   return _("Cannot be reached");
  default:                            g_assert_not_reached ();
  }
}

/* A host not yet shown has not connected: it says nothing yet. */
static void
client_state_cb (VivariumClient *client, GtkLabel *label)
{
  gtk_label_set_text (label, vivarium_client_is_started (client) ? state_text (client) : "");
}

static GtkWidget *
create_row (gpointer item, gpointer user_data)
{
  VivariumClient *client = item;
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  /* Plain text: a host name comes from the user's file. */
  GtkWidget *name = gtk_label_new (vivarium_client_get_display_name (client));
  GtkWidget *state = gtk_label_new (NULL);
  GtkWidget *row = gtk_list_box_row_new ();

  gtk_label_set_xalign (GTK_LABEL (name), 0);
  gtk_label_set_ellipsize (GTK_LABEL (name), PANGO_ELLIPSIZE_MIDDLE);
  gtk_label_set_xalign (GTK_LABEL (state), 0);
  gtk_widget_add_css_class (state, "dim-label");
  gtk_widget_add_css_class (state, "caption");
  client_state_cb (client, GTK_LABEL (state));
  g_signal_connect_object (client, "state-changed", G_CALLBACK (client_state_cb), state, 0);
  gtk_box_append (GTK_BOX (box), name);
  gtk_box_append (GTK_BOX (box), state);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  gtk_accessible_update_property (GTK_ACCESSIBLE (row), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  vivarium_client_get_display_name (client), -1);
  g_object_set_data_full (G_OBJECT (row), "client", g_object_ref (client), g_object_unref);
  return row;
}

static void
row_selected_cb (VivariumHostSwitcher *self, GtkListBoxRow *row)
{
  VivariumClient *client = row != NULL ? g_object_get_data (G_OBJECT (row), "client") : NULL;

  if (client == NULL || self->selecting || client == self->shown)
    return;
  gtk_popover_popdown (self->popover);
  g_signal_emit (self, signals[SELECTED], 0, client);
}

static void
add_clicked_cb (VivariumHostSwitcher *self)
{
  gtk_popover_popdown (self->popover);
}

static void
select_row (VivariumHostSwitcher *self)
{
  GtkListBoxRow *row;

  self->selecting = TRUE;
  for (gint i = 0; (row = gtk_list_box_get_row_at_index (self->host_list, i)) != NULL; i++) {
    if (g_object_get_data (G_OBJECT (row), "client") == self->shown) {
      gtk_list_box_select_row (self->host_list, row);
      break;
    }
  }
  self->selecting = FALSE;
}

static void
hosts_changed_cb (VivariumHostSwitcher *self)
{
  select_row (self);
}

void
vivarium_host_switcher_set_hosts (VivariumHostSwitcher *self, VivariumHostList *hosts)
{
  g_return_if_fail (self->hosts == NULL);

  self->hosts = g_object_ref (hosts);
  gtk_list_box_bind_model (self->host_list, G_LIST_MODEL (hosts), create_row, NULL, NULL);
  g_signal_connect_object (hosts, "items-changed", G_CALLBACK (hosts_changed_cb), self,
                           G_CONNECT_SWAPPED | G_CONNECT_AFTER);
}

/* Shows @client as the chosen host, without emitting "selected". */
void
vivarium_host_switcher_select (VivariumHostSwitcher *self, VivariumClient *client)
{
  g_set_object (&self->shown, client);
  gtk_label_set_text (self->button_label, vivarium_client_get_display_name (client));
  select_row (self);
}

static void
vivarium_host_switcher_dispose (GObject *object)
{
  VivariumHostSwitcher *self = VIVARIUM_HOST_SWITCHER (object);

  g_clear_object (&self->shown);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_HOST_SWITCHER);
  g_clear_object (&self->hosts);
  G_OBJECT_CLASS (vivarium_host_switcher_parent_class)->dispose (object);
}

static void
vivarium_host_switcher_class_init (VivariumHostSwitcherClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_host_switcher_dispose;
  signals[SELECTED] = g_signal_new ("selected", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                    NULL, G_TYPE_NONE, 1, VIVARIUM_TYPE_CLIENT);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-host-switcher.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumHostSwitcher, menu_button);
  gtk_widget_class_bind_template_child (widget_class, VivariumHostSwitcher, button_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumHostSwitcher, popover);
  gtk_widget_class_bind_template_child (widget_class, VivariumHostSwitcher, host_list);
  gtk_widget_class_bind_template_callback (widget_class, row_selected_cb);
  gtk_widget_class_bind_template_callback (widget_class, add_clicked_cb);
}

static void
vivarium_host_switcher_init (VivariumHostSwitcher *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
