/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* json-glib's parser recurses once per level of nesting: 100 000 '[' crash
 * it. Every reader of JSON it did not write itself (a guest's agent, a
 * model, a worker, a signed report from anywhere) counts the depth with this
 * first, without recursing, and refuses what is deeper than it can need.
 * Strings are skipped (brackets inside them do not count); the text need not
 * be valid JSON: the parser judges that afterwards. */
gboolean vivarium_json_depth_within (const gchar *text,
                                     gsize        len,
                                     guint        max_depth);

G_END_DECLS
