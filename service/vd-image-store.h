/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-image.h"
#include "vd-job-store.h"
#include "vd-session-pool.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* The images on the bus: the directories under STATE/images/, loaded at
 * start (after the engine's sweep), each one's Image object exported
 * through the VdExportFunc it was handed (so every object is authorized),
 * the names being built, imported or saved (so no two makers race for
 * one), builds as Jobs, and the boot snapshot Freeze takes (handed to each
 * image, with the session pool behind it). Each VdImage answers its own
 * methods; the store hears when one is deleted.
 *
 * signal "image-added" (const gchar *object_path): a new image (not at load)
 * signal "image-removed" (const gchar *object_path) */

#define VD_TYPE_IMAGE_STORE (vd_image_store_get_type ())
G_DECLARE_FINAL_TYPE (VdImageStore, vd_image_store, VD, IMAGE_STORE, GObject)

VdImageStore *vd_image_store_new             (VdConfig      *config,
                                              VdSystemd     *systemd,
                                              VdSessionPool *pool,
                                              VdJobStore    *jobs,
                                              VdExportFunc   export_func,
                                              gpointer       export_data);
/* Loads and exports every image directory; a broken one is skipped. */
void          vd_image_store_load            (VdImageStore  *self);
const gchar **vd_image_store_list_paths      (VdImageStore  *self);
/* What a session may boot: NotFound, NotFrozen or InvalidArgument (a bad
 * name) with a sentence. */
VdImage      *vd_image_store_lookup_bootable (VdImageStore  *self,
                                              const gchar   *name,
                                              GError       **error);
/* A valid name no image has, or is being made with: else Exists. */
gboolean      vd_image_store_check_new_name  (VdImageStore  *self,
                                              const gchar   *name,
                                              GError       **error);
/* Holds @name for a maker until released (check_new_name says Exists). */
void          vd_image_store_reserve         (VdImageStore  *self,
                                              const gchar   *name);
void          vd_image_store_release         (VdImageStore  *self,
                                              const gchar   *name);
/* Exports a loaded image and announces it ("image-added"). */
gboolean      vd_image_store_add             (VdImageStore  *self,
                                              VdImage       *image,
                                              GError       **error);
/* Deletes the image's files (a warning if that fails) and takes it away. */
void          vd_image_store_drop            (VdImageStore  *self,
                                              VdImage       *image);

/* Manager.BuildImage: the Job of a build of @recipe, started. */
VdJob        *vd_image_store_build           (VdImageStore  *self,
                                              const gchar   *recipe,
                                              const gchar   *name,
                                              GError       **error);
/* Manager.ImportImage (@name checked, @fd taken): the new image. */
void          vd_image_store_import_async    (VdImageStore       *self,
                                              const gchar        *name,
                                              gint                fd,
                                              GAsyncReadyCallback callback,
                                              gpointer            user_data);
VdImage      *vd_image_store_import_finish   (VdImageStore  *self,
                                              GAsyncResult  *result,
                                              GError       **error);

G_END_DECLS
