/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* One git repository whose git directory and working tree are apart: the
 * git directory on the host, the working tree in a dataset the guest
 * writes. libgit2 never looks for a .git in the tree, never runs a hook and
 * never applies a filter from .gitattributes (the tree's are the guest's,
 * and reading them would follow its links and block on its fifos): what is
 * committed is exactly the bytes (and link targets) in the tree, and a clone
 * checks out exactly the blobs' bytes.
 *
 * Blocking calls; not thread-safe on one object: the owner serialises. */

typedef enum {
  VD_CHANGE_ADDED,
  VD_CHANGE_MODIFIED,
  VD_CHANGE_DELETED,
  VD_CHANGE_TYPECHANGE,  /* e.g. a file became a symlink */
  VD_CHANGE_SKIPPED,     /* in the tree, never committed: see @reason */
} VdChangeStatus;

typedef enum {
  VD_CHANGE_KIND_FILE,
  VD_CHANGE_KIND_SYMLINK,  /* the link's target is the content; never followed */
  VD_CHANGE_KIND_SPECIAL,  /* fifo, socket, device: never read */
  VD_CHANGE_KIND_GIT,      /* a ".git" entry (any case, any spelling NTFS or HFS+ reads so): never committed */
  VD_CHANGE_KIND_DIRECTORY, /* a directory too deep to commit */
} VdChangeKind;

typedef struct {
  VdChangeStatus status;
  VdChangeKind   kind;
  gchar         *path;          /* raw bytes relative to the tree's root: may hold a newline or ESC */
  gchar         *display_path;  /* the same on one line: bytes outside printable ASCII as \xNN, '\' as "\\" */
  guint64        lines_added;
  guint64        lines_removed;
  gboolean       binary;
  gchar         *reason;        /* why it was skipped, or NULL */
} VdChange;

typedef struct {
  gchar  *id;       /* 40 hex digits */
  gchar  *author;   /* "Name <email>", escaped */
  gint64  time_us;  /* the author time, µs since the epoch */
  gchar  *subject;  /* the message's first line, escaped */
} VdCommitInfo;

const gchar *vd_change_status_to_string (VdChangeStatus status);
const gchar *vd_change_kind_to_string   (VdChangeKind kind);
void         vd_change_free             (VdChange *change);
void         vd_commit_info_free        (VdCommitInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdChange, vd_change_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VdCommitInfo, vd_commit_info_free)

/* https://, ssh:// and file:// URLs only; no password, no user for https
 * (a user there is a token), a host for https and ssh, a local absolute
 * path for file, no query, fragment, whitespace or control characters.
 * Refusals are InvalidArgument with a sentence. */
gboolean     vd_remote_url_validate     (const gchar *url,
                                         GError     **error);

#define VD_TYPE_REPO (vd_repo_get_type ())
G_DECLARE_FINAL_TYPE (VdRepo, vd_repo, VD, REPO, GObject)

/* Creates @gitdir with @workdir as its working tree (no .git in it) and an
 * empty first commit on "main", so that HEAD is never unborn. */
VdRepo      *vd_repo_create             (const gchar *gitdir,
                                         const gchar *workdir,
                                         GError     **error);
/* Clones @url (validated) into @gitdir and checks it out into @workdir,
 * using @ssh_key (private key path, its ".pub" beside it) for ssh. A clone
 * of an empty repository gets the empty first commit. */
VdRepo      *vd_repo_clone              (const gchar  *url,
                                         const gchar  *gitdir,
                                         const gchar  *workdir,
                                         const gchar  *ssh_key,
                                         GCancellable *cancellable,
                                         GError      **error);
/* The two halves of vd_repo_clone(): the network transfer into @gitdir
 * (a bare clone, run by vivarium-git-transfer in a unit of its own), then
 * the working tree and the checkout (in the daemon). */
gboolean     vd_repo_clone_fetch        (const gchar  *url,
                                         const gchar  *gitdir,
                                         const gchar  *ssh_key,
                                         GCancellable *cancellable,
                                         GError      **error);
VdRepo      *vd_repo_clone_finish       (const gchar  *gitdir,
                                         const gchar  *workdir,
                                         GError      **error);
VdRepo      *vd_repo_open               (const gchar *gitdir,
                                         GError     **error);
/* Refs and objects only, without the working tree (for a push where the
 * tree is not there). */
VdRepo      *vd_repo_open_bare          (const gchar *gitdir,
                                         GError     **error);

/* The identity of the daemon's commits; "Vivarium <vivarium@localhost>"
 * unless set. */
gboolean     vd_repo_set_identity       (VdRepo      *self,
                                         const gchar *name,
                                         const gchar *email,
                                         GError     **error);
/* HEAD's commit id (40 hex digits). */
gchar       *vd_repo_get_head           (VdRepo  *self,
                                         GError **error);
/* The working tree against @base (a commit id; NULL = HEAD), without
 * committing: a list of VdChange, sorted by path, skipped entries last. */
GPtrArray   *vd_repo_compute_changes    (VdRepo      *self,
                                         const gchar *base,
                                         GError     **error);
/* Commits the working tree on HEAD's branch. When the tree equals HEAD's,
 * nothing is committed and *commit_id is HEAD. @changes (optional) gets
 * what the commit holds against its parent, plus what was skipped. */
gboolean     vd_repo_commit             (VdRepo      *self,
                                         const gchar *message,
                                         gchar      **commit_id,
                                         GPtrArray  **changes,
                                         GError     **error);
/* What one commit may cost. A regular file larger than @file_max, or
 * sparse (more than half of it, and more than 1 MiB, holes), is not read:
 * it is skipped with the reason. A second name of an inode already read is
 * the same blob, read once. More than @total_max bytes read in all stops
 * the commit (TooLarge), as do @cancellable (Cancelled) and @timeout_sec
 * (TimedOut); nothing is committed then. Blobs are written with their size
 * announced, deflated as they are read. 0 = no cap. */
typedef struct {
  guint64       file_max;
  guint64       total_max;
  guint         timeout_sec;
  GCancellable *cancellable;
} VdRepoBounds;

/* vd_repo_commit() within @bounds (NULL: none). */
gboolean     vd_repo_commit_bounded     (VdRepo             *self,
                                         const gchar        *message,
                                         const VdRepoBounds *bounds,
                                         gchar             **commit_id,
                                         GPtrArray         **changes,
                                         GError            **error);
/* After a commit: makes the working tree hold exactly HEAD's tree by
 * removing what HEAD does not hold (what the commit skipped, empty
 * directories, however deep), emptying submodule directories; what HEAD
 * holds is left as it is. Only the daemon may be touching the tree. */
gboolean     vd_repo_clean_tree         (VdRepo  *self,
                                         GError **error);
/* After a commit that failed: empties the working tree and checks HEAD
 * out into it (no filter), so that it holds HEAD again. */
gboolean     vd_repo_restore_tree       (VdRepo  *self,
                                         GError **error);
/* Up to @n commits from HEAD, newest first: a list of VdCommitInfo. */
GPtrArray   *vd_repo_log                (VdRepo  *self,
                                         guint    n,
                                         GError **error);
/* The URL of "origin", or NULL. */
gchar       *vd_repo_get_remote         (VdRepo *self);
gboolean     vd_repo_set_remote         (VdRepo      *self,
                                         const gchar *url,
                                         GError     **error);
/* A pinned ssh host key as vd_repo_push() takes and gives it: the SHA-256
 * of the key, 64 hexadecimal digits. */
gboolean     vd_repo_host_key_pin_valid (const gchar *pin);
/* Pushes HEAD's branch to "origin". @host_key_pin: the SHA-256 of the ssh
 * host key seen before (hex) or NULL; on success *@host_key_seen (optional)
 * gets the one seen now, for the caller to pin (trust on first use).
 * Errors: BadState (no remote; the remote refused: its reason is in the
 * message), NotAuthorized (credentials or host key refused), Cancelled,
 * Failed. */
gboolean     vd_repo_push               (VdRepo       *self,
                                         const gchar  *ssh_key,
                                         const gchar  *host_key_pin,
                                         gchar       **host_key_seen,
                                         GCancellable *cancellable,
                                         GError      **error);

G_END_DECLS
