/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"

#include "vd-project.h"
#include "vd-secret-store.h"
#include "vd-session-pool.h"

G_BEGIN_DECLS

/* The projects on the bus: loads them at start (after the engine's sweep),
 * creates them off the main loop, exports each one's Project object
 * through the VdExportFunc it was handed (so every object is authorized),
 * answers Log, SetRemote, Publish and Delete, and keeps the rule "one user
 * of a project at a time": a task or a session holding a project makes it
 * busy, and Delete or a second holder gets Busy.
 *
 * file:// URLs (clone and SetRemote) are read and written by the daemon as
 * root, so they may only name a repository under the state directory's
 * remotes/ (STATE/remotes/, root's, 0700): the administrator puts bare
 * repositories there; a path anywhere else, or one that leaves remotes/
 * through a symbolic link, is refused with InvalidArgument.
 *
 * signal "project-added" (const gchar *object_path)
 * signal "project-removed" (const gchar *object_path) */

#define VD_TYPE_PROJECT_STORE (vd_project_store_get_type ())
G_DECLARE_FINAL_TYPE (VdProjectStore, vd_project_store, VD, PROJECT_STORE, GObject)

VdProjectStore *vd_project_store_new          (const gchar  *projects_dir,
                                               const gchar  *keys_dir,
                                               const gchar  *remotes_dir,
                                               VdExportFunc  export_func,
                                               gpointer      export_data);
/* What runs the projects' clones and publishes (before the load). */
void            vd_project_store_set_git_transfer (VdProjectStore *self,
                                                   VdGitTransfer  *transfer);
/* For checking Project.SetEgress's groups. */
void            vd_project_store_set_config   (VdProjectStore *self,
                                               VdConfig       *config);
/* For checking Project.SetSecrets's names. */
void            vd_project_store_set_secret_store (VdProjectStore *self,
                                                   VdSecretStore  *secrets);
/* Sweeps what a crash left, loads and exports every complete project. */
void            vd_project_store_load         (VdProjectStore *self);
const gchar   **vd_project_store_list_paths   (VdProjectStore *self);
/* NotFound (or InvalidArgument for a bad name) with a sentence. */
VdProject      *vd_project_store_lookup       (VdProjectStore *self,
                                               const gchar    *name,
                                               GError        **error);
const gchar    *vd_project_store_get_path     (VdProjectStore *self,
                                               const gchar    *name);

/* Validates (name, quota floor, options, file:// rule), then creates the
 * dataset in a thread and exports it. */
void            vd_project_store_create_async (VdProjectStore     *self,
                                               const gchar        *name,
                                               guint64             quota_bytes,
                                               GVariant           *options,
                                               GAsyncReadyCallback callback,
                                               gpointer            user_data);
VdProject      *vd_project_store_create_finish (VdProjectStore *self,
                                                GAsyncResult   *result,
                                                GError        **error);

/* One holder at a time (@holder: "task <id>" or "session <id>", for the
 * Busy sentence). Release forgets the holder and refreshes UsedBytes and
 * Head. */
gboolean        vd_project_store_acquire      (VdProjectStore *self,
                                               const gchar    *name,
                                               const gchar    *holder,
                                               GError        **error);
void            vd_project_store_release      (VdProjectStore *self,
                                               const gchar    *name);
/* Refreshes the Project object's Head, UsedBytes, LastTask. */
void            vd_project_store_refresh      (VdProjectStore *self,
                                               const gchar    *name);
/* The file:// rule above, on its own (for tests and the manager). */
gboolean        vd_project_store_check_url    (VdProjectStore *self,
                                               const gchar    *url,
                                               GError        **error);
/* Daemon shutdown: unmounts the ext4 datasets. */
void            vd_project_store_unmount_all  (VdProjectStore *self);

G_END_DECLS
