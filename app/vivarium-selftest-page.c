/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-selftest-page.h"
#include "vivarium-time.h"

#include <glib/gi18n.h>

#include "vivarium-selftest-result.h"
#include "vivarium-util.h"

struct _VivariumSelftestPage {
  AdwBin             parent_instance;

  GtkLabel          *verdict_label;
  GtkButton         *export_button;
  GtkButton         *run_button;
  GtkLabel          *when_label;
  GtkRevealer       *progress_revealer;
  GtkProgressBar    *progress_bar;
  GtkLabel          *step_label;
  GtkGrid           *matrix;
  GtkTextView       *evidence_view;

  VivariumClient    *client;
  GPermission       *permission;
  VivariumDBusGuard *guard;
  char              *json;      /* the result shown, for Export */
  gboolean           running;
};

G_DEFINE_FINAL_TYPE (VivariumSelftestPage, vivarium_selftest_page, ADW_TYPE_BIN)

static const char *
outcome_label (gint verdict)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS: return _("Pass");
  case VIVARIUM_VERDICT_FAIL: return _("Fail");
  case VIVARIUM_VERDICT_INCONCLUSIVE: return _("Inconclusive");
  case VIVARIUM_VERDICT_NEVER_RUN: return _("Never run");
  default: return _("Unknown");
  }
}

/* Beside the word, so that colour is never the only signal. */
static const char *
outcome_symbol (gint verdict)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS: return "✓";
  case VIVARIUM_VERDICT_FAIL: return "✗";
  default: return "?";
  }
}

static const char *
outcome_class (gint verdict)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS: return "success";
  case VIVARIUM_VERDICT_FAIL: return "error";
  default: return "warning";
  }
}

static void
show_evidence (GtkButton *button, gpointer user_data)
{
  VivariumSelftestPage *self = VIVARIUM_SELFTEST_PAGE (gtk_widget_get_ancestor (GTK_WIDGET (button),
                                                                                VIVARIUM_TYPE_SELFTEST_PAGE));
  const char *evidence = g_object_get_data (G_OBJECT (button), "evidence");
  g_autofree char *plain = vivarium_plain_text (evidence, 20000);

  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->evidence_view), plain, -1);
}

static void
clear_matrix (VivariumSelftestPage *self)
{
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->matrix))) != NULL)
    gtk_grid_remove (self->matrix, child);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->evidence_view), "", -1);
}

static GtkWidget *
header_label (const char *untrusted)
{
  g_autofree char *text = vivarium_plain_text (untrusted, 40);
  GtkWidget *label = gtk_label_new (text);

  gtk_widget_add_css_class (label, "heading");
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  return label;
}

static GtkWidget *
cell_button (const char *row, const char *column, const VivariumSelftestCell *cell)
{
  gint outcome = vivarium_parse_verdict (cell->outcome);
  g_autofree char *text = g_strdup_printf ("%s %s", outcome_symbol (outcome), outcome_label (outcome));
  GtkWidget *button = gtk_button_new_with_label (text);
  g_autofree char *name = g_strdup_printf (_("%s in configuration %s: %s"), row, column, outcome_label (outcome));

  gtk_widget_add_css_class (button, "flat");
  gtk_widget_add_css_class (gtk_button_get_child (GTK_BUTTON (button)), outcome_class (outcome));
  gtk_accessible_update_property (GTK_ACCESSIBLE (button), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
  gtk_widget_set_tooltip_text (button, _("Show the evidence"));
  g_object_set_data_full (G_OBJECT (button), "evidence", g_strdup (cell->evidence), g_free);
  g_signal_connect (button, "clicked", G_CALLBACK (show_evidence), NULL);
  return button;
}

static void
fill_matrix (VivariumSelftestPage *self, VivariumSelftestResult *result)
{
  guint cols = vivarium_selftest_result_n_columns (result);
  g_autoptr(GArray) order = vivarium_selftest_result_row_order (result);

  clear_matrix (self);
  gtk_grid_attach (self->matrix, header_label (_("Probe")), 0, 0, 1, 1);
  for (guint c = 0; c < cols; c++)
    gtk_grid_attach (self->matrix, header_label (vivarium_selftest_result_column (result, c)), c + 1, 0, 1, 1);
  /* The failing rows first: what needs reading is at the top. */
  for (guint i = 0; i < order->len; i++) {
    guint r = g_array_index (order, guint, i);
    g_autofree char *row = vivarium_plain_text (vivarium_selftest_result_row (result, r), 60);
    GtkWidget *label = gtk_label_new (row);

    gtk_label_set_xalign (GTK_LABEL (label), 0);
    gtk_grid_attach (self->matrix, label, 0, i + 1, 1, 1);
    for (guint c = 0; c < cols; c++) {
      const VivariumSelftestCell *cell = vivarium_selftest_result_cell (result, r, c);

      if (cell != NULL)
        gtk_grid_attach (self->matrix, cell_button (row, vivarium_selftest_result_column (result, c), cell),
                         c + 1, i + 1, 1, 1);
    }
  }
}

/* The result's ISO 8601 time in the user's zone and locale, exactly; text
 * that is not such a time is shown as the plain text it is. */
static char *
finished_words (const char *iso8601)
{
  g_autoptr(GDateTime) when = iso8601 != NULL ? g_date_time_new_from_iso8601 (iso8601, NULL) : NULL;

  if (when == NULL)
    return vivarium_plain_text (iso8601, 64);
  return vivarium_time_exact (g_date_time_to_unix (when) * G_USEC_PER_SEC + g_date_time_get_microsecond (when));
}

static void
show_verdict (VivariumSelftestPage *self, gint verdict)
{
  g_autofree char *text = g_strdup_printf (_("Verdict: %s"), outcome_label (verdict));

  gtk_label_set_text (self->verdict_label, text);
  gtk_widget_remove_css_class (GTK_WIDGET (self->verdict_label), "success");
  gtk_widget_remove_css_class (GTK_WIDGET (self->verdict_label), "error");
  gtk_widget_remove_css_class (GTK_WIDGET (self->verdict_label), "warning");
  if (verdict != VIVARIUM_VERDICT_NEVER_RUN)
    gtk_widget_add_css_class (GTK_WIDGET (self->verdict_label), outcome_class (verdict));
}

static void
show_result (VivariumSelftestPage *self, const char *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumSelftestResult) result = NULL;
  g_autofree char *when = NULL;
  g_autofree char *finished = NULL;

  g_free (self->json);
  self->json = g_strdup (json);
  gtk_widget_set_sensitive (GTK_WIDGET (self->export_button), json != NULL && *json != '\0');
  if (json == NULL || *json == '\0') {
    show_verdict (self, VIVARIUM_VERDICT_NEVER_RUN);
    gtk_label_set_text (self->when_label, _("The self-test has not run on this machine yet."));
    clear_matrix (self);
    return;
  }
  result = vivarium_selftest_result_parse (json, &error);
  if (result == NULL) {
    g_autofree char *text = g_strdup_printf (_("The last result cannot be read: %s"), error->message);
    vivarium_set_label (self->when_label, text);
    clear_matrix (self);
    return;
  }
  show_verdict (self, vivarium_parse_verdict (vivarium_selftest_result_verdict (result)));
  finished = finished_words (vivarium_selftest_result_finished (result));
  when = g_strdup_printf (_("Finished %s · %u passed, %u failed, %u inconclusive"), finished,
                          vivarium_selftest_result_count (result, vivarium_verdict_to_string (VIVARIUM_VERDICT_PASS)),
                          vivarium_selftest_result_count (result, vivarium_verdict_to_string (VIVARIUM_VERDICT_FAIL)),
                          vivarium_selftest_result_count (result,
                                                          vivarium_verdict_to_string (VIVARIUM_VERDICT_INCONCLUSIVE)));
  gtk_label_set_text (self->when_label, when);
  fill_matrix (self, result);
}

static void
update_run_button (VivariumSelftestPage *self)
{
  gtk_widget_set_sensitive (GTK_WIDGET (self->run_button),
                            self->guard != NULL && !self->running && vivarium_permission_usable (self->permission));
}

static void
guard_signal_cb (GDBusProxy *proxy, const char *sender, const char *signal_name, GVariant *parameters, gpointer user_data)
{
  VivariumSelftestPage *self = user_data;
  guint32 percent = 0;
  const char *step = NULL;
  g_autofree char *plain = NULL;

  if (g_strcmp0 (signal_name, "SelfTestProgress") != 0 || !g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(us)")))
    return;
  g_variant_get (parameters, "(u&s)", &percent, &step);
  plain = vivarium_plain_text (step, 200);
  gtk_progress_bar_set_fraction (self->progress_bar, MIN (percent, 100) / 100.0);
  gtk_label_set_text (self->step_label, plain);
  gtk_revealer_set_reveal_child (self->progress_revealer, TRUE);
}

static void
last_result_changed_cb (VivariumSelftestPage *self)
{
  if (!self->running && self->guard != NULL)
    show_result (self, vivarium_dbus_guard_get_last_result (self->guard));
}

static void
run_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  VivariumSelftestPage *self = VIVARIUM_SELFTEST_PAGE (page);
  const char *json = NULL;

  g_variant_get (reply, "(&s)", &json);
  show_result (self, json);
}

static void
run_finished_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumSelftestPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &error);

  self->running = FALSE;
  gtk_revealer_set_reveal_child (self->progress_revealer, FALSE);
  update_run_button (self);
  if (reply == NULL) {
    vivarium_toast_error (GTK_WIDGET (self), _("The self-test did not run"), error);
    return;
  }
  run_done (GTK_WIDGET (self), reply, NULL);
}

/* A full run takes minutes (four configurations of real guests): the call
 * has no timeout of its own; progress arrives as signals meanwhile. */
static void
run_clicked_cb (VivariumSelftestPage *self)
{
  if (self->guard == NULL || self->running)
    return;
  self->running = TRUE;
  update_run_button (self);
  gtk_progress_bar_set_fraction (self->progress_bar, 0);
  gtk_label_set_text (self->step_label, _("Starting…"));
  gtk_revealer_set_reveal_child (self->progress_revealer, TRUE);
  vivarium_dbus_guard_call_run_self_test (self->guard, g_variant_new_array (G_VARIANT_TYPE ("{sv}"), NULL, 0),
                                          vivarium_call_flags (TRUE), VIVARIUM_CALL_TIMEOUT_LONG, NULL,
                                          run_finished_cb, g_object_ref (self));
}

static void
export_chosen_cb (GtkNativeDialog *chooser, int response, gpointer user_data)
{
  g_autoptr(VivariumSelftestPage) self = user_data;
  g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
  g_autoptr(GError) error = NULL;

  gtk_native_dialog_destroy (chooser);
  g_object_unref (chooser);
  if (response != GTK_RESPONSE_ACCEPT || file == NULL || self->json == NULL)
    return;
  if (!g_file_replace_contents (file, self->json, strlen (self->json), NULL, FALSE,
                                G_FILE_CREATE_REPLACE_DESTINATION, NULL, NULL, &error))
    vivarium_toast_error (GTK_WIDGET (self), _("Could not save the result"), error);
  else
    vivarium_toast (GTK_WIDGET (self), _("Result saved"));
}

static void
export_clicked_cb (VivariumSelftestPage *self)
{
  GtkFileChooserNative *chooser =
    gtk_file_chooser_native_new (_("Export the Result"), GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))),
                                 GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"), _("_Cancel"));

  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), "vivarium-selftest.json");
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (export_chosen_cb), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

static void
set_guard (VivariumSelftestPage *self, VivariumDBusGuard *guard)
{
  if (self->guard != NULL)
    g_signal_handlers_disconnect_by_data (self->guard, self);
  g_set_object (&self->guard, guard);
  if (guard != NULL) {
    g_signal_connect (guard, "g-signal", G_CALLBACK (guard_signal_cb), self);
    g_signal_connect_swapped (guard, "notify::last-result", G_CALLBACK (last_result_changed_cb), self);
    show_result (self, vivarium_dbus_guard_get_last_result (guard));
  }
  update_run_button (self);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  set_guard (VIVARIUM_SELFTEST_PAGE (user_data),
             vivarium_client_get_state (client) == VIVARIUM_CLIENT_CONNECTED ? vivarium_client_get_guard (client) : NULL);
}

void
vivarium_selftest_page_set_client (VivariumSelftestPage *self, VivariumClient *client)
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
vivarium_selftest_page_set_permission (VivariumSelftestPage *self, GPermission *permission)
{
  /* NULL on another host: its polkit decides each call there. */
  if (self->permission != NULL)
    g_signal_handlers_disconnect_by_data (self->permission, self);
  g_set_object (&self->permission, permission);
  if (permission != NULL)
    g_signal_connect_object (permission, "notify", G_CALLBACK (update_run_button), self, G_CONNECT_SWAPPED);
  update_run_button (self);
}

static void
vivarium_selftest_page_dispose (GObject *object)
{
  VivariumSelftestPage *self = VIVARIUM_SELFTEST_PAGE (object);

  set_guard (self, NULL);
  g_clear_object (&self->client);
  g_clear_object (&self->permission);
  g_clear_pointer (&self->json, g_free);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_SELFTEST_PAGE);
  G_OBJECT_CLASS (vivarium_selftest_page_parent_class)->dispose (object);
}

static void
vivarium_selftest_page_class_init (VivariumSelftestPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_selftest_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-selftest-page.ui");
#define BIND(name) gtk_widget_class_bind_template_child (widget_class, VivariumSelftestPage, name)
  BIND (verdict_label); BIND (export_button); BIND (run_button); BIND (when_label);
  BIND (progress_revealer); BIND (progress_bar); BIND (step_label); BIND (matrix); BIND (evidence_view);
#undef BIND
  gtk_widget_class_bind_template_callback (widget_class, run_clicked_cb);
  gtk_widget_class_bind_template_callback (widget_class, export_clicked_cb);
}

static void
vivarium_selftest_page_init (VivariumSelftestPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_name_mnemonic_buttons (GTK_WIDGET (self));
  show_result (self, NULL);
  update_run_button (self);
}
