/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDaemon"

#include "config.h"

#include <glib-unix.h>
#include <systemd/sd-daemon.h>

#include "vivarium-names.h"
#include "vd-daemon.h"
#include "vd-idle.h"
#include "vd-manager.h"
#include "vd-memory.h"

/* Owns the bus name, tells systemd how it is doing, and leaves the bus when
 * nothing has happened for a while and nothing is running (VdIdle: the
 * manager holds inhibitors for running work, every call resets the clock):
 * the bus activates it again on the next call.
 *
 * Losing the bus connection is not a reason to stop: the sessions run in
 * their own units and are bound to this process (BindsTo=), so its exit
 * would take every caller's machines down because of one disconnect. The
 * daemon reconnects instead, with a bounded backoff, and hands the new
 * connection down through vd_manager_set_connection(). It still exits when
 * another instance owns the name (a real replacement).
 *
 * The daemon's connection is its own, not GDBus's shared system bus
 * singleton: g_bus_get() hands out the closed singleton for as long as
 * anyone still holds it (a Task.Wait that has not timed out, a guest
 * command still running for a caller that is gone), so a reconnect through
 * it waited on every such holder. A private connection is made new on
 * each attempt; whatever still holds the old one holds a closed connection
 * until it lets go, and blocks nothing. The singleton is left to libpolkit
 * (VdAuthority), which nothing of ours holds past a check. */

#define RECONNECT_FIRST_MS   100
#define RECONNECT_MAX_MS     5000
#define RECONNECT_ATTEMPTS   60    /* about four minutes at the cap */

struct _VdDaemon {
  GObject          parent_instance;
  VdConfig        *config;
  VdAuthority     *authority;
  VdManager       *manager;
  VdIdle          *idle;
  VdMemory        *memory;
  GMainLoop       *loop;
  GDBusConnection *connection;
  guint            owner_id;
  guint            filter_id;
  guint            memory_filter_id;
  gulong           closed_id;
  guint            watchdog_source;
  guint            reconnect_source;
  guint            reconnect_attempt;
  guint            reconnect_inhibit;   /* VdIdle token while off the bus */
  gboolean         replace;
  gboolean         ready;               /* READY=1 sent */
  gint             exit_status;
};

G_DEFINE_TYPE (VdDaemon, vd_daemon, G_TYPE_OBJECT)

static void drop_connection (VdDaemon *self);

static void
vd_daemon_finalize (GObject *object)
{
  VdDaemon *self = VD_DAEMON (object);

  g_clear_handle_id (&self->watchdog_source, g_source_remove);
  g_clear_handle_id (&self->reconnect_source, g_source_remove);
  drop_connection (self);
  g_clear_object (&self->manager);
  g_clear_object (&self->idle);
  g_clear_object (&self->memory);
  g_clear_object (&self->authority);
  g_clear_object (&self->config);
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
  self->memory = vd_memory_new ();
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
fail (VdDaemon *self)
{
  self->exit_status = 1;
  vd_daemon_quit (self);
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

/* Runs in GDBus's worker thread for every message, both ways: notes its
 * size only, so that the memory a big one took is given back after it
 * (VdMemory trims on the main loop; nothing here blocks this thread). */
static GDBusMessage *
memory_filter_cb (GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer user_data)
{
  GVariant *body = g_dbus_message_get_body (message);

  if (body != NULL)
    vd_memory_note (VD_MEMORY (user_data), g_variant_get_size (body));
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

/* --- the connection ----------------------------------------------------- */

static void closed_cb (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error,
                       gpointer user_data);
static void name_acquired_cb (GDBusConnection *connection, const gchar *name, gpointer user_data);
static void name_lost_cb (GDBusConnection *connection, const gchar *name, gpointer user_data);

/* Lets go of everything the daemon itself holds on the connection. */
static void
drop_connection (VdDaemon *self)
{
  g_clear_handle_id (&self->owner_id, g_bus_unown_name);
  if (self->connection == NULL)
    return;
  if (self->filter_id != 0)
    g_dbus_connection_remove_filter (self->connection, self->filter_id);
  if (self->memory_filter_id != 0)
    g_dbus_connection_remove_filter (self->connection, self->memory_filter_id);
  g_clear_signal_handler (&self->closed_id, self->connection);
  self->filter_id = 0;
  self->memory_filter_id = 0;
  g_clear_object (&self->connection);
}

/* GDBus would raise SIGTERM when the bus goes away (exit-on-close, the
 * default of the shared system bus connection); we reconnect instead. */
static void
take_connection (VdDaemon *self, GDBusConnection *connection)
{
  self->connection = g_object_ref (connection);
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  self->closed_id = g_signal_connect (connection, "closed", G_CALLBACK (closed_cb), self);
  self->filter_id = g_dbus_connection_add_filter (connection, message_filter_cb, g_object_ref (self->idle),
                                                  g_object_unref);
  self->memory_filter_id = g_dbus_connection_add_filter (connection, memory_filter_cb, g_object_ref (self->memory),
                                                         g_object_unref);
}

/* Replacing a running instance is asked for at start only; on a
 * reconnect a name owned by someone else means we were replaced. */
static void
own_name (VdDaemon *self, gboolean replace)
{
  GBusNameOwnerFlags flags = G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT;

  if (replace)
    flags |= G_BUS_NAME_OWNER_FLAGS_REPLACE;
  self->owner_id = g_bus_own_name_on_connection (self->connection, VIVARIUM_DBUS_NAME, flags,
                                                 name_acquired_cb, name_lost_cb, self, NULL);
}

static void schedule_reconnect (VdDaemon *self);

static void
reconnected (VdDaemon *self, GDBusConnection *connection)
{
  g_autoptr(GError) error = NULL;

  take_connection (self, connection);
  if (!vd_manager_set_connection (self->manager, connection, &error)) {
    g_warning ("cannot serve our objects on the new connection: %s", error->message);
    drop_connection (self);
    vd_manager_set_connection (self->manager, NULL, NULL);
    schedule_reconnect (self);
    return;
  }
  g_message ("connected to the system bus again as %s; asking for %s",
          g_dbus_connection_get_unique_name (connection), VIVARIUM_DBUS_NAME);
  own_name (self, FALSE);
}

/* A new connection of our own to the system bus, as a message bus client
 * (Hello is sent before @callback runs); FALSE when there is no address. */
static gboolean
connect_bus (VdDaemon *self, GAsyncReadyCallback callback, GError **error)
{
  g_autofree gchar *address = g_dbus_address_get_for_bus_sync (G_BUS_TYPE_SYSTEM, NULL, error);

  if (address == NULL)
    return FALSE;
  g_dbus_connection_new_for_address (address,
                                     G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                     NULL, NULL, callback, g_object_ref (self));
  return TRUE;
}

static void
reconnect_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusConnection) connection = g_dbus_connection_new_for_address_finish (res, &error);

  if (error != NULL) {
    g_message ("reconnect attempt %u failed: %s", self->reconnect_attempt, error->message);
    schedule_reconnect (self);
    g_object_unref (self);
    return;
  }
  reconnected (self, connection);
  g_object_unref (self);
}

static gboolean
reconnect_cb (gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);
  g_autoptr(GError) error = NULL;

  self->reconnect_source = 0;
  self->reconnect_attempt++;
  if (!connect_bus (self, reconnect_ready_cb, &error)) {
    g_message ("reconnect attempt %u failed: %s", self->reconnect_attempt, error->message);
    schedule_reconnect (self);
  }
  return G_SOURCE_REMOVE;
}

static void
schedule_reconnect (VdDaemon *self)
{
  guint delay = RECONNECT_FIRST_MS;
  g_autofree gchar *status = NULL;

  if (self->reconnect_attempt >= RECONNECT_ATTEMPTS) {
    g_critical ("could not get back onto the system bus after %u attempts; exiting", self->reconnect_attempt);
    fail (self);
    return;
  }
  for (guint i = 0; i < self->reconnect_attempt && delay < RECONNECT_MAX_MS; i++)
    delay *= 2;
  delay = MIN (delay, RECONNECT_MAX_MS);
  status = g_strdup_printf ("STATUS=Lost the system bus; reconnecting (attempt %u in %u ms)",
                            self->reconnect_attempt + 1, delay);
  sd_notify (0, status);
  self->reconnect_source = g_timeout_add (delay, reconnect_cb, self);
}

/* The bus disconnected us (a restart, a message over its limits, a
 * policy...): sessions keep running in their units; everything that
 * belonged to the old connection is let go, so that GDBus can make a new
 * one, and the daemon stays on until it is back. */
static void
closed_cb (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  g_warning ("lost the system bus connection (%s); sessions keep running, reconnecting",
             error != NULL ? error->message : "closed");
  drop_connection (self);
  if (self->manager != NULL)
    vd_manager_set_connection (self->manager, NULL, NULL);
  vd_authority_forget_bus (self->authority);
  if (self->reconnect_inhibit == 0)
    self->reconnect_inhibit = vd_idle_inhibit (self->idle, "reconnecting to the system bus");
  self->reconnect_attempt = 0;
  schedule_reconnect (self);
}

/* --- the name ------------------------------------------------------------ */

static void
name_acquired_cb (GDBusConnection *connection, const gchar *name, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  if (self->ready) {
    g_message ("serving %s again", name);
    sd_notify (0, "STATUS=Serving " VIVARIUM_DBUS_NAME " (reconnected)");
  } else {
    g_info ("serving %s (version %s)", name, PACKAGE_VERSION);
    sd_notify (0, "READY=1\nSTATUS=Serving " VIVARIUM_DBUS_NAME);
    start_watchdog (self);
    self->ready = TRUE;
  }
  if (self->reconnect_inhibit != 0)
    vd_idle_uninhibit (self->idle, self->reconnect_inhibit);
  self->reconnect_inhibit = 0;
  vd_idle_reset (self->idle);
}

/* A closed connection loses the name too; closed_cb takes care of that.
 * Otherwise another instance has it: we were replaced, and go. */
static void
name_lost_cb (GDBusConnection *connection, const gchar *name, gpointer user_data)
{
  VdDaemon *self = VD_DAEMON (user_data);

  if (connection != NULL && g_dbus_connection_is_closed (connection))
    return;
  g_warning ("lost (or could not own) the name %s: another instance has it", name);
  fail (self);
}

/* --- start ----------------------------------------------------------------- */

static void
first_connection_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdDaemon) self = VD_DAEMON (user_data);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDBusConnection) connection = g_dbus_connection_new_for_address_finish (res, &error);

  if (connection == NULL) {
    g_warning ("cannot connect to the system bus: %s", error->message);
    fail (self);
    return;
  }
  take_connection (self, connection);
  self->manager = vd_manager_new (self->config, self->authority, self->idle, connection);
  if (!vd_manager_start (self->manager, &error)) {
    g_critical ("cannot start the manager: %s", error->message);
    fail (self);
    return;
  }
  own_name (self, self->replace);
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
  guint sigterm = g_unix_signal_add (SIGTERM, signal_cb, self);
  guint sigint = g_unix_signal_add (SIGINT, signal_cb, self);

  g_autoptr(GError) error = NULL;

  if (connect_bus (self, first_connection_cb, &error)) {
    g_main_loop_run (self->loop);
  } else {
    g_warning ("cannot connect to the system bus: %s", error->message);
    self->exit_status = 1;
  }
  if (self->manager != NULL)
    vd_manager_shutdown (self->manager);
  /* A private connection is not flushed at exit as the singleton is: the
   * last replies and the name's release must still leave. */
  if (self->connection != NULL)
    g_dbus_connection_flush_sync (self->connection, NULL, NULL);
  g_source_remove (sigterm);
  g_source_remove (sigint);
  return self->exit_status;
}
