/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-images-page.h"

#include <fcntl.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "vivarium-proxy-list.h"
#include "vivarium-util.h"

struct _VivariumImagesPage {
  AdwBin             parent_instance;

  GtkButton         *import_button;
  GtkButton         *build_button;
  GtkRevealer       *job_revealer;
  GtkLabel          *job_label;
  GtkButton         *job_cancel_button;
  GtkProgressBar    *job_progress;
  GtkLabel          *job_step_label;
  GtkStack          *list_stack;
  GtkListBox        *image_list;

  VivariumClient    *client;
  GPermission       *permission;
  VivariumProxyList *images;
  VivariumDBusJob   *job;
  GCancellable      *cancellable;
};

G_DEFINE_FINAL_TYPE (VivariumImagesPage, vivarium_images_page, ADW_TYPE_BIN)

static VivariumDBusImage *
row_image (GtkWidget *widget)
{
  GtkWidget *row = gtk_widget_get_ancestor (widget, ADW_TYPE_EXPANDER_ROW);

  return row != NULL ? g_object_get_data (G_OBJECT (row), "image") : NULL;
}

static VivariumImagesPage *
page_of (GtkWidget *widget)
{
  return VIVARIUM_IMAGES_PAGE (gtk_widget_get_ancestor (widget, VIVARIUM_TYPE_IMAGES_PAGE));
}

static char *
image_summary (VivariumDBusImage *image)
{
  g_autofree char *size = vivarium_format_size (vivarium_dbus_image_get_size (image), FALSE);
  g_autofree char *recipe = vivarium_plain_text (vivarium_dbus_image_get_recipe (image), 64);
  const char *const *users = vivarium_dbus_image_get_in_use_by (image);
  guint n_users = users != NULL ? g_strv_length ((char **) users) : 0;
  g_autofree char *use = n_users == 0 ? g_strdup (_("not in use"))
                                      : g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "in use by %u session",
                                                                      "in use by %u sessions", n_users), n_users);

  return g_strdup_printf (_("%s · recipe %s · %s"), size, *recipe != '\0' ? recipe : _("none (imported)"), use);
}

static void
copy_digest_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusImage *image = row_image (GTK_WIDGET (button));

  if (image == NULL)
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (button)), vivarium_dbus_image_get_digest (image));
  vivarium_toast (GTK_WIDGET (button), _("Digest copied"));
}

static void
verify_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  g_autofree char *name = user_data;
  gboolean ok = FALSE;
  g_autofree char *text = NULL;

  g_variant_get (reply, "(b)", &ok);
  text = ok ? g_strdup_printf (_("“%s” is intact: its files match the digest recorded when it was frozen."), name)
            : g_strdup_printf (_("“%s” does not match its digest: its files changed since it was frozen."), name);
  vivarium_toast (page, text);
}

static void
verify_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusImage *image = row_image (GTK_WIDGET (button));
  g_autofree char *name = NULL;

  if (image == NULL)
    return;
  name = vivarium_plain_text (vivarium_dbus_image_get_name (image), 64);
  vivarium_dbus_image_call_verify (image, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                   vivarium_admin_call_new (GTK_WIDGET (page_of (GTK_WIDGET (button))),
                                                            _("Could not verify the image"), verify_done,
                                                            g_steal_pointer (&name)));
}

/* Freeze or Delete: an Image verb without arguments. */
typedef void (*ImageVerbCall) (VivariumDBusImage *proxy, GDBusCallFlags call_flags, gint timeout_msec,
                               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);

typedef struct {
  VivariumImagesPage *page;
  VivariumDBusImage  *image;
  ImageVerbCall       call;
  const char         *what;
} Confirm;

static void
confirm_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  g_autofree Confirm *confirm = user_data;

  if (g_strcmp0 (response, "confirm") == 0)
    confirm->call (confirm->image, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                   vivarium_admin_call_new (GTK_WIDGET (confirm->page), confirm->what, NULL, NULL));
  g_object_unref (confirm->image);
  g_object_unref (confirm->page);
}

/* Freeze and Delete cannot be undone: both ask first, and say so. */
static void
confirm_then_call (GtkWidget *button, ImageVerbCall call, const char *heading,
                   const char *body, const char *verb, const char *what)
{
  VivariumDBusImage *image = row_image (button);
  VivariumImagesPage *self = page_of (button);
  Confirm *confirm;
  GtkWidget *dialog;

  if (image == NULL || self == NULL)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (button)), heading, body);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"), "confirm", verb, NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "confirm", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  confirm = g_new0 (Confirm, 1);
  confirm->page = g_object_ref (self);
  confirm->image = g_object_ref (image);
  confirm->call = call;
  confirm->what = what;
  g_signal_connect (dialog, "response", G_CALLBACK (confirm_response_cb), confirm);
  gtk_window_present (GTK_WINDOW (dialog));
}

static char *
row_name (GtkWidget *button)
{
  VivariumDBusImage *image = row_image (button);

  return vivarium_plain_text (image != NULL ? vivarium_dbus_image_get_name (image) : "", 64);
}

static void
freeze_clicked_cb (GtkButton *button, gpointer user_data)
{
  g_autofree char *name = row_name (GTK_WIDGET (button));
  g_autofree char *heading = g_strdup_printf (_("Freeze “%s”?"), name);

  confirm_then_call (GTK_WIDGET (button), vivarium_dbus_image_call_freeze, heading,
                     _("A frozen image is read-only, and its digest is checked before every boot. "
                       "Freezing cannot be undone."),
                     _("_Freeze"), _("Could not freeze the image"));
}

static void
delete_clicked_cb (GtkButton *button, gpointer user_data)
{
  g_autofree char *name = row_name (GTK_WIDGET (button));
  g_autofree char *heading = g_strdup_printf (_("Delete “%s”?"), name);

  confirm_then_call (GTK_WIDGET (button), vivarium_dbus_image_call_delete, heading,
                     _("Its files are removed. This cannot be undone."),
                     _("_Delete"), _("Could not delete the image"));
}

static GtkWidget *
action_button (const char *label, GCallback cb, gboolean admin, GPermission *permission)
{
  GtkWidget *button = gtk_button_new_with_mnemonic (label);

  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  if (cb != NULL)
    g_signal_connect (button, "clicked", cb, NULL);
  vivarium_name_mnemonic_buttons (button);
  if (admin)
    gtk_widget_set_sensitive (button, vivarium_permission_usable (permission));
  return button;
}

static GtkWidget *
create_image_row (gpointer item, gpointer user_data)
{
  VivariumImagesPage *self = user_data;
  VivariumDBusImage *image = item;
  gboolean frozen = vivarium_dbus_image_get_frozen (image);
  g_autofree char *name = vivarium_plain_text (vivarium_dbus_image_get_name (image), 64);
  g_autofree char *summary = image_summary (image);
  g_autofree char *digest = vivarium_plain_text (vivarium_dbus_image_get_digest (image), 100);
  GtkWidget *row = adw_expander_row_new ();
  GtkWidget *badge = gtk_label_new (frozen ? _("Frozen") : _("Not frozen"));
  GtkWidget *digest_row = adw_action_row_new ();
  GtkWidget *copy = gtk_button_new_from_icon_name ("edit-copy-symbolic");
  GtkWidget *actions_row = adw_action_row_new ();
  GtkWidget *buttons = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), name);
  adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (row), summary);
  g_object_set_data_full (G_OBJECT (row), "image", g_object_ref (image), g_object_unref);
  gtk_widget_add_css_class (badge, frozen ? "success" : "dim-label");
  gtk_widget_set_valign (badge, GTK_ALIGN_CENTER);
  adw_expander_row_add_action (ADW_EXPANDER_ROW (row), badge);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (digest_row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (digest_row), _("Digest"));
  adw_action_row_set_subtitle (ADW_ACTION_ROW (digest_row), *digest != '\0' ? digest : _("none until frozen"));
  gtk_widget_set_valign (copy, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (copy, "flat");
  gtk_widget_set_tooltip_text (copy, _("Copy Digest"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (copy), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Copy Digest"), -1);
  gtk_widget_set_sensitive (copy, *digest != '\0');
  g_signal_connect (copy, "clicked", G_CALLBACK (copy_digest_clicked_cb), NULL);
  adw_action_row_add_suffix (ADW_ACTION_ROW (digest_row), copy);
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), digest_row);

  if (!frozen) {
    gtk_box_append (GTK_BOX (buttons), action_button (_("_Freeze…"), G_CALLBACK (freeze_clicked_cb), TRUE, self->permission));
  } else {
    /* The window owns the dialog (it opens the Sessions page after). */
    GtkWidget *start = action_button (_("_Start Session…"), NULL, TRUE, self->permission);

    gtk_actionable_set_action_name (GTK_ACTIONABLE (start), "win.start-session");
    gtk_actionable_set_action_target (GTK_ACTIONABLE (start), "s", vivarium_dbus_image_get_name (image));
    gtk_widget_add_css_class (start, "suggested-action");
    gtk_box_append (GTK_BOX (buttons), start);
    gtk_box_append (GTK_BOX (buttons), action_button (_("_Verify"), G_CALLBACK (verify_clicked_cb), FALSE, NULL));
  }
  gtk_box_append (GTK_BOX (buttons), action_button (_("_Delete…"), G_CALLBACK (delete_clicked_cb), TRUE, self->permission));
  gtk_widget_set_halign (buttons, GTK_ALIGN_END);
  gtk_widget_set_hexpand (buttons, TRUE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (actions_row), _("Actions"));
  adw_action_row_add_suffix (ADW_ACTION_ROW (actions_row), buttons);
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), actions_row);
  return row;
}

/* --- building ------------------------------------------------------------ */

static void
update_job (VivariumImagesPage *self)
{
  g_autofree char *step = NULL;

  if (self->job == NULL)
    return;
  step = vivarium_plain_text (vivarium_dbus_job_get_step (self->job), 300);
  gtk_progress_bar_set_fraction (self->job_progress, CLAMP (vivarium_dbus_job_get_progress (self->job), 0.0, 1.0));
  gtk_label_set_text (self->job_step_label, step);
  gtk_widget_set_sensitive (GTK_WIDGET (self->job_cancel_button), vivarium_dbus_job_get_cancelable (self->job));
}

static void
job_signal_cb (GDBusProxy *proxy, const char *sender, const char *signal_name, GVariant *parameters, gpointer user_data)
{
  VivariumImagesPage *self = user_data;
  gboolean success = FALSE;
  const char *message = NULL;
  g_autofree char *text = NULL;
  g_autofree char *plain = NULL;

  if (g_strcmp0 (signal_name, "Completed") != 0 || !g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(bs)")))
    return;
  g_variant_get (parameters, "(b&s)", &success, &message);
  plain = vivarium_plain_text (message, 300);
  text = success ? g_strdup (_("The image was built."))
                 : g_strdup_printf (_("The build failed: %s"), plain);
  vivarium_toast (GTK_WIDGET (self), text);
  gtk_revealer_set_reveal_child (self->job_revealer, FALSE);
  g_signal_handlers_disconnect_by_data (self->job, self);
  g_clear_object (&self->job);
}

static void
job_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumImagesPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusJob) job = vivarium_dbus_job_proxy_new_finish (res, &error);

  if (job == NULL) {
    vivarium_toast_error (GTK_WIDGET (self), _("Could not follow the build"), error);
    return;
  }
  if (self->job != NULL)
    g_signal_handlers_disconnect_by_data (self->job, self);
  g_set_object (&self->job, job);
  g_signal_connect_swapped (job, "g-properties-changed", G_CALLBACK (update_job), self);
  g_signal_connect (job, "g-signal", G_CALLBACK (job_signal_cb), self);
  gtk_label_set_text (self->job_label, _("Building an image"));
  gtk_revealer_set_reveal_child (self->job_revealer, TRUE);
  update_job (self);
}

static void
build_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  VivariumImagesPage *self = VIVARIUM_IMAGES_PAGE (page);
  const char *path = NULL;

  g_variant_get (reply, "(&o)", &path);
  vivarium_dbus_job_proxy_new (vivarium_client_get_connection (self->client), G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                               VIVARIUM_BUS_NAME, path, self->cancellable, job_ready_cb, g_object_ref (self));
}

static void
job_cancel_clicked_cb (VivariumImagesPage *self)
{
  if (self->job != NULL)
    vivarium_dbus_job_call_cancel (self->job, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                   vivarium_admin_call_new (GTK_WIDGET (self), _("Could not cancel the build"),
                                                            NULL, NULL));
}

typedef struct {
  VivariumImagesPage *page;
  GtkDropDown        *recipes;   /* NULL when importing */
  GtkEditable        *name;
  int                 fd;        /* the disk to import, or -1 */
} NameDialog;

static void
name_dialog_free (NameDialog *nd)
{
  if (nd->fd >= 0)
    g_close (nd->fd, NULL);
  g_object_unref (nd->page);
  g_free (nd);
}

static void
name_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  NameDialog *nd = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (nd->page->client);
  const char *name = gtk_editable_get_text (nd->name);
  g_autoptr(GUnixFDList) fds = NULL;

  if (g_strcmp0 (response, "confirm") != 0 || manager == NULL) {
    name_dialog_free (nd);
    return;
  }
  if (nd->recipes != NULL) {
    GtkStringObject *recipe = gtk_drop_down_get_selected_item (nd->recipes);

    if (recipe != NULL)
      vivarium_dbus_manager_call_build_image (manager, gtk_string_object_get_string (recipe), name,
                                              VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                              vivarium_admin_call_new (GTK_WIDGET (nd->page),
                                                                       _("Could not start the build"),
                                                                       build_done, NULL));
  } else {
    /* The daemon never opens a path for us: it gets the open file. */
    fds = g_unix_fd_list_new_from_array (&nd->fd, 1);
    nd->fd = -1;
    vivarium_dbus_manager_call_import_image (manager, name, g_variant_new_handle (0), VIVARIUM_ADMIN_CALL, fds,
                                             NULL, vivarium_admin_call_done,
                                             vivarium_admin_call_new (GTK_WIDGET (nd->page),
                                                                      _("Could not import the disk"), NULL, NULL));
  }
  name_dialog_free (nd);
}

static void
ask_name (VivariumImagesPage *self, const char *heading, const char *verb, GStrv recipes,
          const char *suggested, int fd)
{
  GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))), heading, NULL);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 12);
  GtkWidget *entry = gtk_entry_new ();
  NameDialog *nd = g_new0 (NameDialog, 1);

  nd->page = g_object_ref (self);
  nd->fd = fd;
  nd->name = GTK_EDITABLE (entry);
  if (recipes != NULL) {
    nd->recipes = GTK_DROP_DOWN (gtk_drop_down_new_from_strings ((const char *const *) recipes));
    /* The suggested name is the recipe it is built from: show that one. */
    for (guint i = 0; recipes[i] != NULL; i++) {
      if (g_strcmp0 (recipes[i], suggested) == 0)
        gtk_drop_down_set_selected (nd->recipes, i);
    }
    gtk_accessible_update_property (GTK_ACCESSIBLE (nd->recipes), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Recipe"), -1);
    gtk_box_append (GTK_BOX (box), GTK_WIDGET (nd->recipes));
  }
  gtk_entry_set_placeholder_text (GTK_ENTRY (entry), _("Image name"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Image name"), -1);
  gtk_editable_set_text (GTK_EDITABLE (entry), suggested);
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  gtk_box_append (GTK_BOX (box), entry);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), box);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"), "confirm", verb, NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "confirm", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "confirm");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_signal_connect (dialog, "response", G_CALLBACK (name_response_cb), nd);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
recipes_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumImagesPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) recipes = NULL;

  if (!vivarium_dbus_manager_call_list_recipes_finish (VIVARIUM_DBUS_MANAGER (source), &recipes, res, &error)) {
    vivarium_toast_error (GTK_WIDGET (self), _("Could not list the recipes"), error);
    return;
  }
  if (recipes == NULL || recipes[0] == NULL) {
    vivarium_toast (GTK_WIDGET (self), _("This daemon has no image recipes."));
    return;
  }
  /* "tiny" first when there is one: it boots in seconds and needs nothing
   * the operator must bring (the windows recipe needs an ISO and a licence). */
  ask_name (self, _("Build an Image"), _("_Build"), recipes,
            g_strv_contains ((const char *const *) recipes, "tiny") ? "tiny" : recipes[0], -1);
}

static void
build_clicked_cb (VivariumImagesPage *self)
{
  VivariumDBusManager *manager = vivarium_client_get_manager (self->client);

  if (manager != NULL)
    vivarium_dbus_manager_call_list_recipes (manager, vivarium_call_flags (FALSE), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                             self->cancellable, recipes_cb, g_object_ref (self));
}

/* --- importing ----------------------------------------------------------- */

static void
import_chosen_cb (GtkNativeDialog *chooser, int response, gpointer user_data)
{
  g_autoptr(VivariumImagesPage) self = user_data;
  g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
  g_autofree char *path = file != NULL ? g_file_get_path (file) : NULL;
  g_autofree char *base = file != NULL ? g_file_get_basename (file) : NULL;
  char *dot;
  int fd;

  gtk_native_dialog_destroy (chooser);
  g_object_unref (chooser);
  if (response != GTK_RESPONSE_ACCEPT || path == NULL)
    return;
  fd = g_open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY, 0);
  if (fd < 0) {
    g_autofree char *text = g_strdup_printf (_("Could not open the disk: %s"), g_strerror (errno));
    vivarium_toast (GTK_WIDGET (self), text);
    return;
  }
  dot = strrchr (base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  ask_name (self, _("Import a Disk"), _("_Import"), NULL, base, fd);
}

static void
import_clicked_cb (VivariumImagesPage *self)
{
  g_autoptr(GError) error = NULL;
  GtkFileChooserNative *chooser;

  /* ImportImage takes the open disk: refused before a file is chosen. */
  if (vivarium_client_refuse_descriptor (self->client, &error)) {
    vivarium_toast_error (GTK_WIDGET (self), _("Cannot import a disk"), error);
    return;
  }
  chooser =
    gtk_file_chooser_native_new (_("Import a Disk"), GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))),
                                 GTK_FILE_CHOOSER_ACTION_OPEN, _("_Import"), _("_Cancel"));

  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (import_chosen_cb), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

/* --- the list ------------------------------------------------------------ */

static void
update_buttons (VivariumImagesPage *self)
{
  gboolean usable = vivarium_permission_usable (self->permission);

  gtk_widget_set_sensitive (GTK_WIDGET (self->build_button), usable);
  gtk_widget_set_sensitive (GTK_WIDGET (self->import_button), usable);
}

static void
images_changed_cb (GListModel *model, guint position, guint removed, guint added, gpointer user_data)
{
  VivariumImagesPage *self = user_data;

  gtk_stack_set_visible_child_name (self->list_stack, g_list_model_get_n_items (model) > 0 ? "list" : "empty");
}

static void
rebind (VivariumImagesPage *self)
{
  gtk_list_box_bind_model (self->image_list, NULL, NULL, NULL, NULL);
  if (self->images != NULL)
    gtk_list_box_bind_model (self->image_list, G_LIST_MODEL (self->images), create_image_row, self, NULL);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumImagesPage *self = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  if (self->images != NULL)
    g_signal_handlers_disconnect_by_data (self->images, self);
  g_clear_object (&self->images);
  rebind (self);
  gtk_stack_set_visible_child_name (self->list_stack, "empty");
  if (vivarium_client_get_state (client) != VIVARIUM_CLIENT_CONNECTED || manager == NULL)
    return;
  self->images = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_IMAGES);
  g_signal_connect (self->images, "items-changed", G_CALLBACK (images_changed_cb), self);
  rebind (self);
}

void
vivarium_images_page_set_client (VivariumImagesPage *self, VivariumClient *client)
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
permission_changed_cb (VivariumImagesPage *self)
{
  update_buttons (self);
  rebind (self);
}

void
vivarium_images_page_set_permission (VivariumImagesPage *self, GPermission *permission)
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
vivarium_images_page_dispose (GObject *object)
{
  VivariumImagesPage *self = VIVARIUM_IMAGES_PAGE (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->job != NULL)
    g_signal_handlers_disconnect_by_data (self->job, self);
  g_clear_object (&self->job);
  if (self->images != NULL)
    g_signal_handlers_disconnect_by_data (self->images, self);
  g_clear_object (&self->images);
  g_clear_object (&self->client);
  g_clear_object (&self->permission);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_IMAGES_PAGE);
  G_OBJECT_CLASS (vivarium_images_page_parent_class)->dispose (object);
}

static void
vivarium_images_page_class_init (VivariumImagesPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_images_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-images-page.ui");
#define BIND(name) gtk_widget_class_bind_template_child (widget_class, VivariumImagesPage, name)
  BIND (import_button); BIND (build_button); BIND (job_revealer); BIND (job_label);
  BIND (job_cancel_button); BIND (job_progress); BIND (job_step_label); BIND (list_stack); BIND (image_list);
#undef BIND
  gtk_widget_class_bind_template_callback (widget_class, import_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, build_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, job_cancel_clicked_cb);
}

static void
vivarium_images_page_init (VivariumImagesPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_expand_on_select (self->image_list);
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
}
