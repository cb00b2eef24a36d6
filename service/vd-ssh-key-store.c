/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSshKeyStore"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <gio/gunixfdlist.h>

#include "vivarium-error.h"
#include "vivarium-secret.h"
#include "vd-fd-argument.h"
#include "vd-fs.h"
#include "vd-store-dir.h"
#include "vd-ssh-key-store.h"

#define KEY_FILE_MODE 0600
/* How long AddSshKey waits for the caller's descriptor to end. */
#define KEY_READ_TIMEOUT_MS 10000

struct _VdSshKeyStore {
  GObject  parent_instance;
  gchar   *dir;
};

static const VdStoreKind key_kind = {
  .suffix = ".sshkey", .a_kind = "an SSH key", .kinds = "SSH keys", .max = VIVARIUM_SSH_KEY_MAX_STORED,
};

G_DEFINE_TYPE (VdSshKeyStore, vd_ssh_key_store, G_TYPE_OBJECT)

static void
vd_ssh_key_store_finalize (GObject *object)
{
  g_free (VD_SSH_KEY_STORE (object)->dir);
  G_OBJECT_CLASS (vd_ssh_key_store_parent_class)->finalize (object);
}

static void
vd_ssh_key_store_class_init (VdSshKeyStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_ssh_key_store_finalize;
}

static void
vd_ssh_key_store_init (VdSshKeyStore *self)
{
}

VdSshKeyStore *
vd_ssh_key_store_new (const gchar *dir)
{
  VdSshKeyStore *self = g_object_new (VD_TYPE_SSH_KEY_STORE, NULL);

  self->dir = g_strdup (dir);
  return self;
}

VdSshKeyStore *
vd_ssh_key_store_new_for (VdConfig *config)
{
  g_autofree gchar *dir = vd_config_build_state_path (config, "secrets", NULL);

  return vd_ssh_key_store_new (dir);
}

static VivariumSshKey *
load_key (VdSshKeyStore *self, const gchar *name, GError **error)
{
  g_autofree gchar *path = vd_store_dir_path (&key_kind, self->dir, name);
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) keys = NULL;

  if (!g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no SSH key named “%s”", name);
    return NULL;
  }
  keys = vivarium_ssh_keys_load (path, &local);
  if (keys == NULL || keys->len != 1 || g_strcmp0 (((VivariumSshKey *) keys->pdata[0])->name, name) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The stored SSH key “%s” cannot be read: %s", name,
                 local != NULL ? local->message : "its file holds another key");
    return NULL;
  }
  return g_ptr_array_steal_index (keys, 0);
}

/* The key in a 0600 file of the (root, 0700) store for ssh-keygen, which
 * reads keys from files only; removed before anything else happens. */
static gchar *
write_check_copy (VdSshKeyStore *self, const gchar *name, GBytes *private_key, GError **error)
{
  g_autofree gchar *template = g_strdup_printf ("%s/.%s.check-XXXXXX", self->dir, name);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (private_key, &len);
  int fd = g_mkstemp_full (template, O_RDWR | O_CLOEXEC, KEY_FILE_MODE);
  gboolean ok;

  if (fd < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot check the SSH key “%s”: %s", name,
                 g_strerror (errno));
    return NULL;
  }
  ok = write (fd, data, len) == (gssize) len;
  close (fd);
  if (!ok) {
    g_unlink (template);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot check the SSH key “%s”", name);
    return NULL;
  }
  return g_steal_pointer (&template);
}

/* `ssh-keygen -y -P ""`: the public key of an unencrypted private key
 * (an encrypted one fails on the empty passphrase instead of prompting). */
static gchar *
public_key_of (VdSshKeyStore *self, const gchar *name, GBytes *private_key, GError **error)
{
  g_autofree gchar *copy = write_check_copy (self, name, private_key, error);
  const gchar *argv[] = { "ssh-keygen", "-y", "-P", "", "-f", copy, NULL };
  g_autofree gchar *out = NULL;
  g_autoptr(GError) local = NULL;
  g_auto(GStrv) fields = NULL;
  gint status = 0;
  gboolean ran;

  if (copy == NULL)
    return NULL;
  ran = g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDIN_FROM_DEV_NULL |
                      G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, &local);
  g_unlink (copy);
  if (!ran) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot run ssh-keygen (openssh-client): %s",
                 local->message);
    return NULL;
  }
  fields = g_strsplit (g_strstrip (out), " ", 3);
  if (!g_spawn_check_wait_status (status, NULL) || g_strv_length (fields) < 2) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The SSH key “%s” is not an unencrypted OpenSSH private key (ssh-keygen -y refused it)", name);
    return NULL;
  }
  return g_strdup_printf ("%s %s", fields[0], fields[1]);
}

static gboolean
check_private (const gchar *name, GBytes *private_key, GError **error)
{
  gsize len = 0;
  const gchar *data = g_bytes_get_data (private_key, &len);

  if (len > VIVARIUM_SSH_KEY_MAX_PRIVATE) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "An SSH private key is at most %d bytes",
                 VIVARIUM_SSH_KEY_MAX_PRIVATE);
    return FALSE;
  }
  if (len < strlen (VIVARIUM_SSH_KEY_PEM_BEGIN) || memcmp (data, VIVARIUM_SSH_KEY_PEM_BEGIN,
                                                           strlen (VIVARIUM_SSH_KEY_PEM_BEGIN)) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The SSH key “%s” is not an OpenSSH private key (it must start with %s)", name,
                 VIVARIUM_SSH_KEY_PEM_BEGIN);
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_ssh_key_store_add (VdSshKeyStore *self, const gchar *name, GBytes *private_key, gboolean replace, GError **error)
{
  g_autoptr(VivariumSshKey) key = NULL;
  g_autoptr(GPtrArray) one = g_ptr_array_new ();
  g_autofree gchar *path = NULL;
  g_autoptr(GError) local = NULL;

  if (!vd_store_dir_check_name (&key_kind, name, error) || !check_private (name, private_key, error) ||
      !vd_store_dir_prepare (self->dir, error))
    return FALSE;
  path = vd_store_dir_path (&key_kind, self->dir, name);
  if (!replace && g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS,
                 "An SSH key named “%s” is stored already (replace it with the option “replace”)", name);
    return FALSE;
  }
  if (!vd_store_dir_check_room (&key_kind, self->dir, name, error))
    return FALSE;
  key = g_new0 (VivariumSshKey, 1);
  key->name = g_strdup (name);
  key->public_key = public_key_of (self, name, private_key, error);
  if (key->public_key == NULL)
    return FALSE;
  key->fingerprint = vivarium_ssh_key_fingerprint (key->public_key);
  key->private_key = g_bytes_new (g_bytes_get_data (private_key, NULL), g_bytes_get_size (private_key));
  key->added_at = g_get_real_time () / G_USEC_PER_SEC;
  g_ptr_array_add (one, key);
  if (!vivarium_ssh_keys_save (one, path, KEY_FILE_MODE, &local)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "Cannot store the SSH key “%s”: %s", name,
                 local->message);
    return FALSE;
  }
  g_message ("SSH key %s stored (%s)", name, key->fingerprint);
  return TRUE;
}

gboolean
vd_ssh_key_store_remove (VdSshKeyStore *self, const gchar *name, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vd_store_dir_check_name (&key_kind, name, error))
    return FALSE;
  path = vd_store_dir_path (&key_kind, self->dir, name);
  if (g_unlink (path) != 0) {
    int saved = errno;
    g_set_error (error, VIVARIUM_ERROR, saved == ENOENT ? VIVARIUM_ERROR_NOT_FOUND : VIVARIUM_ERROR_FAILED,
                 saved == ENOENT ? "There is no SSH key named “%s”" : "Cannot remove the SSH key “%s”", name);
    return FALSE;
  }
  vd_fs_fsync_dir (self->dir, NULL);
  g_message ("SSH key %s removed", name);
  return TRUE;
}

GPtrArray *
vd_ssh_key_store_list (VdSshKeyStore *self, GError **error)
{
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_ssh_key_free);
  g_auto(GStrv) names = vd_store_dir_names (&key_kind, self->dir);

  for (guint i = 0; names[i] != NULL; i++) {
    VivariumSshKey *key = load_key (self, names[i], error);

    if (key == NULL)
      return NULL;
    vivarium_ssh_key_drop_private (key);
    g_ptr_array_add (out, key);
  }
  return g_steal_pointer (&out);
}

static GPtrArray *
for_session (VdSshKeyStore *self, const gchar * const *names, GError **error)
{
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_ssh_key_free);
  guint n = g_strv_length ((gchar **) names);

  if (n > VIVARIUM_SSH_KEY_MAX_PER_SESSION) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "%u SSH keys were named; a session may hold at most %d", n, VIVARIUM_SSH_KEY_MAX_PER_SESSION);
    return NULL;
  }
  for (guint i = 0; i < n; i++) {
    VivariumSshKey *key;

    if (!vd_store_dir_check_name (&key_kind, names[i], error))
      return NULL;
    if (g_strv_contains (names + i + 1, names[i])) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The SSH key “%s” is named twice",
                   names[i]);
      return NULL;
    }
    key = load_key (self, names[i], error);
    if (key == NULL)
      return NULL;
    g_ptr_array_add (out, key);
  }
  return g_steal_pointer (&out);
}

GPtrArray *
vd_ssh_key_store_for_session (VdSshKeyStore *self, const gchar * const *names, GError **error)
{
  return for_session (self, names, error);
}

static gboolean
lookup_names (GVariantDict *dict, gchar ***names, GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, "ssh_keys", NULL);

  *names = NULL;
  if (v == NULL)
    return TRUE;
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_STRING_ARRAY)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “ssh_keys” must be a list of strings (type as)");
    return FALSE;
  }
  *names = g_variant_dup_strv (v, NULL);
  return TRUE;
}

gboolean
vd_ssh_key_store_parse_option (VdConfig *config, GVariantDict *dict, VdEgressMode mode,
                               const gchar * const *defaults, GPtrArray **out, GError **error)
{
  g_autoptr(VdSshKeyStore) store = NULL;
  g_auto(GStrv) names = NULL;

  *out = NULL;
  if (!lookup_names (dict, &names, error))
    return FALSE;
  /* A project's default goes to its allowlist sessions only: in another
   * mode there is no proxy to hold the agent. */
  if (names == NULL && defaults != NULL && mode == VD_EGRESS_MODE_ALLOWLIST)
    names = g_strdupv ((gchar **) defaults);
  if (names == NULL || names[0] == NULL)
    return TRUE;
  if (mode != VD_EGRESS_MODE_ALLOWLIST) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "SSH keys need the egress mode “allowlist” (their agent runs in its proxy), and this one is “%s”",
                 vd_egress_mode_to_string (mode));
    return FALSE;
  }
  store = vd_ssh_key_store_new_for (config);
  *out = for_session (store, (const gchar * const *) names, error);
  return *out != NULL;
}

/* ---- Manager's verbs ---------------------------------------------------- */

static gboolean
parse_add_options (GVariant *options, gboolean *replace, GError **error)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  GVariantIter iter;
  const gchar *key;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL)) {
    if (!g_str_equal (key, "replace")) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown SSH key option “%s” (known: replace)", key);
      return FALSE;
    }
  }
  *replace = FALSE;
  if (g_variant_dict_contains (dict, "replace") && !g_variant_dict_lookup (dict, "replace", "b", replace)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The option “replace” must be a boolean");
    return FALSE;
  }
  return TRUE;
}

/* Off the main loop: the descriptor may say nothing for a while, and
 * ssh-keygen runs. */
typedef struct {
  GDBusMethodInvocation *invocation;
  gchar                 *name;
  gboolean               replace;
  int                    fd;
} AddCall;

static void
add_call_free (AddCall *call)
{
  g_clear_object (&call->invocation);   /* answered: NULL */
  g_free (call->name);
  if (call->fd >= 0)
    close (call->fd);
  g_free (call);
}

static void
add_in_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  AddCall *call = data;
  GError *error = NULL;
  GBytes *key = vd_fd_argument_read (call->fd, VIVARIUM_SSH_KEY_MAX_PRIVATE, KEY_READ_TIMEOUT_MS, "the SSH key",
                                     &error);
  gboolean ok = key != NULL && vd_ssh_key_store_add (source, call->name, key, call->replace, &error);

  if (key != NULL)
    vd_fd_argument_wipe (key);
  if (!ok)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
added_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  AddCall *call = g_task_get_task_data (G_TASK (res));
  GError *error = NULL;

  if (!g_task_propagate_boolean (G_TASK (res), &error))
    g_dbus_method_invocation_take_error (g_steal_pointer (&call->invocation), error);
  else
    vivarium_dbus_manager_complete_add_ssh_key (NULL, g_steal_pointer (&call->invocation), NULL);
}

static gboolean
handle_add_ssh_key (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, GUnixFDList *fd_list, const gchar *name, GVariant *options, GVariant *key, gpointer user_data)
{
  g_autoptr(GTask) task = NULL;
  AddCall *call = g_new0 (AddCall, 1);
  GError *error = NULL;

  /* The handler owns the call's reference; the answer gives it back. */
  call->invocation = invocation;
  call->name = g_strdup (name);
  call->fd = -1;
  if (!vd_store_dir_check_name (&key_kind, name, &error) || !parse_add_options (options, &call->replace, &error) ||
      (call->fd = vd_fd_argument_take (invocation, key, "AddSshKey", "the SSH key", &error)) < 0) {
    g_dbus_method_invocation_take_error (g_steal_pointer (&call->invocation), error);
    add_call_free (call);
    return TRUE;
  }
  task = g_task_new (user_data, NULL, added_cb, NULL);
  g_task_set_task_data (task, call, (GDestroyNotify) add_call_free);
  g_task_run_in_thread (task, add_in_thread);
  return TRUE;
}

static GVariant *
describe (const VivariumSshKey *key)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "name", g_variant_new_string (key->name));
  g_variant_builder_add (&b, "{sv}", "public_key", g_variant_new_string (key->public_key));
  g_variant_builder_add (&b, "{sv}", "fingerprint", g_variant_new_string (key->fingerprint));
  g_variant_builder_add (&b, "{sv}", "added_at", g_variant_new_uint64 ((guint64) MAX (key->added_at, 0)));
  return g_variant_builder_end (&b);
}

static gboolean
handle_list_ssh_keys (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) keys = vd_ssh_key_store_list (user_data, &error);
  GVariantBuilder b;

  if (keys == NULL) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return TRUE;
  }
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < keys->len; i++)
    g_variant_builder_add_value (&b, describe (keys->pdata[i]));
  vivarium_dbus_manager_complete_list_ssh_keys (iface, invocation, g_variant_builder_end (&b));
  return TRUE;
}

static gboolean
handle_remove_ssh_key (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *name,
                       gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  if (!vd_ssh_key_store_remove (user_data, name, &error)) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return TRUE;
  }
  vivarium_dbus_manager_complete_remove_ssh_key (iface, invocation);
  return TRUE;
}

void
vd_ssh_key_store_connect (VdSshKeyStore *self, VivariumDBusManager *manager)
{
  g_signal_connect (manager, "handle-add-ssh-key", G_CALLBACK (handle_add_ssh_key), self);
  g_signal_connect (manager, "handle-list-ssh-keys", G_CALLBACK (handle_list_ssh_keys), self);
  g_signal_connect (manager, "handle-remove-ssh-key", G_CALLBACK (handle_remove_ssh_key), self);
}
