/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-repo.h"

G_BEGIN_DECLS

/* A project's network transfers with its remote (clone, push), each run by
 * vivarium-git-transfer in a transient unit of its own,
 * vivarium-git-transfer-<project>.service, so that vivariumd itself opens
 * no AF_INET/AF_INET6 socket (its unit allows none). The unit sees the
 * git directory, the deploy key and, for a file:// remote, that path; not
 * the working tree (a clone is fetched there bare, checked out here), not
 * the rest of the state directory.
 *
 * Blocking: call from a worker thread. Thread-safe. Without systemd on the
 * bus (the integration suite's private bus) the transfer runs in this
 * process, as vd_repo_clone()/vd_repo_push() do. Errors are those of
 * vd_repo_clone()/vd_repo_push(), plus Cancelled and TimedOut, and Failed
 * naming the unit when it ended without a result. */

#define VD_TYPE_GIT_TRANSFER (vd_git_transfer_get_type ())
G_DECLARE_FINAL_TYPE (VdGitTransfer, vd_git_transfer, VD, GIT_TRANSFER, GObject)

/* @state_dir: hidden from the unit but for what it needs; @runtime_dir:
 * hidden from it. */
VdGitTransfer *vd_git_transfer_new            (GDBusConnection *connection,
                                               const gchar     *state_dir,
                                               const gchar     *runtime_dir);
/* After the daemon lost the bus (NULL: none yet). */
void           vd_git_transfer_set_connection (VdGitTransfer   *self,
                                               GDBusConnection *connection);
/* How long a transfer's unit may run before it is stopped (TimedOut). */
void           vd_git_transfer_set_timeout    (VdGitTransfer   *self,
                                               guint            seconds);

/* vd_repo_clone(). @self NULL: in this process. */
VdRepo        *vd_git_transfer_clone          (VdGitTransfer *self,
                                               const gchar   *project,
                                               const gchar   *url,
                                               const gchar   *gitdir,
                                               const gchar   *workdir,
                                               const gchar   *ssh_key,
                                               GCancellable  *cancellable,
                                               GError       **error);
/* vd_repo_push() of @repo, whose git directory is @gitdir and whose
 * remote is @url. @self NULL: in this process. */
gboolean       vd_git_transfer_push           (VdGitTransfer *self,
                                               const gchar   *project,
                                               VdRepo        *repo,
                                               const gchar   *gitdir,
                                               const gchar   *url,
                                               const gchar   *ssh_key,
                                               const gchar   *host_key_pin,
                                               gchar        **host_key_seen,
                                               GCancellable  *cancellable,
                                               GError       **error);

G_END_DECLS
