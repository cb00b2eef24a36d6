/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_PROJECTS_PAGE (vivarium_projects_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumProjectsPage, vivarium_projects_page, VIVARIUM, PROJECTS_PAGE, AdwBin)

void vivarium_projects_page_set_client     (VivariumProjectsPage *self,
                                            VivariumClient       *client);
void vivarium_projects_page_set_permission (VivariumProjectsPage *self,
                                            GPermission          *permission);

G_END_DECLS
