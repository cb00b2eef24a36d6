/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Reading an egress proxy's decision log (docs/egress.md): one JSON object
 * per line, written by an unprivileged process that parses guest bytes, so
 * read as untrusted — bounded, typed, capped strings. */

/* The proxy keeps at most [Egress] LogMaxEntries (≤ 100000) lines of
 * well under 2 KiB; more than this is not its log. */
#define VD_EGRESS_LOG_MAX_BYTES (64 * 1024 * 1024)
#define VD_EGRESS_LOG_PAGE_MAX  1000

/* aa{sv} of entries [@offset, @offset + @limit); a missing file is an
 * empty log. Lines that are not entries are skipped (and counted out). */
GVariant *vd_egress_log_read      (const gchar *path,
                                   guint64      offset,
                                   guint        limit,
                                   guint64     *next,
                                   guint64     *total,
                                   GError     **error);

/* For the report: "14 allowed (deb.debian.org:443 ×9, …), 2 denied
 * (evil.example:443 …)", or "no connections"; NULL when unreadable. */
gchar    *vd_egress_log_summarize (const gchar *path);

G_END_DECLS
