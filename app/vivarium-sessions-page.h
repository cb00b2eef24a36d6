/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_SESSIONS_PAGE (vivarium_sessions_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumSessionsPage, vivarium_sessions_page, VIVARIUM, SESSIONS_PAGE, AdwBin)

void vivarium_sessions_page_set_client     (VivariumSessionsPage *self,
                                            VivariumClient       *client);
void vivarium_sessions_page_set_permission (VivariumSessionsPage *self,
                                            GPermission          *permission);

G_END_DECLS
