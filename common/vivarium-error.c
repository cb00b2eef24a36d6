/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"

static const GDBusErrorEntry vivarium_error_entries[] = {
  { VIVARIUM_ERROR_FAILED,            VIVARIUM_DBUS_ERROR_PREFIX ".Failed" },
  { VIVARIUM_ERROR_INVALID_ARGUMENT,  VIVARIUM_DBUS_ERROR_PREFIX ".InvalidArgument" },
  { VIVARIUM_ERROR_NOT_AUTHORIZED,    VIVARIUM_DBUS_ERROR_PREFIX ".NotAuthorized" },
  { VIVARIUM_ERROR_NOT_FOUND,         VIVARIUM_DBUS_ERROR_PREFIX ".NotFound" },
  { VIVARIUM_ERROR_EXISTS,            VIVARIUM_DBUS_ERROR_PREFIX ".Exists" },
  { VIVARIUM_ERROR_BUSY,              VIVARIUM_DBUS_ERROR_PREFIX ".Busy" },
  { VIVARIUM_ERROR_NOT_FROZEN,        VIVARIUM_DBUS_ERROR_PREFIX ".NotFrozen" },
  { VIVARIUM_ERROR_DIGEST_MISMATCH,   VIVARIUM_DBUS_ERROR_PREFIX ".DigestMismatch" },
  { VIVARIUM_ERROR_BAD_STATE,         VIVARIUM_DBUS_ERROR_PREFIX ".BadState" },
  { VIVARIUM_ERROR_TOO_LARGE,         VIVARIUM_DBUS_ERROR_PREFIX ".TooLarge" },
  { VIVARIUM_ERROR_TIMED_OUT,         VIVARIUM_DBUS_ERROR_PREFIX ".TimedOut" },
  { VIVARIUM_ERROR_GUEST,             VIVARIUM_DBUS_ERROR_PREFIX ".Guest" },
  { VIVARIUM_ERROR_GUARD_UNAVAILABLE, VIVARIUM_DBUS_ERROR_PREFIX ".GuardUnavailable" },
  { VIVARIUM_ERROR_NOT_SUPPORTED,     VIVARIUM_DBUS_ERROR_PREFIX ".NotSupported" },
  { VIVARIUM_ERROR_CANCELLED,         VIVARIUM_DBUS_ERROR_PREFIX ".Cancelled" },
  { VIVARIUM_ERROR_PROTOCOL,          VIVARIUM_DBUS_ERROR_PREFIX ".Protocol" },
};

G_STATIC_ASSERT (G_N_ELEMENTS (vivarium_error_entries) == VIVARIUM_N_ERRORS);

GQuark
vivarium_error_quark (void)
{
  static gsize quark = 0;

  /* Registering the domain is what makes a GError cross the bus with its
   * name, and come back on the client side as the same domain and code. */
  g_dbus_error_register_error_domain ("vivarium-error-quark",
                                      &quark,
                                      vivarium_error_entries,
                                      G_N_ELEMENTS (vivarium_error_entries));
  return (GQuark) quark;
}

const gchar *
vivarium_error_code_to_name (VivariumError code)
{
  for (gsize i = 0; i < G_N_ELEMENTS (vivarium_error_entries); i++) {
    if (vivarium_error_entries[i].error_code == (gint) code)
      return vivarium_error_entries[i].dbus_error_name;
  }
  return NULL;
}

gboolean
vivarium_error_is_remote (const GError *error)
{
  return error != NULL && g_dbus_error_is_remote_error (error);
}

/* Remove the "GDBus.Error:name: " prefix so that a person reads only the
 * daemon's sentence. */
void
vivarium_error_strip_remote (GError *error)
{
  if (error != NULL)
    g_dbus_error_strip_remote_error (error);
}
