/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-projects-page.h"

#include <glib/gi18n.h>

#include "vivarium-names.h"
#include "vivarium-proxy-list.h"
#include "vivarium-util.h"

/* How many commits a project's row lists. */
#define RECENT_COMMITS 5
#define MIB (1024 * 1024)

struct _VivariumProjectsPage {
  AdwBin             parent_instance;

  GtkButton         *create_button;
  GtkStack          *list_stack;
  GtkListBox        *project_list;

  VivariumClient    *client;
  GPermission       *permission;
  VivariumProxyList *projects;
  GHashTable        *expanded;   /* object paths whose row is open */
  GCancellable      *cancellable;
};

G_DEFINE_FINAL_TYPE (VivariumProjectsPage, vivarium_projects_page, ADW_TYPE_BIN)

static VivariumDBusProject *
row_project (GtkWidget *widget)
{
  GtkWidget *row = gtk_widget_get_ancestor (widget, ADW_TYPE_EXPANDER_ROW);

  return row != NULL ? g_object_get_data (G_OBJECT (row), "project") : NULL;
}

static VivariumProjectsPage *
page_of (GtkWidget *widget)
{
  return VIVARIUM_PROJECTS_PAGE (gtk_widget_get_ancestor (widget, VIVARIUM_TYPE_PROJECTS_PAGE));
}

static char *
project_name (VivariumDBusProject *project)
{
  return vivarium_plain_text (project != NULL ? vivarium_dbus_project_get_name (project) : "", 64);
}

static char *
usage_text (VivariumDBusProject *project)
{
  g_autofree char *used = vivarium_format_size (vivarium_dbus_project_get_used_bytes (project), FALSE);
  g_autofree char *quota = vivarium_format_size (vivarium_dbus_project_get_quota_bytes (project), FALSE);

  return g_strdup_printf (_("%s of %s used"), used, quota);
}

/* --- recent commits ---------------------------------------------------- */

static void
log_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GtkLabel) label = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) commits = NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  GVariantIter iter;
  const char *id, *author, *subject;
  gint64 when;

  if (!vivarium_dbus_project_call_log_finish (VIVARIUM_DBUS_PROJECT (source), &commits, res, &error)) {
    g_autofree char *why = vivarium_client_describe_error (error);
    g_autofree char *plain = vivarium_plain_text (why, 300);

    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      gtk_label_set_text (label, plain);
    return;
  }
  g_variant_iter_init (&iter, commits);
  while (g_variant_iter_next (&iter, "(&s&sx&s)", &id, &author, &when, &subject)) {
    /* Subjects and authors of a cloned history are someone else's words. */
    g_autofree char *short_id = vivarium_plain_text (id, 10);
    g_autofree char *plain_subject = vivarium_plain_text (subject, 120);
    g_autofree char *plain_author = vivarium_plain_text (author, 80);
    g_autofree char *time = vivarium_time_exact (when);

    if (text->len > 0)
      g_string_append_c (text, '\n');
    g_string_append_printf (text, "%s  %s\n    %s, %s", short_id, plain_subject, plain_author, time);
  }
  gtk_label_set_text (label, text->len > 0 ? text->str : _("No commits"));
}

static void
expanded_cb (AdwExpanderRow *row, GParamSpec *pspec, gpointer user_data)
{
  VivariumProjectsPage *self = user_data;
  VivariumDBusProject *project = g_object_get_data (G_OBJECT (row), "project");
  GtkLabel *label = g_object_get_data (G_OBJECT (row), "log-label");
  const char *path = g_dbus_proxy_get_object_path (G_DBUS_PROXY (project));

  if (self == NULL)
    return;
  if (!adw_expander_row_get_expanded (row)) {
    g_hash_table_remove (self->expanded, path);
    return;
  }
  g_hash_table_add (self->expanded, g_strdup (path));
  vivarium_dbus_project_call_log (project, RECENT_COMMITS, vivarium_call_flags (FALSE),
                                  VIVARIUM_CALL_TIMEOUT_DEFAULT, self->cancellable, log_ready_cb, g_object_ref (label));
}

/* --- actions ----------------------------------------------------------- */

static void
copy_key_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusProject *project = row_project (GTK_WIDGET (button));

  if (project == NULL)
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (button)), vivarium_dbus_project_get_deploy_key (project));
  vivarium_toast (GTK_WIDGET (button), _("Deploy key copied"));
}

static void
published_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  g_autofree char *name = user_data;
  g_autofree char *text = g_strdup_printf (_("“%s” was published."), name);

  vivarium_toast (page, text);
}

static void
publish_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusProject *project = row_project (GTK_WIDGET (button));

  if (project == NULL)
    return;
  vivarium_dbus_project_call_publish (project, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                      vivarium_admin_call_new (GTK_WIDGET (page_of (GTK_WIDGET (button))),
                                                               _("Could not publish the project"), published_done,
                                                               project_name (project)));
}

typedef struct {
  VivariumProjectsPage *page;
  VivariumDBusProject  *project;
  GtkEditable          *entry;
} RemoteDialog;

static void
remote_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  g_autofree RemoteDialog *rd = user_data;

  if (g_strcmp0 (response, "confirm") == 0)
    vivarium_dbus_project_call_set_remote (rd->project, gtk_editable_get_text (rd->entry), VIVARIUM_ADMIN_CALL, NULL,
                                           vivarium_admin_call_done,
                                           vivarium_admin_call_new (GTK_WIDGET (rd->page),
                                                                    _("Could not set the remote"), NULL, NULL));
  g_object_unref (rd->project);
  g_object_unref (rd->page);
}

static void
set_remote_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusProject *project = row_project (GTK_WIDGET (button));
  VivariumProjectsPage *self = page_of (GTK_WIDGET (button));
  g_autofree char *name = project_name (project);
  g_autofree char *heading = g_strdup_printf (_("Remote of “%s”"), name);
  GtkWidget *dialog, *entry;
  RemoteDialog *rd;

  if (project == NULL || self == NULL)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))), heading,
                                   _("Publish pushes to this URL: https://, ssh:// or file://, without a password."));
  entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), vivarium_dbus_project_get_remote (project));
  gtk_entry_set_placeholder_text (GTK_ENTRY (entry), "ssh://git@forge.example/team/repo.git");
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Remote URL"), -1);
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), entry);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"), "confirm", _("_Set Remote"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "confirm", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "confirm");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  rd = g_new0 (RemoteDialog, 1);
  rd->page = g_object_ref (self);
  rd->project = g_object_ref (project);
  rd->entry = GTK_EDITABLE (entry);
  g_signal_connect (dialog, "response", G_CALLBACK (remote_response_cb), rd);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
delete_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  g_autoptr(VivariumDBusProject) project = user_data;
  GtkWidget *page = g_object_get_data (G_OBJECT (dialog), "page");

  if (g_strcmp0 (response, "confirm") == 0 && page != NULL)
    vivarium_dbus_project_call_delete (project, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                       vivarium_admin_call_new (page, _("Could not delete the project"), NULL, NULL));
}

static void
delete_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusProject *project = row_project (GTK_WIDGET (button));
  VivariumProjectsPage *self = page_of (GTK_WIDGET (button));
  g_autofree char *name = project_name (project);
  g_autofree char *heading = g_strdup_printf (_("Delete “%s”?"), name);
  GtkWidget *dialog;

  if (project == NULL || self == NULL)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))), heading,
                                   _("Its files, its git history and its deploy key are removed. This cannot be undone."));
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"), "confirm", _("_Delete"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "confirm", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "page", g_object_ref (self), g_object_unref);
  g_signal_connect (dialog, "response", G_CALLBACK (delete_response_cb), g_object_ref (project));
  gtk_window_present (GTK_WINDOW (dialog));
}

/* --- rows -------------------------------------------------------------- */

static GtkWidget *
action_button (const char *label, GCallback cb, GPermission *permission)
{
  GtkWidget *button = gtk_button_new_with_mnemonic (label);

  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  g_signal_connect (button, "clicked", cb, NULL);
  vivarium_name_mnemonic_buttons (button);
  gtk_widget_set_sensitive (button, vivarium_permission_usable (permission));
  return button;
}

/* The window owns the New Task dialog (it opens the Tasks page after);
 * the dialog asks for polkit itself, so the button is always offered. */
static GtkWidget *
new_task_button (VivariumDBusProject *project)
{
  GtkWidget *button = gtk_button_new_with_mnemonic (_("New _Task…"));

  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_actionable_set_action_name (GTK_ACTIONABLE (button), "win.new-task");
  gtk_actionable_set_action_target (GTK_ACTIONABLE (button), "s", vivarium_dbus_project_get_name (project));
  vivarium_name_mnemonic_buttons (button);
  return button;
}

static GtkWidget *
fact_row (const char *title, const char *untrusted_value, gsize max_chars)
{
  GtkWidget *row = adw_action_row_new ();
  g_autofree char *value = vivarium_plain_text (untrusted_value, max_chars);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), value);
  return row;
}

static GtkWidget *
usage_bar (VivariumDBusProject *project, const char *name)
{
  guint64 quota = vivarium_dbus_project_get_quota_bytes (project);
  guint64 used = vivarium_dbus_project_get_used_bytes (project);
  GtkWidget *bar = gtk_level_bar_new_for_interval (0.0, 1.0);
  g_autofree char *label = g_strdup_printf (_("Quota used by %s"), name);

  gtk_level_bar_set_value (GTK_LEVEL_BAR (bar), quota > 0 ? CLAMP ((double) used / (double) quota, 0.0, 1.0) : 0.0);
  /* Full is bad news for a dataset: the marks say so in colour. */
  gtk_level_bar_add_offset_value (GTK_LEVEL_BAR (bar), GTK_LEVEL_BAR_OFFSET_LOW, 0.75);
  gtk_level_bar_add_offset_value (GTK_LEVEL_BAR (bar), GTK_LEVEL_BAR_OFFSET_HIGH, 0.9);
  gtk_level_bar_add_offset_value (GTK_LEVEL_BAR (bar), GTK_LEVEL_BAR_OFFSET_FULL, 1.0);
  gtk_level_bar_set_inverted (GTK_LEVEL_BAR (bar), FALSE);
  gtk_widget_set_size_request (bar, 64, -1);
  gtk_widget_set_valign (bar, GTK_ALIGN_CENTER);
  gtk_accessible_update_property (GTK_ACCESSIBLE (bar), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
  return bar;
}

static GtkWidget *
key_row (VivariumDBusProject *project)
{
  GtkWidget *row = fact_row (_("Deploy key"), vivarium_dbus_project_get_deploy_key (project), 200);
  GtkWidget *copy = gtk_button_new_from_icon_name ("edit-copy-symbolic");

  gtk_widget_set_valign (copy, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (copy, "flat");
  gtk_widget_set_tooltip_text (copy, _("Copy Deploy Key"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (copy), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Copy Deploy Key"), -1);
  g_signal_connect (copy, "clicked", G_CALLBACK (copy_key_clicked_cb), NULL);
  adw_action_row_add_suffix (ADW_ACTION_ROW (row), copy);
  return row;
}

static GtkWidget *
log_row (GtkWidget *expander)
{
  GtkWidget *row = adw_preferences_row_new ();
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *title = gtk_label_new (_("Recent commits"));
  GtkWidget *label = gtk_label_new (_("Loading…"));

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), _("Recent commits"));
  gtk_widget_set_margin_start (box, 12);
  gtk_widget_set_margin_end (box, 12);
  gtk_widget_set_margin_top (box, 8);
  gtk_widget_set_margin_bottom (box, 8);
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_widget_add_css_class (label, "monospace");
  gtk_box_append (GTK_BOX (box), title);
  gtk_box_append (GTK_BOX (box), label);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), FALSE);
  g_object_set_data (G_OBJECT (expander), "log-label", label);
  return row;
}

static GtkWidget *
create_project_row (gpointer item, gpointer user_data)
{
  VivariumProjectsPage *self = user_data;
  VivariumDBusProject *project = item;
  g_autofree char *name = project_name (project);
  g_autofree char *usage = usage_text (project);
  const char *remote = vivarium_dbus_project_get_remote (project);
  GtkWidget *row = adw_expander_row_new ();
  GtkWidget *actions_row = adw_action_row_new ();
  GtkWidget *buttons = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), name);
  adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (row), usage);
  g_object_set_data_full (G_OBJECT (row), "project", g_object_ref (project), g_object_unref);
  adw_expander_row_add_action (ADW_EXPANDER_ROW (row), usage_bar (project, name));

  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Head"), vivarium_dbus_project_get_head (project), 64));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row),
                            fact_row (_("Remote"), remote != NULL && *remote != '\0' ? remote : _("none"), 300));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), key_row (project));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), log_row (row));

  gtk_box_append (GTK_BOX (buttons), new_task_button (project));
  gtk_box_append (GTK_BOX (buttons), action_button (_("Set _Remote…"), G_CALLBACK (set_remote_clicked_cb), self->permission));
  gtk_box_append (GTK_BOX (buttons), action_button (_("_Publish"), G_CALLBACK (publish_clicked_cb), self->permission));
  gtk_box_append (GTK_BOX (buttons), action_button (_("_Delete…"), G_CALLBACK (delete_clicked_cb), self->permission));
  gtk_widget_set_halign (buttons, GTK_ALIGN_END);
  gtk_widget_set_hexpand (buttons, TRUE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (actions_row), _("Actions"));
  adw_action_row_add_suffix (ADW_ACTION_ROW (actions_row), buttons);
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), actions_row);

  /* The page outlives its rows; a row being made has no parent yet. */
  g_signal_connect (row, "notify::expanded", G_CALLBACK (expanded_cb), self);
  /* A changed project (its usage, its head) is a new row: keep it open. */
  if (g_hash_table_contains (self->expanded, g_dbus_proxy_get_object_path (G_DBUS_PROXY (project))))
    adw_expander_row_set_expanded (ADW_EXPANDER_ROW (row), TRUE);
  return row;
}

/* --- creating ---------------------------------------------------------- */

typedef struct {
  VivariumProjectsPage *page;
  AdwMessageDialog     *dialog;
  GtkEditable          *name;
  GtkEditable          *quota;
  GtkLabel             *hint;
} CreateDialog;

/* The quota in MiB as typed; 0 when it is not a whole number. */
static guint64
parse_quota_mib (const char *text)
{
  guint64 mib = 0;

  if (!g_ascii_string_to_unsigned (text, 10, 1, G_MAXUINT64 / MIB, &mib, NULL))
    return 0;
  return mib;
}

/* As the person types: the same rules the daemon applies, so the Create
 * button is only offered for a request it will not refuse for its form. */
static void
validate_create (CreateDialog *cd)
{
  g_autoptr(GError) error = NULL;
  const char *name = gtk_editable_get_text (cd->name);
  guint64 mib = parse_quota_mib (gtk_editable_get_text (cd->quota));
  g_autofree char *hint = NULL;

  if (*name == '\0')
    hint = g_strdup (_("Enter a name: lower-case letters, digits, “.”, “_” and “-”, starting with a letter or digit."));
  else if (!vivarium_project_name_validate (name, &error))
    hint = g_strdup_printf (_("The name is not valid: lower-case letters, digits, “.”, “_” and “-”, starting with a letter or digit, at most %u characters."),
                            (guint) VIVARIUM_PROJECT_NAME_MAX);
  else if (mib == 0)
    hint = g_strdup (_("Enter the quota as a whole number of MiB."));
  else if (mib * MIB < VIVARIUM_PROJECT_QUOTA_MIN)
    hint = g_strdup_printf (_("The quota must be at least %u MiB."), (guint) (VIVARIUM_PROJECT_QUOTA_MIN / MIB));
  gtk_label_set_text (cd->hint, hint != NULL ? hint : _("Ready to create."));
  gtk_widget_remove_css_class (GTK_WIDGET (cd->hint), hint != NULL ? "success" : "error");
  gtk_widget_add_css_class (GTK_WIDGET (cd->hint), hint != NULL ? "error" : "success");
  adw_message_dialog_set_response_enabled (cd->dialog, "confirm", hint == NULL);
}

static void
create_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  g_autofree CreateDialog *cd = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (cd->page->client);
  guint64 mib = parse_quota_mib (gtk_editable_get_text (cd->quota));

  if (g_strcmp0 (response, "confirm") == 0 && manager != NULL)
    vivarium_dbus_manager_call_create_project (manager, gtk_editable_get_text (cd->name), mib * MIB,
                                               g_variant_new_array (G_VARIANT_TYPE ("{sv}"), NULL, 0),
                                               VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                               vivarium_admin_call_new (GTK_WIDGET (cd->page),
                                                                        _("Could not create the project"),
                                                                        NULL, NULL));
  g_object_unref (cd->page);
}

static GtkWidget *
labelled_entry (GtkWidget *box, const char *label_text, const char *initial)
{
  GtkWidget *label = gtk_label_new (label_text);
  GtkWidget *entry = gtk_entry_new ();

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  /* Named by the label property alone: GTK 4.8 joins a labelled-by
   * relation's text to it ("Project name Project name"). */
  gtk_editable_set_text (GTK_EDITABLE (entry), initial);
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, label_text, -1);
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  gtk_box_append (GTK_BOX (box), label);
  gtk_box_append (GTK_BOX (box), entry);
  return entry;
}

static void
create_clicked_cb (VivariumProjectsPage *self)
{
  GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))),
                                              _("Create a Project"), NULL);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *hint = gtk_label_new (NULL);
  CreateDialog *cd = g_new0 (CreateDialog, 1);

  cd->page = g_object_ref (self);
  cd->dialog = ADW_MESSAGE_DIALOG (dialog);
  cd->name = GTK_EDITABLE (labelled_entry (box, _("Project name"), ""));
  cd->quota = GTK_EDITABLE (labelled_entry (box, _("Quota in MiB"), "256"));
  gtk_label_set_wrap (GTK_LABEL (hint), TRUE);
  gtk_label_set_xalign (GTK_LABEL (hint), 0);
  gtk_accessible_update_property (GTK_ACCESSIBLE (hint), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Validation"), -1);
  gtk_box_append (GTK_BOX (box), hint);
  cd->hint = GTK_LABEL (hint);
  adw_message_dialog_set_extra_child (cd->dialog, box);
  adw_message_dialog_add_responses (cd->dialog, "cancel", _("_Cancel"), "confirm", _("C_reate"), NULL);
  adw_message_dialog_set_response_appearance (cd->dialog, "confirm", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (cd->dialog, "confirm");
  adw_message_dialog_set_close_response (cd->dialog, "cancel");
  g_signal_connect_swapped (cd->name, "changed", G_CALLBACK (validate_create), cd);
  g_signal_connect_swapped (cd->quota, "changed", G_CALLBACK (validate_create), cd);
  g_signal_connect (dialog, "response", G_CALLBACK (create_response_cb), cd);
  validate_create (cd);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* --- the list ---------------------------------------------------------- */

static void
projects_changed_cb (GListModel *model, guint position, guint removed, guint added, gpointer user_data)
{
  VivariumProjectsPage *self = user_data;

  gtk_stack_set_visible_child_name (self->list_stack, g_list_model_get_n_items (model) > 0 ? "list" : "empty");
}

static void
rebind (VivariumProjectsPage *self)
{
  gtk_list_box_bind_model (self->project_list, NULL, NULL, NULL, NULL);
  if (self->projects != NULL)
    gtk_list_box_bind_model (self->project_list, G_LIST_MODEL (self->projects), create_project_row, self, NULL);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumProjectsPage *self = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  if (self->projects != NULL)
    g_signal_handlers_disconnect_by_data (self->projects, self);
  g_clear_object (&self->projects);
  rebind (self);
  gtk_stack_set_visible_child_name (self->list_stack, "empty");
  if (vivarium_client_get_state (client) != VIVARIUM_CLIENT_CONNECTED || manager == NULL)
    return;
  self->projects = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_PROJECTS);
  g_signal_connect (self->projects, "items-changed", G_CALLBACK (projects_changed_cb), self);
  rebind (self);
}

void
vivarium_projects_page_set_client (VivariumProjectsPage *self, VivariumClient *client)
{
  if (self->client == client)
    return;
  /* Another host's: its data replaces this one's. */
  if (self->client != NULL)
    g_signal_handlers_disconnect_by_func (self->client, client_state_changed_cb, self);
  g_set_object (&self->client, client);
  g_signal_connect_object (client, "state-changed", G_CALLBACK (client_state_changed_cb), self, 0);
  client_state_changed_cb (client, self);
}

static void
permission_changed_cb (VivariumProjectsPage *self)
{
  gtk_widget_set_sensitive (GTK_WIDGET (self->create_button), vivarium_permission_usable (self->permission));
  rebind (self);
}

void
vivarium_projects_page_set_permission (VivariumProjectsPage *self, GPermission *permission)
{
  /* NULL on another host: its polkit decides each call there. */
  if (self->permission != NULL)
    g_signal_handlers_disconnect_by_data (self->permission, self);
  g_set_object (&self->permission, permission);
  if (permission != NULL)
    g_signal_connect_object (permission, "notify", G_CALLBACK (permission_changed_cb), self, G_CONNECT_SWAPPED);
  permission_changed_cb (self);
}

static void
vivarium_projects_page_dispose (GObject *object)
{
  VivariumProjectsPage *self = VIVARIUM_PROJECTS_PAGE (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->projects != NULL)
    g_signal_handlers_disconnect_by_data (self->projects, self);
  g_clear_object (&self->projects);
  g_clear_object (&self->client);
  g_clear_object (&self->permission);
  g_clear_pointer (&self->expanded, g_hash_table_unref);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_PROJECTS_PAGE);
  G_OBJECT_CLASS (vivarium_projects_page_parent_class)->dispose (object);
}

static void
vivarium_projects_page_class_init (VivariumProjectsPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_projects_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-projects-page.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumProjectsPage, create_button);
  gtk_widget_class_bind_template_child (widget_class, VivariumProjectsPage, list_stack);
  gtk_widget_class_bind_template_child (widget_class, VivariumProjectsPage, project_list);
  gtk_widget_class_bind_template_callback (widget_class, create_clicked_cb);
}

static void
vivarium_projects_page_init (VivariumProjectsPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_expand_on_select (self->project_list);
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
  self->expanded = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}
