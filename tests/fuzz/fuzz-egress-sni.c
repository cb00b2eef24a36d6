/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vivarium_egress_sni_parse() over any bytes a guest sends first on the
 * transparent TLS port or after a CONNECT. */

#include "config.h"

#include <string.h>

#include "fuzz-common.h"
#include "vivarium-egress-policy.h"
#include "vivarium-egress-sni.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_setup ();
  return 0;
}

/* The header's contract for a name: FOUND ⇔ a name, 1-255 bytes, no NUL;
 * and what the proxy makes of it is a fixed point of normalisation. */
static void
check_name (VivariumSniResult result, const gchar *name)
{
  g_autofree gchar *normal = NULL;
  g_autofree gchar *again = NULL;
  gsize len;

  g_assert_true ((result == VIVARIUM_SNI_FOUND) == (name != NULL));
  if (name == NULL)
    return;
  len = strlen (name);
  g_assert_cmpuint (len, >, 0);
  g_assert_cmpuint (len, <=, 255);
  normal = vivarium_egress_normalize_host (name);
  if (normal == NULL)
    return;
  again = vivarium_egress_normalize_host (normal);
  g_assert_cmpstr (again, ==, normal);
}

/* The proxy asks again with every read: a decision, once made, must not
 * change with the bytes that follow it; and a prefix of an input that still
 * needs more needs more too. */
static void
check_monotonic (const uint8_t *data, size_t size, VivariumSniResult result, const gchar *name)
{
  g_autofree guint8 *longer = NULL;
  g_autofree gchar *longer_name = NULL;
  g_autofree gchar *prefix_name = NULL;

  if (result == VIVARIUM_SNI_NEED_MORE) {
    g_assert_cmpint (vivarium_egress_sni_parse (data, size / 2, &prefix_name), ==, VIVARIUM_SNI_NEED_MORE);
    g_assert_null (prefix_name);
    return;
  }
  longer = g_malloc (size + 1);
  memcpy (longer, data, size);
  longer[size] = size > 0 ? data[size - 1] : 0x16;
  g_assert_cmpint (vivarium_egress_sni_parse (longer, size + 1, &longer_name), ==, result);
  g_assert_cmpstr (longer_name, ==, name);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree gchar *name = NULL;
  VivariumSniResult result = vivarium_egress_sni_parse (data, size, &name);

  g_assert_cmpint (result, >=, VIVARIUM_SNI_NEED_MORE);
  g_assert_cmpint (result, <=, VIVARIUM_SNI_TOO_LARGE);
  check_name (result, name);
  check_monotonic (data, size, result, name);
  return 0;
}
