/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_TASKS_PAGE (vivarium_tasks_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumTasksPage, vivarium_tasks_page, VIVARIUM, TASKS_PAGE, AdwBin)

void vivarium_tasks_page_set_client     (VivariumTasksPage *self,
                                         VivariumClient    *client);
void vivarium_tasks_page_set_permission (VivariumTasksPage *self,
                                         GPermission       *permission);
void vivarium_tasks_page_show_task      (VivariumTasksPage *self,
                                         const char        *object_path);

G_END_DECLS
