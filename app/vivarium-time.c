/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-time.h"

#include <glib/gi18n.h>

/* A clock a little ahead of the daemon's still reads "just now"; further
 * ahead, how long ago would be a lie: the date is said instead. */
#define SKEW_TOLERATED_SEC 60
#define DAYS_COUNTED       7

/* NULL for 0 (never) and for what no calendar holds. */
static GDateTime *
utc_of (gint64 usec)
{
  if (usec <= 0)
    return NULL;
  return g_date_time_new_from_unix_utc (usec / G_USEC_PER_SEC);
}

static char *
no_time (gint64 usec)
{
  return g_strdup (usec == 0 ? _("never") : _("unknown"));
}

char *
vivarium_time_exact (gint64 usec)
{
  g_autoptr(GDateTime) utc = utc_of (usec);
  g_autoptr(GDateTime) local = NULL;

  if (utc == NULL)
    return no_time (usec);
  local = g_date_time_to_local (utc);
  return g_date_time_format (local, "%c");
}

/* Calendar days from @then to @now, both in @now's time zone. */
static gint
days_between (GDateTime *then, GDateTime *now)
{
  gint y, m, d;
  GDate a, b;

  g_date_time_get_ymd (then, &y, &m, &d);
  g_date_set_dmy (&a, d, m, y);
  g_date_time_get_ymd (now, &y, &m, &d);
  g_date_set_dmy (&b, d, m, y);
  return g_date_days_between (&a, &b);
}

char *
vivarium_time_relative_at (gint64 usec, GDateTime *now)
{
  g_autoptr(GDateTime) utc = utc_of (usec);
  g_autoptr(GDateTime) then = NULL;
  gint64 ago;
  gint days;

  if (utc == NULL)
    return no_time (usec);
  then = g_date_time_to_timezone (utc, g_date_time_get_timezone (now));
  ago = g_date_time_difference (now, then) / G_USEC_PER_SEC;
  if (ago < -SKEW_TOLERATED_SEC)
    return g_date_time_format (then, "%x %X");
  if (ago < 60)
    return g_strdup (_("just now"));
  if (ago < 3600) {
    guint n = (guint) (ago / 60);
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%u minute ago", "%u minutes ago", n), n);
  }
  days = days_between (then, now);
  if (days == 0) {
    guint n = (guint) (ago / 3600);
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%u hour ago", "%u hours ago", n), n);
  }
  if (days == 1)
    return g_strdup (_("yesterday"));
  if (days < DAYS_COUNTED)
    return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%u day ago", "%u days ago", (guint) days), (guint) days);
  return g_date_time_format (then, "%x");
}

char *
vivarium_time_relative (gint64 usec)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_local ();

  return vivarium_time_relative_at (usec, now);
}
