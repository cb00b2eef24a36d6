/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "vivarium-state.h"

G_BEGIN_DECLS

/* The report of a task: the daemon's facts (the trusted header) and the
 * worker's summary (an untrusted claim). The task runner fills one in with
 * the setters below; the daemon serializes it (vivarium_report_to_canonical),
 * signs those bytes, and stores the signed file that
 * vivarium_signed_report_verify() checks offline. docs/report-format.md and
 * docs/report.schema.json describe the files. */

#define VIVARIUM_REPORT_FORMAT_VERSION 1

/* Limits. Everything a worker or a guest can make grow is capped by the
 * setters (and marked truncated or counted as omitted), and refused above
 * these by vivarium_report_from_json(), so a report the daemon writes always
 * reads back. docs/report.schema.json repeats them; a test checks both agree. */
#define VIVARIUM_REPORT_SUMMARY_MAX     4096   /* bytes of the worker's summary kept */
#define VIVARIUM_REPORT_QUESTION_MAX    4096   /* bytes of the worker's question kept */
#define VIVARIUM_REPORT_REASON_MAX      1024   /* bytes of an outcome's reason kept */
#define VIVARIUM_REPORT_ERROR_MAX       1024   /* bytes of a command's error kept */
#define VIVARIUM_REPORT_VERIFY_CMD_MAX  4096   /* bytes of the verification command kept */
#define VIVARIUM_REPORT_COMMANDS_MAX    512    /* commands listed; the rest are counted */
/* Which commands the list keeps when a task ran more: every failed one
 * (past 2 × _FAILED_EDGE of them, the first and the last _FAILED_EDGE), and
 * the first and the last _EDGE of the rest. So neither a flood of harmless
 * commands before a damaging one nor after it can push it off the list;
 * the full log stays beside the report, its digest signed ("command-log"). */
#define VIVARIUM_REPORT_COMMANDS_EDGE        32
#define VIVARIUM_REPORT_COMMANDS_FAILED_EDGE 224
G_STATIC_ASSERT (2 * (VIVARIUM_REPORT_COMMANDS_EDGE + VIVARIUM_REPORT_COMMANDS_FAILED_EDGE) ==
                 VIVARIUM_REPORT_COMMANDS_MAX);
#define VIVARIUM_REPORT_FILES_MAX       1024   /* files listed; the rest are counted */
#define VIVARIUM_REPORT_ARGV_MAX        64     /* arguments kept per command */
#define VIVARIUM_REPORT_ARGV_BYTES_MAX  4096   /* bytes of argv kept per command */
#define VIVARIUM_REPORT_PATH_MAX        4096   /* bytes of a file's path */
#define VIVARIUM_REPORT_ID_MAX          128    /* ids, digests, commit ids */
#define VIVARIUM_REPORT_HOST_MAX        255
#define VIVARIUM_REPORT_KIND_MAX        32     /* a command's kind: "exec", "read-file", ... */
/* A signed file larger than this is refused before it is parsed. The caps
 * above bound what the daemon writes well below it, even when every byte of
 * every capped string is a control character that JSON spells \u00XX. */
#define VIVARIUM_REPORT_DOCUMENT_MAX    (64 * 1024 * 1024)

typedef enum {
  VIVARIUM_FILE_CHANGE_ADDED,
  VIVARIUM_FILE_CHANGE_MODIFIED,
  VIVARIUM_FILE_CHANGE_DELETED,
  VIVARIUM_FILE_CHANGE_TYPECHANGE,
} VivariumFileChange;

typedef enum {
  VIVARIUM_FILE_KIND_FILE,
  VIVARIUM_FILE_KIND_SYMLINK,
  VIVARIUM_FILE_KIND_SPECIAL,   /* fifo, device, socket, submodule: reported, never followed */
} VivariumFileKind;

/* Whose verification command the fresh session re-ran. The caller's wins
 * over the worker's; NONE when neither gave one (verdict never-run). */
typedef enum {
  VIVARIUM_VERIFY_WHOSE_NONE,
  VIVARIUM_VERIFY_WHOSE_CALLER,
  VIVARIUM_VERIFY_WHOSE_WORKER,
} VivariumVerifyWhose;

const gchar *vivarium_file_change_to_string   (VivariumFileChange  change);
gboolean     vivarium_file_change_from_string (const gchar        *str,
                                               VivariumFileChange *change);
const gchar *vivarium_file_kind_to_string     (VivariumFileKind    kind);
gboolean     vivarium_file_kind_from_string   (const gchar        *str,
                                               VivariumFileKind   *kind);
const gchar *vivarium_verify_whose_to_string  (VivariumVerifyWhose whose);
gboolean     vivarium_verify_whose_from_string (const gchar        *str,
                                                VivariumVerifyWhose *whose);

/* One command run in the work session, as the session's command log has it
 * (vd-session.c's record_command: the same names). Read-only for users of
 * the getters. */
typedef struct {
  guint64   number;          /* its place in the session's log, from 1: the list may skip some */
  gchar    *kind;            /* "exec", "read-file", "write-file", "screenshot" */
  GStrv     argv;            /* capped: VIVARIUM_REPORT_ARGV_MAX / _ARGV_BYTES_MAX */
  gboolean  argv_truncated;
  gint64    started_at;      /* µs since the epoch */
  gint64    duration;        /* µs */
  gint      exit_status;     /* as the guest agent reported it; -1: it reported none */
  guint64   stdout_size;
  guint64   stderr_size;
  gchar    *error;           /* "" when the call succeeded */
  gchar    *stderr_head;     /* the first bytes of its stderr (untrusted), or NULL */
} VivariumReportCommand;

typedef struct {
  gchar              *path;  /* relative to the project's top */
  VivariumFileChange  change;
  VivariumFileKind    kind;
  gint64              lines_added;    /* -1 when not text (binary, symlink, special) */
  gint64              lines_removed;  /* -1 likewise */
} VivariumReportFile;

/* A path of the tree the daemon did not commit (a .git entry, a name git
 * refuses, a fifo...), and why: the worker's tampering is reported, not
 * silently dropped. */
typedef struct {
  gchar *path;     /* untrusted */
  gchar *kind;     /* "git", "file", "symlink", "special" */
  gchar *reason;   /* the daemon's words */
} VivariumReportSkipped;

#define VIVARIUM_REPORT_STDERR_HEAD_MAX 512  /* bytes of a command's stderr kept */
/* The dataset counts as full when less than 1/32 of its quota is left:
 * qgroup accounting and metadata make ENOSPC come a little before the
 * last byte. */
#define VIVARIUM_REPORT_DATASET_FULL_DIVISOR 32

#define VIVARIUM_TYPE_REPORT (vivarium_report_get_type ())
G_DECLARE_FINAL_TYPE (VivariumReport, vivarium_report, VIVARIUM, REPORT, GObject)

VivariumReport *vivarium_report_new                (void);

/* --- the trusted header: the daemon's facts -------------------------- */
void         vivarium_report_set_id                (VivariumReport *self, const gchar *id);
void         vivarium_report_set_task_id           (VivariumReport *self, const gchar *task_id);
void         vivarium_report_set_session_id        (VivariumReport *self, const gchar *session_id);
void         vivarium_report_set_image             (VivariumReport *self,
                                                    const gchar    *name,
                                                    const gchar    *digest);
void         vivarium_report_set_project           (VivariumReport *self, const gchar *project);
void         vivarium_report_set_times             (VivariumReport *self,
                                                    gint64          started_at,
                                                    gint64          ended_at);
void         vivarium_report_set_host              (VivariumReport *self, const gchar *host);
void         vivarium_report_set_daemon_version    (VivariumReport *self, const gchar *version);
/* @reason: why (FAILED, IN_PROGRESS at the hard limit), or NULL; capped. It
 * may quote a guest's words, so it is rendered as untrusted text. */
void         vivarium_report_set_outcome           (VivariumReport  *self,
                                                    VivariumOutcome  outcome,
                                                    const gchar     *reason);
/* Past VIVARIUM_REPORT_COMMANDS_MAX a command is only counted. */
void         vivarium_report_add_command           (VivariumReport     *self,
                                                    const gchar        *kind,
                                                    const gchar * const *argv,
                                                    gint64              started_at,
                                                    gint64              duration,
                                                    gint                exit_status,
                                                    guint64             stdout_size,
                                                    guint64             stderr_size,
                                                    const gchar        *error);
/* A command failed when the guest agent gave an exit status other than 0,
 * or none, or the call itself failed: the report always lists those. */
gboolean     vivarium_report_command_failed        (const VivariumReportCommand *command);
/* One entry of Session.GetCommandLog() (a{sv}); refuses a malformed one.
 * Its "seq", when present, numbers it. */
gboolean     vivarium_report_add_command_from_log  (VivariumReport  *self,
                                                    GVariant        *entry,
                                                    GError         **error);
/* The full command log beside a stored report: REPORTS/<id> + this, JSON
 * lines, one per entry of Session.GetCommandLog(), root's own (0600). */
#define VIVARIUM_REPORT_COMMAND_LOG_SUFFIX ".commands.jsonl"
/* The full command log the daemon keeps beside the report: the sha256 of
 * its bytes ("sha256:<hex>"), how many entries it holds, and how many of
 * the session's oldest commands its memory had dropped before the end
 * (counted as left out of the list too). */
void         vivarium_report_set_command_log       (VivariumReport *self,
                                                    const gchar    *digest,
                                                    guint64         entries,
                                                    guint64         not_kept);
/* FALSE when the report has none (older reports, no commands log). */
gboolean     vivarium_report_get_command_log       (VivariumReport *self,
                                                    const gchar   **digest,
                                                    guint64        *entries,
                                                    guint64        *not_kept);
/* Of the commands left out of the list, those that failed. */
guint64      vivarium_report_get_commands_failed_omitted (VivariumReport *self);
/* FALSE for a report from before the numbers, whose list was simply the
 * first VIVARIUM_REPORT_COMMANDS_MAX commands. */
gboolean     vivarium_report_get_commands_numbered (VivariumReport *self);
/* Past VIVARIUM_REPORT_FILES_MAX a file is only counted. @path may be any
 * bytes (git paths are): invalid UTF-8 is replaced by U+FFFD. */
void         vivarium_report_add_file              (VivariumReport     *self,
                                                    const gchar        *path,
                                                    VivariumFileChange  change,
                                                    VivariumFileKind    kind,
                                                    gint64              lines_added,
                                                    gint64              lines_removed);
void         vivarium_report_set_commit            (VivariumReport *self, const gchar *commit);
/* Past VIVARIUM_REPORT_FILES_MAX an entry is only counted. */
void         vivarium_report_add_not_committed     (VivariumReport *self,
                                                    const gchar    *path,
                                                    const gchar    *kind,
                                                    const gchar    *reason);
/* The project's dataset at the end of the work, as the daemon measured it;
 * full is computed (VIVARIUM_REPORT_DATASET_FULL_DIVISOR). */
void         vivarium_report_set_dataset           (VivariumReport *self,
                                                    guint64         used_bytes,
                                                    guint64         quota_bytes);
/* Daemon-measured phase durations (µs): the work session's start, the
 * worker, the commit, the verification session (start, run, stop). */
void         vivarium_report_set_timings           (VivariumReport *self,
                                                    gint64          session_start,
                                                    gint64          worker,
                                                    gint64          commit,
                                                    gint64          verification);
/* @command: the shell command re-run (NULL with WHOSE_NONE); @exit_status as
 * the fresh session's guest agent reported it, -1 if none; @session_id: the
 * fresh session, NULL if none was booted. */
void         vivarium_report_set_verification      (VivariumReport      *self,
                                                    const gchar         *command,
                                                    VivariumVerifyWhose  whose,
                                                    gint                 exit_status,
                                                    VivariumVerdict      verdict,
                                                    const gchar         *session_id);
/* Why the verification was inconclusive (the session did not start, its
 * helper died, the command did not run), in the daemon's words, which may
 * quote the guest or QEMU: kept to VIVARIUM_REPORT_REASON_MAX, rendered as
 * untrusted text. NULL (the default): no reason member at all, so reports
 * without one are written exactly as before. */
void         vivarium_report_set_verify_reason     (VivariumReport *self,
                                                    const gchar    *reason);
void         vivarium_report_set_guard_drops       (VivariumReport *self,
                                                    guint64         packets,
                                                    guint64         bytes);
/* An agent task: what vivarium-gateway counted (requests, refused) and
 * the tokens the model server reported (its statement). Reports of other
 * tasks have no "model" member. */
enum {
  VIVARIUM_REPORT_MODEL_REQUESTS,
  VIVARIUM_REPORT_MODEL_REFUSED,
  VIVARIUM_REPORT_MODEL_PROMPT_TOKENS,
  VIVARIUM_REPORT_MODEL_COMPLETION_TOKENS,
  VIVARIUM_REPORT_MODEL_N
};
/* The work session's egress: its mode, its policy in words, and what the
 * proxy decided ("14 allowed (…), 2 denied (…)"); each capped. */
#define VIVARIUM_REPORT_EGRESS_MAX 2048
void         vivarium_report_set_egress            (VivariumReport *self,
                                                    const gchar    *mode,
                                                    const gchar    *policy,
                                                    const gchar    *summary);
gboolean     vivarium_report_get_egress            (VivariumReport  *self,
                                                    const gchar    **mode,
                                                    const gchar    **policy,
                                                    const gchar    **summary);
void         vivarium_report_set_model_usage       (VivariumReport *self,
                                                    guint64         requests,
                                                    guint64         refused,
                                                    guint64         prompt_tokens,
                                                    guint64         completion_tokens);
/* FALSE (and zeros) when the report has none. */
gboolean     vivarium_report_get_model_usage       (VivariumReport *self,
                                                    guint64         out[VIVARIUM_REPORT_MODEL_N]);

/* --- untrusted: the worker's words ----------------------------------- */
/* Any bytes (@len -1: NUL-terminated): invalid UTF-8 and NULs become U+FFFD,
 * then the text is cut at VIVARIUM_REPORT_SUMMARY_MAX on a character
 * boundary and marked truncated; the size received is kept. */
void         vivarium_report_set_summary           (VivariumReport *self,
                                                    const gchar    *text,
                                                    gssize          len);
void         vivarium_report_set_question          (VivariumReport *self,
                                                    const gchar    *text,
                                                    gssize          len);

/* --- getters ---------------------------------------------------------- */
const gchar     *vivarium_report_get_id               (VivariumReport *self);
const gchar     *vivarium_report_get_task_id          (VivariumReport *self);
const gchar     *vivarium_report_get_session_id       (VivariumReport *self);
const gchar     *vivarium_report_get_image_name       (VivariumReport *self);
const gchar     *vivarium_report_get_image_digest     (VivariumReport *self);
const gchar     *vivarium_report_get_project          (VivariumReport *self);
gint64           vivarium_report_get_started_at       (VivariumReport *self);
gint64           vivarium_report_get_ended_at         (VivariumReport *self);
const gchar     *vivarium_report_get_host             (VivariumReport *self);
const gchar     *vivarium_report_get_daemon_version   (VivariumReport *self);
VivariumOutcome  vivarium_report_get_outcome          (VivariumReport *self);
const gchar     *vivarium_report_get_outcome_reason   (VivariumReport *self);
GPtrArray       *vivarium_report_get_commands         (VivariumReport *self); /* of VivariumReportCommand */
guint64          vivarium_report_get_commands_omitted (VivariumReport *self);
GPtrArray       *vivarium_report_get_files            (VivariumReport *self); /* of VivariumReportFile */
guint64          vivarium_report_get_files_omitted    (VivariumReport *self);
const gchar     *vivarium_report_get_commit           (VivariumReport *self);
const gchar     *vivarium_report_get_verify_command   (VivariumReport *self);
VivariumVerifyWhose vivarium_report_get_verify_whose  (VivariumReport *self);
gint             vivarium_report_get_verify_exit_status (VivariumReport *self);
VivariumVerdict  vivarium_report_get_verify_verdict   (VivariumReport *self);
const gchar     *vivarium_report_get_verify_session_id (VivariumReport *self);
const gchar     *vivarium_report_get_verify_reason    (VivariumReport *self);
guint64          vivarium_report_get_guard_dropped_packets (VivariumReport *self);
guint64          vivarium_report_get_guard_dropped_bytes   (VivariumReport *self);
const gchar     *vivarium_report_get_summary          (VivariumReport *self);
gboolean         vivarium_report_get_summary_truncated (VivariumReport *self);
guint64          vivarium_report_get_summary_size     (VivariumReport *self);
const gchar     *vivarium_report_get_question         (VivariumReport *self);
GPtrArray       *vivarium_report_get_not_committed    (VivariumReport *self); /* of VivariumReportSkipped */
guint64          vivarium_report_get_not_committed_omitted (VivariumReport *self);
/* FALSE when the report has no dataset fact (older reports, no project). */
gboolean         vivarium_report_get_dataset          (VivariumReport *self,
                                                       guint64        *used_bytes,
                                                       guint64        *quota_bytes,
                                                       gboolean       *full);
/* FALSE when the report has no timings; each out may be NULL. */
gboolean         vivarium_report_get_timings          (VivariumReport *self,
                                                       gint64         *session_start,
                                                       gint64         *worker,
                                                       gint64         *commit,
                                                       gint64         *verification);

/* --- JSON -------------------------------------------------------------- */
JsonNode        *vivarium_report_to_json              (VivariumReport *self);
/* Refuses (VIVARIUM_ERROR_INVALID_ARGUMENT, with a sentence naming the
 * member) wrong types, missing or unknown members, values past the limits. */
VivariumReport  *vivarium_report_from_json            (JsonNode       *node,
                                                       GError        **error);
/* The bytes that are signed: to_json, checked by from_json, written by
 * json-glib's generator without pretty printing. Deterministic: fixed member
 * order, integers only. Fails if the report would not read back. */
GBytes          *vivarium_report_to_canonical         (VivariumReport *self,
                                                       GError        **error);

/* --- text ---------------------------------------------------------------
 * The grammar of the rendered text (docs/report-format.md):
 *  - a trusted line starts at column 0 with one of
 *    vivarium_report_text_keys() followed by ':' and then either the end of
 *    the line or ' ' and a value made of the daemon's facts only;
 *  - a detail line starts with VIVARIUM_REPORT_TEXT_DETAIL ("  "), a
 *    lowercase label, ": " and one untrusted string, quoted and escaped;
 *  - a quote line starts with VIVARIUM_REPORT_TEXT_QUOTE ("> ") and holds
 *    one escaped piece of a line of the worker's summary or question: at
 *    most VIVARIUM_REPORT_TEXT_QUOTE_WIDTH columns, never splitting an
 *    escape; a piece that the next quote line continues ends with a single
 *    '\' (every '\' of the text itself is doubled, so it cannot);
 *  - a blank line separates sections.
 * Untrusted text is shown with every byte outside printable ASCII (and '\')
 * escaped as \u{XXXX} (a character) or \\ ; within quotes '"' is \". So the
 * output is printable ASCII and newlines only, and no untrusted byte can
 * reach column 0. */
#define VIVARIUM_REPORT_TEXT_DETAIL "  "
#define VIVARIUM_REPORT_TEXT_QUOTE  "> "
/* Columns of a quote line after its marker, the continuation mark
 * included: with the marker, 78, so on any terminal of 80 columns no piece
 * of the worker's text wraps to column 0. */
#define VIVARIUM_REPORT_TEXT_QUOTE_WIDTH 76
const gchar * const *vivarium_report_text_keys        (void);
/* @key_fingerprint: the fingerprint a verification checked the report
 * against, or NULL: the text then says the signature was not verified. */
gchar           *vivarium_report_render_text          (VivariumReport *self,
                                                       const gchar    *key_fingerprint);
/* The escaping of untrusted text described above, for one line: newlines
 * are escaped too. With @quoted, the result is wrapped in '"'. */
gchar           *vivarium_report_escape_untrusted     (const gchar    *text,
                                                       gboolean        quoted);

/* --- the signed file ----------------------------------------------------
 * {"report":<canonical report>,"signature":{"algorithm":"ed25519",
 *  "public-key":<base64 of the 32-byte key>,"key-fingerprint":"sha256:<hex>",
 *  "value":<base64 of the 64-byte signature over the canonical report>}}\n
 * A file verifies only if it is byte for byte the file this serialization
 * makes of its own parsed content, so no byte can change unnoticed. */
#define VIVARIUM_SIGNATURE_ALGORITHM "ed25519"
#define VIVARIUM_ED25519_PUBLIC_KEY_SIZE 32
#define VIVARIUM_ED25519_SIGNATURE_SIZE  64

/* "sha256:" + the hex SHA-256 of the raw 32-byte public key. */
gchar           *vivarium_key_fingerprint             (GBytes         *public_key);
/* Assembles the signed file from the canonical report and a signature the
 * daemon's key made over it (service/vd-signing-key.c). */
GBytes          *vivarium_signed_report_assemble      (GBytes         *canonical_report,
                                                       GBytes         *public_key,
                                                       GBytes         *signature,
                                                       GError        **error);
/* Checks a signed file with only the public key it names. On success returns
 * the report and the key's fingerprint, which the operator compares with the
 * daemon's (the Manager's public key). With @expected_fingerprint, a file
 * signed by any other key is refused. Refusals: VIVARIUM_ERROR_INVALID_ARGUMENT
 * (malformed, not canonical) or VIVARIUM_ERROR_DIGEST_MISMATCH (the
 * signature does not match, or another key). */
VivariumReport  *vivarium_signed_report_verify        (const gchar    *data,
                                                       gsize           len,
                                                       const gchar    *expected_fingerprint,
                                                       gchar         **fingerprint,
                                                       GError        **error);
/* Parses a signed file without checking the signature (render --no-verify). */
VivariumReport  *vivarium_signed_report_parse_unverified (const gchar *data,
                                                          gsize        len,
                                                          GError     **error);

G_END_DECLS
