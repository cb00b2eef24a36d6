/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A value a caller hands over as a descriptor (an `h` argument: AddSecret,
 * AddSshKey), never as a string a bus monitor could log. @what names it in
 * the errors, lower case ("the secret's value").
 *
 * take: the descriptor of @handle, if it is a readable pipe, socket or
 * regular file; InvalidArgument naming @method otherwise.
 *
 * read: everything it gives until its end, at most @max bytes and one more
 * (so a caller may drop a trailing newline and check @max itself); TooLarge
 * past that, InvalidArgument when it does not end within @timeout_ms.
 * Blocks: call it off the main loop. On failure what was read is wiped. */
int      vd_fd_argument_take (GDBusMethodInvocation *invocation,
                              GVariant              *handle,
                              const gchar           *method,
                              const gchar           *what,
                              GError               **error);
GBytes  *vd_fd_argument_read (int                    fd,
                              gsize                  max,
                              guint                  timeout_ms,
                              const gchar           *what,
                              GError               **error);
/* Overwrites the bytes, then drops the reference. */
void     vd_fd_argument_wipe (GBytes                *bytes);

G_END_DECLS
