/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include "vivarium-dbus-generated.h"
#include "vivarium-call.h"

G_BEGIN_DECLS

/* Where the app stands with the daemon; the window shows a status page for
 * every state but CONNECTED. */
typedef enum {
  VIVARIUM_CLIENT_CONNECTING,     /* asking the bus to start the service */
  VIVARIUM_CLIENT_CONNECTED,      /* proxies ready, subscribed to signals */
  VIVARIUM_CLIENT_RESTARTING,     /* the name went away; waking it again */
  VIVARIUM_CLIENT_NOT_INSTALLED,  /* the bus knows no such service */
  VIVARIUM_CLIENT_NOT_RUNNING,    /* activation or the first call failed */
  VIVARIUM_CLIENT_NO_BUS,         /* no system bus at all */
  VIVARIUM_CLIENT_UNREACHABLE,    /* another host: ssh failed or the link was lost */
} VivariumClientState;

#define VIVARIUM_BUS_NAME     "org.vivarium.Vivarium1"
#define VIVARIUM_MANAGER_PATH "/org/vivarium/Vivarium1"

#define VIVARIUM_TYPE_CLIENT (vivarium_client_get_type ())
G_DECLARE_FINAL_TYPE (VivariumClient, vivarium_client, VIVARIUM, CLIENT, GObject)

VivariumClient       *vivarium_client_new              (void);
VivariumClient       *vivarium_client_new_remote       (const char     *destination);
const char           *vivarium_client_get_destination  (VivariumClient *self);
const char           *vivarium_client_get_display_name (VivariumClient *self);
gboolean              vivarium_client_is_remote        (VivariumClient *self);
guint                 vivarium_client_get_retry_delay  (VivariumClient *self);
void                  vivarium_client_ensure_started   (VivariumClient *self);
gboolean              vivarium_client_is_started       (VivariumClient *self);
void                  vivarium_client_start            (VivariumClient *self);
void                  vivarium_client_retry            (VivariumClient *self);
VivariumClientState   vivarium_client_get_state        (VivariumClient *self);
const char           *vivarium_client_get_state_reason (VivariumClient *self);
GDBusConnection      *vivarium_client_get_connection   (VivariumClient *self);
VivariumDBusManager  *vivarium_client_get_manager      (VivariumClient *self);
VivariumDBusGuard    *vivarium_client_get_guard        (VivariumClient *self);

char                 *vivarium_client_describe_error   (const GError *error);
gboolean              vivarium_client_refuse_descriptor (VivariumClient *self,
                                                        GError        **error);

G_END_DECLS
