/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <gio/gio.h>
#include <glib/gstdio.h>

#include "vivarium-egress-policy.h"

static VivariumEgressPolicy *
policy_of (const gchar *const *allow, const gchar *const *deny)
{
  VivariumEgressPolicy *policy = vivarium_egress_policy_new ();

  for (guint i = 0; allow != NULL && allow[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, allow[i], "group test", &error));
    g_assert_no_error (error);
  }
  for (guint i = 0; deny != NULL && deny[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_DENY, deny[i], "session", &error));
    g_assert_no_error (error);
  }
  return policy;
}

static void
assert_decision (VivariumEgressPolicy *policy, const gchar *host, guint16 port,
                 gboolean allowed, const gchar *reason)
{
  g_autofree gchar *got = NULL;

  if (vivarium_egress_policy_decide (policy, host, port, &got) != allowed)
    g_error ("%s:%u: expected %s, got the other (%s)", host, port, allowed ? "allowed" : "denied", got);
  g_assert_cmpstr (got, ==, reason);
}

static void
test_modes (void)
{
  g_assert_true (vivarium_egress_mode_is_valid ("none"));
  g_assert_true (vivarium_egress_mode_is_valid ("allowlist"));
  g_assert_true (vivarium_egress_mode_is_valid ("open"));
  g_assert_false (vivarium_egress_mode_is_valid ("Open"));
  g_assert_false (vivarium_egress_mode_is_valid (""));
  g_assert_false (vivarium_egress_mode_is_valid (NULL));
}

static void
test_parse_good (void)
{
  const struct { const gchar *rule, *host; guint16 port; } cases[] = {
    { "deb.debian.org", "deb.debian.org", 0 },
    { "Deb.Debian.ORG.", "deb.debian.org", 0 },
    { "example.org:8443", "example.org", 8443 },
    { "*.example.org", "*.example.org", 0 },
    { "*.Example.org:1", "*.example.org", 1 },
    { "x:65535", "x", 65535 },
    { "192.0.2.7", "192.0.2.7", 0 },
    { "192.0.2.7:22", "192.0.2.7", 22 },
    { "[2001:DB8::1]", "[2001:db8::1]", 0 },
    { "[2001:db8:0::1]:443", "[2001:db8::1]", 443 },
    { "[::ffff:192.0.2.7]:80", "192.0.2.7", 80 },
    { "xn--bcher-kva.example", "xn--bcher-kva.example", 0 },
    { "a-b.c0", "a-b.c0", 0 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autofree gchar *host = NULL;
    guint16 port = 7;
    g_assert_true (vivarium_egress_rule_parse (cases[i].rule, &host, &port, &error));
    g_assert_no_error (error);
    g_assert_cmpstr (host, ==, cases[i].host);
    g_assert_cmpuint (port, ==, cases[i].port);
  }
}

static void
test_parse_bad (void)
{
  g_autofree gchar *label64 = g_strnfill (64, 'a');
  g_autofree gchar *label63 = g_strnfill (63, 'a');
  /* 63+1+63+1+63+1+62 = 254 characters, every label valid. */
  g_autofree gchar *name254 = g_strdup_printf ("%s.%s.%s.%.62s", label63, label63, label63, label63);
  g_autofree gchar *name253 = g_strdup_printf ("%s.%s.%s.%.61s", label63, label63, label63, label63);
  g_autofree gchar *huge = g_strnfill (5000, 'a');
  const gchar *bad[] = {
    "", ".", "*", "*.", "*.:443", "**.example.org", "*example.org", "a.*.b", "example.*",
    "a..b", ".example.org", "example.org..", "-a.example", "a-.example", "a_b.example",
    "example.org:0", "example.org:65536", "example.org:x", "example.org:", "example.org:+80",
    "example.org:080800", "example.org:-1", "example.org:80:80", "2001:db8::1", "[2001:db8::1",
    "[2001:db8::1]x", "[2001:db8::1]:", "[]", "[192.0.2.1]", "[fe80::1%eth0]", "[::1]]",
    "b\xc3\xbc" "cher.example", "evil\n.example", "evil\x1b[31m.example", "tab\tx", "sp ace.example",
    "a/b", "http://example.org", "user@example.org", "1.2.3", "127.1", "0x7f000001", "010.0.0.1",
    "1.2.3.4.5", "999.1.1.1", "example.123", "*.1.2.3.4", "*.0x7f000001",
    label64, name254, huge, NULL,
  };

  for (guint i = 0; bad[i] != NULL; i++) {
    g_autoptr(GError) error = NULL;
    g_autofree gchar *host = NULL;
    if (vivarium_egress_rule_parse (bad[i], &host, NULL, &error))
      g_error ("rule \"%s\" was accepted as %s", bad[i], host);
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
    g_assert_true (g_str_has_prefix (error->message, "Bad egress rule “"));
    g_assert_null (host);
    /* The message never carries the caller's control bytes. */
    for (const gchar *p = error->message; *p != '\0'; p++)
      g_assert_true ((guchar) *p >= 0x20);
    g_assert_cmpuint (strlen (error->message), <, 400);
  }
  {
    const gchar *const why[][2] = {
      { "b\xc3\xbc" "cher.example", "not ASCII" },
      { "evil\n.example", "control character" },
      { "a..b", "label of the host name is empty" },
      { "*.", "wildcard is a whole first label" },
      { "example.org:65536", "1 to 65535" },
      { "2001:db8::1", "brackets" },
      { "example.123", "all digits" },
      { "127.1", "unusual form" },
      { "0x7f000001", "unusual form" },
    };
    for (guint i = 0; i < G_N_ELEMENTS (why); i++) {
      g_autoptr(GError) error = NULL;
      g_assert_false (vivarium_egress_rule_parse (why[i][0], NULL, NULL, &error));
      if (strstr (error->message, why[i][1]) == NULL)
        g_error ("\"%s\": expected a message saying \"%s\", got \"%s\"", why[i][0], why[i][1], error->message);
    }
  }
  {
    g_autoptr(GError) error = NULL;
    g_assert_false (vivarium_egress_rule_parse ("evil\x1b[31m.example", NULL, NULL, &error));
    g_assert_nonnull (strstr (error->message, "evil\\x1b[31m.example"));
  }
  g_assert_true (vivarium_egress_rule_parse (label63, NULL, NULL, NULL));
  g_assert_true (vivarium_egress_rule_parse (name253, NULL, NULL, NULL));
  g_assert_cmpuint (strlen (name253), ==, 253);
  g_assert_cmpuint (strlen (name254), ==, 254);
}

static void
test_normalize_host (void)
{
  const gchar *const pairs[][2] = {
    { "Deb.Debian.Org.", "deb.debian.org" },
    { "192.0.2.1", "192.0.2.1" },
    { "2001:db8::1", "[2001:db8::1]" },
    { "[2001:DB8::1]", "[2001:db8::1]" },
    { "::ffff:192.0.2.1", "192.0.2.1" },
  };
  const gchar *bad[] = { "", "*.example.org", "*", "a..b", "b\xc3\xbc.example", "x\ny", "127.1",
                         "example.org:443", "[::1]:443", NULL };

  for (guint i = 0; i < G_N_ELEMENTS (pairs); i++) {
    g_autofree gchar *got = vivarium_egress_normalize_host (pairs[i][0]);
    g_assert_cmpstr (got, ==, pairs[i][1]);
  }
  for (guint i = 0; bad[i] != NULL; i++) {
    g_autofree gchar *got = vivarium_egress_normalize_host (bad[i]);
    if (got != NULL)
      g_error ("\"%s\" normalised to %s", bad[i], got);
  }
  g_assert_null (vivarium_egress_normalize_host (NULL));
}

static void
test_default_ports_and_deny_by_default (void)
{
  const gchar *allow[] = { "deb.debian.org", "example.org:8443", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, NULL);
  g_autoptr(VivariumEgressPolicy) empty = vivarium_egress_policy_new ();

  assert_decision (policy, "deb.debian.org", 443, TRUE, "allowed by deb.debian.org (group test)");
  assert_decision (policy, "DEB.debian.org.", 80, TRUE, "allowed by deb.debian.org (group test)");
  assert_decision (policy, "deb.debian.org", 22, FALSE, "no rule allows deb.debian.org:22");
  assert_decision (policy, "deb.debian.org", 8443, FALSE, "no rule allows deb.debian.org:8443");
  assert_decision (policy, "example.org", 8443, TRUE, "allowed by example.org:8443 (group test)");
  assert_decision (policy, "example.org", 443, FALSE, "no rule allows example.org:443");
  assert_decision (policy, "security.debian.org", 443, FALSE, "no rule allows security.debian.org:443");
  assert_decision (policy, "evil..example", 443, FALSE, "not a valid host name");
  assert_decision (policy, "deb.debian.org", 0, FALSE, "port 0 is not a port");
  assert_decision (empty, "deb.debian.org", 443, FALSE, "no rule allows deb.debian.org:443");
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (empty), ==, 0);
}

static void
test_wildcard_below_only (void)
{
  const gchar *allow[] = { "*.example.org", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, NULL);

  assert_decision (policy, "a.example.org", 443, TRUE, "allowed by *.example.org (group test)");
  assert_decision (policy, "a.b.example.org", 80, TRUE, "allowed by *.example.org (group test)");
  assert_decision (policy, "example.org", 443, FALSE, "no rule allows example.org:443");
  assert_decision (policy, "badexample.org", 443, FALSE, "no rule allows badexample.org:443");
  assert_decision (policy, "example.org.evil", 443, FALSE, "no rule allows example.org.evil:443");
}

static void
test_deny_beats_allow (void)
{
  const gchar *allow[] = { "*.example.org", "bad.example.org:8080", "github.com", NULL };
  const gchar *deny[] = { "bad.example.org", "*.evil.example.org:443", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);

  assert_decision (policy, "bad.example.org", 443, FALSE, "denied by bad.example.org (session)");
  assert_decision (policy, "bad.example.org", 80, FALSE, "denied by bad.example.org (session)");
  /* A deny without a port takes back 80 and 443 only. */
  assert_decision (policy, "bad.example.org", 8080, TRUE, "allowed by bad.example.org:8080 (group test)");
  assert_decision (policy, "x.evil.example.org", 443, FALSE, "denied by *.evil.example.org:443 (session)");
  assert_decision (policy, "x.evil.example.org", 80, TRUE, "allowed by *.example.org (group test)");
  assert_decision (policy, "evil.example.org", 443, TRUE, "allowed by *.example.org (group test)");
  /* Order does not matter: a deny added after the allow still wins. */
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_DENY, "github.com", "session", NULL));
  assert_decision (policy, "github.com", 443, FALSE, "denied by github.com (session)");
}

static void
test_ip_literals_exact_only (void)
{
  const gchar *allow[] = { "*.example.org", "192.0.2.7:443", "[2001:db8::1]", NULL };
  const gchar *deny[] = { "198.51.100.9", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);

  assert_decision (policy, "192.0.2.7", 443, TRUE, "allowed by 192.0.2.7:443 (group test)");
  assert_decision (policy, "::ffff:192.0.2.7", 443, TRUE, "allowed by 192.0.2.7:443 (group test)");
  assert_decision (policy, "192.0.2.7", 80, FALSE, "no rule allows 192.0.2.7:80");
  assert_decision (policy, "192.0.2.8", 443, FALSE, "no rule allows 192.0.2.8:443");
  assert_decision (policy, "2001:db8::1", 443, TRUE, "allowed by [2001:db8::1] (group test)");
  assert_decision (policy, "[2001:db8:0:0::1]", 80, TRUE, "allowed by [2001:db8::1] (group test)");
  assert_decision (policy, "2001:db8::2", 443, FALSE, "no rule allows [2001:db8::2]:443");
  assert_decision (policy, "[::ffff:198.51.100.9]", 443, FALSE, "denied by 198.51.100.9 (session)");
  /* Address forms a resolver would read as 127.0.0.1 are no names. */
  assert_decision (policy, "127.1", 443, FALSE, "not a valid host name");
  assert_decision (policy, "0x7f000001", 443, FALSE, "not a valid host name");
  g_assert_false (vivarium_egress_policy_allows_name (policy, "192.0.2.7"));
}

static void
test_origin_and_duplicates (void)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autofree gchar *long_origin = g_strnfill (65, 'o');
  g_autofree gchar *longest_origin = g_strnfill (64, 'o');
  g_autoptr(GError) error = NULL;

  g_assert_false (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "a.example", "", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "a.example", long_origin, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "a.example", "group\nx", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 0);

  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "github.com", "group github", NULL));
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "GitHub.com.", "group other", NULL));
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "b.example", longest_origin, NULL));
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 2);
  assert_decision (policy, "github.com", 443, TRUE, "allowed by github.com (group github)");
}

static void
test_max_rules (void)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GError) error = NULL;
  guint i;

  /* 2000 offered, 1024 kept, every one after refused with a sentence. */
  for (i = 0; i < 2000; i++) {
    g_autofree gchar *rule = g_strdup_printf ("h%u.example", i);
    if (!vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, rule, "session", &error))
      break;
  }
  g_assert_cmpuint (i, ==, VIVARIUM_EGRESS_POLICY_MAX_RULES);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "1024"));
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, VIVARIUM_EGRESS_POLICY_MAX_RULES);
  g_clear_error (&error);
  /* A duplicate of a kept rule costs nothing and is still fine. */
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "h0.example", "session", &error));
  g_assert_no_error (error);
  g_assert_false (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_DENY, "h0.example", "session", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  assert_decision (policy, "h1023.example", 443, TRUE, "allowed by h1023.example (session)");
  assert_decision (policy, "h1024.example", 443, FALSE, "no rule allows h1024.example:443");
}

static void
test_describe (void)
{
  const gchar *allow[] = { "deb.debian.org", "*.example.org:8443", "[2001:db8::1]:443", NULL };
  const gchar *deny[] = { "*.evil.example:443", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);
  g_autoptr(VivariumEgressPolicy) empty = vivarium_egress_policy_new ();
  g_auto(GStrv) lines = vivarium_egress_policy_describe (policy);
  g_auto(GStrv) none = vivarium_egress_policy_describe (empty);
  const gchar *expected[] = {
    "allow deb.debian.org (group test)",
    "allow *.example.org:8443 (group test)",
    "allow [2001:db8::1]:443 (group test)",
    "deny *.evil.example:443 (session)",
    NULL,
  };

  g_assert_cmpstrv (lines, expected);
  g_assert_nonnull (none);
  g_assert_null (none[0]);
}

static void
test_allows_name (void)
{
  const gchar *allow[] = { "a.example", "*.b.example", "c.example", "d.example:8080", NULL };
  const gchar *deny[] = { "c.example", "d.example", "x.b.example:80", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);

  g_assert_true (vivarium_egress_policy_allows_name (policy, "a.example"));
  g_assert_true (vivarium_egress_policy_allows_name (policy, "A.Example."));
  g_assert_true (vivarium_egress_policy_allows_name (policy, "y.b.example"));
  g_assert_false (vivarium_egress_policy_allows_name (policy, "b.example"));
  /* Denied on every port its allow rule gives it. */
  g_assert_false (vivarium_egress_policy_allows_name (policy, "c.example"));
  /* The deny takes 80 and 443, the allow gives 8080. */
  g_assert_true (vivarium_egress_policy_allows_name (policy, "d.example"));
  /* 80 denied, 443 still allowed. */
  g_assert_true (vivarium_egress_policy_allows_name (policy, "x.b.example"));
  g_assert_false (vivarium_egress_policy_allows_name (policy, "other.example"));
  g_assert_false (vivarium_egress_policy_allows_name (policy, "a..example"));
  g_assert_false (vivarium_egress_policy_allows_name (policy, "*.b.example"));
}

static gchar *
make_tmpdir (void)
{
  g_autoptr(GError) error = NULL;
  gchar *dir = g_dir_make_tmp ("test-egress-policy-XXXXXX", &error);

  g_assert_no_error (error);
  return dir;
}

static void
remove_tmpdir (const gchar *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const gchar *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL) {
    g_autofree gchar *path = g_build_filename (dir, name, NULL);
    g_unlink (path);
  }
  g_rmdir (dir);
}

static void
test_save_load (void)
{
  const gchar *allow[] = { "deb.debian.org", "*.example.org:8443", "[2001:db8::1]:443", "192.0.2.7", NULL };
  const gchar *deny[] = { "bad.example.org:8443", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);
  g_autoptr(VivariumEgressPolicy) loaded = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = make_tmpdir ();
  g_autofree gchar *path = g_build_filename (dir, "policy", NULL);
  g_autofree gchar *tmp = g_build_filename (dir, "policy.tmp", NULL);
  g_auto(GStrv) before = vivarium_egress_policy_describe (policy);
  g_auto(GStrv) after = NULL;
  struct stat st;

  /* The mode is the one asked for, whatever the umask. */
  umask (022);
  g_assert_true (vivarium_egress_policy_save (policy, path, 0664, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 0777, ==, 0664);
  g_assert_false (g_file_test (tmp, G_FILE_TEST_EXISTS));
  loaded = vivarium_egress_policy_load (path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (loaded);
  after = vivarium_egress_policy_describe (loaded);
  g_assert_cmpstrv (before, after);
  assert_decision (loaded, "x.example.org", 8443, TRUE, "allowed by *.example.org:8443 (group test)");
  assert_decision (loaded, "bad.example.org", 8443, FALSE, "denied by bad.example.org:8443 (session)");

  /* Saving again replaces the file whole, with the new mode. */
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "new.example", "session", NULL));
  g_assert_true (vivarium_egress_policy_save (policy, path, 0600, &error));
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 0777, ==, 0600);
  g_clear_pointer (&loaded, vivarium_egress_policy_free);
  loaded = vivarium_egress_policy_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (loaded), ==, 6);

  /* An empty policy round-trips too (deny everything). */
  {
    g_autoptr(VivariumEgressPolicy) empty = vivarium_egress_policy_new ();
    g_autoptr(VivariumEgressPolicy) back = NULL;
    g_assert_true (vivarium_egress_policy_save (empty, path, 0600, &error));
    back = vivarium_egress_policy_load (path, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (vivarium_egress_policy_get_n_rules (back), ==, 0);
  }
  remove_tmpdir (dir);
}

static void
assert_load_refused (const gchar *path, const gchar *text, gssize len)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;

  if (text != NULL)
    g_assert_true (g_file_set_contents (path, text, len, NULL));
  policy = vivarium_egress_policy_load (path, &error);
  if (policy != NULL)
    g_error ("loaded a bad policy file: %.*s", (int) (len < 0 ? 200 : MIN (len, 200)), text);
  g_assert_nonnull (error);
  g_assert_true (error->domain == G_IO_ERROR);
  g_assert_nonnull (strstr (error->message, path));
}

static void
test_load_refuses (void)
{
  const gchar *allow[] = { "a.example", "b.example", "c.example", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, NULL);
  g_autofree gchar *dir = make_tmpdir ();
  g_autofree gchar *path = g_build_filename (dir, "policy", NULL);
  g_autofree gchar *good = g_build_filename (dir, "good", NULL);
  g_autofree gchar *link = g_build_filename (dir, "link", NULL);
  g_autofree gchar *text = NULL;
  g_autofree gchar *edited = NULL;
  g_autofree gchar *huge = NULL;
  gsize len = 0;

  g_assert_true (vivarium_egress_policy_save (policy, good, 0600, NULL));
  g_assert_true (g_file_get_contents (good, &text, &len, NULL));

  /* Cut at every length: no prefix of a policy is a policy. */
  for (gsize cut = 0; cut < len; cut++)
    assert_load_refused (path, text, (gssize) cut);
  assert_load_refused (path, "[Desktop Entry]\nName=x\n", -1);
  assert_load_refused (path, "not a key file at all\n", -1);
  edited = g_strconcat (text, "[Rule 3]\nAction=allow\nRule=d.example\nOrigin=x\n", NULL);
  assert_load_refused (path, edited, -1);
  g_clear_pointer (&edited, g_free);
  edited = g_strdup (text);
  memcpy (strstr (edited, "a.example"), "a..xampl", 8);
  assert_load_refused (path, edited, -1);
  g_clear_pointer (&edited, g_free);
  edited = g_strdup (text);
  memcpy (strstr (edited, "Action=allow"), "Action=maybe", 12);
  assert_load_refused (path, edited, -1);
  g_clear_pointer (&edited, g_free);
  edited = g_strdup (text);
  memcpy (strstr (edited, "Version=1"), "Version=2", 9);
  assert_load_refused (path, edited, -1);
  /* A whole policy after a 2 MiB comment: refused for its size alone. */
  g_clear_pointer (&edited, g_free);
  edited = g_strnfill (2 * 1024 * 1024, '#');
  huge = g_strconcat (edited, "\n", text, NULL);
  assert_load_refused (path, huge, -1);
  g_clear_pointer (&edited, g_free);
  /* A NUL would hide what follows it from the key file parser. */
  {
    g_autoptr(GString) hidden = g_string_new_len (text, (gssize) len);
    g_string_append_c (hidden, '\0');
    g_string_append (hidden, "[Rule 3]\nAction=allow\nRule=evil.example\nOrigin=x\n");
    assert_load_refused (path, hidden->str, (gssize) hidden->len);
  }
  g_unlink (path);
  assert_load_refused (path, NULL, 0);
  g_assert_cmpint (symlink (good, link), ==, 0);
  assert_load_refused (link, NULL, 0);
  assert_load_refused (dir, NULL, 0);
  remove_tmpdir (dir);
}

/* Found by tests/fuzz/fuzz-egress-rule: GKeyFile reads a value with an
 * invalid escape ("\z") as a string AND an error. Such a file is not a
 * policy save() wrote: refused, whichever key holds it (in Action, the
 * error was set twice; in Origin, the rule was taken). */
static void
test_load_refuses_bad_escapes (void)
{
  static const gchar *const keys[] = { "Action=allow", "Rule=a.example", "Origin=session", NULL };
  const gchar *allow[] = { "a.example", NULL };
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autofree gchar *dir = make_tmpdir ();
  g_autofree gchar *path = g_build_filename (dir, "policy", NULL);
  g_autofree gchar *text = NULL;

  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, allow[0], "session", NULL));
  g_assert_true (vivarium_egress_policy_save (policy, path, 0600, NULL));
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  for (guint i = 0; keys[i] != NULL; i++) {
    g_autofree gchar *escaped = g_strconcat (keys[i], "\\z", NULL);
    g_auto(GStrv) parts = g_strsplit (text, keys[i], 2);
    g_autofree gchar *edited = NULL;
    g_assert_cmpuint (g_strv_length (parts), ==, 2);
    edited = g_strjoin (escaped, parts[0], parts[1], NULL);
    assert_load_refused (path, edited, -1);
  }
  remove_tmpdir (dir);
}

static void
test_save_fails_loudly (void)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GError) error = NULL;

  g_assert_false (vivarium_egress_policy_save (policy, "/nonexistent-dir/policy", 0600, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "/nonexistent-dir/policy"));
}

/* Random short strings over the grammar's own alphabet: whatever parses
 * is a fixed point of its own normalisation, and nothing crashes. */
static void
test_random_rules (void)
{
  static const gchar alphabet[] = "ab0-9.*:[]fx%A_ ";
  const gchar *allow[] = { "*.b.a", "a:9", "[::a]", "0.0.0.9", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, NULL);
  guint parsed = 0;

  for (guint round = 0; round < 50000; round++) {
    gchar text[24];
    guint len = (guint) g_test_rand_int_range (0, 20);
    g_autofree gchar *host = NULL;
    g_autofree gchar *again_host = NULL;
    g_autofree gchar *canonical = NULL;
    g_autofree gchar *normal = NULL;
    guint16 port = 0, again_port = 0;

    for (guint i = 0; i < len; i++)
      text[i] = alphabet[g_test_rand_int_range (0, sizeof alphabet - 1)];
    text[len] = '\0';
    if (vivarium_egress_policy_decide (policy, text, 443, NULL)) {
      g_autofree gchar *allowed = vivarium_egress_normalize_host (text);
      g_assert_nonnull (allowed);
    }
    vivarium_egress_policy_allows_name (policy, text);
    if (!vivarium_egress_rule_parse (text, &host, &port, NULL))
      continue;
    parsed++;
    canonical = port != 0 ? g_strdup_printf ("%s:%u", host, port) : g_strdup (host);
    if (!vivarium_egress_rule_parse (canonical, &again_host, &again_port, NULL))
      g_error ("\"%s\" parsed as \"%s\", which does not parse", text, canonical);
    g_assert_cmpstr (again_host, ==, host);
    g_assert_cmpuint (again_port, ==, port);
    if (host[0] == '*')
      continue;
    normal = vivarium_egress_normalize_host (host);
    g_assert_cmpstr (normal, ==, host);
  }
  g_test_message ("%u of 50000 random rules parsed", parsed);
  /* The alphabet does reach valid rules, or the loop proved nothing. */
  g_assert_cmpuint (parsed, >, 100);
}

/* The rule option of docs/secrets.md: kept through describe() and
 * save/load, and what may_intercept() answers from. */
static void
test_no_intercept (void)
{
  const gchar *allow[] = { "api.example.org:443 no-intercept", "*.example.org", "git.example.net", NULL };
  const gchar *deny[] = { "bad.example.org", NULL };
  g_autoptr(VivariumEgressPolicy) policy = policy_of (allow, deny);
  g_autoptr(VivariumEgressPolicy) loaded = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *dir = make_tmpdir ();
  g_autofree gchar *path = g_build_filename (dir, "policy", NULL);
  g_auto(GStrv) lines = vivarium_egress_policy_describe (policy);
  g_auto(GStrv) after = NULL;
  g_autofree gchar *host = NULL;
  guint16 port = 0;
  const gchar *expected[] = {
    "allow api.example.org:443 no-intercept (group test)",
    "allow *.example.org (group test)",
    "allow git.example.net (group test)",
    "deny bad.example.org (session)",
    NULL,
  };
  const gchar *bad[] = { "api.example.org:443 no-intercept ", "api.example.org  no-intercept",
                         "api.example.org no-inspect", "api.example.org:443 NO-INTERCEPT", " no-intercept", NULL };

  g_assert_cmpstrv (lines, expected);
  /* The rule still allows; the option only says "do not look inside". */
  assert_decision (policy, "api.example.org", 443, TRUE, "allowed by api.example.org:443 (group test)");
  /* The wildcard covers api.example.org too: the no-intercept rule wins. */
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "api.example.org", 443));
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "API.example.org.", 443));
  g_assert_true (vivarium_egress_policy_may_intercept (policy, "www.example.org", 443));
  g_assert_true (vivarium_egress_policy_may_intercept (policy, "git.example.net", 443));
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "bad.example.org", 443));
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "other.example", 443));
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "git.example.net", 8443));
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "not a name", 443));

  g_assert_true (vivarium_egress_rule_parse ("api.example.org:443 no-intercept", &host, &port, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (host, ==, "api.example.org");
  g_assert_cmpuint (port, ==, 443);
  for (guint i = 0; bad[i] != NULL; i++) {
    g_autoptr(GError) local = NULL;
    g_autoptr(VivariumEgressPolicy) p = vivarium_egress_policy_new ();
    g_assert_false (vivarium_egress_rule_parse (bad[i], NULL, NULL, &local));
    g_assert_error (local, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
    g_assert_false (vivarium_egress_policy_add_rule (p, VIVARIUM_EGRESS_ALLOW, bad[i], "session", NULL));
  }
  /* A deny rule has nothing to tunnel. */
  g_assert_false (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_DENY, "x.example:443 no-intercept",
                                                   "session", &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  /* The same rule again with the option: the option sticks, the first
   * origin stays, no second rule. */
  g_assert_true (vivarium_egress_policy_add_rule (policy, VIVARIUM_EGRESS_ALLOW, "git.example.net no-intercept",
                                                  "session", &error));
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 4);
  g_assert_false (vivarium_egress_policy_may_intercept (policy, "git.example.net", 443));

  g_assert_true (vivarium_egress_policy_save (policy, path, 0600, &error));
  g_assert_no_error (error);
  loaded = vivarium_egress_policy_load (path, &error);
  g_assert_no_error (error);
  g_clear_pointer (&lines, g_strfreev);
  lines = vivarium_egress_policy_describe (policy);
  after = vivarium_egress_policy_describe (loaded);
  g_assert_cmpstrv (lines, after);
  g_assert_cmpstr (after[2], ==, "allow git.example.net no-intercept (group test)");
  g_assert_false (vivarium_egress_policy_may_intercept (loaded, "api.example.org", 443));
  g_assert_true (vivarium_egress_policy_may_intercept (loaded, "www.example.org", 443));
  remove_tmpdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/egress-policy/modes", test_modes);
  g_test_add_func ("/egress-policy/parse-good", test_parse_good);
  g_test_add_func ("/egress-policy/parse-bad", test_parse_bad);
  g_test_add_func ("/egress-policy/normalize-host", test_normalize_host);
  g_test_add_func ("/egress-policy/default-ports-deny-by-default", test_default_ports_and_deny_by_default);
  g_test_add_func ("/egress-policy/wildcard-below-only", test_wildcard_below_only);
  g_test_add_func ("/egress-policy/deny-beats-allow", test_deny_beats_allow);
  g_test_add_func ("/egress-policy/ip-literals-exact-only", test_ip_literals_exact_only);
  g_test_add_func ("/egress-policy/origin-and-duplicates", test_origin_and_duplicates);
  g_test_add_func ("/egress-policy/max-rules", test_max_rules);
  g_test_add_func ("/egress-policy/describe", test_describe);
  g_test_add_func ("/egress-policy/allows-name", test_allows_name);
  g_test_add_func ("/egress-policy/no-intercept", test_no_intercept);
  g_test_add_func ("/egress-policy/save-load", test_save_load);
  g_test_add_func ("/egress-policy/load-refuses", test_load_refuses);
  g_test_add_func ("/egress-policy/load-refuses-bad-escapes", test_load_refuses_bad_escapes);
  g_test_add_func ("/egress-policy/save-fails-loudly", test_save_fails_loudly);
  g_test_add_func ("/egress-policy/random-rules", test_random_rules);
  return g_test_run ();
}
