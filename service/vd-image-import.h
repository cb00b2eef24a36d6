/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"

G_BEGIN_DECLS

#define VD_TYPE_IMAGE_IMPORT (vd_image_import_get_type ())
G_DECLARE_FINAL_TYPE (VdImageImport, vd_image_import, VD, IMAGE_IMPORT, GObject)

gint           vd_image_import_take_fd     (GDBusMethodInvocation *invocation,
                                            GVariant              *handle,
                                            GError               **error);
VdImageImport *vd_image_import_new         (VdConfig    *config,
                                            const gchar *name,
                                            gint         fd);
const gchar   *vd_image_import_get_name    (VdImageImport *self);
void           vd_image_import_run_async   (VdImageImport      *self,
                                            GAsyncReadyCallback callback,
                                            gpointer            user_data);
gchar         *vd_image_import_run_finish  (VdImageImport  *self,
                                            GAsyncResult   *result,
                                            GError        **error);

G_END_DECLS
