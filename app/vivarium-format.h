/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "vivarium-size.h"
#include "vivarium-state.h"
#include "vivarium-time.h"
#include "vivarium-user.h"

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
char    *vivarium_format_duration     (guint64       usec);
char    *vivarium_format_duration_ms  (guint64       msec);

/* The daemon's state words, parsed once where a property or a result is
 * read: the value of the common enum, or VIVARIUM_STATE_UNKNOWN for a word
 * this build does not know (a newer daemon), which equals no state. */
#define VIVARIUM_STATE_UNKNOWN (-1)

gint         vivarium_parse_session_state (const char *word);
gint         vivarium_parse_egress_state  (const char *word);
gint         vivarium_parse_outcome       (const char *word);
gint         vivarium_parse_verdict       (const char *word);
const char  *vivarium_outcome_label       (gint        outcome);

G_END_DECLS
