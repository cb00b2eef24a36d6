/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-app"

#include "config.h"
#include "vivarium-client.h"

#include <glib/gi18n.h>

#include "vivarium-remote.h"

/* How the app wakes the daemon: vivariumd is D-Bus-activated and leaves the
 * bus when idle. The client watches the name without auto-start and asks the
 * bus to start the service explicitly (StartServiceByName) when the window
 * opens, on Retry, and a bounded number of times after the name went away
 * (an idle exit or a restart). So a window left open keeps showing live
 * data, and the app never loops on a daemon that cannot start. */
#define MAX_REACTIVATIONS 5
#define REACTIVATE_DELAY_MS 1000

/* Another host is reached over ssh (common/vivarium-remote.h), in a thread,
 * never interactive. When ssh fails or a link is lost, the client tries
 * again by itself after 1, 2, 4 … 30 s, at most MAX_RECONNECTS times in a
 * row; then it waits for Try Again. */
#define MAX_RECONNECTS 8
#define RECONNECT_DELAY_MAX_S 30

struct _VivariumClient {
  GObject              parent_instance;
  VivariumClientState  state;
  char                *reason;
  GDBusConnection     *connection;
  VivariumDBusManager *manager;
  VivariumDBusGuard   *guard;
  GCancellable        *cancellable;
  guint                watch_id;
  guint                retry_id;
  guint                attempts;
  char                *destination;   /* NULL: this computer's system bus */
  gboolean             started;
  guint                reconnect_id;
  guint                reconnects;
  guint                retry_delay;   /* seconds until the next reconnect, or 0 */
};

G_DEFINE_FINAL_TYPE (VivariumClient, vivarium_client, G_TYPE_OBJECT)

enum { SIG_STATE_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void activate_service (VivariumClient *self);

static void
set_state (VivariumClient *self, VivariumClientState state, const char *reason)
{
  self->state = state;
  g_free (self->reason);
  self->reason = g_strdup (reason != NULL ? reason : "");
  g_signal_emit (self, signals[SIG_STATE_CHANGED], 0);
}

static void
drop_proxies (VivariumClient *self)
{
  g_clear_object (&self->manager);
  g_clear_object (&self->guard);
}

static void
guard_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumClient) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusGuard) guard = vivarium_dbus_guard_proxy_new_finish (res, &error);

  if (guard == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      set_state (self, VIVARIUM_CLIENT_NOT_RUNNING, error->message);
    return;
  }
  self->guard = g_steal_pointer (&guard);
  self->attempts = 0;
  set_state (self, VIVARIUM_CLIENT_CONNECTED, NULL);
}

static void
manager_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumClient) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = vivarium_dbus_manager_proxy_new_finish (res, &error);

  if (manager == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      set_state (self, VIVARIUM_CLIENT_NOT_RUNNING, error->message);
    return;
  }
  self->manager = g_steal_pointer (&manager);
  /* Long calls (a build's start, the self-test) set their own timeouts. */
  vivarium_dbus_guard_proxy_new (self->connection, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                 VIVARIUM_BUS_NAME, VIVARIUM_MANAGER_PATH, self->cancellable,
                                 guard_ready_cb, g_object_ref (self));
}

/* The proxies' GetAll is our first authorized call: from then on the daemon
 * sends this peer its signals (see the XML's header). */
static void
name_appeared_cb (GDBusConnection *connection, const char *name, const char *owner, gpointer user_data)
{
  VivariumClient *self = user_data;

  g_clear_handle_id (&self->retry_id, g_source_remove);
  drop_proxies (self);
  vivarium_dbus_manager_proxy_new (connection, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START,
                                   VIVARIUM_BUS_NAME, VIVARIUM_MANAGER_PATH, self->cancellable,
                                   manager_ready_cb, g_object_ref (self));
}

static gboolean
reactivate_cb (gpointer user_data)
{
  VivariumClient *self = user_data;

  self->retry_id = 0;
  activate_service (self);
  return G_SOURCE_REMOVE;
}

static void
name_vanished_cb (GDBusConnection *connection, const char *name, gpointer user_data)
{
  VivariumClient *self = user_data;
  gboolean was_connected = self->state == VIVARIUM_CLIENT_CONNECTED;

  drop_proxies (self);
  /* A closed link is connection_closed_cb's: there is no bus to ask. */
  if (g_dbus_connection_is_closed (connection))
    return;
  if (!was_connected || self->retry_id != 0)
    return;
  if (self->attempts >= MAX_REACTIVATIONS) {
    set_state (self, VIVARIUM_CLIENT_NOT_RUNNING, _("The service stopped several times in a row."));
    return;
  }
  set_state (self, VIVARIUM_CLIENT_RESTARTING, NULL);
  self->retry_id = g_timeout_add (REACTIVATE_DELAY_MS, reactivate_cb, self);
}

static void
start_service_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumClient) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  g_autofree char *remote = NULL;

  if (reply != NULL || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return; /* the name watch reports the owner */
  remote = g_dbus_error_get_remote_error (error);
  g_dbus_error_strip_remote_error (error);
  if (g_strcmp0 (remote, "org.freedesktop.DBus.Error.ServiceUnknown") == 0)
    set_state (self, VIVARIUM_CLIENT_NOT_INSTALLED, error->message);
  else
    set_state (self, VIVARIUM_CLIENT_NOT_RUNNING, error->message);
}

static void
activate_service (VivariumClient *self)
{
  self->attempts++;
  if (self->state != VIVARIUM_CLIENT_RESTARTING)
    set_state (self, VIVARIUM_CLIENT_CONNECTING, NULL);
  g_dbus_connection_call (self->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                          "org.freedesktop.DBus", "StartServiceByName",
                          g_variant_new ("(su)", VIVARIUM_BUS_NAME, 0), G_VARIANT_TYPE ("(u)"),
                          G_DBUS_CALL_FLAGS_NONE, 30000, self->cancellable,
                          start_service_cb, g_object_ref (self));
}

static void
watch_and_activate (VivariumClient *self)
{
  self->watch_id = g_bus_watch_name_on_connection (self->connection, VIVARIUM_BUS_NAME,
                                                   G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                   name_appeared_cb, name_vanished_cb, self, NULL);
  activate_service (self);
}

static void
bus_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VivariumClient) self = user_data;
  g_autoptr(GError) error = NULL;

  self->connection = g_bus_get_finish (res, &error);
  if (self->connection == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      set_state (self, VIVARIUM_CLIENT_NO_BUS, error->message);
    return;
  }
  watch_and_activate (self);
}

/* --- another host ------------------------------------------------------- */

static void connect_remote (VivariumClient *self);

static gboolean
reconnect_cb (gpointer user_data)
{
  VivariumClient *self = user_data;

  self->reconnect_id = 0;
  self->retry_delay = 0;
  connect_remote (self);
  return G_SOURCE_REMOVE;
}

/* Says why, and tries again later while the bound allows. */
static void
set_unreachable (VivariumClient *self, const char *reason)
{
  g_clear_handle_id (&self->reconnect_id, g_source_remove);
  self->retry_delay = 0;
  if (self->reconnects < MAX_RECONNECTS) {
    self->retry_delay = MIN (1u << self->reconnects, RECONNECT_DELAY_MAX_S);
    self->reconnects++;
    self->reconnect_id = g_timeout_add_seconds (self->retry_delay, reconnect_cb, self);
  }
  set_state (self, VIVARIUM_CLIENT_UNREACHABLE, reason);
}

static void
drop_connection (VivariumClient *self)
{
  g_clear_handle_id (&self->watch_id, g_bus_unwatch_name);
  g_clear_handle_id (&self->retry_id, g_source_remove);
  drop_proxies (self);
  /* The system bus is shared with the rest of the process: never closed. */
  if (self->connection != NULL && self->destination != NULL) {
    g_signal_handlers_disconnect_by_data (self->connection, self);
    g_dbus_connection_close (self->connection, NULL, NULL, NULL);
  }
  g_clear_object (&self->connection);
}

static void
connection_closed_cb (GDBusConnection *connection, gboolean remote_peer_vanished, GError *error,
                      gpointer user_data)
{
  VivariumClient *self = user_data;
  g_autofree char *message = vivarium_remote_get_ssh_message (connection);
  g_autofree char *reason = NULL;

  /* ssh's own words if it said any; GDBus's about its stream say less. */
  reason = g_strdup_printf (_("The connection to %s was lost: %s"), self->destination,
                            message != NULL ? message : _("ssh ended"));
  drop_connection (self);
  set_unreachable (self, reason);
}

static void
remote_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GError *error = NULL;
  GDBusConnection *connection = vivarium_remote_connect_quiet (task_data, cancellable, &error);

  if (connection == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, connection, g_object_unref);
}

static void
remote_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VivariumClient *self = VIVARIUM_CLIENT (source);
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection = g_task_propagate_pointer (G_TASK (res), &error);

  if (connection == NULL) {
    if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      set_unreachable (self, error->message);
    return;
  }
  self->connection = connection;
  self->reconnects = 0;
  /* Before the name watch's own handler: a lost link is ours to report. */
  g_signal_connect (connection, "closed", G_CALLBACK (connection_closed_cb), self);
  watch_and_activate (self);
}

static void
connect_remote (VivariumClient *self)
{
  g_autoptr(GTask) task = g_task_new (self, self->cancellable, remote_ready_cb, NULL);

  drop_connection (self);
  set_state (self, VIVARIUM_CLIENT_CONNECTING, NULL);
  g_task_set_task_data (task, g_strdup (self->destination), g_free);
  g_task_run_in_thread (task, remote_thread);
}

void
vivarium_client_start (VivariumClient *self)
{
  g_return_if_fail (VIVARIUM_IS_CLIENT (self));
  g_return_if_fail (self->connection == NULL);

  self->started = TRUE;
  if (self->destination != NULL)
    connect_remote (self);
  else
    g_bus_get (G_BUS_TYPE_SYSTEM, self->cancellable, bus_ready_cb, g_object_ref (self));
}

/* A host's client connects when it is first shown, not when the list is read. */
void
vivarium_client_ensure_started (VivariumClient *self)
{
  g_return_if_fail (VIVARIUM_IS_CLIENT (self));

  if (!self->started)
    vivarium_client_start (self);
}

gboolean
vivarium_client_is_started (VivariumClient *self)
{
  return self->started;
}

void
vivarium_client_retry (VivariumClient *self)
{
  g_return_if_fail (VIVARIUM_IS_CLIENT (self));

  self->attempts = 0;
  self->reconnects = 0;
  if (self->destination != NULL && self->connection == NULL) {
    g_clear_handle_id (&self->reconnect_id, g_source_remove);
    self->retry_delay = 0;
    connect_remote (self);
    return;
  }
  if (self->connection == NULL) {
    set_state (self, VIVARIUM_CLIENT_CONNECTING, NULL);
    vivarium_client_start (self);
    return;
  }
  activate_service (self);
}

const char *
vivarium_client_get_destination (VivariumClient *self)
{
  return self->destination;
}

gboolean
vivarium_client_is_remote (VivariumClient *self)
{
  return self->destination != NULL;
}

/* What the host list and the window's title call this host. */
const char *
vivarium_client_get_display_name (VivariumClient *self)
{
  return self->destination != NULL ? self->destination : _("This Computer");
}

/* Seconds until the client tries again by itself, or 0 when it waits for
 * Try Again (or is not unreachable). */
guint
vivarium_client_get_retry_delay (VivariumClient *self)
{
  return self->retry_delay;
}

/* Verbs with an "h" argument (ImportImage, AddSecret, AddSshKey) hand the
 * daemon an open file: ssh's pipe carries bytes, not descriptors. */
gboolean
vivarium_client_refuse_descriptor (VivariumClient *self, GError **error)
{
  if (self->destination == NULL)
    return FALSE;
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
               _("This works only on this computer: a descriptor cannot travel over SSH to %s."),
               self->destination);
  return TRUE;
}

VivariumClientState
vivarium_client_get_state (VivariumClient *self)
{
  return self->state;
}

const char *
vivarium_client_get_state_reason (VivariumClient *self)
{
  return self->reason != NULL ? self->reason : "";
}

GDBusConnection *
vivarium_client_get_connection (VivariumClient *self)
{
  return self->connection;
}

VivariumDBusManager *
vivarium_client_get_manager (VivariumClient *self)
{
  return self->manager;
}

VivariumDBusGuard *
vivarium_client_get_guard (VivariumClient *self)
{
  return self->guard;
}

/* Short sentences for our error names, like gnome-software's; the daemon's
 * own sentence follows, so the person learns what and why. */
static const struct {
  const char *name;
  const char *sentence;
} error_sentences[] = {
  { "org.vivarium.Vivarium1.Error.NotAuthorized", N_("You are not allowed to do this.") },
  { "org.vivarium.Vivarium1.Error.InvalidArgument", N_("The request was not valid.") },
  { "org.vivarium.Vivarium1.Error.NotFound", N_("It no longer exists.") },
  { "org.vivarium.Vivarium1.Error.Exists", N_("That name is already taken.") },
  { "org.vivarium.Vivarium1.Error.Busy", N_("The service is busy with this already.") },
  { "org.vivarium.Vivarium1.Error.NotFrozen", N_("The image must be frozen first.") },
  { "org.vivarium.Vivarium1.Error.DigestMismatch", N_("The image changed since it was frozen.") },
  { "org.vivarium.Vivarium1.Error.BadState", N_("Not possible in the current state.") },
  { "org.vivarium.Vivarium1.Error.TooLarge", N_("The answer would be too large.") },
  { "org.vivarium.Vivarium1.Error.TimedOut", N_("It took too long.") },
  { "org.vivarium.Vivarium1.Error.Guest", N_("The guest failed to do it.") },
  { "org.vivarium.Vivarium1.Error.GuardUnavailable", N_("The network guard is not available.") },
  { "org.vivarium.Vivarium1.Error.NotSupported", N_("This is not supported here.") },
  { "org.vivarium.Vivarium1.Error.Cancelled", N_("It was cancelled.") },
  { "org.vivarium.Vivarium1.Error.NoSpace", N_("There is not enough disk space.") },
  { "org.freedesktop.DBus.Error.ServiceUnknown", N_("The Vivarium service is not available.") },
  { "org.freedesktop.DBus.Error.NoReply", N_("The Vivarium service did not answer in time.") },
};

char *
vivarium_client_describe_error (const GError *error)
{
  g_autofree char *remote = g_dbus_error_get_remote_error (error);
  g_autofree char *sentence = vivarium_call_error_sentence (error);

  for (gsize i = 0; remote != NULL && i < G_N_ELEMENTS (error_sentences); i++) {
    if (g_strcmp0 (remote, error_sentences[i].name) == 0)
      return g_strdup_printf ("%s %s", _(error_sentences[i].sentence), sentence);
  }
  return g_steal_pointer (&sentence);
}

static void
vivarium_client_dispose (GObject *object)
{
  VivariumClient *self = VIVARIUM_CLIENT (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_handle_id (&self->reconnect_id, g_source_remove);
  drop_connection (self);
  g_clear_object (&self->cancellable);
  G_OBJECT_CLASS (vivarium_client_parent_class)->dispose (object);
}

static void
vivarium_client_finalize (GObject *object)
{
  g_free (VIVARIUM_CLIENT (object)->reason);
  g_free (VIVARIUM_CLIENT (object)->destination);
  G_OBJECT_CLASS (vivarium_client_parent_class)->finalize (object);
}

static void
vivarium_client_class_init (VivariumClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vivarium_client_dispose;
  object_class->finalize = vivarium_client_finalize;
  signals[SIG_STATE_CHANGED] = g_signal_new ("state-changed", G_TYPE_FROM_CLASS (klass),
                                             G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                             G_TYPE_NONE, 0);
}

static void
vivarium_client_init (VivariumClient *self)
{
  self->cancellable = g_cancellable_new ();
  self->state = VIVARIUM_CLIENT_CONNECTING;
}

VivariumClient *
vivarium_client_new (void)
{
  return g_object_new (VIVARIUM_TYPE_CLIENT, NULL);
}

/* @destination: "[USER@]HOST" (vivarium_remote_check_destination). */
VivariumClient *
vivarium_client_new_remote (const char *destination)
{
  VivariumClient *self = g_object_new (VIVARIUM_TYPE_CLIENT, NULL);

  self->destination = g_strdup (destination);
  return self;
}
