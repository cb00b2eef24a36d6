/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-window.h"

#include <glib/gi18n.h>
#include <polkit/polkit.h>

#include "vivarium-add-host-dialog.h"
#include "vivarium-client.h"
#include "vivarium-host-list.h"
#include "vivarium-host-switcher.h"
#include "vivarium-images-page.h"
#include "vivarium-new-task-dialog.h"
#include "vivarium-projects-page.h"
#include "vivarium-reports-page.h"
#include "vivarium-selftest-page.h"
#include "vivarium-sessions-page.h"
#include "vivarium-start-session-dialog.h"
#include "vivarium-tasks-page.h"
#include "vivarium-util.h"
#include "vivarium-window-state.h"

/* The lock bar follows one admin action: whoever may stop sessions is, by
 * the shipped policy, the administrator of the other verbs too. */
#define ADMIN_ACTION "org.vivarium.vivarium1.session-stop"

struct _VivariumWindow {
  AdwApplicationWindow  parent_instance;

  AdwToastOverlay      *toast_overlay;
  GtkRevealer          *lock_revealer;
  GtkLabel             *lock_label;
  GtkButton            *unlock_button;
  GtkStack             *main_stack;
  AdwViewSwitcherTitle *switcher_title;
  AdwViewSwitcherBar   *switcher_bar;
  AdwViewStack         *view_stack;
  AdwStatusPage        *status_page;
  GtkSpinner           *status_spinner;
  GtkButton            *retry_button;
  VivariumSessionsPage *sessions_page;
  VivariumImagesPage   *images_page;
  VivariumSelftestPage *selftest_page;
  VivariumProjectsPage *projects_page;
  VivariumTasksPage    *tasks_page;
  VivariumReportsPage  *reports_page;
  VivariumHostSwitcher *host_switcher;

  VivariumHostList     *hosts;
  VivariumClient       *client;     /* the host shown, one of hosts */
  GPermission          *permission;
  GCancellable         *cancellable;
};

G_DEFINE_FINAL_TYPE (VivariumWindow, vivarium_window, ADW_TYPE_APPLICATION_WINDOW)

static void
show_status (VivariumWindow *self, const char *icon, const char *title,
             const char *description, gboolean busy, gboolean can_retry)
{
  adw_status_page_set_icon_name (self->status_page, icon);
  adw_status_page_set_title (self->status_page, title);
  /* The description is markup in libadwaita; it may quote the bus's error. */
  if (description != NULL) {
    g_autofree char *escaped = g_markup_escape_text (description, -1);
    adw_status_page_set_description (self->status_page, escaped);
  } else {
    adw_status_page_set_description (self->status_page, NULL);
  }
  gtk_widget_set_visible (GTK_WIDGET (self->status_spinner), busy);
  gtk_spinner_set_spinning (self->status_spinner, busy);
  gtk_widget_set_visible (GTK_WIDGET (self->retry_button), can_retry);
  gtk_stack_set_visible_child_name (self->main_stack, "status");
}

/* Another host that ssh could not reach, or whose link was lost: ssh's
 * own reason, and when the client tries again by itself. */
static void
show_unreachable (VivariumWindow *self, VivariumClient *client)
{
  g_autofree char *title = g_strdup_printf (_("Cannot Reach %s"), vivarium_client_get_display_name (client));
  guint delay = vivarium_client_get_retry_delay (client);
  g_autofree char *why = NULL;

  if (delay > 0)
    why = g_strdup_printf (ngettext ("%s\nTrying again in %u second…", "%s\nTrying again in %u seconds…", delay),
                           vivarium_client_get_state_reason (client), delay);
  else
    why = g_strdup (vivarium_client_get_state_reason (client));
  show_status (self, "network-offline-symbolic", title, why, FALSE, TRUE);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumWindow *self = user_data;
  gboolean connected = vivarium_client_get_state (client) == VIVARIUM_CLIENT_CONNECTED;
  g_autofree char *why = NULL;

  /* No page switcher over a status page: there is nothing to switch to. */
  adw_view_switcher_title_set_view_switcher_enabled (self->switcher_title, connected);
  /* Narrow, the bottom bar would offer them too (its reveal follows the
   * title's width only). */
  gtk_widget_set_visible (GTK_WIDGET (self->switcher_bar), connected);
  switch (vivarium_client_get_state (client)) {
  case VIVARIUM_CLIENT_CONNECTED:
    /* A hidden status page keeps no stale sentence (screen readers and the
     * UI test see every stack page). */
    show_status (self, "network-idle-symbolic", "", NULL, FALSE, FALSE);
    gtk_stack_set_visible_child_name (self->main_stack, "content");
    break;
  case VIVARIUM_CLIENT_CONNECTING:
    if (vivarium_client_is_remote (client))
      why = g_strdup_printf (_("Reaching %s over SSH…"), vivarium_client_get_display_name (client));
    show_status (self, "network-idle-symbolic", _("Connecting to Vivarium"),
                 why != NULL ? why : _("Starting the Vivarium service…"), TRUE, FALSE);
    break;
  case VIVARIUM_CLIENT_RESTARTING:
    show_status (self, "view-refresh-symbolic", _("Reconnecting"),
                 _("The Vivarium service went away; starting it again…"), TRUE, FALSE);
    break;
  case VIVARIUM_CLIENT_NOT_INSTALLED:
    show_status (self, "dialog-warning-symbolic", _("Vivarium Is Not Installed"),
                 _("The system bus knows no Vivarium service. Install vivariumd (see the README), then try again."),
                 FALSE, TRUE);
    break;
  case VIVARIUM_CLIENT_NOT_RUNNING:
    why = g_strdup_printf (_("The Vivarium service could not be started: %s\nSee “journalctl -u vivariumd”."),
                           vivarium_client_get_state_reason (client));
    show_status (self, "dialog-error-symbolic", _("Vivarium Is Not Running"), why, FALSE, TRUE);
    break;
  case VIVARIUM_CLIENT_NO_BUS:
    why = g_strdup_printf (_("There is no system bus: %s"), vivarium_client_get_state_reason (client));
    show_status (self, "dialog-error-symbolic", _("No System Bus"), why, FALSE, TRUE);
    break;
  case VIVARIUM_CLIENT_UNREACHABLE:
    show_unreachable (self, client);
    break;
  default:
    g_assert_not_reached ();
  }
}

static void
update_lock_bar (VivariumWindow *self)
{
  gboolean allowed = g_permission_get_allowed (self->permission);
  gboolean can_acquire = g_permission_get_can_acquire (self->permission);

  if (vivarium_client_is_remote (self->client))
    return;

  gtk_revealer_set_reveal_child (self->lock_revealer, !allowed);
  gtk_widget_set_visible (GTK_WIDGET (self->unlock_button), can_acquire);
  gtk_label_set_text (self->lock_label,
                      can_acquire ? _("Some actions are locked: changing sessions, images, projects and tasks needs an administrator.")
                                  : _("You may look, but not change sessions, images, projects or tasks: the system’s policy does not allow it."));
}

/* This computer's polkit speaks for this computer only: on another host
 * its polkit decides each call, and a refusal comes back as a toast. */
static void
apply_permission (VivariumWindow *self)
{
  GPermission *permission = vivarium_client_is_remote (self->client) ? NULL : self->permission;

  if (vivarium_client_is_remote (self->client))
    gtk_revealer_set_reveal_child (self->lock_revealer, FALSE);
  if (self->permission == NULL)
    return;
  if (permission != NULL)
    update_lock_bar (self);
  vivarium_sessions_page_set_permission (self->sessions_page, permission);
  vivarium_images_page_set_permission (self->images_page, permission);
  vivarium_selftest_page_set_permission (self->selftest_page, permission);
  vivarium_projects_page_set_permission (self->projects_page, permission);
  vivarium_tasks_page_set_permission (self->tasks_page, permission);
}

static void
permission_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumWindow) self = user_data;
  g_autoptr(GError) error = NULL;
  GPermission *permission = polkit_permission_new_finish (res, &error);

  if (permission == NULL) {
    /* Without polkit the daemon refuses admin calls itself; say so. */
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
      g_autofree char *text = NULL;

      g_dbus_error_strip_remote_error (error);
      text = g_strdup_printf (_("Administrator actions cannot be checked: %s"), error->message);
      gtk_label_set_text (self->lock_label, text);
      gtk_widget_set_visible (GTK_WIDGET (self->unlock_button), FALSE);
      gtk_revealer_set_reveal_child (self->lock_revealer, TRUE);
    }
    return;
  }
  self->permission = permission;
  g_signal_connect_object (permission, "notify", G_CALLBACK (update_lock_bar), self, G_CONNECT_SWAPPED);
  apply_permission (self);
}

static void
acquire_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumWindow) self = user_data;
  g_autoptr(GError) error = NULL;

  if (!g_permission_acquire_finish (G_PERMISSION (source), res, &error))
    vivarium_toast_error (GTK_WIDGET (self), _("Could not unlock"), error);
}

static void
unlock_clicked_cb (VivariumWindow *self)
{
  if (self->permission != NULL)
    g_permission_acquire_async (self->permission, self->cancellable, acquire_cb, g_object_ref (self));
}

/* --- handing work over ------------------------------------------------------
 * The dialogs are the window's: a page asks for one by action (with the
 * project or image to preselect, "" for none), and the window shows the
 * result where it lives. */

static void
task_submitted_cb (VivariumNewTaskDialog *dialog, const char *path, gpointer user_data)
{
  VivariumWindow *self = user_data;

  vivarium_tasks_page_show_task (self->tasks_page, path);
  adw_view_stack_set_visible_child_name (self->view_stack, "tasks");
  vivarium_toast (GTK_WIDGET (self), _("Task submitted: its work machine is running."));
}

static void
new_task_activated (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  VivariumWindow *self = VIVARIUM_WINDOW (widget);
  const char *project = g_variant_get_string (parameter, NULL);
  VivariumNewTaskDialog *dialog;

  if (vivarium_client_get_state (self->client) != VIVARIUM_CLIENT_CONNECTED)
    return;
  dialog = vivarium_new_task_dialog_new (GTK_WINDOW (self), self->client, *project != '\0' ? project : NULL);
  g_signal_connect_object (dialog, "submitted", G_CALLBACK (task_submitted_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
session_started_cb (VivariumStartSessionDialog *dialog, const char *path, gpointer user_data)
{
  VivariumWindow *self = user_data;

  adw_view_stack_set_visible_child_name (self->view_stack, "sessions");
  vivarium_toast (GTK_WIDGET (self), _("Session started."));
}

static void
start_session_activated (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  VivariumWindow *self = VIVARIUM_WINDOW (widget);
  const char *image = g_variant_get_string (parameter, NULL);
  VivariumStartSessionDialog *dialog;

  if (vivarium_client_get_state (self->client) != VIVARIUM_CLIENT_CONNECTED)
    return;
  dialog = vivarium_start_session_dialog_new (GTK_WINDOW (self), self->client, *image != '\0' ? image : NULL);
  g_signal_connect_object (dialog, "started", G_CALLBACK (session_started_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* Ctrl+1…6: the page so named, while there are pages to show (the page
 * switcher is off over a status page). */
static void
show_page_activated (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  VivariumWindow *self = VIVARIUM_WINDOW (widget);
  const char *page = g_variant_get_string (parameter, NULL);

  if (vivarium_client_get_state (self->client) != VIVARIUM_CLIENT_CONNECTED)
    return;
  if (adw_view_stack_get_child_by_name (self->view_stack, page) != NULL)
    adw_view_stack_set_visible_child_name (self->view_stack, page);
}

/* --- hosts -----------------------------------------------------------------
 * Every page shows the chosen host's client; each host keeps its own
 * connection (and its own status page) while the window lives. */

static void
show_host (VivariumWindow *self, VivariumClient *client)
{
  g_autofree char *title = NULL;

  if (self->client != NULL)
    g_signal_handlers_disconnect_by_func (self->client, client_state_changed_cb, self);
  g_set_object (&self->client, client);
  g_signal_connect (client, "state-changed", G_CALLBACK (client_state_changed_cb), self);
  vivarium_sessions_page_set_client (self->sessions_page, client);
  vivarium_images_page_set_client (self->images_page, client);
  vivarium_selftest_page_set_client (self->selftest_page, client);
  vivarium_projects_page_set_client (self->projects_page, client);
  vivarium_tasks_page_set_client (self->tasks_page, client);
  vivarium_reports_page_set_client (self->reports_page, client);
  vivarium_host_switcher_select (self->host_switcher, client);
  if (vivarium_client_is_remote (client))
    title = g_strdup_printf (_("%s — Vivarium"), vivarium_client_get_display_name (client));
  gtk_window_set_title (GTK_WINDOW (self), title != NULL ? title : _("Vivarium"));
  adw_view_switcher_title_set_subtitle (self->switcher_title, vivarium_client_get_display_name (client));
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "win.remove-host", vivarium_client_is_remote (client));
  apply_permission (self);
  client_state_changed_cb (client, self);
  vivarium_client_ensure_started (client);
}

static void
host_selected_cb (VivariumWindow *self, VivariumClient *client)
{
  show_host (self, client);
}

static void
host_added_cb (VivariumAddHostDialog *dialog, VivariumClient *client, gpointer user_data)
{
  show_host (VIVARIUM_WINDOW (user_data), client);
}

static void
add_host_activated (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  VivariumWindow *self = VIVARIUM_WINDOW (widget);
  VivariumAddHostDialog *dialog = vivarium_add_host_dialog_new (GTK_WINDOW (self), self->hosts);

  g_signal_connect_object (dialog, "added", G_CALLBACK (host_added_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
remove_host_activated (GtkWidget *widget, const char *action_name, GVariant *parameter)
{
  VivariumWindow *self = VIVARIUM_WINDOW (widget);
  g_autoptr(VivariumClient) removed = g_object_ref (self->client);
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  if (!vivarium_client_is_remote (removed))
    return;
  show_host (self, vivarium_host_list_get_local (self->hosts));
  if (!vivarium_host_list_remove (self->hosts, removed, &error)) {
    vivarium_toast_error (GTK_WIDGET (self), _("Could not remove the host"), error);
    return;
  }
  text = g_strdup_printf (_("%s removed."), vivarium_client_get_display_name (removed));
  vivarium_toast (GTK_WIDGET (self), text);
}

void
vivarium_window_save_state (VivariumWindow *self)
{
  vivarium_window_state_save (GTK_WINDOW (self), self->view_stack);
}

static gboolean
vivarium_window_close_request (GtkWindow *window)
{
  vivarium_window_save_state (VIVARIUM_WINDOW (window));
  return GTK_WINDOW_CLASS (vivarium_window_parent_class)->close_request (window);
}

static void
retry_clicked_cb (VivariumWindow *self)
{
  vivarium_client_retry (self->client);
}

static void
vivarium_window_dispose (GObject *object)
{
  VivariumWindow *self = VIVARIUM_WINDOW (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->client != NULL)
    g_signal_handlers_disconnect_by_data (self->client, self);
  g_clear_object (&self->client);
  g_clear_object (&self->hosts);
  g_clear_object (&self->permission);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_WINDOW);
  G_OBJECT_CLASS (vivarium_window_parent_class)->dispose (object);
}

static void
vivarium_window_class_init (VivariumWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_window_dispose;
  GTK_WINDOW_CLASS (klass)->close_request = vivarium_window_close_request;

  g_type_ensure (VIVARIUM_TYPE_SESSIONS_PAGE);
  g_type_ensure (VIVARIUM_TYPE_IMAGES_PAGE);
  g_type_ensure (VIVARIUM_TYPE_SELFTEST_PAGE);
  g_type_ensure (VIVARIUM_TYPE_PROJECTS_PAGE);
  g_type_ensure (VIVARIUM_TYPE_TASKS_PAGE);
  g_type_ensure (VIVARIUM_TYPE_REPORTS_PAGE);
  g_type_ensure (VIVARIUM_TYPE_HOST_SWITCHER);

  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-window.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, lock_revealer);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, lock_label);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, unlock_button);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, switcher_title);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, switcher_bar);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, view_stack);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, status_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, status_spinner);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, retry_button);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, sessions_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, images_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, selftest_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, projects_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, tasks_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, reports_page);
  gtk_widget_class_bind_template_child (widget_class, VivariumWindow, host_switcher);
  gtk_widget_class_install_action (widget_class, "win.new-task", "s", new_task_activated);
  gtk_widget_class_install_action (widget_class, "win.start-session", "s", start_session_activated);
  gtk_widget_class_install_action (widget_class, "win.show-page", "s", show_page_activated);
  gtk_widget_class_install_action (widget_class, "win.add-host", NULL, add_host_activated);
  gtk_widget_class_install_action (widget_class, "win.remove-host", NULL, remove_host_activated);
  gtk_widget_class_bind_template_callback (widget_class, unlock_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, retry_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, host_selected_cb);
}

static void
vivarium_window_init (VivariumWindow *self)
{
  g_autoptr(GError) error = NULL;

  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_window_state_restore (GTK_WINDOW (self), self->view_stack);
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self->status_page));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self->lock_revealer));

  self->cancellable = g_cancellable_new ();
  self->hosts = vivarium_host_list_new (NULL);
  if (!vivarium_host_list_load (self->hosts, &error))
    g_warning ("The list of other hosts cannot be read: %s", error->message);
  vivarium_host_switcher_set_hosts (self->host_switcher, self->hosts);
  show_host (self, vivarium_host_list_get_local (self->hosts));
  polkit_permission_new (ADMIN_ACTION, NULL, self->cancellable, permission_ready_cb, g_object_ref (self));
}

VivariumWindow *
vivarium_window_new (AdwApplication *app)
{
  return g_object_new (VIVARIUM_TYPE_WINDOW, "application", app, NULL);
}
