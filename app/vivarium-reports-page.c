/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-reports-page.h"

#include <glib/gi18n.h>

#include "vivarium-proxy-list.h"
#include "vivarium-report.h"
#include "vivarium-util.h"

/* Files listed in a report's detail; the rest are counted. */
#define FILES_SHOWN 200

struct _VivariumReportsPage {
  AdwBin              parent_instance;

  GtkStack           *page_stack;
  GtkSearchEntry     *project_filter;
  GtkDropDown        *outcome_filter;
  GtkStack           *list_stack;
  GtkListBox         *report_list;
  GtkLabel           *detail_title;
  GtkBox             *detail_box;

  VivariumClient     *client;
  VivariumProxyList  *reports;
  GtkFilterListModel *filtered;
  GtkCustomFilter    *filter;
  GCancellable       *cancellable;   /* the detail being loaded */
  char               *shown_path;    /* the report in the detail, NULL when none */
};

G_DEFINE_FINAL_TYPE (VivariumReportsPage, vivarium_reports_page, ADW_TYPE_BIN)

/* The outcome filter's items, in the .ui's order; NULL: any. */
static const gint outcome_filters[] = {
  VIVARIUM_STATE_UNKNOWN, VIVARIUM_OUTCOME_DONE, VIVARIUM_OUTCOME_NEEDS_INPUT, VIVARIUM_OUTCOME_IN_PROGRESS,
  VIVARIUM_OUTCOME_FAILED,
};

static const char *
verdict_label (VivariumVerdict verdict)
{
  switch (verdict) {
  case VIVARIUM_VERDICT_PASS: return _("Pass: the verification passed in a fresh machine");
  case VIVARIUM_VERDICT_FAIL: return _("Fail: the verification failed in a fresh machine");
  case VIVARIUM_VERDICT_INCONCLUSIVE: return _("Inconclusive: the fresh machine could not tell");
  case VIVARIUM_VERDICT_NEVER_RUN: return _("Never run: there was no verification command");
  default: return _("Unknown");
  }
}

/* --- the detail ----------------------------------------------------------- */

static void
clear_detail (VivariumReportsPage *self)
{
  GtkWidget *child;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->detail_box))) != NULL)
    gtk_box_remove (self->detail_box, child);
}

static GtkWidget *
wrapped_label (const char *text, const char *css_class)
{
  GtkWidget *label = gtk_label_new (text);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  if (css_class != NULL)
    gtk_widget_add_css_class (label, css_class);
  return label;
}

static GtkWidget *
group (VivariumReportsPage *self, const char *title)
{
  GtkWidget *g = adw_preferences_group_new ();

  adw_preferences_group_set_title (ADW_PREFERENCES_GROUP (g), title);
  gtk_box_append (self->detail_box, g);
  return g;
}

/* @value is the daemon's fact or, where the report quotes a guest or a
 * worker, their text: plain, capped either way. */
static void
fact (GtkWidget *g, const char *title, const char *value)
{
  GtkWidget *row = adw_action_row_new ();
  g_autofree char *plain = vivarium_plain_text (value != NULL && *value != '\0' ? value : "—", 300);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), plain);
  adw_preferences_group_add (ADW_PREFERENCES_GROUP (g), row);
}

static char *
usec_time (gint64 usec)
{
  return vivarium_time_exact (usec);
}

static void
show_signature (VivariumReportsPage *self, const char *fingerprint, const GError *error)
{
  g_autofree char *text = NULL;
  g_autofree char *plain = NULL;

  if (error == NULL)
    text = g_strdup_printf (_("Signature verified: signed by this service’s key %s."), fingerprint);
  else
    text = g_strdup_printf (_("The signature does NOT verify: %s Treat everything below as unproven."), error->message);
  plain = vivarium_plain_text (text, 400);
  gtk_box_append (self->detail_box, wrapped_label (plain, error == NULL ? "success" : "error"));
}

/* A report's optional strings are NULL when absent. */
static const char *
or_dash (const char *s)
{
  return s != NULL && *s != '\0' ? s : "—";
}

static void
show_header (VivariumReportsPage *self, VivariumReport *report)
{
  GtkWidget *g = group (self, _("Facts recorded by Vivarium"));
  VivariumOutcome outcome = vivarium_report_get_outcome (report);
  const char *reason = vivarium_report_get_outcome_reason (report);
  g_autofree char *image = g_strdup_printf ("%s (%s)", or_dash (vivarium_report_get_image_name (report)),
                                            or_dash (vivarium_report_get_image_digest (report)));
  g_autofree char *started = usec_time (vivarium_report_get_started_at (report));
  g_autofree char *ended = usec_time (vivarium_report_get_ended_at (report));
  g_autofree char *packets = g_strdup_printf ("%" G_GUINT64_FORMAT, vivarium_report_get_guard_dropped_packets (report));
  g_autofree char *bytes = vivarium_format_size (vivarium_report_get_guard_dropped_bytes (report), TRUE);
  /* TRANSLATORS: packets the guard dropped, then their size ("2.0 KiB (2048 bytes)"). */
  g_autofree char *drops = g_strdup_printf (_("%s packets, %s"), packets, bytes);
  g_autofree char *commands = g_strdup_printf ("%u", vivarium_report_get_commands (report)->len +
                                                     (guint) vivarium_report_get_commands_omitted (report));

  fact (g, _("Outcome"), vivarium_outcome_label (outcome));
  fact (g, _("Project"), vivarium_report_get_project (report));
  fact (g, _("Task"), vivarium_report_get_task_id (report));
  fact (g, _("Image"), image);
  fact (g, _("Work session"), vivarium_report_get_session_id (report));
  fact (g, _("Started"), started);
  fact (g, _("Ended"), ended);
  fact (g, _("Host"), vivarium_report_get_host (report));
  fact (g, _("Commit"), vivarium_report_get_commit (report));
  fact (g, _("Commands run"), commands);
  fact (g, _("Blocked by the network guard"), drops);
  /* The reason may quote a guest: a detail under the outcome, as text. A
   * report that succeeded has none (NULL, not ""). */
  if (reason != NULL && *reason != '\0')
    fact (g, _("Reason (may quote the guest)"), reason);
}

static void
show_verification (VivariumReportsPage *self, VivariumReport *report)
{
  GtkWidget *g = group (self, _("Verification in a fresh machine"));
  VivariumVerifyWhose whose = vivarium_report_get_verify_whose (report);
  g_autofree char *status = g_strdup_printf ("%d", vivarium_report_get_verify_exit_status (report));

  fact (g, _("Verdict"), verdict_label (vivarium_report_get_verify_verdict (report)));
  fact (g, _("Command"), vivarium_report_get_verify_command (report));
  fact (g, _("Whose command"), whose == VIVARIUM_VERIFY_WHOSE_CALLER ? _("the caller’s")
                               : whose == VIVARIUM_VERIFY_WHOSE_WORKER ? _("the worker’s") : _("nobody’s"));
  fact (g, _("Exit status (as the guest reported it)"), status);
  fact (g, _("Fresh session"), vivarium_report_get_verify_session_id (report));
}

static void
show_files (VivariumReportsPage *self, VivariumReport *report)
{
  GPtrArray *files = vivarium_report_get_files (report);
  guint64 omitted = vivarium_report_get_files_omitted (report) + (files->len > FILES_SHOWN ? files->len - FILES_SHOWN : 0);
  g_autofree char *title = g_strdup_printf (_("Files changed (%u)"), files->len + (guint) vivarium_report_get_files_omitted (report));
  GtkWidget *g = group (self, title);

  for (guint i = 0; i < files->len && i < FILES_SHOWN; i++) {
    VivariumReportFile *file = g_ptr_array_index (files, i);
    g_autofree char *lines = file->lines_added >= 0
      ? g_strdup_printf ("%s, +%" G_GINT64_FORMAT " −%" G_GINT64_FORMAT, vivarium_file_change_to_string (file->change),
                         file->lines_added, file->lines_removed)
      : g_strdup_printf ("%s, %s", vivarium_file_change_to_string (file->change), vivarium_file_kind_to_string (file->kind));

    fact (g, lines, file->path);
  }
  if (files->len == 0 && omitted == 0)
    fact (g, _("No files changed"), "");
  if (omitted > 0) {
    g_autofree char *count = g_strdup_printf ("%" G_GUINT64_FORMAT, omitted);
    g_autofree char *more = g_strdup_printf (_("and %s more"), count);

    fact (g, more, "");
  }
}

/* The worker's summary: its words, quoted, labelled, set apart. */
static void
show_claim (VivariumReportsPage *self, VivariumReport *report)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *heading = wrapped_label (_("Claim by the worker (its own words, not verified by Vivarium)"),
                                      "vivarium-claim-heading");
  const char *summary = vivarium_report_get_summary (report);
  g_autofree char *plain = vivarium_plain_text (summary, VIVARIUM_REPORT_SUMMARY_MAX);
  g_autofree char *quoted = g_strdup_printf ("“%s”", plain);
  GtkWidget *text = wrapped_label (*plain != '\0' ? quoted : _("The worker made no claim."), NULL);

  gtk_widget_add_css_class (box, "vivarium-claim");
  gtk_accessible_update_relation (GTK_ACCESSIBLE (text), GTK_ACCESSIBLE_RELATION_LABELLED_BY, heading, NULL, -1);
  gtk_box_append (GTK_BOX (box), heading);
  gtk_box_append (GTK_BOX (box), text);
  if (vivarium_report_get_summary_truncated (report))
    gtk_box_append (GTK_BOX (box), wrapped_label (_("(cut short: the worker wrote more than a report keeps)"), "dim-label"));
  if (vivarium_report_get_verify_verdict (report) != VIVARIUM_VERDICT_PASS)
    gtk_box_append (GTK_BOX (box), wrapped_label (_("The verification did not pass: this is a claim, not a finding."), "warning"));
  gtk_box_append (self->detail_box, box);
}

typedef struct {
  VivariumReportsPage *page;
  char                *fingerprint;  /* the Manager's, "" if unknown */
} Load;

static void
load_free (Load *load)
{
  g_object_unref (load->page);
  g_free (load->fingerprint);
  g_free (load);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Load, load_free)

static void
json_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Load) load = user_data;
  VivariumReportsPage *self = load->page;
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) verify_error = NULL;
  g_autofree char *json = NULL;
  g_autofree char *fingerprint = NULL;
  g_autoptr(VivariumReport) report = NULL;

  if (!vivarium_dbus_report_call_get_json_finish (VIVARIUM_DBUS_REPORT (source), &json, res, &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      return;
    clear_detail (self);
    vivarium_toast_error (GTK_WIDGET (self), _("Could not read the report"), error);
    return;
  }
  clear_detail (self);
  /* Checked here, against the service's own key, with common/'s code: the
   * app does not take the service's word that its report is intact. */
  report = vivarium_signed_report_verify (json, strlen (json), *load->fingerprint != '\0' ? load->fingerprint : NULL,
                                          &fingerprint, &verify_error);
  show_signature (self, fingerprint, verify_error);
  if (report == NULL)
    report = vivarium_signed_report_parse_unverified (json, strlen (json), &error);
  if (report == NULL) {
    g_autofree char *text = g_strdup_printf (_("The report cannot be read: %s"), error->message);
    g_autofree char *plain = vivarium_plain_text (text, 400);

    gtk_box_append (self->detail_box, wrapped_label (plain, "error"));
    return;
  }
  show_header (self, report);
  show_verification (self, report);
  show_files (self, report);
  show_claim (self, report);
}

static void
open_report (VivariumReportsPage *self, VivariumDBusReport *report)
{
  VivariumDBusManager *manager = vivarium_client_get_manager (self->client);
  g_autofree char *id = vivarium_plain_text (vivarium_dbus_report_get_id (report), 64);
  g_autofree char *title = g_strdup_printf (_("Report %s"), id);
  Load *load = g_new0 (Load, 1);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  g_free (self->shown_path);
  self->shown_path = g_strdup (g_dbus_proxy_get_object_path (G_DBUS_PROXY (report)));
  clear_detail (self);
  gtk_box_append (self->detail_box, wrapped_label (_("Loading…"), "dim-label"));
  gtk_label_set_text (self->detail_title, title);
  gtk_stack_set_visible_child_name (self->page_stack, "detail");
  load->page = g_object_ref (self);
  load->fingerprint = g_strdup (manager != NULL && vivarium_dbus_manager_get_key_fingerprint (manager) != NULL
                                  ? vivarium_dbus_manager_get_key_fingerprint (manager) : "");
  vivarium_dbus_report_call_get_json (report, vivarium_call_flags (FALSE), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                      self->cancellable, json_ready_cb, load);
}

/* Activated (pointer, Enter) or selected (keyboard, AT-SPI): either opens. */
static void
row_activated_cb (VivariumReportsPage *self, GtkListBoxRow *row)
{
  VivariumDBusReport *report = row != NULL ? g_object_get_data (G_OBJECT (row), "report") : NULL;

  if (report != NULL)
    open_report (self, report);
}

/* The daemon deleted the report on show (past its retention bound): what
 * the detail held is no longer the service's, so it says so instead. */
static void
report_removed_cb (VivariumReportsPage *self, const char *path)
{
  if (g_strcmp0 (path, self->shown_path) != 0)
    return;
  g_cancellable_cancel (self->cancellable);
  clear_detail (self);
  gtk_box_append (self->detail_box,
                  wrapped_label (_("This report is gone: the service keeps only its newest reports and has deleted "
                                   "this one."), "error"));
}

static void
back_clicked_cb (VivariumReportsPage *self)
{
  g_clear_pointer (&self->shown_path, g_free);
  g_cancellable_cancel (self->cancellable);
  gtk_list_box_unselect_all (self->report_list);
  gtk_stack_set_visible_child_name (self->page_stack, "list");
  /* A hidden detail keeps no text (AT-SPI sees every stack page). */
  clear_detail (self);
  gtk_label_set_text (self->detail_title, "");
}

/* --- the list ------------------------------------------------------------- */

/* "demo · Done · 3 minutes ago", the exact time in the tooltip. */
static void
refresh_report_row (GtkWidget *row)
{
  VivariumDBusReport *report = g_object_get_data (G_OBJECT (row), "report");
  gint64 created = (gint64) vivarium_dbus_report_get_created_at (report);
  g_autofree char *project = vivarium_plain_text (vivarium_dbus_report_get_project (report), 64);
  g_autofree char *when = vivarium_time_relative (created);
  g_autofree char *exact = vivarium_time_exact (created);
  gint outcome = vivarium_parse_outcome (vivarium_dbus_report_get_outcome (report));
  g_autofree char *subtitle = g_strdup_printf (_("%s · %s · %s"), project, vivarium_outcome_label (outcome), when);

  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
  gtk_widget_set_tooltip_text (row, exact);
}

static GtkWidget *
create_report_row (gpointer item, gpointer user_data)
{
  VivariumDBusReport *report = item;
  g_autofree char *id = vivarium_plain_text (vivarium_dbus_report_get_id (report), 64);
  g_autofree char *title = g_strdup_printf (_("Report %s"), id);
  GtkWidget *row = adw_action_row_new ();
  GtkWidget *arrow = gtk_image_new_from_icon_name ("go-next-symbolic");

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (arrow), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Open"), -1);
  adw_action_row_add_suffix (ADW_ACTION_ROW (row), arrow);
  g_object_set_data_full (G_OBJECT (row), "report", g_object_ref (report), g_object_unref);
  vivarium_refresh_each_minute (row, refresh_report_row);
  return row;
}

static gboolean
filter_report (gpointer item, gpointer user_data)
{
  VivariumReportsPage *self = user_data;
  VivariumDBusReport *report = item;
  guint selected = gtk_drop_down_get_selected (self->outcome_filter);
  gint outcome = selected < G_N_ELEMENTS (outcome_filters) ? outcome_filters[selected] : VIVARIUM_STATE_UNKNOWN;
  const char *project = gtk_editable_get_text (GTK_EDITABLE (self->project_filter));

  if (outcome != VIVARIUM_STATE_UNKNOWN && vivarium_parse_outcome (vivarium_dbus_report_get_outcome (report)) != outcome)
    return FALSE;
  return *project == '\0' || strstr (vivarium_dbus_report_get_project (report), project) != NULL;
}

/* Newest first. */
static int
compare_reports (gconstpointer a, gconstpointer b, gpointer user_data)
{
  guint64 ta = vivarium_dbus_report_get_created_at (VIVARIUM_DBUS_REPORT ((gpointer) a));
  guint64 tb = vivarium_dbus_report_get_created_at (VIVARIUM_DBUS_REPORT ((gpointer) b));

  return ta < tb ? 1 : ta > tb ? -1 : 0;
}

static void
update_list_stack (VivariumReportsPage *self)
{
  gboolean any = self->filtered != NULL && g_list_model_get_n_items (G_LIST_MODEL (self->filtered)) > 0;

  gtk_stack_set_visible_child_name (self->list_stack, any ? "list" : "empty");
}

static void
filter_changed_cb (VivariumReportsPage *self)
{
  if (self->filter != NULL)
    gtk_filter_changed (GTK_FILTER (self->filter), GTK_FILTER_CHANGE_DIFFERENT);
}

static void
drop_lists (VivariumReportsPage *self)
{
  gtk_list_box_bind_model (self->report_list, NULL, NULL, NULL, NULL);
  if (self->filtered != NULL)
    g_signal_handlers_disconnect_by_data (self->filtered, self);
  if (self->reports != NULL)
    g_signal_handlers_disconnect_by_data (self->reports, self);
  g_clear_object (&self->filtered);
  g_clear_object (&self->filter);
  g_clear_object (&self->reports);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumReportsPage *self = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (client);
  GtkSortListModel *sorted;

  drop_lists (self);
  update_list_stack (self);
  if (vivarium_client_get_state (client) != VIVARIUM_CLIENT_CONNECTED || manager == NULL) {
    back_clicked_cb (self);
    return;
  }
  self->reports = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_REPORTS);
  g_signal_connect_swapped (self->reports, "object-removed", G_CALLBACK (report_removed_cb), self);
  sorted = gtk_sort_list_model_new (G_LIST_MODEL (g_object_ref (self->reports)),
                                    GTK_SORTER (gtk_custom_sorter_new (compare_reports, NULL, NULL)));
  self->filter = gtk_custom_filter_new (filter_report, self, NULL);
  self->filtered = gtk_filter_list_model_new (G_LIST_MODEL (sorted), GTK_FILTER (g_object_ref (self->filter)));
  g_signal_connect_swapped (self->filtered, "items-changed", G_CALLBACK (update_list_stack), self);
  gtk_list_box_bind_model (self->report_list, G_LIST_MODEL (self->filtered), create_report_row, self, NULL);
}

void
vivarium_reports_page_set_client (VivariumReportsPage *self, VivariumClient *client)
{
  if (self->client == client)
    return;
  /* Another host's: its data replaces this one's. */
  if (self->client != NULL)
    g_signal_handlers_disconnect_by_func (self->client, client_state_changed_cb, self);
  g_set_object (&self->client, client);
  g_signal_connect_object (client, "state-changed", G_CALLBACK (client_state_changed_cb), self, 0);
  /* An open report was the other host's, verified against its key. */
  back_clicked_cb (self);
  client_state_changed_cb (client, self);
}

static void
vivarium_reports_page_dispose (GObject *object)
{
  VivariumReportsPage *self = VIVARIUM_REPORTS_PAGE (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->shown_path, g_free);
  if (self->report_list != NULL)
    drop_lists (self);
  g_clear_object (&self->client);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_REPORTS_PAGE);
  G_OBJECT_CLASS (vivarium_reports_page_parent_class)->dispose (object);
}

static void
vivarium_reports_page_class_init (VivariumReportsPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_reports_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-reports-page.ui");
#define BIND(name) gtk_widget_class_bind_template_child (widget_class, VivariumReportsPage, name)
  BIND (page_stack); BIND (project_filter); BIND (outcome_filter); BIND (list_stack);
  BIND (report_list); BIND (detail_title); BIND (detail_box);
#undef BIND
  gtk_widget_class_bind_template_callback (widget_class, filter_changed_cb);
  gtk_widget_class_bind_template_callback (widget_class, row_activated_cb);
  gtk_widget_class_bind_template_callback (widget_class, back_clicked_cb);
}

static void
vivarium_reports_page_init (VivariumReportsPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->cancellable = g_cancellable_new ();
}
