/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdOutgoing"

#include "config.h"

#include <string.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-outgoing.h"

/* The safety net on every message the daemon sends (VdExported installs it
 * as a filter): nothing bigger than VIVARIUM_MAX_REPLY_BYTES leaves, since
 * one message over the bus's limit costs the daemon its connection, and
 * every error name is in our domain, since clients match on names. It is a
 * net, not the rule: each handler bounds its own replies and converts its
 * own errors; what this catches is logged as the bug it is.
 *
 * Runs in GDBus's worker thread: it touches nothing but the message. */

#define TEXT_MAX 1024

static gchar *
bounded (const gchar *text)
{
  return vivarium_escape_untrusted (text, strlen (text), TEXT_MAX, NULL);
}


static const struct {
  const gchar  *name;
  VivariumError code;
} standard_errors[] = {
  { "org.freedesktop.DBus.Error.UnknownMethod",    VIVARIUM_ERROR_NOT_FOUND },
  { "org.freedesktop.DBus.Error.UnknownObject",    VIVARIUM_ERROR_NOT_FOUND },
  { "org.freedesktop.DBus.Error.UnknownInterface", VIVARIUM_ERROR_NOT_FOUND },
  { "org.freedesktop.DBus.Error.UnknownProperty",  VIVARIUM_ERROR_NOT_FOUND },
  { "org.freedesktop.DBus.Error.InvalidArgs",      VIVARIUM_ERROR_INVALID_ARGUMENT },
  { "org.freedesktop.DBus.Error.PropertyReadOnly", VIVARIUM_ERROR_INVALID_ARGUMENT },
  { "org.freedesktop.DBus.Error.AccessDenied",     VIVARIUM_ERROR_NOT_AUTHORIZED },
  { "org.freedesktop.DBus.Error.LimitsExceeded",   VIVARIUM_ERROR_TOO_LARGE },
};

static GDBusMessage *
error_reply_like (GDBusMessage *message, VivariumError code, const gchar *text)
{
  GDBusMessage *reply = g_dbus_message_new ();

  g_dbus_message_set_message_type (reply, G_DBUS_MESSAGE_TYPE_ERROR);
  g_dbus_message_set_flags (reply, G_DBUS_MESSAGE_FLAGS_NO_REPLY_EXPECTED);
  g_dbus_message_set_serial (reply, g_dbus_message_get_serial (message));
  g_dbus_message_set_reply_serial (reply, g_dbus_message_get_reply_serial (message));
  if (g_dbus_message_get_destination (message) != NULL)
    g_dbus_message_set_destination (reply, g_dbus_message_get_destination (message));
  g_dbus_message_set_error_name (reply, vivarium_error_code_to_name (code));
  g_dbus_message_set_body (reply, g_variant_new ("(s)", text));
  return reply;
}

static gchar *
error_text (GDBusMessage *message)
{
  GVariant *body = g_dbus_message_get_body (message);
  const gchar *text = NULL;

  if (body != NULL && g_variant_n_children (body) > 0) {
    g_autoptr(GVariant) first = g_variant_get_child_value (body, 0);
    if (g_variant_is_of_type (first, G_VARIANT_TYPE_STRING))
      text = g_variant_get_string (first, NULL);
  }
  return bounded (text != NULL ? text : "The daemon failed without saying why");
}

static GDBusMessage *
rename_error (GDBusMessage *message)
{
  const gchar *name = g_dbus_message_get_error_name (message);
  g_autofree gchar *text = NULL;
  VivariumError code = VIVARIUM_ERROR_FAILED;
  gboolean standard = FALSE;
  GDBusMessage *reply;

  if (name != NULL && g_str_has_prefix (name, VIVARIUM_DBUS_ERROR_PREFIX "."))
    return message;
  for (gsize i = 0; i < G_N_ELEMENTS (standard_errors); i++) {
    if (g_strcmp0 (name, standard_errors[i].name) == 0) {
      code = standard_errors[i].code;
      standard = TRUE;
    }
  }
  text = error_text (message);
  /* GDBus's own refusals (bad signature, no such member) are expected; any
   * other foreign name is an error not converted where it was raised. */
  if (!standard)
    g_warning ("an error reply named %s escaped conversion (a bug to fix where it is raised): %s",
               name != NULL ? name : "(none)", text);
  reply = error_reply_like (message, code, text);
  g_object_unref (message);
  return reply;
}

GDBusMessage *
vd_outgoing_check (GDBusMessage *message)
{
  GDBusMessageType type = g_dbus_message_get_message_type (message);
  GVariant *body = g_dbus_message_get_body (message);
  gsize size = body != NULL ? g_variant_get_size (body) : 0;

  if (type != G_DBUS_MESSAGE_TYPE_METHOD_RETURN && type != G_DBUS_MESSAGE_TYPE_ERROR &&
      type != G_DBUS_MESSAGE_TYPE_SIGNAL)
    return message;
  if (size > VIVARIUM_MAX_REPLY_BYTES) {
    g_autofree gchar *text = g_strdup_printf ("The reply would be %" G_GSIZE_FORMAT " bytes; the daemon sends at most %d",
                                              size, VIVARIUM_MAX_REPLY_BYTES);
    GDBusMessage *reply = NULL;

    g_warning ("%s", text);
    if (type != G_DBUS_MESSAGE_TYPE_SIGNAL)
      reply = error_reply_like (message, VIVARIUM_ERROR_TOO_LARGE, text);
    g_object_unref (message);
    return reply;   /* a signal that big is dropped: it would cost us the bus */
  }
  if (type == G_DBUS_MESSAGE_TYPE_ERROR)
    return rename_error (message);
  return message;
}
