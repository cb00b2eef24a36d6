/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-application.h"
#include "vivarium-window.h"

#include <glib/gi18n.h>

struct _VivariumApplication {
  AdwApplication parent_instance;
};

G_DEFINE_FINAL_TYPE (VivariumApplication, vivarium_application, ADW_TYPE_APPLICATION)

static void
vivarium_application_activate (GApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));

  if (window == NULL)
    window = GTK_WINDOW (vivarium_window_new (ADW_APPLICATION (app)));
  gtk_window_present (window);
}

static void
about_cb (GSimpleAction *action, GVariant *parameter, gpointer user_data)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (user_data));
  const char *developers[] = { "The Vivarium developers", NULL };

  adw_show_about_window (window,
                         "application-name", _("Vivarium"),
                         "application-icon", VIVARIUM_APP_ID,
                         "version", PACKAGE_VERSION,
                         "comments", _("Throwaway machines for untrusted workers, and proof of what they did"),
                         "developers", developers,
                         "license-type", GTK_LICENSE_LGPL_2_1,
                         NULL);
}

static void
quit_cb (GSimpleAction *action, GVariant *parameter, gpointer user_data)
{
  g_application_quit (G_APPLICATION (user_data));
}

static const GActionEntry app_actions[] = {
  { .name = "about", .activate = about_cb },
  { .name = "quit", .activate = quit_cb },
};

/* Every accelerator of the app, in one place: the shortcuts window
 * (gtk/help-overlay.ui) names these actions and shows what is bound here. */
static const struct {
  const char *action;
  const char *accels[3];
} app_accels[] = {
  { "app.quit", { "<Control>q", NULL } },
  { "window.close", { "<Control>w", NULL } },
  { "win.show-help-overlay", { "<Control>question", NULL } },
  { "win.show-page::sessions", { "<Control>1", NULL } },
  { "win.show-page::images", { "<Control>2", NULL } },
  { "win.show-page::projects", { "<Control>3", NULL } },
  { "win.show-page::tasks", { "<Control>4", NULL } },
  { "win.show-page::reports", { "<Control>5", NULL } },
  { "win.show-page::selftest", { "<Control>6", NULL } },
  { "win.new-task::", { "<Control>n", NULL } },
  { "win.start-session::", { "<Control><Shift>n", NULL } },
};

/* Saved while the windows still exist: Quit ends the app without closing
 * them (no close-request). */
static void
vivarium_application_shutdown (GApplication *app)
{
  for (GList *l = gtk_application_get_windows (GTK_APPLICATION (app)); l != NULL; l = l->next)
    if (VIVARIUM_IS_WINDOW (l->data))
      vivarium_window_save_state (l->data);
  G_APPLICATION_CLASS (vivarium_application_parent_class)->shutdown (app);
}

static void
vivarium_application_startup (GApplication *app)
{
  G_APPLICATION_CLASS (vivarium_application_parent_class)->startup (app);
  g_action_map_add_action_entries (G_ACTION_MAP (app), app_actions, G_N_ELEMENTS (app_actions), app);
  for (guint i = 0; i < G_N_ELEMENTS (app_accels); i++)
    gtk_application_set_accels_for_action (GTK_APPLICATION (app), app_accels[i].action, app_accels[i].accels);
  /* Dark mode follows the desktop (AdwStyleManager's default). */
  adw_style_manager_set_color_scheme (adw_style_manager_get_default (), ADW_COLOR_SCHEME_DEFAULT);
}

static void
vivarium_application_class_init (VivariumApplicationClass *klass)
{
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  app_class->activate = vivarium_application_activate;
  app_class->startup = vivarium_application_startup;
  app_class->shutdown = vivarium_application_shutdown;
}

static void
vivarium_application_init (VivariumApplication *self)
{
}

VivariumApplication *
vivarium_application_new (void)
{
  return g_object_new (VIVARIUM_TYPE_APPLICATION,
                       "application-id", VIVARIUM_APP_ID,
                       "flags", G_APPLICATION_DEFAULT_FLAGS,
                       "resource-base-path", "/org/vivarium/Vivarium",
                       NULL);
}
