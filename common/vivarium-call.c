/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-call.h"
#include "vivarium-error.h"

/* @interactive: the caller has someone to type a password (a polkit agent
 * may ask); an MCP server or `--no-interaction` has not. Registering the
 * error domain here means that whatever the daemon refuses arrives as a
 * typed VIVARIUM_ERROR, on every client's call path. */
GDBusCallFlags
vivarium_call_flags (gboolean interactive)
{
  (void) vivarium_error_quark ();
  return interactive ? G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION : G_DBUS_CALL_FLAGS_NONE;
}

/* The daemon's sentence, without GDBus's "GDBus.Error:NAME: " in front. */
gchar *
vivarium_call_error_sentence (const GError *error)
{
  g_autoptr(GError) copy = g_error_copy (error);

  g_dbus_error_strip_remote_error (copy);
  return g_strdup (copy->message);
}
