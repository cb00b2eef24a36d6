/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-report.h"
#include "vd-session-pool.h"
#include "vd-signing-key.h"

G_BEGIN_DECLS

/* The signed reports: the daemon's signing key (KEYS/report-signing-key.pem),
 * one file per report, REPORTS/<id>.json (0600, written to a temporary file,
 * flushed and renamed: never half-written), a Report object for each on the
 * bus. At start every file is verified against the daemon's own key; one
 * that fails (tampered, another key, truncated) is skipped with a warning
 * and left on disk for the operator. Only metadata stays in memory; GetJson
 * and GetText read the file.
 *
 * Retention: at most @max_reports reports ([Tasks] MaxReports=); storing
 * one more (or loading more) removes the oldest (by creation time) from the
 * bus and the disk.
 *
 * signal "report-added" (const gchar *object_path),
 * signal "report-removed" (const gchar *object_path): pruned, to leave the bus */

/* One report's command log file: with the retention above, the directory
 * stays under MaxReports × this, however the workers flood. */
#define VD_REPORT_COMMAND_LOG_BYTES_MAX (8 * 1024 * 1024)

#define VD_TYPE_REPORT_STORE (vd_report_store_get_type ())
G_DECLARE_FINAL_TYPE (VdReportStore, vd_report_store, VD, REPORT_STORE, GObject)

VdReportStore *vd_report_store_new             (const gchar  *reports_dir,
                                                const gchar  *keys_dir,
                                                guint         max_reports,
                                                VdExportFunc  export_func,
                                                gpointer      export_data);
/* Loads or generates the key, then loads the stored reports. Fails only
 * when there is no usable key. */
gboolean       vd_report_store_load            (VdReportStore *self,
                                                GError       **error);
gchar         *vd_report_store_get_public_key  (VdReportStore *self);
const gchar   *vd_report_store_get_fingerprint (VdReportStore *self);
/* Oldest first. */
const gchar  **vd_report_store_list_paths      (VdReportStore *self);
guint          vd_report_store_count           (VdReportStore *self);
/* Signs @report (its id must be set and new), stores and exports it;
 * returns its object path (owned by the store). */
const gchar   *vd_report_store_add             (VdReportStore  *self,
                                                VivariumReport *report,
                                                GError        **error);
/* vd_report_store_add with the work session's full command log (@log: its
 * a{sv} entries, oldest first; @not_kept: how many older ones the session's
 * memory had dropped). The log (its newest entries within
 * VD_REPORT_COMMAND_LOG_BYTES_MAX; older ones count as not kept) is written first, beside the report, as
 * REPORTS/<id>.commands.jsonl (one JSON line per entry, 0600, atomic), and
 * its sha256 set on @report, so the signature covers it. Retention removes
 * it with its report. */
const gchar   *vd_report_store_add_with_log    (VdReportStore  *self,
                                                VivariumReport *report,
                                                GPtrArray      *log,
                                                guint64         not_kept,
                                                GError        **error);
/* The stored signed file, verified again (the disk is not trusted more
 * than at load). */
GBytes        *vd_report_store_get_json        (VdReportStore *self,
                                                const gchar   *id,
                                                GError       **error);

G_END_DECLS
