/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <gio/gio.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-config.h"
#include "vd-egress-rules.h"

/* The package's defaults.conf, given by meson. */
static const gchar *shipped_defaults;

typedef struct {
  gchar *root;
  gchar *data_dir;
  gchar *config_dir;
} Layers;

static void
write_file (const gchar *dir, const gchar *name, const gchar *text)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autofree gchar *parent = g_path_get_dirname (path);

  g_assert_cmpint (g_mkdir_with_parents (parent, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static void
layers_setup (Layers *layers, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  layers->root = g_dir_make_tmp ("test-egress-rules-XXXXXX", &error);
  g_assert_no_error (error);
  layers->data_dir = g_build_filename (layers->root, "data", NULL);
  layers->config_dir = g_build_filename (layers->root, "etc", NULL);
  g_assert_cmpint (g_mkdir (layers->data_dir, 0755), ==, 0);
  g_assert_cmpint (g_mkdir (layers->config_dir, 0755), ==, 0);
  g_setenv ("VIVARIUM_DATA_DIR", layers->data_dir, TRUE);
  g_setenv ("VIVARIUM_CONFIG_DIR", layers->config_dir, TRUE);
}

static void
remove_tree (const gchar *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree gchar *child = g_build_filename (path, name, NULL);
    if (g_file_test (child, G_FILE_TEST_IS_DIR))
      remove_tree (child);
    else
      g_unlink (child);
  }
  g_rmdir (path);
}

static void
layers_teardown (Layers *layers, gconstpointer data)
{
  remove_tree (layers->root);
  g_free (layers->root);
  g_free (layers->data_dir);
  g_free (layers->config_dir);
}

static VdConfig *
load_config (void)
{
  g_autoptr(VdConfig) config = vd_config_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_config_load (config, &error));
  g_assert_no_error (error);
  return g_steal_pointer (&config);
}

static void
copy_shipped (Layers *layers)
{
  g_autofree gchar *text = NULL;

  g_assert_true (g_file_get_contents (shipped_defaults, &text, NULL, NULL));
  write_file (layers->data_dir, "defaults.conf", text);
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

/* Every group the package ships builds, and the [Egress] keys read back as
 * documented. */
static void
test_shipped (Layers *layers, gconstpointer data)
{
  const gchar *expected[] = { "crates", "debian", "github", "gitlab", "npm", "pypi", NULL };
  g_autoptr(VdConfig) config = NULL;
  g_auto(GStrv) names = NULL;
  g_auto(GStrv) session_groups = NULL;
  g_auto(GStrv) task_groups = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;

  copy_shipped (layers);
  config = load_config ();
  names = vd_config_get_egress_group_names (config);
  g_assert_cmpstrv (names, expected);
  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *description = NULL;
    g_auto(GStrv) allow = NULL;
    g_assert_true (vd_config_get_egress_group (config, names[i], &allow, NULL, &description));
    g_assert_cmpstr (description, !=, "");
    g_assert_cmpuint (g_strv_length (allow), >, 0);
  }
  g_assert_cmpstr (vd_config_get_egress_session_mode (config), ==, "open");
  g_assert_cmpstr (vd_config_get_egress_task_mode (config), ==, "allowlist");
  session_groups = vd_config_get_egress_session_groups (config);
  task_groups = vd_config_get_egress_task_groups (config);
  g_assert_cmpuint (g_strv_length (session_groups), ==, 0);
  g_assert_cmpuint (g_strv_length (task_groups), ==, 0);
  g_assert_cmpuint (vd_config_get_egress_limit_up (config), ==, 1024ull * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_limit_down (config), ==, 8192ull * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), ==, 10000);

  policy = vd_egress_rules_build (config, (const gchar * const *) names, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 15);
  assert_decision (policy, "deb.debian.org", 80, TRUE, "allowed by deb.debian.org (group debian)");
  assert_decision (policy, "files.pythonhosted.org", 443, TRUE, "allowed by files.pythonhosted.org (group pypi)");
  assert_decision (policy, "objects.githubusercontent.com", 443, TRUE,
                   "allowed by objects.githubusercontent.com (group github)");
  assert_decision (policy, "gist.github.com", 443, FALSE, "no rule allows gist.github.com:443");
}

static void
test_no_groups_denies_all (Layers *layers, gconstpointer data)
{
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *none[] = { NULL };

  copy_shipped (layers);
  config = load_config ();
  policy = vd_egress_rules_build (config, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 0);
  assert_decision (policy, "deb.debian.org", 443, FALSE, "no rule allows deb.debian.org:443");
  g_clear_pointer (&policy, vivarium_egress_policy_free);
  policy = vd_egress_rules_build (config, none, none, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, 0);
}

/* A later layer's group replaces the earlier definition whole: a key the
 * later one leaves out is gone, not inherited. Other sections still merge
 * key by key. */
static void
test_layer_replaces_group_whole (Layers *layers, gconstpointer data)
{
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) allow = NULL;
  g_auto(GStrv) deny = NULL;
  g_auto(GStrv) names = NULL;
  g_autofree gchar *description = NULL;
  const gchar *groups[] = { "mirror", "tools", NULL };
  const gchar *expected_names[] = { "mirror", "tools", NULL };

  write_file (layers->data_dir, "defaults.conf",
              "[Egress]\nTaskMode=allowlist\nLogMaxEntries=500\n"
              "[EgressGroup mirror]\nDescription=Old mirror\nAllow=old.example;*.cdn.example\nDeny=bad.cdn.example\n"
              "[EgressGroup tools]\nAllow=tools.example\n");
  write_file (layers->config_dir, "vivarium.conf",
              "[Egress]\nTaskMode=none\n"
              "[EgressGroup mirror]\nAllow=new.example\n");
  write_file (layers->config_dir, "conf.d/50-tools.conf",
              "[Egress]\nLogMaxEntries=700\n"
              "[EgressGroup tools]\nDescription=Tools\nAllow=tools.example:8443\n");
  config = load_config ();

  names = vd_config_get_egress_group_names (config);
  g_assert_cmpstrv (names, expected_names);
  g_assert_true (vd_config_get_egress_group (config, "mirror", &allow, &deny, &description));
  g_assert_cmpuint (g_strv_length (allow), ==, 1);
  g_assert_cmpstr (allow[0], ==, "new.example");
  g_assert_cmpuint (g_strv_length (deny), ==, 0);
  g_assert_cmpstr (description, ==, "");
  /* Key by key elsewhere: TaskMode from vivarium.conf, LogMaxEntries from the drop-in. */
  g_assert_cmpstr (vd_config_get_egress_task_mode (config), ==, "none");
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), ==, 700);

  policy = vd_egress_rules_build (config, groups, NULL, &error);
  g_assert_no_error (error);
  assert_decision (policy, "new.example", 443, TRUE, "allowed by new.example (group mirror)");
  assert_decision (policy, "old.example", 443, FALSE, "no rule allows old.example:443");
  assert_decision (policy, "x.cdn.example", 443, FALSE, "no rule allows x.cdn.example:443");
  assert_decision (policy, "tools.example", 8443, TRUE, "allowed by tools.example:8443 (group tools)");
  assert_decision (policy, "tools.example", 443, FALSE, "no rule allows tools.example:443");
}

static void
test_group_deny_and_extras (Layers *layers, gconstpointer data)
{
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) lines = NULL;
  const gchar *groups[] = { "cdn", NULL };
  const gchar *extras[] = { "bad.cdn.example", "extra.example:8080", "[2001:db8::5]:443", NULL };
  const gchar *expected[] = {
    "deny bad.cdn.example (group cdn)",
    "allow *.cdn.example (group cdn)",
    "allow bad.cdn.example (session)",
    "allow extra.example:8080 (session)",
    "allow [2001:db8::5]:443 (session)",
    NULL,
  };

  write_file (layers->data_dir, "defaults.conf",
              "[EgressGroup cdn]\nDescription=A CDN\nAllow=*.cdn.example\nDeny=bad.cdn.example\n");
  config = load_config ();
  /* No [Egress] in any layer: the built-in values, the same as shipped. */
  g_assert_cmpstr (vd_config_get_egress_session_mode (config), ==, "open");
  g_assert_cmpstr (vd_config_get_egress_task_mode (config), ==, "allowlist");
  g_assert_cmpuint (vd_config_get_egress_limit_up (config), ==, 1024ull * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_limit_down (config), ==, 8192ull * 1024 * 1024);
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), ==, 10000);
  policy = vd_egress_rules_build (config, groups, extras, &error);
  g_assert_no_error (error);
  lines = vivarium_egress_policy_describe (policy);
  g_assert_cmpstrv (lines, expected);
  /* The session's own allow cannot lift a group's deny. */
  assert_decision (policy, "bad.cdn.example", 443, FALSE, "denied by bad.cdn.example (group cdn)");
  assert_decision (policy, "ok.cdn.example", 443, TRUE, "allowed by *.cdn.example (group cdn)");
  assert_decision (policy, "extra.example", 8080, TRUE, "allowed by extra.example:8080 (session)");
}

static void
test_refusals (Layers *layers, gconstpointer data)
{
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(GPtrArray) many = g_ptr_array_new_with_free_func (g_free);
  const gchar *unknown[] = { "debian", "nosuch", NULL };
  const gchar *hostile[] = { "evil\x1b[2J", NULL };
  const gchar *bad_extra[] = { "ok.example", "a..b", NULL };
  const gchar *port_extra[] = { "ok.example:0", NULL };
  const gchar *broken[] = { "broken", NULL };
  const struct { const gchar *const *groups, *const *extras; const gchar *message; gint code; } cases[] = {
    { unknown, NULL, "Unknown egress group “nosuch” (known: broken, debian)", VIVARIUM_ERROR_INVALID_ARGUMENT },
    { hostile, NULL, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT },
    { NULL, bad_extra, "Bad egress rule “a..b”: a label of the host name is empty", VIVARIUM_ERROR_INVALID_ARGUMENT },
    { NULL, port_extra, "Bad egress rule “ok.example:0”: the port is not a number from 1 to 65535",
      VIVARIUM_ERROR_INVALID_ARGUMENT },
    { broken, NULL, NULL, VIVARIUM_ERROR_FAILED },
  };

  write_file (layers->data_dir, "defaults.conf",
              "[EgressGroup debian]\nAllow=deb.debian.org\n"
              "[EgressGroup broken]\nAllow=fine.example\nDeny=*.\n");
  config = load_config ();
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(VivariumEgressPolicy) policy = vd_egress_rules_build (config, cases[i].groups, cases[i].extras, &error);
    g_assert_null (policy);
    g_assert_error (error, VIVARIUM_ERROR, cases[i].code);
    if (cases[i].message != NULL)
      g_assert_cmpstr (error->message, ==, cases[i].message);
    for (const gchar *p = error->message; *p != '\0'; p++)
      g_assert_true ((guchar) *p >= 0x20);
  }
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(VivariumEgressPolicy) policy = vd_egress_rules_build (config, broken, NULL, &error);
    g_assert_nonnull (strstr (error->message, "[EgressGroup broken]"));
    g_assert_nonnull (strstr (error->message, "“*.”"));
    g_assert_nonnull (strstr (error->message, layers->config_dir));
  }

  /* 256 extras are fine, 257 are refused before any is looked at. */
  for (guint i = 0; i < VD_EGRESS_MAX_EXTRA_RULES; i++)
    g_ptr_array_add (many, g_strdup_printf ("h%u.example", i));
  g_ptr_array_add (many, NULL);
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(VivariumEgressPolicy) policy = vd_egress_rules_build (config, NULL, (const gchar * const *) many->pdata, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (vivarium_egress_policy_get_n_rules (policy), ==, VD_EGRESS_MAX_EXTRA_RULES);
  }
  g_ptr_array_remove_index (many, many->len - 1);
  g_ptr_array_add (many, g_strdup ("one-more.example"));
  g_ptr_array_add (many, NULL);
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(VivariumEgressPolicy) policy = vd_egress_rules_build (config, NULL, (const gchar * const *) many->pdata, &error);
    g_assert_null (policy);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_assert_cmpstr (error->message, ==, "Too many egress_allow rules: 257 given, at most 256");
  }
}

/* Groups large enough together to pass the policy's 1024-rule bound:
 * refused with the bound's sentence, typed. */
static void
test_groups_over_the_bound (Layers *layers, gconstpointer data)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumEgressPolicy) policy = NULL;
  const gchar *groups[] = { "big1", "big2", NULL };

  for (guint g = 1; g <= 2; g++) {
    g_string_append_printf (text, "[EgressGroup big%u]\nAllow=", g);
    for (guint i = 0; i < 600; i++)
      g_string_append_printf (text, "h%u-%u.example;", g, i);
    g_string_append (text, "\n");
  }
  write_file (layers->data_dir, "defaults.conf", text->str);
  config = load_config ();
  policy = vd_egress_rules_build (config, groups, NULL, &error);
  g_assert_null (policy);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "1024"));
}

/* Out-of-range values fall back to the built-in ones, with a warning, as
 * every other key does; 0 limits mean none. */
static void
test_getters_range (Layers *layers, gconstpointer data)
{
  g_autoptr(VdConfig) config = NULL;
  g_auto(GStrv) groups = NULL;
  g_auto(GStrv) names = NULL;
  const gchar *expected[] = { "debian", "pypi", NULL };

  write_file (layers->data_dir, "defaults.conf",
              "[Egress]\nSessionMode=wide-open\nTaskMode=open\nLimitUpMiB=0\nLimitDownMiB=99999999\n"
              "LogMaxEntries=5\nTaskGroups= debian ; pypi ;;\n"
              "[EgressGroup has space]\nAllow=x.example\n"
              "[EgressGroup ok]\nAllow=x.example\n");
  config = load_config ();
  g_test_expect_message ("VdConfig", G_LOG_LEVEL_WARNING, "*SessionMode=wide-open*");
  g_assert_cmpstr (vd_config_get_egress_session_mode (config), ==, "open");
  g_test_assert_expected_messages ();
  g_assert_cmpstr (vd_config_get_egress_task_mode (config), ==, "open");
  g_assert_cmpuint (vd_config_get_egress_limit_up (config), ==, 0);
  g_test_expect_message ("VdConfig", G_LOG_LEVEL_WARNING, "*LimitDownMiB=99999999*");
  g_assert_cmpuint (vd_config_get_egress_limit_down (config), ==, 8192ull * 1024 * 1024);
  g_test_assert_expected_messages ();
  g_test_expect_message ("VdConfig", G_LOG_LEVEL_WARNING, "*LogMaxEntries=5*");
  g_assert_cmpuint (vd_config_get_egress_log_max_entries (config), ==, 10000);
  g_test_assert_expected_messages ();
  groups = vd_config_get_egress_task_groups (config);
  g_assert_cmpstrv (groups, expected);
  g_test_expect_message ("VdConfig", G_LOG_LEVEL_WARNING, "*EgressGroup has space*");
  names = vd_config_get_egress_group_names (config);
  g_test_assert_expected_messages ();
  g_assert_cmpuint (g_strv_length (names), ==, 1);
  g_assert_cmpstr (names[0], ==, "ok");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (argc < 2)
    g_error ("usage: %s [GTest options] PATH-TO-defaults.conf", argv[0]);
  shipped_defaults = argv[1];
  g_test_add ("/egress-rules/shipped", Layers, NULL, layers_setup, test_shipped, layers_teardown);
  g_test_add ("/egress-rules/no-groups-denies-all", Layers, NULL, layers_setup, test_no_groups_denies_all, layers_teardown);
  g_test_add ("/egress-rules/layer-replaces-group-whole", Layers, NULL, layers_setup,
              test_layer_replaces_group_whole, layers_teardown);
  g_test_add ("/egress-rules/group-deny-and-extras", Layers, NULL, layers_setup, test_group_deny_and_extras, layers_teardown);
  g_test_add ("/egress-rules/refusals", Layers, NULL, layers_setup, test_refusals, layers_teardown);
  g_test_add ("/egress-rules/groups-over-the-bound", Layers, NULL, layers_setup, test_groups_over_the_bound, layers_teardown);
  g_test_add ("/egress-rules/getters-range", Layers, NULL, layers_setup, test_getters_range, layers_teardown);
  return g_test_run ();
}
