/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How the app says when something happened: against fixed "now"s, in
 * fixed time zones (LC_ALL=C: the words untranslated). */
#include "config.h"

#include <locale.h>
#include <glib.h>

#include "vivarium-time.h"

#define SEC    G_GINT64_CONSTANT (1000000)
#define MINUTE (60 * SEC)
#define HOUR   (60 * MINUTE)
#define DAY    (24 * HOUR)

/* 2026-12-02 14:30:00 in @zone, and the same instant in µs. */
static GDateTime *
now_in (const char *zone, gint64 *usec)
{
  g_autoptr(GTimeZone) tz = g_time_zone_new_identifier (zone);
  GDateTime *now;

  g_assert_nonnull (tz);
  now = g_date_time_new (tz, 2026, 12, 2, 14, 30, 0);
  *usec = g_date_time_to_unix (now) * SEC;
  return now;
}

static void
assert_ago (GDateTime *now, gint64 usec, const char *expected)
{
  g_autofree char *got = vivarium_time_relative_at (usec, now);

  g_assert_cmpstr (got, ==, expected);
}

static void
test_recent (void)
{
  gint64 t;
  g_autoptr(GDateTime) now = now_in ("UTC", &t);

  assert_ago (now, t, "just now");
  assert_ago (now, t - 59 * SEC, "just now");
  assert_ago (now, t - 60 * SEC, "1 minute ago");
  assert_ago (now, t - 119 * SEC, "1 minute ago");
  assert_ago (now, t - 3 * MINUTE, "3 minutes ago");
  assert_ago (now, t - 59 * MINUTE - 59 * SEC, "59 minutes ago");
  assert_ago (now, t - HOUR, "1 hour ago");
  assert_ago (now, t - 14 * HOUR - 30 * MINUTE, "14 hours ago");   /* midnight today */
}

static void
test_days (void)
{
  gint64 t;
  g_autoptr(GDateTime) now = now_in ("UTC", &t);

  /* Counted in calendar days: 23:59 yesterday is yesterday, not hours ago. */
  assert_ago (now, t - 14 * HOUR - 31 * MINUTE, "yesterday");
  assert_ago (now, t - DAY - 14 * HOUR, "yesterday");             /* 00:30 yesterday */
  assert_ago (now, t - DAY - 15 * HOUR, "2 days ago");
  assert_ago (now, t - 6 * DAY, "6 days ago");
  /* A week and more: the date, as the locale writes it. */
  assert_ago (now, t - 7 * DAY, "11/25/26");
  assert_ago (now, t - 400 * DAY, "10/28/25");
}

/* "Yesterday" is the user's: at 00:30 in UTC+01:00, 22:30 the evening
 * before is yesterday, though in UTC both are the same day. */
static void
test_time_zone (void)
{
  g_autoptr(GTimeZone) tz = g_time_zone_new_identifier ("+01:00");
  g_autoptr(GDateTime) now = g_date_time_new (tz, 2026, 12, 3, 0, 30, 0);
  gint64 t = g_date_time_to_unix (now) * SEC;
  g_autoptr(GDateTime) utc_now = g_date_time_to_utc (now);

  assert_ago (now, t - 2 * HOUR, "yesterday");
  assert_ago (utc_now, t - 2 * HOUR, "2 hours ago");
  /* The date of an old one is the local date too: 23:30 UTC is the 3rd. */
  assert_ago (now, t - 8 * DAY - HOUR, "11/24/26");
}

/* A clock behind the daemon's: a minute is tolerated, beyond that the
 * time is said as it is, never "in 5 minutes" or "-5 minutes ago". */
static void
test_future (void)
{
  gint64 t;
  g_autoptr(GDateTime) now = now_in ("UTC", &t);

  assert_ago (now, t + 30 * SEC, "just now");
  assert_ago (now, t + 60 * SEC, "just now");
  assert_ago (now, t + 5 * MINUTE, "12/02/26 14:35:00");
  assert_ago (now, t + 800 * DAY, "02/09/29 14:30:00");
}

static void
test_invalid (void)
{
  gint64 t;
  g_autoptr(GDateTime) now = now_in ("UTC", &t);
  g_autofree char *exact_zero = vivarium_time_exact (0);
  g_autofree char *exact_negative = vivarium_time_exact (-1);
  g_autofree char *exact_huge = vivarium_time_exact (G_MAXINT64);

  assert_ago (now, 0, "never");
  assert_ago (now, -1, "unknown");
  assert_ago (now, G_MININT64, "unknown");
  assert_ago (now, G_MAXINT64, "unknown");     /* past the year 9999 */
  g_assert_cmpstr (exact_zero, ==, "never");
  g_assert_cmpstr (exact_negative, ==, "unknown");
  g_assert_cmpstr (exact_huge, ==, "unknown");
}

/* The tooltip's and the detail panes' words: the locale's own, in the
 * local zone (TZ, set in main). */
static void
test_exact (void)
{
  gint64 t;
  g_autoptr(GDateTime) now = now_in ("UTC", &t);
  g_autofree char *exact = vivarium_time_exact (t + 123456);

  /* TZ=UTC-1 is POSIX for an hour east of UTC; GLib pads the day with a
   * figure space. */
  g_assert_cmpstr (exact, ==, "Wed Dec \u20072 15:30:00 2026");
}

int
main (int argc, char **argv)
{
  g_setenv ("TZ", "UTC-1", TRUE);
  g_setenv ("LC_ALL", "C", TRUE);
  setlocale (LC_ALL, "");
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/time/recent", test_recent);
  g_test_add_func ("/time/days", test_days);
  g_test_add_func ("/time/time-zone", test_time_zone);
  g_test_add_func ("/time/future", test_future);
  g_test_add_func ("/time/invalid", test_invalid);
  g_test_add_func ("/time/exact", test_exact);
  return g_test_run ();
}
