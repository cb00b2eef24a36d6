/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-sessions-page.h"

#include <glib/gi18n.h>

#include "vivarium-egress-view.h"
#include "vivarium-proxy-list.h"
#include "vivarium-util.h"

#define LOG_PAGE 50
#define SCREEN_REFRESH_SEC 5
#define TICK_SEC 10

struct _VivariumSessionsPage {
  AdwBin               parent_instance;

  AdwLeaflet          *leaflet;
  GtkStack            *list_stack;
  GtkListBox          *session_list;
  GtkWidget           *detail_box;
  GtkStack            *detail_stack;
  GtkLabel            *title_label;
  GtkLabel            *state_label;
  GtkLabel            *reason_label;
  GtkButton           *resume_button;
  GtkButton           *stop_button;
  AdwActionRow        *unit_row;
  AdwActionRow        *uid_row;
  AdwActionRow        *image_row;
  AdwActionRow        *digest_row;
  AdwActionRow        *accel_row;
  AdwActionRow        *started_row;
  AdwActionRow        *timings_row;
  GtkButton           *screenshot_button;
  GtkPicture          *screen_picture;
  GtkLabel            *screen_label;
  GtkListBox          *log_list;
  GtkLabel            *log_label;
  GtkButton           *log_more_button;
  GtkEntry            *exec_entry;
  GtkButton           *exec_button;
  GtkLabel            *exec_label;
  AdwViewStack        *detail_view_stack;
  VivariumEgressView  *egress_view;

  VivariumClient      *client;
  GPermission         *permission;
  VivariumProxyList   *sessions;
  VivariumDBusSession *selected;
  GCancellable        *detail_cancellable;
  guint64              log_next;
  guint64              log_total;
  gboolean             log_loading;
  gboolean             screen_auto;
  guint                screen_timer;
  guint                tick_timer;
};

G_DEFINE_FINAL_TYPE (VivariumSessionsPage, vivarium_sessions_page, ADW_TYPE_BIN)

static void load_log_page (VivariumSessionsPage *self);

static const char *
state_label (gint state)
{
  switch (state) {
  case VIVARIUM_SESSION_STATE_STARTING: return _("Starting");
  case VIVARIUM_SESSION_STATE_RUNNING: return _("Running");
  case VIVARIUM_SESSION_STATE_PAUSED: return _("Paused");
  case VIVARIUM_SESSION_STATE_STOPPING: return _("Stopping");
  case VIVARIUM_SESSION_STATE_STOPPED: return _("Stopped");
  case VIVARIUM_SESSION_STATE_FAILED: return _("Failed");
  default: return _("Unknown state");
  }
}

/* NULL (no session selected) is no state, as an unknown word is. */
static gint
session_state (VivariumDBusSession *session)
{
  return vivarium_parse_session_state (session != NULL ? vivarium_dbus_session_get_state (session) : NULL);
}

/* "Running · tiny · tcg · up 3 min 2 s" */
static char *
session_summary (VivariumDBusSession *session)
{
  g_autofree char *uptime = vivarium_format_uptime (vivarium_dbus_session_get_started_at (session));
  g_autofree char *image = vivarium_plain_text (vivarium_dbus_session_get_image (session), 80);
  g_autofree char *accel = vivarium_plain_text (vivarium_dbus_session_get_accelerator (session), 16);

  return g_strdup_printf (_("%s · %s · %s · up %s"),
                          state_label (session_state (session)),
                          image, accel, uptime);
}

/* The uptime moves on while the row is shown; the tooltip says since when. */
static void
refresh_session_row (GtkWidget *row)
{
  VivariumDBusSession *session = g_object_get_data (G_OBJECT (row), "session");
  g_autofree char *summary = session_summary (session);
  g_autofree char *exact = vivarium_time_exact ((gint64) vivarium_dbus_session_get_started_at (session));
  g_autofree char *tooltip = g_strdup_printf (_("Started %s"), exact);

  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), summary);
  gtk_widget_set_tooltip_text (row, tooltip);
}

static GtkWidget *
create_session_row (gpointer item, gpointer user_data)
{
  VivariumDBusSession *session = item;
  g_autofree char *id = vivarium_plain_text (vivarium_dbus_session_get_id (session), 80);
  GtkWidget *row = adw_action_row_new ();

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), id);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
  g_object_set_data_full (G_OBJECT (row), "session", g_object_ref (session), g_object_unref);
  vivarium_refresh_each_minute (row, refresh_session_row);
  return row;
}

static void
set_row (AdwActionRow *row, const char *untrusted)
{
  g_autofree char *text = vivarium_plain_text (untrusted, 300);

  adw_action_row_set_subtitle (row, text);
}

/* The steps in the order they run (the XML's), then any newer ones. */
static char *
format_timings (GVariant *timings)
{
  static const char *const order[] = { "image-check", "overlay", "guard", "unit-start", "agent-ready" };
  g_autoptr(GString) out = g_string_new (NULL);
  GVariantIter iter;
  const char *step;
  guint64 usec;

  if (timings == NULL)
    return g_strdup ("");
  for (gsize i = 0; i < G_N_ELEMENTS (order); i++) {
    if (g_variant_lookup (timings, order[i], "t", &usec))
      g_string_append_printf (out, "%s%s: %.3f s", out->len > 0 ? "\n" : "", order[i],
                              usec / (double) G_USEC_PER_SEC);
  }
  g_variant_iter_init (&iter, timings);
  while (g_variant_iter_next (&iter, "{&st}", &step, &usec)) {
    g_autofree char *plain = NULL;

    if (g_strv_contains (order, step))
      continue;
    plain = vivarium_plain_text (step, 40);
    g_string_append_printf (out, "%s%s: %.3f s", out->len > 0 ? "\n" : "", plain,
                            usec / (double) G_USEC_PER_SEC);
  }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
update_actions (VivariumSessionsPage *self)
{
  gint state = session_state (self->selected);
  gboolean usable = vivarium_permission_usable (self->permission);
  gboolean active = state != VIVARIUM_SESSION_STATE_STOPPED && state != VIVARIUM_SESSION_STATE_FAILED;

  gtk_widget_set_visible (GTK_WIDGET (self->resume_button), state == VIVARIUM_SESSION_STATE_PAUSED);
  gtk_widget_set_sensitive (GTK_WIDGET (self->resume_button), usable);
  gtk_widget_set_sensitive (GTK_WIDGET (self->stop_button), usable && active);
  gtk_widget_set_sensitive (GTK_WIDGET (self->screenshot_button), state == VIVARIUM_SESSION_STATE_RUNNING);
  gtk_widget_set_sensitive (GTK_WIDGET (self->exec_button), usable && state == VIVARIUM_SESSION_STATE_RUNNING);
}

static void
show_detail (VivariumSessionsPage *self)
{
  VivariumDBusSession *s = self->selected;
  g_autofree char *uid = NULL;
  g_autofree char *started = NULL;
  g_autofree char *timings = NULL;
  const gchar *reason;

  if (s == NULL) {
    /* Nothing of a gone session stays behind, not even on the hidden page
     * (screen readers and the UI test see every stack page). */
    gtk_label_set_text (self->title_label, "");
    gtk_label_set_text (self->state_label, "");
    gtk_label_set_text (self->reason_label, "");
    set_row (self->unit_row, "");
    set_row (self->digest_row, "");
    gtk_label_set_text (self->exec_label, "");
    gtk_stack_set_visible_child_name (self->detail_stack, "none");
    return;
  }
  vivarium_set_label (self->title_label, vivarium_dbus_session_get_id (s));
  gtk_label_set_text (self->state_label, state_label (session_state (s)));
  /* A property not yet cached reads as NULL: nothing to say yet. */
  reason = vivarium_dbus_session_get_state_reason (s);
  vivarium_set_label (self->reason_label, reason != NULL ? reason : "");
  gtk_widget_set_visible (GTK_WIDGET (self->reason_label), reason != NULL && reason[0] != '\0');
  /* "vivarium-s3 (2147000003)"; QEMU never runs as root, so 0 is a
   * property not cached yet: nothing to say. */
  uid = vivarium_dbus_session_get_uid (s) != 0 ? vivarium_format_uid (vivarium_dbus_session_get_uid (s)) : g_strdup ("");
  started = vivarium_time_exact ((gint64) vivarium_dbus_session_get_started_at (s));
  timings = format_timings (vivarium_dbus_session_get_startup_timings (s));
  set_row (self->unit_row, vivarium_dbus_session_get_unit (s));
  set_row (self->uid_row, uid);
  set_row (self->image_row, vivarium_dbus_session_get_image (s));
  set_row (self->digest_row, vivarium_dbus_session_get_image_digest (s));
  set_row (self->accel_row, vivarium_dbus_session_get_accelerator (s));
  set_row (self->started_row, started);
  set_row (self->timings_row, timings);
  update_actions (self);
  gtk_stack_set_visible_child_name (self->detail_stack, "detail");
}

/* One command log entry as a row; argv is the guest-bound text the daemon
 * recorded, shown as plain text and capped. */
/* "#3 · finished · exit status 0 · 2 minutes ago · took 1 s · output
 * 1.2 KiB, errors 0 bytes", kept true each minute; the exact start in the
 * tooltip. */
static void
refresh_log_row (GtkWidget *row)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (g_object_get_data (G_OBJECT (row), "entry"));
  g_autofree char *when = NULL, *exact = NULL, *tooltip = NULL, *took = NULL;
  g_autofree char *out = NULL, *err = NULL, *subtitle = NULL;
  const char *state = "";
  guint64 seq = 0, started = 0, duration = 0, out_size = 0, err_size = 0;
  gint32 status = -1;

  g_variant_dict_lookup (dict, "seq", "t", &seq);
  g_variant_dict_lookup (dict, "state", "&s", &state);
  g_variant_dict_lookup (dict, "exit-status", "i", &status);
  g_variant_dict_lookup (dict, "started-at", "t", &started);
  g_variant_dict_lookup (dict, "duration", "t", &duration);
  g_variant_dict_lookup (dict, "stdout-size", "t", &out_size);
  g_variant_dict_lookup (dict, "stderr-size", "t", &err_size);
  when = vivarium_time_relative ((gint64) started);
  exact = vivarium_time_exact ((gint64) started);
  tooltip = g_strdup_printf (_("Started %s"), exact);
  took = vivarium_format_duration (duration);
  out = vivarium_format_size (out_size, FALSE);
  err = vivarium_format_size (err_size, FALSE);
  subtitle = g_strdup_printf (_("#%llu · %s · exit status %d · %s · took %s · output %s, errors %s"),
                              (unsigned long long) seq, state, status, when, took, out, err);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
  gtk_widget_set_tooltip_text (row, tooltip);
}

static GtkWidget *
create_log_row (GVariant *entry)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (entry);
  g_autofree const char **argv = NULL;
  g_autofree char *joined = NULL;
  g_autofree char *title = NULL;
  const char *kind = "";
  GtkWidget *row = adw_action_row_new ();

  g_variant_dict_lookup (dict, "kind", "&s", &kind);
  g_variant_dict_lookup (dict, "argv", "^a&s", &argv);
  joined = argv != NULL ? g_strjoinv (" ", (char **) argv) : g_strdup (kind);
  title = vivarium_plain_text (joined, 300);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle_lines (ADW_ACTION_ROW (row), 2);
  g_object_set_data_full (G_OBJECT (row), "entry", g_variant_ref (entry), (GDestroyNotify) g_variant_unref);
  vivarium_refresh_each_minute (row, refresh_log_row);
  return row;
}

static void
update_log_label (VivariumSessionsPage *self)
{
  g_autofree char *text = NULL;

  if (self->log_total == 0)
    text = g_strdup (_("No commands yet."));
  else
    text = g_strdup_printf (_("%llu of %llu commands shown"),
                            (unsigned long long) self->log_next, (unsigned long long) self->log_total);
  gtk_label_set_text (self->log_label, text);
  gtk_widget_set_visible (GTK_WIDGET (self->log_more_button), self->log_next < self->log_total);
}

static void
log_page_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumSessionsPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  g_autoptr(GVariant) commands = NULL;
  guint64 next, total, dropped;
  GVariantIter iter;
  GVariant *entry;

  self->log_loading = FALSE;
  if (reply == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      vivarium_toast_error (GTK_WIDGET (self), _("Could not read the command log"), error);
    return;
  }
  if (G_DBUS_PROXY (source) != G_DBUS_PROXY (self->selected))
    return;
  g_variant_get (reply, "(@aa{sv}ttt)", &commands, &next, &total, &dropped);
  g_variant_iter_init (&iter, commands);
  while ((entry = g_variant_iter_next_value (&iter)) != NULL) {
    gtk_list_box_append (self->log_list, create_log_row (entry));
    g_variant_unref (entry);
  }
  /* The oldest entries may be gone from memory: start after them. */
  self->log_next = MAX (next, dropped);
  self->log_total = total;
  update_log_label (self);
}

static void
load_log_page (VivariumSessionsPage *self)
{
  if (self->selected == NULL || self->log_loading)
    return;
  self->log_loading = TRUE;
  vivarium_dbus_session_call_get_command_log (self->selected, self->log_next, LOG_PAGE, vivarium_call_flags (FALSE),
                                              VIVARIUM_CALL_TIMEOUT_DEFAULT, self->detail_cancellable, log_page_cb,
                                              g_object_ref (self));
}

static void
log_more_clicked_cb (VivariumSessionsPage *self)
{
  load_log_page (self);
}

/* CommandFinished: the log grew (or an entry changed: a late finish).
 * Appending from where we are keeps the rows in the daemon's order. */
static void
session_signal_cb (GDBusProxy *proxy, const char *sender, const char *signal_name,
                   GVariant *parameters, gpointer user_data)
{
  VivariumSessionsPage *self = user_data;

  if (g_strcmp0 (signal_name, "CommandFinished") == 0 && self->log_next >= self->log_total)
    load_log_page (self);
  else if (g_strcmp0 (signal_name, "CommandFinished") == 0)
    update_log_label (self);
}

static void
screenshot_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumSessionsPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);
  g_autoptr(GVariant) png = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  g_autofree char *why = NULL;

  if (reply == NULL && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (reply != NULL) {
    png = g_variant_get_child_value (reply, 0);
    bytes = g_variant_get_data_as_bytes (png);
    texture = gdk_texture_new_from_bytes (bytes, &error);
  }
  if (texture == NULL) {
    /* Stop refreshing on its own: a refusal would repeat every few seconds. */
    self->screen_auto = FALSE;
    why = vivarium_client_describe_error (error);
    vivarium_set_label (self->screen_label, why);
    return;
  }
  gtk_picture_set_paintable (self->screen_picture, GDK_PAINTABLE (texture));
  gtk_label_set_text (self->screen_label, _("Refreshed every few seconds while shown."));
}

static void
take_screenshot (VivariumSessionsPage *self, GDBusCallFlags flags)
{
  if (session_state (self->selected) != VIVARIUM_SESSION_STATE_RUNNING)
    return;
  vivarium_dbus_session_call_screenshot (self->selected, flags,
                                         flags & G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION
                                           ? VIVARIUM_CALL_TIMEOUT_INTERACTIVE : VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                         self->detail_cancellable, screenshot_cb, g_object_ref (self));
}

static void
screenshot_clicked_cb (VivariumSessionsPage *self)
{
  self->screen_auto = TRUE;
  take_screenshot (self, G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION);
}

/* Only while the detail is on screen, and never with a password prompt. */
static gboolean
screen_timer_cb (gpointer user_data)
{
  VivariumSessionsPage *self = user_data;

  if (self->screen_auto && gtk_widget_get_mapped (GTK_WIDGET (self->screen_picture)))
    take_screenshot (self, G_DBUS_CALL_FLAGS_NONE);
  return G_SOURCE_CONTINUE;
}

static void
selected_changed_cb (VivariumSessionsPage *self)
{
  show_detail (self);
}

/* gtk_list_box_remove_all() is GTK 4.12. */
static void
remove_all_rows (GtkListBox *list)
{
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (list))) != NULL)
    gtk_list_box_remove (list, child);
}

static void
select_session (VivariumSessionsPage *self, VivariumDBusSession *session)
{
  if (self->selected != NULL)
    g_signal_handlers_disconnect_by_data (self->selected, self);
  g_cancellable_cancel (self->detail_cancellable);
  g_clear_object (&self->detail_cancellable);
  g_set_object (&self->selected, session);
  self->detail_cancellable = g_cancellable_new ();
  self->log_next = self->log_total = 0;
  self->log_loading = FALSE;
  self->screen_auto = TRUE;
  remove_all_rows (self->log_list);
  gtk_picture_set_paintable (self->screen_picture, NULL);
  gtk_label_set_text (self->screen_label, "");
  /* Its own decisions and properties; it reads them only while shown. */
  vivarium_egress_view_set_source (self->egress_view, G_DBUS_PROXY (session), session);
  if (session != NULL) {
    g_signal_connect_swapped (session, "g-properties-changed", G_CALLBACK (selected_changed_cb), self);
    g_signal_connect (session, "g-signal", G_CALLBACK (session_signal_cb), self);
    load_log_page (self);
    take_screenshot (self, G_DBUS_CALL_FLAGS_NONE);
  }
  show_detail (self);
}

/* Selection (pointer, keyboard or an assistive technology) shows the
 * detail; activation (Enter, a click) also moves there when folded. */
static void
row_selected_cb (VivariumSessionsPage *self, GtkListBoxRow *row)
{
  VivariumDBusSession *session = row != NULL ? g_object_get_data (G_OBJECT (row), "session") : NULL;

  if (session != NULL && session != self->selected)
    select_session (self, session);
}

static void
row_activated_cb (VivariumSessionsPage *self, GtkListBoxRow *row)
{
  row_selected_cb (self, row);
  adw_leaflet_set_visible_child (self->leaflet, self->detail_box);
}

static void
back_clicked_cb (VivariumSessionsPage *self)
{
  adw_leaflet_navigate (self->leaflet, ADW_NAVIGATION_DIRECTION_BACK);
}

/* Stop or Resume: a Session verb without arguments. */
typedef void (*SessionVerbCall) (VivariumDBusSession *proxy, GDBusCallFlags call_flags, gint timeout_msec,
                                 GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);

static void
admin_call (VivariumSessionsPage *self, SessionVerbCall call, const char *what)
{
  if (self->selected != NULL)
    call (self->selected, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
          vivarium_admin_call_new (GTK_WIDGET (self), what, NULL, NULL));
}

static void
stop_clicked_cb (VivariumSessionsPage *self)
{
  admin_call (self, vivarium_dbus_session_call_stop, _("Could not stop the session"));
}

/* What a command printed is the guest's: capped, plain text. */
#define EXEC_OUTPUT_CHARS 4000
#define EXEC_TIMEOUT_SEC  60

static char *
guest_bytes (GVariant *bytes)
{
  gsize len = 0;
  const char *data = g_variant_get_fixed_array (bytes, &len, 1);
  g_autofree char *text = g_strndup (data != NULL ? data : "", len);

  return vivarium_plain_text (text, EXEC_OUTPUT_CHARS);
}

static void
exec_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  VivariumSessionsPage *self = VIVARIUM_SESSIONS_PAGE (page);
  g_autoptr(GVariant) out = NULL;
  g_autoptr(GVariant) err = NULL;
  g_autofree char *out_text = NULL;
  g_autofree char *err_text = NULL;
  g_autofree char *text = NULL;
  gboolean out_cut = FALSE, err_cut = FALSE;
  gint32 status = 0;

  g_variant_get (reply, "(i@ay@aybb)", &status, &out, &err, &out_cut, &err_cut);
  out_text = guest_bytes (out);
  err_text = guest_bytes (err);
  text = g_strdup_printf (_("Exit status %d (as the guest reported it)\n%s%s%s%s"), status, out_text,
                          out_cut ? _("\n(output cut at 1 MiB)") : "",
                          *err_text != '\0' ? "\n" : "", err_text);
  gtk_label_set_text (self->exec_label, text);
}

static void
exec_clicked_cb (VivariumSessionsPage *self)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) argv = NULL;
  const char *line = gtk_editable_get_text (GTK_EDITABLE (self->exec_entry));

  if (self->selected == NULL || !gtk_widget_is_sensitive (GTK_WIDGET (self->exec_button)))
    return;
  /* Split as a shell would, without a shell: the guest runs the program. */
  if (!g_shell_parse_argv (line, NULL, &argv, &error)) {
    g_autofree char *text = g_strdup_printf (_("Could not read the command: %s"), error->message);

    gtk_label_set_text (self->exec_label, text);
    return;
  }
  gtk_label_set_text (self->exec_label, _("Running…"));
  vivarium_dbus_session_call_exec (self->selected, (const char *const *) argv, (const char *const[]) { NULL }, "",
                                   EXEC_TIMEOUT_SEC, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                   vivarium_admin_call_new (GTK_WIDGET (self), _("Could not run the command"),
                                                            exec_done, NULL));
}

static void
resume_clicked_cb (VivariumSessionsPage *self)
{
  admin_call (self, vivarium_dbus_session_call_resume, _("Could not resume the session"));
}

static void
update_list_state (VivariumSessionsPage *self)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->sessions));

  gtk_stack_set_visible_child_name (self->list_stack, n > 0 ? "list" : "empty");
}

/* A changed session's row is made anew by the list box: keep it selected. */
static void
reselect_row (VivariumSessionsPage *self)
{
  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->session_list));
       row != NULL; row = gtk_widget_get_next_sibling (row)) {
    if (self->selected != NULL && g_object_get_data (G_OBJECT (row), "session") == (gpointer) self->selected) {
      gtk_list_box_select_row (self->session_list, GTK_LIST_BOX_ROW (row));
      return;
    }
  }
}

static void
sessions_changed_cb (GListModel *model, guint position, guint removed, guint added, gpointer user_data)
{
  VivariumSessionsPage *self = user_data;

  update_list_state (self);
  if (self->selected != NULL &&
      vivarium_proxy_list_lookup (self->sessions, g_dbus_proxy_get_object_path (G_DBUS_PROXY (self->selected))) == NULL)
    select_session (self, NULL);
  else
    reselect_row (self);
}

/* Uptimes move on without a signal. */
static gboolean
tick_cb (gpointer user_data)
{
  VivariumSessionsPage *self = user_data;

  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->session_list));
       row != NULL; row = gtk_widget_get_next_sibling (row)) {
    VivariumDBusSession *session = g_object_get_data (G_OBJECT (row), "session");
    g_autofree char *summary = NULL;

    if (session == NULL)
      continue;
    summary = session_summary (session);
    adw_action_row_set_subtitle (ADW_ACTION_ROW (row), summary);
  }
  return G_SOURCE_CONTINUE;
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumSessionsPage *self = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  select_session (self, NULL);
  gtk_list_box_bind_model (self->session_list, NULL, NULL, NULL, NULL);
  if (self->sessions != NULL)
    g_signal_handlers_disconnect_by_data (self->sessions, self);
  g_clear_object (&self->sessions);
  if (vivarium_client_get_state (client) != VIVARIUM_CLIENT_CONNECTED || manager == NULL) {
    gtk_stack_set_visible_child_name (self->list_stack, "empty");
    return;
  }
  self->sessions = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_SESSIONS);
  /* After the list box's own handler, so the rows exist already. */
  g_signal_connect_after (self->sessions, "items-changed", G_CALLBACK (sessions_changed_cb), self);
  gtk_list_box_bind_model (self->session_list, G_LIST_MODEL (self->sessions), create_session_row, NULL, NULL);
  update_list_state (self);
}

void
vivarium_sessions_page_set_client (VivariumSessionsPage *self, VivariumClient *client)
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

void
vivarium_sessions_page_set_permission (VivariumSessionsPage *self, GPermission *permission)
{
  /* NULL on another host: its polkit decides each call there. */
  if (self->permission != NULL)
    g_signal_handlers_disconnect_by_data (self->permission, self);
  g_set_object (&self->permission, permission);
  if (permission != NULL)
    g_signal_connect_object (permission, "notify", G_CALLBACK (update_actions), self, G_CONNECT_SWAPPED);
  update_actions (self);
}

static void
vivarium_sessions_page_dispose (GObject *object)
{
  VivariumSessionsPage *self = VIVARIUM_SESSIONS_PAGE (object);

  g_clear_handle_id (&self->screen_timer, g_source_remove);
  g_clear_handle_id (&self->tick_timer, g_source_remove);
  if (self->selected != NULL)
    g_signal_handlers_disconnect_by_data (self->selected, self);
  g_cancellable_cancel (self->detail_cancellable);
  g_clear_object (&self->detail_cancellable);
  g_clear_object (&self->selected);
  if (self->sessions != NULL)
    g_signal_handlers_disconnect_by_data (self->sessions, self);
  g_clear_object (&self->sessions);
  g_clear_object (&self->client);
  g_clear_object (&self->permission);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_SESSIONS_PAGE);
  G_OBJECT_CLASS (vivarium_sessions_page_parent_class)->dispose (object);
}

static void
vivarium_sessions_page_class_init (VivariumSessionsPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_sessions_page_dispose;
  g_type_ensure (VIVARIUM_TYPE_EGRESS_VIEW);
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-sessions-page.ui");
#define BIND(name) gtk_widget_class_bind_template_child (widget_class, VivariumSessionsPage, name)
  BIND (leaflet); BIND (list_stack); BIND (session_list); BIND (detail_box); BIND (detail_stack);
  BIND (title_label); BIND (state_label); BIND (reason_label); BIND (resume_button); BIND (stop_button);
  BIND (unit_row); BIND (uid_row); BIND (image_row); BIND (digest_row); BIND (accel_row);
  BIND (started_row); BIND (timings_row); BIND (screenshot_button); BIND (screen_picture);
  BIND (screen_label); BIND (log_list); BIND (log_label); BIND (log_more_button);
  BIND (exec_entry); BIND (exec_button); BIND (exec_label); BIND (detail_view_stack); BIND (egress_view);
#undef BIND
  gtk_widget_class_bind_template_callback (widget_class, row_activated_cb);
  gtk_widget_class_bind_template_callback (widget_class, row_selected_cb);
  gtk_widget_class_bind_template_callback (widget_class, back_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, stop_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, exec_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, resume_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, screenshot_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, log_more_clicked_cb);
}

static void
vivarium_sessions_page_init (VivariumSessionsPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  self->detail_cancellable = g_cancellable_new ();
  self->screen_timer = g_timeout_add_seconds (SCREEN_REFRESH_SEC, screen_timer_cb, self);
  self->tick_timer = g_timeout_add_seconds (TICK_SEC, tick_cb, self);
  show_detail (self);
}
