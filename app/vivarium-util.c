/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-util.h"
#include "vivarium-client.h"

#include <adwaita.h>
#include <glib/gi18n.h>

void
vivarium_set_label (GtkLabel *label, const char *untrusted)
{
  g_autofree char *text = vivarium_plain_text (untrusted, VIVARIUM_UNTRUSTED_MAX_CHARS);

  gtk_label_set_use_markup (label, FALSE);
  gtk_label_set_text (label, text);
}

void
vivarium_toast (GtkWidget *inside, const char *text)
{
  GtkWidget *overlay = gtk_widget_get_ancestor (inside, ADW_TYPE_TOAST_OVERLAY);
  g_autofree char *escaped = NULL;
  AdwToast *toast;

  if (overlay == NULL) {
    g_warning ("%s", text);
    return;
  }
  /* libadwaita 1.2 reads a toast's title as markup, and ours carries the
   * daemon's words: escape them. */
  escaped = g_markup_escape_text (text, -1);
  toast = adw_toast_new (escaped);
  adw_toast_set_timeout (toast, 8);
  adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), toast);
}

/* "Could not stop the session: You are not allowed to do this. <why>" */
void
vivarium_toast_error (GtkWidget *inside, const char *what, const GError *error)
{
  g_autofree char *why = NULL;
  g_autofree char *plain = NULL;
  g_autofree char *text = NULL;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  why = vivarium_client_describe_error (error);
  plain = vivarium_plain_text (why, 300);
  text = g_strdup_printf ("%s: %s", what, plain);
  vivarium_toast (inside, text);
}

/* --- relative times kept true ------------------------------------------
 * One timer for the whole app, running only while some widget needs it. */

#define REFRESH_SEC 60

typedef struct {
  VivariumRefresh refresh;
} Fresh;

static GHashTable *fresh_widgets;   /* GtkWidget (until destroyed) → Fresh */
static guint       fresh_timer;

static gboolean
refresh_all_cb (gpointer user_data)
{
  GHashTableIter iter;
  gpointer widget, fresh;

  g_hash_table_iter_init (&iter, fresh_widgets);
  while (g_hash_table_iter_next (&iter, &widget, &fresh))
    ((Fresh *) fresh)->refresh (widget);
  return G_SOURCE_CONTINUE;
}

/* On "destroy" (dispose), not finalize: a disposed row has no labels left
 * to rewrite. */
static void
fresh_widget_gone (GtkWidget *widget, gpointer user_data)
{
  g_hash_table_remove (fresh_widgets, widget);
  if (g_hash_table_size (fresh_widgets) == 0)
    g_clear_handle_id (&fresh_timer, g_source_remove);
}

void
vivarium_refresh_each_minute (GtkWidget *widget, VivariumRefresh refresh)
{
  Fresh *fresh = g_new (Fresh, 1);

  fresh->refresh = refresh;
  if (fresh_widgets == NULL)
    fresh_widgets = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  if (!g_hash_table_contains (fresh_widgets, widget))
    g_signal_connect (widget, "destroy", G_CALLBACK (fresh_widget_gone), NULL);
  g_hash_table_insert (fresh_widgets, widget, fresh);
  if (fresh_timer == 0)
    fresh_timer = g_timeout_add_seconds (REFRESH_SEC, refresh_all_cb, NULL);
  refresh (widget);
}

/* Admin controls stay usable when the user may act now or may ask (a
 * password prompt through the desktop's polkit agent), and when polkit
 * itself could not be asked: then the daemon decides and its refusal is
 * shown. */
gboolean
vivarium_permission_usable (GPermission *permission)
{
  if (permission == NULL)
    return TRUE;
  return g_permission_get_allowed (permission) || g_permission_get_can_acquire (permission);
}

struct _VivariumAdminCall {
  GtkWidget        *page;
  char             *what;
  VivariumCallDone  done;
  gpointer          user_data;
};

static void
admin_call_free (VivariumAdminCall *call)
{
  g_object_unref (call->page);
  g_free (call->what);
  g_free (call);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumAdminCall, admin_call_free)

VivariumAdminCall *
vivarium_admin_call_new (GtkWidget *page, const char *what, VivariumCallDone done, gpointer user_data)
{
  VivariumAdminCall *call = g_new0 (VivariumAdminCall, 1);

  call->page = g_object_ref (page);
  call->what = g_strdup (what);
  call->done = done;
  call->user_data = user_data;
  return call;
}

/* Finished here rather than by each verb's typed _finish, so that every
 * refusal takes the one path to a toast. The generated calls are
 * GDBusProxy calls, with or without descriptors: one finish fits all. */
void
vivarium_admin_call_done (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumAdminCall) call = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_with_unix_fd_list_finish (G_DBUS_PROXY (source), NULL, res, &error);

  if (reply == NULL) {
    vivarium_toast_error (call->page, call->what, error);
    return;
  }
  if (call->done != NULL)
    call->done (call->page, reply, call->user_data);
}

/* GTK 4.8 names a button with a mnemonic label "_Build… Build…" (the raw
 * label plus the labelling text); screen readers and AT-SPI tests should
 * hear "Build…". Give every such button its plain label as its name. */
void
vivarium_name_mnemonic_buttons (GtkWidget *root)
{
  if (GTK_IS_BUTTON (root) && gtk_button_get_use_underline (GTK_BUTTON (root)) &&
      gtk_button_get_label (GTK_BUTTON (root)) != NULL) {
    g_autoptr(GString) plain = g_string_new (gtk_button_get_label (GTK_BUTTON (root)));

    g_string_replace (plain, "_", "", 0);
    gtk_accessible_reset_relation (GTK_ACCESSIBLE (root), GTK_ACCESSIBLE_RELATION_LABELLED_BY);
    gtk_accessible_update_property (GTK_ACCESSIBLE (root), GTK_ACCESSIBLE_PROPERTY_LABEL, plain->str, -1);
  }
  for (GtkWidget *child = gtk_widget_get_first_child (root); child != NULL; child = gtk_widget_get_next_sibling (child))
    vivarium_name_mnemonic_buttons (child);
}

static void
expand_selected_cb (GtkListBox *list, GtkListBoxRow *row, gpointer user_data)
{
  if (ADW_IS_EXPANDER_ROW (row))
    adw_expander_row_set_expanded (ADW_EXPANDER_ROW (row), TRUE);
}

/* A list of expander rows whose selection opens the row: so the keyboard's
 * and assistive technologies' "select" (AT-SPI Selection) shows its actions,
 * as a click on its header does. */
void
vivarium_expand_on_select (GtkListBox *list)
{
  gtk_list_box_set_selection_mode (list, GTK_SELECTION_SINGLE);
  g_signal_connect (list, "row-selected", G_CALLBACK (expand_selected_cb), NULL);
}

/* --- a drop-down of names that follows a proxy list ----------------------- */

typedef struct {
  GtkDropDown    *dropdown;   /* owns this */
  GtkStringList  *names;
  GListModel     *proxies;
  VivariumNameOf  name_of;
  char           *wanted;     /* preselected until the list has it */
  gulong          handler;
} NameChoice;

static void
name_choice_free (gpointer data)
{
  NameChoice *nc = data;

  g_clear_signal_handler (&nc->handler, nc->proxies);
  g_clear_object (&nc->proxies);
  g_clear_object (&nc->names);
  g_free (nc->wanted);
  g_free (nc);
}

/* Rebuilt whole on every change (a few names): the chosen one stays
 * chosen while it is still offered. */
static void
name_choice_rebuild (NameChoice *nc)
{
  g_autofree char *keep = g_strdup (vivarium_dropdown_get_name (nc->dropdown));
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  guint n = g_list_model_get_n_items (nc->proxies);
  guint select = GTK_INVALID_LIST_POSITION;

  if (nc->wanted != NULL) {
    g_free (keep);
    keep = g_strdup (nc->wanted);
  }
  for (guint i = 0; i < n; i++) {
    g_autoptr(GObject) proxy = g_list_model_get_item (nc->proxies, i);
    const char *name = nc->name_of (proxy);

    if (name == NULL || *name == '\0')
      continue;
    if (g_strcmp0 (name, keep) == 0) {
      select = names->len;
      g_clear_pointer (&nc->wanted, g_free);
    }
    g_ptr_array_add (names, (gpointer) name);
  }
  g_ptr_array_add (names, NULL);
  gtk_string_list_splice (nc->names, 0, g_list_model_get_n_items (G_LIST_MODEL (nc->names)),
                          (const char * const *) names->pdata);
  if (select == GTK_INVALID_LIST_POSITION && names->len > 1)
    select = 0;
  gtk_drop_down_set_selected (nc->dropdown, select);
}

void
vivarium_bind_name_dropdown (GtkDropDown *dropdown, GListModel *proxies, VivariumNameOf name_of,
                             const char *preselect)
{
  NameChoice *nc = g_new0 (NameChoice, 1);

  nc->dropdown = dropdown;
  nc->names = gtk_string_list_new (NULL);
  nc->proxies = g_object_ref (proxies);
  nc->name_of = name_of;
  nc->wanted = g_strdup (preselect);
  gtk_drop_down_set_model (dropdown, G_LIST_MODEL (nc->names));
  nc->handler = g_signal_connect_swapped (proxies, "items-changed", G_CALLBACK (name_choice_rebuild), nc);
  g_object_set_data_full (G_OBJECT (dropdown), "vivarium-name-choice", nc, name_choice_free);
  name_choice_rebuild (nc);
}

const char *
vivarium_dropdown_get_name (GtkDropDown *dropdown)
{
  gpointer item = gtk_drop_down_get_selected_item (dropdown);

  return GTK_IS_STRING_OBJECT (item) ? gtk_string_object_get_string (GTK_STRING_OBJECT (item)) : NULL;
}

/* The egress drop-downs' rows, in their .ui order: "" is the service's
 * default. */
const char *
vivarium_egress_mode_at (guint position)
{
  static const char * const modes[] = { "", "none", "allowlist", "open" };

  return position < G_N_ELEMENTS (modes) ? modes[position] : "";
}
