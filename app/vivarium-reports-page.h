/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>
#include "vivarium-client.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_REPORTS_PAGE (vivarium_reports_page_get_type ())
G_DECLARE_FINAL_TYPE (VivariumReportsPage, vivarium_reports_page, VIVARIUM, REPORTS_PAGE, AdwBin)

void vivarium_reports_page_set_client (VivariumReportsPage *self,
                                       VivariumClient      *client);

G_END_DECLS
