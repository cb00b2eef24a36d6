/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-egress-log.h"

/* The daemon's reader of a proxy's decision log: the proxy parses guest
 * bytes, so its file is read as untrusted — typed, capped, paged, and
 * summarised for the report without trusting a line's claims. */

static gchar *
write_log (const gchar *text)
{
  g_autofree gchar *dir = g_dir_make_tmp ("vd-egress-log-XXXXXX", NULL);
  gchar *path = g_build_filename (dir, "decisions.jsonl", NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

static void
remove_log (const gchar *path)
{
  g_autofree gchar *dir = g_path_get_dirname (path);

  g_unlink (path);
  g_rmdir (dir);
}

#define ALLOWED(host) "{\"time\":\"2026-12-02T00:21:00.123Z\",\"host\":\"" host "\",\"port\":443,\"via\":\"tls\"," \
                      "\"verdict\":\"allowed\",\"reason\":\"allowed by " host " (session)\",\"bytes_up\":517," \
                      "\"bytes_down\":40960,\"duration_ms\":812}\n"
#define DENIED(host)  "{\"time\":\"2026-12-02T00:22:00Z\",\"host\":\"" host "\",\"port\":443,\"via\":\"proxy\"," \
                      "\"verdict\":\"denied\",\"reason\":\"no rule allows " host ":443\",\"bytes_up\":0," \
                      "\"bytes_down\":0,\"duration_ms\":0}\n"

static void
test_reads_typed_entries (void)
{
  g_autofree gchar *path = write_log (ALLOWED ("deb.debian.org") DENIED ("evil.example"));
  g_autoptr(GVariant) entries = NULL;
  g_autoptr(GVariant) first = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next = 0, total = 0, up = 0;
  const gchar *host = NULL, *verdict = NULL;
  gint64 time_usec = 0;
  guint16 port = 0;

  entries = vd_egress_log_read (path, 0, 10, &next, &total, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (entries), ==, 2);
  g_assert_cmpuint (total, ==, 2);
  g_assert_cmpuint (next, ==, 2);
  first = g_variant_get_child_value (entries, 0);
  g_assert_true (g_variant_lookup (first, "host", "&s", &host));
  g_assert_true (g_variant_lookup (first, "verdict", "&s", &verdict));
  g_assert_true (g_variant_lookup (first, "port", "q", &port));
  g_assert_true (g_variant_lookup (first, "bytes-up", "t", &up));
  g_assert_true (g_variant_lookup (first, "time", "x", &time_usec));
  g_assert_cmpstr (host, ==, "deb.debian.org");
  g_assert_cmpstr (verdict, ==, "allowed");
  g_assert_cmpuint (port, ==, 443);
  g_assert_cmpuint (up, ==, 517);
  g_assert_cmpint (time_usec % G_USEC_PER_SEC, ==, 123000);
  remove_log (path);
}

/* Lines that are not entries (wrong types, no verdict, not JSON, too
 * long) are skipped; strings are capped; a wrong-typed count is 0. */
static void
test_hostile_lines (void)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree gchar *long_host = g_strnfill (5000, 'a');
  g_autofree gchar *path = NULL;
  g_autoptr(GVariant) entries = NULL;
  g_autoptr(GVariant) e = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next = 0, total = 0, down = 1;
  const gchar *reason = NULL;

  g_string_append (text, "not json\n[1,2]\n{\"host\":\"x\"}\n\n");
  g_string_append_printf (text, "{\"verdict\":\"denied\",\"host\":\"%s\"}\n", long_host);
  g_string_append (text, "{\"verdict\":\"denied\",\"host\":\"h\",\"reason\":\"");
  for (guint i = 0; i < 700; i++)
    g_string_append (text, "r");
  g_string_append (text, "\",\"bytes_down\":\"lots\",\"port\":99999999}\n");
  g_string_append (text, "{\"verdict\":\"allowed\",\"host\":\"\\u0000\\u001b[2J\"}\n");
  g_string_append (text, "{\"verdict\":\"denied\",\"host\":\"evil\\u001b[2J.example\\nallowed: forged\"}\n");
  path = write_log (text->str);
  entries = vd_egress_log_read (path, 0, 10, &next, &total, &error);
  g_assert_no_error (error);
  /* The 5000-byte line is past the line cap; three entries remain. */
  g_assert_cmpuint (total, ==, 3);
  e = g_variant_get_child_value (entries, 0);
  g_assert_true (g_variant_lookup (e, "reason", "&s", &reason));
  g_assert_cmpuint (strlen (reason), ==, 512);
  g_assert_true (g_variant_lookup (e, "bytes-down", "t", &down));
  g_assert_cmpuint (down, ==, 0);
  /* A host that is no host name is not passed on as one. */
  {
    g_autoptr(GVariant) last = g_variant_get_child_value (entries, 2);
    const gchar *host = NULL;
    g_assert_true (g_variant_lookup (last, "host", "&s", &host));
    g_assert_cmpstr (host, ==, "(invalid)");
  }
  remove_log (path);
}

static void
test_pages_and_limits (void)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree gchar *path = NULL;
  g_autoptr(GVariant) page = NULL;
  g_autoptr(GVariant) past = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next = 0, total = 0;

  for (guint i = 0; i < 25; i++)
    g_string_append (text, DENIED ("evil.example"));
  path = write_log (text->str);
  page = vd_egress_log_read (path, 20, 10, &next, &total, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (page), ==, 5);
  g_assert_cmpuint (next, ==, 25);
  g_assert_cmpuint (total, ==, 25);
  past = vd_egress_log_read (path, 100, 10, &next, &total, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (past), ==, 0);
  g_assert_null (vd_egress_log_read (path, 0, 0, &next, &total, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (vd_egress_log_read (path, 0, VD_EGRESS_LOG_PAGE_MAX + 1, &next, &total, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  remove_log (path);
}

static void
test_missing_is_empty (void)
{
  g_autoptr(GVariant) entries = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next = 7, total = 7;

  entries = vd_egress_log_read ("/nonexistent/decisions.jsonl", 0, 10, &next, &total, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (entries), ==, 0);
  g_assert_cmpuint (total, ==, 0);
}

static void
test_summary (void)
{
  g_autofree gchar *path = write_log (ALLOWED ("deb.debian.org") ALLOWED ("deb.debian.org") ALLOWED ("pypi.org")
                                      DENIED ("evil.example")
                                      "{\"time\":\"2026-12-02T00:23:00Z\",\"verdict\":\"log-full\",\"host\":\"\"}\n");
  g_autofree gchar *summary = vd_egress_log_summarize (path);

  g_assert_cmpstr (summary, ==, "3 allowed (deb.debian.org:443 ×2, pypi.org:443), 1 denied (evil.example:443); "
                                "1551 bytes up, 122880 down; the log is full, later decisions are counted only");
  remove_log (path);
}

static void
test_summary_dns (void)
{
  g_autofree gchar *path = write_log ("{\"host\":\"other.test\",\"port\":0,\"via\":\"dns\",\"verdict\":\"denied\"}\n"
                                      "{\"host\":\"other.test\",\"port\":0,\"via\":\"dns\",\"verdict\":\"denied\"}\n");
  g_autofree gchar *summary = vd_egress_log_summarize (path);

  g_assert_cmpstr (summary, ==, "0 allowed, 2 denied (other.test (DNS) ×2); 0 bytes up, 0 down");
  remove_log (path);
}

/* A placeholder refusal is quoted (names the secret, where it went), a
 * placeholder itself never: not in a host, not in a reason. */
static void
test_summary_secret_refusals (void)
{
  static const gchar ph[] = "vivarium-secret-0123456789abcdef0123456789abcdef";
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree gchar *path = NULL;
  g_autofree gchar *summary = NULL;

  for (guint i = 0; i < 3; i++)
    g_string_append_printf (text, "{\"host\":\"h%u.test\",\"port\":443,\"verdict\":\"denied\",\"reason\":"
                            "\"a secret's placeholder (TOKEN) was sent to h%u.test:443 in the body: refused\"}\n", i, i);
  g_string_append_printf (text, "{\"host\":\"%s.allowed.test\",\"port\":53,\"via\":\"dns\",\"verdict\":\"denied\","
                          "\"reason\":\"a secret's placeholder (TOKEN) was sent to %s.allowed.test:53 in the DNS name: "
                          "refused\"}\n", ph, ph);
  path = write_log (text->str);
  summary = vd_egress_log_summarize (path);
  g_assert_nonnull (strstr (summary, "; a secret's placeholder (TOKEN) was sent to h0.test:443 in the body: refused"));
  g_assert_nonnull (strstr (summary, "; 1 more refusal of a secret's placeholder"));
  g_assert_null (strstr (summary, ph));
  g_assert_null (strstr (summary, "0123456789abcdef"));
  g_assert_nonnull (strstr (summary, "vivarium-secret-….allowed.test (DNS)"));
  remove_log (path);
}

static void
test_summary_caps_hosts (void)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree gchar *path = NULL;
  g_autofree gchar *summary = NULL;

  g_string_append (text, DENIED ("a.example") DENIED ("b.example") DENIED ("c.example") DENIED ("d.example")
                   DENIED ("e.example") DENIED ("f.example") DENIED ("g.example"));
  path = write_log (text->str);
  summary = vd_egress_log_summarize (path);
  g_assert_nonnull (strstr (summary, "7 denied ("));
  g_assert_nonnull (strstr (summary, ", 2 more)"));
  g_assert_null (strstr (summary, "f.example"));
  remove_log (path);
}

/* The bytes entry points (the fuzz harness's) are what the file ones read:
 * same entries, same count, same summary. */
static void
test_bytes_same_as_file (void)
{
  const gchar *text = ALLOWED ("deb.debian.org") "not json\n" DENIED ("evil.example") ALLOWED ("pypi.org");
  g_autoptr(GBytes) bytes = g_bytes_new_static (text, strlen (text));
  g_autofree gchar *path = write_log (text);
  g_autoptr(GVariant) from_file = NULL;
  g_autoptr(GVariant) from_bytes = NULL;
  g_autofree gchar *summary_file = NULL;
  g_autofree gchar *summary_bytes = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next_file = 0, total_file = 0, next_bytes = 0, total_bytes = 0;

  from_file = vd_egress_log_read (path, 1, 10, &next_file, &total_file, &error);
  g_assert_no_error (error);
  from_bytes = vd_egress_log_read_bytes (bytes, 1, 10, &next_bytes, &total_bytes, &error);
  g_assert_no_error (error);
  g_assert_true (g_variant_equal (from_file, from_bytes));
  g_assert_cmpuint (g_variant_n_children (from_bytes), ==, 2);
  g_assert_cmpuint (total_bytes, ==, 3);
  g_assert_cmpuint (total_file, ==, total_bytes);
  g_assert_cmpuint (next_file, ==, next_bytes);
  summary_file = vd_egress_log_summarize (path);
  summary_bytes = vd_egress_log_summarize_bytes (bytes);
  g_assert_cmpstr (summary_file, ==, summary_bytes);
  g_assert_null (vd_egress_log_read_bytes (bytes, 0, 0, &next_bytes, &total_bytes, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  remove_log (path);
}

/* No bytes (a GBytes whose data is NULL): no entries. fuzz-egress-log's
 * first input; under clang's UBSan, NULL + 0 was the first crash. */
static void
test_bytes_empty (void)
{
  g_autoptr(GBytes) empty = g_bytes_new (NULL, 0);
  g_autoptr(GVariant) entries = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *summary = NULL;
  guint64 next = 7, total = 7;

  entries = vd_egress_log_read_bytes (empty, 0, 10, &next, &total, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (entries), ==, 0);
  g_assert_cmpuint (total, ==, 0);
  g_assert_cmpuint (next, ==, 0);
  summary = vd_egress_log_summarize_bytes (empty);
  g_assert_cmpstr (summary, ==, "0 allowed, 0 denied; 0 bytes up, 0 down");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/egress-log/typed", test_reads_typed_entries);
  g_test_add_func ("/egress-log/hostile", test_hostile_lines);
  g_test_add_func ("/egress-log/pages", test_pages_and_limits);
  g_test_add_func ("/egress-log/missing", test_missing_is_empty);
  g_test_add_func ("/egress-log/summary", test_summary);
  g_test_add_func ("/egress-log/summary-caps", test_summary_caps_hosts);
  g_test_add_func ("/egress-log/summary-dns", test_summary_dns);
  g_test_add_func ("/egress-log/summary-secret-refusals", test_summary_secret_refusals);
  g_test_add_func ("/egress-log/bytes", test_bytes_same_as_file);
  g_test_add_func ("/egress-log/bytes-empty", test_bytes_empty);
  return g_test_run ();
}
