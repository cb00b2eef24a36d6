/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define VIVARIUM_APP_ID "org.vivarium.Vivarium"

#define VIVARIUM_TYPE_APPLICATION (vivarium_application_get_type ())
G_DECLARE_FINAL_TYPE (VivariumApplication, vivarium_application, VIVARIUM, APPLICATION, AdwApplication)

VivariumApplication *vivarium_application_new (void);

G_END_DECLS
