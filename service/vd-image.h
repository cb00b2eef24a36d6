/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* One image directory and its Image object, whose methods (Freeze, Verify,
 * Delete) it answers itself.
 * signal "deleted": Delete removed the files; the object is to leave the bus. */

#define VD_TYPE_IMAGE (vd_image_get_type ())
G_DECLARE_FINAL_TYPE (VdImage, vd_image, VD, IMAGE, GObject)

/* How Freeze takes a boot snapshot: boot the unfrozen image once and save
 * the guest into its directory. The session pool does it; the image store
 * hands it down, so that an image never learns of sessions. */
typedef void     (*VdImageSnapshotFunc)       (VdImage            *image,
                                               GCancellable       *cancellable,
                                               GAsyncReadyCallback callback,
                                               gpointer            callback_data,
                                               gpointer            user_data);
typedef gboolean (*VdImageSnapshotFinishFunc) (GAsyncResult       *result,
                                               GError            **error,
                                               gpointer            user_data);

VdImage     *vd_image_load              (const gchar   *dir,
                                         GError       **error);
GDBusInterfaceSkeleton *vd_image_get_skeleton (VdImage *self);
/* Unset (the default, and BootSnapshots=false): Freeze seals as it is. */
void         vd_image_set_snapshotter   (VdImage                  *self,
                                         VdImageSnapshotFunc       take,
                                         VdImageSnapshotFinishFunc finish,
                                         gpointer                  user_data);
const gchar *vd_image_get_name          (VdImage *self);
const gchar *vd_image_get_dir           (VdImage *self);
const gchar *vd_image_get_object_path   (VdImage *self);
const gchar *vd_image_get_digest        (VdImage *self);
gboolean     vd_image_is_frozen         (VdImage *self);
gchar       *vd_image_get_file          (VdImage *self, const gchar *name);
gchar       *vd_image_get_cmdline       (VdImage *self);
JsonObject  *vd_image_get_boot_snapshot (VdImage *self);
gboolean     vd_image_snapshot_begin    (VdImage *self, GError **error);
void         vd_image_snapshot_abort    (VdImage *self);
void         vd_image_add_user          (VdImage *self, const gchar *session_path);
void         vd_image_remove_user       (VdImage *self, const gchar *session_path);
gboolean     vd_image_is_in_use         (VdImage *self);

/* What Image.Freeze does: the boot snapshot (see vd_image_set_snapshotter),
 * then the seal. */
void         vd_image_freeze_async      (VdImage *self, GAsyncReadyCallback cb, gpointer data);
gboolean     vd_image_freeze_finish     (VdImage *self, GAsyncResult *res, GError **error);
void         vd_image_verify_async      (VdImage *self, gboolean full, GCancellable *c, GAsyncReadyCallback cb, gpointer data);
gboolean     vd_image_verify_finish     (VdImage *self, GAsyncResult *res, GError **error);
gboolean     vd_image_delete            (VdImage *self, GError **error);

gboolean     vd_image_write_metadata    (const gchar *dir, const gchar *recipe, GError **error);
JsonObject  *vd_image_query_disk        (const gchar *disk, GError **error);

G_END_DECLS
