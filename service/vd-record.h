/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The one writer of the daemon's own small JSON records — a running
 * task's (TASKS/<id>.json), a finished task's (TASKS/done/<id>.json), a
 * job's (JOBS/<id>.json) — so that each is as durable as the others: @dir
 * made if missing (its parents too) and kept 0700 and the daemon's,
 * @dir/@name written 0600 through vd_fs_write_durably() (a temporary file,
 * fsync, rename, the directory flushed). After a crash the record is the
 * old one or the new one, whole; a failure leaves the old one and says
 * which file it was. */
gboolean vd_record_write (const gchar  *dir,
                          const gchar  *name,
                          JsonNode     *root,
                          GError      **error);

G_END_DECLS
