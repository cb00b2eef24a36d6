/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Every time the app shows, in the user's locale and time zone. The daemon
 * sends microseconds since the epoch (UTC); 0 means "not yet" (never), a
 * negative or out-of-range value is unknown.
 *
 * Lists say how long ago ("just now", "3 minutes ago", "yesterday",
 * "4 days ago", then the date); tooltips and detail panes say exactly when
 * (the locale's date and time, "%c"). */

char *vivarium_time_exact       (gint64     usec);
char *vivarium_time_relative    (gint64     usec);

/* The same as vivarium_time_relative(), against @now (whose time zone is
 * the one "yesterday" is counted in): what the tests call with fixed
 * times. */
char *vivarium_time_relative_at (gint64     usec,
                                 GDateTime *now);

G_END_DECLS
