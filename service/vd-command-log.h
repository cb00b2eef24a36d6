/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* What the log says about one command. Every state is a statement the
 * daemon can stand behind: it never says "failed" for a command that is
 * still running in the guest. */
typedef enum {
  VD_COMMAND_STATE_RUNNING,            /* begun, no answer yet */
  VD_COMMAND_STATE_FINISHED,           /* the guest reported how it ended */
  VD_COMMAND_STATE_FAILED,             /* the call failed; "error" says why */
  VD_COMMAND_STATE_TIMED_OUT_RUNNING,  /* the caller's timeout expired; still running in the guest */
  VD_COMMAND_STATE_TIMED_OUT_UNKNOWN,  /* timed out before the guest said it had started it */
  VD_COMMAND_STATE_FINISHED_LATE,      /* ended after its timeout; exit status from the guest */
  VD_COMMAND_STATE_ABANDONED,          /* still running when the daemon stopped watching */
} VdCommandState;

const gchar *vd_command_state_to_string (VdCommandState state);

/* One entry; the log keeps a reference, and so does the call it records. */
typedef struct _VdCommandEntry VdCommandEntry;

VdCommandEntry *vd_command_entry_ref         (VdCommandEntry *entry);
void            vd_command_entry_unref       (VdCommandEntry *entry);
guint64         vd_command_entry_get_seq     (VdCommandEntry *entry);
VdCommandState  vd_command_entry_get_state   (VdCommandEntry *entry);
/* a{sv}, floating: the shape documented for GetCommandLog() */
GVariant       *vd_command_entry_to_variant  (VdCommandEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdCommandEntry, vd_command_entry_unref)

#define VD_TYPE_COMMAND_LOG (vd_command_log_get_type ())
G_DECLARE_FINAL_TYPE (VdCommandLog, vd_command_log, VD, COMMAND_LOG, GObject)

VdCommandLog   *vd_command_log_new           (const gchar         *session_id);
/* Appends every entry (and every change to one) to @dir/<session id>.jsonl;
 * prunes @dir to the newest VIVARIUM_LOG_FILES_MAX files first. */
gboolean        vd_command_log_persist_to    (VdCommandLog        *self,
                                              const gchar         *dir,
                                              GError             **error);
const gchar    *vd_command_log_get_path      (VdCommandLog        *self);
/* Closes the file: its session has ended, and an ended session lingers on
 * the bus a while (its log still paged from memory) without holding a
 * descriptor. Anything logged after it (there is nothing to log once the
 * guest is gone) is kept in memory only. Idempotent. */
void            vd_command_log_close_file    (VdCommandLog        *self);
VdCommandEntry *vd_command_log_begin         (VdCommandLog        *self,
                                              const gchar         *kind,
                                              const gchar * const *argv,
                                              const gchar         *cwd);
void            vd_command_log_update        (VdCommandLog        *self,
                                              VdCommandEntry      *entry,
                                              VdCommandState       state,
                                              gint                 exit_status,
                                              guint64              stdout_size,
                                              guint64              stderr_size,
                                              const gchar         *error);
/* The first VD_COMMAND_STDERR_HEAD_MAX bytes of an exec's stderr, for the
 * report (why a command failed: ENOSPC, ...). */
#define VD_COMMAND_STDERR_HEAD_MAX 512
void            vd_command_log_set_stderr_head (VdCommandLog      *self,
                                                VdCommandEntry    *entry,
                                                GBytes            *err);
/* Entries with seq >= @offset, at most @limit and under the reply budget;
 * @next is the seq to ask for next (== total when there is no more). */
GVariant       *vd_command_log_get_page      (VdCommandLog        *self,
                                              guint64              offset,
                                              guint                limit,
                                              guint64             *next,
                                              GError             **error);
guint64         vd_command_log_get_total     (VdCommandLog        *self);
guint64         vd_command_log_get_dropped   (VdCommandLog        *self);

/* signal "changed" (GVariant *entry a{sv}): an entry was added or updated */

G_END_DECLS
