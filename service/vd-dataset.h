/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A directory with a hard size limit: the working tree of one project.
 *
 * Two backends, chosen by the filesystem the project directory lives on:
 *   btrfs  a subvolume with a qgroup limit (nothing to mount);
 *   ext4   an image file of the quota's size, fully allocated up front so
 *          that the host's free space can never be the limit a guest meets,
 *          loop-mounted nosuid,nodev,noexec in the host's mount namespace
 *          (see vd_dataset_mount_through_systemd()).
 *
 * Every call blocks (mkfs, mount, btrfs): call them from a worker thread. */
typedef enum {
  VD_DATASET_BACKEND_EXT4,
  VD_DATASET_BACKEND_BTRFS,
} VdDatasetBackend;

#define VD_TYPE_DATASET (vd_dataset_get_type ())
G_DECLARE_FINAL_TYPE (VdDataset, vd_dataset, VD, DATASET, GObject)

/* Process-wide, set once before the first mount: mount ext4 images as
 * transient mount units of systemd's (systemd-mount), in the host's mount
 * namespace where the sessions are, rather than in the caller's own. The
 * daemon sets it when the machine runs systemd. */
void              vd_dataset_mount_through_systemd (gboolean yes);

const gchar      *vd_dataset_backend_to_string   (VdDatasetBackend backend);
gboolean          vd_dataset_backend_from_string (const gchar      *s,
                                                  VdDatasetBackend *out);
/* The backend a dataset under @dir would get. */
gboolean          vd_dataset_backend_for_dir     (const gchar      *dir,
                                                  VdDatasetBackend *out,
                                                  GError          **error);

/* Creates the dataset: @mountpoint (which must not exist) becomes the root
 * of a filesystem limited to @quota_bytes; for ext4 the image is @image.
 * On failure nothing is left: no image, no mount, no loop device, no
 * subvolume, no @mountpoint. */
VdDataset        *vd_dataset_create              (VdDatasetBackend  backend,
                                                  const gchar      *mountpoint,
                                                  const gchar      *image,
                                                  guint64           quota_bytes,
                                                  GError          **error);
/* An existing dataset, as recorded; vd_dataset_mount() makes it usable. */
VdDataset        *vd_dataset_new                 (VdDatasetBackend  backend,
                                                  const gchar      *mountpoint,
                                                  const gchar      *image,
                                                  guint64           quota_bytes);
/* Idempotent: mounts the ext4 image unless it already is mounted there;
 * checks that a btrfs subvolume is there. */
gboolean          vd_dataset_mount               (VdDataset  *self,
                                                  GError    **error);
/* Idempotent. The daemon calls it at shutdown for every dataset. */
gboolean          vd_dataset_unmount             (VdDataset  *self,
                                                  GError    **error);
/* Unmounts and removes the filesystem, its image and its mount point. */
gboolean          vd_dataset_destroy             (VdDataset  *self,
                                                  GError    **error);
gboolean          vd_dataset_is_mounted          (VdDataset  *self);
VdDatasetBackend  vd_dataset_get_backend         (VdDataset  *self);
const gchar      *vd_dataset_get_path            (VdDataset  *self);
guint64           vd_dataset_get_quota           (VdDataset  *self);
/* Bytes the dataset uses against its quota. */
gboolean          vd_dataset_get_used_bytes      (VdDataset  *self,
                                                  guint64    *out,
                                                  GError    **error);
/* Makes every file of the tree belong to @uid (and its root 0700), or back
 * to root when @uid is 0. Never follows a symlink: the tree is the guest's. */
gboolean          vd_dataset_chown_tree          (VdDataset  *self,
                                                  uid_t       uid,
                                                  gid_t       gid,
                                                  GError    **error);

G_END_DECLS
