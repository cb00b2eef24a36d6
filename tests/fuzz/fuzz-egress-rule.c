/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress policy's grammar and decisions (common/vivarium-egress-policy.h)
 * over any text: each input line is a rule (a leading '!' makes it a deny
 * rule) and a destination; the policy the lines make decides a fixed set
 * of destinations and goes through save() and load(). An input that starts
 * with "[Policy]" is a policy file itself, fed to load(). */

#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "fuzz-common.h"
#include "vivarium-egress-policy.h"

static gchar *dir;
static gchar *policy_path;

static const gchar *const hosts[] = {
  "deb.debian.org", "security.debian.org", "pypi.org", "files.pythonhosted.org", "github.com",
  "a.b.example.org", "example.org", "evil.example", "localhost", "127.0.0.1", "10.0.2.100",
  "[::1]", "::ffff:127.0.0.1", "[2001:db8::1]", "xn--bcher-kva.example", "a", "A.EXAMPLE.ORG.", NULL,
};
static const guint16 ports[] = { 80, 443, 22, 8080, 65535 };

static void
remove_dir (void)
{
  g_unlink (policy_path);
  g_rmdir (dir);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  /* save() flushes to disk: tools/run-fuzz.sh points TMPDIR at tmpfs. */
  dir = g_dir_make_tmp ("vivarium-fuzz-rule-XXXXXX", NULL);
  g_assert_nonnull (dir);
  policy_path = g_build_filename (dir, "policy", NULL);
  atexit (remove_dir);
  return 0;
}

/* A rule that parses, written back as host[:port], parses to itself; a
 * destination that normalises is a fixed point and a valid rule. */
static void
check_rule (const gchar *line)
{
  g_autofree gchar *host = NULL, *text = NULL, *again = NULL;
  g_autofree gchar *normal = NULL, *normal_again = NULL, *as_rule = NULL;
  guint16 port = 1, again_port = 1, rule_port = 1;

  if (vivarium_egress_rule_parse (line, &host, &port, NULL)) {
    text = port != 0 ? g_strdup_printf ("%s:%u", host, port) : g_strdup (host);
    g_assert_true (vivarium_egress_rule_parse (text, &again, &again_port, NULL));
    g_assert_cmpstr (again, ==, host);
    g_assert_cmpuint (again_port, ==, port);
  }
  normal = vivarium_egress_normalize_host (line);
  if (normal == NULL)
    return;
  normal_again = vivarium_egress_normalize_host (normal);
  g_assert_cmpstr (normal_again, ==, normal);
  g_assert_true (vivarium_egress_rule_parse (normal, &as_rule, &rule_port, NULL));
  g_assert_cmpstr (as_rule, ==, normal);
  g_assert_cmpuint (rule_port, ==, 0);
}

static void
check_reason (const gchar *reason)
{
  g_assert_nonnull (reason);
  g_assert_true (g_utf8_validate (reason, -1, NULL));
  g_assert_null (strchr (reason, '\n'));
}

/* A destination that is a host name, not an IP literal. */
static gboolean
is_name (const gchar *host)
{
  g_autofree gchar *normal = vivarium_egress_normalize_host (host);

  return normal != NULL && normal[0] != '[' && !g_hostname_is_ip_address (normal);
}

/* Deny beats allow, deny by default: the full policy allows only what the
 * allow rules alone allow; a name it allows on a port is worth a DNS
 * answer. */
static void
check_decision (VivariumEgressPolicy *full, VivariumEgressPolicy *allows, VivariumEgressPolicy *denies,
                const gchar *host, guint16 port)
{
  g_autofree gchar *reason = NULL;
  gboolean allowed = vivarium_egress_policy_decide (full, host, port, &reason);

  check_reason (reason);
  g_assert_false (vivarium_egress_policy_decide (denies, host, port, NULL));
  if (!allowed)
    return;
  g_assert_true (vivarium_egress_policy_decide (allows, host, port, NULL));
  if (is_name (host))
    g_assert_true (vivarium_egress_policy_allows_name (full, host));
}

/* A non-wildcard allow rule allows its own destination when nothing
 * denies it. */
static void
check_own_rule (VivariumEgressPolicy *allows, const gchar *rule)
{
  g_autofree gchar *host = NULL;
  guint16 port = 0;

  if (!vivarium_egress_rule_parse (rule, &host, &port, NULL) || host[0] == '*')
    return;
  g_assert_true (vivarium_egress_policy_decide (allows, host, port != 0 ? port : 443, NULL));
}

static GStrv
describe_after_load (VivariumEgressPolicy *policy)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumEgressPolicy) loaded = NULL;

  g_assert_true (vivarium_egress_policy_save (policy, policy_path, 0600, &error));
  g_assert_no_error (error);
  loaded = vivarium_egress_policy_load (policy_path, &error);
  g_assert_no_error (error);
  return vivarium_egress_policy_describe (loaded);
}

/* save() then load() gives the same rules, in the same order. */
static void
check_round_trip (VivariumEgressPolicy *policy)
{
  g_auto(GStrv) before = vivarium_egress_policy_describe (policy);
  g_auto(GStrv) after = describe_after_load (policy);

  g_assert_cmpuint (g_strv_length (before), ==, vivarium_egress_policy_get_n_rules (policy));
  g_assert_true (g_strv_equal ((const gchar * const *) before, (const gchar * const *) after));
}

static void
add (VivariumEgressPolicy *policy, VivariumEgressAction action, const gchar *rule)
{
  g_autoptr(GError) error = NULL;

  if (!vivarium_egress_policy_add_rule (policy, action, rule, "fuzz", &error))
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
}

static void
decide_all (VivariumEgressPolicy *full, VivariumEgressPolicy *allows, VivariumEgressPolicy *denies, GStrv lines)
{
  for (guint h = 0; hosts[h] != NULL; h++)
    for (guint p = 0; p < G_N_ELEMENTS (ports); p++)
      check_decision (full, allows, denies, hosts[h], ports[p]);
  for (guint i = 0; lines[i] != NULL; i++) {
    const gchar *rule = lines[i][0] == '!' ? lines[i] + 1 : lines[i];
    g_autofree gchar *host = NULL;
    guint16 port = 0;
    if (lines[i][0] != '!')
      check_own_rule (allows, rule);
    if (vivarium_egress_rule_parse (rule, &host, &port, NULL) && host[0] != '*')
      check_decision (full, allows, denies, host, port != 0 ? port : 80);
  }
}

static void
fuzz_lines (const gchar *text)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", 64);
  g_autoptr(VivariumEgressPolicy) full = vivarium_egress_policy_new ();
  g_autoptr(VivariumEgressPolicy) allows = vivarium_egress_policy_new ();
  g_autoptr(VivariumEgressPolicy) denies = vivarium_egress_policy_new ();

  for (guint i = 0; lines[i] != NULL; i++) {
    gboolean deny = lines[i][0] == '!';
    const gchar *rule = deny ? lines[i] + 1 : lines[i];
    check_rule (lines[i]);
    add (full, deny ? VIVARIUM_EGRESS_DENY : VIVARIUM_EGRESS_ALLOW, rule);
    add (deny ? denies : allows, deny ? VIVARIUM_EGRESS_DENY : VIVARIUM_EGRESS_ALLOW, rule);
  }
  decide_all (full, allows, denies, lines);
  check_round_trip (full);
}

/* Whatever load() accepts is a policy save() writes back the same. */
static void
fuzz_file (const uint8_t *data, size_t size)
{
  g_autoptr(VivariumEgressPolicy) policy = NULL;

  g_assert_true (g_file_set_contents (policy_path, (const gchar *) data, (gssize) size, NULL));
  policy = vivarium_egress_policy_load (policy_path, NULL);
  if (policy == NULL)
    return;
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), <=, VIVARIUM_EGRESS_POLICY_MAX_RULES);
  check_round_trip (policy);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree gchar *text = NULL;

  if (size >= 8 && memcmp (data, "[Policy]", 8) == 0) {
    fuzz_file (data, size);
    return 0;
  }
  text = fuzz_string (data, size);
  fuzz_lines (text);
  return 0;
}
