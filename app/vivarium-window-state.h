/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

/* What the app remembers across runs: its window's size, whether it was
 * maximized, and the page shown. The project installs no GSettings schema,
 * so it is a small key file, $XDG_STATE_HOME/vivarium/window.ini (by default
 * ~/.local/state/vivarium/window.ini), replaced whole on each save. A
 * missing, unreadable or odd file is the defaults, never an error. */

void vivarium_window_state_restore (GtkWindow    *window,
                                    AdwViewStack *pages);
void vivarium_window_state_save    (GtkWindow    *window,
                                    AdwViewStack *pages);

G_END_DECLS
