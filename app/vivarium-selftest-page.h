/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_SELFTEST_PAGE (vivarium_selftest_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumSelftestPage, vivarium_selftest_page, VIVARIUM, SELFTEST_PAGE, AdwBin)

void vivarium_selftest_page_set_client     (VivariumSelftestPage *self,
                                            VivariumClient       *client);
void vivarium_selftest_page_set_permission (VivariumSelftestPage *self,
                                            GPermission          *permission);

G_END_DECLS
