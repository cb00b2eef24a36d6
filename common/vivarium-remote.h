/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The system bus of another host, reached over SSH: `ssh -xT -- DEST
 * systemd-stdio-bridge`, D-Bus spoken over its stdin and stdout. The
 * remote polkit decides each call as the SSH user there, and ssh checks
 * the host key by its own configuration (~/.ssh/config, known_hosts);
 * nothing here weakens either. $VIVARIUM_SSH names another ssh program
 * (a path, not a command line), as $GIT_SSH does for git.
 *
 * A descriptor cannot travel over the pipe: methods with an "h" argument
 * (ImportImage, AddSecret, AddSshKey) work only on the local bus. */

/* DEST: "[USER@]HOST" — a user name and a host name or address as ssh
 * takes them, never an option (nothing starts with "-"). */
gboolean         vivarium_remote_check_destination (const gchar   *destination,
                                                    GError       **error);

/* @interactive: FALSE adds BatchMode=yes, so that ssh fails instead of
 * asking for a password or a host key's acceptance. ssh's own messages go
 * to this process's stderr. The connection keeps ssh running and ends it
 * when it is closed. */
GDBusConnection *vivarium_remote_connect_sync      (const gchar   *destination,
                                                    gboolean       interactive,
                                                    GCancellable  *cancellable,
                                                    GError       **error);

/* For a program with no terminal to show ssh's lines (the app): never
 * interactive, and ssh's stderr kept in an unlinked file instead, so its
 * last line is the reason in @error, and later the reason a connection
 * closed (vivarium_remote_get_ssh_message). */
GDBusConnection *vivarium_remote_connect_quiet     (const gchar   *destination,
                                                    GCancellable  *cancellable,
                                                    GError       **error);

/* The last line ssh wrote on a connection from
 * vivarium_remote_connect_quiet, or NULL. */
gchar           *vivarium_remote_get_ssh_message   (GDBusConnection *connection);

G_END_DECLS
