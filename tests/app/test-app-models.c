/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The app's models against a scripted peer on a private bus (GTestDBus):
 * the peer owns org.vivarium.Vivarium1 and exports the generated skeletons
 * with data recorded from a real daemon, then adds, changes and removes
 * objects the way vivariumd does. Every wait is a bounded loop on a
 * condition, never a timer. */
#include "config.h"

#include <gio/gio.h>

#include "vivarium-client.h"
#include "vivarium-dbus-generated.h"
#include "vivarium-egress-model.h"
#include "vivarium-proxy-list.h"
#include "vivarium-selftest-result.h"

#define MAX_ITERATIONS 100000

typedef struct {
  GTestDBus           *bus;
  GDBusConnection     *peer;
  GDBusConnection     *client;
  VivariumDBusManager *manager_skel;
  GHashTable          *sessions;  /* path → VivariumDBusSession skeleton */
  GHashTable          *images;    /* path → VivariumDBusImage skeleton */
  guint                owner_id;
  GPtrArray           *egress;    /* the peer's egress log: a{sv} entries, oldest first */
  GArray              *egress_asked;  /* the offsets GetEgressLog was asked for */
  gboolean             egress_stuck;  /* answer "next" = offset, whatever was sent */
  gboolean             egress_refuse; /* answer NotAuthorized */
  guint                changes;   /* items-changed seen */
  guint                last_pos, last_removed, last_added;
} Fixture;

/* Recorded from `vivariumctl status` / busctl introspection of a real
 * session of `tiny` (ids shortened). */
static const struct {
  const char *id, *state, *image, *digest;
  guint32 uid;
} recorded_sessions[] = {
  { "b3c1", "running", "tiny", "sha256:5b1d0f9f6c4c1e8c8a0a1e1c3b2f6a1d9e0c4b7a2f3e5d6c7b8a9f0e1d2c3b4a", 2147000001 },
  { "a9f2", "running", "tiny", "sha256:5b1d0f9f6c4c1e8c8a0a1e1c3b2f6a1d9e0c4b7a2f3e5d6c7b8a9f0e1d2c3b4a", 2147000000 },
};

static void
spin_until (gboolean (*done) (Fixture *), Fixture *f)
{
  for (guint i = 0; i < MAX_ITERATIONS && !done (f); i++)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (done (f));
}

static char *
session_path (const char *id)
{
  g_autofree char *escaped = g_dbus_escape_object_path (id);

  return g_strconcat ("/org/vivarium/Vivarium1/sessions/", escaped, NULL);
}

/* Session.GetEgressLog as vivariumd answers it (service/vd-egress-log.c):
 * entries from @offset, at most @limit (1–1000), next and total. */
static gboolean
handle_get_egress_log (VivariumDBusSession *skel, GDBusMethodInvocation *invocation, guint64 offset, guint limit,
                       gpointer user_data)
{
  Fixture *f = user_data;
  g_auto(GVariantBuilder) builder = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("aa{sv}"));
  guint64 total = f->egress->len;
  guint64 end;

  g_array_append_val (f->egress_asked, offset);
  if (f->egress_refuse) {
    g_dbus_method_invocation_return_dbus_error (invocation, "org.vivarium.Vivarium1.Error.NotAuthorized",
                                                "org.vivarium.vivarium1.read-reports is not allowed");
    return TRUE;
  }
  if (limit < 1 || limit > 1000) {
    g_dbus_method_invocation_return_dbus_error (invocation, "org.vivarium.Vivarium1.Error.InvalidArgument",
                                                "The limit must be 1 to 1000.");
    return TRUE;
  }
  end = MIN (total, offset + limit);
  for (guint64 i = offset; i < end; i++)
    g_variant_builder_add_value (&builder, g_ptr_array_index (f->egress, i));
  vivarium_dbus_session_complete_get_egress_log (skel, invocation, g_variant_builder_end (&builder),
                                                 f->egress_stuck ? offset : end, total);
  return TRUE;
}

static void
peer_add_session (Fixture *f, const char *id, const char *state, const char *image, const char *digest, guint32 uid)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = session_path (id);
  VivariumDBusSession *skel = vivarium_dbus_session_skeleton_new ();

  vivarium_dbus_session_set_id (skel, id);
  vivarium_dbus_session_set_state (skel, state);
  vivarium_dbus_session_set_image (skel, image);
  vivarium_dbus_session_set_image_digest (skel, digest);
  vivarium_dbus_session_set_uid (skel, uid);
  vivarium_dbus_session_set_accelerator (skel, "tcg");
  g_signal_connect (skel, "handle-get-egress-log", G_CALLBACK (handle_get_egress_log), f);
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (skel), f->peer, path, &error));
  g_assert_no_error (error);
  g_hash_table_insert (f->sessions, g_steal_pointer (&path), skel);
}

static void
peer_remove_session (Fixture *f, const char *id)
{
  g_autofree char *path = session_path (id);
  VivariumDBusSession *skel = g_hash_table_lookup (f->sessions, path);

  g_assert_nonnull (skel);
  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (skel));
  g_hash_table_remove (f->sessions, path);
}

static gboolean
handle_list_sessions (VivariumDBusManager *skel, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Fixture *f = user_data;
  g_autofree const char **paths = (const char **) g_hash_table_get_keys_as_array (f->sessions, NULL);

  vivarium_dbus_manager_complete_list_sessions (skel, invocation, paths);
  return TRUE;
}

static gboolean
handle_list_images (VivariumDBusManager *skel, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Fixture *f = user_data;
  g_autofree const char **paths = (const char **) g_hash_table_get_keys_as_array (f->images, NULL);

  vivarium_dbus_manager_complete_list_images (skel, invocation, paths);
  return TRUE;
}

/* ListTasks, ListProjects and ListReports: the tests below announce theirs. */
static gboolean
handle_list_none (VivariumDBusManager *skel, GDBusMethodInvocation *invocation, gpointer user_data)
{
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(ao)", NULL));
  return TRUE;
}

static void
name_acquired_cb (GDBusConnection *connection, const char *name, gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
}

static gboolean owned;

static gboolean
is_owned (Fixture *f)
{
  return owned;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  const char *address;
  guint owner_id;

  f->bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (f->bus);
  address = g_test_dbus_get_bus_address (f->bus);
  f->peer = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                    G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL, &error);
  g_assert_no_error (error);
  f->client = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                      G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL, &error);
  g_assert_no_error (error);
  f->sessions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  f->images = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  f->egress = g_ptr_array_new_with_free_func ((GDestroyNotify) g_variant_unref);
  f->egress_asked = g_array_new (FALSE, FALSE, sizeof (guint64));
  f->manager_skel = vivarium_dbus_manager_skeleton_new ();
  g_signal_connect (f->manager_skel, "handle-list-sessions", G_CALLBACK (handle_list_sessions), f);
  g_signal_connect (f->manager_skel, "handle-list-images", G_CALLBACK (handle_list_images), f);
  g_signal_connect (f->manager_skel, "handle-list-tasks", G_CALLBACK (handle_list_none), f);
  g_signal_connect (f->manager_skel, "handle-list-projects", G_CALLBACK (handle_list_none), f);
  g_signal_connect (f->manager_skel, "handle-list-reports", G_CALLBACK (handle_list_none), f);
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (f->manager_skel), f->peer,
                                                   VIVARIUM_MANAGER_PATH, &error));
  for (gsize i = 0; i < G_N_ELEMENTS (recorded_sessions); i++)
    peer_add_session (f, recorded_sessions[i].id, recorded_sessions[i].state, recorded_sessions[i].image,
                      recorded_sessions[i].digest, recorded_sessions[i].uid);
  owned = FALSE;
  owner_id = g_bus_own_name_on_connection (f->peer, VIVARIUM_BUS_NAME, G_BUS_NAME_OWNER_FLAGS_NONE,
                                           name_acquired_cb, NULL, &owned, NULL);
  spin_until (is_owned, f);
  f->owner_id = owner_id;
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_bus_unown_name (f->owner_id);
  g_hash_table_unref (f->sessions);
  g_hash_table_unref (f->images);
  g_ptr_array_unref (f->egress);
  g_array_unref (f->egress_asked);
  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (f->manager_skel));
  g_object_unref (f->manager_skel);
  g_dbus_connection_close_sync (f->client, NULL, NULL);
  g_dbus_connection_close_sync (f->peer, NULL, NULL);
  g_object_unref (f->client);
  g_object_unref (f->peer);
  g_test_dbus_down (f->bus);
  g_object_unref (f->bus);
}

static void
items_changed_cb (GListModel *model, guint pos, guint removed, guint added, gpointer user_data)
{
  Fixture *f = user_data;

  f->changes++;
  f->last_pos = pos;
  f->last_removed = removed;
  f->last_added = added;
}

static void
manager_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  *(VivariumDBusManager **) user_data = vivarium_dbus_manager_proxy_new_finish (res, &error);
  g_assert_no_error (error);
}

static VivariumDBusManager *pending_manager;

static gboolean
manager_ready (Fixture *f)
{
  return pending_manager != NULL;
}

/* Async: the peer answers GetAll from this same main loop. */
static VivariumDBusManager *
client_manager (Fixture *f)
{
  pending_manager = NULL;
  vivarium_dbus_manager_proxy_new (f->client, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START, VIVARIUM_BUS_NAME,
                                   VIVARIUM_MANAGER_PATH, NULL, manager_ready_cb, &pending_manager);
  spin_until (manager_ready, f);
  return g_steal_pointer (&pending_manager);
}

static VivariumProxyList *current;
static guint wanted;

static gboolean
has_wanted (Fixture *f)
{
  return vivarium_proxy_list_is_loaded (current) && g_list_model_get_n_items (G_LIST_MODEL (current)) == wanted;
}

static void
wait_for_items (Fixture *f, VivariumProxyList *list, guint n)
{
  current = list;
  wanted = n;
  spin_until (has_wanted, f);
}

static const char *
session_id_at (VivariumProxyList *list, guint pos)
{
  g_autoptr(VivariumDBusSession) session = g_list_model_get_item (G_LIST_MODEL (list), pos);
  static char buf[64];

  g_strlcpy (buf, vivarium_dbus_session_get_id (session), sizeof buf);
  return buf;
}

/* ListSessions fills the model, sorted by object path, with each proxy's
 * properties as recorded. */
static void
test_sessions_initial (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_SESSIONS);
  g_autoptr(VivariumDBusSession) first = NULL;

  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 0);
  wait_for_items (f, list, 2);
  g_assert_true (g_list_model_get_item_type (G_LIST_MODEL (list)) == VIVARIUM_DBUS_TYPE_SESSION_PROXY);
  g_assert_cmpstr (session_id_at (list, 0), ==, "a9f2");
  g_assert_cmpstr (session_id_at (list, 1), ==, "b3c1");
  first = g_list_model_get_item (G_LIST_MODEL (list), 0);
  g_assert_cmpstr (vivarium_dbus_session_get_state (first), ==, "running");
  g_assert_cmpuint (vivarium_dbus_session_get_uid (first), ==, 2147000000);
  g_assert_null (g_list_model_get_item (G_LIST_MODEL (list), 2));
  g_assert_no_error (vivarium_proxy_list_get_error (list));
}

static gboolean
state_is_paused (Fixture *f)
{
  g_autoptr(VivariumDBusSession) s = g_list_model_get_item (G_LIST_MODEL (current), 0);

  return s != NULL && g_strcmp0 (vivarium_dbus_session_get_state (s), "paused") == 0 && f->changes > 0;
}

/* SessionAdded, PropertiesChanged and SessionRemoved, as the daemon sends
 * them: one row inserted in order, one row changed in place, one removed. */
static void
test_sessions_signals (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_SESSIONS);
  g_autofree char *added = session_path ("a0");
  g_autofree char *removed = session_path ("b3c1");
  g_autofree char *first = session_path ("a0");
  VivariumDBusSession *skel;

  wait_for_items (f, list, 2);
  g_signal_connect (list, "items-changed", G_CALLBACK (items_changed_cb), f);

  peer_add_session (f, "a0", "starting", "tiny", "", 2147000002);
  vivarium_dbus_manager_emit_session_added (f->manager_skel, added);
  wait_for_items (f, list, 3);
  g_assert_cmpstr (session_id_at (list, 0), ==, "a0");
  g_assert_cmpuint (f->last_pos, ==, 0);
  g_assert_cmpuint (f->last_added, ==, 1);
  g_assert_cmpuint (f->last_removed, ==, 0);

  /* A second announcement of a known object changes nothing. */
  f->changes = 0;
  vivarium_dbus_manager_emit_session_added (f->manager_skel, added);

  skel = g_hash_table_lookup (f->sessions, first);
  vivarium_dbus_session_set_state (skel, "paused");
  vivarium_dbus_session_set_state_reason (skel, "the disk ran out of space (No space left on device)");
  current = list;
  spin_until (state_is_paused, f);
  g_assert_cmpuint (f->last_pos, ==, 0);
  g_assert_cmpuint (f->last_removed, ==, 1);
  g_assert_cmpuint (f->last_added, ==, 1);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 3);

  peer_remove_session (f, "b3c1");
  vivarium_dbus_manager_emit_session_removed (f->manager_skel, removed);
  wait_for_items (f, list, 2);
  g_assert_cmpstr (session_id_at (list, 0), ==, "a0");
  g_assert_cmpstr (session_id_at (list, 1), ==, "a9f2");
  g_assert_null (vivarium_proxy_list_lookup (list, removed));
  g_assert_nonnull (vivarium_proxy_list_lookup (list, added));
}

static gboolean
is_loaded (Fixture *f)
{
  return vivarium_proxy_list_is_loaded (current);
}

/* A session removed before the model could read it never shows up. */
static void
test_sessions_removed_while_fetching (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_SESSIONS);
  g_autofree char *path = session_path ("c7");
  g_autofree char *marker = session_path ("d8");

  wait_for_items (f, list, 2);
  peer_add_session (f, "c7", "starting", "tiny", "", 2147000003);
  vivarium_dbus_manager_emit_session_added (f->manager_skel, path);
  vivarium_dbus_manager_emit_session_removed (f->manager_skel, path);
  peer_remove_session (f, "c7");
  /* Signals arrive in order: once d8 is in, c7's pair was handled. */
  peer_add_session (f, "d8", "running", "tiny", "", 2147000004);
  vivarium_dbus_manager_emit_session_added (f->manager_skel, marker);
  wait_for_items (f, list, 3);
  g_assert_null (vivarium_proxy_list_lookup (list, path));
  g_assert_nonnull (vivarium_proxy_list_lookup (list, marker));
}

/* A refused ListSessions (the daemon's NotAuthorized) leaves an empty,
 * loaded model that says why. */
static gboolean
handle_list_refused (VivariumDBusManager *skel, GDBusMethodInvocation *invocation, gpointer user_data)
{
  g_dbus_method_invocation_return_dbus_error (invocation, "org.vivarium.Vivarium1.Error.NotAuthorized",
                                              "org.vivarium.vivarium1.read-status is not allowed");
  return TRUE;
}

static void
test_sessions_refused (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = NULL;
  g_autofree char *remote = NULL;

  g_signal_handlers_disconnect_by_func (f->manager_skel, handle_list_sessions, f);
  g_signal_connect (f->manager_skel, "handle-list-sessions", G_CALLBACK (handle_list_refused), f);
  list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_SESSIONS);
  current = list;
  spin_until (is_loaded, f);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (list)), ==, 0);
  g_assert_nonnull (vivarium_proxy_list_get_error (list));
  remote = g_dbus_error_get_remote_error (vivarium_proxy_list_get_error (list));
  g_assert_cmpstr (remote, ==, "org.vivarium.Vivarium1.Error.NotAuthorized");
}

/* Images: the same model, with ImageAdded/ImageRemoved. */
static void
test_images (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = NULL;
  g_autoptr(VivariumDBusImage) item = NULL;
  const char *path = "/org/vivarium/Vivarium1/images/tiny";
  VivariumDBusImage *skel = vivarium_dbus_image_skeleton_new ();

  vivarium_dbus_image_set_name (skel, "tiny");
  vivarium_dbus_image_set_frozen (skel, TRUE);
  vivarium_dbus_image_set_size (skel, 41943040);
  vivarium_dbus_image_set_recipe (skel, "tiny");
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (skel), f->peer, path, &error));
  g_hash_table_insert (f->images, g_strdup (path), skel);

  list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_IMAGES);
  wait_for_items (f, list, 1);
  item = g_list_model_get_item (G_LIST_MODEL (list), 0);
  g_assert_true (VIVARIUM_DBUS_IS_IMAGE_PROXY (item));
  g_assert_true (vivarium_dbus_image_get_frozen (item));
  g_assert_cmpuint (vivarium_dbus_image_get_size (item), ==, 41943040);

  /* A session signal is not an image signal. */
  vivarium_dbus_manager_emit_session_removed (f->manager_skel, path);
  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (skel));
  vivarium_dbus_manager_emit_image_removed (f->manager_skel, path);
  wait_for_items (f, list, 0);
}

static gboolean
task_needs_input (Fixture *f)
{
  g_autoptr(VivariumDBusTask) t = g_list_model_get_item (G_LIST_MODEL (current), 0);

  return t != NULL && g_strcmp0 (vivarium_dbus_task_get_outcome (t), "NEEDS_INPUT") == 0 && f->changes > 0;
}

static void
object_removed_cb (VivariumProxyList *list, const char *path, gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup (path));
}

/* Tasks: TaskAdded adds the row, PropertiesChanged (the worker asked)
 * changes it in place; another kind's Removed for the same path removes
 * nothing, TaskRemoved (the daemon pruned it) removes it and says so
 * ("object-removed", which a filtered view's items-changed cannot).
 * Recorded from a real task of tests/system/test-tasks.sh (ids shortened). */
static void
test_tasks (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) list = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_TASKS);
  g_autoptr(VivariumDBusTask) item = NULL;
  g_autoptr(VivariumDBusTask) skel = vivarium_dbus_task_skeleton_new ();
  const char *path = "/org/vivarium/Vivarium1/tasks/t5e1";

  wait_for_items (f, list, 0);
  g_assert_no_error (vivarium_proxy_list_get_error (list));
  vivarium_dbus_task_set_id (skel, "t5e1");
  vivarium_dbus_task_set_project (skel, "demo");
  vivarium_dbus_task_set_image (skel, "tiny");
  vivarium_dbus_task_set_worker (skel, "script");
  vivarium_dbus_task_set_outcome (skel, "IN_PROGRESS");
  vivarium_dbus_task_set_step (skel, "work");
  vivarium_dbus_task_set_session (skel, "/org/vivarium/Vivarium1/sessions/a9f2");
  vivarium_dbus_task_set_report (skel, "/");
  vivarium_dbus_task_set_submitted_at (skel, 1796112000000000);
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (skel), f->peer, path, &error));
  g_assert_no_error (error);
  vivarium_dbus_manager_emit_task_added (f->manager_skel, path);
  wait_for_items (f, list, 1);
  item = g_list_model_get_item (G_LIST_MODEL (list), 0);
  g_assert_true (VIVARIUM_DBUS_IS_TASK_PROXY (item));
  g_assert_cmpstr (vivarium_dbus_task_get_outcome (item), ==, "IN_PROGRESS");
  g_assert_cmpstr (vivarium_dbus_task_get_project (item), ==, "demo");

  g_signal_connect (list, "items-changed", G_CALLBACK (items_changed_cb), f);
  f->changes = 0;
  vivarium_dbus_task_set_question (skel, "Which colour?");
  vivarium_dbus_task_set_outcome (skel, "NEEDS_INPUT");
  current = list;
  spin_until (task_needs_input, f);
  g_assert_cmpuint (f->last_pos, ==, 0);
  g_assert_cmpuint (f->last_removed, ==, 1);
  g_assert_cmpuint (f->last_added, ==, 1);
  g_assert_cmpstr (vivarium_dbus_task_get_question (item), ==, "Which colour?");

  vivarium_dbus_manager_emit_session_removed (f->manager_skel, path);
  vivarium_dbus_manager_emit_project_removed (f->manager_skel, path);
  /* Signals arrive in order: once a second task is in, those were handled. */
  {
    g_autoptr(VivariumDBusTask) second = vivarium_dbus_task_skeleton_new ();
    const char *second_path = "/org/vivarium/Vivarium1/tasks/t6a0";

    vivarium_dbus_task_set_id (second, "t6a0");
    vivarium_dbus_task_set_outcome (second, "DONE");
    g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (second), f->peer, second_path, &error));
    vivarium_dbus_manager_emit_task_added (f->manager_skel, second_path);
    wait_for_items (f, list, 2);
    g_assert_nonnull (vivarium_proxy_list_lookup (list, path));
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (second));
  }
  {
    g_autoptr(GPtrArray) removed = g_ptr_array_new_with_free_func (g_free);

    g_signal_connect (list, "object-removed", G_CALLBACK (object_removed_cb), removed);
    g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (skel));
    vivarium_dbus_manager_emit_task_removed (f->manager_skel, path);
    wait_for_items (f, list, 1);
    g_assert_null (vivarium_proxy_list_lookup (list, path));
    g_assert_nonnull (vivarium_proxy_list_lookup (list, "/org/vivarium/Vivarium1/tasks/t6a0"));
    g_assert_cmpuint (removed->len, ==, 1);
    g_assert_cmpstr (g_ptr_array_index (removed, 0), ==, path);
    g_signal_handlers_disconnect_by_data (list, removed);
  }
}

/* Projects come and go with ProjectAdded / ProjectRemoved; reports with
 * ReportAdded / ReportRemoved, each a proxy of its own interface. */
static void
test_projects_and_reports (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = client_manager (f);
  g_autoptr(VivariumProxyList) projects = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_PROJECTS);
  g_autoptr(VivariumProxyList) reports = vivarium_proxy_list_new (G_DBUS_PROXY (manager), VIVARIUM_PROXY_LIST_REPORTS);
  g_autoptr(VivariumDBusProject) project = vivarium_dbus_project_skeleton_new ();
  g_autoptr(VivariumDBusReport) report = vivarium_dbus_report_skeleton_new ();
  g_autoptr(VivariumDBusProject) project_item = NULL;
  g_autoptr(VivariumDBusReport) report_item = NULL;
  const char *project_path = "/org/vivarium/Vivarium1/projects/demo";
  const char *report_path = "/org/vivarium/Vivarium1/reports/r5e1";

  wait_for_items (f, projects, 0);
  wait_for_items (f, reports, 0);
  vivarium_dbus_project_set_name (project, "demo");
  vivarium_dbus_project_set_quota_bytes (project, 268435456);
  vivarium_dbus_project_set_used_bytes (project, 16384);
  vivarium_dbus_project_set_head (project, "9c1e0d3b5a7f2e4c6b8a0d1f3e5c7a9b1d3f5e7c");
  vivarium_dbus_project_set_last_task (project, "/");
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (project), f->peer, project_path, &error));
  vivarium_dbus_report_set_id (report, "r5e1");
  vivarium_dbus_report_set_task (report, "/org/vivarium/Vivarium1/tasks/t5e1");
  vivarium_dbus_report_set_project (report, "demo");
  vivarium_dbus_report_set_outcome (report, "DONE");
  g_assert_true (g_dbus_interface_skeleton_export (G_DBUS_INTERFACE_SKELETON (report), f->peer, report_path, &error));
  g_assert_no_error (error);

  vivarium_dbus_manager_emit_project_added (f->manager_skel, project_path);
  vivarium_dbus_manager_emit_report_added (f->manager_skel, report_path);
  wait_for_items (f, projects, 1);
  wait_for_items (f, reports, 1);
  project_item = g_list_model_get_item (G_LIST_MODEL (projects), 0);
  report_item = g_list_model_get_item (G_LIST_MODEL (reports), 0);
  g_assert_true (VIVARIUM_DBUS_IS_PROJECT_PROXY (project_item));
  g_assert_cmpuint (vivarium_dbus_project_get_quota_bytes (project_item), ==, 268435456);
  g_assert_true (VIVARIUM_DBUS_IS_REPORT_PROXY (report_item));
  g_assert_cmpstr (vivarium_dbus_report_get_outcome (report_item), ==, "DONE");

  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (project));
  vivarium_dbus_manager_emit_project_removed (f->manager_skel, project_path);
  wait_for_items (f, projects, 0);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (reports)), ==, 1);
  g_dbus_interface_skeleton_unexport (G_DBUS_INTERFACE_SKELETON (report));
  vivarium_dbus_manager_emit_report_removed (f->manager_skel, report_path);
  wait_for_items (f, reports, 0);
}

/* The error sentences the toasts show: ours first, then the daemon's. */
static void
test_describe_error (void)
{
  g_autoptr(GError) refused = g_dbus_error_new_for_dbus_error ("org.vivarium.Vivarium1.Error.NotAuthorized",
                                                               "polkit refused org.vivarium.vivarium1.session-stop");
  g_autoptr(GError) other = g_dbus_error_new_for_dbus_error ("org.example.Weird", "something odd");
  g_autoptr(GError) local = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "plain");
  g_autofree char *a = vivarium_client_describe_error (refused);
  g_autofree char *b = vivarium_client_describe_error (other);
  g_autofree char *c = vivarium_client_describe_error (local);

  g_assert_cmpstr (a, ==, "You are not allowed to do this. polkit refused org.vivarium.vivarium1.session-stop");
  g_assert_cmpstr (b, ==, "something odd");
  g_assert_cmpstr (c, ==, "plain");
}

/* A result as the daemon writes it (trimmed to two probes × two configurations). */
static const char recorded_result[] =
  "{\"schema\":\"https://vivarium.org/schemas/selftest-result-1.json\",\"verdict\":\"fail\","
  "\"started-at\":\"2026-11-30T10:00:00Z\",\"finished-at\":\"2026-11-30T10:01:10Z\",\"image\":\"tiny\","
  "\"image-digest\":null,\"configurations\":[\"both\",\"layer1-only\"],\"host-checks\":[],"
  "\"probes\":["
  "{\"probe\":\"private-10\",\"configuration\":\"both\",\"transport\":\"tcp\",\"address\":\"10.255.255.254\","
  "\"expected\":\"blocked\",\"observed\":\"blocked\",\"outcome\":\"pass\",\"pass\":true,\"evidence\":{\"canary-seen\":0}},"
  "{\"probe\":\"private-10\",\"configuration\":\"layer1-only\",\"transport\":\"tcp\",\"address\":\"10.255.255.254\","
  "\"expected\":\"blocked\",\"observed\":\"reached\",\"outcome\":\"fail\",\"pass\":false,\"evidence\":{\"canary-seen\":1}},"
  "{\"probe\":\"positive-control\",\"configuration\":\"both\",\"transport\":\"udp\",\"address\":\"198.51.100.1\","
  "\"expected\":\"reached\",\"observed\":\"blocked\",\"outcome\":\"inconclusive\",\"pass\":false,\"evidence\":{}},"
  "{\"probe\":\"odd\",\"configuration\":\"neither\",\"transport\":7}"
  "]}";

static void
test_selftest_result (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumSelftestResult) r = vivarium_selftest_result_parse (recorded_result, &error);
  const VivariumSelftestCell *cell;

  g_assert_no_error (error);
  g_assert_cmpstr (vivarium_selftest_result_verdict (r), ==, "fail");
  g_assert_cmpstr (vivarium_selftest_result_finished (r), ==, "2026-11-30T10:01:10Z");
  /* The configurations listed, then one only a probe names. */
  g_assert_cmpuint (vivarium_selftest_result_n_columns (r), ==, 3);
  g_assert_cmpstr (vivarium_selftest_result_column (r, 0), ==, "both");
  g_assert_cmpstr (vivarium_selftest_result_column (r, 2), ==, "neither");
  g_assert_cmpuint (vivarium_selftest_result_n_rows (r), ==, 3);
  g_assert_cmpstr (vivarium_selftest_result_row (r, 0), ==, "private-10 (tcp)");
  g_assert_cmpstr (vivarium_selftest_result_row (r, 2), ==, "odd ()");
  cell = vivarium_selftest_result_cell (r, 0, 1);
  g_assert_nonnull (cell);
  g_assert_cmpstr (cell->outcome, ==, "fail");
  g_assert_nonnull (strstr (cell->evidence, "\"canary-seen\" : 1"));
  g_assert_null (vivarium_selftest_result_cell (r, 1, 1));
  g_assert_cmpuint (vivarium_selftest_result_count (r, "pass"), ==, 1);
  g_assert_cmpuint (vivarium_selftest_result_count (r, "fail"), ==, 1);
  g_assert_cmpuint (vivarium_selftest_result_count (r, "inconclusive"), ==, 1);
}

/* Shown failing rows first, then inconclusive, then passing, each group in
 * the result's order (a row fails if any of its cells does),
 * each row named by its probe and transport. */
static void
test_selftest_row_order (void)
{
  static const char three_kinds[] =
    "{\"verdict\":\"fail\",\"configurations\":[\"both\",\"layer1-only\"],\"probes\":["
    "{\"probe\":\"a-pass\",\"configuration\":\"both\",\"transport\":\"tcp\",\"outcome\":\"pass\",\"evidence\":{}},"
    "{\"probe\":\"b-unsure\",\"configuration\":\"both\",\"transport\":\"tcp\",\"outcome\":\"inconclusive\",\"evidence\":{}},"
    "{\"probe\":\"c-fail\",\"configuration\":\"both\",\"transport\":\"tcp\",\"outcome\":\"pass\",\"evidence\":{}},"
    "{\"probe\":\"c-fail\",\"configuration\":\"layer1-only\",\"transport\":\"tcp\",\"outcome\":\"fail\",\"evidence\":{}},"
    "{\"probe\":\"d-pass\",\"configuration\":\"layer1-only\",\"transport\":\"udp\",\"outcome\":\"pass\",\"evidence\":{}},"
    "{\"probe\":\"e-fail\",\"configuration\":\"both\",\"transport\":\"udp\",\"outcome\":\"fail\",\"evidence\":{}}"
    "]}";
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumSelftestResult) r = vivarium_selftest_result_parse (three_kinds, &error);
  g_autoptr(GArray) order = NULL;
  const char *expected[] = { "c-fail (tcp)", "e-fail (udp)", "b-unsure (tcp)", "a-pass (tcp)", "d-pass (udp)" };

  g_assert_no_error (error);
  order = vivarium_selftest_result_row_order (r);
  g_assert_cmpuint (order->len, ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < order->len; i++)
    g_assert_cmpstr (vivarium_selftest_result_row (r, g_array_index (order, guint, i)), ==, expected[i]);
}

/* The daemon's configuration allowlist (trimmed from a real run): its
 * column follows the others, its proxy-* rows exist in it alone, and a
 * direct positive control is expected blocked there. */
static const char recorded_allowlist_result[] =
  "{\"schema\":\"https://vivarium.org/schemas/selftest-result-1.json\",\"verdict\":\"pass\","
  "\"finished-at\":\"2026-12-02T00:59:41Z\",\"configurations\":[\"both\",\"allowlist\"],"
  "\"probes\":["
  "{\"probe\":\"positive-control\",\"configuration\":\"both\",\"transport\":\"tcp\",\"address\":\"198.51.100.1\","
  "\"expected\":\"reached\",\"observed\":\"reached\",\"outcome\":\"pass\",\"pass\":true,\"evidence\":{\"canary-seen\":1}},"
  "{\"probe\":\"proxy-allowed\",\"configuration\":\"allowlist\",\"transport\":\"tcp\",\"address\":\"198.51.100.1:37141\","
  "\"expected\":\"reached\",\"observed\":\"reached\",\"outcome\":\"pass\",\"pass\":true,"
  "\"evidence\":{\"via\":\"10.0.2.100:3128\",\"canary-seen\":1,\"http-status\":200,\"egress-verdict\":\"allowed\","
  "\"egress-reason\":\"allowed by 198.51.100.1:37141 (session)\"}},"
  "{\"probe\":\"proxy-unlisted-name\",\"configuration\":\"allowlist\",\"transport\":\"tcp\","
  "\"address\":\"unlisted.selftest.vivarium.invalid:37141\",\"expected\":\"refused\",\"observed\":\"refused\","
  "\"outcome\":\"pass\",\"pass\":true,\"evidence\":{\"http-status\":403,\"egress-verdict\":\"denied\"}},"
  "{\"probe\":\"positive-control\",\"configuration\":\"allowlist\",\"transport\":\"tcp\",\"address\":\"198.51.100.1\","
  "\"expected\":\"blocked\",\"observed\":\"blocked\",\"outcome\":\"pass\",\"pass\":true,\"evidence\":{\"canary-seen\":0}},"
  "{\"probe\":\"proxy-killed\",\"configuration\":\"allowlist\",\"transport\":\"tcp\",\"address\":\"198.51.100.1:37141\","
  "\"expected\":\"blocked\",\"observed\":\"reached\",\"outcome\":\"fail\",\"pass\":false,\"evidence\":{\"canary-seen\":1}}"
  "]}";

static void
test_selftest_result_allowlist (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumSelftestResult) r = vivarium_selftest_result_parse (recorded_allowlist_result, &error);
  const VivariumSelftestCell *cell;

  g_assert_no_error (error);
  g_assert_cmpuint (vivarium_selftest_result_n_columns (r), ==, 2);
  g_assert_cmpstr (vivarium_selftest_result_column (r, 1), ==, "allowlist");
  g_assert_cmpuint (vivarium_selftest_result_n_rows (r), ==, 4);
  g_assert_cmpstr (vivarium_selftest_result_row (r, 0), ==, "positive-control (tcp)");
  g_assert_cmpstr (vivarium_selftest_result_row (r, 1), ==, "proxy-allowed (tcp)");
  g_assert_cmpstr (vivarium_selftest_result_row (r, 3), ==, "proxy-killed (tcp)");
  /* The direct positive control: reached with both layers, blocked (and
   * passing) under allowlist; one row, two cells. */
  cell = vivarium_selftest_result_cell (r, 0, 1);
  g_assert_nonnull (cell);
  g_assert_cmpstr (cell->outcome, ==, "pass");
  g_assert_nonnull (strstr (cell->evidence, "\"expected\" : \"blocked\""));
  /* A proxy row has no cell outside its configuration. */
  g_assert_null (vivarium_selftest_result_cell (r, 1, 0));
  cell = vivarium_selftest_result_cell (r, 1, 1);
  g_assert_nonnull (cell);
  g_assert_nonnull (strstr (cell->evidence, "\"egress-verdict\" : \"allowed\""));
  cell = vivarium_selftest_result_cell (r, 2, 1);
  g_assert_nonnull (cell);
  g_assert_nonnull (strstr (cell->evidence, "\"observed\" : \"refused\""));
  cell = vivarium_selftest_result_cell (r, 3, 1);
  g_assert_nonnull (cell);
  g_assert_cmpstr (cell->outcome, ==, "fail");
  g_assert_cmpuint (vivarium_selftest_result_count (r, "pass"), ==, 4);
  g_assert_cmpuint (vivarium_selftest_result_count (r, "fail"), ==, 1);
}

static void
test_selftest_result_bad (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumSelftestResult) array = vivarium_selftest_result_parse ("[1,2]", &error);
  g_autoptr(VivariumSelftestResult) empty = NULL;

  g_assert_null (array);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_assert_null (vivarium_selftest_result_parse ("{not json", &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  empty = vivarium_selftest_result_parse ("{\"probes\":{}}", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (vivarium_selftest_result_verdict (empty), ==, "");
  g_assert_cmpuint (vivarium_selftest_result_n_rows (empty), ==, 0);
}

/* --- the egress decision log ------------------------------------------- */

/* 2026-12-02T00:21:00.123Z, docs/egress.md's example decision. */
#define DECISION_TIME_USEC G_GINT64_CONSTANT (1796170860123000)

static GVariant *
egress_entry (gint64 time, const char *host, guint16 port, const char *via, const char *verdict,
              const char *reason, guint64 up, guint64 down, guint64 duration_ms)
{
  g_auto(GVariantDict) dict = G_VARIANT_DICT_INIT (NULL);

  g_variant_dict_insert (&dict, "time", "x", time);
  g_variant_dict_insert (&dict, "host", "s", host);
  g_variant_dict_insert (&dict, "port", "q", port);
  g_variant_dict_insert (&dict, "via", "s", via);
  g_variant_dict_insert (&dict, "verdict", "s", verdict);
  g_variant_dict_insert (&dict, "reason", "s", reason);
  g_variant_dict_insert (&dict, "bytes-up", "t", up);
  g_variant_dict_insert (&dict, "bytes-down", "t", down);
  g_variant_dict_insert (&dict, "duration-ms", "t", duration_ms);
  return g_variant_ref_sink (g_variant_dict_end (&dict));
}

/* n decisions "hN.example:443", N their offset in the log. */
static void
peer_log_decisions (Fixture *f, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *host = g_strdup_printf ("h%u.example", f->egress->len);

    g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC + f->egress->len, host, 443, "tls",
                                              f->egress->len % 2 == 0 ? "allowed" : "denied",
                                              "allowed by *.example", 1, 2, 3));
  }
}

static void
session_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  *(VivariumDBusSession **) user_data = vivarium_dbus_session_proxy_new_finish (res, &error);
  g_assert_no_error (error);
}

static VivariumDBusSession *pending_session;

static gboolean
session_ready (Fixture *f)
{
  return pending_session != NULL;
}

static VivariumEgressModel *
egress_model (Fixture *f)
{
  g_autofree char *path = session_path ("a9f2");
  g_autoptr(VivariumDBusSession) session = NULL;

  pending_session = NULL;
  vivarium_dbus_session_proxy_new (f->client, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START, VIVARIUM_BUS_NAME, path,
                                   NULL, session_ready_cb, &pending_session);
  spin_until (session_ready, f);
  session = g_steal_pointer (&pending_session);
  return vivarium_egress_model_new (G_DBUS_PROXY (session));
}

static VivariumEgressModel *current_egress;

static gboolean
egress_idle (Fixture *f)
{
  return !vivarium_egress_model_get_loading (current_egress);
}

/* One refresh, to its end; returns how many GetEgressLog calls it made. */
static guint
egress_refresh (Fixture *f, VivariumEgressModel *model)
{
  guint before = f->egress_asked->len;

  vivarium_egress_model_refresh (model);
  g_assert_true (vivarium_egress_model_get_loading (model));
  current_egress = model;
  spin_until (egress_idle, f);
  return f->egress_asked->len - before;
}

static guint64
asked_at (Fixture *f, guint i)
{
  return g_array_index (f->egress_asked, guint64, i);
}

static guint64
offset_at (VivariumEgressModel *model, guint pos)
{
  g_autoptr(VivariumEgressEntry) entry = g_list_model_get_item (G_LIST_MODEL (model), pos);

  g_assert_nonnull (entry);
  return vivarium_egress_entry_get_offset (entry);
}

/* Pages of 200 from offset 0 until next = total, newest first; a second
 * refresh asks only for what is new. */
static void
test_egress_paging (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);

  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 0);
  g_assert_false (vivarium_egress_model_get_loaded (model));
  peer_log_decisions (f, 450);
  g_assert_cmpuint (egress_refresh (f, model), ==, 3);
  g_assert_cmpuint (asked_at (f, 0), ==, 0);
  g_assert_cmpuint (asked_at (f, 1), ==, 200);
  g_assert_cmpuint (asked_at (f, 2), ==, 400);
  g_assert_true (vivarium_egress_model_get_loaded (model));
  g_assert_no_error (vivarium_egress_model_get_error (model));
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 450);
  g_assert_cmpuint (vivarium_egress_model_get_total (model), ==, 450);
  g_assert_cmpuint (vivarium_egress_model_get_hidden (model), ==, 0);
  g_assert_cmpuint (offset_at (model, 0), ==, 449);
  g_assert_cmpuint (offset_at (model, 449), ==, 0);
  g_assert_true (g_list_model_get_item_type (G_LIST_MODEL (model)) == VIVARIUM_TYPE_EGRESS_ENTRY);

  peer_log_decisions (f, 10);
  g_signal_connect (model, "items-changed", G_CALLBACK (items_changed_cb), f);
  f->changes = 0;
  g_assert_cmpuint (egress_refresh (f, model), ==, 1);
  g_assert_cmpuint (asked_at (f, 3), ==, 450);
  g_assert_cmpuint (f->changes, ==, 1);
  g_assert_cmpuint (f->last_pos, ==, 0);
  g_assert_cmpuint (f->last_added, ==, 10);
  g_assert_cmpuint (f->last_removed, ==, 0);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 460);
  g_assert_cmpuint (offset_at (model, 0), ==, 459);

  /* Nothing new: one call, nothing changed. */
  f->changes = 0;
  g_assert_cmpuint (egress_refresh (f, model), ==, 1);
  g_assert_cmpuint (f->changes, ==, 0);
}

/* 2500 decisions: the model reads only the newest 1000 (it jumps, it does
 * not page through what it would drop), counts the 1500 it does not show,
 * and stays at 1000 as the log grows. */
static void
test_egress_cap (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);

  peer_log_decisions (f, 2500);
  g_assert_cmpuint (egress_refresh (f, model), ==, 6);
  g_assert_cmpuint (asked_at (f, 0), ==, 0);
  g_assert_cmpuint (asked_at (f, 1), ==, 1500);
  g_assert_cmpuint (asked_at (f, 5), ==, 2300);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, VIVARIUM_EGRESS_MODEL_MAX_KEPT);
  g_assert_cmpuint (vivarium_egress_model_get_total (model), ==, 2500);
  g_assert_cmpuint (vivarium_egress_model_get_hidden (model), ==, 1500);
  g_assert_cmpuint (offset_at (model, 0), ==, 2499);
  g_assert_cmpuint (offset_at (model, 999), ==, 1500);

  peer_log_decisions (f, 300);
  g_assert_cmpuint (egress_refresh (f, model), ==, 2);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, VIVARIUM_EGRESS_MODEL_MAX_KEPT);
  g_assert_cmpuint (vivarium_egress_model_get_hidden (model), ==, 1800);
  g_assert_cmpuint (offset_at (model, 0), ==, 2799);
  g_assert_cmpuint (offset_at (model, 999), ==, 1800);
}

static const char *
column (VivariumEgressModel *model, guint pos, const char *(*get) (VivariumEgressEntry *))
{
  g_autoptr(VivariumEgressEntry) entry = g_list_model_get_item (G_LIST_MODEL (model), pos);
  static char buf[4096];

  g_strlcpy (buf, get (entry), sizeof buf);
  return buf;
}

static gint64
time_at (VivariumEgressModel *model, guint pos)
{
  g_autoptr(VivariumEgressEntry) entry = g_list_model_get_item (G_LIST_MODEL (model), pos);

  return vivarium_egress_entry_get_time_usec (entry);
}

static VivariumEgressVerdict
verdict_at (VivariumEgressModel *model, guint pos)
{
  g_autoptr(VivariumEgressEntry) entry = g_list_model_get_item (G_LIST_MODEL (model), pos);

  return vivarium_egress_entry_get_verdict (entry);
}

/* Each column as the app shows it (TZ=UTC, LC_ALL=C: main() sets them):
 * the exact time (the row's tooltip), sizes in IEC units. */
static void
test_egress_columns (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);

  g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC, "deb.debian.org", 443, "tls", "allowed",
                                            "allowed by deb.debian.org (group debian)", 517, 40960, 812));
  g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC + 65 * G_USEC_PER_SEC, "2001:db8::1", 80, "proxy",
                                            "denied", "an IP address is allowed only by a rule that names it",
                                            0, 0, 65000));
  g_ptr_array_add (f->egress, egress_entry (0, "", 0, "dns", "something-new", "", 0, 3 * 1024 * 1024, 4200));
  egress_refresh (f, model);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 3);

  /* Newest first: the odd one, the refusal, the download. */
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_time), ==, "Wed Dec \u20072 00:21:00 2026");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_destination), ==, "deb.debian.org:443");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_via), ==, "tls");
  g_assert_cmpint (verdict_at (model, 2), ==, VIVARIUM_EGRESS_VERDICT_ALLOWED);
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_verdict_label), ==, "Allowed");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_verdict_class), ==, "success");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_reason), ==, "allowed by deb.debian.org (group debian)");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_bytes), ==, "517 bytes up · 40.0\u00a0KiB down");
  g_assert_cmpstr (column (model, 2, vivarium_egress_entry_get_duration), ==, "812 ms");

  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_time), ==, "Wed Dec \u20072 00:22:05 2026");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_destination), ==, "[2001:db8::1]:80");
  g_assert_cmpint (verdict_at (model, 1), ==, VIVARIUM_EGRESS_VERDICT_DENIED);
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_verdict_label), ==, "Denied");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_verdict_class), ==, "error");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_bytes), ==, "0 bytes up · 0 bytes down");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_duration), ==, "1 min 5 s");

  /* A verdict this app does not know is not shown as either. */
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_time), ==, "unknown");
  g_assert_cmpint (time_at (model, 0), ==, -1);
  g_assert_cmpint (time_at (model, 2), ==, DECISION_TIME_USEC);
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_destination), ==, "(no host):0");
  g_assert_cmpint (verdict_at (model, 0), ==, VIVARIUM_EGRESS_VERDICT_UNKNOWN);
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_verdict_label), ==, "Unknown verdict");
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_bytes), ==, "0 bytes up · 3.0\u00a0MiB down");
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_duration), ==, "4.2 s");
  g_assert_false (vivarium_egress_model_get_log_full (model));

  /* The proxy's last line of a full log. */
  g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC, "", 0, "", "log-full",
                                            "the decision log is full", 0, 0, 0));
  egress_refresh (f, model);
  g_assert_true (vivarium_egress_model_get_log_full (model));
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_verdict_label), ==, "Log full");
}

/* What the guest asked for is text: markup stays as typed (the view shows
 * it in labels that read no markup), control characters are made visible,
 * and the host and the reason are capped. */
static void
test_egress_untrusted (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);
  g_autoptr(GString) long_host = g_string_new (NULL);
  g_autoptr(GString) long_reason = g_string_new (NULL);
  g_autofree char *want_host = NULL;
  const char *reason;

  for (guint i = 0; i < 100; i++)
    g_string_append (long_host, "abcdefghij.");
  for (guint i = 0; i < 100; i++)
    g_string_append (long_reason, "0123456789");
  g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC, "<b>evil</b>&amp;.example", 443, "tls<i>", "denied",
                                            "<span foreground=\"green\">allowed</span>\x1b[32m\u202e", 0, 0, 1));
  g_ptr_array_add (f->egress, egress_entry (DECISION_TIME_USEC, long_host->str, 443, "proxy", "denied",
                                            long_reason->str, 0, 0, 1));
  egress_refresh (f, model);

  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_destination), ==, "<b>evil</b>&amp;.example:443");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_via), ==, "tls<i>");
  g_assert_cmpstr (column (model, 1, vivarium_egress_entry_get_reason), ==,
                   "<span foreground=\"green\">allowed</span>\\u001B[32m\\u202E");
  want_host = g_strdup_printf ("%.*s…:443", VIVARIUM_EGRESS_HOST_MAX_CHARS, long_host->str);
  g_assert_cmpstr (column (model, 0, vivarium_egress_entry_get_destination), ==, want_host);
  reason = column (model, 0, vivarium_egress_entry_get_reason);
  g_assert_cmpuint (g_utf8_strlen (reason, -1), ==, VIVARIUM_EGRESS_REASON_MAX_CHARS + 1);
  g_assert_true (g_str_has_suffix (reason, "…"));
}

/* A refusal is kept for the view to say, the list stays empty; a daemon
 * whose "next" never moves on ends the round after a bounded number of
 * calls, and sends nothing twice into the list. */
static void
test_egress_refused_and_stuck (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);
  g_autofree char *remote = NULL;
  guint calls;

  peer_log_decisions (f, 50);
  f->egress_refuse = TRUE;
  g_assert_cmpuint (egress_refresh (f, model), ==, 1);
  g_assert_nonnull (vivarium_egress_model_get_error (model));
  remote = g_dbus_error_get_remote_error (vivarium_egress_model_get_error (model));
  g_assert_cmpstr (remote, ==, "org.vivarium.Vivarium1.Error.NotAuthorized");
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 0);

  f->egress_refuse = FALSE;
  f->egress_stuck = TRUE;
  calls = egress_refresh (f, model);
  g_assert_no_error (vivarium_egress_model_get_error (model));
  g_assert_cmpuint (calls, <=, VIVARIUM_EGRESS_MODEL_MAX_KEPT / VIVARIUM_EGRESS_MODEL_PAGE + 2);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 50);
  calls = egress_refresh (f, model);
  g_assert_cmpuint (calls, <=, VIVARIUM_EGRESS_MODEL_MAX_KEPT / VIVARIUM_EGRESS_MODEL_PAGE + 2);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 50);
}

/* A refresh asked while one runs runs once more after it, never twice at
 * the same time. */
static void
test_egress_refresh_while_loading (Fixture *f, gconstpointer data)
{
  g_autoptr(VivariumEgressModel) model = egress_model (f);

  peer_log_decisions (f, 10);
  vivarium_egress_model_refresh (model);
  vivarium_egress_model_refresh (model);
  vivarium_egress_model_refresh (model);
  current_egress = model;
  spin_until (egress_idle, f);
  g_assert_cmpuint (f->egress_asked->len, ==, 2);
  g_assert_cmpuint (asked_at (f, 0), ==, 0);
  g_assert_cmpuint (asked_at (f, 1), ==, 10);
  g_assert_cmpuint (g_list_model_get_n_items (G_LIST_MODEL (model)), ==, 10);
}

int
main (int argc, char **argv)
{
  /* The columns' dates and numbers as a fixed locale and zone write them. */
  g_setenv ("TZ", "UTC", TRUE);
  g_setenv ("LC_ALL", "C", TRUE);
  g_test_init (&argc, &argv, NULL);

  g_test_add ("/app/sessions/initial", Fixture, NULL, fixture_set_up, test_sessions_initial, fixture_tear_down);
  g_test_add ("/app/sessions/signals", Fixture, NULL, fixture_set_up, test_sessions_signals, fixture_tear_down);
  g_test_add ("/app/sessions/removed-while-fetching", Fixture, NULL, fixture_set_up,
              test_sessions_removed_while_fetching, fixture_tear_down);
  g_test_add ("/app/sessions/refused", Fixture, NULL, fixture_set_up, test_sessions_refused, fixture_tear_down);
  g_test_add ("/app/images", Fixture, NULL, fixture_set_up, test_images, fixture_tear_down);
  g_test_add ("/app/tasks", Fixture, NULL, fixture_set_up, test_tasks, fixture_tear_down);
  g_test_add ("/app/projects-and-reports", Fixture, NULL, fixture_set_up, test_projects_and_reports, fixture_tear_down);
  g_test_add ("/app/egress/paging", Fixture, NULL, fixture_set_up, test_egress_paging, fixture_tear_down);
  g_test_add ("/app/egress/cap", Fixture, NULL, fixture_set_up, test_egress_cap, fixture_tear_down);
  g_test_add ("/app/egress/columns", Fixture, NULL, fixture_set_up, test_egress_columns, fixture_tear_down);
  g_test_add ("/app/egress/untrusted", Fixture, NULL, fixture_set_up, test_egress_untrusted, fixture_tear_down);
  g_test_add ("/app/egress/refused-and-stuck", Fixture, NULL, fixture_set_up, test_egress_refused_and_stuck,
              fixture_tear_down);
  g_test_add ("/app/egress/refresh-while-loading", Fixture, NULL, fixture_set_up, test_egress_refresh_while_loading,
              fixture_tear_down);
  g_test_add_func ("/app/describe-error", test_describe_error);
  g_test_add_func ("/app/selftest-result", test_selftest_result);
  g_test_add_func ("/app/selftest-row-order", test_selftest_row_order);
  g_test_add_func ("/app/selftest-result/allowlist", test_selftest_result_allowlist);
  g_test_add_func ("/app/selftest-result/bad", test_selftest_result_bad);
  return g_test_run ();
}
