/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdCommandLog"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-command-log.h"
#include "vd-fs.h"

/* The command log of one session: a bounded record of what was run.
 *
 * Bounds, and why each one is where it is:
 * - an entry keeps at most VIVARIUM_LOG_ARGV_ITEMS_MAX items and
 *   VIVARIUM_LOG_ARGV_BYTES_MAX bytes of the argv it was sent ("argv-items"
 *   and "argv-bytes" say how much was sent, "argv-truncated" that it was cut);
 * - memory keeps the newest VIVARIUM_LOG_ENTRIES_MAX entries and counts the
 *   oldest it dropped ("dropped"). Refusing new commands instead would let one
 *   chatty caller end a session's usefulness; dropping the oldest keeps the
 *   session working, and the file below keeps the oldest;
 * - the file keeps the first VIVARIUM_LOG_FILE_BYTES_MAX bytes of history and
 *   then says, in one last line, that it is full. So neither end can be
 *   erased by flooding: the beginning is on disk, the end in memory;
 * - a reply holds at most VIVARIUM_LOG_PAGE_MAX entries and stays under
 *   VIVARIUM_LIST_REPLY_BYTES_MAX bytes; a client pages with "next".
 *
 * The file is JSON lines, append-only: one line per change of an entry, so
 * an entry's last line is its final word (a timed-out command gets a second
 * line when it finishes late). Each line goes out in one write(2) and is
 * fdatasync'ed before we go on: a crash loses at most the line being written,
 * and a short write is cut back off, so no line is ever half there. Entries
 * are a handful per second at most (each is a guest round trip), so a sync
 * each is cheap next to the command itself. */

/* Room left in the file for the line that says it is full. */
#define LOG_FULL_RESERVE 256
/* A reply's own framing next to its entries. */
#define REPLY_OVERHEAD   4096

struct _VdCommandEntry {
  gint            ref_count;
  guint64         seq;
  gchar          *kind;
  GStrv           argv;           /* capped */
  guint           argv_items;     /* as sent */
  guint64         argv_bytes;     /* as sent */
  gboolean        argv_truncated;
  gchar          *cwd;
  gint64          started_at;
  gint64          started_mono;
  guint64         duration;
  VdCommandState  state;
  gint            exit_status;
  guint64         stdout_size;
  guint64         stderr_size;
  gchar          *error;
  gchar          *stderr_head;    /* the first bytes of an exec's stderr, or NULL */
};

struct _VdCommandLog {
  GObject    parent_instance;
  gchar     *session_id;
  GPtrArray *entries;      /* VdCommandEntry, oldest first */
  guint64    total;        /* entries ever begun; the next seq */
  guint64    dropped;      /* the oldest, no longer in memory */
  gchar     *path;
  int        fd;           /* -1: memory only */
  gboolean   file_full;
  guint64    file_dropped; /* lines not written because the file was full */
};

G_DEFINE_TYPE (VdCommandLog, vd_command_log, G_TYPE_OBJECT)

enum { SIGNAL_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const gchar * const state_names[] = {
  [VD_COMMAND_STATE_RUNNING] = "running",
  [VD_COMMAND_STATE_FINISHED] = "finished",
  [VD_COMMAND_STATE_FAILED] = "failed",
  [VD_COMMAND_STATE_TIMED_OUT_RUNNING] = "timed-out-running",
  [VD_COMMAND_STATE_TIMED_OUT_UNKNOWN] = "timed-out-unknown",
  [VD_COMMAND_STATE_FINISHED_LATE] = "finished-late",
  [VD_COMMAND_STATE_ABANDONED] = "abandoned",
};

const gchar *
vd_command_state_to_string (VdCommandState state)
{
  g_return_val_if_fail ((gsize) state < G_N_ELEMENTS (state_names), "unknown");
  return state_names[state];
}

/* --- entries --------------------------------------------------------- */

VdCommandEntry *
vd_command_entry_ref (VdCommandEntry *entry)
{
  g_atomic_int_inc (&entry->ref_count);
  return entry;
}

void
vd_command_entry_unref (VdCommandEntry *entry)
{
  if (entry == NULL || !g_atomic_int_dec_and_test (&entry->ref_count))
    return;
  g_free (entry->kind);
  g_strfreev (entry->argv);
  g_free (entry->cwd);
  g_free (entry->error);
  g_free (entry->stderr_head);
  g_free (entry);
}

guint64 vd_command_entry_get_seq (VdCommandEntry *entry) { return entry->seq; }
VdCommandState vd_command_entry_get_state (VdCommandEntry *entry) { return entry->state; }

/* At most @max bytes of @s, cut at a character boundary. */
static gchar *
utf8_prefix (const gchar *s, gsize max)
{
  const gchar *end = NULL;
  gsize len = strlen (s);

  if (len <= max)
    return g_strdup (s);
  g_utf8_validate_len (s, max, &end);
  return g_strndup (s, (gsize) (end - s));
}

static void
entry_set_argv (VdCommandEntry *entry, const gchar * const *argv)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  gsize room = VIVARIUM_LOG_ARGV_BYTES_MAX;
  guint kept = 0;

  for (guint i = 0; argv != NULL && argv[i] != NULL; i++) {
    gsize len = strlen (argv[i]);
    entry->argv_items++;
    entry->argv_bytes += len;
    if (entry->argv_truncated)
      continue;
    if (kept == VIVARIUM_LOG_ARGV_ITEMS_MAX || room == 0) {
      entry->argv_truncated = TRUE;
      continue;
    }
    if (len > room) {
      g_autofree gchar *cut = utf8_prefix (argv[i], room);
      g_strv_builder_add (b, cut);
      entry->argv_truncated = TRUE;
      kept++;
      continue;
    }
    g_strv_builder_add (b, argv[i]);
    room -= len;
    kept++;
  }
  entry->argv = g_strv_builder_end (b);
}

GVariant *
vd_command_entry_to_variant (VdCommandEntry *entry)
{
  GVariantDict d;

  g_variant_dict_init (&d, NULL);
  g_variant_dict_insert (&d, "seq", "t", entry->seq);
  g_variant_dict_insert (&d, "kind", "s", entry->kind);
  g_variant_dict_insert_value (&d, "argv", g_variant_new_strv ((const gchar * const *) entry->argv, -1));
  g_variant_dict_insert (&d, "argv-items", "u", entry->argv_items);
  g_variant_dict_insert (&d, "argv-bytes", "t", entry->argv_bytes);
  g_variant_dict_insert (&d, "argv-truncated", "b", entry->argv_truncated);
  g_variant_dict_insert (&d, "cwd", "s", entry->cwd);
  g_variant_dict_insert (&d, "started-at", "t", (guint64) entry->started_at);
  g_variant_dict_insert (&d, "duration", "t", entry->duration);
  g_variant_dict_insert (&d, "state", "s", vd_command_state_to_string (entry->state));
  g_variant_dict_insert (&d, "exit-status", "i", entry->exit_status);
  g_variant_dict_insert (&d, "stdout-size", "t", entry->stdout_size);
  g_variant_dict_insert (&d, "stderr-size", "t", entry->stderr_size);
  g_variant_dict_insert (&d, "error", "s", entry->error);
  if (entry->stderr_head != NULL)
    g_variant_dict_insert (&d, "stderr-head", "s", entry->stderr_head);
  return g_variant_dict_end (&d);
}

/* --- the file -------------------------------------------------------- */

static gboolean
write_line (VdCommandLog *self, const gchar *line, gsize len)
{
  struct stat st;
  gssize n;

  if (fstat (self->fd, &st) != 0)
    return FALSE;
  n = write (self->fd, line, len);
  if (n != (gssize) len) {
    int saved = errno;
    /* Nothing stored is half-written: cut a partial line back off. */
    if (n > 0 && ftruncate (self->fd, st.st_size) != 0)
      g_warning ("%s: cannot remove a partial line: %s", self->path, g_strerror (errno));
    g_warning ("%s: cannot append: %s", self->path, n < 0 ? g_strerror (saved) : "short write");
    return FALSE;
  }
  if (fdatasync (self->fd) != 0)
    g_warning ("%s: fdatasync: %s", self->path, g_strerror (errno));
  return TRUE;
}

static gchar *
object_to_line (JsonObject *obj)
{
  g_autoptr(JsonNode) node = json_node_init_object (json_node_alloc (), obj);
  g_autofree gchar *text = json_to_string (node, FALSE);

  return g_strconcat (text, "\n", NULL);
}

static void
write_full_marker (VdCommandLog *self)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autofree gchar *line = NULL;

  json_object_set_string_member (obj, "session", self->session_id);
  json_object_set_boolean_member (obj, "log-full", TRUE);
  json_object_set_int_member (obj, "bytes-max", VIVARIUM_LOG_FILE_BYTES_MAX);
  line = object_to_line (obj);
  write_line (self, line, strlen (line));
}

static void
persist_entry (VdCommandLog *self, VdCommandEntry *entry)
{
  g_autoptr(GVariant) v = g_variant_ref_sink (vd_command_entry_to_variant (entry));
  g_autoptr(JsonNode) node = json_gvariant_serialize (v);
  g_autofree gchar *line = NULL;
  struct stat st;

  if (self->fd < 0)
    return;
  if (self->file_full) {
    self->file_dropped++;
    return;
  }
  json_object_set_string_member (json_node_get_object (node), "session", self->session_id);
  line = object_to_line (json_node_get_object (node));
  if (fstat (self->fd, &st) != 0 ||
      (guint64) st.st_size + strlen (line) > VIVARIUM_LOG_FILE_BYTES_MAX - LOG_FULL_RESERVE) {
    self->file_full = TRUE;
    self->file_dropped++;
    write_full_marker (self);
    return;
  }
  write_line (self, line, strlen (line));
}

static gint
compare_mtime (gconstpointer a, gconstpointer b)
{
  const GStatBuf *sa = *(GStatBuf * const *) a;
  const GStatBuf *sb = *(GStatBuf * const *) b;

  return sa->st_mtime < sb->st_mtime ? -1 : sa->st_mtime > sb->st_mtime ? 1 : 0;
}

typedef struct {
  GStatBuf st;
  gchar   *path;
} LogFile;

static void
log_file_free (LogFile *f)
{
  g_free (f->path);
  g_free (f);
}

/* Retention: the newest files stay, so that the directory is bounded by
 * VIVARIUM_LOG_FILES_MAX × VIVARIUM_LOG_FILE_BYTES_MAX. */
static void
prune_dir (const gchar *dir, guint keep)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func ((GDestroyNotify) log_file_free);

  for (guint i = 0; names[i] != NULL; i++) {
    LogFile *f = g_new0 (LogFile, 1);
    f->path = g_build_filename (dir, names[i], NULL);
    if (!g_str_has_suffix (names[i], ".jsonl") || g_lstat (f->path, &f->st) != 0 || !S_ISREG (f->st.st_mode)) {
      log_file_free (f);
      continue;
    }
    g_ptr_array_add (files, f);
  }
  if (files->len <= keep)
    return;
  g_ptr_array_sort (files, compare_mtime);
  for (guint i = 0; i < files->len - keep; i++) {
    LogFile *f = g_ptr_array_index (files, i);
    if (g_unlink (f->path) != 0)
      g_warning ("cannot remove the old command log %s: %s", f->path, g_strerror (errno));
  }
}

gboolean
vd_command_log_persist_to (VdCommandLog *self, const gchar *dir, GError **error)
{
  g_autofree gchar *name = g_strconcat (self->session_id, ".jsonl", NULL);
  g_autofree gchar *parent = g_path_get_dirname (dir);

  g_return_val_if_fail (self->fd < 0, FALSE);
  /* Root's own: command lines may hold secrets. */
  if (!vd_fs_mkdir (parent, 0700, geteuid (), getegid (), error) ||
      !vd_fs_mkdir (dir, 0700, geteuid (), getegid (), error))
    return FALSE;
  prune_dir (dir, VIVARIUM_LOG_FILES_MAX - 1);
  self->path = g_build_filename (dir, name, NULL);
  self->fd = open (self->path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (self->fd < 0) {
    int saved = errno;
    g_set_error (error, VIVARIUM_ERROR, saved == ENOSPC ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
                 "Cannot open the command log %s: %s", self->path, g_strerror (saved));
    g_clear_pointer (&self->path, g_free);
    return FALSE;
  }
  return TRUE;
}

const gchar *
vd_command_log_get_path (VdCommandLog *self)
{
  return self->path;
}

/* --- the log --------------------------------------------------------- */

static void
changed (VdCommandLog *self, VdCommandEntry *entry)
{
  g_autoptr(GVariant) v = g_variant_ref_sink (vd_command_entry_to_variant (entry));

  persist_entry (self, entry);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0, v);
}

VdCommandEntry *
vd_command_log_begin (VdCommandLog *self, const gchar *kind, const gchar * const *argv, const gchar *cwd)
{
  VdCommandEntry *entry = g_new0 (VdCommandEntry, 1);

  entry->ref_count = 1;
  entry->seq = self->total++;
  entry->kind = g_strdup (kind);
  entry_set_argv (entry, argv);
  entry->cwd = utf8_prefix (cwd != NULL ? cwd : "", VIVARIUM_PATH_MAX);
  entry->started_at = g_get_real_time ();
  entry->started_mono = g_get_monotonic_time ();
  entry->state = VD_COMMAND_STATE_RUNNING;
  entry->exit_status = -1;
  entry->error = g_strdup ("");
  g_ptr_array_add (self->entries, vd_command_entry_ref (entry));
  if (self->entries->len > VIVARIUM_LOG_ENTRIES_MAX) {
    g_ptr_array_remove_index (self->entries, 0);
    self->dropped++;
  }
  changed (self, entry);
  return entry;
}

void
vd_command_log_update (VdCommandLog *self, VdCommandEntry *entry, VdCommandState state, gint exit_status,
                       guint64 stdout_size, guint64 stderr_size, const gchar *error)
{
  entry->state = state;
  entry->exit_status = exit_status;
  entry->stdout_size = stdout_size;
  entry->stderr_size = stderr_size;
  entry->duration = (guint64) (g_get_monotonic_time () - entry->started_mono);
  g_free (entry->error);
  entry->error = utf8_prefix (error != NULL ? error : "", VIVARIUM_LOG_ERROR_BYTES_MAX);
  changed (self, entry);
}

/* Before the update that finishes the entry, so the line written has it.
 * The guest's bytes: made valid UTF-8, capped; escaped wherever shown. */
void
vd_command_log_set_stderr_head (VdCommandLog *self, VdCommandEntry *entry, GBytes *err)
{
  gsize len = 0;
  const gchar *data = err != NULL ? g_bytes_get_data (err, &len) : NULL;
  g_autofree gchar *valid = NULL;

  g_free (entry->stderr_head);
  entry->stderr_head = NULL;
  if (data == NULL || len == 0)
    return;
  valid = g_utf8_make_valid (data, (gssize) MIN (len, VD_COMMAND_STDERR_HEAD_MAX));
  entry->stderr_head = utf8_prefix (valid, VD_COMMAND_STDERR_HEAD_MAX);
}

GVariant *
vd_command_log_get_page (VdCommandLog *self, guint64 offset, guint limit, guint64 *next, GError **error)
{
  GVariantBuilder b;
  gsize bytes = REPLY_OVERHEAD;
  guint64 start = MAX (offset, self->dropped);
  guint64 i;

  if (limit == 0 || limit > VIVARIUM_LOG_PAGE_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The limit must be between 1 and %d entries", VIVARIUM_LOG_PAGE_MAX);
    return NULL;
  }
  if (offset > self->total) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The offset %" G_GUINT64_FORMAT " is past the end of the log (%" G_GUINT64_FORMAT " entries)",
                 offset, self->total);
    return NULL;
  }
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (i = start; i < self->total && i - start < limit; i++) {
    VdCommandEntry *entry = g_ptr_array_index (self->entries, i - self->dropped);
    g_autoptr(GVariant) v = g_variant_ref_sink (vd_command_entry_to_variant (entry));
    /* One entry always fits (it is bounded far below the budget). */
    if (i > start && bytes + g_variant_get_size (v) > VIVARIUM_LIST_REPLY_BYTES_MAX)
      break;
    bytes += g_variant_get_size (v);
    g_variant_builder_add_value (&b, v);
  }
  *next = i;
  return g_variant_builder_end (&b);
}

guint64 vd_command_log_get_total (VdCommandLog *self) { return self->total; }
guint64 vd_command_log_get_dropped (VdCommandLog *self) { return self->dropped; }

void
vd_command_log_close_file (VdCommandLog *self)
{
  if (self->fd < 0)
    return;
  if (close (self->fd) != 0)
    g_warning ("closing the command log %s: %s", self->path, g_strerror (errno));
  self->fd = -1;
}

/* --- object ---------------------------------------------------------- */

static void
vd_command_log_finalize (GObject *object)
{
  VdCommandLog *self = VD_COMMAND_LOG (object);

  if (self->fd >= 0)
    close (self->fd);
  g_free (self->path);
  g_free (self->session_id);
  g_ptr_array_unref (self->entries);
  G_OBJECT_CLASS (vd_command_log_parent_class)->finalize (object);
}

static void
vd_command_log_class_init (VdCommandLogClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_command_log_finalize;
  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_VARIANT);
}

static void
vd_command_log_init (VdCommandLog *self)
{
  self->entries = g_ptr_array_new_with_free_func ((GDestroyNotify) vd_command_entry_unref);
  self->fd = -1;
}

VdCommandLog *
vd_command_log_new (const gchar *session_id)
{
  VdCommandLog *self = g_object_new (VD_TYPE_COMMAND_LOG, NULL);

  self->session_id = g_strdup (session_id);
  return self;
}
