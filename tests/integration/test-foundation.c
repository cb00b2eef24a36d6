/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The foundation integration tests: the real vivariumd, activated by a real
 * dbus-daemon on a private system bus, asking a real polkitd. Run only
 * through run-in-private-bus.sh, which provides the bus, polkit's
 * directories and a test user (see README.md in this directory).
 *
 * The cases run in the order they are added and share one daemon: the
 * first one proves activation, so it must see the bus before anything else
 * has touched the daemon's name.
 */
#define G_LOG_DOMAIN "TestFoundation"

#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-dbus-generated.h"

#define DBUS_NAME_POLKIT  "org.freedesktop.PolicyKit1"
#define ACTION_READ       VIVARIUM_POLKIT_PREFIX "read-status"
#define ERROR_NOT_AUTH    VIVARIUM_DBUS_ERROR_PREFIX ".NotAuthorized"
#define POLICY_FILE       "org.vivarium.Vivarium1.policy"
#define POLKIT_SERVICE    DBUS_NAME_POLKIT ".service"
#define RULES_FILE        "50-vivarium-test.rules"
#define CALL_TIMEOUT_MS   30000

/* Waits for state that another process changes on its own schedule
 * (polkitd reloading a directory, a process exiting). A bound, not a
 * deadline: no assertion depends on how fast it happens. */
#define WAIT_STEPS        600
#define WAIT_STEP_US      50000

static const gchar *const list_methods[] = { "ListSessions", "ListImages", "ListProjects" };

typedef struct {
  gboolean  ok;
  gint      n_items;     /* for an "(ao)" reply, its length; else -1 */
  gchar    *error_name;  /* the D-Bus error name when !ok */
  gchar    *message;
} CallResult;

static void
call_result_free (CallResult *result)
{
  g_free (result->error_name);
  g_free (result->message);
  g_free (result);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CallResult, call_result_free)

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

static gboolean
name_has_owner (const gchar *name)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  gboolean has_owner = FALSE;

  reply = g_dbus_connection_call_sync (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameHasOwner",
                                       g_variant_new ("(s)", name), G_VARIANT_TYPE ("(b)"),
                                       G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(b)", &has_owner);
  return has_owner;
}

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
  g_assert_cmpuint (pid, >, 0);
  return pid;
}

static gboolean
name_is_activatable (const gchar *name)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;
  g_autofree const gchar **names = NULL;

  reply = g_dbus_connection_call_sync (bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "ListActivatableNames",
                                       NULL, G_VARIANT_TYPE ("(as)"),
                                       G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(^a&s)", &names);
  return g_strv_contains (names, name);
}

static gchar *
process_exe (guint32 pid)
{
  g_autofree gchar *link = g_strdup_printf ("/proc/%u/exe", pid);
  g_autoptr(GError) error = NULL;
  gchar *target = g_file_read_link (link, &error);

  g_assert_no_error (error);
  return target;
}

/* Keeps the D-Bus error name, which is what the contract promises; the
 * message is for people and may change. */
static CallResult *
call_result_from (GVariant *reply, GError *error)
{
  CallResult *result = g_new0 (CallResult, 1);

  result->ok = reply != NULL;
  result->n_items = -1;
  if (reply != NULL && g_variant_is_of_type (reply, G_VARIANT_TYPE ("(ao)"))) {
    g_autoptr(GVariant) paths = g_variant_get_child_value (reply, 0);
    result->n_items = (gint) g_variant_n_children (paths);
  }
  if (error != NULL) {
    result->error_name = g_dbus_error_get_remote_error (error);
    result->message = g_strdup (error->message);
  }
  return result;
}

static CallResult *
call_manager (const gchar *path, const gchar *interface, const gchar *method, GVariant *params)
{
  g_autoptr(GDBusConnection) bus = system_bus ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = NULL;

  reply = g_dbus_connection_call_sync (bus, VIVARIUM_DBUS_NAME, path, interface, method, params,
                                       NULL, G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  return call_result_from (reply, error);
}

static CallResult *
call_list (const gchar *method)
{
  return call_manager (VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", method, NULL);
}

/* Runs this same binary in --client mode as the test user: a separate
 * process with the user's uid, so polkit sees a real unprivileged caller. */
static CallResult *
call_as_user (const gchar *what)
{
  const gchar *user = require_env ("VIVARIUM_TEST_USER");
  g_autofree gchar *self = g_file_read_link ("/proc/self/exe", NULL);
  const gchar *argv[] = { "setpriv", "--reuid", user, "--regid", user, "--init-groups",
                          self, "--client", what, NULL };
  g_autofree gchar *out = NULL;
  g_autofree gchar *err = NULL;
  g_auto(GStrv) fields = NULL;
  g_autoptr(GError) error = NULL;
  gint status = 0;
  CallResult *result = g_new0 (CallResult, 1);

  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                &out, &err, &status, &error);
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, &error))
    g_error ("client as %s failed: %s\n%s", user, error->message, err);
  fields = g_strsplit (g_strstrip (out), " ", 3);
  g_assert_nonnull (fields[0]);
  result->ok = g_strcmp0 (fields[0], "OK") == 0;
  result->n_items = -1;
  if (result->ok && fields[1] != NULL)
    result->n_items = atoi (fields[1]);
  if (!result->ok) {
    g_assert_cmpstr (fields[0], ==, "ERROR");
    g_assert_nonnull (fields[1]);
    result->error_name = g_strdup (fields[1]);
    result->message = g_strdup (fields[2]);
  }
  return result;
}

/* A wrong verdict fails the case but lets the rest run, so one report shows
 * every refusal that did not happen; broken plumbing still aborts. */
static void
assert_allowed (const CallResult *result, const gchar *what)
{
  if (!result->ok)
    g_test_fail_printf ("%s: expected success, got %s: %s", what, result->error_name, result->message);
}

static void
assert_refused (const CallResult *result, const gchar *what)
{
  if (result->ok)
    g_test_fail_printf ("%s: expected %s, but the call succeeded", what, ERROR_NOT_AUTH);
  else if (g_strcmp0 (result->error_name, ERROR_NOT_AUTH) != 0)
    g_test_fail_printf ("%s: expected %s, got %s: %s", what, ERROR_NOT_AUTH, result->error_name, result->message);
}

static gchar *
run_capture (const gchar *const *argv, gint *exit_status)
{
  g_autofree gchar *out = NULL;
  g_autoptr(GError) error = NULL;
  gint status = 0;

  g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  *exit_status = WIFEXITED (status) ? WEXITSTATUS (status) : -1;
  return g_steal_pointer (&out);
}

/* polkitd reloads its directories on its own; ask it (pkaction) whether it
 * has seen the change before relying on it. */
static gboolean
action_is_registered (void)
{
  const gchar *argv[] = { "pkaction", "--action-id", ACTION_READ, NULL };
  g_autofree gchar *out = NULL;
  gint status = -1;

  out = run_capture (argv, &status);
  return status == 0;
}

/* Asks polkitd about a non-root subject (polkitd's own process) with a
 * detail that only the rules file of @generation answers YES to, so a YES
 * means that exact file is loaded. */
static gboolean
rules_generation_loaded (guint generation)
{
  g_autofree gchar *pid = g_strdup_printf ("%u", name_owner_pid (DBUS_NAME_POLKIT));
  g_autofree gchar *gen = g_strdup_printf ("%u", generation);
  const gchar *argv[] = { "pkcheck", "--action-id", ACTION_READ, "--process", pid,
                          "--detail", "vivarium.test.generation", gen, NULL };
  g_autofree gchar *out = NULL;
  gint status = -1;

  out = run_capture (argv, &status);
  return status == 0;
}

typedef gboolean (*Condition) (gpointer user_data);

static void
wait_until (Condition condition, gpointer user_data, const gchar *what)
{
  for (guint i = 0; i < WAIT_STEPS; i++) {
    if (condition (user_data))
      return;
    g_usleep (WAIT_STEP_US);
  }
  g_error ("gave up waiting for %s", what);
}

static gboolean
cond_action_registered (gpointer user_data)
{
  return action_is_registered () == GPOINTER_TO_INT (user_data);
}

static gboolean
cond_rules_loaded (gpointer user_data)
{
  /* pkaction activates polkitd if it is not running, so that the probe has
   * a process to ask about. */
  if (!action_is_registered ())
    return FALSE;
  return rules_generation_loaded (GPOINTER_TO_UINT (user_data));
}

static gboolean
cond_name_gone (gpointer user_data)
{
  return !name_has_owner (user_data);
}

static gboolean
cond_activatable (gpointer user_data)
{
  return name_is_activatable (DBUS_NAME_POLKIT) == GPOINTER_TO_INT (user_data);
}

/* Replaces the test's rules file. Every version starts with a probe rule for
 * its own generation number, so the test knows when polkitd has it. The
 * file is renamed into place so polkitd never reads half of it. */
static void
set_rules (const gchar *body)
{
  static guint generation = 0;
  const gchar *dir = require_env ("VIVARIUM_TEST_RULES_DIR");
  g_autofree gchar *path = g_build_filename (dir, RULES_FILE, NULL);
  g_autofree gchar *tmp = g_build_filename (dir, RULES_FILE ".tmp", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;

  generation++;
  text = g_strdup_printf ("// written by test-foundation, generation %u\n"
                          "polkit.addRule(function(action, subject) {\n"
                          "  var gen = action.lookup(\"vivarium.test.generation\");\n"
                          "  if (gen !== undefined && gen !== null && gen !== \"\")\n"
                          "    return gen == \"%u\" ? polkit.Result.YES : polkit.Result.NO;\n"
                          "});\n%s\n",
                          generation, generation, body);
  g_file_set_contents_full (tmp, text, -1, G_FILE_SET_CONTENTS_NONE, 0644, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_rename (tmp, path), ==, 0);
  wait_until (cond_rules_loaded, GUINT_TO_POINTER (generation), "polkitd to load the new rules");
}

static gchar *
rule_for_test_user (const gchar *result)
{
  return g_strdup_printf ("polkit.addRule(function(action, subject) {\n"
                          "  if (action.id == \"%s\" && subject.user == \"%s\")\n"
                          "    return %s;\n"
                          "});",
                          ACTION_READ, require_env ("VIVARIUM_TEST_USER"), result);
}

static void
move_file (const gchar *from_dir, const gchar *to_dir, const gchar *name)
{
  g_autofree gchar *from = g_build_filename (from_dir, name, NULL);
  g_autofree gchar *to = g_build_filename (to_dir, name, NULL);

  if (g_rename (from, to) != 0)
    g_error ("cannot move %s to %s: %s", from, to, g_strerror (errno));
}

/* ------------------------------------------------------------------------ */

static void
test_activation (void)
{
  const gchar *daemon = require_env ("VIVARIUM_TEST_DAEMON");
  g_autofree gchar *expected = g_canonicalize_filename (daemon, NULL);
  g_autofree gchar *exe = NULL;
  g_autoptr(CallResult) result = NULL;
  guint32 pid;

  g_assert_false (name_has_owner (VIVARIUM_DBUS_NAME));
  g_assert_true (name_is_activatable (VIVARIUM_DBUS_NAME));

  result = call_list ("ListSessions");
  assert_allowed (result, "root ListSessions (activating call)");

  g_assert_true (name_has_owner (VIVARIUM_DBUS_NAME));
  pid = name_owner_pid (VIVARIUM_DBUS_NAME);
  exe = process_exe (pid);
  g_assert_cmpstr (exe, ==, expected);
}

static void
assert_lists_empty_as_root (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(GDBusConnection) bus = system_bus ();
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) reply = NULL;
    g_autoptr(GVariant) paths = NULL;

    reply = g_dbus_connection_call_sync (bus, VIVARIUM_DBUS_NAME, VIVARIUM_DBUS_PATH,
                                         VIVARIUM_DBUS_IFACE_PREFIX ".Manager", list_methods[i], NULL,
                                         G_VARIANT_TYPE ("(ao)"), G_DBUS_CALL_FLAGS_NONE,
                                         CALL_TIMEOUT_MS, NULL, &error);
    g_assert_no_error (error);
    paths = g_variant_get_child_value (reply, 0);
    g_assert_cmpuint (g_variant_n_children (paths), ==, 0);
  }
}

static void
test_root_allowed (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = NULL;
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GVariant) value = NULL;

  manager = vivarium_dbus_manager_proxy_new_for_bus_sync (G_BUS_TYPE_SYSTEM, G_DBUS_PROXY_FLAGS_NONE,
                                                          VIVARIUM_DBUS_NAME, VIVARIUM_DBUS_PATH,
                                                          NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (vivarium_dbus_manager_get_version (manager), ==, PACKAGE_VERSION);

  /* The cached value above came from GetAll; ask once more explicitly. */
  reply = g_dbus_proxy_call_sync (G_DBUS_PROXY (manager), "org.freedesktop.DBus.Properties.Get",
                                  g_variant_new ("(ss)", VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "Version"),
                                  G_DBUS_CALL_FLAGS_NONE, CALL_TIMEOUT_MS, NULL, &error);
  g_assert_no_error (error);
  g_variant_get (reply, "(v)", &value);
  g_assert_cmpstr (g_variant_get_string (value, NULL), ==, PACKAGE_VERSION);

  assert_lists_empty_as_root ();
}

static void
test_user_granted_by_rule (void)
{
  g_autofree gchar *rule = rule_for_test_user ("polkit.Result.YES");

  g_autoptr(CallResult) version = NULL;

  set_rules (rule);
  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(CallResult) result = call_as_user (list_methods[i]);
    assert_allowed (result, list_methods[i]);
    if (result->ok)
      g_assert_cmpint (result->n_items, ==, 0);
  }
  version = call_as_user ("Version");
  assert_allowed (version, "Version");
}

static void
test_user_without_rule_refused (void)
{
  set_rules ("// no rule for the test user");
  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(CallResult) result = call_as_user (list_methods[i]);
    assert_refused (result, list_methods[i]);
  }
}

static void
test_user_denied_by_rule_refused (void)
{
  g_autofree gchar *rule = rule_for_test_user ("polkit.Result.NO");

  set_rules (rule);
  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(CallResult) result = call_as_user (list_methods[i]);
    assert_refused (result, list_methods[i]);
  }
  set_rules ("// no rule for the test user");
}

/* polkitd answers "yes" for uid 0 before it reads any rule, so a rules file
 * cannot refuse root; what can make polkit refuse root is an action it does
 * not know. A daemon that trusted uid 0 instead of asking would still
 * allow these calls. */
static void
test_root_refused_when_action_unknown (void)
{
  const gchar *actions = require_env ("VIVARIUM_TEST_ACTIONS_DIR");
  const gchar *run = require_env ("VIVARIUM_TEST_RUN_DIR");

  move_file (actions, run, POLICY_FILE);
  wait_until (cond_action_registered, GINT_TO_POINTER (FALSE), "polkitd to drop the actions");
  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(CallResult) result = call_list (list_methods[i]);
    assert_refused (result, list_methods[i]);
  }

  move_file (run, actions, POLICY_FILE);
  wait_until (cond_action_registered, GINT_TO_POINTER (TRUE), "polkitd to load the actions again");
  assert_lists_empty_as_root ();
}

/* polkitd gone and not startable: every check fails, and a failed check
 * must refuse, for root too. */
static void
test_root_refused_when_polkit_down (void)
{
  const gchar *services = require_env ("VIVARIUM_TEST_SERVICES_DIR");
  const gchar *run = require_env ("VIVARIUM_TEST_RUN_DIR");
  guint32 daemon_pid = name_owner_pid (VIVARIUM_DBUS_NAME);
  guint32 polkit_pid;

  /* Make sure polkitd is running, so there is something to kill. */
  g_assert_true (action_is_registered ());
  polkit_pid = name_owner_pid (DBUS_NAME_POLKIT);

  move_file (services, run, POLKIT_SERVICE);
  wait_until (cond_activatable, GINT_TO_POINTER (FALSE), "the bus to forget polkit's service file");
  g_assert_cmpint (kill ((pid_t) polkit_pid, SIGTERM), ==, 0);
  wait_until (cond_name_gone, (gpointer) DBUS_NAME_POLKIT, "polkitd to leave the bus");

  for (gsize i = 0; i < G_N_ELEMENTS (list_methods); i++) {
    g_autoptr(CallResult) result = call_list (list_methods[i]);
    assert_refused (result, list_methods[i]);
  }
  g_assert_cmpuint (name_owner_pid (VIVARIUM_DBUS_NAME), ==, daemon_pid);

  move_file (run, services, POLKIT_SERVICE);
  wait_until (cond_activatable, GINT_TO_POINTER (TRUE), "the bus to see polkit's service file again");
}

/* After polkitd comes back (a package upgrade restarts it), the daemon
 * must ask the new one rather than stay stuck on the old connection. */
static void
test_polkit_restart_recovers (void)
{
  guint32 daemon_pid = name_owner_pid (VIVARIUM_DBUS_NAME);

  g_assert_true (action_is_registered ());  /* activates the new polkitd */
  assert_lists_empty_as_root ();
  g_assert_cmpuint (name_owner_pid (VIVARIUM_DBUS_NAME), ==, daemon_pid);
}

static void
test_unknown_object_and_interface (void)
{
  guint32 daemon_pid = name_owner_pid (VIVARIUM_DBUS_NAME);
  struct {
    const gchar *path;
    const gchar *interface;
    const gchar *method;
  } bad[] = {
    { VIVARIUM_DBUS_PATH "/no/such/object", VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListSessions" },
    { VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".NoSuchInterface", "ListSessions" },
    { VIVARIUM_DBUS_PATH, VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "NoSuchMethod" },
    { "/", VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "ListSessions" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(CallResult) result = call_manager (bad[i].path, bad[i].interface, bad[i].method, NULL);

    g_test_message ("%s %s.%s -> %s", bad[i].path, bad[i].interface, bad[i].method, result->error_name);
    g_assert_false (result->ok);
    g_assert_nonnull (result->error_name);
  }
  g_assert_cmpuint (name_owner_pid (VIVARIUM_DBUS_NAME), ==, daemon_pid);
  assert_lists_empty_as_root ();
}

/* ------------------------------------------------------------------------ */

/* --client WHAT: one call, as whoever runs us; prints "OK" or
 * "OK <items>" (-1 when the reply is not a list) or
 * "ERROR <D-Bus error name> <message>"; exits 0 when the call was made. */
static int
client_main (const gchar *what)
{
  g_autoptr(CallResult) result = NULL;

  if (g_strcmp0 (what, "Version") == 0)
    result = call_manager (VIVARIUM_DBUS_PATH, "org.freedesktop.DBus.Properties", "Get",
                           g_variant_new ("(ss)", VIVARIUM_DBUS_IFACE_PREFIX ".Manager", "Version"));
  else
    result = call_list (what);
  if (result->ok)
    g_print ("OK %d\n", result->n_items);
  else
    g_print ("ERROR %s %s\n", result->error_name != NULL ? result->error_name : "(none)", result->message);
  return 0;
}

int
main (int argc, char **argv)
{
  if (argc == 3 && g_strcmp0 (argv[1], "--client") == 0)
    return client_main (argv[2]);

  g_test_init (&argc, &argv, NULL);
  if (getuid () != 0)
    g_error ("test-foundation must run as root, through run-in-private-bus.sh");
  require_env ("DBUS_SYSTEM_BUS_ADDRESS");
  require_env ("VIVARIUM_TEST_USER");
  /* The registered domain makes remote errors come back typed, as they do
   * for every real client. */
  (void) VIVARIUM_ERROR;

  g_test_add_func ("/foundation/activation", test_activation);
  g_test_add_func ("/foundation/root-allowed", test_root_allowed);
  g_test_add_func ("/foundation/user-granted-by-rule", test_user_granted_by_rule);
  g_test_add_func ("/foundation/user-without-rule-refused", test_user_without_rule_refused);
  g_test_add_func ("/foundation/user-denied-by-rule-refused", test_user_denied_by_rule_refused);
  g_test_add_func ("/foundation/root-refused-when-action-unknown", test_root_refused_when_action_unknown);
  g_test_add_func ("/foundation/root-refused-when-polkit-down", test_root_refused_when_polkit_down);
  g_test_add_func ("/foundation/polkit-restart-recovers", test_polkit_restart_recovers);
  g_test_add_func ("/foundation/unknown-object-and-interface", test_unknown_object_and_interface);
  return g_test_run ();
}
