/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <adwaita.h>

#include "vivarium-egress-entry.h"

G_BEGIN_DECLS

#define VIVARIUM_TYPE_EGRESS_ROW (vivarium_egress_row_get_type ())
G_DECLARE_FINAL_TYPE (VivariumEgressRow, vivarium_egress_row, VIVARIUM, EGRESS_ROW, AdwActionRow)

GtkWidget *vivarium_egress_row_new (VivariumEgressEntry *entry);

G_END_DECLS
