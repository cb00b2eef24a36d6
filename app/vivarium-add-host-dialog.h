/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-host-list.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_ADD_HOST_DIALOG (vivarium_add_host_dialog_get_type ())
G_DECLARE_FINAL_TYPE (VivariumAddHostDialog, vivarium_add_host_dialog, VIVARIUM, ADD_HOST_DIALOG, AdwWindow)

/* Asks for a user name (optional) and a host name, adds "[USER@]HOST" to
 * @hosts, emits "added" (the host's VivariumClient) and closes; a
 * destination ssh would not take is refused in the dialog, saying why. */
VivariumAddHostDialog *vivarium_add_host_dialog_new (GtkWindow        *parent,
                                                     VivariumHostList *hosts);

G_END_DECLS
