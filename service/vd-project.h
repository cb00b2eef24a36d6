/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-dataset.h"
#include "vd-git-transfer.h"
#include "vd-repo.h"

G_BEGIN_DECLS

/* A project: a dataset with a hard quota holding a git working tree, whose
 * repository stays on the host, outside the dataset.
 *
 *   PROJECTS/<name>/               root, 0711 (a session's uid may pass, not list)
 *   PROJECTS/<name>/repo/          the git directory, root only (0700)
 *   PROJECTS/<name>/work/          the dataset = the working tree; no .git in it
 *   PROJECTS/<name>/dataset.img    ext4 backend only: the filesystem's image
 *   PROJECTS/<name>/project.json   the record (written last at creation, atomically)
 *   KEYS/project-<name>{,.pub}     the deploy key: never in the dataset
 *
 * The working tree's root is root's and 0700 except between
 * vd_project_grant() and vd_project_revoke(), when it belongs to one
 * session's uid. What the guest writes there is data: nothing in the tree
 * is run, followed or trusted by the daemon.
 *
 * Every call is thread-safe; those that touch the disk or git block (mkfs,
 * mount, hashing the tree, clone): call them from a worker thread (GTask),
 * never from the main loop. Every refusal is a VIVARIUM_ERROR with a
 * sentence: InvalidArgument (bad name, quota, URL, option, commit id,
 * message), NoSpace (the quota is above the state filesystem's free
 * space; the dataset is full), Exists, NotFound, BadState, NotAuthorized,
 * Cancelled, Failed.
 *
 * The caller (the manager) keeps the rule "one task per project" and
 * checks that no task runs before vd_project_delete(). */

#define VD_TYPE_PROJECT (vd_project_get_type ())
G_DECLARE_FINAL_TYPE (VdProject, vd_project, VD, PROJECT, GObject)

/* In this process (clone included): see vd_project_create_async() for
 * one whose clone runs in a unit of its own.
 * @options: a{sv} or NULL (a floating reference is consumed); "clone" (s): a URL (https, ssh, file; no
 * credentials) whose default branch becomes the project's history.
 * Anything else in @options is refused. On failure nothing is left: no
 * directory, repository, key, mount or loop device. */
VdProject   *vd_project_create          (const gchar  *projects_dir,
                                         const gchar  *keys_dir,
                                         const gchar  *name,
                                         guint64       quota_bytes,
                                         GVariant     *options,
                                         GCancellable *cancellable,
                                         GError      **error);
/* What runs its publish from now on (NULL: this process). */
void         vd_project_set_git_transfer (VdProject     *self,
                                          VdGitTransfer *transfer);
/* Reads PROJECTS/<name>/project.json, mounts the dataset, gives the tree
 * back to root (a crash may have left it granted) (daemon start). */
VdProject   *vd_project_load            (const gchar  *projects_dir,
                                         const gchar  *keys_dir,
                                         const gchar  *name,
                                         GError      **error);
/* At daemon start, before loading: removes what a crash during creation or
 * deletion left (a directory without project.json: its mount, loop device,
 * subvolume, key). Returns the names swept. */
GStrv        vd_project_sweep           (const gchar  *projects_dir,
                                         const gchar  *keys_dir);
/* The names of PROJECTS' complete projects (those with a project.json). */
GStrv        vd_project_list_names      (const gchar  *projects_dir);

const gchar *vd_project_get_name        (VdProject *self);
guint64      vd_project_get_quota       (VdProject *self);
VdDatasetBackend vd_project_get_backend (VdProject *self);
gint64       vd_project_get_created     (VdProject *self);
/* The directory to share into the guest (virtio-9p). */
const gchar *vd_project_get_work_path   (VdProject *self);
/* The git directory, for inspection (tests, operators): never shared. */
const gchar *vd_project_get_repo_path   (VdProject *self);
gboolean     vd_project_get_used_bytes  (VdProject *self,
                                         guint64   *out,
                                         GError   **error);
/* HEAD's commit id: never unborn. Cached: never waits for git, so
 * property getters may call it from the main loop, as they may
 * get_remote and get_last_task. */
gchar       *vd_project_get_head        (VdProject *self,
                                         GError   **error);
/* The remote URL or NULL. */
gchar       *vd_project_get_remote      (VdProject *self);
/* The project's egress defaults (Project.SetEgress): NULL for the config's. */
#define VD_PROJECT_EGRESS_GROUPS_MAX 64
gchar       *vd_project_get_egress_mode   (VdProject *self);
GStrv        vd_project_get_egress_groups (VdProject *self);
gboolean     vd_project_set_egress        (VdProject           *self,
                                           const gchar         *mode,
                                           const gchar * const *groups,
                                           GError             **error);
/* The project's default secrets (Project.SetSecrets): NULL for none. */
GStrv        vd_project_get_secrets       (VdProject           *self);
gboolean     vd_project_set_secrets       (VdProject           *self,
                                           const gchar * const *names,
                                           GError             **error);
/* The project's default SSH keys (Project.SetSshKeys): NULL for none. */
GStrv        vd_project_get_ssh_keys      (VdProject           *self);
gboolean     vd_project_set_ssh_keys      (VdProject           *self,
                                           const gchar * const *names,
                                           GError             **error);
/* The deploy key's public half ("ssh-ed25519 AAAA... vivarium-project-NAME"),
 * for the operator to add on the forge. */
gchar       *vd_project_get_deploy_key  (VdProject *self,
                                         GError   **error);
/* The last task's id, or NULL; recorded by the task runner. */
gchar       *vd_project_get_last_task   (VdProject *self);
gboolean     vd_project_set_last_task   (VdProject   *self,
                                         const gchar *task_id,
                                         GError     **error);

/* The identity of the daemon's commits (from the daemon's config); until
 * set, "Vivarium <vivarium@localhost>". Not stored: set it after load. */
gboolean     vd_project_set_identity    (VdProject   *self,
                                         const gchar *name,
                                         const gchar *email,
                                         GError     **error);

/* Makes the working tree writable by @uid alone (chown of the whole tree,
 * links not followed), for one session; revoke gives it back to root. */
gboolean     vd_project_grant           (VdProject *self,
                                         uid_t      uid,
                                         GError   **error);
gboolean     vd_project_revoke          (VdProject *self,
                                         GError   **error);
/* The same, in a thread (the walk is long for a big tree); both end in
 * vd_project_owner_finish(). */
void         vd_project_grant_async     (VdProject           *self,
                                         uid_t                uid,
                                         GAsyncReadyCallback  callback,
                                         gpointer             user_data);
void         vd_project_revoke_async    (VdProject           *self,
                                         GAsyncReadyCallback  callback,
                                         gpointer             user_data);
gboolean     vd_project_owner_finish    (VdProject           *self,
                                         GAsyncResult        *result,
                                         GError             **error);

/* The task runner's calls.
 *
 * compute_changes: the working tree against @base_commit (40 hex digits;
 * NULL = HEAD): a GPtrArray of VdChange (vd-repo.h): per path added /
 * modified / deleted / typechange, kind file / symlink / special, lines
 * added and removed; then the entries that are never committed (".git"
 * anywhere in the tree, fifos, sockets, devices, names git refuses) as
 * VD_CHANGE_SKIPPED with a reason. Symlinks are committed as links (their
 * target is their content) and never followed. display_path is the path
 * with every byte outside printable ASCII escaped.
 *
 * commit: commits the tree on HEAD's branch as the daemon ("Vivarium
 * <vivarium@localhost>"); *commit_id gets the new HEAD (HEAD unchanged when
 * nothing changed: no empty commits); *changes (optional) what the commit
 * holds against its parent, plus what was skipped. Bounded (VdRepoBounds):
 * a file above min(@file_max, quota) or sparse is skipped; more than the
 * quota read in all, @timeout_sec or @cancellable stop it (TooLarge,
 * TimedOut, Cancelled) and the tree is reset to HEAD. After a commit the
 * tree is made equal to it: what was skipped is removed from the tree, so
 * that the verification and the next task see exactly the commit.
 * vd_project_commit() uses VD_PROJECT_COMMIT_FILE_MAX and _TIMEOUT.
 *
 * log: up to @n (1..10000) commits from HEAD, newest first: GPtrArray of
 * VdCommitInfo (id, author, time in µs, subject; text escaped). */
GPtrArray   *vd_project_compute_changes (VdProject   *self,
                                         const gchar *base_commit,
                                         GError     **error);
#define VD_PROJECT_COMMIT_FILE_MAX (100 * 1024 * 1024)
#define VD_PROJECT_COMMIT_TIMEOUT  600
gboolean     vd_project_commit_bounded  (VdProject    *self,
                                         const gchar  *message,
                                         guint64       file_max,
                                         guint         timeout_sec,
                                         GCancellable *cancellable,
                                         gchar       **commit_id,
                                         GPtrArray   **changes,
                                         GError      **error);
gboolean     vd_project_commit          (VdProject   *self,
                                         const gchar *message,
                                         gchar      **commit_id,
                                         GPtrArray  **changes,
                                         GError     **error);
GPtrArray   *vd_project_log             (VdProject *self,
                                         guint      n,
                                         GError   **error);

/* https://, ssh:// or file:// only, no credentials in it (vd-repo.h). */
gboolean     vd_project_set_remote      (VdProject   *self,
                                         const gchar *url,
                                         GError     **error);
/* Pushes HEAD's branch to the remote, with the deploy key for ssh (the ssh
 * host key is pinned on first use), nothing for file://. A refusal by the
 * remote is BadState with the remote's reason in the message. */
void         vd_project_publish_async   (VdProject          *self,
                                         GCancellable       *cancellable,
                                         GAsyncReadyCallback callback,
                                         gpointer            user_data);
gboolean     vd_project_publish_finish  (VdProject    *self,
                                         GAsyncResult *result,
                                         GError      **error);

/* The blocking calls above that a main-loop caller needs, in a thread:
 * create (mkfs, mount, clone) and commit (hashing the tree). The clone,
 * and the project's publishes after, are run by @transfer (NULL: in this
 * process). */
void         vd_project_create_async    (const gchar        *projects_dir,
                                         const gchar        *keys_dir,
                                         const gchar        *name,
                                         guint64             quota_bytes,
                                         GVariant           *options,
                                         VdGitTransfer      *transfer,
                                         GCancellable       *cancellable,
                                         GAsyncReadyCallback callback,
                                         gpointer            user_data);
VdProject   *vd_project_create_finish   (GAsyncResult  *result,
                                         GError       **error);
void         vd_project_commit_async    (VdProject          *self,
                                         const gchar        *message,
                                         guint64             file_max,
                                         guint               timeout_sec,
                                         GCancellable       *cancellable,
                                         GAsyncReadyCallback callback,
                                         gpointer            user_data);
gboolean     vd_project_commit_finish   (VdProject    *self,
                                         GAsyncResult *result,
                                         gchar       **commit_id,
                                         GPtrArray   **changes,
                                         GError      **error);

/* At daemon shutdown: unmounts the ext4 dataset (load mounts it again). */
gboolean     vd_project_unmount         (VdProject *self,
                                         GError   **error);
/* Unmounts and removes everything the project had, its key included. */
gboolean     vd_project_delete          (VdProject *self,
                                         GError   **error);

G_END_DECLS
