/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* An agent task's transcript: every model turn, tool call and result the
 * agent recorded through Task.Record, kept with the task for the operator
 * (Task.GetTranscript). The worker's words: escaped, each entry capped,
 * the whole capped; what does not fit is dropped and counted. It answers
 * both methods on the task's skeleton and lives as long as that does. */

#define VD_TRANSCRIPT_ENTRY_MAX   (64 * 1024)
#define VD_TRANSCRIPT_ENTRIES_MAX 4096
#define VD_TRANSCRIPT_TOTAL_MAX   (4 * 1024 * 1024)
/* The reason a failing agent gives, as the task's Reason shows it. */
#define VD_TRANSCRIPT_REASON_MAX  512

#define VD_TYPE_TRANSCRIPT (vd_transcript_get_type ())
G_DECLARE_FINAL_TYPE (VdTranscript, vd_transcript, VD, TRANSCRIPT, GObject)

/* Answers GetTranscript and Record on @skeleton (a VivariumDBusTask). */
VdTranscript *vd_transcript_new        (GDBusInterfaceSkeleton *skeleton);
/* From now on Record is refused with BadState. */
void          vd_transcript_close      (VdTranscript *self);
/* Records an entry the daemon itself writes (same caps). */
void          vd_transcript_add        (VdTranscript *self,
                                        const gchar  *kind,
                                        const gchar  *text);
/* The text of the last "failed" entry, capped at VD_TRANSCRIPT_REASON_MAX,
 * or NULL. */
gchar        *vd_transcript_dup_failure (VdTranscript *self);
guint         vd_transcript_get_n_entries (VdTranscript *self);
/* The whole transcript as a(tssb) and its truncated flag. */
GVariant     *vd_transcript_to_variant (VdTranscript *self);

G_END_DECLS
