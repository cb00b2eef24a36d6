/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdReportStore"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-report-store.h"

/* What the bus shows of one stored report; the file holds the rest. */
typedef struct {
  VdReportStore      *store;     /* unowned: the store outlives its entries */
  gchar              *id;
  gchar              *path;
  gint64              created_at;
  VivariumDBusReport *skeleton;
} Entry;

struct _VdReportStore {
  GObject       parent_instance;
  gchar        *reports_dir;
  gchar        *keys_dir;
  guint         max_reports;
  VdExportFunc  export_func;
  gpointer      export_data;
  VdSigningKey *key;
  GHashTable   *entries;   /* id → Entry */
};

G_DEFINE_TYPE (VdReportStore, vd_report_store, G_TYPE_OBJECT)

enum { SIGNAL_REPORT_ADDED, SIGNAL_REPORT_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
entry_free (Entry *entry)
{
  g_signal_handlers_disconnect_matched (entry->skeleton, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, entry);
  g_object_unref (entry->skeleton);
  g_free (entry->id);
  g_free (entry->path);
  g_free (entry);
}

static void
vd_report_store_finalize (GObject *object)
{
  VdReportStore *self = VD_REPORT_STORE (object);

  g_hash_table_unref (self->entries);
  g_clear_object (&self->key);
  g_free (self->reports_dir);
  g_free (self->keys_dir);
  G_OBJECT_CLASS (vd_report_store_parent_class)->finalize (object);
}

static void
vd_report_store_class_init (VdReportStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_report_store_finalize;
  signals[SIGNAL_REPORT_ADDED] = g_signal_new ("report-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                               NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_REPORT_REMOVED] = g_signal_new ("report-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                 NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_report_store_init (VdReportStore *self)
{
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) entry_free);
}

VdReportStore *
vd_report_store_new (const gchar *reports_dir, const gchar *keys_dir, guint max_reports, VdExportFunc export_func,
                     gpointer export_data)
{
  VdReportStore *self = g_object_new (VD_TYPE_REPORT_STORE, NULL);

  self->reports_dir = g_strdup (reports_dir);
  self->keys_dir = g_strdup (keys_dir);
  self->max_reports = MAX (max_reports, 1);
  self->export_func = export_func;
  self->export_data = export_data;
  return self;
}

static gchar *
file_for (VdReportStore *self, const gchar *id)
{
  g_autofree gchar *name = g_strconcat (id, ".json", NULL);

  return g_build_filename (self->reports_dir, name, NULL);
}

static gchar *
log_file_for (VdReportStore *self, const gchar *id)
{
  g_autofree gchar *name = g_strconcat (id, VIVARIUM_REPORT_COMMAND_LOG_SUFFIX, NULL);

  return g_build_filename (self->reports_dir, name, NULL);
}

/* Reads and verifies against the daemon's own key: a file on disk is
 * trusted no more than one a stranger hands over. */
static VivariumReport *
read_verified (VdReportStore *self, const gchar *id, GBytes **out_bytes, GError **error)
{
  g_autofree gchar *path = file_for (self, id);
  g_autofree gchar *data = NULL;
  gsize len = 0;
  VivariumReport *report;

  if (!g_file_get_contents (path, &data, &len, error))
    return NULL;
  if (len > VIVARIUM_REPORT_DOCUMENT_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "The report file %s is too large", path);
    return NULL;
  }
  report = vivarium_signed_report_verify (data, len, vd_signing_key_get_fingerprint (self->key), NULL, error);
  if (report == NULL)
    return NULL;
  if (g_strcmp0 (vivarium_report_get_id (report), id) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The report file %s holds another report (%s)", path, vivarium_report_get_id (report));
    g_object_unref (report);
    return NULL;
  }
  if (out_bytes != NULL)
    *out_bytes = g_bytes_new_take (g_steal_pointer (&data), len);
  return report;
}

/* --- the Report object --------------------------------------------------- */

static gboolean
handle_get_json (VivariumDBusReport *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(GBytes) bytes = NULL;
  g_autofree gchar *text = NULL;
  GError *error = NULL;

  bytes = vd_report_store_get_json (entry->store, entry->id, &error);
  if (bytes == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  text = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  vivarium_dbus_report_complete_get_json (iface, invocation, text);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_get_text (VivariumDBusReport *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(VivariumReport) report = NULL;
  g_autofree gchar *text = NULL;
  GError *error = NULL;

  report = read_verified (entry->store, entry->id, NULL, &error);
  if (report == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  text = vivarium_report_render_text (report, vd_signing_key_get_fingerprint (entry->store->key));
  vivarium_dbus_report_complete_get_text (iface, invocation, text);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gint64
created_at_of (VivariumReport *report)
{
  gint64 t = vivarium_report_get_ended_at (report);

  return t > 0 ? t : vivarium_report_get_started_at (report);
}

static Entry *
export_entry (VdReportStore *self, VivariumReport *report, GError **error)
{
  const gchar *id = vivarium_report_get_id (report);
  const gchar *task_id = vivarium_report_get_task_id (report);
  g_autofree gchar *task_path = task_id != NULL && task_id[0] != '\0'
                                ? vivarium_object_path_for (VIVARIUM_DBUS_PATH_TASKS, task_id) : g_strdup ("/");
  Entry *entry = g_new0 (Entry, 1);

  entry->store = self;
  entry->id = g_strdup (id);
  entry->path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_REPORTS, id);
  entry->created_at = created_at_of (report);
  entry->skeleton = vivarium_dbus_report_skeleton_new ();
  vivarium_dbus_report_set_id (entry->skeleton, id);
  vivarium_dbus_report_set_task (entry->skeleton, task_path);
  vivarium_dbus_report_set_task_id (entry->skeleton, task_id != NULL ? task_id : "");
  vivarium_dbus_report_set_project (entry->skeleton, vivarium_report_get_project (report) != NULL
                                                     ? vivarium_report_get_project (report) : "");
  vivarium_dbus_report_set_outcome (entry->skeleton, vivarium_outcome_to_string (vivarium_report_get_outcome (report)));
  vivarium_dbus_report_set_created_at (entry->skeleton, (guint64) MAX (entry->created_at, 0));
  g_signal_connect (entry->skeleton, "handle-get-json", G_CALLBACK (handle_get_json), entry);
  g_signal_connect (entry->skeleton, "handle-get-text", G_CALLBACK (handle_get_text), entry);
  if (!self->export_func (G_DBUS_INTERFACE_SKELETON (entry->skeleton), entry->path, self->export_data, error)) {
    entry_free (entry);
    return NULL;
  }
  g_hash_table_insert (self->entries, entry->id, entry);
  return entry;
}

/* --- order and retention ------------------------------------------------- */

static gint
compare_entries (gconstpointer a, gconstpointer b)
{
  const Entry *x = *(Entry **) a;
  const Entry *y = *(Entry **) b;

  if (x->created_at != y->created_at)
    return x->created_at < y->created_at ? -1 : 1;
  return g_strcmp0 (x->id, y->id);
}

static GPtrArray *
sorted_entries (VdReportStore *self)
{
  GPtrArray *all = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (all, value);
  g_ptr_array_sort (all, compare_entries);
  return all;
}

static void
prune (VdReportStore *self)
{
  g_autoptr(GPtrArray) all = sorted_entries (self);
  guint excess = all->len > self->max_reports ? all->len - self->max_reports : 0;

  for (guint i = 0; i < excess; i++) {
    Entry *entry = g_ptr_array_index (all, i);
    g_autofree gchar *path = file_for (self, entry->id);

    g_autofree gchar *object_path = g_strdup (entry->path);

    g_autofree gchar *log_path = log_file_for (self, entry->id);

    if (g_unlink (path) != 0 && errno != ENOENT)
      g_warning ("cannot remove the old report %s: %s", path, g_strerror (errno));
    if (g_unlink (log_path) != 0 && errno != ENOENT)
      g_warning ("cannot remove the old command log %s: %s", log_path, g_strerror (errno));
    g_hash_table_remove (self->entries, entry->id);
    g_signal_emit (self, signals[SIGNAL_REPORT_REMOVED], 0, object_path);
  }
}

/* --- public -------------------------------------------------------------- */

/* NAME.XXXXXX of g_file_set_contents (write_durably) for a report or its
 * command log: what a daemon killed while it wrote one leaves behind. */
static gboolean
is_temporary (const gchar *name)
{
  gsize len = strlen (name);
  g_autofree gchar *target = NULL;

  if (len <= 7 || name[len - 7] != '.')
    return FALSE;
  target = g_strndup (name, len - 7);
  return g_str_has_suffix (target, ".json") || g_str_has_suffix (target, ".commands.jsonl");
}

static void
load_reports (VdReportStore *self)
{
  g_auto(GStrv) names = vd_fs_list_dir (self->reports_dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *id = NULL;
    g_autoptr(VivariumReport) report = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] != '.' && is_temporary (names[i])) {
      g_autofree gchar *path = g_build_filename (self->reports_dir, names[i], NULL);

      /* Never renamed into place: no report, half of one at most. */
      if (g_unlink (path) != 0 && errno != ENOENT)
        g_warning ("cannot remove the half-written file %s: %s", path, g_strerror (errno));
      else
        g_message ("removed %s, half-written when the daemon stopped", path);
      continue;
    }
    if (names[i][0] == '.' || !g_str_has_suffix (names[i], ".json"))
      continue;
    id = g_strndup (names[i], strlen (names[i]) - strlen (".json"));
    if (!vivarium_name_validate ("report", id, &error) || (report = read_verified (self, id, NULL, &error)) == NULL ||
        export_entry (self, report, &error) == NULL)
      g_warning ("skipping the report file %s: %s", names[i], error->message);
  }
  prune (self);
}

gboolean
vd_report_store_load (VdReportStore *self, GError **error)
{
  self->key = vd_signing_key_load_or_generate (self->keys_dir, error);
  if (self->key == NULL)
    return FALSE;
  if (g_mkdir_with_parents (self->reports_dir, 0700) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot create %s", self->reports_dir);
  load_reports (self);
  return TRUE;
}

gchar *
vd_report_store_get_public_key (VdReportStore *self)
{
  return self->key != NULL ? vd_signing_key_get_public_key_base64 (self->key) : g_strdup ("");
}

const gchar *
vd_report_store_get_fingerprint (VdReportStore *self)
{
  return self->key != NULL ? vd_signing_key_get_fingerprint (self->key) : "";
}

const gchar **
vd_report_store_list_paths (VdReportStore *self)
{
  g_autoptr(GPtrArray) all = sorted_entries (self);
  GPtrArray *paths = g_ptr_array_new ();

  for (guint i = 0; i < all->len; i++)
    g_ptr_array_add (paths, ((Entry *) g_ptr_array_index (all, i))->path);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

guint
vd_report_store_count (VdReportStore *self)
{
  return g_hash_table_size (self->entries);
}

/* One JSON line per entry, as the entry's a{sv} serializes: the bytes
 * hashed are the bytes written. Bounded by VD_REPORT_COMMAND_LOG_BYTES_MAX:
 * the newest entries that fit are kept, like the session's memory keeps
 * the newest; @skipped counts the oldest left out. */
static GBytes *
serialize_log (GPtrArray *log, guint *skipped)
{
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  GString *out = g_string_new (NULL);
  gsize total = 0;
  guint first = 0;

  for (guint i = 0; i < log->len; i++) {
    g_autoptr(JsonNode) node = json_gvariant_serialize (g_ptr_array_index (log, i));
    g_autofree gchar *text = json_to_string (node, FALSE);
    gchar *line = g_strconcat (text, "\n", NULL);

    total += strlen (line);
    g_ptr_array_add (lines, line);
  }
  while (first < lines->len && total > VD_REPORT_COMMAND_LOG_BYTES_MAX)
    total -= strlen (g_ptr_array_index (lines, first++));
  for (guint i = first; i < lines->len; i++)
    g_string_append (out, g_ptr_array_index (lines, i));
  *skipped = first;
  return g_string_free_to_bytes (out);
}

static gboolean
write_durably (const gchar *dir, const gchar *path, GBytes *bytes, GError **error)
{
  /* CONSISTENT: a temporary file, fsync'ed, renamed over; then the
   * directory, so that the rename itself survives a crash. */
  return g_file_set_contents_full (path, g_bytes_get_data (bytes, NULL), (gssize) g_bytes_get_size (bytes),
                                   G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0600, error) &&
         vd_fs_fsync_dir (dir, error);
}

const gchar *
vd_report_store_add (VdReportStore *self, VivariumReport *report, GError **error)
{
  const gchar *id = vivarium_report_get_id (report);
  g_autofree gchar *path = NULL;
  g_autoptr(GBytes) signed_file = NULL;
  Entry *entry;

  if (self->key == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The daemon has no signing key");
    return NULL;
  }
  if (id == NULL || !vivarium_name_validate ("report", id, error))
    return NULL;
  if (g_hash_table_contains (self->entries, id)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "A report with the id “%s” exists", id);
    return NULL;
  }
  signed_file = vd_signing_key_sign_report (self->key, report, error);
  if (signed_file == NULL)
    return NULL;
  path = file_for (self, id);
  if (!write_durably (self->reports_dir, path, signed_file, error))
    return NULL;
  entry = export_entry (self, report, error);
  if (entry == NULL) {
    g_unlink (path);
    return NULL;
  }
  g_signal_emit (self, signals[SIGNAL_REPORT_ADDED], 0, entry->path);
  prune (self);
  entry = g_hash_table_lookup (self->entries, id);
  return entry != NULL ? entry->path : NULL;
}

const gchar *
vd_report_store_add_with_log (VdReportStore *self, VivariumReport *report, GPtrArray *log, guint64 not_kept,
                              GError **error)
{
  const gchar *id = vivarium_report_get_id (report);
  g_autoptr(GBytes) bytes = NULL;
  g_autofree gchar *digest = NULL;
  g_autofree gchar *path = NULL;
  const gchar *object_path;
  guint skipped = 0;

  if (log == NULL)
    return vd_report_store_add (self, report, error);
  if (id == NULL || !vivarium_name_validate ("report", id, error))
    return NULL;
  if (g_hash_table_contains (self->entries, id)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "A report with the id “%s” exists", id);
    return NULL;
  }
  bytes = serialize_log (log, &skipped);
  digest = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
  path = log_file_for (self, id);
  if (!write_durably (self->reports_dir, path, bytes, error))
    return NULL;
  {
    g_autofree gchar *value = g_strconcat ("sha256:", digest, NULL);
    vivarium_report_set_command_log (report, value, log->len - skipped, not_kept + skipped);
  }
  object_path = vd_report_store_add (self, report, error);
  if (object_path == NULL)
    g_unlink (path);
  return object_path;
}

GBytes *
vd_report_store_get_json (VdReportStore *self, const gchar *id, GError **error)
{
  g_autoptr(VivariumReport) report = NULL;
  GBytes *bytes = NULL;

  if (!g_hash_table_contains (self->entries, id)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no report “%s”", id);
    return NULL;
  }
  report = read_verified (self, id, &bytes, error);
  return report != NULL ? bytes : NULL;
}
