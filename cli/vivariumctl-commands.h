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
gboolean vctl_cmd_session_stop    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

gboolean vctl_cmd_guard_status    (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_guard_selftest  (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

/* Offline: these read a file and never touch the bus. */
gboolean vctl_cmd_report_verify   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);
gboolean vctl_cmd_report_render   (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error);

G_END_DECLS
