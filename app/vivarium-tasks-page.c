/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-tasks-page.h"

#include <glib/gi18n.h>

#include "vivarium-egress-view.h"
#include "vivarium-proxy-list.h"
#include "vivarium-util.h"

/* What the app shows of a transcript: the operator reads it here, whole
 * transcripts belong in the daemon's files. */
#define TRANSCRIPT_MAX_BYTES 64000
#define TRANSCRIPT_ENTRY_MAX_CHARS 4000

struct _VivariumTasksPage {
  AdwBin              parent_instance;

  GtkStack           *list_stack;
  GtkListBox         *task_list;

  VivariumClient     *client;
  GPermission        *permission;
  VivariumProxyList  *tasks;
  GtkSortListModel   *sorted;
  GHashTable         *expanded;   /* object paths whose row is open */
  GCancellable       *cancellable;
};

G_DEFINE_FINAL_TYPE (VivariumTasksPage, vivarium_tasks_page, ADW_TYPE_BIN)

static VivariumDBusTask *
row_task (GtkWidget *widget)
{
  GtkWidget *row = gtk_widget_get_ancestor (widget, ADW_TYPE_EXPANDER_ROW);

  return row != NULL ? g_object_get_data (G_OBJECT (row), "task") : NULL;
}

static VivariumTasksPage *
page_of (GtkWidget *widget)
{
  return VIVARIUM_TASKS_PAGE (gtk_widget_get_ancestor (widget, VIVARIUM_TYPE_TASKS_PAGE));
}

static const char *
outcome_class (gint outcome)
{
  switch (outcome) {
  case VIVARIUM_OUTCOME_DONE: return "success";
  case VIVARIUM_OUTCOME_FAILED: return "error";
  case VIVARIUM_OUTCOME_NEEDS_INPUT: return "warning";
  default: return "accent";
  }
}

static gint
task_outcome (VivariumDBusTask *task)
{
  return vivarium_parse_outcome (vivarium_dbus_task_get_outcome (task));
}

static gboolean
task_running (VivariumDBusTask *task)
{
  gint outcome = task_outcome (task);

  return outcome == VIVARIUM_OUTCOME_IN_PROGRESS || outcome == VIVARIUM_OUTCOME_NEEDS_INPUT;
}

/* --- answering, cancelling -------------------------------------------- */

static void
answered_done (GtkWidget *page, GVariant *reply, gpointer user_data)
{
  vivarium_toast (page, _("Answer sent: the worker goes on."));
}

static void
answer_clicked_cb (GtkWidget *widget, gpointer user_data)
{
  GtkEditable *entry = user_data;
  VivariumDBusTask *task = row_task (widget);
  VivariumTasksPage *self = page_of (widget);
  const char *text = gtk_editable_get_text (entry);

  if (task == NULL || self == NULL)
    return;
  if (*text == '\0') {
    vivarium_toast (GTK_WIDGET (self), _("Type an answer first."));
    return;
  }
  vivarium_dbus_task_call_answer (task, text, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                  vivarium_admin_call_new (GTK_WIDGET (self), _("Could not send the answer"),
                                                           answered_done, NULL));
}

static void
cancel_response_cb (AdwMessageDialog *dialog, const char *response, gpointer user_data)
{
  g_autoptr(VivariumDBusTask) task = user_data;
  GtkWidget *page = g_object_get_data (G_OBJECT (dialog), "page");

  if (g_strcmp0 (response, "confirm") == 0 && page != NULL)
    vivarium_dbus_task_call_cancel (task, VIVARIUM_ADMIN_CALL, NULL, vivarium_admin_call_done,
                                    vivarium_admin_call_new (page, _("Could not cancel the task"), NULL, NULL));
}

static void
cancel_clicked_cb (GtkButton *button, gpointer user_data)
{
  VivariumDBusTask *task = row_task (GTK_WIDGET (button));
  VivariumTasksPage *self = page_of (GTK_WIDGET (button));
  GtkWidget *dialog;

  if (task == NULL || self == NULL)
    return;
  dialog = adw_message_dialog_new (GTK_WINDOW (gtk_widget_get_root (GTK_WIDGET (self))), _("Cancel the Task?"),
                                   _("The worker is stopped; its work so far is committed and reported as failed (“cancelled”)."));
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Keep Running"),
                                    "confirm", _("_Cancel Task"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "confirm", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "page", g_object_ref (self), g_object_unref);
  g_signal_connect (dialog, "response", G_CALLBACK (cancel_response_cb), g_object_ref (task));
  gtk_window_present (GTK_WINDOW (dialog));
}

/* --- the transcript ------------------------------------------------------
 * Task.GetTranscript: an older daemon without it gets a placeholder that
 * says so, never an error dressed as a transcript. */

/* One line per entry: the daemon's time and kind, then the worker's text.
 * The text's own lines are indented, so no line of it can pass for the
 * start of another entry. */
static void
append_entry (GString *out, guint64 usec, const char *kind, const char *untrusted, gboolean cut)
{
  g_autofree char *when = vivarium_time_exact ((gint64) usec);
  g_autofree char *plain_kind = vivarium_plain_text (kind, 40);
  g_autofree char *plain = vivarium_plain_text (untrusted, TRANSCRIPT_ENTRY_MAX_CHARS);
  g_auto(GStrv) lines = g_strsplit (plain, "\n", -1);

  g_string_append_printf (out, "%s  %s:", when, plain_kind);
  for (guint i = 0; lines[i] != NULL; i++)
    g_string_append_printf (out, "%s%s", i == 0 ? " " : "\n    ", lines[i]);
  if (cut)
    g_string_append_printf (out, "\n    %s", _("(cut by the service: the entry was longer)"));
  g_string_append_c (out, '\n');
}

/* Task.GetTranscript: (a(tssb) entries, b truncated). */
static char *
format_transcript (GVariant *entries, gboolean truncated)
{
  g_autoptr(GString) out = g_string_new (NULL);
  GVariantIter iter;
  guint64 usec;
  const char *kind;
  const char *text;
  gboolean cut;
  gsize n = g_variant_n_children (entries);

  if (n == 0 && !truncated)
    return g_strdup (_("The transcript is empty."));
  g_variant_iter_init (&iter, entries);
  while (out->len < TRANSCRIPT_MAX_BYTES &&
         g_variant_iter_next (&iter, "(t&s&sb)", &usec, &kind, &text, &cut)) {
    append_entry (out, usec, kind, text, cut);
    n--;
  }
  if (n > 0)
    g_string_append_printf (out, ngettext ("(%u more entry not shown here)\n",
                                           "(%u more entries not shown here)\n", n), (guint) n);
  if (truncated)
    g_string_append (out, _("(the service dropped later entries: the transcript reached its cap)\n"));
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
transcript_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GtkLabel) label = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) entries = NULL;
  gboolean truncated = FALSE;
  g_autofree char *text = NULL;

  if (!vivarium_dbus_task_call_get_transcript_finish (VIVARIUM_DBUS_TASK (source), &entries, &truncated,
                                                      res, &error)) {
    g_autofree char *why = NULL;
    g_autofree char *plain = NULL;

    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      return;
    if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD)) {
      gtk_label_set_text (label, _("Transcript not available: this Vivarium service does not offer task transcripts yet."));
      return;
    }
    why = vivarium_client_describe_error (error);
    text = g_strdup_printf (_("Could not read the transcript: %s"), why);
    plain = vivarium_plain_text (text, 300);
    gtk_label_set_text (label, plain);
    return;
  }
  text = format_transcript (entries, truncated);
  gtk_label_set_text (label, text);
}

static void
transcript_clicked_cb (GtkButton *button, gpointer user_data)
{
  GtkLabel *label = user_data;
  VivariumDBusTask *task = row_task (GTK_WIDGET (button));
  VivariumTasksPage *self = page_of (GTK_WIDGET (button));

  if (task == NULL || self == NULL)
    return;
  gtk_label_set_text (label, _("Loading…"));
  vivarium_dbus_task_call_get_transcript (task, vivarium_call_flags (FALSE), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                          self->cancellable, transcript_ready_cb, g_object_ref (label));
}

/* --- rows ---------------------------------------------------------------- */

static GtkWidget *
fact_row (const char *title, const char *untrusted_value)
{
  GtkWidget *row = adw_action_row_new ();
  g_autofree char *value = vivarium_plain_text (untrusted_value, 300);

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), value);
  return row;
}

static GtkWidget *
boxed_row (GtkWidget *child)
{
  GtkWidget *row = gtk_list_box_row_new ();

  gtk_widget_set_margin_start (child, 12);
  gtk_widget_set_margin_end (child, 12);
  gtk_widget_set_margin_top (child, 10);
  gtk_widget_set_margin_bottom (child, 10);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), child);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), FALSE);
  return row;
}

/* The worker's question, set apart and labelled as its words, and the
 * operator's answer box. */
static GtkWidget *
question_row (VivariumDBusTask *task, GPermission *permission)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 8);
  GtkWidget *claim = gtk_box_new (GTK_ORIENTATION_VERTICAL, 4);
  GtkWidget *heading = gtk_label_new (_("The worker asks (its own words, not checked by Vivarium):"));
  GtkWidget *question = gtk_label_new (NULL);
  GtkWidget *answer_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *entry = gtk_entry_new ();
  GtkWidget *send = gtk_button_new_with_mnemonic (_("_Answer"));

  gtk_widget_add_css_class (claim, "vivarium-claim");
  gtk_widget_add_css_class (heading, "vivarium-claim-heading");
  gtk_label_set_xalign (GTK_LABEL (heading), 0);
  gtk_label_set_wrap (GTK_LABEL (heading), TRUE);
  vivarium_set_label (GTK_LABEL (question), vivarium_dbus_task_get_question (task));
  gtk_label_set_xalign (GTK_LABEL (question), 0);
  gtk_label_set_wrap (GTK_LABEL (question), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (question), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (question), TRUE);
  gtk_accessible_update_relation (GTK_ACCESSIBLE (question), GTK_ACCESSIBLE_RELATION_LABELLED_BY, heading, NULL, -1);
  gtk_box_append (GTK_BOX (claim), heading);
  gtk_box_append (GTK_BOX (claim), question);

  gtk_entry_set_placeholder_text (GTK_ENTRY (entry), _("Your answer"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL, _("Your answer"), -1);
  gtk_widget_set_hexpand (entry, TRUE);
  gtk_widget_add_css_class (send, "suggested-action");
  vivarium_name_mnemonic_buttons (send);
  gtk_widget_set_sensitive (send, vivarium_permission_usable (permission));
  g_signal_connect (send, "clicked", G_CALLBACK (answer_clicked_cb), entry);
  g_signal_connect_swapped (entry, "activate", G_CALLBACK (gtk_widget_activate), send);
  gtk_box_append (GTK_BOX (answer_box), entry);
  gtk_box_append (GTK_BOX (answer_box), send);

  gtk_box_append (GTK_BOX (box), claim);
  gtk_box_append (GTK_BOX (box), answer_box);
  return boxed_row (box);
}

/* While a row's transcript is on screen it follows the worker: read again
 * every few seconds while the task runs (GetTranscript has no offset, so
 * not more often), once more when it has ended. */
#define TRANSCRIPT_FOLLOW_SECONDS 2

typedef struct {
  GWeakRef          label;
  VivariumDBusTask *task;
  GCancellable     *cancellable;
} TranscriptFollow;

static void
transcript_follow_free (gpointer data)
{
  TranscriptFollow *f = data;

  g_weak_ref_clear (&f->label);
  g_object_unref (f->task);
  g_object_unref (f->cancellable);
  g_free (f);
}

static gboolean
transcript_follow_tick (gpointer data)
{
  TranscriptFollow *f = data;
  g_autoptr(GtkLabel) label = g_weak_ref_get (&f->label);
  gboolean running = task_running (f->task);

  if (label == NULL || g_cancellable_is_cancelled (f->cancellable))
    return G_SOURCE_REMOVE;
  if (!gtk_widget_get_mapped (GTK_WIDGET (label)))
    return G_SOURCE_CONTINUE;
  vivarium_dbus_task_call_get_transcript (f->task, vivarium_call_flags (FALSE), VIVARIUM_CALL_TIMEOUT_DEFAULT,
                                          f->cancellable, transcript_ready_cb, g_object_ref (label));
  return running ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static void
follow_transcript (GtkLabel *label, VivariumDBusTask *task, GCancellable *cancellable)
{
  TranscriptFollow *f = g_new0 (TranscriptFollow, 1);

  g_weak_ref_init (&f->label, label);
  f->task = g_object_ref (task);
  f->cancellable = g_object_ref (cancellable);
  g_timeout_add_seconds_full (G_PRIORITY_DEFAULT, TRANSCRIPT_FOLLOW_SECONDS, transcript_follow_tick, f,
                              transcript_follow_free);
}

static GtkWidget *
transcript_row (VivariumDBusTask *task, GCancellable *cancellable)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *heading = gtk_label_new (_("Transcript (the model’s turns and tool calls: the worker’s words)"));
  GtkWidget *label = gtk_label_new (_("Not loaded."));
  GtkWidget *button = gtk_button_new_with_mnemonic (_("Show _Transcript"));

  gtk_label_set_xalign (GTK_LABEL (heading), 0);
  gtk_label_set_wrap (GTK_LABEL (heading), TRUE);
  gtk_widget_add_css_class (heading, "vivarium-claim-heading");
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_widget_add_css_class (label, "monospace");
  gtk_widget_add_css_class (label, "vivarium-claim");
  gtk_widget_set_halign (button, GTK_ALIGN_START);
  vivarium_name_mnemonic_buttons (button);
  g_signal_connect (button, "clicked", G_CALLBACK (transcript_clicked_cb), label);
  /* An agent's transcript is what the operator watches: it follows by
   * itself (a script worker's stays empty, read when asked). */
  if (g_strcmp0 (vivarium_dbus_task_get_worker (task), "agent") == 0)
    follow_transcript (GTK_LABEL (label), task, cancellable);
  gtk_box_append (GTK_BOX (box), heading);
  gtk_box_append (GTK_BOX (box), button);
  gtk_box_append (GTK_BOX (box), label);
  return boxed_row (box);
}

/* --- egress ---------------------------------------------------------------
 * Made when asked, like the transcript: a list of tasks should not read
 * every task's log. Once made it reads only while its row is open. */

static void
egress_clicked_cb (GtkButton *button, gpointer user_data)
{
  GtkBox *box = user_data;
  VivariumDBusTask *task = row_task (GTK_WIDGET (button));
  GtkWidget *view;

  if (task == NULL)
    return;
  view = g_object_new (VIVARIUM_TYPE_EGRESS_VIEW, NULL);
  vivarium_egress_view_set_task (VIVARIUM_EGRESS_VIEW (view), task);
  gtk_widget_set_visible (GTK_WIDGET (button), FALSE);
  gtk_box_append (box, view);
}

static GtkWidget *
egress_row (void)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  GtkWidget *heading = gtk_label_new (_("Egress (the work session’s way out, and what its egress proxy decided)"));
  GtkWidget *button = gtk_button_new_with_mnemonic (_("Show _Egress"));

  gtk_label_set_xalign (GTK_LABEL (heading), 0);
  gtk_label_set_wrap (GTK_LABEL (heading), TRUE);
  gtk_widget_add_css_class (heading, "heading");
  gtk_widget_set_halign (button, GTK_ALIGN_START);
  vivarium_name_mnemonic_buttons (button);
  g_signal_connect (button, "clicked", G_CALLBACK (egress_clicked_cb), box);
  gtk_box_append (GTK_BOX (box), heading);
  gtk_box_append (GTK_BOX (box), button);
  return boxed_row (box);
}

static GtkWidget *
outcome_badge (gint outcome)
{
  GtkWidget *badge = gtk_label_new (vivarium_outcome_label (outcome));

  gtk_widget_add_css_class (badge, outcome_class (outcome));
  gtk_widget_set_valign (badge, GTK_ALIGN_CENTER);
  return badge;
}

static void
expanded_cb (AdwExpanderRow *row, GParamSpec *pspec, gpointer user_data)
{
  VivariumTasksPage *self = user_data;
  VivariumDBusTask *task = g_object_get_data (G_OBJECT (row), "task");
  const char *path = g_dbus_proxy_get_object_path (G_DBUS_PROXY (task));

  if (self == NULL)
    return;
  if (adw_expander_row_get_expanded (row))
    g_hash_table_add (self->expanded, g_strdup (path));
  else
    g_hash_table_remove (self->expanded, path);
}

/* "demo · step verify · submitted 3 minutes ago", kept true each minute;
 * the exact times are the expanded row's facts. */
static void
refresh_task_row (GtkWidget *row)
{
  VivariumDBusTask *task = g_object_get_data (G_OBJECT (row), "task");
  g_autofree char *project = vivarium_plain_text (vivarium_dbus_task_get_project (task), 64);
  g_autofree char *step = vivarium_plain_text (vivarium_dbus_task_get_step (task), 32);
  g_autofree char *submitted = vivarium_time_relative ((gint64) vivarium_dbus_task_get_submitted_at (task));
  g_autofree char *subtitle = g_strdup_printf (_("%s · step %s · submitted %s"), project, step, submitted);

  adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (row), subtitle);
}

static GtkWidget *
create_task_row (gpointer item, gpointer user_data)
{
  VivariumTasksPage *self = user_data;
  VivariumDBusTask *task = item;
  gint outcome = task_outcome (task);
  g_autofree char *id = vivarium_plain_text (vivarium_dbus_task_get_id (task), 64);
  g_autofree char *project = vivarium_plain_text (vivarium_dbus_task_get_project (task), 64);
  g_autofree char *submitted = vivarium_time_exact ((gint64) vivarium_dbus_task_get_submitted_at (task));
  g_autofree char *finished = vivarium_time_exact ((gint64) vivarium_dbus_task_get_finished_at (task));
  g_autofree char *title = g_strdup_printf (_("Task %s"), id);
  const char *reason = vivarium_dbus_task_get_reason (task);
  GtkWidget *row = adw_expander_row_new ();

  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
  g_object_set_data_full (G_OBJECT (row), "task", g_object_ref (task), g_object_unref);
  vivarium_refresh_each_minute (row, refresh_task_row);
  adw_expander_row_add_action (ADW_EXPANDER_ROW (row), outcome_badge (outcome));

  if (outcome == VIVARIUM_OUTCOME_NEEDS_INPUT)
    adw_expander_row_add_row (ADW_EXPANDER_ROW (row), question_row (task, self->permission));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Project"), project));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Image"), vivarium_dbus_task_get_image (task)));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Worker"), vivarium_dbus_task_get_worker (task)));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Submitted"), submitted));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Finished"), task_running (task) ? _("still running") : finished));
  /* A reason may quote the guest: shown as plain, capped text. */
  if (reason != NULL && *reason != '\0')
    adw_expander_row_add_row (ADW_EXPANDER_ROW (row), fact_row (_("Reason"), reason));
  /* Every task has one (a script worker's is empty): the operator gets
   * the service's answer, not a guess from the worker kind. */
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), transcript_row (task, self->cancellable));
  adw_expander_row_add_row (ADW_EXPANDER_ROW (row), egress_row ());
  if (task_running (task)) {
    GtkWidget *actions = adw_action_row_new ();
    GtkWidget *cancel = gtk_button_new_with_mnemonic (_("_Cancel Task…"));

    gtk_widget_set_valign (cancel, GTK_ALIGN_CENTER);
    gtk_widget_add_css_class (cancel, "destructive-action");
    vivarium_name_mnemonic_buttons (cancel);
    gtk_widget_set_sensitive (cancel, vivarium_permission_usable (self->permission));
    g_signal_connect (cancel, "clicked", G_CALLBACK (cancel_clicked_cb), NULL);
    adw_preferences_row_set_title (ADW_PREFERENCES_ROW (actions), _("Actions"));
    adw_action_row_add_suffix (ADW_ACTION_ROW (actions), cancel);
    adw_expander_row_add_row (ADW_EXPANDER_ROW (row), actions);
  }
  /* The page outlives its rows; a row being made has no parent yet. */
  g_signal_connect (row, "notify::expanded", G_CALLBACK (expanded_cb), self);
  /* A question is what the operator must see: that row opens itself. */
  if (outcome == VIVARIUM_OUTCOME_NEEDS_INPUT ||
      g_hash_table_contains (self->expanded, g_dbus_proxy_get_object_path (G_DBUS_PROXY (task))))
    adw_expander_row_set_expanded (ADW_EXPANDER_ROW (row), TRUE);
  return row;
}

/* --- the list ------------------------------------------------------------ */

/* Newest first. */
static int
compare_tasks (gconstpointer a, gconstpointer b, gpointer user_data)
{
  guint64 ta = vivarium_dbus_task_get_submitted_at (VIVARIUM_DBUS_TASK ((gpointer) a));
  guint64 tb = vivarium_dbus_task_get_submitted_at (VIVARIUM_DBUS_TASK ((gpointer) b));

  return ta < tb ? 1 : ta > tb ? -1 : 0;
}

static void
tasks_changed_cb (GListModel *model, guint position, guint removed, guint added, gpointer user_data)
{
  VivariumTasksPage *self = user_data;

  gtk_stack_set_visible_child_name (self->list_stack, g_list_model_get_n_items (model) > 0 ? "list" : "empty");
}

/* A finished task the daemon forgot (past its retention bound): its row,
 * which was its detail, has left the list; if it was open, the operator
 * hears why it went. */
static void
task_removed_cb (VivariumProxyList *tasks, const char *path, gpointer user_data)
{
  VivariumTasksPage *self = user_data;

  if (g_hash_table_remove (self->expanded, path))
    vivarium_toast (GTK_WIDGET (self), _("A task you had open is gone: the service keeps only its newest finished tasks."));
}

static void
rebind (VivariumTasksPage *self)
{
  gtk_list_box_bind_model (self->task_list, NULL, NULL, NULL, NULL);
  if (self->sorted != NULL)
    gtk_list_box_bind_model (self->task_list, G_LIST_MODEL (self->sorted), create_task_row, self, NULL);
}

static void
drop_lists (VivariumTasksPage *self)
{
  if (self->tasks != NULL)
    g_signal_handlers_disconnect_by_data (self->tasks, self);
  g_clear_object (&self->sorted);
  g_clear_object (&self->tasks);
}

static void
client_state_changed_cb (VivariumClient *client, gpointer user_data)
{
  VivariumTasksPage *self = user_data;
  VivariumDBusManager *manager = vivarium_client_get_manager (client);

  drop_lists (self);
  rebind (self);
  gtk_stack_set_visible_child_name (self->list_stack, "empty");
  if (vivarium_client_get_state (client) != VIVARIUM_CLIENT_CONNECTED || manager == NULL)
    return;
  self->tasks = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_TASKS);
  g_signal_connect (self->tasks, "items-changed", G_CALLBACK (tasks_changed_cb), self);
  g_signal_connect (self->tasks, "object-removed", G_CALLBACK (task_removed_cb), self);
  self->sorted = gtk_sort_list_model_new (G_LIST_MODEL (g_object_ref (self->tasks)),
                                          GTK_SORTER (gtk_custom_sorter_new (compare_tasks, NULL, NULL)));
  rebind (self);
}

void
vivarium_tasks_page_set_client (VivariumTasksPage *self, VivariumClient *client)
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

/* A task just submitted: its row opens as soon as the list has it (the
 * row is made when TaskAdded arrives, perhaps after this). */
void
vivarium_tasks_page_show_task (VivariumTasksPage *self, const char *object_path)
{
  g_hash_table_add (self->expanded, g_strdup (object_path));
  rebind (self);
}

void
vivarium_tasks_page_set_permission (VivariumTasksPage *self, GPermission *permission)
{
  /* NULL on another host: its polkit decides each call there. */
  if (self->permission != NULL)
    g_signal_handlers_disconnect_by_data (self->permission, self);
  g_set_object (&self->permission, permission);
  if (permission != NULL)
    g_signal_connect_object (permission, "notify", G_CALLBACK (rebind), self, G_CONNECT_SWAPPED);
  rebind (self);
}

static void
vivarium_tasks_page_dispose (GObject *object)
{
  VivariumTasksPage *self = VIVARIUM_TASKS_PAGE (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  drop_lists (self);
  g_clear_object (&self->client);
  g_clear_object (&self->permission);
  g_clear_pointer (&self->expanded, g_hash_table_unref);
  gtk_widget_dispose_template (GTK_WIDGET (self), VIVARIUM_TYPE_TASKS_PAGE);
  G_OBJECT_CLASS (vivarium_tasks_page_parent_class)->dispose (object);
}

static void
vivarium_tasks_page_class_init (VivariumTasksPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = vivarium_tasks_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class, "/org/vivarium/Vivarium/vivarium-tasks-page.ui");
  gtk_widget_class_bind_template_child (widget_class, VivariumTasksPage, list_stack);
  gtk_widget_class_bind_template_child (widget_class, VivariumTasksPage, task_list);
}

static void
vivarium_tasks_page_init (VivariumTasksPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  vivarium_expand_on_select (self->task_list);
  self->cancellable = g_cancellable_new ();
  self->expanded = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}
