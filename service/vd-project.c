/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdProject"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-project.h"
#include "vivarium-secret.h"

#define RECORD_NAME "project.json"

struct _VdProject {
  GObject    parent_instance;
  GMutex     lock;   /* one git or dataset operation at a time: held long */
  GMutex     state;  /* the cached facts below: held briefly, so a property
                      * read never waits for a push or a commit */
  gchar     *head;
  gchar     *name;
  gchar     *dir;
  gchar     *keys_dir;
  gchar     *repo_path;
  gchar     *work_path;
  gchar     *image_path;
  gchar     *record_path;
  gchar     *key_path;
  gint64     created;
  gchar     *remote;
  gchar     *last_task;
  gchar     *host_key;   /* the ssh host key's SHA-256, pinned on first publish */
  gchar     *egress_mode;   /* the project's egress default, NULL: the config's */
  GStrv      egress_groups; /* NULL: the config's */
  GStrv      secrets;       /* NULL: none */
  GStrv      ssh_keys;      /* NULL: none */
  VdDataset *dataset;
  VdRepo    *repo;
  VdGitTransfer *transfer;  /* runs clone and push; NULL: in this process */
};

G_DEFINE_TYPE (VdProject, vd_project, G_TYPE_OBJECT)

static void
vd_project_finalize (GObject *object)
{
  VdProject *self = VD_PROJECT (object);

  g_mutex_clear (&self->lock);
  g_mutex_clear (&self->state);
  g_free (self->head);
  g_free (self->name);
  g_free (self->dir);
  g_free (self->keys_dir);
  g_free (self->repo_path);
  g_free (self->work_path);
  g_free (self->image_path);
  g_free (self->record_path);
  g_free (self->key_path);
  g_free (self->remote);
  g_free (self->last_task);
  g_free (self->host_key);
  g_free (self->egress_mode);
  g_strfreev (self->egress_groups);
  g_strfreev (self->secrets);
  g_strfreev (self->ssh_keys);
  g_clear_object (&self->dataset);
  g_clear_object (&self->repo);
  g_clear_object (&self->transfer);
  G_OBJECT_CLASS (vd_project_parent_class)->finalize (object);
}

static void
vd_project_class_init (VdProjectClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_project_finalize;
}

static void
vd_project_init (VdProject *self)
{
  g_mutex_init (&self->lock);
  g_mutex_init (&self->state);
}

static void
set_fact (VdProject *self, gchar **field, const gchar *value)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  g_free (*field);
  *field = g_strdup (value);
}

static gchar *
get_fact (VdProject *self, gchar * const *field)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  return g_strdup (*field);
}

/* After anything that moves HEAD (create, load, commit). */
static gboolean
refresh_head (VdProject *self, GError **error)
{
  g_autofree gchar *head = vd_repo_get_head (self->repo, error);

  if (head == NULL)
    return FALSE;
  set_fact (self, &self->head, head);
  return TRUE;
}

static VdProject *
project_new (const gchar *projects_dir, const gchar *keys_dir, const gchar *name)
{
  VdProject *self = g_object_new (VD_TYPE_PROJECT, NULL);
  g_autofree gchar *key_name = g_strconcat ("project-", name, NULL);

  self->name = g_strdup (name);
  self->dir = g_build_filename (projects_dir, name, NULL);
  self->keys_dir = g_strdup (keys_dir);
  self->repo_path = g_build_filename (self->dir, "repo", NULL);
  self->work_path = g_build_filename (self->dir, "work", NULL);
  self->image_path = g_build_filename (self->dir, "dataset.img", NULL);
  self->record_path = g_build_filename (self->dir, RECORD_NAME, NULL);
  self->key_path = g_build_filename (keys_dir, key_name, NULL);
  return self;
}

static gboolean
fail_errno (GError **error, int saved, const gchar *what, const gchar *path)
{
  g_set_error (error, VIVARIUM_ERROR, saved == ENOSPC ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
               "Cannot %s %s: %s", what, path, g_strerror (saved));
  return FALSE;
}

/* ---- the record -------------------------------------------------------- */


/* A list member of the record: NULL is written as []. */
static void
add_names (JsonBuilder *b, const gchar *member, GStrv names)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; names != NULL && names[i] != NULL; i++)
    json_builder_add_string_value (b, names[i]);
  json_builder_end_array (b);
}

static gboolean
record_write (VdProject *self, GError **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree gchar *text = NULL;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, self->name);
  json_builder_set_member_name (b, "quota_bytes");
  json_builder_add_int_value (b, (gint64) vd_dataset_get_quota (self->dataset));
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, vd_dataset_backend_to_string (vd_dataset_get_backend (self->dataset)));
  json_builder_set_member_name (b, "remote");
  json_builder_add_string_value (b, self->remote != NULL ? self->remote : "");
  json_builder_set_member_name (b, "created_us");
  json_builder_add_int_value (b, self->created);
  json_builder_set_member_name (b, "last_task");
  json_builder_add_string_value (b, self->last_task != NULL ? self->last_task : "");
  json_builder_set_member_name (b, "ssh_host_key_sha256");
  json_builder_add_string_value (b, self->host_key != NULL ? self->host_key : "");
  json_builder_set_member_name (b, "egress_mode");
  json_builder_add_string_value (b, self->egress_mode != NULL ? self->egress_mode : "");
  add_names (b, "egress_groups", self->egress_groups);
  add_names (b, "secrets", self->secrets);
  add_names (b, "ssh_keys", self->ssh_keys);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = json_generator_to_data (gen, NULL);
  g_clear_pointer (&locker, g_mutex_locker_free);
  /* CONSISTENT|DURABLE: temp file, fsync, rename, so a crash leaves the
   * old record or the new one, never half of either. */
  if (!g_file_set_contents_full (self->record_path, text, -1,
                                 G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0600, error)) {
    vivarium_error_convert (error);
    return FALSE;
  }
  return TRUE;
}

static gchar *
member_string (JsonObject *o, const gchar *name)
{
  const gchar *s = json_object_get_string_member_with_default (o, name, "");
  return s[0] != '\0' ? g_strdup (s) : NULL;
}

/* A list of names (root wrote it; still only names are taken), or NULL. */
static GStrv
member_names_checked (JsonObject *o, const gchar *name, gboolean (*valid) (const gchar *))
{
  JsonNode *n = json_object_get_member (o, name);
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  JsonArray *a;
  guint count = 0;

  if (n == NULL || !JSON_NODE_HOLDS_ARRAY (n))
    return NULL;
  a = json_node_get_array (n);
  for (guint i = 0; i < json_array_get_length (a) && i < VD_PROJECT_EGRESS_GROUPS_MAX; i++) {
    JsonNode *e = json_array_get_element (a, i);
    if (JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING &&
        valid (json_node_get_string (e))) {
      g_strv_builder_add (b, json_node_get_string (e));
      count++;
    }
  }
  return count > 0 ? g_strv_builder_end (b) : NULL;
}

static gboolean
group_name_is_valid (const gchar *name)
{
  return vivarium_name_validate ("group", name, NULL);
}

static GStrv
member_names (JsonObject *o, const gchar *name)
{
  return member_names_checked (o, name, group_name_is_valid);
}

static gboolean
record_read (VdProject *self, guint64 *quota, VdDatasetBackend *backend, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;

  if (!json_parser_load_from_file (parser, self->record_path, error)) {
    vivarium_error_convert (error);
    g_prefix_error (error, "The project %s is missing, incomplete or damaged: ", self->name);
    return FALSE;
  }
  if (!JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)) ||
      (o = json_node_get_object (json_parser_get_root (parser))) == NULL ||
      g_strcmp0 (json_object_get_string_member_with_default (o, "name", ""), self->name) != 0 ||
      !vd_dataset_backend_from_string (json_object_get_string_member_with_default (o, "backend", ""), backend) ||
      json_object_get_int_member_with_default (o, "quota_bytes", 0) < VIVARIUM_PROJECT_QUOTA_MIN) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "The record of project %s is not a project record", self->name);
    return FALSE;
  }
  *quota = (guint64) json_object_get_int_member (o, "quota_bytes");
  self->created = json_object_get_int_member_with_default (o, "created_us", 0);
  self->remote = member_string (o, "remote");
  self->last_task = member_string (o, "last_task");
  self->host_key = member_string (o, "ssh_host_key_sha256");
  self->egress_mode = member_string (o, "egress_mode");
  self->egress_groups = member_names (o, "egress_groups");
  self->secrets = member_names_checked (o, "secrets", vivarium_secret_name_is_valid);
  self->ssh_keys = member_names_checked (o, "ssh_keys", vivarium_secret_name_is_valid);
  return TRUE;
}

/* ---- validation -------------------------------------------------------- */

static gboolean
quota_ok (const gchar *projects_dir, guint64 quota, GError **error)
{
  struct statvfs sv;
  guint64 free_bytes;

  if (quota < VIVARIUM_PROJECT_QUOTA_MIN) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The quota is %" G_GUINT64_FORMAT " bytes; the smallest is %d (16 MiB)",
                 quota, VIVARIUM_PROJECT_QUOTA_MIN);
    return FALSE;
  }
  if (statvfs (projects_dir, &sv) != 0)
    return fail_errno (error, errno, "inspect", projects_dir);
  free_bytes = (guint64) sv.f_bavail * sv.f_frsize;
  if (quota > free_bytes) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE,
                 "The quota is %" G_GUINT64_FORMAT " bytes; the state filesystem has %" G_GUINT64_FORMAT " free",
                 quota, free_bytes);
    return FALSE;
  }
  return TRUE;
}

/* Returns the clone URL (or NULL) once every option is known and typed. */
static gboolean
options_ok (GVariant *options, gchar **clone, GError **error)
{
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  *clone = NULL;
  if (options == NULL)
    return TRUE;
  if (!g_variant_is_of_type (options, G_VARIANT_TYPE_VARDICT)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The options are not a{sv}");
    return FALSE;
  }
  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_autoptr(GVariant) v = value;
    if (g_strcmp0 (key, "clone") != 0 || !g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      g_clear_pointer (clone, g_free);
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown option \"%s\" (or not of its type): the one option is \"clone\" (s)", key);
      return FALSE;
    }
    g_free (*clone);
    *clone = g_variant_dup_string (v, NULL);
  }
  if (*clone != NULL && !vd_remote_url_validate (*clone, error)) {
    g_clear_pointer (clone, g_free);
    return FALSE;
  }
  return TRUE;
}

static gchar *
resolve (const gchar *path)
{
  g_autofree gchar *real = realpath (path, NULL);

  return real != NULL ? g_strdup (real) : g_canonicalize_filename (path, "/");
}

static gboolean
path_within (const gchar *path, const gchar *root)
{
  g_autofree gchar *r = resolve (root);
  gsize n = strlen (r);

  return strncmp (path, r, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* A file:// remote is a path the daemon reads and writes as root: never one
 * inside its own state, where it would reach another project's repository
 * or the keys. (Who may name which host path is the caller's check.) */
static gboolean
url_outside_state (const gchar *projects_dir, const gchar *keys_dir, const gchar *url, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  g_autofree gchar *raw = NULL;
  g_autofree gchar *path = NULL;

  if (uri == NULL || g_strcmp0 (g_uri_get_scheme (uri), "file") != 0)
    return TRUE;
  raw = g_uri_unescape_string (g_uri_get_path (uri), NULL);
  if (raw == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The remote URL's path is not a valid escaped path");
    return FALSE;
  }
  path = resolve (raw);
  if (path_within (path, projects_dir) || path_within (path, keys_dir)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The remote URL points into the daemon's own state");
    return FALSE;
  }
  return TRUE;
}

/* ---- the deploy key ---------------------------------------------------- */

/* ssh-keygen writes into a temporary name, renamed once both halves exist:
 * a crash leaves a stray temp file, never a half key under the real name. */
static gboolean
make_deploy_key (VdProject *self, GError **error)
{
  g_autofree gchar *tmp = g_strdup_printf ("%s.tmp-%08x", self->key_path, g_random_int ());
  g_autofree gchar *tmp_pub = g_strconcat (tmp, ".pub", NULL);
  g_autofree gchar *pub = g_strconcat (self->key_path, ".pub", NULL);
  g_autofree gchar *comment = g_strconcat ("vivarium-project-", self->name, NULL);
  g_autoptr(GSubprocess) proc = NULL;
  g_autofree gchar *err = NULL;

  if (!vd_fs_mkdir (self->keys_dir, 0700, 0, 0, error))
    return FALSE;
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE |
                           G_SUBPROCESS_FLAGS_STDIN_PIPE, error,
                           "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", tmp, NULL);
  if (proc == NULL || !g_subprocess_communicate_utf8 (proc, NULL, NULL, NULL, &err, error)) {
    vivarium_error_convert (error);
    return FALSE;
  }
  if (!g_subprocess_get_successful (proc)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "ssh-keygen failed: %s", g_strstrip (err));
    g_unlink (tmp);
    g_unlink (tmp_pub);
    return FALSE;
  }
  if (g_rename (tmp_pub, pub) != 0 || g_rename (tmp, self->key_path) != 0) {
    int saved = errno;
    g_unlink (tmp);
    g_unlink (tmp_pub);
    g_unlink (pub);
    return fail_errno (error, saved, "store the deploy key", self->key_path);
  }
  return TRUE;
}

static void
remove_deploy_key (VdProject *self)
{
  g_autofree gchar *pub = g_strconcat (self->key_path, ".pub", NULL);

  if (g_unlink (self->key_path) != 0 && errno != ENOENT)
    g_warning ("Cannot remove %s: %s", self->key_path, g_strerror (errno));
  if (g_unlink (pub) != 0 && errno != ENOENT)
    g_warning ("Cannot remove %s: %s", pub, g_strerror (errno));
}

/* ---- create, load, delete --------------------------------------------- */

/* Everything a failed creation made goes, in reverse order; the directory
 * only once nothing is mounted in it. */
static void
undo_create (VdProject *self)
{
  g_autoptr(GError) error = NULL;

  g_clear_object (&self->repo);
  remove_deploy_key (self);
  if (self->dataset != NULL && !vd_dataset_destroy (self->dataset, &error)) {
    g_warning ("Cannot remove the dataset of %s: %s", self->name, error->message);
    return;
  }
  if (!vd_fs_rm_rf (self->dir, &error))
    g_warning ("Cannot remove %s: %s", self->dir, error->message);
}

static gboolean
populate (VdProject *self, guint64 quota, const gchar *clone, GCancellable *cancellable, GError **error)
{
  VdDatasetBackend backend;

  if (!vd_dataset_backend_for_dir (self->dir, &backend, error))
    return FALSE;
  self->dataset = vd_dataset_create (backend, self->work_path, self->image_path, quota, error);
  if (self->dataset == NULL || !make_deploy_key (self, error))
    return FALSE;
  if (clone != NULL)
    self->repo = vd_git_transfer_clone (self->transfer, self->name, clone, self->repo_path, self->work_path,
                                        self->key_path, cancellable, error);
  else
    self->repo = vd_repo_create (self->repo_path, self->work_path, error);
  if (self->repo == NULL)
    return FALSE;
  if (chmod (self->repo_path, 0700) != 0)
    return fail_errno (error, errno, "protect", self->repo_path);
  if (!refresh_head (self, error))
    return FALSE;
  self->remote = vd_repo_get_remote (self->repo);
  self->created = g_get_real_time ();
  /* A clone checked out as root: the tree is root's until a grant. The
   * record comes last: a project without one is not a project. */
  return vd_dataset_chown_tree (self->dataset, 0, 0, error) && record_write (self, error);
}

static VdProject *
create_project (const gchar *projects_dir, const gchar *keys_dir, const gchar *name, guint64 quota_bytes,
                GVariant *options, VdGitTransfer *transfer, GCancellable *cancellable, GError **error)
{
  g_autoptr(VdProject) self = NULL;
  g_autofree gchar *clone = NULL;
  g_autoptr(GVariant) owned = options != NULL ? g_variant_ref_sink (options) : NULL;

  if (!vivarium_project_name_validate (name, error) || !options_ok (owned, &clone, error) ||
      (clone != NULL && !url_outside_state (projects_dir, keys_dir, clone, error)) ||
      !quota_ok (projects_dir, quota_bytes, error))
    return NULL;
  self = project_new (projects_dir, keys_dir, name);
  if (transfer != NULL)
    self->transfer = g_object_ref (transfer);
  if (g_mkdir (self->dir, 0711) != 0) {
    if (errno == EEXIST)
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "A project named %s exists", name);
    else
      fail_errno (error, errno, "create", self->dir);
    return NULL;
  }
  /* mkdir honours the umask. */
  if (chmod (self->dir, 0711) != 0) {
    fail_errno (error, errno, "set the mode of", self->dir);
    undo_create (self);
    return NULL;
  }
  if (!populate (self, quota_bytes, clone, cancellable, error)) {
    undo_create (self);
    return NULL;
  }
  return g_steal_pointer (&self);
}

VdProject *
vd_project_create (const gchar *projects_dir, const gchar *keys_dir, const gchar *name, guint64 quota_bytes,
                   GVariant *options, GCancellable *cancellable, GError **error)
{
  return create_project (projects_dir, keys_dir, name, quota_bytes, options, NULL, cancellable, error);
}

void
vd_project_set_git_transfer (VdProject *self, VdGitTransfer *transfer)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  g_set_object (&self->transfer, transfer);
}

VdProject *
vd_project_load (const gchar *projects_dir, const gchar *keys_dir, const gchar *name, GError **error)
{
  g_autoptr(VdProject) self = NULL;
  g_autofree gchar *workdir = NULL;
  VdDatasetBackend backend;
  guint64 quota;

  if (!vivarium_project_name_validate (name, error))
    return NULL;
  self = project_new (projects_dir, keys_dir, name);
  if (!record_read (self, &quota, &backend, error))
    return NULL;
  self->dataset = vd_dataset_new (backend, self->work_path, self->image_path, quota);
  if (!vd_dataset_mount (self->dataset, error))
    return NULL;
  /* A daemon that died while a session held the tree left it that uid's,
   * and the uid will be handed to another session. */
  if (!vd_dataset_chown_tree (self->dataset, 0, 0, error))
    return NULL;
  self->repo = vd_repo_open (self->repo_path, error);
  if (self->repo == NULL)
    return NULL;
  /* The record says where the remote is; the repository's config follows. */
  if (self->remote != NULL && !vd_repo_set_remote (self->repo, self->remote, error))
    return NULL;
  if (!refresh_head (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

GStrv
vd_project_list_names (const gchar *projects_dir)
{
  g_auto(GStrv) all = vd_fs_list_dir (projects_dir);
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();

  for (guint i = 0; all[i] != NULL; i++) {
    g_autofree gchar *record = g_build_filename (projects_dir, all[i], RECORD_NAME, NULL);
    if (vivarium_project_name_validate (all[i], NULL) && g_file_test (record, G_FILE_TEST_IS_REGULAR))
      g_strv_builder_add (b, all[i]);
  }
  return g_strv_builder_end (b);
}

static void
sweep_stray_keys (const gchar *keys_dir)
{
  g_auto(GStrv) keys = vd_fs_list_dir (keys_dir);

  for (guint i = 0; keys[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (keys_dir, keys[i], NULL);
    if (g_str_has_prefix (keys[i], "project-") && strstr (keys[i], ".tmp-") != NULL && g_unlink (path) != 0)
      g_warning ("Cannot remove %s: %s", path, g_strerror (errno));
  }
}

/* A project directory without a record is what a crash during creation or
 * deletion left: its dataset is unmounted or deleted, then it goes. */
static gboolean
sweep_one (const gchar *projects_dir, const gchar *keys_dir, const gchar *name, GError **error)
{
  g_autoptr(VdProject) self = project_new (projects_dir, keys_dir, name);
  VdDatasetBackend backend;

  if (!vd_dataset_backend_for_dir (self->dir, &backend, error))
    return FALSE;
  self->dataset = vd_dataset_new (backend, self->work_path, self->image_path, 0);
  if (!vd_dataset_destroy (self->dataset, error))
    return FALSE;
  remove_deploy_key (self);
  return vd_fs_rm_rf (self->dir, error);
}

GStrv
vd_project_sweep (const gchar *projects_dir, const gchar *keys_dir)
{
  g_auto(GStrv) all = vd_fs_list_dir (projects_dir);
  g_autoptr(GStrvBuilder) swept = g_strv_builder_new ();

  for (guint i = 0; all[i] != NULL; i++) {
    g_autofree gchar *record = g_build_filename (projects_dir, all[i], RECORD_NAME, NULL);
    g_autoptr(GError) error = NULL;
    if (!vivarium_project_name_validate (all[i], NULL) || g_file_test (record, G_FILE_TEST_EXISTS))
      continue;
    if (sweep_one (projects_dir, keys_dir, all[i], &error))
      g_strv_builder_add (swept, all[i]);
    else
      g_warning ("Cannot sweep the incomplete project %s: %s", all[i], error->message);
  }
  sweep_stray_keys (keys_dir);
  return g_strv_builder_end (swept);
}

gboolean
vd_project_unmount (VdProject *self, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return vd_dataset_unmount (self->dataset, error);
}

gboolean
vd_project_delete (VdProject *self, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  g_clear_object (&self->repo);
  set_fact (self, &self->head, NULL);
  /* The record goes first: a crash half-way leaves an incomplete project,
   * which load refuses, never one that looks whole and is not. */
  if (g_unlink (self->record_path) != 0 && errno != ENOENT)
    return fail_errno (error, errno, "remove", self->record_path);
  if (!vd_dataset_destroy (self->dataset, error))
    return FALSE;
  remove_deploy_key (self);
  return vd_fs_rm_rf (self->dir, error);
}

/* ---- properties -------------------------------------------------------- */

const gchar *
vd_project_get_name (VdProject *self)
{
  return self->name;
}

guint64
vd_project_get_quota (VdProject *self)
{
  return vd_dataset_get_quota (self->dataset);
}

VdDatasetBackend
vd_project_get_backend (VdProject *self)
{
  return vd_dataset_get_backend (self->dataset);
}

gint64
vd_project_get_created (VdProject *self)
{
  return self->created;
}

const gchar *
vd_project_get_work_path (VdProject *self)
{
  return self->work_path;
}

const gchar *
vd_project_get_repo_path (VdProject *self)
{
  return self->repo_path;
}

gboolean
vd_project_get_used_bytes (VdProject *self, guint64 *out, GError **error)
{
  return vd_dataset_get_used_bytes (self->dataset, out, error);
}

static gboolean
have_repo (VdProject *self, GError **error)
{
  if (self->repo != NULL)
    return TRUE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The project %s was deleted", self->name);
  return FALSE;
}

gchar *
vd_project_get_head (VdProject *self, GError **error)
{
  gchar *head = get_fact (self, &self->head);

  if (head == NULL)
    have_repo (self, error);
  return head;
}

gchar *
vd_project_get_remote (VdProject *self)
{
  return get_fact (self, &self->remote);
}

gchar *
vd_project_get_deploy_key (VdProject *self, GError **error)
{
  g_autofree gchar *pub = g_strconcat (self->key_path, ".pub", NULL);
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents (pub, &text, NULL, error)) {
    vivarium_error_convert (error);
    return NULL;
  }
  return g_strdup (g_strstrip (text));
}

gchar *
vd_project_get_last_task (VdProject *self)
{
  return get_fact (self, &self->last_task);
}

gboolean
vd_project_set_last_task (VdProject *self, const gchar *task_id, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  if (!vivarium_name_validate ("task", task_id, error))
    return FALSE;
  set_fact (self, &self->last_task, task_id);
  return record_write (self, error);
}

gboolean
vd_project_set_identity (VdProject *self, const gchar *name, const gchar *email, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return have_repo (self, error) && vd_repo_set_identity (self->repo, name, email, error);
}

/* Without its filesystem, the working tree is an empty directory on the
 * host's: a commit would delete every file, a grant would hand out space
 * without a quota. */
static gboolean
dataset_ready (VdProject *self, GError **error)
{
  if (vd_dataset_get_backend (self->dataset) == VD_DATASET_BACKEND_EXT4 && !vd_dataset_is_mounted (self->dataset)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "The dataset of project %s is not mounted", self->name);
    return FALSE;
  }
  return vd_dataset_mount (self->dataset, error);
}

/* ---- access ------------------------------------------------------------ */

gboolean
vd_project_grant (VdProject *self, uid_t uid, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  if (uid == 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A project is granted to a session's uid, never to root");
    return FALSE;
  }
  /* The group stays root's: the session's group is shared by all QEMUs. */
  return dataset_ready (self, error) && vd_dataset_chown_tree (self->dataset, uid, 0, error);
}

gboolean
vd_project_revoke (VdProject *self, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return vd_dataset_chown_tree (self->dataset, 0, 0, error);
}

/* ---- git --------------------------------------------------------------- */

GPtrArray *
vd_project_compute_changes (VdProject *self, const gchar *base_commit, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return have_repo (self, error) && dataset_ready (self, error)
         ? vd_repo_compute_changes (self->repo, base_commit, error) : NULL;
}

/* A commit stopped by its bounds: the worker's tree is not kept, and the
 * next task starts from the commit this one started from. */
static void
restore_after (VdProject *self, GError **error)
{
  g_autoptr(GError) restore_error = NULL;
  g_autoptr(GError) stopped = *error;
  gboolean bound = g_error_matches (stopped, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE) ||
                   g_error_matches (stopped, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT) ||
                   g_error_matches (stopped, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);

  *error = NULL;
  if (!bound)
    g_propagate_error (error, g_steal_pointer (&stopped));
  else if (vd_repo_restore_tree (self->repo, &restore_error))
    g_set_error (error, stopped->domain, stopped->code,
                 "%s; nothing was committed and the tree is back at the last commit", stopped->message);
  else
    g_set_error (error, stopped->domain, stopped->code,
                 "%s; nothing was committed and the tree could not be reset: %s", stopped->message,
                 restore_error->message);
}

static gboolean
commit_locked (VdProject *self, const gchar *message, const VdRepoBounds *bounds, gchar **commit_id,
               GPtrArray **changes, GError **error)
{
  GError *local = NULL;
  gboolean clean;

  if (!have_repo (self, error) || !dataset_ready (self, error))
    return FALSE;
  if (!vd_repo_commit_bounded (self->repo, message, bounds, commit_id, changes, &local)) {
    restore_after (self, &local);
    g_propagate_error (error, local);
    return FALSE;
  }
  /* What the commit left out goes, so that what runs next (the
   * verification, the next task) sees exactly the commit. */
  clean = vd_repo_clean_tree (self->repo, &local);
  if (!refresh_head (self, error)) {
    g_clear_error (&local);
    return FALSE;
  }
  if (!clean) {
    g_propagate_prefixed_error (error, local, "The work was committed but the tree could not be made equal to it: ");
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_project_commit_bounded (VdProject *self, const gchar *message, guint64 file_max, guint timeout_sec,
                           GCancellable *cancellable, gchar **commit_id, GPtrArray **changes, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  guint64 quota = vd_dataset_get_quota (self->dataset);
  VdRepoBounds bounds = {
    .file_max = file_max > 0 ? MIN (file_max, quota) : quota,
    .total_max = quota,
    .timeout_sec = timeout_sec,
    .cancellable = cancellable,
  };

  return commit_locked (self, message, &bounds, commit_id, changes, error);
}

gboolean
vd_project_commit (VdProject *self, const gchar *message, gchar **commit_id, GPtrArray **changes,
                   GError **error)
{
  return vd_project_commit_bounded (self, message, VD_PROJECT_COMMIT_FILE_MAX, VD_PROJECT_COMMIT_TIMEOUT, NULL,
                                    commit_id, changes, error);
}

GPtrArray *
vd_project_log (VdProject *self, guint n, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return have_repo (self, error) ? vd_repo_log (self->repo, n, error) : NULL;
}

gchar *
vd_project_get_egress_mode (VdProject *self)
{
  return get_fact (self, &self->egress_mode);
}

GStrv
vd_project_get_egress_groups (VdProject *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  return g_strdupv (self->egress_groups);
}

/* The caller has checked the mode and the groups against the config. */
gboolean
vd_project_set_egress (VdProject *self, const gchar *mode, const gchar * const *groups, GError **error)
{
  {
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);
    g_free (self->egress_mode);
    self->egress_mode = mode[0] != '\0' ? g_strdup (mode) : NULL;
    g_strfreev (self->egress_groups);
    self->egress_groups = groups != NULL && groups[0] != NULL ? g_strdupv ((gchar **) groups) : NULL;
  }
  return record_write (self, error);
}

/* A list setting ([] stored as NULL), then the record. */
static gboolean
set_names (VdProject *self, GStrv *field, const gchar * const *names, GError **error)
{
  {
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);
    g_strfreev (*field);
    *field = names != NULL && names[0] != NULL ? g_strdupv ((gchar **) names) : NULL;
  }
  return record_write (self, error);
}

GStrv
vd_project_get_secrets (VdProject *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  return g_strdupv (self->secrets);
}

/* The caller has checked the names against the secret store. */
gboolean
vd_project_set_secrets (VdProject *self, const gchar * const *names, GError **error)
{
  return set_names (self, &self->secrets, names, error);
}

GStrv
vd_project_get_ssh_keys (VdProject *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->state);

  return g_strdupv (self->ssh_keys);
}

/* The caller has checked the names against the SSH key store. */
gboolean
vd_project_set_ssh_keys (VdProject *self, const gchar * const *names, GError **error)
{
  return set_names (self, &self->ssh_keys, names, error);
}

gboolean
vd_project_set_remote (VdProject *self, const gchar *url, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  g_autofree gchar *old = NULL;
  g_autofree gchar *projects_dir = g_path_get_dirname (self->dir);

  if (!have_repo (self, error) || !vd_remote_url_validate (url, error) ||
      !url_outside_state (projects_dir, self->keys_dir, url, error) ||
      !vd_repo_set_remote (self->repo, url, error))
    return FALSE;
  old = get_fact (self, &self->remote);
  set_fact (self, &self->remote, url);
  /* A new remote is a new host: forget the pinned host key. */
  if (g_strcmp0 (old, url) != 0)
    set_fact (self, &self->host_key, NULL);
  return record_write (self, error);
}

static void
publish_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VdProject *self = source;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *seen = NULL;
  g_autofree gchar *pin = get_fact (self, &self->host_key);
  g_autofree gchar *remote = get_fact (self, &self->remote);
  g_autofree gchar *projects_dir = g_path_get_dirname (self->dir);

  /* Again now: the path may have become a link into the state since. */
  if (remote != NULL && !url_outside_state (projects_dir, self->keys_dir, remote, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (!have_repo (self, &error) ||
      !vd_git_transfer_push (self->transfer, self->name, self->repo, self->repo_path, remote, self->key_path, pin,
                             &seen, cancellable, &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (seen != NULL && pin == NULL) {
    set_fact (self, &self->host_key, seen);
    if (!record_write (self, &error))
      g_warning ("Cannot record the host key of %s: %s", self->name, error->message);
  }
  g_task_return_boolean (task, TRUE);
}

void
vd_project_publish_async (VdProject *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, vd_project_publish_async);
  g_task_run_in_thread (task, publish_thread);
}

gboolean
vd_project_publish_finish (VdProject *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- the same, off the main loop ----------------------------------------- */

typedef struct {
  gchar    *projects_dir;
  gchar    *keys_dir;
  gchar    *name;
  guint64   quota;
  GVariant *options;
  VdGitTransfer *transfer;
} CreateData;

static void
create_data_free (CreateData *d)
{
  g_free (d->projects_dir);
  g_free (d->keys_dir);
  g_free (d->name);
  g_clear_pointer (&d->options, g_variant_unref);
  g_clear_object (&d->transfer);
  g_free (d);
}

static void
create_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  CreateData *d = data;
  GError *error = NULL;
  VdProject *p = create_project (d->projects_dir, d->keys_dir, d->name, d->quota, d->options, d->transfer,
                                 cancellable, &error);

  if (p == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, p, g_object_unref);
}

void
vd_project_create_async (const gchar *projects_dir, const gchar *keys_dir, const gchar *name,
                         guint64 quota_bytes, GVariant *options, VdGitTransfer *transfer,
                         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  CreateData *d = g_new0 (CreateData, 1);

  d->projects_dir = g_strdup (projects_dir);
  d->keys_dir = g_strdup (keys_dir);
  d->name = g_strdup (name);
  d->quota = quota_bytes;
  d->options = options != NULL ? g_variant_ref_sink (options) : NULL;
  d->transfer = transfer != NULL ? g_object_ref (transfer) : NULL;
  g_task_set_source_tag (task, vd_project_create_async);
  g_task_set_task_data (task, d, (GDestroyNotify) create_data_free);
  g_task_run_in_thread (task, create_thread);
}

VdProject *
vd_project_create_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

typedef struct {
  gchar     *message;
  guint64    file_max;
  guint      timeout_sec;
  gchar     *commit_id;
  GPtrArray *changes;
} CommitData;

static void
commit_data_free (CommitData *d)
{
  g_free (d->message);
  g_free (d->commit_id);
  g_clear_pointer (&d->changes, g_ptr_array_unref);
  g_free (d);
}

static void
commit_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  CommitData *d = data;
  GError *error = NULL;

  if (vd_project_commit_bounded (VD_PROJECT (source), d->message, d->file_max, d->timeout_sec, cancellable,
                                 &d->commit_id, &d->changes, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
vd_project_commit_async (VdProject *self, const gchar *message, guint64 file_max, guint timeout_sec,
                         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  CommitData *d = g_new0 (CommitData, 1);

  d->message = g_strdup (message);
  d->file_max = file_max;
  d->timeout_sec = timeout_sec;
  /* A Cancel reaches the walk through the cancellable; the task itself
   * returns only when the walk has stopped and the tree is restored. */
  g_task_set_return_on_cancel (task, FALSE);
  /* The thread's own error (typed, saying what became of the tree), not
   * GIO's "Operation was cancelled". */
  g_task_set_check_cancellable (task, FALSE);
  g_task_set_source_tag (task, vd_project_commit_async);
  g_task_set_task_data (task, d, (GDestroyNotify) commit_data_free);
  g_task_run_in_thread (task, commit_thread);
}

gboolean
vd_project_commit_finish (VdProject *self, GAsyncResult *result, gchar **commit_id, GPtrArray **changes,
                          GError **error)
{
  CommitData *d;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  if (!g_task_propagate_boolean (G_TASK (result), error))
    return FALSE;
  d = g_task_get_task_data (G_TASK (result));
  if (commit_id != NULL)
    *commit_id = g_steal_pointer (&d->commit_id);
  if (changes != NULL)
    *changes = g_steal_pointer (&d->changes);
  return TRUE;
}

/* ---- grant and revoke in a thread -------------------------------------- */

/* The chown walks the whole tree (bounded by the quota and the depth
 * limit): a worker's thousands of files must not stall the bus. */
static void
owner_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  uid_t uid = (uid_t) GPOINTER_TO_UINT (data);
  GError *error = NULL;
  gboolean ok = uid == 0 ? vd_project_revoke (VD_PROJECT (source), &error)
                         : vd_project_grant (VD_PROJECT (source), uid, &error);

  if (ok)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
owner_async (VdProject *self, uid_t uid, gpointer tag, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);

  g_task_set_source_tag (task, tag);
  g_task_set_task_data (task, GUINT_TO_POINTER ((guint) uid), NULL);
  g_task_run_in_thread (task, owner_thread);
}

void
vd_project_grant_async (VdProject *self, uid_t uid, GAsyncReadyCallback callback, gpointer user_data)
{
  if (uid == 0) {
    g_task_report_new_error (self, callback, user_data, vd_project_grant_async, VIVARIUM_ERROR,
                             VIVARIUM_ERROR_INVALID_ARGUMENT, "A project is granted to a session's uid, never to root");
    return;
  }
  owner_async (self, uid, vd_project_grant_async, callback, user_data);
}

void
vd_project_revoke_async (VdProject *self, GAsyncReadyCallback callback, gpointer user_data)
{
  owner_async (self, 0, vd_project_revoke_async, callback, user_data);
}

gboolean
vd_project_owner_finish (VdProject *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}
