/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

/* The hosts the window can show, as a GListModel of VivariumClient: this
 * computer always first, then the hosts the user added, in the order
 * added. The added ones are kept in a key file (by default
 * $XDG_CONFIG_HOME/vivarium/hosts.ini), rewritten atomically on each
 * change; an entry in it that is not a [USER@]HOST is skipped. */
#define VIVARIUM_TYPE_HOST_LIST (vivarium_host_list_get_type ())
G_DECLARE_FINAL_TYPE (VivariumHostList, vivarium_host_list, VIVARIUM, HOST_LIST, GObject)

VivariumHostList *vivarium_host_list_new    (const char        *path);
gboolean          vivarium_host_list_load   (VivariumHostList  *self,
                                             GError           **error);
VivariumClient   *vivarium_host_list_add    (VivariumHostList  *self,
                                             const char        *destination,
                                             GError           **error);
gboolean          vivarium_host_list_remove (VivariumHostList  *self,
                                             VivariumClient    *client,
                                             GError           **error);
VivariumClient   *vivarium_host_list_get_local (VivariumHostList *self);

G_END_DECLS
