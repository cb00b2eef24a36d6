/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The D-Bus boundary moves to a new connection (what the daemon does after
 * the bus dropped it): on a private bus (a real dbus-daemon, GTestDBus),
 * with no polkit, the objects answer on the new connection exactly as they
 * did on the old one (NotAuthorized for a method, also on an unknown child,
 * NotFound for a path that names nothing), the old one serves nothing any more, and what was added
 * while off the bus is served once a connection is back. No root.
 */
#define G_LOG_DOMAIN "TestExportedMove"

#include "config.h"

#include <gio/gio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-authority.h"
#include "vd-exported.h"

#define ERR_NOT_AUTH  VIVARIUM_DBUS_ERROR_PREFIX ".NotAuthorized"
#define ERR_NOT_FOUND VIVARIUM_DBUS_ERROR_PREFIX ".NotFound"
#define CALL_TIMEOUT_MS 20000

static GTestDBus *bus;

static GDBusConnection *
connect_to_bus (void)
{
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection =
    g_dbus_connection_new_for_address_sync (g_test_dbus_get_bus_address (bus),
                                            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, &error);
  g_assert_no_error (error);
  return connection;
}

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GAsyncResult **out = user_data;
  *out = g_object_ref (res);
}

/* The boundary runs on this thread's main context: never block it. Returns
 * the D-Bus error name of the reply, or "" for success. */
static gchar *
call_error (GDBusConnection *client, GDBusConnection *server, const gchar *path, const gchar *iface,
            const gchar *method)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;

  g_dbus_connection_call (client, g_dbus_connection_get_unique_name (server), path, iface, method, NULL, NULL,
                          G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, call_done_cb, &res);
  while (res == NULL)
    g_main_context_iteration (NULL, TRUE);
  reply = g_dbus_connection_call_finish (client, res, &error);
  if (reply != NULL)
    return g_strdup ("");
  return g_dbus_error_get_remote_error (error);
}

static void
assert_answers (GDBusConnection *client, GDBusConnection *server, const gchar *session_path)
{
  g_autofree gchar *manager = call_error (client, server, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager",
                                          "ListSessions");
  g_autofree gchar *session = call_error (client, server, session_path, VIVARIUM_DBUS_IFACE_PREFIX ".Session",
                                          "Stop");
  /* A stranger is refused an unknown child as a known one; the collection
   * itself names nothing for anyone. */
  g_autofree gchar *unknown = call_error (client, server, VIVARIUM_DBUS_PATH_SESSIONS "/nope",
                                          VIVARIUM_DBUS_IFACE_PREFIX ".Session", "Stop");
  g_autofree gchar *nothing = call_error (client, server, VIVARIUM_DBUS_PATH_SESSIONS,
                                          VIVARIUM_DBUS_IFACE_PREFIX ".Session", "Stop");

  g_assert_cmpstr (manager, ==, ERR_NOT_AUTH);
  g_assert_cmpstr (session, ==, ERR_NOT_AUTH);
  g_assert_cmpstr (unknown, ==, ERR_NOT_AUTH);
  g_assert_cmpstr (nothing, ==, ERR_NOT_FOUND);
}

/* Nothing of ours answers there: GDBus's own "no such object" errors. */
static void
assert_serves_nothing (GDBusConnection *client, GDBusConnection *server, const gchar *session_path)
{
  g_autofree gchar *manager = call_error (client, server, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager",
                                          "ListSessions");
  g_autofree gchar *session = call_error (client, server, session_path, VIVARIUM_DBUS_IFACE_PREFIX ".Session",
                                          "Stop");

  g_assert_true (g_str_has_prefix (manager, "org.freedesktop.DBus.Error.Unknown"));
  g_assert_true (g_str_has_prefix (session, "org.freedesktop.DBus.Error.Unknown"));
}

static void
add (VdExported *exported, const gchar *path, gpointer skeleton)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_exported_add (exported, path, G_DBUS_INTERFACE_SKELETON (skeleton), &error));
  g_assert_no_error (error);
}

static void
settle (void)
{
  for (guint i = 0; i < 50; i++) {
    while (g_main_context_iteration (NULL, FALSE))
      ;
    g_usleep (2000);
  }
}

static gboolean fatal_log_cb (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user_data);

static void
test_move (void)
{
  g_autoptr(GDBusConnection) old_server = connect_to_bus ();
  g_autoptr(GDBusConnection) new_server = connect_to_bus ();
  g_autoptr(GDBusConnection) later_server = connect_to_bus ();
  g_autoptr(GDBusConnection) client = connect_to_bus ();
  g_autoptr(VdAuthority) authority = vd_authority_new ();
  g_autoptr(VdExported) exported = vd_exported_new (authority, old_server);
  g_autoptr(VivariumDBusManager) manager = vivarium_dbus_manager_skeleton_new ();
  g_autoptr(VivariumDBusSession) s1 = vivarium_dbus_session_skeleton_new ();
  g_autoptr(VivariumDBusSession) s2 = vivarium_dbus_session_skeleton_new ();
  g_autoptr(GError) error = NULL;
  const gchar *p1 = VIVARIUM_DBUS_PATH_SESSIONS "/s1";
  const gchar *p2 = VIVARIUM_DBUS_PATH_SESSIONS "/s2";

  g_test_log_set_fatal_handler (fatal_log_cb, NULL);   /* GTest resets it for every case */
  add (exported, VIVARIUM_DBUS_PATH, manager);
  add (exported, p1, s1);
  assert_answers (client, old_server, p1);

  g_assert_true (vd_exported_set_connection (exported, new_server, &error));
  g_assert_no_error (error);
  assert_answers (client, new_server, p1);
  assert_serves_nothing (client, old_server, p1);

  /* Off the bus, an object still goes into the registry, and onto the
   * next connection with the rest. */
  g_assert_true (vd_exported_set_connection (exported, NULL, &error));
  g_assert_no_error (error);
  assert_serves_nothing (client, new_server, p1);
  add (exported, p2, s2);
  g_assert_true (vd_exported_has (exported, p2));
  g_assert_true (vd_exported_set_connection (exported, later_server, &error));
  g_assert_no_error (error);
  assert_answers (client, later_server, p1);
  assert_answers (client, later_server, p2);
  settle ();
}

/* "polkit is not there, refusing" is the premise here, as in test-dispatch. */
static gboolean
fatal_log_cb (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user_data)
{
  return g_strcmp0 (domain, "VdAuthority") != 0;
}

static void
quiet_log_cb (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user_data)
{
  g_printerr ("# %s: %s\n", domain, message);
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, NULL);
  (void) VIVARIUM_ERROR;
  g_test_log_set_fatal_handler (fatal_log_cb, NULL);
  g_log_set_handler ("VdAuthority", G_LOG_LEVEL_WARNING | G_LOG_FLAG_FATAL, quiet_log_cb, NULL);
  g_test_add_func ("/exported/move-to-new-connection", test_move);
  bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (bus);
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", g_test_dbus_get_bus_address (bus), TRUE);
  rc = g_test_run ();
  g_test_dbus_down (bus);
  g_clear_object (&bus);
  return rc;
}
