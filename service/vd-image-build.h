/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-systemd.h"
#include "vd-job.h"

G_BEGIN_DECLS

#define VD_TYPE_IMAGE_BUILD (vd_image_build_get_type ())
G_DECLARE_FINAL_TYPE (VdImageBuild, vd_image_build, VD, IMAGE_BUILD, GObject)

gboolean      vd_image_build_is_step     (const gchar *line);
gboolean      vd_image_build_is_epilogue (const gchar *line);
GError       *vd_image_build_failure     (const gchar  *name,
                                          const gchar  *recipe,
                                          const gchar  *builder_line,
                                          const GError *cause);
gchar        *vd_image_build_recipe_path (VdConfig *config, const gchar *recipe);
GStrv         vd_image_build_list_recipes (VdConfig *config);
VdImageBuild *vd_image_build_new         (VdConfig    *config,
                                          VdSystemd   *systemd,
                                          VdJob      *task,
                                          const gchar *recipe,
                                          const gchar *name);
const gchar  *vd_image_build_get_name    (VdImageBuild *self);
void          vd_image_build_run_async   (VdImageBuild       *self,
                                          GAsyncReadyCallback callback,
                                          gpointer            user_data);
gchar        *vd_image_build_run_finish  (VdImageBuild  *self,
                                          GAsyncResult  *result,
                                          GError       **error);

G_END_DECLS
