/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* How every client of vivariumd (vivariumctl, vivarium-mcp, the app) calls
 * it: through the generated proxies, with these flags and timeouts. */

/* The proxy's default (25 s): for calls the daemon answers at once. */
#define VIVARIUM_CALL_TIMEOUT_DEFAULT (-1)
/* For work the daemon bounds itself (a boot, a copy, a freeze, Task.Wait):
 * it answers with TimedOut, so the client must not give up first. */
#define VIVARIUM_CALL_TIMEOUT_LONG G_MAXINT
/* A call that may wait for a password prompt (polkit allows 5 min). */
#define VIVARIUM_CALL_TIMEOUT_INTERACTIVE (6 * 60 * 1000)

GDBusCallFlags vivarium_call_flags          (gboolean      interactive);
gchar         *vivarium_call_error_sentence (const GError *error);

G_END_DECLS
