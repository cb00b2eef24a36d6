/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define VIVARIUM_TYPE_WINDOW (vivarium_window_get_type ())
G_DECLARE_FINAL_TYPE (VivariumWindow, vivarium_window, VIVARIUM, WINDOW, AdwApplicationWindow)

VivariumWindow *vivarium_window_new        (AdwApplication *app);
void            vivarium_window_save_state (VivariumWindow *self);

G_END_DECLS
