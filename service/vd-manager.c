/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdManager"

#include "config.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-canary.h"
#include "vd-daemon.h"
#include "vd-dns-relay.h"
#include "vd-exported.h"
#include "vd-fs.h"
#include "vd-guard.h"
#include "vd-image.h"
#include "vd-image-build.h"
#include "vd-image-import.h"
#include "vd-log.h"
#include "vd-manager.h"
#include "vd-session.h"
#include "vd-systemd.h"
#include "vd-task.h"

/* Stopped sessions and finished tasks stay visible this long, so that a
 * caller can still read how they ended. */
#define FORGET_AFTER_SEC   300

struct _VdManager {
  GObject               parent_instance;
  VdDaemon             *daemon;       /* unowned: the daemon owns us */
  VdConfig             *config;
  VdAuthority          *authority;
  VdExported           *exported;     /* the only way onto the bus */
  GDBusConnection      *connection;
  VdSystemd            *systemd;
  VdGuard              *guard;
  VdDnsRelay           *dns_relay;
  VivariumDBusManager  *skeleton;
  GHashTable           *images;       /* name → VdImage */
  GHashTable           *pending;      /* names of images being built or imported */
  GHashTable           *sessions;     /* id → VdSession */
  GHashTable           *tasks;        /* id → VdTask */
  GHashTable           *uids;         /* uid → session id */
};

G_DEFINE_TYPE (VdManager, vd_manager, G_TYPE_OBJECT)

static void
vd_manager_finalize (GObject *object)
{
  VdManager *self = VD_MANAGER (object);

  g_clear_object (&self->exported);   /* takes every object off the bus */
  g_hash_table_unref (self->images);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->sessions);
  g_hash_table_unref (self->tasks);
  g_hash_table_unref (self->uids);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->guard);
  g_clear_object (&self->dns_relay);   /* stops it */
  g_clear_object (&self->systemd);
  g_clear_object (&self->config);
  g_clear_object (&self->authority);
  g_clear_object (&self->connection);
  G_OBJECT_CLASS (vd_manager_parent_class)->finalize (object);
}

static void
vd_manager_class_init (VdManagerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_manager_finalize;
}

static void
vd_manager_init (VdManager *self)
{
  self->images = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->tasks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->uids = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
}

static const gchar **
object_paths (GHashTable *table, const gchar *(*path_of) (gpointer))
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, table);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (paths, (gpointer) path_of (value));
  g_ptr_array_sort (paths, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (paths, NULL);
  return (const gchar **) g_ptr_array_free (paths, FALSE);
}

/* Every object goes on the bus through the one boundary, which authorizes
 * its methods, properties, signals and place in the tree. */
static gboolean
export_protected (VdManager *self, GDBusInterfaceSkeleton *skeleton, const gchar *path, GError **error)
{
  return vd_exported_add (self->exported, path, skeleton, error);
}

/* --- listing --------------------------------------------------------- */

static gboolean
handle_list_sessions (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = object_paths (self->sessions, (const gchar *(*) (gpointer)) vd_session_get_object_path);

  vivarium_dbus_manager_complete_list_sessions (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_images (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = object_paths (self->images, (const gchar *(*) (gpointer)) vd_image_get_object_path);

  vivarium_dbus_manager_complete_list_images (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_projects (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  const gchar *none[] = { NULL };

  vivarium_dbus_manager_complete_list_projects (iface, invocation, none);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_recipes (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_auto(GStrv) recipes = vd_image_build_list_recipes (self->config);

  vivarium_dbus_manager_complete_list_recipes (iface, invocation, (const gchar * const *) recipes);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- images ---------------------------------------------------------- */

static gboolean handle_image_freeze (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_image_verify (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_image_delete (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);

static gboolean
add_image (VdManager *self, VdImage *image, gboolean announce, GError **error)
{
  GDBusInterfaceSkeleton *skeleton = vd_image_get_skeleton (image);

  g_signal_connect (skeleton, "handle-freeze", G_CALLBACK (handle_image_freeze), self);
  g_signal_connect (skeleton, "handle-verify", G_CALLBACK (handle_image_verify), self);
  g_signal_connect (skeleton, "handle-delete", G_CALLBACK (handle_image_delete), self);
  if (!export_protected (self, skeleton, vd_image_get_object_path (image), error))
    return FALSE;
  g_hash_table_insert (self->images, g_strdup (vd_image_get_name (image)), g_object_ref (image));
  if (announce)
    vivarium_dbus_manager_emit_image_added (self->skeleton, vd_image_get_object_path (image));
  return TRUE;
}

static void
load_images (VdManager *self)
{
  g_autofree gchar *dir = vd_config_build_state_path (self->config, "images", NULL);
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(VdImage) image = NULL;
    g_autoptr(GError) error = NULL;

    if (names[i][0] == '.')
      continue;
    image = vd_image_load (path, &error);
    if (image == NULL || !add_image (self, image, FALSE, &error))
      g_warning ("skipping image %s: %s", path, error->message);
  }
}

static VdImage *
image_for_skeleton (VdManager *self, VivariumDBusImage *iface)
{
  return g_hash_table_lookup (self->images, vivarium_dbus_image_get_name (iface));
}

static void
freeze_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdImage *image = VD_IMAGE (source);
  GError *error = NULL;

  if (!vd_image_freeze_finish (image, res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_image_freeze (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdImage *image = image_for_skeleton (VD_MANAGER (user_data), iface);

  vd_image_freeze_async (image, NULL, freeze_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
verify_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = vd_image_verify_finish (VD_IMAGE (source), res, &error);

  if (!ok && !g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH)) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(b)", ok));
}

static gboolean
handle_image_verify (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdImage *image = image_for_skeleton (VD_MANAGER (user_data), iface);

  vd_image_verify_async (image, TRUE, NULL, verify_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_image_delete (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdImage) image = g_object_ref (image_for_skeleton (self, iface));
  g_autofree gchar *path = g_strdup (vd_image_get_object_path (image));
  GError *error = NULL;

  if (!vd_image_delete (image, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_image_complete_delete (iface, invocation);
  vd_image_unexport (image);
  vd_exported_remove (self->exported, path);
  g_hash_table_remove (self->images, vd_image_get_name (image));
  vivarium_dbus_manager_emit_image_removed (self->skeleton, path);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
check_new_image_name (VdManager *self, const gchar *name, GError **error)
{
  g_autofree gchar *dir = NULL;

  if (!vivarium_name_validate ("image", name, error))
    return FALSE;
  dir = vd_config_build_state_path (self->config, "images", name, NULL);
  if (g_hash_table_contains (self->images, name) || g_hash_table_contains (self->pending, name) ||
      g_file_test (dir, G_FILE_TEST_EXISTS)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS, "An image named “%s” already exists", name);
    return FALSE;
  }
  return TRUE;
}

/* --- tasks ----------------------------------------------------------- */

static gboolean
forget_task_cb (gpointer user_data)
{
  g_autoptr(VdTask) task = user_data;
  VdManager *self = g_object_get_data (G_OBJECT (task), "manager");

  vd_exported_remove (self->exported, vd_task_get_object_path (task));
  g_hash_table_remove (self->tasks, vd_task_get_id (task));
  return G_SOURCE_REMOVE;
}

static void
task_finished (VdManager *self, VdTask *task)
{
  g_object_set_data (G_OBJECT (task), "manager", self);
  g_timeout_add_seconds (FORGET_AFTER_SEC, forget_task_cb, g_object_ref (task));
  vd_daemon_release (self->daemon);
}

static VdTask *
new_task (VdManager *self, const gchar *kind, GError **error)
{
  g_autoptr(VdTask) task = vd_task_new (kind, self->connection, error);

  if (task == NULL)
    return NULL;
  /* vd_task_new() still exports its skeleton itself; take it back so the
   * task is reachable only through the boundary. */
  if (g_dbus_interface_skeleton_get_connection (vd_task_get_skeleton (task)) != NULL)
    g_dbus_interface_skeleton_unexport (vd_task_get_skeleton (task));
  if (!export_protected (self, vd_task_get_skeleton (task), vd_task_get_object_path (task), error))
    return NULL;
  g_hash_table_insert (self->tasks, g_strdup (vd_task_get_id (task)), g_object_ref (task));
  vd_daemon_hold (self->daemon);
  return g_steal_pointer (&task);
}

/* --- building -------------------------------------------------------- */

static void
build_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdImageBuild *build = VD_IMAGE_BUILD (source);
  g_autoptr(VdTask) task = g_object_ref (g_object_get_data (source, "task"));
  g_autofree gchar *name = g_strdup (vd_image_build_get_name (build));
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  g_autoptr(GError) error = NULL;

  dir = vd_image_build_run_finish (build, res, &error);
  if (dir != NULL)
    image = vd_image_load (dir, &error);
  if (image != NULL && add_image (self, image, TRUE, &error))
    vd_task_succeed (task, vd_image_get_object_path (image));
  else
    vd_task_fail (task, error);
  g_hash_table_remove (self->pending, name);
  task_finished (self, task);
}

static gboolean
check_recipe (VdManager *self, const gchar *recipe, GError **error)
{
  g_autofree gchar *path = NULL;

  if (!vivarium_name_validate ("recipe", recipe, error))
    return FALSE;
  path = vd_image_build_recipe_path (self->config, recipe);
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no recipe named “%s”", recipe);
    return FALSE;
  }
  return TRUE;
}

static gboolean
handle_build_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *recipe,
                    const gchar *name, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdTask) task = NULL;
  g_autoptr(VdImageBuild) build = NULL;
  GError *error = NULL;

  if (!check_recipe (self, recipe, &error) || !check_new_image_name (self, name, &error) ||
      (task = new_task (self, "build-image", &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  build = vd_image_build_new (self->config, self->systemd, task, recipe, name);
  g_object_set_data_full (G_OBJECT (build), "task", g_object_ref (task), g_object_unref);
  g_hash_table_add (self->pending, g_strdup (name));
  vd_log_image (G_LOG_LEVEL_INFO, name, "building image %s from recipe %s (task %s)", name, recipe, vd_task_get_id (task));
  vd_image_build_run_async (build, build_done_cb, self);
  vivarium_dbus_manager_complete_build_image (iface, invocation, vd_task_get_object_path (task));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- importing ------------------------------------------------------- */

static void
import_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdImageImport *import = VD_IMAGE_IMPORT (source);
  VdManager *self = g_object_get_data (source, "manager");
  g_autofree gchar *dir = NULL;
  g_autoptr(VdImage) image = NULL;
  GError *error = NULL;

  g_hash_table_remove (self->pending, vd_image_import_get_name (import));
  vd_daemon_release (self->daemon);
  dir = vd_image_import_run_finish (import, res, &error);
  if (dir == NULL || (image = vd_image_load (dir, &error)) == NULL || !add_image (self, image, TRUE, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vd_log_image (G_LOG_LEVEL_INFO, vd_image_get_name (image), "imported image %s", vd_image_get_name (image));
  vivarium_dbus_manager_complete_import_image (self->skeleton, invocation, vd_image_get_object_path (image));
}

static gboolean
handle_import_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation,
                     const gchar *name, GVariant *handle, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(VdImageImport) import = NULL;
  GError *error = NULL;
  gint fd;

  if (!check_new_image_name (self, name, &error) || (fd = vd_image_import_take_fd (invocation, handle, &error)) < 0) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  import = vd_image_import_new (self->config, name, fd);
  g_object_set_data (G_OBJECT (import), "manager", self);
  g_hash_table_add (self->pending, g_strdup (name));
  vd_daemon_hold (self->daemon);
  vd_image_import_run_async (import, import_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- sessions -------------------------------------------------------- */

static gboolean
parse_uint_option (GVariantDict *dict, const gchar *key, guint min, guint max, guint *value, GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, key, NULL);

  if (v == NULL)
    return TRUE;
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” must be an unsigned 32-bit number (type u)", key);
    return FALSE;
  }
  *value = g_variant_get_uint32 (v);
  if (*value < min || *value > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” is %u; it must be between %u and %u", key, *value, min, max);
    return FALSE;
  }
  return TRUE;
}

static gboolean
parse_session_options (VdManager *self, GVariant *options, VdSessionOptions *out, GError **error)
{
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  const gchar *known[] = { "memory", "cpus", "timeout", "egress", NULL };
  GVariantIter iter;
  const gchar *key;
  const gchar *egress = "open";

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL)) {
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown session option “%s” (known: memory, cpus, timeout, egress)", key);
      return FALSE;
    }
  }
  out->memory_mib = vd_config_get_default_memory_mib (self->config);
  out->cpus = vd_config_get_default_cpus (self->config);
  out->timeout_sec = 0;
  out->guard_layer1 = TRUE;
  out->guard_layer2 = TRUE;
  if (!parse_uint_option (dict, "memory", VIVARIUM_MEMORY_MIN_MIB, VIVARIUM_MEMORY_MAX_MIB, &out->memory_mib, error) ||
      !parse_uint_option (dict, "cpus", 1, VIVARIUM_CPUS_MAX, &out->cpus, error) ||
      !parse_uint_option (dict, "timeout", 0, VIVARIUM_TIMEOUT_MAX_SEC, &out->timeout_sec, error))
    return FALSE;
  if (g_variant_dict_contains (dict, "egress") && !g_variant_dict_lookup (dict, "egress", "&s", &egress)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The option “egress” must be a string");
    return FALSE;
  }
  if (g_strcmp0 (egress, "open") != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "Unknown egress mode “%s”; only “open” is available", egress);
    return FALSE;
  }
  return TRUE;
}

static VdImage *
lookup_bootable_image (VdManager *self, const gchar *name, GError **error)
{
  VdImage *image;

  if (!vivarium_name_validate ("image", name, error))
    return NULL;
  image = g_hash_table_lookup (self->images, name);
  if (image == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no image named “%s”", name);
    return NULL;
  }
  if (!vd_image_is_frozen (image)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FROZEN,
                 "The image “%s” is not frozen; freeze it before starting sessions from it", name);
    return NULL;
  }
  return image;
}

static gboolean
check_project (VdManager *self, const gchar *project, GError **error)
{
  if (project[0] == '\0')
    return TRUE;
  if (!vivarium_name_validate ("project", project, error))
    return FALSE;
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no project named “%s”", project);
  return FALSE;
}

static guint32
allocate_uid (VdManager *self, GError **error)
{
  guint32 base = vd_config_get_uid_base (self->config);
  guint32 last_covered = vd_guard_get_uncovered_uid (self->guard) - 1;

  for (guint32 uid = base; uid <= last_covered; uid++) {
    if (!g_hash_table_contains (self->uids, GUINT_TO_POINTER (uid)))
      return uid;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "No session uid is free");
  return 0;
}

static gboolean
forget_session_cb (gpointer user_data)
{
  g_autoptr(VdSession) session = user_data;
  VdManager *self = g_object_get_data (G_OBJECT (session), "manager");
  g_autofree gchar *path = g_strdup (vd_session_get_object_path (session));

  vd_exported_remove (self->exported, path);
  if (g_hash_table_remove (self->sessions, vd_session_get_id (session)))
    vivarium_dbus_manager_emit_session_removed (self->skeleton, path);
  return G_SOURCE_REMOVE;
}

static void
session_ended_cb (VdSession *session, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  guint32 uid = vd_session_get_uid (session);
  guint64 packets = 0, bytes = 0;

  if (vd_guard_get_counters (self->guard, uid, &packets, &bytes))
    vd_log_session (G_LOG_LEVEL_INFO, vd_session_get_id (session),
                    "session %s: the guard dropped %" G_GUINT64_FORMAT " packets", vd_session_get_id (session), packets);
  vd_guard_remove_session (self->guard, uid);
  g_hash_table_remove (self->uids, GUINT_TO_POINTER (uid));
  vd_image_remove_user (vd_session_get_image (session), vd_session_get_object_path (session));
  vd_daemon_release (self->daemon);
  g_object_set_data (G_OBJECT (session), "manager", self);
  g_timeout_add_seconds (FORGET_AFTER_SEC, forget_session_cb, g_object_ref (session));
}

/* Layer 1 is checked on the unit as systemd holds it, not as we asked. */
static gboolean
check_started_session (VdManager *self, VdSession *session, GAsyncResult *res, GError **error)
{
  if (!vd_session_start_finish (session, res, error))
    return FALSE;
  if (vd_session_get_options (session)->guard_layer1 &&
      !vd_guard_check_unit (self->guard, vd_session_get_unit (session), error)) {
    vd_session_stop_async (session, NULL, NULL);
    return FALSE;
  }
  return TRUE;
}

static void
session_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdSession *session = VD_SESSION (source);
  VdManager *self = g_object_get_data (source, "manager");
  GError *error = NULL;

  if (!check_started_session (self, session, res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vivarium_dbus_manager_complete_start_session (self->skeleton, invocation, vd_session_get_object_path (session));
}

/* uid 0 means "pick a free slot"; the self-test passes the one slot the
 * nftables table does not cover. */
static VdSession *
create_session (VdManager *self, VdImage *image, const VdSessionOptions *options, guint32 uid, GError **error)
{
  g_autoptr(VdSession) session = NULL;
  gint64 guard_started = g_get_monotonic_time ();

  if (uid == 0)
    uid = allocate_uid (self, error);
  else if (g_hash_table_contains (self->uids, GUINT_TO_POINTER (uid)))
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "The session uid %u is in use", uid);
  if (uid == 0 || (error != NULL && *error != NULL) || !vd_guard_add_session (self->guard, uid, error))
    return NULL;
  session = vd_session_new (self->config, self->systemd, self->connection, image, NULL, uid, options,
                            vd_guard_get_deny_list (self->guard));
  vd_session_set_resolv_conf (session, vd_dns_relay_get_resolv_conf (self->dns_relay));
  vd_session_record_timing (session, "guard", (guint64) (g_get_monotonic_time () - guard_started));
  if (!export_protected (self, vd_session_get_skeleton (session), vd_session_get_object_path (session), error)) {
    vd_guard_remove_session (self->guard, uid);
    return NULL;
  }
  g_hash_table_insert (self->uids, GUINT_TO_POINTER (uid), g_strdup (vd_session_get_id (session)));
  g_hash_table_insert (self->sessions, g_strdup (vd_session_get_id (session)), g_object_ref (session));
  g_signal_connect (session, "ended", G_CALLBACK (session_ended_cb), self);
  g_object_set_data (G_OBJECT (session), "manager", self);
  vd_daemon_hold (self->daemon);
  vivarium_dbus_manager_emit_session_added (self->skeleton, vd_session_get_object_path (session));
  return g_steal_pointer (&session);
}

static void
scratch_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdManager *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!check_started_session (self, VD_SESSION (source), res, &error)) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, g_object_ref (source), g_object_unref);
}

/* A session for the daemon's own use (the isolation self-test): the same
 * path as StartSession, but with a layer of the guard possibly left out. */
void
vd_manager_start_scratch_session_async (VdManager *self, const gchar *image_name, gboolean layer1, gboolean layer2,
                                        GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  VdSessionOptions opts = { 0 };
  g_autoptr(VdSession) session = NULL;
  VdImage *image;
  GError *error = NULL;

  opts.memory_mib = vd_config_get_default_memory_mib (self->config);
  opts.cpus = 1;
  opts.guard_layer1 = layer1;
  opts.guard_layer2 = layer2;
  if ((image = lookup_bootable_image (self, image_name, &error)) == NULL ||
      (session = create_session (self, image, &opts, layer2 ? 0 : vd_guard_get_uncovered_uid (self->guard), &error)) == NULL) {
    g_task_return_error (task, error);
    return;
  }
  vd_session_start_async (session, cancellable, scratch_started_cb, g_steal_pointer (&task));
}

VdSession *
vd_manager_start_scratch_session_finish (VdManager *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* For the self-test's live-session mode: a caller's running session. */
VdSession *
vd_manager_lookup_running_session (VdManager *self, const gchar *id, GError **error)
{
  VdSession *session;

  if (!vivarium_name_validate ("session", id, error))
    return NULL;
  session = g_hash_table_lookup (self->sessions, id);
  if (session == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND, "There is no session “%s”", id);
    return NULL;
  }
  if (g_strcmp0 (vd_session_get_state (session), "running") != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The session %s is %s, not running",
                 id, vd_session_get_state (session));
    return NULL;
  }
  return session;
}

/* Long work that is not a session or a task (the self-test) keeps the
 * daemon on the bus while it runs. */
void
vd_manager_hold (VdManager *self)
{
  vd_daemon_hold (self->daemon);
}

void
vd_manager_release (VdManager *self)
{
  vd_daemon_release (self->daemon);
}

VdGuard *
vd_manager_get_guard (VdManager *self)
{
  return self->guard;
}

VdSystemd *
vd_manager_get_systemd (VdManager *self)
{
  return self->systemd;
}

static guint
count_active_sessions (VdManager *self)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    n += vd_session_is_active (value) ? 1 : 0;
  return n;
}

static gboolean
handle_start_session (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *project,
                      const gchar *image_name, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdSessionOptions opts = { 0 };
  VdImage *image;
  g_autoptr(VdSession) session = NULL;
  GError *error = NULL;

  if (!parse_session_options (self, options, &opts, &error) || !check_project (self, project, &error) ||
      (image = lookup_bootable_image (self, image_name, &error)) == NULL ||
      !vd_guard_check_can_start (self->guard, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (count_active_sessions (self) >= vd_config_get_max_sessions (self->config)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "%u sessions are running, the configured maximum",
                                           vd_config_get_max_sessions (self->config));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  session = create_session (self, image, &opts, 0, &error);
  if (session == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_session_start_async (session, NULL, session_started_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- start-up sweep -------------------------------------------------- */

static void
sweep_units (VdManager *self, const gchar *pattern)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) units = vd_systemd_list_units (self->systemd, pattern, &error);

  if (units == NULL) {
    g_info ("cannot list %s units (no systemd?): %s", pattern, error->message);
    return;
  }
  for (guint i = 0; units[i] != NULL; i++) {
    g_autoptr(GError) stop_error = NULL;
    g_warning ("sweep: stopping leftover unit %s", units[i]);
    if (!vd_systemd_stop_unit_sync (self->systemd, units[i], 30000, &stop_error))
      g_warning ("sweep: cannot stop %s: %s", units[i], stop_error->message);
  }
}

static void
sweep_dir (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(GError) error = NULL;
    g_warning ("sweep: removing leftover %s", path);
    if (!vd_fs_rm_rf (path, &error))
      g_warning ("sweep: %s", error->message);
  }
}

/* A daemon that crashed, or was killed, leaves units (already stopped by
 * BindsTo= in the normal case), overlays and sockets behind. Nothing of a
 * previous instance can still be in use, so everything of it goes. */
static void
sweep_leftovers (VdManager *self)
{
  g_autofree gchar *state_sessions = vd_config_build_state_path (self->config, "sessions", NULL);
  g_autofree gchar *staging = vd_config_build_state_path (self->config, "images", ".staging", NULL);
  g_autofree gchar *runtime_sessions = g_build_filename (vd_config_get_runtime_dir (self->config), "sessions", NULL);

  sweep_units (self, VIVARIUM_SESSION_UNIT_PREFIX "*.service");
  sweep_units (self, "vivarium-build-*.service");
  sweep_dir (state_sessions);
  sweep_dir (runtime_sessions);
  sweep_dir (staging);
  vd_canary_sweep (vd_config_get_runtime_dir (self->config));
  vd_dns_relay_sweep (vd_config_get_runtime_dir (self->config));
}

/* --- life cycle ------------------------------------------------------ */

VdManager *
vd_manager_new (VdDaemon *daemon, VdConfig *config, VdAuthority *authority, GDBusConnection *connection)
{
  VdManager *self = g_object_new (VD_TYPE_MANAGER, NULL);

  self->daemon = daemon;
  self->config = g_object_ref (config);
  self->authority = g_object_ref (authority);
  self->connection = g_object_ref (connection);
  self->exported = vd_exported_new (authority, connection);
  self->systemd = vd_systemd_new (connection);
  self->guard = vd_guard_new (config, self->systemd);
  self->dns_relay = vd_dns_relay_new (config);
  return self;
}

static void
connect_handlers (VdManager *self)
{
  VivariumDBusManager *s = self->skeleton;

  g_signal_connect (s, "handle-list-sessions", G_CALLBACK (handle_list_sessions), self);
  g_signal_connect (s, "handle-list-images", G_CALLBACK (handle_list_images), self);
  g_signal_connect (s, "handle-list-projects", G_CALLBACK (handle_list_projects), self);
  g_signal_connect (s, "handle-list-recipes", G_CALLBACK (handle_list_recipes), self);
  g_signal_connect (s, "handle-build-image", G_CALLBACK (handle_build_image), self);
  g_signal_connect (s, "handle-import-image", G_CALLBACK (handle_import_image), self);
  g_signal_connect (s, "handle-start-session", G_CALLBACK (handle_start_session), self);
}

gboolean
vd_manager_start (VdManager *self, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!vd_systemd_subscribe (self->systemd, &local_error)) {
    g_info ("systemd is not reachable; sessions and builds will fail: %s", local_error->message);
    g_clear_error (&local_error);
  }
  sweep_leftovers (self);
  /* Before the guard: its deny list takes in the host's own addresses,
   * and the relay's end of the veth must be one of them. Without the
   * relay guests only lose DNS, so the daemon carries on. */
  if (!vd_dns_relay_start (self->dns_relay, &local_error)) {
    g_warning ("%s; guests may have no DNS", local_error->message);
    g_clear_error (&local_error);
  }
  vd_guard_start (self->guard);
  vd_guard_enable_self_test (self->guard, self);
  self->skeleton = vivarium_dbus_manager_skeleton_new ();
  vivarium_dbus_manager_set_version (self->skeleton, PACKAGE_VERSION);
  vivarium_dbus_manager_set_state (self->skeleton, "running");
  vivarium_dbus_manager_set_accelerator (self->skeleton, vd_config_use_kvm (self->config) ? "kvm" : "tcg");
  connect_handlers (self);
  if (!export_protected (self, G_DBUS_INTERFACE_SKELETON (self->skeleton), VIVARIUM_DBUS_PATH, error) ||
      !export_protected (self, vd_guard_get_skeleton (self->guard), VIVARIUM_DBUS_PATH, error))
    return FALSE;
  load_images (self);
  return TRUE;
}

/* SIGTERM or idle exit: sessions are torn down here, synchronously, so
 * that the next instance finds nothing to sweep. */
void
vd_manager_shutdown (VdManager *self)
{
  GHashTableIter iter;
  gpointer value;

  vivarium_dbus_manager_set_state (self->skeleton, "stopping");
  g_hash_table_iter_init (&iter, self->sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    vd_session_stop_sync (VD_SESSION (value));
  vd_dns_relay_stop (self->dns_relay);
}
