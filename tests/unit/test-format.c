/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sizes and uids the app and vivariumctl show (common/), at their
 * boundaries. LC_ALL=C: GLib's own words, untranslated. */
#include "config.h"

#include <locale.h>
#include <pwd.h>
#include <string.h>
#include <glib.h>

#include "vivarium-size.h"
#include "vivarium-user.h"

#define KIB G_GUINT64_CONSTANT (1024)
#define MIB (KIB * KIB)
#define GIB (MIB * KIB)

static void
assert_size (guint64 bytes, gboolean exact, const gchar *expected)
{
  g_autofree gchar *got = vivarium_format_size (bytes, exact);
  g_autoptr(GString) want = g_string_new (expected);

  /* GLib puts a no-break space between a number and its unit (not
   * before "bytes"). */
  if (strstr (expected, "iB") != NULL)
    g_string_replace (want, " ", "\u00a0", 1);
  g_assert_cmpstr (got, ==, want->str);
}

static void
test_size_boundaries (void)
{
  assert_size (0, FALSE, "0 bytes");
  assert_size (1, FALSE, "1 byte");
  assert_size (1023, FALSE, "1023 bytes");
  assert_size (KIB, FALSE, "1.0 KiB");
  assert_size (MIB + MIB / 2, FALSE, "1.5 MiB");
  assert_size (16 * MIB, FALSE, "16.0 MiB");
  assert_size (3 * GIB, FALSE, "3.0 GiB");
  assert_size (G_MAXUINT64, FALSE, "16.0 EiB");
}

/* Just under the next unit, GLib alone says "1024.0 KiB". */
static void
test_size_rounds_up_a_unit (void)
{
  assert_size (MIB - 1, FALSE, "1.0 MiB");
  assert_size (GIB - 1, FALSE, "1.0 GiB");
  assert_size (MIB - 51, FALSE, "1.0 MiB");      /* 1023.950 KiB: rounds up */
  assert_size (MIB - 52, FALSE, "1023.9 KiB");   /* 1023.949 KiB: does not */
  assert_size (KIB * KIB * KIB * KIB * KIB * KIB - 1, FALSE, "1.0 EiB");
}

static void
test_size_exact (void)
{
  assert_size (1023, TRUE, "1023 bytes");
  assert_size (KIB, TRUE, "1.0 KiB (1024 bytes)");
  assert_size (MIB + MIB / 2, TRUE, "1.5 MiB (1572864 bytes)");
  assert_size (MIB - 1, TRUE, "1.0 MiB (1048575 bytes)");
  assert_size (G_MAXUINT64, TRUE, "16.0 EiB (18446744073709551615 bytes)");
}

static void
test_uid_named (void)
{
  g_autofree gchar *root = vivarium_format_uid (0);

  g_assert_cmpstr (root, ==, "root (0)");
}

/* A uid the user database does not know is its number, nothing more. */
static void
test_uid_unknown (void)
{
  guint32 uid = 3999999000u;
  g_autofree gchar *got = NULL;
  g_autofree gchar *want = NULL;

  while (getpwuid (uid) != NULL)
    uid++;
  got = vivarium_format_uid (uid);
  want = g_strdup_printf ("%u", uid);
  g_assert_cmpstr (got, ==, want);
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "C");
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/format/size-boundaries", test_size_boundaries);
  g_test_add_func ("/format/size-rounds-up-a-unit", test_size_rounds_up_a_unit);
  g_test_add_func ("/format/size-exact", test_size_exact);
  g_test_add_func ("/format/uid-named", test_uid_named);
  g_test_add_func ("/format/uid-unknown", test_uid_unknown);
  return g_test_run ();
}
