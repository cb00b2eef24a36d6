/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSecretStore"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <gio/gunixfdlist.h>

#include "vivarium-error.h"
#include "vd-fd-argument.h"
#include "vd-fs.h"
#include "vd-store-dir.h"
#include "vd-secret-store.h"

#define SECRET_FILE_MODE 0600
/* How long AddSecret waits for the caller's descriptor to say everything
 * (a pipe whose writer never closes would hold the call forever). */
#define VALUE_READ_TIMEOUT_MS 10000

struct _VdSecretStore {
  GObject  parent_instance;
  gchar   *dir;
};

static const VdStoreKind secret_kind = {
  .suffix = ".secret", .a_kind = "a secret", .kinds = "secrets", .max = VIVARIUM_SECRET_MAX_STORED,
};

G_DEFINE_TYPE (VdSecretStore, vd_secret_store, G_TYPE_OBJECT)

static void
vd_secret_store_finalize (GObject *object)
{
  g_free (VD_SECRET_STORE (object)->dir);
  G_OBJECT_CLASS (vd_secret_store_parent_class)->finalize (object);
}

static void
vd_secret_store_class_init (VdSecretStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_secret_store_finalize;
}

static void
vd_secret_store_init (VdSecretStore *self)
{
}

VdSecretStore *
vd_secret_store_new (const gchar *dir)
{
  VdSecretStore *self = g_object_new (VD_TYPE_SECRET_STORE, NULL);

  self->dir = g_strdup (dir);
  return self;
}

static VivariumSecret *
load_secret (VdSecretStore *self, const gchar *name, GError **error)
{
  g_autofree gchar *path = vd_store_dir_path (&secret_kind, self->dir, name);
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) secrets = NULL;

  if (!g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no secret named “%s”", name);
    return NULL;
  }
  secrets = vivarium_secrets_load (path, &local);
  if (secrets == NULL || secrets->len != 1 ||
      g_strcmp0 (((VivariumSecret *) secrets->pdata[0])->name, name) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The stored secret “%s” cannot be read: %s", name,
                 local != NULL ? local->message : "its file holds another secret");
    return NULL;
  }
  return g_ptr_array_steal_index (secrets, 0);
}

gboolean
vd_secret_store_add (VdSecretStore *self, VivariumSecret *secret, gboolean replace, GError **error)
{
  g_autoptr(GPtrArray) one = g_ptr_array_new ();
  g_autofree gchar *path = NULL;
  g_autoptr(GError) local = NULL;

  g_return_val_if_fail (secret->placeholder == NULL, FALSE);
  if (!vd_store_dir_check_name (&secret_kind, secret->name, error))
    return FALSE;
  secret->added_at = g_get_real_time () / G_USEC_PER_SEC;
  if (!vivarium_secret_check (secret, &local)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, local->message);
    return FALSE;
  }
  if (!vd_store_dir_prepare (self->dir, error))
    return FALSE;
  path = vd_store_dir_path (&secret_kind, self->dir, secret->name);
  if (!replace && g_file_test (path, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS,
                 "A secret named “%s” is stored already (replace it with the option “replace”)", secret->name);
    return FALSE;
  }
  if (!vd_store_dir_check_room (&secret_kind, self->dir, secret->name, error))
    return FALSE;
  g_ptr_array_add (one, secret);
  if (!vivarium_secrets_save (one, path, SECRET_FILE_MODE, &local)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot store the secret “%s”: %s", secret->name,
                 local->message);
    return FALSE;
  }
  g_message ("secret %s stored for %u hosts", secret->name, g_strv_length (secret->hosts));
  return TRUE;
}

gboolean
vd_secret_store_remove (VdSecretStore *self, const gchar *name, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vd_store_dir_check_name (&secret_kind, name, error))
    return FALSE;
  path = vd_store_dir_path (&secret_kind, self->dir, name);
  if (g_unlink (path) != 0) {
    int saved = errno;
    g_set_error (error, VIVARIUM_ERROR, saved == ENOENT ? VIVARIUM_ERROR_NOT_FOUND : VIVARIUM_ERROR_FAILED,
                 saved == ENOENT ? "There is no secret named “%s”" : "Cannot remove the secret “%s”", name);
    return FALSE;
  }
  vd_fs_fsync_dir (self->dir, NULL);
  g_message ("secret %s removed", name);
  return TRUE;
}

GPtrArray *
vd_secret_store_list (VdSecretStore *self, GError **error)
{
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  g_auto(GStrv) names = vd_store_dir_names (&secret_kind, self->dir);

  for (guint i = 0; names[i] != NULL; i++) {
    VivariumSecret *secret = load_secret (self, names[i], error);

    if (secret == NULL)
      return NULL;
    g_clear_pointer (&secret->value, g_bytes_unref);
    g_ptr_array_add (out, secret);
  }
  return g_steal_pointer (&out);
}

GPtrArray *
vd_secret_store_for_session (VdSecretStore *self, const gchar * const *names, GError **error)
{
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  guint n = names != NULL ? g_strv_length ((gchar **) names) : 0;

  if (n > VIVARIUM_SECRET_MAX_PER_SESSION) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "%u secrets were named; a session may hold at most %d", n, VIVARIUM_SECRET_MAX_PER_SESSION);
    return NULL;
  }
  for (guint i = 0; i < n; i++) {
    VivariumSecret *secret;

    if (!vd_store_dir_check_name (&secret_kind, names[i], error))
      return NULL;
    if (g_strv_contains ((const gchar * const *) names + i + 1, names[i])) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The secret “%s” is named twice",
                   names[i]);
      return NULL;
    }
    secret = load_secret (self, names[i], error);
    if (secret == NULL)
      return NULL;
    secret->placeholder = vivarium_secret_placeholder_new ();
    g_ptr_array_add (out, secret);
  }
  return g_steal_pointer (&out);
}

/* ---- Manager's verbs ---------------------------------------------------- */

/* The value: what the descriptor gives, one trailing newline dropped, at
 * most VIVARIUM_SECRET_MAX_VALUE bytes. */
static GBytes *
read_value (int fd, GError **error)
{
  GBytes *bytes = vd_fd_argument_read (fd, VIVARIUM_SECRET_MAX_VALUE, VALUE_READ_TIMEOUT_MS, "the secret's value",
                                       error);
  gsize len = 0;
  const guint8 *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;
  GBytes *value;

  if (bytes == NULL)
    return NULL;
  if (len > 0 && data[len - 1] == '\n')
    len--;
  if (len > VIVARIUM_SECRET_MAX_VALUE) {
    vd_fd_argument_wipe (bytes);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE, "A secret's value is at most %d bytes",
                 VIVARIUM_SECRET_MAX_VALUE);
    return NULL;
  }
  value = g_bytes_new (data, len);
  vd_fd_argument_wipe (bytes);
  return value;
}

static gboolean
lookup_string_option (GVariantDict *dict, const gchar *key, const gchar *fallback, gchar **out, GError **error)
{
  GVariant *v = g_variant_dict_lookup_value (dict, key, NULL);

  if (v != NULL && !g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
    g_variant_unref (v);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The option “%s” must be a string", key);
    return FALSE;
  }
  *out = g_strdup (v != NULL ? g_variant_get_string (v, NULL) : fallback);
  g_clear_pointer (&v, g_variant_unref);
  return TRUE;
}

static gboolean
parse_add_options (GVariant *options, VivariumSecret *secret, gboolean *replace, GError **error)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  const gchar *known[] = { "header", "format", "replace", NULL };
  GVariantIter iter;
  const gchar *key;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL)) {
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown secret option “%s” (known: header, format, replace)", key);
      return FALSE;
    }
  }
  *replace = FALSE;
  if (g_variant_dict_contains (dict, "replace") && !g_variant_dict_lookup (dict, "replace", "b", replace)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The option “replace” must be a boolean");
    return FALSE;
  }
  return lookup_string_option (dict, "header", VIVARIUM_SECRET_DEFAULT_HEADER, &secret->header, error) &&
         lookup_string_option (dict, "format", VIVARIUM_SECRET_DEFAULT_FORMAT, &secret->format, error);
}

/* An AddSecret call while its value is read and stored, off the main
 * loop: a caller whose descriptor says nothing holds its own call (up to
 * VALUE_READ_TIMEOUT_MS), never the daemon. */
typedef struct {
  GDBusMethodInvocation *invocation;
  VivariumSecret        *secret;
  gboolean               replace;
  int                    fd;
} AddCall;

static void
add_call_free (AddCall *call)
{
  g_clear_object (&call->invocation);   /* answered: NULL */
  vivarium_secret_free (call->secret);
  if (call->fd >= 0)
    close (call->fd);
  g_free (call);
}

static void
add_in_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  AddCall *call = data;
  GError *error = NULL;

  call->secret->value = read_value (call->fd, &error);
  if (call->secret->value == NULL || !vd_secret_store_add (source, call->secret, call->replace, &error))
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
    vivarium_dbus_manager_complete_add_secret (NULL, g_steal_pointer (&call->invocation), NULL);
}

static gboolean
handle_add_secret (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, GUnixFDList *fd_list, const gchar *name,
                   const gchar * const *hosts, GVariant *options, GVariant *value, gpointer user_data)
{
  VdSecretStore *self = user_data;
  g_autoptr(GTask) task = NULL;
  AddCall *call = g_new0 (AddCall, 1);
  GError *error = NULL;

  /* The handler owns the call's reference; the answer gives it back. */
  call->invocation = invocation;
  call->secret = g_new0 (VivariumSecret, 1);
  call->secret->name = g_strdup (name);
  call->secret->hosts = g_strdupv ((gchar **) hosts);
  call->fd = -1;
  if (!vd_store_dir_check_name (&secret_kind, name, &error) ||
      !parse_add_options (options, call->secret, &call->replace, &error) ||
      (call->fd = vd_fd_argument_take (invocation, value, "AddSecret", "the secret's value", &error)) < 0) {
    g_dbus_method_invocation_take_error (g_steal_pointer (&call->invocation), error);
    add_call_free (call);
    return TRUE;
  }
  task = g_task_new (self, NULL, added_cb, NULL);
  g_task_set_task_data (task, call, (GDestroyNotify) add_call_free);
  g_task_run_in_thread (task, add_in_thread);
  return TRUE;
}

static GVariant *
describe (const VivariumSecret *secret)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "name", g_variant_new_string (secret->name));
  g_variant_builder_add (&b, "{sv}", "hosts", g_variant_new_strv ((const gchar * const *) secret->hosts, -1));
  g_variant_builder_add (&b, "{sv}", "header", g_variant_new_string (secret->header));
  g_variant_builder_add (&b, "{sv}", "format", g_variant_new_string (secret->format));
  g_variant_builder_add (&b, "{sv}", "added_at", g_variant_new_uint64 ((guint64) MAX (secret->added_at, 0)));
  return g_variant_builder_end (&b);
}

static gboolean
handle_list_secrets (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdSecretStore *self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) secrets = vd_secret_store_list (self, &error);
  GVariantBuilder b;

  if (secrets == NULL) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return TRUE;
  }
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < secrets->len; i++)
    g_variant_builder_add_value (&b, describe (secrets->pdata[i]));
  vivarium_dbus_manager_complete_list_secrets (iface, invocation, g_variant_builder_end (&b));
  return TRUE;
}

static gboolean
handle_remove_secret (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *name,
                      gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  if (!vd_secret_store_remove (user_data, name, &error)) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return TRUE;
  }
  vivarium_dbus_manager_complete_remove_secret (iface, invocation);
  return TRUE;
}

void
vd_secret_store_connect (VdSecretStore *self, VivariumDBusManager *manager)
{
  g_signal_connect (manager, "handle-add-secret", G_CALLBACK (handle_add_secret), self);
  g_signal_connect (manager, "handle-list-secrets", G_CALLBACK (handle_list_secrets), self);
  g_signal_connect (manager, "handle-remove-secret", G_CALLBACK (handle_remove_secret), self);
}
