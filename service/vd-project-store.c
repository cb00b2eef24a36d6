/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdProjectStore"

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-log.h"
#include "vd-egress.h"
#include "vd-egress-rules.h"
#include "vd-project-store.h"
#include "vd-ssh-key-store.h"

/* One project as the bus sees it: the engine's object, its skeleton, and
 * who holds it now (NULL: nobody). */
typedef struct {
  VdProjectStore      *store;     /* unowned: the store outlives its entries */
  VdProject           *project;
  VivariumDBusProject *skeleton;
  gchar               *path;
  gchar               *holder;
} Entry;

struct _VdProjectStore {
  GObject      parent_instance;
  gchar       *projects_dir;
  gchar       *keys_dir;
  gchar       *remotes_dir;
  VdExportFunc export_func;
  gpointer     export_data;
  GHashTable  *entries;   /* name → Entry */
  GHashTable  *pending;   /* names being created */
  VdConfig    *config;    /* what SetEgress's groups are checked against */
  VdSecretStore *secrets; /* what SetSecrets's names are checked against */
  VdGitTransfer *transfer; /* runs the projects' clones and publishes */
};

G_DEFINE_TYPE (VdProjectStore, vd_project_store, G_TYPE_OBJECT)

enum { SIGNAL_PROJECT_ADDED, SIGNAL_PROJECT_REMOVED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
entry_free (Entry *entry)
{
  g_signal_handlers_disconnect_matched (entry->skeleton, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, entry);
  g_object_unref (entry->skeleton);
  g_object_unref (entry->project);
  g_free (entry->path);
  g_free (entry->holder);
  g_free (entry);
}

static void
vd_project_store_finalize (GObject *object)
{
  VdProjectStore *self = VD_PROJECT_STORE (object);

  g_hash_table_unref (self->entries);
  g_hash_table_unref (self->pending);
  g_free (self->projects_dir);
  g_free (self->keys_dir);
  g_free (self->remotes_dir);
  g_clear_object (&self->config);
  g_clear_object (&self->secrets);
  g_clear_object (&self->transfer);
  G_OBJECT_CLASS (vd_project_store_parent_class)->finalize (object);
}

static void
vd_project_store_class_init (VdProjectStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_project_store_finalize;
  signals[SIGNAL_PROJECT_ADDED] = g_signal_new ("project-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                                NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_PROJECT_REMOVED] = g_signal_new ("project-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                  0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_project_store_init (VdProjectStore *self)
{
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) entry_free);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

VdProjectStore *
vd_project_store_new (const gchar *projects_dir, const gchar *keys_dir, const gchar *remotes_dir,
                      VdExportFunc export_func, gpointer export_data)
{
  VdProjectStore *self = g_object_new (VD_TYPE_PROJECT_STORE, NULL);

  self->projects_dir = g_strdup (projects_dir);
  self->keys_dir = g_strdup (keys_dir);
  self->remotes_dir = g_strdup (remotes_dir);
  self->export_func = export_func;
  self->export_data = export_data;
  return self;
}

void
vd_project_store_set_config (VdProjectStore *self, VdConfig *config)
{
  g_set_object (&self->config, config);
}

void
vd_project_store_set_git_transfer (VdProjectStore *self, VdGitTransfer *transfer)
{
  g_set_object (&self->transfer, transfer);
}

void
vd_project_store_set_secret_store (VdProjectStore *self, VdSecretStore *secrets)
{
  g_set_object (&self->secrets, secrets);
}

/* --- the file:// rule -------------------------------------------------- */

gboolean
vd_project_store_check_url (VdProjectStore *self, const gchar *url, GError **error)
{
  g_autofree gchar *path = NULL;
  g_autofree gchar *real = NULL;
  g_autofree gchar *real_root = NULL;

  if (!vd_remote_url_validate (url, error))
    return FALSE;
  if (!g_str_has_prefix (url, "file://"))
    return TRUE;
  path = g_uri_unescape_string (url + strlen ("file://"), NULL);
  real = path != NULL ? realpath (path, NULL) : NULL;
  real_root = realpath (self->remotes_dir, NULL);
  if (real == NULL || real_root == NULL || !g_str_has_prefix (real, real_root) ||
      real[strlen (real_root)] != '/') {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A file:// URL must name an existing repository under %s (the daemon reads and writes it as root)",
                 self->remotes_dir);
    return FALSE;
  }
  return TRUE;
}

/* --- properties -------------------------------------------------------- */

static void
refresh_egress (Entry *entry)
{
  g_autofree gchar *mode = vd_project_get_egress_mode (entry->project);
  g_auto(GStrv) groups = vd_project_get_egress_groups (entry->project);
  const gchar *none[] = { NULL };

  vivarium_dbus_project_set_egress_mode (entry->skeleton, mode != NULL ? mode : "");
  vivarium_dbus_project_set_egress_groups (entry->skeleton, groups != NULL ? (const gchar * const *) groups : none);
  {
    g_auto(GStrv) secrets = vd_project_get_secrets (entry->project);
    vivarium_dbus_project_set_secrets (entry->skeleton, secrets != NULL ? (const gchar * const *) secrets : none);
  }
  {
    g_auto(GStrv) keys = vd_project_get_ssh_keys (entry->project);
    vivarium_dbus_project_set_ssh_keys (entry->skeleton, keys != NULL ? (const gchar * const *) keys : none);
  }
}

static void
refresh_entry (Entry *entry)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *head = vd_project_get_head (entry->project, &error);
  g_autofree gchar *remote = vd_project_get_remote (entry->project);
  g_autofree gchar *last = vd_project_get_last_task (entry->project);
  g_autofree gchar *last_path = last != NULL ? vivarium_object_path_for (VIVARIUM_DBUS_PATH_TASKS, last) : NULL;
  guint64 used = 0;

  if (head == NULL)
    g_warning ("project %s: no head: %s", vd_project_get_name (entry->project), error->message);
  g_clear_error (&error);
  if (!vd_project_get_used_bytes (entry->project, &used, &error))
    g_debug ("project %s: used bytes unknown: %s", vd_project_get_name (entry->project), error->message);
  vivarium_dbus_project_set_head (entry->skeleton, head != NULL ? head : "");
  vivarium_dbus_project_set_remote (entry->skeleton, remote != NULL ? remote : "");
  vivarium_dbus_project_set_last_task (entry->skeleton, last_path != NULL ? last_path : "/");
  vivarium_dbus_project_set_used_bytes (entry->skeleton, used);
  refresh_egress (entry);
}

void
vd_project_store_refresh (VdProjectStore *self, const gchar *name)
{
  Entry *entry = g_hash_table_lookup (self->entries, name);

  if (entry != NULL)
    refresh_entry (entry);
}

/* --- handlers ---------------------------------------------------------- */

static void
log_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VdProject *project = source;
  guint n = GPOINTER_TO_UINT (task_data);
  GError *error = NULL;
  GPtrArray *commits = vd_project_log (project, n, &error);

  if (commits == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, commits, (GDestroyNotify) g_ptr_array_unref);
}

static void
log_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  GError *error = NULL;
  g_autoptr(GPtrArray) commits = g_task_propagate_pointer (G_TASK (res), &error);
  GVariantBuilder builder;

  if (commits == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_variant_builder_init (&builder, G_VARIANT_TYPE ("a(ssxs)"));
  for (guint i = 0; i < commits->len; i++) {
    VdCommitInfo *c = g_ptr_array_index (commits, i);
    g_variant_builder_add (&builder, "(ssxs)", c->id, c->author, c->time_us, c->subject);
  }
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(a(ssxs))", &builder));
}

static gboolean
handle_log (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, guint n, gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(GTask) task = NULL;

  if (n < 1 || n > 10000) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                                           "Log takes 1 to 10000 commits, not %u", n);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  task = g_task_new (entry->project, NULL, log_done_cb, g_object_ref (invocation));
  g_task_set_task_data (task, GUINT_TO_POINTER (n), NULL);
  g_task_run_in_thread (task, log_thread);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_set_remote (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, const gchar *url,
                   gpointer user_data)
{
  Entry *entry = user_data;
  GError *error = NULL;

  if (!vd_project_store_check_url (entry->store, url, &error) ||
      !vd_project_set_remote (entry->project, url, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_log_project (G_LOG_LEVEL_INFO, vd_project_get_name (entry->project), "project %s: remote set",
                  vd_project_get_name (entry->project));
  refresh_entry (entry);
  vivarium_dbus_project_complete_set_remote (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* The groups must exist now (a policy is built from them, and thrown
 * away); a group removed from the config later fails the next start. */
static gboolean
check_egress (VdProjectStore *self, const gchar *mode, const gchar * const *groups, GError **error)
{
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  VdEgressMode m;

  if (mode[0] != '\0' && !vd_egress_mode_from_string (mode, &m)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Unknown egress mode “%s” (known: none, allowlist, open, or \"\" for the configuration's)", mode);
    return FALSE;
  }
  if (g_strv_length ((gchar **) groups) > VD_PROJECT_EGRESS_GROUPS_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "At most %d egress groups",
                 VD_PROJECT_EGRESS_GROUPS_MAX);
    return FALSE;
  }
  if (self->config == NULL || groups[0] == NULL)
    return TRUE;
  policy = vd_egress_rules_build (self->config, groups, NULL, error);
  return policy != NULL;
}

static gboolean
handle_set_egress (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, const gchar *mode,
                   const gchar * const *groups, gpointer user_data)
{
  Entry *entry = user_data;
  GError *error = NULL;

  if (!check_egress (entry->store, mode, groups, &error) ||
      !vd_project_set_egress (entry->project, mode, groups, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_log_project (G_LOG_LEVEL_INFO, vd_project_get_name (entry->project), "project %s: egress defaults set (%s)",
                  vd_project_get_name (entry->project), mode[0] != '\0' ? mode : "the configuration's mode");
  refresh_egress (entry);
  vivarium_dbus_project_complete_set_egress (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* The names must be stored now (the secrets are loaded, with throwaway
 * placeholders); a secret removed later fails the next start. */
static gboolean
handle_set_secrets (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, const gchar * const *names,
                    gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(GPtrArray) loaded = NULL;
  GError *error = NULL;

  if (entry->store->secrets == NULL) {
    g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                                   "The daemon has no secret store");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  loaded = vd_secret_store_for_session (entry->store->secrets, names, &error);
  if (loaded == NULL || !vd_project_set_secrets (entry->project, names, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_log_project (G_LOG_LEVEL_INFO, vd_project_get_name (entry->project), "project %s: %u default secrets set",
                  vd_project_get_name (entry->project), loaded->len);
  refresh_egress (entry);
  vivarium_dbus_project_complete_set_secrets (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* As for secrets: the keys must be stored now (loaded, then dropped); a
 * key removed later fails the next start. */
static gboolean
handle_set_ssh_keys (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, const gchar * const *names,
                     gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(VdSshKeyStore) keys = NULL;
  g_autoptr(GPtrArray) loaded = NULL;
  GError *error = NULL;

  if (entry->store->config == NULL) {
    g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                                   "The daemon has no SSH key store");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  keys = vd_ssh_key_store_new_for (entry->store->config);
  loaded = vd_ssh_key_store_for_session (keys, names, &error);
  if (loaded == NULL || !vd_project_set_ssh_keys (entry->project, names, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_log_project (G_LOG_LEVEL_INFO, vd_project_get_name (entry->project), "project %s: %u default SSH keys set",
                  vd_project_get_name (entry->project), loaded->len);
  refresh_egress (entry);
  vivarium_dbus_project_complete_set_ssh_keys (iface, invocation);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
publish_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  GError *error = NULL;

  if (!vd_project_publish_finish (VD_PROJECT (source), res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vd_log_project (G_LOG_LEVEL_INFO, vd_project_get_name (VD_PROJECT (source)), "project %s published",
                  vd_project_get_name (VD_PROJECT (source)));
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_publish (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Entry *entry = user_data;
  g_autofree gchar *remote = vd_project_get_remote (entry->project);
  GError *error = NULL;

  /* The remote may have been set before this rule, or the directory
   * swapped for a link since: check again at the moment of use. */
  if (remote != NULL && !vd_project_store_check_url (entry->store, remote, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_project_publish_async (entry->project, NULL, publish_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
delete_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GError *error = NULL;

  if (!vd_project_delete (VD_PROJECT (source), &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

typedef struct {
  VdProjectStore        *store;
  GDBusMethodInvocation *invocation;
  gchar                 *name;
} DeleteData;

static void
delete_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  DeleteData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  g_autoptr(VdProjectStore) self = data->store;
  g_autofree gchar *name = data->name;
  g_autofree gchar *path = NULL;
  Entry *entry = g_hash_table_lookup (self->entries, name);
  GError *error = NULL;

  g_free (data);
  if (!g_task_propagate_boolean (G_TASK (res), &error)) {
    g_free (entry->holder);
    entry->holder = NULL;
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  path = g_strdup (entry->path);
  g_dbus_method_invocation_return_value (invocation, NULL);
  g_hash_table_remove (self->entries, name);
  vd_log_project (G_LOG_LEVEL_INFO, name, "project %s deleted", name);
  g_signal_emit (self, signals[SIGNAL_PROJECT_REMOVED], 0, path);
}

static gboolean
handle_delete (VivariumDBusProject *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Entry *entry = user_data;
  g_autoptr(GTask) task = NULL;
  DeleteData *data;

  if (entry->holder != NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "The project “%s” is in use by %s", vd_project_get_name (entry->project),
                                           entry->holder);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  /* Held while deleting, so that no session or task takes it meanwhile. */
  entry->holder = g_strdup ("its deletion");
  data = g_new0 (DeleteData, 1);
  data->store = g_object_ref (entry->store);
  data->invocation = g_object_ref (invocation);
  data->name = g_strdup (vd_project_get_name (entry->project));
  task = g_task_new (entry->project, NULL, delete_done_cb, data);
  g_task_run_in_thread (task, delete_thread);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- adding ------------------------------------------------------------ */

static gboolean
add_project (VdProjectStore *self, VdProject *project, GError **error)
{
  const gchar *name = vd_project_get_name (project);
  Entry *entry = g_new0 (Entry, 1);
  g_autoptr(GError) key_error = NULL;
  g_autofree gchar *deploy_key = vd_project_get_deploy_key (project, &key_error);

  entry->project = g_object_ref (project);
  entry->skeleton = vivarium_dbus_project_skeleton_new ();
  entry->path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_PROJECTS, name);
  entry->store = self;
  vivarium_dbus_project_set_name (entry->skeleton, name);
  vivarium_dbus_project_set_quota_bytes (entry->skeleton, vd_project_get_quota (project));
  vivarium_dbus_project_set_deploy_key (entry->skeleton, deploy_key != NULL ? deploy_key : "");
  refresh_entry (entry);
  g_signal_connect (entry->skeleton, "handle-log", G_CALLBACK (handle_log), entry);
  g_signal_connect (entry->skeleton, "handle-set-remote", G_CALLBACK (handle_set_remote), entry);
  g_signal_connect (entry->skeleton, "handle-set-egress", G_CALLBACK (handle_set_egress), entry);
  g_signal_connect (entry->skeleton, "handle-set-secrets", G_CALLBACK (handle_set_secrets), entry);
  g_signal_connect (entry->skeleton, "handle-set-ssh-keys", G_CALLBACK (handle_set_ssh_keys), entry);
  g_signal_connect (entry->skeleton, "handle-publish", G_CALLBACK (handle_publish), entry);
  g_signal_connect (entry->skeleton, "handle-delete", G_CALLBACK (handle_delete), entry);
  if (!self->export_func (G_DBUS_INTERFACE_SKELETON (entry->skeleton), entry->path, self->export_data, error)) {
    entry_free (entry);
    return FALSE;
  }
  g_hash_table_insert (self->entries, g_strdup (name), entry);
  return TRUE;
}

void
vd_project_store_load (VdProjectStore *self)
{
  g_auto(GStrv) swept = vd_project_sweep (self->projects_dir, self->keys_dir);
  g_auto(GStrv) names = NULL;

  for (guint i = 0; swept != NULL && swept[i] != NULL; i++)
    g_warning ("sweep: removed the remains of project %s", swept[i]);
  names = vd_project_list_names (self->projects_dir);
  for (guint i = 0; names != NULL && names[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(VdProject) project = vd_project_load (self->projects_dir, self->keys_dir, names[i], &error);

    if (project != NULL)
      vd_project_set_git_transfer (project, self->transfer);
    if (project == NULL || !add_project (self, project, &error))
      g_warning ("skipping project %s: %s", names[i], error->message);
  }
}

const gchar **
vd_project_store_list_paths (VdProjectStore *self)
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, ((Entry *) value)->path);
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

VdProject *
vd_project_store_lookup (VdProjectStore *self, const gchar *name, GError **error)
{
  Entry *entry;

  if (!vivarium_project_name_validate (name, error))
    return NULL;
  entry = g_hash_table_lookup (self->entries, name);
  if (entry == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no project named “%s”", name);
    return NULL;
  }
  return entry->project;
}

const gchar *
vd_project_store_get_path (VdProjectStore *self, const gchar *name)
{
  Entry *entry = g_hash_table_lookup (self->entries, name);

  return entry != NULL ? entry->path : NULL;
}

/* --- creating ---------------------------------------------------------- */

typedef struct {
  VdProjectStore *store;
  gchar          *name;
} CreateData;

static void
create_data_free (CreateData *data)
{
  g_object_unref (data->store);
  g_free (data->name);
  g_free (data);
}

static void
create_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  CreateData *data = g_task_get_task_data (task);
  VdProjectStore *self = data->store;
  GError *error = NULL;
  g_autoptr(VdProject) project = vd_project_create_finish (res, &error);

  g_hash_table_remove (self->pending, data->name);
  if (project == NULL || !add_project (self, project, &error)) {
    if (project != NULL)
      vd_project_delete (project, NULL);
    g_task_return_error (task, error);
    return;
  }
  vd_log_project (G_LOG_LEVEL_INFO, data->name, "project %s created", data->name);
  g_signal_emit (self, signals[SIGNAL_PROJECT_ADDED], 0, vd_project_store_get_path (self, data->name));
  g_task_return_pointer (task, g_object_ref (project), g_object_unref);
}

static gboolean
check_create (VdProjectStore *self, const gchar *name, GVariant *options, GError **error)
{
  const gchar *clone = NULL;

  if (!vivarium_project_name_validate (name, error))
    return FALSE;
  if (g_hash_table_contains (self->entries, name) || g_hash_table_contains (self->pending, name)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "A project named “%s” already exists", name);
    return FALSE;
  }
  /* The engine refuses every other option and type; only the file://
   * rule is the store's. */
  if (g_variant_lookup (options, "clone", "&s", &clone) && !vd_project_store_check_url (self, clone, error))
    return FALSE;
  return TRUE;
}

void
vd_project_store_create_async (VdProjectStore *self, const gchar *name, guint64 quota_bytes, GVariant *options,
                               GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);
  CreateData *data;
  GError *error = NULL;

  if (!check_create (self, name, options, &error)) {
    g_task_return_error (task, error);
    return;
  }
  data = g_new0 (CreateData, 1);
  data->store = g_object_ref (self);
  data->name = g_strdup (name);
  g_task_set_task_data (task, data, (GDestroyNotify) create_data_free);
  g_hash_table_add (self->pending, g_strdup (name));
  vd_project_create_async (self->projects_dir, self->keys_dir, name, quota_bytes, options, self->transfer, NULL,
                           create_done_cb, g_steal_pointer (&task));
}

VdProject *
vd_project_store_create_finish (VdProjectStore *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* --- holders ----------------------------------------------------------- */

gboolean
vd_project_store_acquire (VdProjectStore *self, const gchar *name, const gchar *holder, GError **error)
{
  Entry *entry;

  if (vd_project_store_lookup (self, name, error) == NULL)
    return FALSE;
  entry = g_hash_table_lookup (self->entries, name);
  if (entry->holder != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "The project “%s” is in use by %s", name, entry->holder);
    return FALSE;
  }
  entry->holder = g_strdup (holder);
  return TRUE;
}

void
vd_project_store_release (VdProjectStore *self, const gchar *name)
{
  Entry *entry = g_hash_table_lookup (self->entries, name);

  if (entry == NULL)
    return;
  g_clear_pointer (&entry->holder, g_free);
  refresh_entry (entry);
}

void
vd_project_store_unmount_all (VdProjectStore *self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    g_autoptr(GError) error = NULL;
    if (!vd_project_unmount (((Entry *) value)->project, &error))
      g_warning ("cannot unmount project %s: %s", vd_project_get_name (((Entry *) value)->project), error->message);
  }
}
