/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <gio/gio.h>

#include "vivarium-call.h"
#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-qemu-command.h"

static void
test_name_validate (void)
{
  const gchar *good[] = { "tiny", "debian-12", "a", "x_y.z", "0abc", NULL };
  const gchar *bad[] = { "", "-lead", ".hidden", "a/b", "..", "a..b", "tab\there", "nl\n", "sp ace",
                         "caf\xc3\xa9", "x;rm", NULL };
  g_autofree gchar *longest = g_strnfill (VIVARIUM_NAME_MAX, 'a');
  g_autofree gchar *too_long = g_strnfill (VIVARIUM_NAME_MAX + 1, 'a');

  for (guint i = 0; good[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_assert_true (vivarium_name_validate ("image", good[i], &error));
    g_assert_no_error (error);
  }
  for (guint i = 0; bad[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_assert_false (vivarium_name_validate ("image", bad[i], &error));
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull (strstr (error->message, "image"));
  }
  g_assert_true (vivarium_name_validate ("image", longest, NULL));
  g_assert_false (vivarium_name_validate ("image", too_long, NULL));
}

static void
test_argv_env_validate (void)
{
  const gchar *ok_argv[] = { "uname", "-r", NULL };
  const gchar *empty_prog[] = { "", NULL };
  const gchar *empty[] = { NULL };
  const gchar *bad_utf8[] = { "echo", "\xff\xfe", NULL };
  const gchar *ok_env[] = { "A=1", "B=", NULL };
  const gchar *bad_env[] = { "NOEQUALS", NULL };
  const gchar *bad_env2[] = { "=value", NULL };
  g_autoptr(GPtrArray) many = g_ptr_array_new ();
  GError *error = NULL;

  g_assert_true (vivarium_argv_validate (ok_argv, NULL));
  g_assert_false (vivarium_argv_validate (empty_prog, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (vivarium_argv_validate (empty, NULL));
  g_assert_false (vivarium_argv_validate (bad_utf8, NULL));
  for (guint i = 0; i <= VIVARIUM_ARGV_MAX; i++)
    g_ptr_array_add (many, (gpointer) "x");
  g_ptr_array_add (many, NULL);
  g_assert_false (vivarium_argv_validate ((const gchar * const *) many->pdata, NULL));
  g_assert_true (vivarium_env_validate (ok_env, NULL));
  g_assert_true (vivarium_env_validate (NULL, NULL));
  g_assert_false (vivarium_env_validate (bad_env, NULL));
  g_assert_false (vivarium_env_validate (bad_env2, NULL));
}

static void
test_guest_path_validate (void)
{
  g_assert_true (vivarium_guest_path_validate ("/etc/hostname", NULL));
  g_assert_false (vivarium_guest_path_validate ("relative", NULL));
  g_assert_false (vivarium_guest_path_validate ("/bad\x1b[2J", NULL));
  g_assert_false (vivarium_guest_path_validate ("", NULL));
}

/* The registered domain is what lets a client see a typed error: a GError
 * must survive the trip to a D-Bus name and back. */
static void
test_error_mapping (void)
{
  for (gint code = 0; code < VIVARIUM_N_ERRORS; code++) {
    g_autoptr(GError) error = g_error_new (VIVARIUM_ERROR, code, "message %d", code);
    g_autofree gchar *name = g_dbus_error_encode_gerror (error);
    g_autoptr(GError) back = g_dbus_error_new_for_dbus_error (name, "x");

    g_assert_true (g_str_has_prefix (name, "org.vivarium.Vivarium1.Error."));
    g_assert_cmpstr (name, ==, vivarium_error_code_to_name (code));
    g_assert_error (back, VIVARIUM_ERROR, code);
  }
  {
    g_autoptr(GError) error = g_dbus_error_new_for_dbus_error ("org.vivarium.Vivarium1.Error.NotAuthorized", "no");
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED);
  }
}

static void
test_escape_untrusted (void)
{
  const gchar raw[] = "ok\n\x1b[31mTRUSTED\r\x07\x00" "end";
  gboolean truncated = TRUE;
  g_autofree gchar *escaped = vivarium_escape_untrusted (raw, sizeof raw - 1, 1024, &truncated);
  g_autofree gchar *capped = vivarium_escape_untrusted ("abcdef", 6, 3, &truncated);

  g_assert_cmpstr (escaped, ==, "ok\n\\x1b[31mTRUSTED\\x0d\\x07\\x00end");
  g_assert_cmpstr (capped, ==, "abc");
  g_assert_true (truncated);
}

static void
test_denylist (void)
{
  gsize n;
  const VivariumDenyEntry *list = vivarium_denylist_builtin (&n);
  g_autoptr(GPtrArray) strings = vivarium_denylist_to_strings ();
  const gchar *must[] = { "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                          "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32", "::1/128", "fe80::/10",
                          "fc00::/7", "ff00::/8", "0.0.0.0/8", "64:ff9b::/96", NULL };

  g_assert_cmpuint (n, ==, strings->len);
  for (guint i = 0; must[i] != NULL; i++) {
    gboolean found = FALSE;
    for (guint j = 0; j < strings->len; j++)
      found |= g_strcmp0 (g_ptr_array_index (strings, j), must[i]) == 0;
    g_assert_true (found);
  }
  for (gsize i = 0; i < n; i++) {
    g_autoptr(GInetAddress) addr = NULL;
    guint prefix;
    g_assert_true (vivarium_cidr_parse (g_ptr_array_index (strings, i), &addr, &prefix, NULL));
    g_assert_cmpuint (prefix, ==, list[i].prefix);
    g_assert_cmpint (g_inet_address_get_family (addr), ==, list[i].family);
  }
  g_assert_false (vivarium_cidr_parse ("10.0.0.0/33", &(GInetAddress *){ NULL }, &(guint){ 0 }, NULL));
  g_assert_false (vivarium_cidr_parse ("not-an-ip", &(GInetAddress *){ NULL }, &(guint){ 0 }, NULL));
}

static gboolean
strv_has_pair (GStrv argv, const gchar *option, const gchar *value)
{
  for (guint i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++) {
    if (g_strcmp0 (argv[i], option) == 0 && g_strcmp0 (argv[i + 1], value) == 0)
      return TRUE;
  }
  return FALSE;
}

static void
test_qemu_command (void)
{
  VdQemuCommand cmd = {
    .session_id = "abc123", .overlay = "/var/lib/vivarium/sessions/abc123/overlay.qcow2",
    .kernel = "/k", .initrd = "/i", .cmdline = "console=ttyS0", .runtime_dir = "/run/vivarium/sessions/abc123",
    .memory_mib = 512, .cpus = 2, .kvm = FALSE,
  };
  g_auto(GStrv) argv = vd_qemu_command_build (&cmd);

  g_assert_true (g_strv_contains ((const gchar * const *) argv, "-nodefaults"));
  g_assert_true (g_strv_contains ((const gchar * const *) argv, "-no-user-config"));
  g_assert_true (strv_has_pair (argv, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  g_assert_true (strv_has_pair (argv, "-accel", "tcg"));
  g_assert_false (strv_has_pair (argv, "-accel", "kvm"));
  g_assert_true (strv_has_pair (argv, "-m", "512"));
  g_assert_true (strv_has_pair (argv, "-smp", "2"));
  g_assert_true (strv_has_pair (argv, "-netdev", "user,id=net0"));
  g_assert_true (strv_has_pair (argv, "-qmp", "unix:/run/vivarium/sessions/abc123/qmp.sock,server=on,wait=off"));
  g_assert_true (strv_has_pair (argv, "-drive", "file=/var/lib/vivarium/sessions/abc123/overlay.qcow2,if=none,id=disk0,format=qcow2,discard=unmap,werror=stop,rerror=stop"));
  g_assert_false (g_strv_contains ((const gchar * const *) argv, "-virtfs"));

  cmd.kvm = TRUE;
  cmd.project_dir = "/var/lib/vivarium/projects/p/work";
  {
    g_auto(GStrv) with_kvm = vd_qemu_command_build (&cmd);
    g_assert_true (strv_has_pair (with_kvm, "-accel", "kvm"));
    g_assert_true (strv_has_pair (with_kvm, "-virtfs", "local,path=/var/lib/vivarium/projects/p/work,mount_tag=project,security_model=none,id=project0"));
  }
  /* A cold start neither waits for a saved state nor names a generation id
   * it was not given. */
  g_assert_false (g_strv_contains ((const gchar * const *) argv, "-incoming"));
  g_assert_false (strv_has_pair (argv, "-device", "vmgenid,guid=2f0e3a57-6a1e-4f5c-9d1e-0c1b2a3d4e5f"));

  /* A restored start: the saved state comes later over QMP (never a path
   * or an exec: URI), and the guest gets its own generation id. */
  cmd.vmgenid = "2f0e3a57-6a1e-4f5c-9d1e-0c1b2a3d4e5f";
  cmd.incoming = TRUE;
  {
    g_auto(GStrv) restored = vd_qemu_command_build (&cmd);
    g_assert_true (strv_has_pair (restored, "-incoming", "defer"));
    g_assert_true (strv_has_pair (restored, "-device", "vmgenid,guid=2f0e3a57-6a1e-4f5c-9d1e-0c1b2a3d4e5f"));
    g_assert_true (strv_has_pair (restored, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  }

  /* Egress "allowlist": the guest's network is the proxy's, over a unix
   * socket; a user-mode stack that reaches nothing and has no device takes
   * a boot snapshot's "slirp" section in. QEMU spawns nothing. */
  cmd.net_socket = "/run/vivarium/egress/abc123/net.sock";
  {
    g_auto(GStrv) allowlist = vd_qemu_command_build (&cmd);
    g_autofree gchar *line = g_strjoinv (" ", allowlist);
    g_assert_true (strv_has_pair (allowlist, "-netdev",
                                  "stream,id=net0,server=off,addr.type=unix,addr.path=/run/vivarium/egress/abc123/net.sock"));
    g_assert_true (strv_has_pair (allowlist, "-netdev", "user,id=vmstate0,restrict=on"));
    g_assert_true (strv_has_pair (allowlist, "-device", "virtio-net-pci,netdev=net0"));
    g_assert_true (strv_has_pair (allowlist, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
    g_assert_null (strstr (line, "guestfwd"));
  }
  /* Egress "none": QEMU's own stack, reaching nothing. */
  cmd.net_socket = NULL;
  cmd.net_restricted = TRUE;
  {
    g_auto(GStrv) none = vd_qemu_command_build (&cmd);
    g_assert_true (strv_has_pair (none, "-netdev", "user,id=net0,restrict=on"));
    g_assert_false (strv_has_pair (none, "-netdev", "user,id=vmstate0,restrict=on"));
  }
}

/* Every enum value spells itself and reads back as itself; an unknown
 * string is refused rather than taken for the first value. */
static void
test_state_strings (void)
{
  VivariumSessionState s;
  VivariumJobState j;
  VivariumOutcome o;
  VivariumVerdict v;
  VivariumEgressState e;

  for (guint i = VIVARIUM_SESSION_STATE_STARTING; i <= VIVARIUM_SESSION_STATE_FAILED; i++) {
    g_assert_true (vivarium_session_state_from_string (vivarium_session_state_to_string (i), &s));
    g_assert_cmpuint (s, ==, i);
  }
  for (guint i = VIVARIUM_JOB_STATE_RUNNING; i <= VIVARIUM_JOB_STATE_CANCELLED; i++) {
    g_assert_true (vivarium_job_state_from_string (vivarium_job_state_to_string (i), &j));
    g_assert_cmpuint (j, ==, i);
  }
  for (guint i = VIVARIUM_OUTCOME_IN_PROGRESS; i <= VIVARIUM_OUTCOME_FAILED; i++) {
    g_assert_true (vivarium_outcome_from_string (vivarium_outcome_to_string (i), &o));
    g_assert_cmpuint (o, ==, i);
  }
  for (guint i = VIVARIUM_VERDICT_NEVER_RUN; i <= VIVARIUM_VERDICT_INCONCLUSIVE; i++) {
    g_assert_true (vivarium_verdict_from_string (vivarium_verdict_to_string (i), &v));
    g_assert_cmpuint (v, ==, i);
  }
  for (guint i = VIVARIUM_EGRESS_STATE_OFF; i <= VIVARIUM_EGRESS_STATE_FAILED; i++) {
    g_assert_true (vivarium_egress_state_from_string (vivarium_egress_state_to_string (i), &e));
    g_assert_cmpuint (e, ==, i);
  }
  /* The words of the contract (dbus/…xml, EgressState). */
  g_assert_cmpstr (vivarium_egress_state_to_string (VIVARIUM_EGRESS_STATE_OFF), ==, "off");
  g_assert_cmpstr (vivarium_egress_state_to_string (VIVARIUM_EGRESS_STATE_FAILED), ==, "failed");
  g_assert_cmpstr (vivarium_session_state_to_string (VIVARIUM_SESSION_STATE_PAUSED), ==, "paused");
  g_assert_cmpstr (vivarium_outcome_to_string (VIVARIUM_OUTCOME_NEEDS_INPUT), ==, "NEEDS_INPUT");
  g_assert_false (vivarium_session_state_from_string ("Running", &s));
  g_assert_false (vivarium_verdict_from_string (NULL, &v));
  g_assert_true (vivarium_session_state_is_active (VIVARIUM_SESSION_STATE_PAUSED));
  g_assert_false (vivarium_session_state_is_active (VIVARIUM_SESSION_STATE_STOPPED));
}

/* A failed check inside common/ names common/ as its log domain, in
 * whichever program it runs: a daemon's journal or a client's stderr can
 * then tell it from the caller's own messages. */
static void
test_log_domain (void)
{
  g_test_expect_message ("vivarium-common", G_LOG_LEVEL_CRITICAL, "*value < n*");
  g_assert_null (vivarium_session_state_to_string ((VivariumSessionState) 99));
  g_test_assert_expected_messages ();
}

/* What every client's call path keeps of the old wrappers: interactive
 * authorization unless told not to, and the daemon's refusal as a typed
 * error whose message is the daemon's sentence alone. */
static void
test_call_helpers (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *sentence = NULL;

  g_assert_cmpint (vivarium_call_flags (TRUE), ==, G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION);
  g_assert_cmpint (vivarium_call_flags (FALSE), ==, G_DBUS_CALL_FLAGS_NONE);
  error = g_dbus_error_new_for_dbus_error (VIVARIUM_DBUS_ERROR_PREFIX ".NotFound", "There is no task called “x”");
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  sentence = vivarium_call_error_sentence (error);
  g_assert_cmpstr (sentence, ==, "There is no task called “x”");
  g_assert_cmpint (VIVARIUM_CALL_TIMEOUT_LONG, ==, G_MAXINT);
}

/* GLib's domains never reach a caller: each is turned into the Vivarium
 * domain with the sentence kept. */
static void
test_error_convert (void)
{
  struct { GQuark domain; gint code; VivariumError want; } cases[] = {
    { G_FILE_ERROR, G_FILE_ERROR_NOSPC, VIVARIUM_ERROR_NO_SPACE },
    { G_FILE_ERROR, G_FILE_ERROR_NOENT, VIVARIUM_ERROR_NOT_FOUND },
    { G_FILE_ERROR, G_FILE_ERROR_PERM, VIVARIUM_ERROR_FAILED },
    { G_IO_ERROR, G_IO_ERROR_NO_SPACE, VIVARIUM_ERROR_NO_SPACE },
    { G_IO_ERROR, G_IO_ERROR_CANCELLED, VIVARIUM_ERROR_CANCELLED },
    { G_IO_ERROR, G_IO_ERROR_TIMED_OUT, VIVARIUM_ERROR_TIMED_OUT },
    { G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_PARSE, VIVARIUM_ERROR_FAILED },
    { VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, VIVARIUM_ERROR_BUSY },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = g_error_new (cases[i].domain, cases[i].code, "sentence %zu", i);
    g_autofree gchar *want = g_strdup_printf ("sentence %zu", i);

    vivarium_error_convert (&error);
    g_assert_error (error, VIVARIUM_ERROR, (gint) cases[i].want);
    g_assert_cmpstr (error->message, ==, want);
  }
  vivarium_error_convert (NULL);
  {
    GError *none = NULL;
    vivarium_error_convert (&none);
    g_assert_null (none);
  }
  g_assert_cmpstr (vivarium_error_code_to_name (VIVARIUM_ERROR_NO_SPACE), ==,
                   VIVARIUM_DBUS_ERROR_PREFIX ".NoSpace");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/common/name-validate", test_name_validate);
  g_test_add_func ("/common/argv-env-validate", test_argv_env_validate);
  g_test_add_func ("/common/guest-path-validate", test_guest_path_validate);
  g_test_add_func ("/common/error-mapping", test_error_mapping);
  g_test_add_func ("/common/escape-untrusted", test_escape_untrusted);
  g_test_add_func ("/common/denylist", test_denylist);
  g_test_add_func ("/common/state-strings", test_state_strings);
  g_test_add_func ("/common/log-domain", test_log_domain);
  g_test_add_func ("/common/call-helpers", test_call_helpers);
  g_test_add_func ("/common/error-convert", test_error_convert);
  g_test_add_func ("/service/qemu-command", test_qemu_command);
  return g_test_run ();
}
