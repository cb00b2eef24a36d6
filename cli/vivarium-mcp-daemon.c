/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-mcp-daemon.h"

struct _VmcpDaemon {
  GDBusConnection *bus;
};

VmcpDaemon *
vmcp_daemon_new (void)
{
  /* Registers the daemon's error names, so that they map to VIVARIUM_ERROR. */
  (void) vivarium_error_quark ();
  return g_new0 (VmcpDaemon, 1);
}

void
vmcp_daemon_free (VmcpDaemon *self)
{
  if (self == NULL)
    return;
  g_clear_object (&self->bus);
  g_free (self);
}

static GDBusConnection *
bus (VmcpDaemon *self, GError **error)
{
  if (self->bus != NULL && g_dbus_connection_is_closed (self->bus))
    g_clear_object (&self->bus);
  if (self->bus == NULL) {
    self->bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, error);
    if (self->bus != NULL)
      g_dbus_connection_set_exit_on_close (self->bus, FALSE);
  }
  return self->bus;
}

GVariant *
vmcp_daemon_call (VmcpDaemon *self, const gchar *path, const gchar *interface, const gchar *method,
                  GVariant *parameters, const GVariantType *reply_type, gint timeout_msec,
                  GError **error)
{
  g_autoptr(GVariant) params = parameters != NULL ? g_variant_ref_sink (parameters) : NULL;
  g_autofree gchar *iface = g_strconcat (VIVARIUM_DBUS_IFACE_PREFIX ".", interface, NULL);
  GDBusConnection *conn = bus (self, error);

  if (conn == NULL)
    return NULL;
  return g_dbus_connection_call_sync (conn, VIVARIUM_DBUS_NAME, path, iface, method, params,
                                      reply_type, G_DBUS_CALL_FLAGS_NONE, timeout_msec, NULL, error);
}

GVariant *
vmcp_daemon_get (VmcpDaemon *self, const gchar *path, const gchar *interface, const gchar *property,
                 const GVariantType *type, GError **error)
{
  g_autofree gchar *iface = g_strconcat (VIVARIUM_DBUS_IFACE_PREFIX ".", interface, NULL);
  g_autoptr(GVariant) ret = NULL;
  g_autoptr(GVariant) value = NULL;
  GDBusConnection *conn = bus (self, error);

  if (conn == NULL)
    return NULL;
  ret = g_dbus_connection_call_sync (conn, VIVARIUM_DBUS_NAME, path, "org.freedesktop.DBus.Properties",
                                     "Get", g_variant_new ("(ss)", iface, property),
                                     G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NONE, 30000, NULL, error);
  if (ret == NULL)
    return NULL;
  g_variant_get (ret, "(v)", &value);
  if (!g_variant_is_of_type (value, type)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 "The daemon's %s.%s is of type %s, not %s", interface, property,
                 g_variant_get_type_string (value), g_variant_type_peek_string (type));
    return NULL;
  }
  return g_steal_pointer (&value);
}

gchar *
vmcp_daemon_get_string (VmcpDaemon *self, const gchar *path, const gchar *interface,
                        const gchar *property, GError **error)
{
  g_autoptr(GVariant) v = vmcp_daemon_get (self, path, interface, property, G_VARIANT_TYPE_STRING, error);

  return v != NULL ? g_variant_dup_string (v, NULL) : NULL;
}

gchar *
vmcp_error_name (const GError *error)
{
  const gchar *name;

  if (g_dbus_error_is_remote_error (error))
    return g_dbus_error_get_remote_error (error);
  if (error->domain == VIVARIUM_ERROR &&
      (name = vivarium_error_code_to_name ((VivariumError) error->code)) != NULL)
    return g_strdup (name);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
    return g_strdup (vivarium_error_code_to_name (VIVARIUM_ERROR_TIMED_OUT));
  /* The bus is not there, the connection broke: the daemon cannot be asked. */
  return g_strdup (vivarium_error_code_to_name (VIVARIUM_ERROR_FAILED));
}

gchar *
vmcp_error_message (const GError *error)
{
  g_autoptr(GError) copy = g_error_copy (error);

  g_dbus_error_strip_remote_error (copy);
  return g_strdup (copy->message);
}
