/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-egress-row.h"

#include <glib/gi18n.h>

#include "vivarium-util.h"

struct _VivariumEgressRow {
  AdwActionRow  parent_instance;
  GtkLabel     *verdict_label;
  VivariumEgressEntry *entry;
};

G_DEFINE_FINAL_TYPE (VivariumEgressRow, vivarium_egress_row, ADW_TYPE_ACTION_ROW)

/* "3 minutes ago · via tls · …", kept true each minute; the exact time in
 * the tooltip. Every other text comes formatted, plain and capped from the
 * entry. */
static void
refresh_egress_row (GtkWidget *widget)
{
  VivariumEgressRow *self = VIVARIUM_EGRESS_ROW (widget);
  VivariumEgressEntry *entry = self->entry;
  g_autofree char *when = vivarium_time_relative (vivarium_egress_entry_get_time_usec (entry));
  /* TRANSLATORS: time · how the guest came (proxy, http, tls, dns) · bytes · duration, then the reason. */
  g_autofree char *subtitle = g_strdup_printf (_("%s · via %s · %s · %s\n%s"),
                                               when,
                                               vivarium_egress_entry_get_via (entry),
                                               vivarium_egress_entry_get_bytes (entry),
                                               vivarium_egress_entry_get_duration (entry),
                                               vivarium_egress_entry_get_reason (entry));

  adw_action_row_set_subtitle (ADW_ACTION_ROW (self), subtitle);
  gtk_widget_set_tooltip_text (widget, vivarium_egress_entry_get_time (entry));
}

GtkWidget *
vivarium_egress_row_new (VivariumEgressEntry *entry)
{
  VivariumEgressRow *self = g_object_new (VIVARIUM_TYPE_EGRESS_ROW, NULL);

  self->entry = g_object_ref (entry);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self), vivarium_egress_entry_get_destination (entry));
  gtk_label_set_text (self->verdict_label, vivarium_egress_entry_get_verdict_label (entry));
  gtk_widget_add_css_class (GTK_WIDGET (self->verdict_label), vivarium_egress_entry_get_verdict_class (entry));
  vivarium_refresh_each_minute (GTK_WIDGET (self), refresh_egress_row);
  return GTK_WIDGET (self);
}

static void
vivarium_egress_row_dispose (GObject *object)
{
  g_clear_object (&VIVARIUM_EGRESS_ROW (object)->entry);
  gtk_widget_dispose_template (GTK_WIDGET (object), VIVARIUM_TYPE_EGRESS_ROW);
  G_OBJECT_CLASS (vivarium_egress_row_parent_class)->dispose (object);
}

static void
vivarium_egress_row_class_init (VivariumEgressRowClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  G_OBJECT_CLASS (klass)->dispose = vivarium_egress_row_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-egress-row.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumEgressRow, verdict_label);
}

static void
vivarium_egress_row_init (VivariumEgressRow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
