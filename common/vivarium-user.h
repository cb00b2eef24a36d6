/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A uid as a person reads it: "vivarium-s3 (2147000003)" when the
 * system's user database names it, the bare number when it does not. */
gchar *vivarium_format_uid (guint32 uid);

G_END_DECLS
