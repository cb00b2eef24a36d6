/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The one place that spells the names DESIGN.md fixes. */
#define VIVARIUM_DBUS_NAME          "org.vivarium.Vivarium1"
#define VIVARIUM_DBUS_PATH          "/org/vivarium/Vivarium1"
#define VIVARIUM_DBUS_PATH_SESSIONS VIVARIUM_DBUS_PATH "/sessions"
#define VIVARIUM_DBUS_PATH_IMAGES   VIVARIUM_DBUS_PATH "/images"
#define VIVARIUM_DBUS_PATH_PROJECTS VIVARIUM_DBUS_PATH "/projects"
#define VIVARIUM_DBUS_PATH_TASKS    VIVARIUM_DBUS_PATH "/tasks"
#define VIVARIUM_DBUS_PATH_REPORTS  VIVARIUM_DBUS_PATH "/reports"
#define VIVARIUM_DBUS_PATH_JOBS     VIVARIUM_DBUS_PATH "/jobs"
#define VIVARIUM_DBUS_IFACE_PREFIX  "org.vivarium.Vivarium1"
#define VIVARIUM_DBUS_ERROR_PREFIX  "org.vivarium.Vivarium1.Error"
#define VIVARIUM_POLKIT_PREFIX      "org.vivarium.vivarium1."

#define VIVARIUM_SESSION_UNIT_PREFIX "vivarium-session-"
#define VIVARIUM_SLICE               "vivarium.slice"
#define VIVARIUM_DAEMON_UNIT         "vivariumd.service"
/* The guests' DNS relay (vivarium-dns-relay), when the host's resolver is one they must not reach. */
#define VIVARIUM_DNS_RELAY_UNIT      "vivarium-dns-relay.service"
/* A project's clone or push (vivarium-git-transfer), one unit per transfer:
 * VIVARIUM_GIT_TRANSFER_UNIT_PREFIX "<project>.service". */
#define VIVARIUM_GIT_TRANSFER_UNIT_PREFIX "vivarium-git-transfer-"
#define VIVARIUM_QEMU_GROUP          "vivarium-qemu"
#define VIVARIUM_NFT_TABLE           "vivarium_guard"

/* Limits: every one of them is a refusal boundary, not a hint. */
#define VIVARIUM_NAME_MAX           64
#define VIVARIUM_ARGV_MAX           256
#define VIVARIUM_ARG_LEN_MAX        (64 * 1024)
#define VIVARIUM_ENV_MAX            128
#define VIVARIUM_PATH_MAX           4096
#define VIVARIUM_FILE_MAX           (16 * 1024 * 1024)
#define VIVARIUM_OUTPUT_CAP         (1024 * 1024)
/* No message the daemon sends may be larger: the bus's own limit is 32 MiB
 * and a bigger message makes dbus-daemon drop the daemon's connection.
 * ReadFile's VIVARIUM_FILE_MAX plus its framing must fit below it. */
#define VIVARIUM_MAX_REPLY_BYTES    (24 * 1024 * 1024)
/* How long a peer hears signals polkit allowed it before it is asked
 * again: polkit's own auth_admin_keep lasts 5 minutes. */
#define VIVARIUM_READ_GRANT_SEC     300
#define VIVARIUM_MEMORY_MIN_MIB     128
#define VIVARIUM_MEMORY_MAX_MIB     (64 * 1024)
#define VIVARIUM_CPUS_MAX           64
#define VIVARIUM_TIMEOUT_MAX_SEC    (7 * 24 * 3600)
#define VIVARIUM_EXEC_TIMEOUT_MAX_SEC (24 * 3600)
/* Project names: [a-z0-9][a-z0-9._-]{0,62}. They name a directory, a D-Bus
 * object path element, a key file and a git branch's home, so lower case
 * only: two projects must never differ by case alone. */
#define VIVARIUM_PROJECT_NAME_MAX   63
/* A dataset smaller than this cannot hold an ext4 filesystem's own metadata
 * and a useful working tree. */
#define VIVARIUM_PROJECT_QUOTA_MIN  (16 * 1024 * 1024)

/* The command log. A caller may send 256 arguments of 64 KiB each (16 MiB);
 * the log keeps a bounded record of that, marked "argv-truncated", so that
 * no caller can grow the daemon's memory, its files or its replies. */
#define VIVARIUM_LOG_ARGV_ITEMS_MAX   64          /* argv items kept per entry */
#define VIVARIUM_LOG_ARGV_BYTES_MAX   4096        /* argv bytes kept per entry */
#define VIVARIUM_LOG_ERROR_BYTES_MAX  1024        /* of an entry's error message */
#define VIVARIUM_LOG_ENTRIES_MAX      1000        /* kept in memory per session */
#define VIVARIUM_LOG_PAGE_MAX         200         /* entries per GetCommandLog() */
#define VIVARIUM_LOG_FILE_BYTES_MAX   (8 * 1024 * 1024)  /* one session's file */
#define VIVARIUM_LOG_FILES_MAX        256         /* session files kept on disk */
/* Every reply the daemon builds from a list stays under this (a budget far
 * below VIVARIUM_MAX_REPLY_BYTES, the boundary's hard cap on any message); the bus
 * disconnects a peer that sends a message over 32 MiB (dbus-daemon's
 * max_message_size), and losing the bus ends every session. A full page
 * (200 entries of at most ~6 KiB) fits with room to spare. */
#define VIVARIUM_LIST_REPLY_BYTES_MAX      (2 * 1024 * 1024)

/* The task contract's bounds (dbus/org.vivarium.Vivarium1.xml: SubmitTask,
 * Task.Wait, Task.Ask, Task.Answer, Task.Finish): the daemon refuses beyond
 * them, and its clients (vivariumctl, vivarium-mcp) refuse before the bus
 * with the same numbers. */
#define VIVARIUM_TASK_SCRIPT_MAX           (1024 * 1024)
#define VIVARIUM_TASK_INSTRUCTIONS_MAX     (64 * 1024)
#define VIVARIUM_TASK_ANSWER_MAX           (64 * 1024)
#define VIVARIUM_TASK_QUESTION_MAX         4096
#define VIVARIUM_TASK_WAIT_MAX_SEC         3600
/* Finish's summary is capped at 4 KiB in the report; the daemon accepts a
 * longer one up to this (and cuts it, saying so), beyond it refuses. */
#define VIVARIUM_TASK_SUMMARY_MAX          (2 * 1024 * 1024)

gboolean  vivarium_name_validate         (const gchar  *kind,
                                          const gchar  *name,
                                          GError      **error);
gboolean  vivarium_project_name_validate (const gchar  *name,
                                          GError      **error);
gboolean  vivarium_guest_path_validate   (const gchar  *path,
                                          GError      **error);
gboolean  vivarium_argv_validate         (const gchar * const *argv,
                                          GError      **error);
gboolean  vivarium_env_validate          (const gchar * const *env,
                                          GError      **error);
gchar    *vivarium_object_path_for       (const gchar  *collection_path,
                                          const gchar  *id);
gchar    *vivarium_escape_untrusted      (const gchar  *data,
                                          gsize         len,
                                          gsize         cap,
                                          gboolean     *truncated);

G_END_DECLS
