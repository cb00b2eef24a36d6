/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivariumctl-common.h"

G_BEGIN_DECLS

/* One handler per verb; each parses its own arguments before it touches the
 * bus, so that a usage error never depends on the daemon. */
gboolean vctl_cmd_status          (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_image_list      (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_build     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_import    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_freeze    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_verify    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_delete    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_recipes   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_session_list    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_start   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_exec    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_cp      (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_screenshot (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_log     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_resume  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_pause   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_save_as_image (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_image_show      (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_stop    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_guard_status    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_guard_selftest  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_project_create  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_list    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_show    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_log     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_delete  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_remote  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_publish (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_project_set     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_config_show     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
/* The Project named NAME (a usage error for a bad name, NotFound). */
VivariumDBusProject *vctl_project_for_call (VctlContext *ctx, const gchar *name, GError **error);

gboolean vctl_cmd_host_pick       (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_task_submit     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_wait       (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_list       (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_show       (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_answer     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_cancel     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_report     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_transcript (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

/* A task's script worker: they find their task and session in the
 * environment and never call the Manager. */
gboolean vctl_cmd_worker_exec     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_worker_read     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_worker_write    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_worker_ask      (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_worker_finish   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

/* Egress (docs/egress.md): the dry run and the decision logs. */
gboolean vctl_cmd_egress_check    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_egress_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_task_egress_log (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_session_show    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
/* Shared by `session egress-log` and `task egress-log`: either proxy has
 * GetEgressLog with the same signature. */
gboolean vctl_print_egress_log    (VctlContext *ctx, gpointer proxy, GError **error);

/* Secrets (docs/secrets.md): stored by an administrator, never shown. */
gboolean vctl_cmd_secret_add      (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_secret_list     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_secret_remove   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);


/* SSH keys (docs/secrets.md, "SSH keys"): vivariumctl-ssh-key.c. */
gboolean vctl_cmd_ssh_key_add     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_ssh_key_list    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_ssh_key_remove  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

/* --egress, --allow, --group, --secret and --ssh-key of `session start`
 * and `task submit` (secrets and keys go with allowlist egress: the proxy
 * holds them). */
typedef struct {
  gchar  *mode;
  gchar **allow;
  gchar **groups;
  gchar **secrets;
  gchar **ssh_keys;
} VctlEgressOptions;

#define VCTL_EGRESS_OPTION_ENTRIES(o)                                                         \
  { "egress", 0, 0, G_OPTION_ARG_STRING, &(o).mode,                                           \
    N_("Egress mode: none, allowlist or open (default: the daemon's)"), "MODE" },             \
  { "allow", 0, 0, G_OPTION_ARG_STRING_ARRAY, &(o).allow,                                     \
    N_("In allowlist mode, also allow HOST[:PORT] or *.DOMAIN[:PORT] (repeat)"), "RULE" },    \
  { "group", 0, 0, G_OPTION_ARG_STRING_ARRAY, &(o).groups,                                    \
    N_("In allowlist mode, use these rule groups instead of the default ones (repeat)"), "NAME" }, \
  { "secret", 0, 0, G_OPTION_ARG_STRING_ARRAY, &(o).secrets,                                  \
    N_("In allowlist mode, give the guest a placeholder for this stored secret (repeat)"), "NAME" }, \
  { "ssh-key", 0, 0, G_OPTION_ARG_STRING_ARRAY, &(o).ssh_keys,                                \
    N_("In allowlist mode, a stored SSH key the guest's agent signs with (repeat)"), "NAME" }

void     vctl_egress_options_clear (VctlEgressOptions *o);
/* Checks the flags (a usage error before the bus) and adds the options
 * "egress", "egress_groups", "egress_allow", "secrets" and "ssh_keys"
 * that were given. */
gboolean vctl_egress_options_add  (const VctlEgressOptions *o, GVariantBuilder *b, GError **error);

gboolean vctl_cmd_report_list     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_report_show     (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
/* Shared by `report show` and `task report`. */
gboolean vctl_print_report        (VctlContext *ctx, const gchar *path, gboolean json, GError **error);

/* Offline: these read a file and never touch the bus. */
gboolean vctl_cmd_report_verify   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_report_render   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

G_END_DECLS
