/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The placeholder scanner (vivarium-egress-placeholder.h) over any bytes a
 * guest sends: a URL, a header, a body, fed whole and as a stream. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vivarium-egress-placeholder.h"

static GPtrArray *secrets;
static VivariumPlaceholders *set;

static VivariumSecret *
secret_of (const gchar *name, const gchar *placeholder)
{
  VivariumSecret *secret = g_new0 (VivariumSecret, 1);
  const gchar *hosts[] = { "api.example.org", NULL };

  secret->name = g_strdup (name);
  secret->hosts = g_strdupv ((GStrv) hosts);
  secret->header = g_strdup ("Authorization");
  secret->format = g_strdup ("Bearer {}");
  secret->placeholder = g_strdup (placeholder);
  secret->value = g_bytes_new_static ("v", 1);
  return secret;
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  secrets = g_ptr_array_new_with_free_func ((GDestroyNotify) vivarium_secret_free);
  /* The seed corpus holds these two in their forms. */
  g_ptr_array_add (secrets, secret_of ("A", "vivarium-secret-0123456789abcdef0123456789abcdef"));
  g_ptr_array_add (secrets, secret_of ("B", "vivarium-secret-fedcba9876543210fedcba9876543210"));
  set = vivarium_placeholders_new (secrets);
  return 0;
}

/* A placeholder once seen stays seen whatever follows it (the proxy scans
 * as bytes come); and the stream scan keeps no more than its overlap. */
int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const VivariumSecret *whole = vivarium_placeholders_find (set, data, size);
  g_autofree guint8 *longer = g_malloc (size + 1);
  VivariumPlaceholderScan scan;
  gsize step = size > 0 ? 1 + data[0] % 64 : 1;

  memcpy (longer, data, size);
  longer[size] = size > 0 ? data[size - 1] : 'v';
  if (whole != NULL)
    g_assert_nonnull (vivarium_placeholders_find (set, longer, size + 1));
  vivarium_placeholder_scan_init (&scan, set);
  for (gsize at = 0; at < size; at += step) {
    vivarium_placeholder_scan_feed (&scan, data + at, MIN (step, size - at));
    g_assert_cmpuint (scan.tail_len, <=, VIVARIUM_PLACEHOLDER_OVERLAP);
  }
  return 0;
}
