/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gtk/gtk.h>
#include "vivarium-host-list.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_HOST_SWITCHER (vivarium_host_switcher_get_type ())
G_DECLARE_FINAL_TYPE (VivariumHostSwitcher, vivarium_host_switcher, VIVARIUM, HOST_SWITCHER, GtkWidget)

/* The header bar's host selector: a button named for the host shown,
 * opening the list of hosts (each with how it stands) and "Add Host…"
 * (the action win.add-host). Emits "selected" (a VivariumClient) when the
 * user picks another host. */
void vivarium_host_switcher_set_hosts (VivariumHostSwitcher *self,
                                       VivariumHostList     *hosts);
void vivarium_host_switcher_select    (VivariumHostSwitcher *self,
                                       VivariumClient       *client);

G_END_DECLS
