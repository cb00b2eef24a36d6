/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* How the app writes what the daemon sends: no widgets here, so the models
 * (and their tests) format the same way the pages do. */

/* Text from the daemon that came from a guest or a worker is untrusted:
 * shown only in plain-text labels, capped, with control characters made
 * visible. */
#define VIVARIUM_UNTRUSTED_MAX_CHARS 2000

char    *vivarium_plain_text          (const char   *untrusted,
                                       gsize         max_chars);
char    *vivarium_format_uptime       (guint64       started_at_usec);
char    *vivarium_format_time         (guint64       usec);
char    *vivarium_format_duration     (guint64       usec);
char    *vivarium_format_duration_ms  (guint64       msec);

G_END_DECLS
