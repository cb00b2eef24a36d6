/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDaemon"

#include "config.h"

#include <glib-unix.h>
#include <systemd/sd-daemon.h>

#include "vivarium-names.h"
#include "vd-daemon.h"
#include "vd-idle.h"
#include "vd-manager.h"

/* Owns the bus name, tells systemd how it is doing, and leaves the bus when
 * nothing has happened for a while and nothing is running (VdIdle: the
 * manager holds inhibitors for running work, every call resets the clock):
 * the bus activates it again on the next call. */
struct _VdDaemon {
  GObject          parent_instance;
  VdConfig        *config;
  VdAuthority     *authority;
  VdManager       *manager;
  VdIdle          *idle;
  GMainLoop       *loop;
  GDBusConnection *connection;
  guint            owner_id;
  guint            filter_id;
  guint            watchdog_source;
  gboolean         replace;
  gboolean         name_lost;
  gint             exit_status;
};

G_DEFINE_TYPE (VdDaemon, vd_daemon, G_TYPE_OBJECT)

static void
vd_daemon_finalize (GObject *object)
{
  VdDaemon *self = VD_DAEMON (object);

  g_clear_handle_id (&self->watchdog_source, g_source_remove);
  if (self->filter_id != 0)
    g_dbus_connection_remove_filter (self->connection, self->filter_id);
  g_clear_handle_id (&self->owner_id, g_bus_unown_name);
  g_clear_object (&self->manager);
  g_clear_object (&self->idle);
  g_clear_object (&self->authority);
  g_clear_object (&self->config);
  g_clear_object (&self->connection);
  g_clear_pointer (&self->loop, g_main_loop_unref);
  G_OBJECT_CLASS (vd_daemon_parent_class)->finalize (object);
}

static void
vd_daemon_class_init (VdDaemonClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_daemon_finalize;
}

static void
vd_daemon_init (VdDaemon *self)
{
  self->loop = g_main_loop_new (NULL, FALSE);
  self->authority = vd_authority_new ();
}

static void idle_timeout_cb (VdIdle *idle, gpointer user_data);

VdDaemon *
vd_daemon_new (VdConfig *config, gboolean replace)
{
  VdDaemon *self = g_object_new (VD_TYPE_DAEMON, NULL);

  self->config = g_object_ref (config);
  self->replace = replace;
  self->idle = vd_idle_new (vd_config_get_idle_timeout_sec (config) * 1000);
  g_signal_connect (self->idle, "timeout", G_CALLBACK (idle_timeout_cb), self);
  return self;
}

void
vd_daemon_quit (VdDaemon *self)
{
  sd_notify (0, "STOPPING=1");
  g_main_loop_quit (self->loop);
}

static void
idle_timeout_cb (VdIdle *idle, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  g_info ("idle with nothing running; leaving the bus");
  /* Give the name up first so that a caller arriving now queues an
   * activation instead of talking to a daemon on its way out. */
  g_clear_handle_id (&self->owner_id, g_bus_unown_name);
  vd_daemon_quit (self);
}

static gboolean
reset_idle_cb (gpointer user_data)
{
  vd_idle_reset (VD_IDLE (user_data));
  return G_SOURCE_REMOVE;
}

/* Runs in GDBus's worker thread for every message: a call arriving and its
 * reply leaving each restart the idle clock, on the main loop. Refused
 * calls count too: a caller is there. */
static GDBusMessage *
message_filter_cb (GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer user_data)
{
  VdIdle *idle = VD_IDLE (user_data);
  GDBusMessageType type = g_dbus_message_get_message_type (message);

  if ((incoming && type == G_DBUS_MESSAGE_TYPE_METHOD_CALL) ||
      (!incoming && (type == G_DBUS_MESSAGE_TYPE_METHOD_RETURN || type == G_DBUS_MESSAGE_TYPE_ERROR)))
    g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, reset_idle_cb, g_object_ref (idle), g_object_unref);
  return message;
}

static gboolean
watchdog_cb (gpointer user_data)
{
  sd_notify (0, "WATCHDOG=1");
  return G_SOURCE_CONTINUE;
}

static void
start_watchdog (VdDaemon *self)
{
  guint64 usec = 0;

  if (sd_watchdog_enabled (0, &usec) <= 0 || usec == 0)
    return;
  self->watchdog_source = g_timeout_add ((guint) MAX (usec / 2000, 1), watchdog_cb, self);
}

static void
bus_acquired_cb (GDBusConnection *connection, const gchar *name, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);
  g_autoptr(GError) error = NULL;

  self->connection = g_object_ref (connection);
  self->filter_id = g_dbus_connection_add_filter (connection, message_filter_cb, g_object_ref (self->idle),
                                                  g_object_unref);
  self->manager = vd_manager_new (self->config, self->authority, self->idle, connection);
  if (!vd_manager_start (self->manager, &error)) {
    g_critical ("cannot start the manager: %s", error->message);
    self->exit_status = 1;
    vd_daemon_quit (self);
  }
}

static void
name_acquired_cb (GDBusConnection *connection, const gchar *name, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  g_info ("serving %s (version %s)", name, PACKAGE_VERSION);
  sd_notify (0, "READY=1\nSTATUS=Serving " VIVARIUM_DBUS_NAME);
  start_watchdog (self);
  vd_idle_reset (self->idle);
}

static void
name_lost_cb (GDBusConnection *connection, const gchar *name, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  if (connection == NULL)
    g_warning ("cannot connect to the system bus");
  else
    g_warning ("lost (or could not own) the name %s", name);
  self->exit_status = 1;
  vd_daemon_quit (self);
}

static gboolean
signal_cb (gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  g_info ("received a termination signal");
  vd_daemon_quit (self);
  return G_SOURCE_CONTINUE;
}

gint
vd_daemon_run (VdDaemon *self)
{
  GBusNameOwnerFlags flags = G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT;
  guint sigterm = g_unix_signal_add (SIGTERM, signal_cb, self);
  guint sigint = g_unix_signal_add (SIGINT, signal_cb, self);

  if (self->replace)
    flags |= G_BUS_NAME_OWNER_FLAGS_REPLACE;
  self->owner_id = g_bus_own_name (G_BUS_TYPE_SYSTEM, VIVARIUM_DBUS_NAME, flags,
                                   bus_acquired_cb, name_acquired_cb, name_lost_cb,
                                   self, NULL);
  g_main_loop_run (self->loop);
  if (self->manager != NULL)
    vd_manager_shutdown (self->manager);
  g_source_remove (sigterm);
  g_source_remove (sigint);
  return self->exit_status;
}
