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
  { VIVARIUM_ERROR_NO_SPACE,          VIVARIUM_DBUS_ERROR_PREFIX ".NoSpace" },
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

static VivariumError
code_for_io_error (gint code)
{
  switch (code) {
  case G_IO_ERROR_NOT_FOUND:          return VIVARIUM_ERROR_NOT_FOUND;
  case G_IO_ERROR_EXISTS:             return VIVARIUM_ERROR_EXISTS;
  case G_IO_ERROR_NO_SPACE:           return VIVARIUM_ERROR_NO_SPACE;
  case G_IO_ERROR_INVALID_ARGUMENT:   return VIVARIUM_ERROR_INVALID_ARGUMENT;
  case G_IO_ERROR_PERMISSION_DENIED:  return VIVARIUM_ERROR_FAILED;
  case G_IO_ERROR_TIMED_OUT:          return VIVARIUM_ERROR_TIMED_OUT;
  case G_IO_ERROR_CANCELLED:          return VIVARIUM_ERROR_CANCELLED;
  case G_IO_ERROR_BUSY:               return VIVARIUM_ERROR_BUSY;
  case G_IO_ERROR_NOT_SUPPORTED:      return VIVARIUM_ERROR_NOT_SUPPORTED;
  case G_IO_ERROR_MESSAGE_TOO_LARGE:  return VIVARIUM_ERROR_TOO_LARGE;
  default:                            return VIVARIUM_ERROR_FAILED;
  }
}

static VivariumError
code_for_file_error (gint code)
{
  switch (code) {
  case G_FILE_ERROR_NOENT:  return VIVARIUM_ERROR_NOT_FOUND;
  case G_FILE_ERROR_EXIST:  return VIVARIUM_ERROR_EXISTS;
  case G_FILE_ERROR_NOSPC:  return VIVARIUM_ERROR_NO_SPACE;
  case G_FILE_ERROR_INVAL:  return VIVARIUM_ERROR_INVALID_ARGUMENT;
  default:                  return VIVARIUM_ERROR_FAILED;
  }
}

/* Every error that leaves the daemon is in the Vivarium domain: a client
 * gets org.vivarium.Vivarium1.Error.<Code>, never a GLib domain it cannot
 * match. The message, which is the sentence for a person, is kept. */
void
vivarium_error_convert (GError **error)
{
  GError *e;

  if (error == NULL || *error == NULL || (*error)->domain == VIVARIUM_ERROR)
    return;
  e = *error;
  if (e->domain == G_IO_ERROR)
    e->code = code_for_io_error (e->code);
  else if (e->domain == G_FILE_ERROR)
    e->code = code_for_file_error (e->code);
  else if (e->domain == G_DBUS_ERROR && e->code == G_DBUS_ERROR_ACCESS_DENIED)
    e->code = VIVARIUM_ERROR_NOT_AUTHORIZED;
  else if (e->domain == G_DBUS_ERROR && e->code == G_DBUS_ERROR_LIMITS_EXCEEDED)
    e->code = VIVARIUM_ERROR_TOO_LARGE;
  else
    e->code = VIVARIUM_ERROR_FAILED;
  e->domain = VIVARIUM_ERROR;
}
