/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-remote.h"
#include "vivarium-mcp-daemon.h"

struct _VmcpDaemon {
  gchar           *host;   /* NULL: the local system bus */
  GDBusConnection *bus;
};

/* A proxy learns the daemon's unique name when it is made and calls that
 * name; the daemon exits when idle, so proxies are made per tool call and
 * never kept. */
#define PROXY_FLAGS (G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS | \
                     G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START_AT_CONSTRUCTION)

VmcpDaemon *
vmcp_daemon_new (const gchar *host)
{
  VmcpDaemon *self = g_new0 (VmcpDaemon, 1);

  /* Registers the daemon's error names, so that they map to VIVARIUM_ERROR. */
  (void) vivarium_call_flags (FALSE);
  self->host = g_strdup (host);
  return self;
}

void
vmcp_daemon_free (VmcpDaemon *self)
{
  if (self == NULL)
    return;
  g_clear_object (&self->bus);
  g_free (self->host);
  g_free (self);
}

static GDBusConnection *
bus (VmcpDaemon *self, GError **error)
{
  if (self->bus != NULL && g_dbus_connection_is_closed (self->bus))
    g_clear_object (&self->bus);
  if (self->bus == NULL) {
    /* Never interactive over SSH either: no one is there to type. */
    if (self->host != NULL)
      self->bus = vivarium_remote_connect_sync (self->host, FALSE, NULL, error);
    else
      self->bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, error);
    if (self->bus != NULL)
      g_dbus_connection_set_exit_on_close (self->bus, FALSE);
  }
  return self->bus;
}

VivariumDBusManager *
vmcp_daemon_manager (VmcpDaemon *self, GError **error)
{
  GDBusConnection *conn = bus (self, error);

  if (conn == NULL)
    return NULL;
  return vivarium_dbus_manager_proxy_new_sync (conn, PROXY_FLAGS, VIVARIUM_DBUS_NAME, VIVARIUM_DBUS_PATH, NULL,
                                               error);
}

VivariumDBusTask *
vmcp_daemon_task (VmcpDaemon *self, const gchar *path, GError **error)
{
  GDBusConnection *conn = bus (self, error);

  if (conn == NULL)
    return NULL;
  return vivarium_dbus_task_proxy_new_sync (conn, PROXY_FLAGS, VIVARIUM_DBUS_NAME, path, NULL, error);
}

VivariumDBusReport *
vmcp_daemon_report (VmcpDaemon *self, const gchar *path, GError **error)
{
  GDBusConnection *conn = bus (self, error);

  if (conn == NULL)
    return NULL;
  return vivarium_dbus_report_proxy_new_sync (conn, PROXY_FLAGS, VIVARIUM_DBUS_NAME, path, NULL, error);
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
  return vivarium_call_error_sentence (error);
}
