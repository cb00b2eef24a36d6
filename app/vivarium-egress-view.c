/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-egress-view.h"

#include <glib/gi18n.h>

#include "vivarium-client.h"
#include "vivarium-egress-model.h"
#include "vivarium-egress-row.h"
#include "vivarium-util.h"

/* The daemon sends no signal per decision: while the view is on screen
 * and the session can still decide, the log is read again every few
 * seconds, and never more often than every MIN_INTERVAL, whatever asks. */
#define POLL_SEC           5
#define MIN_INTERVAL_USEC  (2 * G_USEC_PER_SEC)
/* A policy holds at most 1024 rules; a screenful says what it is. */
#define RULES_SHOWN        200

struct _VivariumEgressView {
  AdwBin               parent_instance;

  GtkRevealer         *failed_revealer;
  GtkLabel            *failed_label;
  AdwActionRow        *mode_row;
  AdwActionRow        *state_row;
  AdwPreferencesGroup *rules_group;
  GtkListBox          *rules_list;
  GtkLabel            *rules_label;
  GtkListBox          *decisions_list;
  GtkLabel            *decisions_label;

  VivariumEgressModel *model;
  VivariumDBusSession *session;
  VivariumDBusTask    *task;
  GCancellable        *cancellable;   /* the task's session proxy */
  gint64               last_fetch;
  gboolean             dirty;         /* something changed while not shown */
  guint                poll_timer;
  guint                soon_timer;
};

G_DEFINE_FINAL_TYPE (VivariumEgressView, vivarium_egress_view, ADW_TYPE_BIN)

static const char *
mode_text (const char *mode)
{
  if (g_strcmp0 (mode, "open") == 0)
    return _("Open: the internet except the host’s networks");
  if (g_strcmp0 (mode, "allowlist") == 0)
    return _("Allowlist: only the hosts the rules allow, through the session’s egress proxy");
  if (g_strcmp0 (mode, "none") == 0)
    return _("None: no network beyond the guest itself");
  return NULL;
}

static const char *
state_text (gint state)
{
  switch (state) {
  case VIVARIUM_EGRESS_STATE_OFF: return _("Off: this mode has no egress proxy");
  case VIVARIUM_EGRESS_STATE_STARTING: return _("Starting");
  case VIVARIUM_EGRESS_STATE_RUNNING: return _("Running: every connection goes through it and is logged below");
  case VIVARIUM_EGRESS_STATE_FAILED: return _("Failed: the guest has no way out");
  default: return NULL;
  }
}

/* A gone session's proxy has no properties: nothing to show of it. */
static const char *
session_mode (VivariumEgressView *self)
{
  return self->session != NULL ? vivarium_dbus_session_get_egress_mode (self->session) : NULL;
}

static gboolean
session_can_decide (VivariumEgressView *self)
{
  const char *word = self->session != NULL ? vivarium_dbus_session_get_state (self->session) : NULL;
  gint state = vivarium_parse_session_state (word);

  return g_strcmp0 (session_mode (self), "allowlist") == 0 &&
         word != NULL && state != VIVARIUM_SESSION_STATE_STOPPED && state != VIVARIUM_SESSION_STATE_FAILED;
}

static void
set_subtitle (AdwActionRow *row, const char *text)
{
  g_autofree char *plain = vivarium_plain_text (text, 300);

  adw_action_row_set_subtitle (row, plain);
}

static void
show_mode_and_state (VivariumEgressView *self)
{
  const char *mode = session_mode (self);
  const char *word = self->session != NULL ? vivarium_dbus_session_get_egress_state (self->session) : NULL;
  gint state = vivarium_parse_egress_state (word);
  const char *reason = self->session != NULL ? vivarium_dbus_session_get_egress_state_reason (self->session) : NULL;
  g_autofree char *banner = NULL;

  if (mode == NULL)
    set_subtitle (self->mode_row, self->task != NULL ? _("Not known here: the task’s session has ended (its decisions are kept below)")
                                                     : _("Not known"));
  else
    set_subtitle (self->mode_row, mode_text (mode) != NULL ? mode_text (mode) : mode);
  set_subtitle (self->state_row, state_text (state) != NULL ? state_text (state) : (word != NULL ? word : _("Not known")));

  /* A failed proxy is the one state the operator must not miss. */
  if (state == VIVARIUM_EGRESS_STATE_FAILED) {
    g_autofree char *why = vivarium_plain_text (reason != NULL && *reason != '\0' ? reason : _("no reason was given"), 300);

    banner = g_strdup_printf (_("The egress proxy failed: the guest has no way out (nothing falls back to open). %s"), why);
    gtk_label_set_text (self->failed_label, banner);
  }
  gtk_revealer_set_reveal_child (self->failed_revealer, banner != NULL);
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
show_rules (VivariumEgressView *self)
{
  const char *const *rules = self->session != NULL ? vivarium_dbus_session_get_egress_rules (self->session) : NULL;
  guint n = rules != NULL ? g_strv_length ((char **) rules) : 0;
  g_autofree char *more = NULL;

  remove_all_rows (self->rules_list);
  gtk_widget_set_visible (GTK_WIDGET (self->rules_group), g_strcmp0 (session_mode (self), "allowlist") == 0);
  for (guint i = 0; i < n && i < RULES_SHOWN; i++) {
    GtkWidget *row = adw_action_row_new ();
    g_autofree char *text = vivarium_plain_text (rules[i], 300);

    adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
    adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), text);
    gtk_list_box_append (self->rules_list, row);
  }
  gtk_widget_set_visible (GTK_WIDGET (self->rules_list), n > 0);
  if (n == 0)
    more = g_strdup (_("No rules: every name is refused."));
  else if (n > RULES_SHOWN)
    more = g_strdup_printf (_("%u more rules not shown here (vivariumctl config show lists them all)."), n - RULES_SHOWN);
  gtk_label_set_text (self->rules_label, more != NULL ? more : "");
  gtk_widget_set_visible (GTK_WIDGET (self->rules_label), more != NULL);
}

static char *
empty_text (VivariumEgressView *self)
{
  const char *mode = session_mode (self);

  if (g_strcmp0 (mode, "open") == 0)
    return g_strdup (_("Nothing is logged in open mode: the guest’s connections do not go through a proxy."));
  if (g_strcmp0 (mode, "none") == 0)
    return g_strdup (_("Nothing is logged: the guest has no network."));
  return g_strdup (_("No decisions yet."));
}

static void
show_counts (VivariumEgressView *self)
{
  g_autoptr(GString) text = g_string_new (NULL);
  const GError *error = self->model != NULL ? vivarium_egress_model_get_error (self->model) : NULL;
  guint64 total = self->model != NULL ? vivarium_egress_model_get_total (self->model) : 0;
  guint64 hidden = self->model != NULL ? vivarium_egress_model_get_hidden (self->model) : 0;

  /* An empty boxed list is a stray line. */
  gtk_widget_set_visible (GTK_WIDGET (self->decisions_list),
                          self->model != NULL && g_list_model_get_n_items (G_LIST_MODEL (self->model)) > 0);
  if (self->model == NULL) {
    gtk_label_set_text (self->decisions_label, "");
    return;
  }
  if (error != NULL) {
    g_autofree char *why = vivarium_client_describe_error (error);
    g_autofree char *plain = vivarium_plain_text (why, 300);

    g_string_append_printf (text, _("Could not read the decisions: %s"), plain);
  } else if (!vivarium_egress_model_get_loaded (self->model)) {
    g_string_append (text, _("Loading…"));
  } else if (total == 0) {
    g_autofree char *empty = empty_text (self);

    g_string_append (text, empty);
  } else {
    g_autofree char *n = g_strdup_printf ("%" G_GUINT64_FORMAT, total);

    g_string_append_printf (text, g_dngettext (GETTEXT_PACKAGE, "%s decision", "%s decisions", total), n);
  }
  if (hidden > 0) {
    g_autofree char *n = g_strdup_printf ("%" G_GUINT64_FORMAT, hidden);

    g_string_append (text, "\n");
    g_string_append_printf (text, _("Only the newest %u are shown here; %s older ones are not (vivariumctl session egress-log shows them all)."),
                            (guint) VIVARIUM_EGRESS_MODEL_MAX_KEPT, n);
  }
  if (vivarium_egress_model_get_log_full (self->model)) {
    g_string_append (text, "\n");
    g_string_append (text, _("The log is full: later decisions were not logged (the counts go on)."));
  }
  gtk_label_set_text (self->decisions_label, text->str);
}

static void
fetch_now (VivariumEgressView *self)
{
  g_clear_handle_id (&self->soon_timer, g_source_remove);
  self->dirty = FALSE;
  self->last_fetch = g_get_monotonic_time ();
  if (self->model != NULL)
    vivarium_egress_model_refresh (self->model);
}

static gboolean
soon_cb (gpointer user_data)
{
  VivariumEgressView *self = user_data;

  self->soon_timer = 0;
  fetch_now (self);
  return G_SOURCE_REMOVE;
}

/* What a change or the timer asks: at once if the last read was long
 * enough ago, else once when it is; nothing while the view is not shown. */
static void
refresh_soon (VivariumEgressView *self)
{
  gint64 since = g_get_monotonic_time () - self->last_fetch;

  if (!gtk_widget_get_mapped (GTK_WIDGET (self))) {
    self->dirty = TRUE;
    return;
  }
  if (self->soon_timer != 0)
    return;
  if (since >= MIN_INTERVAL_USEC)
    fetch_now (self);
  else
    self->soon_timer = g_timeout_add ((MIN_INTERVAL_USEC - since) / 1000 + 1, soon_cb, self);
}

static gboolean
poll_cb (gpointer user_data)
{
  VivariumEgressView *self = user_data;

  if (session_can_decide (self))
    refresh_soon (self);
  return G_SOURCE_CONTINUE;
}

static void
refresh_clicked_cb (VivariumEgressView *self)
{
  fetch_now (self);
}

static void
session_changed_cb (VivariumEgressView *self)
{
  show_mode_and_state (self);
  show_rules (self);
  show_counts (self);
  refresh_soon (self);
}

static GtkWidget *
create_row (gpointer item, gpointer user_data)
{
  return vivarium_egress_row_new (VIVARIUM_EGRESS_ENTRY (item));
}

static void
set_session (VivariumEgressView *self, VivariumDBusSession *session)
{
  if (self->session != NULL)
    g_signal_handlers_disconnect_by_data (self->session, self);
  g_set_object (&self->session, session);
  if (session != NULL)
    g_signal_connect_swapped (session, "g-properties-changed", G_CALLBACK (session_changed_cb), self);
  show_mode_and_state (self);
  show_rules (self);
}

static void
drop_source (VivariumEgressView *self)
{
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  gtk_list_box_bind_model (self->decisions_list, NULL, NULL, NULL, NULL);
  if (self->model != NULL)
    g_signal_handlers_disconnect_by_data (self->model, self);
  g_clear_object (&self->model);
  if (self->task != NULL)
    g_signal_handlers_disconnect_by_data (self->task, self);
  g_clear_object (&self->task);
  set_session (self, NULL);
}

void
vivarium_egress_view_set_source (VivariumEgressView *self, GDBusProxy *log_source, VivariumDBusSession *session)
{
  g_return_if_fail (VIVARIUM_IS_EGRESS_VIEW (self));

  drop_source (self);
  self->cancellable = g_cancellable_new ();
  set_session (self, session);
  if (log_source != NULL) {
    self->model = vivarium_egress_model_new (log_source);
    g_signal_connect_swapped (self->model, "notify::loading", G_CALLBACK (show_counts), self);
    gtk_list_box_bind_model (self->decisions_list, G_LIST_MODEL (self->model), create_row, NULL, NULL);
    self->last_fetch = 0;
    refresh_soon (self);
  }
  show_counts (self);
}

static void
task_session_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumEgressView) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusSession) session = vivarium_dbus_session_proxy_new_finish (res, &error);

  if (session == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      g_debug ("the task's session could not be read: %s", error->message);
    return;
  }
  set_session (self, session);
  show_counts (self);
}

static void
task_changed_cb (VivariumEgressView *self)
{
  refresh_soon (self);
}

void
vivarium_egress_view_set_task (VivariumEgressView *self, VivariumDBusTask *task)
{
  const char *path;

  vivarium_egress_view_set_source (self, G_DBUS_PROXY (task), NULL);
  if (task == NULL)
    return;
  self->task = g_object_ref (task);
  g_signal_connect_swapped (task, "g-properties-changed", G_CALLBACK (task_changed_cb), self);
  show_mode_and_state (self);
  path = vivarium_dbus_task_get_session (task);
  if (path == NULL || !g_variant_is_object_path (path) || g_strcmp0 (path, "/") == 0)
    return;
  vivarium_dbus_session_proxy_new (g_dbus_proxy_get_connection (G_DBUS_PROXY (task)), G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                   g_dbus_proxy_get_name (G_DBUS_PROXY (task)), path, self->cancellable,
                                   task_session_ready_cb, g_object_ref (self));
}

static void
vivarium_egress_view_map (GtkWidget *widget)
{
  VivariumEgressView *self = VIVARIUM_EGRESS_VIEW (widget);

  GTK_WIDGET_CLASS (vivarium_egress_view_parent_class)->map (widget);
  if (self->dirty)
    refresh_soon (self);
  if (self->poll_timer == 0)
    self->poll_timer = g_timeout_add_seconds (POLL_SEC, poll_cb, self);
}

static void
vivarium_egress_view_unmap (GtkWidget *widget)
{
  VivariumEgressView *self = VIVARIUM_EGRESS_VIEW (widget);

  g_clear_handle_id (&self->poll_timer, g_source_remove);
  if (self->soon_timer != 0) {
    g_clear_handle_id (&self->soon_timer, g_source_remove);
    self->dirty = TRUE;
  }
  GTK_WIDGET_CLASS (vivarium_egress_view_parent_class)->unmap (widget);
}

static void
vivarium_egress_view_dispose (GObject *object)
{
  VivariumEgressView *self = VIVARIUM_EGRESS_VIEW (object);

  g_clear_handle_id (&self->poll_timer, g_source_remove);
  g_clear_handle_id (&self->soon_timer, g_source_remove);
  drop_source (self);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_EGRESS_VIEW);
  G_OBJECT_CLASS (vivarium_egress_view_parent_class)->dispose (object);
}

static void
vivarium_egress_view_class_init (VivariumEgressViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_egress_view_dispose;
  widget_class->map = vivarium_egress_view_map;
  widget_class->unmap = vivarium_egress_view_unmap;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-egress-view.ui");
#define BIND(name) gtk_widget_class_bind_template_child (widget_class, VivariumEgressView, name)
  BIND (failed_revealer); BIND (failed_label); BIND (mode_row); BIND (state_row); BIND (rules_group);
  BIND (rules_list); BIND (rules_label); BIND (decisions_list); BIND (decisions_label);
#undef BIND
  gtk_widget_class_bind_template_callback (widget_class, refresh_clicked_cb);
}

static void
vivarium_egress_view_init (VivariumEgressView *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  show_mode_and_state (self);
  show_rules (self);
}
