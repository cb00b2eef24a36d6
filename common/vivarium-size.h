/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Every size the app and vivariumctl show, in one unit system: IEC powers
 * of 1024 (KiB, MiB, GiB), the units quotas and memory are typed in.
 * "1023 bytes", "1.0 KiB", "1.5 MiB"; @exact adds the byte count:
 * "1.5 MiB (1572864 bytes)". */
gchar *vivarium_format_size (guint64  bytes,
                             gboolean exact);

G_END_DECLS
