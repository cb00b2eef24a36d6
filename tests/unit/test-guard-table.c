/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-guard-table"

#include "config.h"

#include <string.h>

#include "vivarium-error.h"

#include "vd-guard-table.h"

/* Dry-run tests of the install batch, in the style of libvirt's
 * nwfilterxml2firewalltest: the batch is rendered to text and compared with
 * a golden file. VIVARIUM_REGENERATE_GOLDEN=1 rewrites the golden files. */

#define UID_FIRST 2147000000u
#define UID_LAST  2147065534u

static void
assert_golden (const gchar *name, const gchar *actual)
{
  g_autofree gchar *path = g_build_filename (VIVARIUM_SOURCE_ROOT, "tests", "unit", "golden", name, NULL);
  g_autofree gchar *expected = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) want = NULL;
  g_auto(GStrv) got = NULL;

  if (g_strcmp0 (g_getenv ("VIVARIUM_REGENERATE_GOLDEN"), "1") == 0) {
    g_file_set_contents (path, actual, -1, &error);
    g_assert_no_error (error);
    g_test_message ("rewrote %s", path);
    return;
  }
  /* a missing golden file is a failure, not a skip */
  g_file_get_contents (path, &expected, NULL, &error);
  g_assert_no_error (error);
  if (g_strcmp0 (expected, actual) == 0)
    return;
  want = g_strsplit (expected, "\n", -1);
  got = g_strsplit (actual, "\n", -1);
  for (guint i = 0; want[i] != NULL || got[i] != NULL; i++) {
    if (g_strcmp0 (want[i], got[i]) != 0) {
      g_test_message ("%s line %u:\n  expected: %s\n  actual:   %s", name, i + 1,
                      want[i] != NULL ? want[i] : "(end)", got[i] != NULL ? got[i] : "(end)");
      break;
    }
  }
  g_test_fail_printf ("%s differs from the batch (set VIVARIUM_REGENERATE_GOLDEN=1 to rewrite)", name);
}

static gchar *
describe (VdGuardTable *table)
{
  g_autoptr(GError) error = NULL;
  gchar *text = vd_guard_table_describe_batch (table, &error);

  g_assert_no_error (error);
  g_assert_nonnull (text);
  return text;
}

static void
test_golden_builtin (void)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autofree gchar *text = describe (table);

  assert_golden ("guard-builtin.txt", text);
  /* a few facts checked directly, so a wrongly regenerated file is caught */
  g_assert_nonnull (strstr (text, "table vivarium_guard flags 0x2 (owner)"));
  g_assert_nonnull (strstr (text, "    elem 10.0.0.0\n    elem 11.0.0.0 interval-end\n"));
  g_assert_nonnull (strstr (text, "    elem 255.255.255.255\n"));
  g_assert_null (strstr (text, "elem 0.0.0.0 interval-end"));
  g_assert_nonnull (strstr (text, "    elem ::1\n    elem ::2 interval-end\n"));
  g_assert_nonnull (strstr (text, "comment \"vivarium uids 2147000000-2147065534 ipv4\""));
  g_assert_nonnull (strstr (text, "NFT_MSG_NEWRULE len"));
  g_assert_true (g_str_has_suffix (text, "NFNL_MSG_BATCH_END len 20 flags REQUEST family 0 res_id 10\n"));
}

static void
test_golden_extra (void)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;

  vd_guard_table_add_extra (table, "203.0.113.7/32", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (table, "2001:db8::1/128", &error);
  g_assert_no_error (error);
  text = describe (table);
  assert_golden ("guard-extra.txt", text);
  g_assert_nonnull (strstr (text, "    elem 203.0.113.7\n    elem 203.0.113.8 interval-end\n"));
  g_assert_nonnull (strstr (text, "    elem 2001:db8::1\n    elem 2001:db8::2 interval-end\n"));
}

static void
test_golden_sessions (void)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;

  vd_guard_table_add_session (table, UID_FIRST + 1, &error);
  g_assert_no_error (error);
  vd_guard_table_add_session (table, UID_FIRST + 2, &error);
  g_assert_no_error (error);
  text = describe (table);
  assert_golden ("guard-sessions.txt", text);
  g_assert_nonnull (strstr (text, "comment \"vivarium session uid 2147000001 ipv4\""));
  g_assert_nonnull (strstr (text, "comment \"vivarium session uid 2147000002 ipv6\""));
}

/* An administrator's range inside a builtin one, or touching it, must merge
 * into one interval: the kernel would refuse overlapping elements. */
static void
test_merge (void)
{
  g_autoptr(VdGuardTable) plain = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(VdGuardTable) inside = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(VdGuardTable) adjacent = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *plain_text = describe (plain);
  g_autofree gchar *inside_text = NULL;
  g_autofree gchar *adjacent_text = NULL;

  vd_guard_table_add_extra (inside, "10.1.0.0/16", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (inside, "10.1.2.3", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (inside, "fd12:3456::/32", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (inside, "127.0.0.0/8", &error);  /* a duplicate */
  g_assert_no_error (error);
  inside_text = describe (inside);
  g_assert_cmpstr (inside_text, ==, plain_text);

  vd_guard_table_add_extra (adjacent, "11.0.0.0/8", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (adjacent, "9.255.255.255/32", &error);
  g_assert_no_error (error);
  vd_guard_table_add_extra (adjacent, "240.0.0.0/4", &error);
  g_assert_no_error (error);
  adjacent_text = describe (adjacent);
  g_assert_nonnull (strstr (adjacent_text, "    elem 9.255.255.255\n    elem 12.0.0.0 interval-end\n"));
  /* 224/4 + 240/4 + 255.255.255.255 run to the end: one start, no end */
  g_assert_nonnull (strstr (adjacent_text, "    elem 224.0.0.0\n#5 NFT_MSG_NEWSET"));
  g_assert_null (strstr (adjacent_text, "elem 10.0.0.0"));
}

static void
test_bad_cidr (void)
{
  const gchar *bad[] = {
    "", "not-an-address", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8",
    "10.0.0.1/8", "::1/129", "2001:db8::1/64", "1.2.3.4 ", " 1.2.3.4", "1.2.3.4/+8",
    "1.2.3", "fe80::1%lo",
  };
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autofree gchar *before = describe (table);
  g_autofree gchar *after = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_test_message ("refusing '%s'", bad[i]);
    g_assert_false (vd_guard_table_add_extra (table, bad[i], &error));
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  }
  after = describe (table);
  g_assert_cmpstr (before, ==, after);
}

static void
test_session_refusals (void)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;
  guint64 packets = 0;

  g_assert_false (vd_guard_table_add_session (table, UID_FIRST - 1, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_add_session (table, UID_LAST + 1, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_true (vd_guard_table_add_session (table, UID_LAST, &error));
  g_assert_no_error (error);
  g_assert_false (vd_guard_table_add_session (table, UID_LAST, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_remove_session (table, UID_FIRST, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_get_counters (table, UID_LAST, &packets, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_verify (table, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_is_installed (table));
  g_assert_true (vd_guard_table_remove_session (table, UID_LAST, &error));
  g_assert_no_error (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/guard-table/golden/builtin", test_golden_builtin);
  g_test_add_func ("/guard-table/golden/extra", test_golden_extra);
  g_test_add_func ("/guard-table/golden/sessions", test_golden_sessions);
  g_test_add_func ("/guard-table/merge", test_merge);
  g_test_add_func ("/guard-table/bad-cidr", test_bad_cidr);
  g_test_add_func ("/guard-table/session-refusals", test_session_refusals);
  return g_test_run ();
}
