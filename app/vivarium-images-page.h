/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_IMAGES_PAGE (vivarium_images_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumImagesPage, vivarium_images_page, VIVARIUM, IMAGES_PAGE, AdwBin)

void vivarium_images_page_set_client     (VivariumImagesPage *self,
                                          VivariumClient     *client);
void vivarium_images_page_set_permission (VivariumImagesPage *self,
                                          GPermission        *permission);

G_END_DECLS
