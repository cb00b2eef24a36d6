/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

/* Structured log lines: GLib's journald writer turns every extra field into
 * a journal field, so `journalctl VIVARIUM_SESSION=<id>` finds a session's
 * whole story. MESSAGE must come last because it carries the format. */
#define vd_log_session(level, session, ...) \
  g_log_structured (G_LOG_DOMAIN, level, "VIVARIUM_SESSION", session, "MESSAGE", __VA_ARGS__)
#define vd_log_image(level, image, ...) \
  g_log_structured (G_LOG_DOMAIN, level, "VIVARIUM_IMAGE", image, "MESSAGE", __VA_ARGS__)
#define vd_log_task(level, task, ...) \
  g_log_structured (G_LOG_DOMAIN, level, "VIVARIUM_TASK", task, "MESSAGE", __VA_ARGS__)
#define vd_log_project(level, project, ...) \
  g_log_structured (G_LOG_DOMAIN, level, "VIVARIUM_PROJECT", project, "MESSAGE", __VA_ARGS__)
#define vd_log_action(level, action, uid, ...) \
  g_log_structured (G_LOG_DOMAIN, level, "VIVARIUM_ACTION", action, "VIVARIUM_CALLER_UID", uid, "MESSAGE", __VA_ARGS__)
