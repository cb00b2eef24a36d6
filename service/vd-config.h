/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

#define VD_TYPE_CONFIG (vd_config_get_type ())
G_DECLARE_FINAL_TYPE (VdConfig, vd_config, VD, CONFIG, GObject)

VdConfig    *vd_config_new                     (void);
gboolean     vd_config_load                    (VdConfig  *self,
                                                GError   **error);

const gchar *vd_config_get_state_dir           (VdConfig *self);
const gchar *vd_config_get_runtime_dir         (VdConfig *self);
const gchar *vd_config_get_data_dir            (VdConfig *self);
const gchar *vd_config_get_libexec_dir         (VdConfig *self);
gchar       *vd_config_build_state_path        (VdConfig *self, const gchar *first, ...) G_GNUC_NULL_TERMINATED;

guint        vd_config_get_read_grant_sec      (VdConfig *self);
guint        vd_config_get_idle_timeout_sec    (VdConfig *self);
guint        vd_config_get_default_memory_mib  (VdConfig *self);
guint        vd_config_get_default_cpus        (VdConfig *self);
guint        vd_config_get_max_sessions        (VdConfig *self);
guint        vd_config_get_max_queued_tasks    (VdConfig *self);
guint64      vd_config_get_commit_file_max     (VdConfig *self);
guint        vd_config_get_commit_timeout_sec  (VdConfig *self);
/* [Projects] TransferTimeoutSec= (10–86400): a clone's or publish's unit. */
guint        vd_config_get_transfer_timeout_sec (VdConfig *self);
/* [Tasks] MaxFinishedTasks= (1–1000) and MaxReports= (1–2000). */
#define VD_CONFIG_MAX_FINISHED_TASKS_DEFAULT 50
#define VD_CONFIG_MAX_REPORTS_DEFAULT        200
guint        vd_config_get_max_finished_tasks  (VdConfig *self);
guint        vd_config_get_max_reports         (VdConfig *self);
guint32      vd_config_get_uid_base            (VdConfig *self);
guint32      vd_config_get_uid_count           (VdConfig *self);
GStrv        vd_config_get_extra_deny          (VdConfig *self);
gboolean     vd_config_get_allow_unenforced_layer1 (VdConfig *self);
gboolean     vd_config_get_allow_negative_control  (VdConfig *self);
const gchar *vd_config_get_dns_relay           (VdConfig *self);
guint        vd_config_get_agent_timeout_sec   (VdConfig *self);
const gchar *vd_config_get_accelerator         (VdConfig *self);
gboolean     vd_config_use_kvm                 (VdConfig *self);
gboolean     vd_config_get_boot_snapshots      (VdConfig *self);

/* [Egress]: modes are "none", "allowlist" or "open"; limits in bytes,
 * 0 = none. */
const gchar *vd_config_get_egress_session_mode   (VdConfig *self);
const gchar *vd_config_get_egress_task_mode      (VdConfig *self);
GStrv        vd_config_get_egress_session_groups (VdConfig *self);
GStrv        vd_config_get_egress_task_groups    (VdConfig *self);
guint64      vd_config_get_egress_limit_up       (VdConfig *self);
guint64      vd_config_get_egress_limit_down     (VdConfig *self);
guint        vd_config_get_egress_log_max_entries (VdConfig *self);
gchar       *vd_config_dup_egress_upstream_ca    (VdConfig *self);

/* "group " + a name must fit a rule's origin (64 bytes). */
#define VD_EGRESS_GROUP_NAME_MAX 58

/* The [EgressGroup NAME] sections with a valid NAME, sorted. */
GStrv        vd_config_get_egress_group_names    (VdConfig *self);
/* FALSE when no such group; otherwise its rules (empty lists, never NULL)
 * and its description ("" when none). Any out-parameter may be NULL. */
gboolean     vd_config_get_egress_group          (VdConfig     *self,
                                                  const gchar  *name,
                                                  GStrv        *allow,
                                                  GStrv        *deny,
                                                  gchar       **description);

G_END_DECLS
