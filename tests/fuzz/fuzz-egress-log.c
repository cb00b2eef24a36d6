/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's reader of a proxy's decision log (service/vd-egress-log.h):
 * the proxy parses guest bytes, so its log is untrusted input. The input is
 * the log's bytes, read whole, read in pages and summarised. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vd-egress-log.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

/* Every entry is typed and capped whatever the line said. */
static guint
check_entries (GVariant *entries)
{
  GVariantIter iter;
  GVariant *entry;
  guint allowed = 0;

  g_variant_iter_init (&iter, entries);
  while ((entry = g_variant_iter_next_value (&iter)) != NULL) {
    const gchar *host = NULL, *verdict = NULL, *reason = NULL, *via = NULL;
    g_assert_true (g_variant_lookup (entry, "host", "&s", &host));
    g_assert_true (g_variant_lookup (entry, "verdict", "&s", &verdict));
    g_assert_true (g_variant_lookup (entry, "reason", "&s", &reason));
    g_assert_true (g_variant_lookup (entry, "via", "&s", &via));
    /* Capped in characters: a cut character becomes U+FFFD (3 bytes). */
    g_assert_cmpuint (strlen (host), <=, 253 + 2);
    g_assert_cmpuint (strlen (reason), <=, 512 + 2);
    g_assert_cmpuint (strlen (verdict), <=, 16 + 2);
    g_assert_cmpuint (strlen (via), <=, 16 + 2);
    g_assert_cmpuint (strlen (verdict), >, 0);
    allowed += g_str_equal (verdict, "allowed");
    g_variant_unref (entry);
  }
  return allowed;
}

/* Pages (of a size the input picks) are slices of the whole: same count,
 * same entries in order. Each page reads the whole log again, so only the
 * first few, and the one past the end. */
static void
check_pages (GBytes *bytes, GVariant *whole, guint64 total)
{
  guint limit = 1 + g_bytes_get_size (bytes) % 97;
  guint64 offset = 0, next = 0, page_total = 0;
  g_autoptr(GVariant) past = NULL;

  past = vd_egress_log_read_bytes (bytes, total + 3, limit, &next, &page_total, NULL);
  g_assert_cmpuint (g_variant_n_children (past), ==, 0);
  g_assert_cmpuint (next, ==, total + 3);
  for (guint pages = 0; offset < total && pages < 4; pages++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) page = vd_egress_log_read_bytes (bytes, offset, limit, &next, &page_total, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (page_total, ==, total);
    g_assert_cmpuint (next, >, offset);
    g_assert_cmpuint (next - offset, ==, g_variant_n_children (page));
    for (gsize i = 0; i < g_variant_n_children (page); i++) {
      g_autoptr(GVariant) a = g_variant_get_child_value (page, i);
      g_autoptr(GVariant) b = g_variant_get_child_value (whole, offset + i);
      g_assert_true (g_variant_equal (a, b));
    }
    offset = next;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GBytes) bytes = g_bytes_new (data, size);
  g_autoptr(GVariant) whole = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *summary = NULL;
  g_autofree gchar *expected = NULL;
  guint64 next = 0, total = 0;
  guint allowed;

  whole = vd_egress_log_read_bytes (bytes, 0, VD_EGRESS_LOG_PAGE_MAX, &next, &total, &error);
  g_assert_no_error (error);
  /* The harness's inputs are short enough that one page is the whole. */
  g_assert_cmpuint (total, <=, VD_EGRESS_LOG_PAGE_MAX);
  g_assert_cmpuint (g_variant_n_children (whole), ==, total);
  g_assert_cmpuint (next, ==, total);
  allowed = check_entries (whole);
  check_pages (bytes, whole, total);
  summary = vd_egress_log_summarize_bytes (bytes);
  g_assert_nonnull (summary);
  g_assert_true (g_utf8_validate (summary, -1, NULL));
  expected = g_strdup_printf ("%u allowed", allowed);
  g_assert_true (g_str_has_prefix (summary, expected));
  return 0;
}
