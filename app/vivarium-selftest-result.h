/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The self-test result JSON (docs/selftest-result.schema.json) as the matrix
 * the app shows: one row per probe and transport, one column per
 * configuration. Parsed apart from any widget so it can be tested alone. */
typedef struct {
  char *outcome;   /* "pass", "fail", "inconclusive" */
  char *evidence;  /* the probe object, pretty-printed JSON */
} VivariumSelftestCell;

typedef struct _VivariumSelftestResult VivariumSelftestResult;

VivariumSelftestResult *vivarium_selftest_result_parse      (const char              *json,
                                                             GError                 **error);
void                    vivarium_selftest_result_free       (VivariumSelftestResult  *result);
const char             *vivarium_selftest_result_verdict    (VivariumSelftestResult  *result);
const char             *vivarium_selftest_result_finished   (VivariumSelftestResult  *result);
guint                   vivarium_selftest_result_n_columns  (VivariumSelftestResult  *result);
const char             *vivarium_selftest_result_column     (VivariumSelftestResult  *result,
                                                             guint                    column);
guint                   vivarium_selftest_result_n_rows     (VivariumSelftestResult  *result);
const char             *vivarium_selftest_result_row        (VivariumSelftestResult  *result,
                                                             guint                    row);
/* NULL when that probe did not run in that configuration. */
const VivariumSelftestCell *vivarium_selftest_result_cell   (VivariumSelftestResult  *result,
                                                             guint                    row,
                                                             guint                    column);
guint                   vivarium_selftest_result_count      (VivariumSelftestResult  *result,
                                                             const char              *outcome);
/* The rows in the order to show them: those with a failing cell first,
 * then those with an inconclusive one, then the rest; each group in the
 * result's own order. n_rows indices. */
GArray                 *vivarium_selftest_result_row_order  (VivariumSelftestResult  *result);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumSelftestResult, vivarium_selftest_result_free)

G_END_DECLS
