/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_START_SESSION_DIALOG (vivarium_start_session_dialog_get_type ())
G_DECLARE_FINAL_TYPE (VivariumStartSessionDialog, vivarium_start_session_dialog, VIVARIUM, START_SESSION_DIALOG, AdwWindow)

/* @image: the frozen image to preselect, or NULL. Emits "started" (the new
 * Session's object path) and closes once the guest answers. */
VivariumStartSessionDialog *vivarium_start_session_dialog_new (GtkWindow      *parent,
                                                               VivariumClient *client,
                                                               const char     *image);

G_END_DECLS
