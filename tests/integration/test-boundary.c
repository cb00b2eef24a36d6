/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The D-Bus boundary against the real daemon, a real dbus-daemon and a real
 * polkitd (run only through run-in-private-bus.sh, see README.md): an
 * unprivileged caller is refused every method of every interface that has
 * an object here, cannot read a property, does not see the objects in the
 * tree and hears no signal while root works; root, who polkit allows, does
 * hear them (the positive control). A stopped polkitd means a refusal
 * before a client's timeout, not a hang.
 *
 * The table of calls is the generated introspection data: a new verb is
 * covered without touching this file.
 */
#define G_LOG_DOMAIN "TestBoundary"

#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"

#define DBUS_NAME_POLKIT  "org.freedesktop.PolicyKit1"
#define ERR_NOT_AUTH      VIVARIUM_DBUS_ERROR_PREFIX ".NotAuthorized"
#define ERR_NOT_FOUND     VIVARIUM_DBUS_ERROR_PREFIX ".NotFound"
#define IMAGE             "boundaryimg"   /* no character that path escaping changes */
#define IMPORTED          "boundaryimported"
#define RECIPE            "boundaryrecipe"
#define BUILT             "boundarybuilt"
#define CALL_TIMEOUT_MS   30000
/* What a client waits by default is 25 s; the refusal must come before 20. */
#define HUNG_CLIENT_TIMEOUT_MS 20000
#define WAIT_STEPS        600
#define WAIT_STEP_US      50000

typedef struct {
  const gchar        *path;
  GDBusInterfaceInfo *(*info) (void);
} Exported;

/* Every interface that has an object on this daemon without systemd or
 * QEMU: the manager's two, and an image prepared before activation. */
static const Exported table[] = {
  { VIVARIUM_DBUS_PATH, vivarium_dbus_manager_interface_info },
  { VIVARIUM_DBUS_PATH, vivarium_dbus_guard_interface_info },
  { VIVARIUM_DBUS_PATH_IMAGES "/" IMAGE, vivarium_dbus_image_interface_info },
};

static const gchar *
require_env (const gchar *name)
{
  const gchar *value = g_getenv (name);

  if (value == NULL || value[0] == '\0')
    g_error ("%s is not set: run this test through run-in-private-bus.sh", name);
  return value;
}

static GDBusConnection *
system_bus (void)
{
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);

  g_assert_no_error (error);
  return connection;
}

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
  case 'i': return g_variant_new_int32 (0);
  case 'u': return g_variant_new_uint32 (1);
  case 't': return g_variant_new_uint64 (0);
  case 'h': return g_variant_new_handle (0);
  case 'o': return g_variant_new_object_path ("/");
  default:  return g_variant_new_string ("x");
  }
}

static GVariant *
default_args (const GDBusMethodInfo *method)
{
  g_autoptr(GString) sig = g_string_new ("(");
  g_autoptr(GVariantType) type = NULL;

  for (guint i = 0; method->in_args != NULL && method->in_args[i] != NULL; i++)
    g_string_append (sig, method->in_args[i]->signature);
  g_string_append_c (sig, ')');
  type = g_variant_type_new (sig->str);
  return default_value (type);
}

/* The D-Bus error name, or "OK". */
static gchar *
call_outcome (GDBusConnection *bus, const gchar *path, const gchar *iface, const gchar *method, GVariant *args,
              gint timeout_ms, GVariant **reply_out)
{
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  g_assert_cmpint (g_unix_fd_list_append (fds, fd, NULL), ==, 0);
  close (fd);
  reply = g_dbus_connection_call_with_unix_fd_list_sync (bus, VIVARIUM_DBUS_NAME, path, iface, method, args, NULL,
                                                         G_DBUS_CALL_FLAGS_NONE, timeout_ms, fds, NULL, NULL, &error);
  if (reply_out != NULL)
    *reply_out = reply != NULL ? g_variant_ref (reply) : NULL;
  if (reply != NULL)
    return g_strdup ("OK");
  if (g_dbus_error_is_remote_error (error))
    return g_dbus_error_get_remote_error (error);
  return g_strdup_printf ("(local: %s)", error->message);
}

/* --client: as whoever runs us, make every call of the table and print one
 * line per call: "<what>\t<OK or error name>", and for Introspect of a
 * child "<what>\t<the XML on one line>". */
static int
client_main (void)
{
  g_autoptr(GDBusConnection) bus = system_bus ();

  for (gsize i = 0; i < G_N_ELEMENTS (table); i++) {
    GDBusInterfaceInfo *info = table[i].info ();
    g_autofree gchar *all = call_outcome (bus, table[i].path, "org.freedesktop.DBus.Properties", "GetAll",
                                          g_variant_new ("(s)", info->name), CALL_TIMEOUT_MS, NULL);

    g_print ("call %s GetAll\t%s\n", info->name, all);
    for (guint m = 0; info->methods != NULL && info->methods[m] != NULL; m++) {
      g_autofree gchar *r = call_outcome (bus, table[i].path, info->name, info->methods[m]->name,
                                          default_args (info->methods[m]), CALL_TIMEOUT_MS, NULL);
      g_print ("call %s.%s\t%s\n", info->name, info->methods[m]->name, r);
    }
    for (guint p = 0; info->properties != NULL && info->properties[p] != NULL; p++) {
      g_autofree gchar *r = call_outcome (bus, table[i].path, "org.freedesktop.DBus.Properties", "Get",
                                          g_variant_new ("(ss)", info->name, info->properties[p]->name),
                                          CALL_TIMEOUT_MS, NULL);
      g_print ("call %s Get %s\t%s\n", info->name, info->properties[p]->name, r);
    }
  }
  for (const gchar *const *path = (const gchar *[]) { VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_PATH_IMAGES,
                                                      VIVARIUM_DBUS_PATH_IMAGES "/" IMAGE, NULL };
       *path != NULL; path++) {
    g_autoptr(GVariant) reply = NULL;
    g_autofree gchar *r = call_outcome (bus, *path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL,
                                        CALL_TIMEOUT_MS, &reply);
    g_autofree gchar *xml = NULL;
    if (reply != NULL)
      g_variant_get (reply, "(s)", &xml);
    g_strdelimit (xml, "\n\t", ' ');
    g_print ("introspect %s\t%s\n", *path, xml != NULL ? xml : r);
  }
  return 0;
}

/* Every wrong verdict is listed, not just the first. */
#define fail_and_tell(...) G_STMT_START { g_test_message (__VA_ARGS__); g_test_fail_printf (__VA_ARGS__); } G_STMT_END

/* --call PATH IFACE.METHOD [STRING...]: one call with string arguments;
 * prints "OK" or the error name. */
static int
call_main (int argc, char **argv)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autofree gchar *iface = g_strconcat (VIVARIUM_DBUS_IFACE_PREFIX ".", argv[1], NULL);
  gchar *dot = strrchr (iface, '.');
  GVariantBuilder b;
  g_autofree gchar *r = NULL;

  *dot = '\0';
  g_variant_builder_init (&b, G_VARIANT_TYPE_TUPLE);
  for (int i = 2; i < argc; i++)
    g_variant_builder_add (&b, "s", argv[i]);
  r = call_outcome (bus, argv[0], iface, dot + 1, g_variant_builder_end (&b), CALL_TIMEOUT_MS, NULL);
  g_print ("%s\n", r);
  return 0;
}

static void
print_signal_cb (GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *iface,
                 const gchar *name, GVariant *params, gpointer user_data)
{
  g_autofree gchar *text = g_variant_print (params, FALSE);

  g_print ("%s %s.%s %s\n", path, iface, name, text);
  fflush (stdout);
}

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

/* --listen SECONDS: one authorized call (ListImages), then every signal of
 * ours heard for SECONDS, a line each; "listening" once subscribed. */
static int
listen_main (const gchar *seconds)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autofree gchar *r = NULL;

  g_dbus_connection_signal_subscribe (bus, VIVARIUM_DBUS_NAME, NULL, NULL, NULL, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                      print_signal_cb, NULL, NULL);
  r = call_outcome (bus, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListImages", NULL,
                    CALL_TIMEOUT_MS, NULL);
  g_print ("listening (ListImages: %s)\n", r);
  fflush (stdout);
  g_timeout_add_seconds ((guint) g_ascii_strtoull (seconds, NULL, 10), quit_cb, loop);
  g_main_loop_run (loop);
  return 0;
}

static gchar *
run_as_user (const gchar *const *extra_argv)
{
  const gchar *user = require_env ("VIVARIUM_TEST_USER");
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) argv = NULL;
  g_autofree gchar *out = NULL;
  g_autofree gchar *err = NULL;
  g_autoptr(GError) error = NULL;
  gint status = 0;

  g_strv_builder_add_many (b, "setpriv", "--reuid", user, "--regid", user, "--init-groups", NULL);
  g_strv_builder_addv (b, (const gchar **) extra_argv);
  argv = g_strv_builder_end (b);
  g_spawn_sync (NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, &error);
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, &error))
    g_error ("client as %s failed: %s\n%s", user, error->message, err);
  return g_steal_pointer (&out);
}

/* ------------------------------------------------------------------------ */

static void
prepare_image (void)
{
  g_autofree gchar *dir = g_build_filename (require_env ("VIVARIUM_STATE_DIR"), "images", IMAGE, NULL);
  g_autofree gchar *disk = g_build_filename (dir, "disk.qcow2", NULL);
  const gchar *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", disk, "16M", NULL };
  g_autoptr(GError) error = NULL;
  gint status = 0;

  g_autofree gchar *recipes = g_build_filename (require_env ("VIVARIUM_DATA_DIR"), "recipes", NULL);
  g_autofree gchar *recipe = g_build_filename (recipes, RECIPE ".recipe", NULL);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  /* A recipe whose build fails at once here (no systemd to run it in): its
   * task still changes properties and finishes, on the bus. */
  g_assert_cmpint (g_mkdir_with_parents (recipes, 0755), ==, 0);
  g_file_set_contents (recipe, "# test-boundary: never built\n", -1, &error);
  g_assert_no_error (error);
}

static void
test_root_sees_the_image (void)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GVariant) reply = NULL;
  g_autofree gchar *r = call_outcome (bus, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListImages",
                                      NULL, CALL_TIMEOUT_MS, &reply);
  g_autofree gchar *text = NULL;

  g_assert_cmpstr (r, ==, "OK");
  text = g_variant_print (reply, FALSE);
  g_assert_nonnull (strstr (text, IMAGE));
}

/* A connection of its own: a peer the daemon has never seen. */
static GDBusConnection *
fresh_bus (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *address = g_dbus_address_get_for_bus_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  GDBusConnection *bus;

  g_assert_no_error (error);
  bus = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL, &error);
  g_assert_no_error (error);
  return bus;
}

static gchar *
introspect_fresh (const gchar *path)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusConnection) bus = fresh_bus ();
  g_autoptr(GVariant) reply = NULL;
  gchar *xml = NULL;

  reply = g_dbus_connection_call_sync (bus, VIVARIUM_DBUS_NAME, path, "org.freedesktop.DBus.Introspectable",
                                       "Introspect", NULL, G_VARIANT_TYPE ("(s)"), G_DBUS_CALL_FLAGS_NONE,
                                       CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(s)", &xml);
  return xml;
}

/* The positive control of the hidden tree: a peer polkit allows (root),
 * on a connection that has made no call before, sees the child and its
 * interface on its first Introspect (`gdbus call` types its arguments
 * from it). */
static void
test_root_introspects_children (void)
{
  g_autofree gchar *list = introspect_fresh (VIVARIUM_DBUS_PATH_IMAGES);
  g_autofree gchar *child = introspect_fresh (VIVARIUM_DBUS_PATH_IMAGES "/" IMAGE);

  g_assert_nonnull (strstr (list, "<node name=\"" IMAGE "\""));
  g_assert_nonnull (strstr (child, "<interface name=\"" VIVARIUM_DBUS_IFACE_PREFIX ".Image\""));
  g_assert_nonnull (strstr (child, "<method name=\"Freeze\""));
}

static void
test_user_refused_everything (void)
{
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  const gchar *argv[] = { self, "--client", NULL };
  g_autofree gchar *out = run_as_user (argv);
  g_auto(GStrv) lines = g_strsplit (g_strstrip (out), "\n", -1);
  guint calls = 0;

  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit (lines[i], "\t", 2);
    g_assert_nonnull (f[1]);
    if (g_str_has_prefix (f[0], "call ")) {
      calls++;
      if (g_strcmp0 (f[1], ERR_NOT_AUTH) != 0)
        fail_and_tell ("%s as an unprivileged user: expected %s, got %s", f[0] + 5, ERR_NOT_AUTH, f[1]);
    } else if (g_str_has_prefix (f[0], "introspect ")) {
      const gchar *path = f[0] + strlen ("introspect ");
      if (strstr (f[1], IMAGE) != NULL)
        fail_and_tell ("Introspect of %s names the image: %s", path, f[1]);
      if (g_strcmp0 (path, VIVARIUM_DBUS_PATH) != 0 && strstr (f[1], VIVARIUM_DBUS_IFACE_PREFIX ".Image") != NULL)
        fail_and_tell ("Introspect of %s shows the image's interface: %s", path, f[1]);
    }
  }
  g_test_message ("%u calls refused", calls);
  g_assert_cmpuint (calls, >, 20);
}

/* --- signals --------------------------------------------------------------- */

static void
root_signal_cb (GDBusConnection *connection, const gchar *sender, const gchar *path, const gchar *iface,
                const gchar *name, GVariant *params, gpointer user_data)
{
  GString *seen = user_data;
  g_autofree gchar *text = g_variant_print (params, FALSE);

  g_string_append_printf (seen, "%s %s.%s %s\n", path, iface, name, text);
}

static gboolean
file_contains (const gchar *path, const gchar *needle)
{
  g_autofree gchar *text = NULL;

  return g_file_get_contents (path, &text, NULL, NULL) && strstr (text, needle) != NULL;
}

/* @argv as the test user, its output into @out_path, until it prints @ready. */
static GPid
start_as_user (const gchar *const *command, const gchar *out_path, const gchar *ready)
{
  const gchar *user = require_env ("VIVARIUM_TEST_USER");
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) argv = NULL;
  g_autoptr(GError) error = NULL;
  int fd = g_open (out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GPid pid = 0;

  g_strv_builder_add_many (b, "setpriv", "--reuid", user, "--regid", user, "--init-groups", NULL);
  g_strv_builder_addv (b, (const gchar **) command);
  argv = g_strv_builder_end (b);
  g_assert_cmpint (fd, >=, 0);
  g_spawn_async_with_fds (NULL, argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                          NULL, NULL, &pid, -1, fd, fd, &error);
  close (fd);
  g_assert_no_error (error);
  for (guint i = 0; i < WAIT_STEPS && !file_contains (out_path, ready); i++)
    g_usleep (WAIT_STEP_US);
  g_assert_true (file_contains (out_path, ready));
  return pid;
}

static GPid
start_user_monitor (const gchar *out_path)
{
  const gchar *argv[] = { "gdbus", "monitor", "--system", "--dest", VIVARIUM_DBUS_NAME, NULL };

  /* It prints the owner once its match rule and name watch are in place. */
  return start_as_user (argv, out_path, "is owned by");
}

static void
stop_pid (GPid pid)
{
  int status = 0;

  kill (pid, SIGTERM);
  waitpid (pid, &status, 0);
  g_spawn_close_pid (pid);
}

static void
spin_for (guint ms)
{
  gint64 until = g_get_monotonic_time () + ms * 1000;

  while (g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE) || (g_usleep (10000), TRUE);
}

static void
root_delete_image (GDBusConnection *bus, const gchar *name)
{
  g_autofree gchar *path = g_strconcat (VIVARIUM_DBUS_PATH_IMAGES "/", name, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_sync (bus, VIVARIUM_DBUS_NAME, path,
                                                           VIVARIUM_DBUS_IFACE_PREFIX ".Image", "Delete", NULL, NULL,
                                                           G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
}

static void
root_import (GDBusConnection *bus, const gchar *name)
{
  g_autofree gchar *disk = g_build_filename (require_env ("VIVARIUM_TEST_RUN_DIR"), "import.qcow2", NULL);
  const gchar *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", disk, "16M", NULL };
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;
  int fd;

  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  fd = open (disk, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (g_unix_fd_list_append (fds, fd, NULL), ==, 0);
  close (fd);
  reply = g_dbus_connection_call_with_unix_fd_list_sync (bus, VIVARIUM_DBUS_NAME, VIVARIUM_DBUS_PATH,
                                                         VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ImportImage",
                                                         g_variant_new ("(sh)", name, 0), NULL,
                                                         G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, fds, NULL, NULL,
                                                         &error);
  g_assert_no_error (error);
}

static void
root_import_and_build (GDBusConnection *bus)
{
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;

  root_import (bus, IMPORTED);
  reply = g_dbus_connection_call_sync (bus, VIVARIUM_DBUS_NAME, VIVARIUM_DBUS_PATH,
                                       VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "BuildImage",
                                       g_variant_new ("(ss)", RECIPE, BUILT), G_VARIANT_TYPE ("(o)"),
                                       G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
}

/* The user subscribes to everything our name sends (a match rule on it);
 * root imports and deletes an image (ImageAdded, ImageRemoved) and starts a
 * build that fails at once (the task's PropertiesChanged, Progress,
 * Finished). Root hears them, the user hears nothing. */
static void
test_user_hears_nothing (void)
{
  g_autofree gchar *out = g_build_filename (require_env ("VIVARIUM_TEST_RUN_DIR"), "user-monitor.txt", NULL);
  g_autoptr(GDBusConnection) bus = fresh_bus ();
  g_autoptr(GDBusConnection) bus2 = fresh_bus ();
  g_autoptr(GString) root_seen = g_string_new (NULL);
  g_autoptr(GString) root2_seen = g_string_new (NULL);
  g_autofree gchar *user_seen = NULL;
  guint id, id2;
  GPid monitor;

  monitor = start_user_monitor (out);
  id = g_dbus_connection_signal_subscribe (bus, VIVARIUM_DBUS_NAME, NULL, NULL, NULL, NULL,
                                           G_DBUS_SIGNAL_FLAGS_NONE, root_signal_cb, root_seen, NULL);
  id2 = g_dbus_connection_signal_subscribe (bus2, VIVARIUM_DBUS_NAME, NULL, NULL, NULL, NULL,
                                            G_DBUS_SIGNAL_FLAGS_NONE, root_signal_cb, root2_seen, NULL);
  /* Each root connection's first call is the one that causes the signal:
   * one authorized call must be enough to hear it, also when the daemon
   * emits it before replying (Delete's ImageRemoved). */
  root_import_and_build (bus);
  root_delete_image (bus2, IMPORTED);
  /* The failed build's final property change (a Task's or, once renamed,
   * a Job's State) is the last thing root hears. */
  for (guint i = 0; i < WAIT_STEPS && strstr (root_seen->str, "'State': <'failed'>") == NULL; i++)
    spin_for (50);
  spin_for (500);   /* anything sent to the user as well has arrived by now */
  stop_pid (monitor);
  g_dbus_connection_signal_unsubscribe (bus, id);
  g_dbus_connection_signal_unsubscribe (bus2, id2);
  g_test_message ("root's second connection heard:\n%s", root2_seen->str);
  g_assert_nonnull (strstr (root2_seen->str, "ImageRemoved"));
  g_file_get_contents (out, &user_seen, NULL, NULL);
  g_test_message ("root heard:\n%s", root_seen->str);
  g_test_message ("the user's monitor printed:\n%s", user_seen);
  g_assert_nonnull (strstr (root_seen->str, "ImageAdded"));
  g_assert_nonnull (strstr (root_seen->str, IMPORTED));
  g_assert_nonnull (strstr (root_seen->str, "'State': <'failed'>"));
  g_assert_nonnull (strstr (root_seen->str, "org.freedesktop.DBus.Properties.PropertiesChanged"));
  if (strstr (user_seen, IMPORTED) != NULL || strstr (user_seen, "Image") != NULL ||
      strstr (user_seen, VIVARIUM_DBUS_PATH "/") != NULL || strstr (user_seen, "PropertiesChanged") != NULL)
    g_test_fail_printf ("an unprivileged subscriber heard root's work:\n%s", user_seen);
}


static guint32 name_owner_pid (const gchar *name);

/* --- polkit details ------------------------------------------------------------ */

#define ACTION_READ   VIVARIUM_POLKIT_PREFIX "read-status"
#define RULES_FILE    "50-vivarium-boundary.rules"

static gboolean
run_ok (const gchar *const *argv)
{
  gint status = -1;

  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, NULL);
  return g_spawn_check_wait_status (status, NULL);
}

/* Asks polkitd about its own (non-root) process with a detail only the
 * rules file of @generation answers YES to: then that file is loaded. */
static gboolean
rules_generation_loaded (guint generation)
{
  const gchar *pk[] = { "pkaction", "--action-id", ACTION_READ, NULL };
  g_autofree gchar *pid = NULL;
  g_autofree gchar *gen = g_strdup_printf ("%u", generation);

  if (!run_ok (pk))   /* also activates polkitd */
    return FALSE;
  pid = g_strdup_printf ("%u", name_owner_pid (DBUS_NAME_POLKIT));
  {
    const gchar *argv[] = { "pkcheck", "--action-id", ACTION_READ, "--process", pid,
                            "--detail", "vivarium.test.generation", gen, NULL };
    return run_ok (argv);
  }
}

static void
set_rules (const gchar *body)
{
  static guint generation = 0;
  const gchar *dir = require_env ("VIVARIUM_TEST_RULES_DIR");
  g_autofree gchar *path = g_build_filename (dir, RULES_FILE, NULL);
  g_autofree gchar *tmp = g_build_filename (dir, RULES_FILE ".tmp", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;
  guint i;

  generation++;
  text = g_strdup_printf ("// written by test-boundary, generation %u\n"
                          "polkit.addRule(function(action, subject) {\n"
                          "  var gen = action.lookup(\"vivarium.test.generation\");\n"
                          "  if (gen !== undefined && gen !== null && gen !== \"\")\n"
                          "    return gen == \"%u\" ? polkit.Result.YES : polkit.Result.NO;\n"
                          "});\n%s\n", generation, generation, body);
  g_file_set_contents_full (tmp, text, -1, G_FILE_SET_CONTENTS_NONE, 0644, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_rename (tmp, path), ==, 0);
  for (i = 0; i < WAIT_STEPS && !rules_generation_loaded (generation); i++)
    g_usleep (WAIT_STEP_US);
  g_assert_cmpuint (i, <, WAIT_STEPS);
}

static gchar *
user_call (const gchar *path, const gchar *method, const gchar *arg1, const gchar *arg2)
{
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  const gchar *argv[] = { self, "--call", path, method, arg1, arg2, NULL };
  g_autofree gchar *out = run_as_user (argv);

  return g_strdup (g_strstrip (out));
}

/* A rule can tell which object and which argument a call is about: the
 * same details a password prompt shows. The user may Verify this one image
 * and build only under this one name; nothing else. */
static void
test_details_reach_polkit (void)
{
  g_autofree gchar *rule = g_strdup_printf (
    "polkit.addRule(function(action, subject) {\n"
    "  if (subject.user != \"%s\") return polkit.Result.NOT_HANDLED;\n"
    "  if (action.id == \"" ACTION_READ "\" && action.lookup(\"vivarium.method\") == \"Verify\" &&\n"
    "      action.lookup(\"vivarium.id\") == \"" IMAGE "\") return polkit.Result.YES;\n"
    "  if (action.id == \"" VIVARIUM_POLKIT_PREFIX "image-build\" && action.lookup(\"vivarium.name\") == \"detailname\" &&\n"
    "      action.lookup(\"vivarium.recipe\") == \"norecipe\") return polkit.Result.YES;\n"
    "});", require_env ("VIVARIUM_TEST_USER"));
  g_autofree gchar *verify = NULL, *list = NULL, *build = NULL, *build_other = NULL;

  set_rules (rule);
  verify = user_call (VIVARIUM_DBUS_PATH_IMAGES "/" IMAGE, "Image.Verify", NULL, NULL);
  list = user_call (VIVARIUM_DBUS_PATH, "Manager.ListImages", NULL, NULL);
  build = user_call (VIVARIUM_DBUS_PATH, "Manager.BuildImage", "norecipe", "detailname");
  build_other = user_call (VIVARIUM_DBUS_PATH, "Manager.BuildImage", "norecipe", "othername");
  set_rules ("// no rule for the test user");
  /* Past the bouncer, the daemon's own refusals: not frozen, no recipe. */
  g_assert_cmpstr (verify, ==, VIVARIUM_DBUS_ERROR_PREFIX ".NotFrozen");
  g_assert_cmpstr (build, ==, VIVARIUM_DBUS_ERROR_PREFIX ".NotFound");
  g_assert_cmpstr (list, ==, ERR_NOT_AUTH);
  g_assert_cmpstr (build_other, ==, ERR_NOT_AUTH);
}

/* --- read grants expire --------------------------------------------------------- */

#define GRANT_IMAGE      "grantimg"
#define READ_GRANT_SEC   6   /* [Daemon] ReadGrantSec=, written before the daemon starts */

/* The user is allowed to read, listens (one call, then only signals), and
 * hears root import an image. polkit then refuses the user: past the
 * grant's lifetime the user hears nothing of root deleting it, though
 * nothing told the daemon. A root connection that only listens all along
 * hears both: a grant still allowed is renewed without a gap. */
static void
test_read_grants_expire (void)
{
  g_autofree gchar *out = g_build_filename (require_env ("VIVARIUM_TEST_RUN_DIR"), "user-listener.txt", NULL);
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree gchar *seconds = g_strdup_printf ("%d", 3 * READ_GRANT_SEC);
  const gchar *listen[] = { self, "--listen", seconds, NULL };
  g_autofree gchar *rule = g_strdup_printf (
    "polkit.addRule(function(action, subject) {\n"
    "  if (subject.user == \"%s\" && action.id == \"" ACTION_READ "\") return polkit.Result.YES;\n"
    "});", require_env ("VIVARIUM_TEST_USER"));
  g_autoptr(GDBusConnection) root = fresh_bus ();
  g_autoptr(GDBusConnection) listener = fresh_bus ();
  g_autoptr(GString) heard = g_string_new (NULL);
  g_autofree gchar *user_heard = NULL;
  g_autofree gchar *r = NULL;
  GPid user;
  guint id;

  set_rules (rule);
  id = g_dbus_connection_signal_subscribe (listener, VIVARIUM_DBUS_NAME, NULL, NULL, NULL, NULL,
                                           G_DBUS_SIGNAL_FLAGS_NONE, root_signal_cb, heard, NULL);
  r = call_outcome (listener, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListImages", NULL,
                    CALL_TIMEOUT_MS, NULL);
  g_assert_cmpstr (r, ==, "OK");
  user = start_as_user (listen, out, "listening (ListImages: OK)");
  root_import (root, GRANT_IMAGE);
  for (guint i = 0; i < WAIT_STEPS && !file_contains (out, "ImageAdded"); i++)
    spin_for (50);
  set_rules ("// no rule for the test user");
  spin_for ((READ_GRANT_SEC + 2) * 1000);
  root_delete_image (root, GRANT_IMAGE);
  for (guint i = 0; i < WAIT_STEPS && strstr (heard->str, "ImageRemoved") == NULL; i++)
    spin_for (50);
  spin_for (500);   /* anything sent to the user as well has arrived by now */
  stop_pid (user);
  g_dbus_connection_signal_unsubscribe (listener, id);
  g_file_get_contents (out, &user_heard, NULL, NULL);
  g_test_message ("the user heard:\n%s", user_heard);
  g_test_message ("root's listener heard:\n%s", heard->str);
  g_assert_nonnull (strstr (user_heard, "ImageAdded"));
  g_assert_null (strstr (user_heard, "ImageRemoved"));
  g_assert_nonnull (strstr (heard->str, "ImageAdded"));
  g_assert_nonnull (strstr (heard->str, "ImageRemoved"));
}

/* Before the first call activates the daemon. */
static void
write_read_grant_config (void)
{
  g_autofree gchar *dir = g_build_filename (require_env ("VIVARIUM_CONFIG_DIR"), "conf.d", NULL);
  g_autofree gchar *path = g_build_filename (dir, "50-test-boundary.conf", NULL);
  g_autofree gchar *text = g_strdup_printf ("[Daemon]\nReadGrantSec=%d\n", READ_GRANT_SEC);
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

/* --- a hung polkitd --------------------------------------------------------- */

static guint32
name_owner_pid (const gchar *name)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  guint32 pid = 0;

  reply = g_dbus_connection_call_sync (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                                       g_variant_new ("(s)", name), G_VARIANT_TYPE ("(u)"),
                                       G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(u)", &pid);
  return pid;
}

/* polkitd is the one this test's bus activated (inside the harness's PID
 * namespace). Stopped, it accepts messages and never answers: the daemon
 * must refuse before the client gives up. */
static void
test_hung_polkit_refuses_in_time (void)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autofree gchar *before = call_outcome (bus, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager",
                                           "ListImages", NULL, CALL_TIMEOUT_MS, NULL);
  g_autofree gchar *during = NULL;
  g_autofree gchar *after = NULL;
  guint32 polkit_pid;

  g_assert_cmpstr (before, ==, "OK");   /* polkitd is up and answering */
  polkit_pid = name_owner_pid (DBUS_NAME_POLKIT);
  g_assert_cmpint (kill ((pid_t) polkit_pid, SIGSTOP), ==, 0);
  during = call_outcome (bus, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListImages", NULL,
                         HUNG_CLIENT_TIMEOUT_MS, NULL);
  g_assert_cmpint (kill ((pid_t) polkit_pid, SIGCONT), ==, 0);
  g_assert_cmpstr (during, ==, ERR_NOT_AUTH);
  after = call_outcome (bus, VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListImages", NULL,
                        CALL_TIMEOUT_MS, NULL);
  g_assert_cmpstr (after, ==, "OK");
}

static void
test_unknown_paths_not_found (void)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  const gchar *paths[] = { VIVARIUM_DBUS_PATH "/no/such/object", VIVARIUM_DBUS_PATH_IMAGES "/nosuchimage",
                           VIVARIUM_DBUS_PATH_SESSIONS "/0123456789ab" };

  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++) {
    g_autofree gchar *r = call_outcome (bus, paths[i], VIVARIUM_DBUS_IFACE_PREFIX ".Image", "Delete", NULL,
                                        CALL_TIMEOUT_MS, NULL);
    g_assert_cmpstr (r, ==, ERR_NOT_FOUND);
  }
}

/* Reading an unknown child of any collection, as root (whom polkit
 * allows), is NotFound too: GDBus answered Properties.Get/GetAll there
 * with its own "No such interface" (InvalidArgument), even under a
 * collection that never had a child. */
static void
test_unknown_children_reads_not_found (void)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  struct { const gchar *collection, *iface, *property; } kinds[] = {
    { VIVARIUM_DBUS_PATH_SESSIONS, VIVARIUM_DBUS_IFACE_PREFIX ".Session", "State" },
    { VIVARIUM_DBUS_PATH_IMAGES, VIVARIUM_DBUS_IFACE_PREFIX ".Image", "Digest" },
    { VIVARIUM_DBUS_PATH_PROJECTS, VIVARIUM_DBUS_IFACE_PREFIX ".Project", "Name" },
    { VIVARIUM_DBUS_PATH_TASKS, VIVARIUM_DBUS_IFACE_PREFIX ".Task", "Outcome" },
    { VIVARIUM_DBUS_PATH_REPORTS, VIVARIUM_DBUS_IFACE_PREFIX ".Report", "Outcome" },
    { VIVARIUM_DBUS_PATH_JOBS, VIVARIUM_DBUS_IFACE_PREFIX ".Job", "Operation" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++) {
    g_autofree gchar *path = g_strconcat (kinds[i].collection, "/nosuchchild", NULL);
    g_autofree gchar *get = call_outcome (bus, path, "org.freedesktop.DBus.Properties", "Get",
                                          g_variant_new ("(ss)", kinds[i].iface, kinds[i].property),
                                          CALL_TIMEOUT_MS, NULL);
    g_autofree gchar *all = call_outcome (bus, path, "org.freedesktop.DBus.Properties", "GetAll",
                                          g_variant_new ("(s)", kinds[i].iface), CALL_TIMEOUT_MS, NULL);
    g_autofree gchar *method = call_outcome (bus, path, VIVARIUM_DBUS_IFACE_PREFIX ".Task", "Cancel", NULL,
                                             CALL_TIMEOUT_MS, NULL);

    g_assert_cmpstr (get, ==, ERR_NOT_FOUND);
    g_assert_cmpstr (all, ==, ERR_NOT_FOUND);
    g_assert_cmpstr (method, ==, ERR_NOT_FOUND);
  }
}

int
main (int argc, char **argv)
{
  if (argc == 2 && g_strcmp0 (argv[1], "--client") == 0)
    return client_main ();
  if (argc >= 4 && g_strcmp0 (argv[1], "--call") == 0)
    return call_main (argc - 2, argv + 2);
  if (argc == 3 && g_strcmp0 (argv[1], "--listen") == 0)
    return listen_main (argv[2]);

  g_test_init (&argc, &argv, NULL);
  if (getuid () != 0)
    g_error ("test-boundary must run as root, through run-in-private-bus.sh");
  require_env ("DBUS_SYSTEM_BUS_ADDRESS");
  require_env ("VIVARIUM_TEST_USER");
  (void) VIVARIUM_ERROR;
  /* Before the first call activates the daemon, which loads images once. */
  prepare_image ();
  write_read_grant_config ();

  g_test_add_func ("/boundary/root-sees-the-image", test_root_sees_the_image);
  g_test_add_func ("/boundary/root-introspects-children", test_root_introspects_children);
  g_test_add_func ("/boundary/user-refused-everything", test_user_refused_everything);
  g_test_add_func ("/boundary/user-hears-nothing", test_user_hears_nothing);
  g_test_add_func ("/boundary/details-reach-polkit", test_details_reach_polkit);
  g_test_add_func ("/boundary/read-grants-expire", test_read_grants_expire);
  g_test_add_func ("/boundary/unknown-paths-not-found", test_unknown_paths_not_found);
  g_test_add_func ("/boundary/unknown-children-reads-not-found", test_unknown_children_reads_not_found);
  g_test_add_func ("/boundary/hung-polkit-refuses-in-time", test_hung_polkit_refuses_in_time);
  return g_test_run ();
}
