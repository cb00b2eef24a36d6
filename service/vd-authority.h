/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <polkit/polkit.h>

#include "vd-worker-grants.h"

G_BEGIN_DECLS

/* The action of the verbs only a task's worker may call (Task.Ask, Finish):
 * declared in the policy as allowing nobody, and refused here without asking
 * polkit, which would allow root. */
#define VD_AUTHORITY_WORKER_ONLY "org.vivarium.vivarium1.task-work"

typedef enum {
  VD_ACTION_ROW_METHOD,  /* calling the method */
  VD_ACTION_ROW_READ,    /* reading the interface: Get/GetAll, the tree, its signals */
  VD_ACTION_ROW_SIGNAL,  /* hearing one signal, when it needs more than reading */
} VdActionRowKind;

/* One row of the bouncer's map. For a READ row @member is
 * VD_AUTHORITY_READ. */
typedef struct {
  const gchar     *interface;
  const gchar     *member;
  const gchar     *action;
  VdActionRowKind  kind;
} VdActionRow;

#define VD_AUTHORITY_READ "*"

/* A non-interactive check that takes longer than this is refused: clients
 * give up after 25 s by default, and they must hear "no", not a timeout. */
#define VD_AUTHORITY_CHECK_TIMEOUT_SEC             10
#define VD_AUTHORITY_CHECK_TIMEOUT_INTERACTIVE_SEC 300

#define VD_TYPE_AUTHORITY (vd_authority_get_type ())
G_DECLARE_FINAL_TYPE (VdAuthority, vd_authority, VD, AUTHORITY, GObject)

VdAuthority       *vd_authority_new                (void);
const VdActionRow *vd_authority_get_action_map     (gsize *n_rows);
const gchar       *vd_authority_action_for         (const gchar *interface_name,
                                                    const gchar *method_name);
const gchar       *vd_authority_read_action_for    (const gchar *interface_name);
const gchar       *vd_authority_signal_action_for  (const gchar *interface_name,
                                                    const gchar *signal_name);
void               vd_authority_forget_bus         (VdAuthority *self);
void               vd_authority_set_worker_grants  (VdAuthority    *self,
                                                    VdWorkerGrants *grants);
gboolean           vd_authority_judge_worker       (VdAuthority *self,
                                                    guint32      uid,
                                                    guint32      pid,
                                                    const gchar *interface_name,
                                                    const gchar *method,
                                                    const gchar *object_path,
                                                    gboolean    *allowed);
gboolean           vd_authority_has_workers        (VdAuthority *self);

void               vd_authority_check_async        (VdAuthority         *self,
                                                    const gchar         *sender,
                                                    const gchar         *action,
                                                    PolkitDetails       *details,
                                                    gboolean             interactive,
                                                    GAsyncReadyCallback  callback,
                                                    gpointer             user_data);
gboolean           vd_authority_check_finish       (VdAuthority   *self,
                                                    GAsyncResult  *result,
                                                    GError       **error);

G_END_DECLS
