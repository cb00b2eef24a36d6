/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The D-Bus boundary on a private bus (a real dbus-daemon, GTestDBus) with
 * no polkit at all: every method of every exported interface, every
 * property read, the object tree and the signals must give an
 * unauthorized peer nothing. Needs no root. The interfaces and their
 * members come from the generated introspection data, so a new verb is
 * covered without touching this file.
 */
#define G_LOG_DOMAIN "TestDispatch"

#include "config.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixfdlist.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-authority.h"
#include "vd-exported.h"
#include "vd-outgoing.h"

#define ERR_NOT_AUTH  VIVARIUM_DBUS_ERROR_PREFIX ".NotAuthorized"
#define ERR_NOT_FOUND VIVARIUM_DBUS_ERROR_PREFIX ".NotFound"
#define SECRET        "hunter2-secret"
#define CALL_TIMEOUT_MS 20000

static GTestDBus *bus;   /* one for the whole run: polkit's client keeps its connection */

typedef struct {
  GDBusConnection *server;
  GDBusConnection *client;
  VdAuthority     *authority;
  VdExported      *exported;
  GPtrArray       *skeletons;   /* GDBusInterfaceSkeleton */
  GPtrArray       *paths;       /* the path of each skeleton */
  guint            signals_seen;
  GString         *signal_text;
} Fixture;

static GDBusConnection *
connect_to (const gchar *address)
{
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection =
    g_dbus_connection_new_for_address_sync (address,
                                            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, &error);
  g_assert_no_error (error);
  return connection;
}

static void
add (Fixture *f, const gchar *path, gpointer skeleton)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_exported_add (f->exported, path, G_DBUS_INTERFACE_SKELETON (skeleton), &error));
  g_assert_no_error (error);
  g_ptr_array_add (f->skeletons, skeleton);
  g_ptr_array_add (f->paths, g_strdup (path));
}

/* One object of each kind the daemon exports, with values a stranger must
 * not learn. */
static void
export_objects (Fixture *f)
{
  VivariumDBusManager *manager = vivarium_dbus_manager_skeleton_new ();
  VivariumDBusGuard *guard = vivarium_dbus_guard_skeleton_new ();
  VivariumDBusSession *session = vivarium_dbus_session_skeleton_new ();
  VivariumDBusImage *image = vivarium_dbus_image_skeleton_new ();
  VivariumDBusJob *job = vivarium_dbus_job_skeleton_new ();

  vivarium_dbus_manager_set_version (manager, SECRET);
  vivarium_dbus_session_set_unit (session, SECRET);
  vivarium_dbus_image_set_digest (image, SECRET);
  vivarium_dbus_job_set_log (job, SECRET);
  add (f, VIVARIUM_DBUS_PATH, manager);
  add (f, VIVARIUM_DBUS_PATH, guard);
  add (f, VIVARIUM_DBUS_PATH_SESSIONS "/s1", session);
  add (f, VIVARIUM_DBUS_PATH_IMAGES "/tiny", image);
  add (f, VIVARIUM_DBUS_PATH_JOBS "/t1", job);
}

static gboolean fatal_log_cb (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user_data);

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  /* GTest resets the handler for every case. */
  g_test_log_set_fatal_handler (fatal_log_cb, NULL);
  f->server = connect_to (g_test_dbus_get_bus_address (bus));
  f->client = connect_to (g_test_dbus_get_bus_address (bus));
  f->authority = vd_authority_new ();
  f->exported = vd_exported_new (f->authority, f->server);
  f->skeletons = g_ptr_array_new_with_free_func (g_object_unref);
  f->paths = g_ptr_array_new_with_free_func (g_free);
  f->signal_text = g_string_new (NULL);
  export_objects (f);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  /* Let the daemon side finish what it started (the uid look-ups of its
   * refusal log lines), so nothing is left half done under a leak checker. */
  for (guint i = 0; i < 100; i++) {
    while (g_main_context_iteration (NULL, FALSE))
      ;
    g_usleep (2000);
  }
  g_clear_object (&f->exported);
  g_clear_object (&f->authority);
  g_ptr_array_unref (f->skeletons);
  g_ptr_array_unref (f->paths);
  g_string_free (f->signal_text, TRUE);
  g_dbus_connection_close_sync (f->client, NULL, NULL);
  g_dbus_connection_close_sync (f->server, NULL, NULL);
  g_clear_object (&f->client);
  g_clear_object (&f->server);
}

/* A value of any type, for calls that must be refused before their
 * arguments matter. */
static GVariant *
default_value (const GVariantType *type)
{
  if (g_variant_type_is_tuple (type)) {
    GVariantBuilder b;
    g_variant_builder_init (&b, type);
    for (const GVariantType *t = g_variant_type_first (type); t != NULL; t = g_variant_type_next (t))
      g_variant_builder_add_value (&b, default_value (t));
    return g_variant_builder_end (&b);
  }
  if (g_variant_type_is_array (type))
    return g_variant_new_array (g_variant_type_element (type), NULL, 0);
  if (g_variant_type_is_variant (type))
    return g_variant_new_variant (g_variant_new_boolean (FALSE));
  switch (g_variant_type_peek_string (type)[0]) {
  case 'b': return g_variant_new_boolean (FALSE);
  case 'y': return g_variant_new_byte (0);
  case 'n': return g_variant_new_int16 (0);
  case 'q': return g_variant_new_uint16 (0);
  case 'i': return g_variant_new_int32 (0);
  case 'u': return g_variant_new_uint32 (1);
  case 'x': return g_variant_new_int64 (0);
  case 't': return g_variant_new_uint64 (0);
  case 'd': return g_variant_new_double (0);
  case 'h': return g_variant_new_handle (0);
  case 'o': return g_variant_new_object_path ("/");
  case 'g': return g_variant_new_signature ("");
  default:  return g_variant_new_string ("x");
  }
}

static GVariant *
default_args (const GDBusMethodInfo *method)
{
  g_autoptr(GVariantType) type = NULL;
  g_autoptr(GString) sig = g_string_new ("(");

  for (guint i = 0; method->in_args != NULL && method->in_args[i] != NULL; i++)
    g_string_append (sig, method->in_args[i]->signature);
  g_string_append_c (sig, ')');
  type = g_variant_type_new (sig->str);
  return default_value (type);
}

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GAsyncResult **out = user_data;
  *out = g_object_ref (res);
}

/* The daemon's side runs on this thread's main context too: never block it. */
static GVariant *
call (Fixture *f, const gchar *path, const gchar *interface_name, const gchar *method, GVariant *args,
      GError **error)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  g_assert_cmpint (g_unix_fd_list_append (fds, fd, NULL), ==, 0);
  close (fd);
  g_dbus_connection_call_with_unix_fd_list (f->client, g_dbus_connection_get_unique_name (f->server), path,
                                            interface_name, method, args, NULL, G_DBUS_CALL_FLAGS_NONE,
                                            CALL_TIMEOUT_MS, fds, NULL, call_done_cb, &res);
  while (res == NULL)
    g_main_context_iteration (NULL, TRUE);
  return g_dbus_connection_call_with_unix_fd_list_finish (f->client, NULL, res, error);
}

static void
assert_error (GError *error, const gchar *name, const gchar *what)
{
  g_autofree gchar *remote = error != NULL ? g_dbus_error_get_remote_error (error) : NULL;

  if (error == NULL)
    g_test_fail_printf ("%s: expected %s, but the call succeeded", what, name);
  else if (g_strcmp0 (remote, name) != 0)
    g_test_fail_printf ("%s: expected %s, got %s: %s", what, name, remote, error->message);
}

static void
test_methods_refused (Fixture *f, gconstpointer data)
{
  guint n = 0;

  for (guint i = 0; i < f->skeletons->len; i++) {
    GDBusInterfaceInfo *info = g_dbus_interface_skeleton_get_info (g_ptr_array_index (f->skeletons, i));
    for (guint m = 0; info->methods != NULL && info->methods[m] != NULL; m++) {
      g_autofree gchar *what = g_strdup_printf ("%s.%s", info->name, info->methods[m]->name);
      g_autoptr(GError) error = NULL;
      g_autoptr(GVariant) reply = call (f, g_ptr_array_index (f->paths, i), info->name, info->methods[m]->name,
                                        default_args (info->methods[m]), &error);
      assert_error (error, ERR_NOT_AUTH, what);
      n++;
    }
  }
  g_test_message ("%u methods refused", n);
  g_assert_cmpuint (n, >, 10);
}

static void
test_properties_refused (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < f->skeletons->len; i++) {
    GDBusInterfaceInfo *info = g_dbus_interface_skeleton_get_info (g_ptr_array_index (f->skeletons, i));
    const gchar *path = g_ptr_array_index (f->paths, i);
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) all = call (f, path, "org.freedesktop.DBus.Properties", "GetAll",
                                    g_variant_new ("(s)", info->name), &error);

    assert_error (error, ERR_NOT_AUTH, info->name);
    for (guint p = 0; info->properties != NULL && info->properties[p] != NULL; p++) {
      g_autoptr(GError) get_error = NULL;
      g_autoptr(GVariant) value = call (f, path, "org.freedesktop.DBus.Properties", "Get",
                                        g_variant_new ("(ss)", info->name, info->properties[p]->name), &get_error);
      assert_error (get_error, ERR_NOT_AUTH, info->properties[p]->name);
    }
  }
}

static gchar *
introspect (Fixture *f, const gchar *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = call (f, path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL, &error);
  gchar *xml = NULL;

  g_assert_no_error (error);
  g_variant_get (reply, "(s)", &xml);
  return xml;
}

static void
test_tree_hidden (Fixture *f, gconstpointer data)
{
  const gchar *collections[] = { VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_PATH_SESSIONS, VIVARIUM_DBUS_PATH_IMAGES,
                                 VIVARIUM_DBUS_PATH_JOBS };

  for (gsize i = 0; i < G_N_ELEMENTS (collections); i++) {
    g_autofree gchar *xml = introspect (f, collections[i]);
    for (const gchar *const *id = (const gchar *[]) { "s1", "tiny", "t1", NULL }; *id != NULL; id++) {
      g_autofree gchar *node = g_strdup_printf ("<node name=\"%s\"", *id);
      if (strstr (xml, node) != NULL)
        g_test_fail_printf ("Introspect of %s lists the child %s:\n%s", collections[i], *id, xml);
    }
  }
  for (guint i = 0; i < f->paths->len; i++) {
    const gchar *path = g_ptr_array_index (f->paths, i);
    g_autofree gchar *xml = NULL;
    if (g_strcmp0 (path, VIVARIUM_DBUS_PATH) == 0)
      continue;   /* the manager's interfaces are the published contract */
    xml = introspect (f, path);
    if (strstr (xml, VIVARIUM_DBUS_IFACE_PREFIX) != NULL)
      g_test_fail_printf ("Introspect of %s shows its interfaces:\n%s", path, xml);
  }
}

/* Where nothing can ever be (deeper than a collection's children, or a
 * collection itself), GDBus's own answer becomes NotFound. */
static void
test_unknown_paths_not_found (Fixture *f, gconstpointer data)
{
  struct { const gchar *path, *iface, *method; } bad[] = {
    { VIVARIUM_DBUS_PATH "/no/such/object", VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListSessions" },
    { VIVARIUM_DBUS_PATH "/sessions", VIVARIUM_DBUS_IFACE_PREFIX ".Session", "Stop" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) reply = call (f, bad[i].path, bad[i].iface, bad[i].method, NULL, &error);
    assert_error (error, ERR_NOT_FOUND, bad[i].path);
  }
}

/* A child of a collection that does not exist is refused to a stranger
 * exactly as one that does: methods, Properties.Get and GetAll, in every
 * collection, also in those that never had a child (tasks, projects,
 * reports here). Only a caller polkit allows learns NotFound
 * (tests/integration/test-boundary.c). */
static void
test_unknown_children_refused_alike (Fixture *f, gconstpointer data)
{
  struct { const gchar *path, *iface, *property, *method; } children[] = {
    { VIVARIUM_DBUS_PATH_SESSIONS "/s1", VIVARIUM_DBUS_IFACE_PREFIX ".Session", "Unit", "Stop" },
    { VIVARIUM_DBUS_PATH_SESSIONS "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Session", "Unit", "Stop" },
    { VIVARIUM_DBUS_PATH_IMAGES "/tiny", VIVARIUM_DBUS_IFACE_PREFIX ".Image", "Digest", "Delete" },
    { VIVARIUM_DBUS_PATH_IMAGES "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Image", "Digest", "Delete" },
    { VIVARIUM_DBUS_PATH_JOBS "/t1", VIVARIUM_DBUS_IFACE_PREFIX ".Job", "Log", "Cancel" },
    { VIVARIUM_DBUS_PATH_JOBS "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Job", "Log", "Cancel" },
    { VIVARIUM_DBUS_PATH_TASKS "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Task", "Outcome", "Cancel" },
    { VIVARIUM_DBUS_PATH_PROJECTS "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Project", "Name", "Delete" },
    { VIVARIUM_DBUS_PATH_REPORTS "/nope", VIVARIUM_DBUS_IFACE_PREFIX ".Report", "Outcome", "GetJson" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (children); i++) {
    g_autoptr(GError) get_error = NULL, all_error = NULL, method_error = NULL;
    g_autoptr(GVariant) get = call (f, children[i].path, "org.freedesktop.DBus.Properties", "Get",
                                    g_variant_new ("(ss)", children[i].iface, children[i].property), &get_error);
    g_autoptr(GVariant) all = call (f, children[i].path, "org.freedesktop.DBus.Properties", "GetAll",
                                    g_variant_new ("(s)", children[i].iface), &all_error);
    g_autoptr(GVariant) reply = call (f, children[i].path, children[i].iface, children[i].method, NULL,
                                      &method_error);
    g_autofree gchar *what = g_strdup_printf ("%s %s", children[i].path, children[i].method);

    assert_error (get_error, ERR_NOT_AUTH, children[i].path);
    assert_error (all_error, ERR_NOT_AUTH, children[i].path);
    assert_error (method_error, ERR_NOT_AUTH, what);
  }
}

static void
signal_cb (GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *iface,
           const gchar *name, GVariant *params, gpointer user_data)
{
  Fixture *f = user_data;
  g_autofree gchar *text = g_variant_print (params, FALSE);

  if (g_strcmp0 (iface, "org.freedesktop.DBus") == 0)
    return;
  f->signals_seen++;
  g_string_append_printf (f->signal_text, "%s %s.%s %s\n", path, iface, name, text);
}

static void
spin (void)
{
  while (g_main_context_iteration (NULL, FALSE))
    ;
}

/* While nobody is authorized, the objects' signals and property changes
 * reach nobody: not as broadcasts, not as unicasts. */
static void
test_signals_reach_nobody (Fixture *f, gconstpointer data)
{
  VivariumDBusSession *session = NULL;
  VivariumDBusManager *manager = NULL;
  g_autoptr(GVariantDict) entry = g_variant_dict_new (NULL);
  const gchar *argv[] = { "echo", SECRET, NULL };
  guint id;

  for (guint i = 0; i < f->skeletons->len; i++) {
    gpointer s = g_ptr_array_index (f->skeletons, i);
    if (VIVARIUM_DBUS_IS_SESSION (s))
      session = s;
    if (VIVARIUM_DBUS_IS_MANAGER (s))
      manager = s;
  }
  id = g_dbus_connection_signal_subscribe (f->client, NULL, NULL, NULL, NULL, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                           signal_cb, f, NULL);
  {
    /* a round trip, so the match rule is in place at the bus */
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) r = call (f, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListSessions", NULL, &error);
  }
  g_variant_dict_insert_value (entry, "argv", g_variant_new_strv (argv, -1));
  vivarium_dbus_session_emit_command_finished (session, g_variant_dict_end (entry));
  vivarium_dbus_session_emit_state_changed (session, SECRET);
  vivarium_dbus_session_set_state (session, SECRET);
  vivarium_dbus_manager_emit_session_added (manager, VIVARIUM_DBUS_PATH_SESSIONS "/s1");
  spin ();
  {
    /* Another round trip: anything sent before its reply has arrived. */
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) r = call (f, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListSessions", NULL, &error);
  }
  spin ();
  g_dbus_connection_signal_unsubscribe (f->client, id);
  if (f->signals_seen != 0)
    g_test_fail_printf ("an unauthorized peer received %u signals:\n%s", f->signals_seen, f->signal_text->str);
}

/* --- the safety net on outgoing messages ----------------------------------- */

static GDBusMessage *
method_return_of_size (gsize size)
{
  g_autoptr(GDBusMessage) call_msg = g_dbus_message_new_method_call (":1.1", "/", "a.b", "C");
  GDBusMessage *reply;
  g_autofree guint8 *data = g_malloc0 (size);

  g_dbus_message_set_serial (call_msg, 7);
  g_dbus_message_set_sender (call_msg, ":1.2");
  reply = g_dbus_message_new_method_reply (call_msg);
  g_dbus_message_set_body (reply, g_variant_new ("(@ay)", g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, data, size, 1)));
  return reply;
}

static void
test_reply_size_capped (void)
{
  GDBusMessage *small = method_return_of_size (VIVARIUM_FILE_MAX);
  GDBusMessage *big = method_return_of_size (VIVARIUM_MAX_REPLY_BYTES + 1);
  g_autoptr(GDBusMessage) out_small = NULL;
  g_autoptr(GDBusMessage) out_big = NULL;

  out_small = vd_outgoing_check (small);
  g_assert_true (out_small == small);   /* ReadFile's 16 MiB passes */
  g_test_expect_message ("VdOutgoing", G_LOG_LEVEL_WARNING, "*bytes; the daemon sends at most*");
  out_big = vd_outgoing_check (big);
  g_test_assert_expected_messages ();
  g_assert_cmpint (g_dbus_message_get_message_type (out_big), ==, G_DBUS_MESSAGE_TYPE_ERROR);
  g_assert_cmpstr (g_dbus_message_get_error_name (out_big), ==, VIVARIUM_DBUS_ERROR_PREFIX ".TooLarge");
  g_assert_cmpuint (g_dbus_message_get_reply_serial (out_big), ==, 7);
  g_assert_cmpstr (g_dbus_message_get_destination (out_big), ==, ":1.2");
}

static GDBusMessage *
error_reply (const gchar *name, const gchar *text)
{
  g_autoptr(GDBusMessage) call_msg = g_dbus_message_new_method_call (":1.1", "/", "a.b", "C");

  g_dbus_message_set_serial (call_msg, 9);
  return g_dbus_message_new_method_error_literal (call_msg, name, text);
}

static void
test_error_names_converted (void)
{
  struct { const gchar *in, *out; gboolean warns; } cases[] = {
    { VIVARIUM_DBUS_ERROR_PREFIX ".Busy", VIVARIUM_DBUS_ERROR_PREFIX ".Busy", FALSE },
    { "org.freedesktop.DBus.Error.UnknownMethod", VIVARIUM_DBUS_ERROR_PREFIX ".NotFound", FALSE },
    { "org.freedesktop.DBus.Error.InvalidArgs", VIVARIUM_DBUS_ERROR_PREFIX ".InvalidArgument", FALSE },
    { "org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code1", VIVARIUM_DBUS_ERROR_PREFIX ".Failed", TRUE },
    { "org.example.Whatever", VIVARIUM_DBUS_ERROR_PREFIX ".Failed", TRUE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GDBusMessage) out = NULL;
    g_autoptr(GError) error = NULL;

    if (cases[i].warns)
      g_test_expect_message ("VdOutgoing", G_LOG_LEVEL_WARNING, "*escaped conversion*");
    out = vd_outgoing_check (error_reply (cases[i].in, "a sentence for a person"));
    g_test_assert_expected_messages ();
    g_assert_cmpstr (g_dbus_message_get_error_name (out), ==, cases[i].out);
    g_assert_true (g_dbus_message_to_gerror (out, &error));
    g_assert_true (g_str_has_suffix (error->message, "a sentence for a person"));
    g_assert_cmpuint (g_dbus_message_get_reply_serial (out), ==, 9);
  }
}


/* The same net on a real bus: a handler that answers too much (here a
 * plain object outside the boundary, since nothing inside it answers
 * without polkit) gets TooLarge to its caller instead of the daemon being
 * disconnected by the bus; 16 MiB, ReadFile's limit, still passes. */
static const gchar big_xml[] =
  "<node><interface name='org.vivarium.Test'><method name='Give'>"
  "<arg type='u' name='size' direction='in'/><arg type='ay' name='data' direction='out'/>"
  "</method></interface></node>";

static void
give_method_call (GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *iface,
                  const gchar *method, GVariant *params, GDBusMethodInvocation *invocation, gpointer user_data)
{
  guint32 size = 0;
  guint8 *data;

  g_variant_get (params, "(u)", &size);
  data = g_malloc0 (size);
  g_dbus_method_invocation_return_value (invocation,
      g_variant_new ("(@ay)", g_variant_new_from_data (G_VARIANT_TYPE_BYTESTRING, data, size, TRUE, g_free, data)));
}

static const GDBusInterfaceVTable give_vtable = { give_method_call, NULL, NULL, { NULL } };

static void
test_oversized_reply_on_the_bus (Fixture *f, gconstpointer data)
{
  g_autoptr(GDBusNodeInfo) node = g_dbus_node_info_new_for_xml (big_xml, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) big_error = NULL;
  g_autoptr(GVariant) small = NULL;
  g_autoptr(GVariant) big = NULL;
  guint id = g_dbus_connection_register_object (f->server, "/test/big", node->interfaces[0], &give_vtable,
                                                NULL, NULL, &error);

  g_assert_no_error (error);
  small = call (f, "/test/big", "org.vivarium.Test", "Give", g_variant_new ("(u)", VIVARIUM_FILE_MAX), &error);
  g_assert_no_error (error);
  g_test_expect_message ("VdOutgoing", G_LOG_LEVEL_WARNING, "*bytes; the daemon sends at most*");
  big = call (f, "/test/big", "org.vivarium.Test", "Give", g_variant_new ("(u)", VIVARIUM_MAX_REPLY_BYTES + 1),
              &big_error);
  g_test_assert_expected_messages ();
  assert_error (big_error, VIVARIUM_DBUS_ERROR_PREFIX ".TooLarge", "a reply over the limit");
  g_assert_false (g_dbus_connection_is_closed (f->server));
  g_dbus_connection_unregister_object (f->server, id);
}

/* An interface whose reading the bouncer does not map cannot go on the bus. */
static void
test_unmapped_interface_not_exported (Fixture *f, gconstpointer data)
{
  g_autoptr(GDBusInterfaceSkeleton) odd = G_DBUS_INTERFACE_SKELETON (vivarium_dbus_project_skeleton_new ());
  g_autoptr(GError) error = NULL;

  /* Project is mapped; a path outside our tree is not a place. */
  g_assert_false (vd_exported_add (f->exported, "/elsewhere/p", odd, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
}

/* "polkit is not there, refusing" is the daemon's warning and this test's
 * premise; any other warning still fails the run. */
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

  g_test_add ("/dispatch/methods-refused", Fixture, NULL, fixture_set_up, test_methods_refused, fixture_tear_down);
  g_test_add ("/dispatch/properties-refused", Fixture, NULL, fixture_set_up, test_properties_refused, fixture_tear_down);
  g_test_add ("/dispatch/tree-hidden", Fixture, NULL, fixture_set_up, test_tree_hidden, fixture_tear_down);
  g_test_add ("/dispatch/unknown-paths-not-found", Fixture, NULL, fixture_set_up, test_unknown_paths_not_found, fixture_tear_down);
  g_test_add ("/dispatch/unknown-children-refused-alike", Fixture, NULL, fixture_set_up,
              test_unknown_children_refused_alike, fixture_tear_down);
  g_test_add ("/dispatch/signals-reach-nobody", Fixture, NULL, fixture_set_up, test_signals_reach_nobody, fixture_tear_down);
  g_test_add ("/dispatch/bad-place-refused", Fixture, NULL, fixture_set_up, test_unmapped_interface_not_exported, fixture_tear_down);
  g_test_add ("/dispatch/oversized-reply-on-the-bus", Fixture, NULL, fixture_set_up, test_oversized_reply_on_the_bus, fixture_tear_down);
  g_test_add_func ("/dispatch/reply-size-capped", test_reply_size_capped);
  g_test_add_func ("/dispatch/error-names-converted", test_error_names_converted);
  bus = g_test_dbus_new (G_TEST_DBUS_NONE);
  g_test_dbus_up (bus);
  /* polkit is asked on the "system" bus: this one, where no polkitd runs
   * and none can be activated. */
  g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", g_test_dbus_get_bus_address (bus), TRUE);
  rc = g_test_run ();
  g_test_dbus_down (bus);
  g_clear_object (&bus);
  return rc;
}
