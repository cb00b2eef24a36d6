/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdDataset"

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <linux/magic.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vd-fs.h"
#include "vd-dataset.h"

/* A tree deeper than this is refused by chown_tree rather than exhausting
 * descriptors: each level holds one directory open. */
#define CHOWN_DEPTH_MAX 512

struct _VdDataset {
  GObject          parent_instance;
  VdDatasetBackend backend;
  gchar           *path;
  gchar           *image;
  guint64          quota;
};

G_DEFINE_TYPE (VdDataset, vd_dataset, G_TYPE_OBJECT)

/* Set once at start-up, before the first mount: see vd_dataset_mount_through_systemd(). */
static gboolean mount_through_systemd;

void
vd_dataset_mount_through_systemd (gboolean yes)
{
  mount_through_systemd = yes;
}

static void
vd_dataset_finalize (GObject *object)
{
  VdDataset *self = VD_DATASET (object);

  g_free (self->path);
  g_free (self->image);
  G_OBJECT_CLASS (vd_dataset_parent_class)->finalize (object);
}

static void
vd_dataset_class_init (VdDatasetClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_dataset_finalize;
}

static void
vd_dataset_init (VdDataset *self)
{
}

static gboolean
fail_errno (GError **error, int saved, const gchar *what, const gchar *path)
{
  g_set_error (error, VIVARIUM_ERROR,
               saved == ENOSPC || saved == EDQUOT ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
               "Cannot %s %s: %s", what, path, g_strerror (saved));
  return FALSE;
}

/* Runs a tool and, when it fails, says what it printed: "mount failed" alone
 * would leave the operator guessing. */
static gboolean
run_tool (gchar **out, GError **error, const gchar *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocess) proc = NULL;
  g_autofree gchar *stdout_buf = NULL;
  g_autofree gchar *stderr_buf = NULL;
  va_list ap;

  va_start (ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg (ap, const gchar *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);

  proc = g_subprocess_newv ((const gchar * const *) argv->pdata,
                            G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, error);
  if (proc == NULL || !g_subprocess_communicate_utf8 (proc, NULL, NULL, &stdout_buf, &stderr_buf, error)) {
    vivarium_error_convert (error);
    return FALSE;
  }
  if (!g_subprocess_get_successful (proc)) {
    g_set_error (error, VIVARIUM_ERROR,
                 strstr (stderr_buf, "No space left") != NULL ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
                 "%s failed: %s", first, g_strstrip (stderr_buf));
    return FALSE;
  }
  if (out != NULL)
    *out = g_steal_pointer (&stdout_buf);
  return TRUE;
}

const gchar *
vd_dataset_backend_to_string (VdDatasetBackend backend)
{
  return backend == VD_DATASET_BACKEND_BTRFS ? "btrfs" : "ext4";
}

gboolean
vd_dataset_backend_from_string (const gchar *s, VdDatasetBackend *out)
{
  if (g_strcmp0 (s, "btrfs") == 0)
    *out = VD_DATASET_BACKEND_BTRFS;
  else if (g_strcmp0 (s, "ext4") == 0)
    *out = VD_DATASET_BACKEND_EXT4;
  else
    return FALSE;
  return TRUE;
}

gboolean
vd_dataset_backend_for_dir (const gchar *dir, VdDatasetBackend *out, GError **error)
{
  struct statfs sfs;

  if (statfs (dir, &sfs) != 0)
    return fail_errno (error, errno, "inspect the filesystem of", dir);
  *out = sfs.f_type == BTRFS_SUPER_MAGIC ? VD_DATASET_BACKEND_BTRFS : VD_DATASET_BACKEND_EXT4;
  return TRUE;
}

VdDataset *
vd_dataset_new (VdDatasetBackend backend, const gchar *mountpoint, const gchar *image, guint64 quota_bytes)
{
  VdDataset *self = g_object_new (VD_TYPE_DATASET, NULL);

  self->backend = backend;
  self->path = g_strdup (mountpoint);
  self->image = g_strdup (image);
  self->quota = quota_bytes;
  return self;
}

/* A mount point is on another device than its parent directory. */
gboolean
vd_dataset_is_mounted (VdDataset *self)
{
  g_autofree gchar *parent = g_path_get_dirname (self->path);
  struct stat st, pst;

  if (lstat (self->path, &st) != 0 || lstat (parent, &pst) != 0)
    return FALSE;
  return st.st_dev != pst.st_dev;
}

/* The image's blocks are allocated now, not when the guest writes: a sparse
 * image would let a guest fill the host's filesystem, and meet EIO instead
 * of ENOSPC when the host runs out. */
static gboolean
ext4_make_image (VdDataset *self, GError **error)
{
  int fd = open (self->image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int rc;

  if (fd < 0)
    return fail_errno (error, errno, "create", self->image);
  rc = posix_fallocate (fd, 0, (off_t) self->quota);
  if (rc != 0 || fsync (fd) != 0) {
    int saved = rc != 0 ? rc : errno;
    close (fd);
    return fail_errno (error, saved, "allocate", self->image);
  }
  close (fd);
  /* No journal: the dataset is scratch space whose truth is the commit, and
   * a journal would take a fixed share of a small quota. No reserved
   * blocks: the quota is the guest's, all of it. nodiscard: mke2fs would
   * otherwise punch the allocation out of the image again. */
  return run_tool (NULL, error, "mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0",
                   "-E", "root_owner=0:0,nodiscard", self->image, NULL);
}

/* The options of every ext4 dataset mount. mount(8) sets the loop device
 * up with autoclear, so the unmount alone frees it: no loop device can
 * outlive its mount. */
#define EXT4_OPTIONS "loop,nosuid,nodev,noexec,noatime"

/* In the caller's mount namespace: the daemon's own when it runs without
 * systemd (nobody else's namespace to care about then). */
static gboolean
ext4_mount_here (VdDataset *self, GError **error)
{
  return run_tool (NULL, error, "mount", "-t", "ext4", "-o", EXT4_OPTIONS, self->image, self->path, NULL);
}

/* In the host's mount namespace, as a transient mount unit of systemd's:
 * the daemon's unit has PrivateMounts=yes, and a mount made in there would
 * be the daemon's alone. A session's QEMU, in a unit of its own, would then
 * share the empty directory under it: the guest's writes would land on the
 * host's disk past the quota, and the commit would not see them. Made by
 * PID 1, the mount propagates into the daemon's namespace (the host's
 * mounts reach it; its own never leave it) and into every session's.
 * --collect: once stopped, the unit is gone; no fsck (the image is scratch
 * space whose truth is the commit, and it has no journal). */
static gboolean
ext4_mount_unit (VdDataset *self, GError **error)
{
  return run_tool (NULL, error, "systemd-mount", "--no-ask-password", "--quiet", "--collect", "--fsck=no",
                   "--type=ext4", "--options=" EXT4_OPTIONS, "--description=Vivarium project dataset",
                   self->image, self->path, NULL);
}

static gboolean
ext4_mount (VdDataset *self, GError **error)
{
  g_autofree gchar *lost = g_build_filename (self->path, "lost+found", NULL);

  if (vd_dataset_is_mounted (self))
    return TRUE;
  if (!(mount_through_systemd ? ext4_mount_unit (self, error) : ext4_mount_here (self, error)))
    return FALSE;
  /* The root is root's until a session is granted it. lost+found is not
   * part of anybody's project. */
  if (chmod (self->path, 0700) != 0)
    g_debug ("chmod %s: %s", self->path, g_strerror (errno));
  if (g_rmdir (lost) != 0 && errno != ENOENT)
    g_debug ("rmdir %s: %s", lost, g_strerror (errno));
  return TRUE;
}

static gboolean
btrfs_create (VdDataset *self, GError **error)
{
  g_autofree gchar *parent = g_path_get_dirname (self->path);
  g_autofree gchar *limit = g_strdup_printf ("%" G_GUINT64_FORMAT, self->quota);
  g_autoptr(GError) cleanup_error = NULL;

  if (!run_tool (NULL, error, "btrfs", "-q", "subvolume", "create", self->path, NULL))
    return FALSE;
  /* Enabling quotas is idempotent and filesystem-wide. */
  if (run_tool (NULL, error, "btrfs", "quota", "enable", parent, NULL) &&
      run_tool (NULL, error, "btrfs", "qgroup", "limit", limit, self->path, NULL)) {
    if (chmod (self->path, 0700) == 0)
      return TRUE;
    fail_errno (error, errno, "set the mode of", self->path);
  }
  if (!run_tool (NULL, &cleanup_error, "btrfs", "-q", "subvolume", "delete", self->path, NULL))
    g_warning ("%s", cleanup_error->message);
  return FALSE;
}

static gboolean
ext4_create (VdDataset *self, GError **error)
{
  g_autoptr(GError) cleanup_error = NULL;

  if (ext4_make_image (self, error) && ext4_mount (self, error))
    return TRUE;
  if (g_unlink (self->image) != 0 && errno != ENOENT)
    g_warning ("Cannot remove %s: %s", self->image, g_strerror (errno));
  return FALSE;
}

VdDataset *
vd_dataset_create (VdDatasetBackend backend, const gchar *mountpoint, const gchar *image,
                   guint64 quota_bytes, GError **error)
{
  g_autoptr(VdDataset) self = vd_dataset_new (backend, mountpoint, image, quota_bytes);
  gboolean ok;

  if (backend == VD_DATASET_BACKEND_EXT4) {
    if (g_mkdir (mountpoint, 0700) != 0) {
      fail_errno (error, errno, "create", mountpoint);
      return NULL;
    }
    ok = ext4_create (self, error);
    if (!ok && g_rmdir (mountpoint) != 0)
      g_warning ("Cannot remove %s: %s", mountpoint, g_strerror (errno));
  } else {
    ok = btrfs_create (self, error);
  }
  return ok ? g_steal_pointer (&self) : NULL;
}

gboolean
vd_dataset_mount (VdDataset *self, GError **error)
{
  struct stat st;

  if (self->backend == VD_DATASET_BACKEND_EXT4)
    return ext4_mount (self, error);
  /* A btrfs subvolume's root directory always has inode number 256. */
  if (lstat (self->path, &st) != 0)
    return fail_errno (error, errno, "find the dataset", self->path);
  if (st.st_ino != 256) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "%s is not a btrfs subvolume", self->path);
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_dataset_unmount (VdDataset *self, GError **error)
{
  if (self->backend != VD_DATASET_BACKEND_EXT4 || !vd_dataset_is_mounted (self))
    return TRUE;
  /* Stopping the mount unit unmounts it in the host's namespace, and so
   * in the daemon's, and unloads the unit (--collect). */
  if (mount_through_systemd)
    return run_tool (NULL, error, "systemd-umount", "--no-ask-password", "--quiet", self->path, NULL);
  if (umount2 (self->path, UMOUNT_NOFOLLOW) != 0)
    return fail_errno (error, errno, "unmount", self->path);
  return TRUE;
}

/* The subvolume's qgroup outlives it ("<stale>") and can only be removed
 * once the cleaner has dropped the subvolume: wait for that, then remove
 * it, so that creating and deleting projects leaves no trail. A qgroup
 * that stays is untidy, not wrong: it is logged, not an error. */
static void
btrfs_drop_qgroup (const gchar *parent, const gchar *rootid)
{
  g_autofree gchar *qgroup = g_strconcat ("0/", rootid, NULL);
  g_autoptr(GError) error = NULL;

  if (!run_tool (NULL, &error, "btrfs", "subvolume", "sync", parent, rootid, NULL) ||
      !run_tool (NULL, &error, "btrfs", "qgroup", "destroy", qgroup, parent, NULL))
    g_message ("The qgroup %s of a deleted dataset stays: %s", qgroup, error->message);
}

static gboolean
btrfs_destroy (VdDataset *self, GError **error)
{
  g_autofree gchar *parent = g_path_get_dirname (self->path);
  g_autofree gchar *rootid = NULL;
  struct stat st;

  if (lstat (self->path, &st) != 0 && errno == ENOENT)
    return TRUE;
  if (!run_tool (&rootid, error, "btrfs", "inspect-internal", "rootid", self->path, NULL) ||
      !run_tool (NULL, error, "btrfs", "-q", "subvolume", "delete", "--commit-after", self->path, NULL))
    return FALSE;
  btrfs_drop_qgroup (parent, g_strstrip (rootid));
  return TRUE;
}

gboolean
vd_dataset_destroy (VdDataset *self, GError **error)
{
  if (self->backend == VD_DATASET_BACKEND_BTRFS)
    return btrfs_destroy (self, error);
  if (!vd_dataset_unmount (self, error))
    return FALSE;
  /* Refuse rather than recurse into a filesystem we failed to unmount. */
  if (vd_dataset_is_mounted (self)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "%s is still mounted", self->path);
    return FALSE;
  }
  if (g_unlink (self->image) != 0 && errno != ENOENT)
    return fail_errno (error, errno, "remove", self->image);
  return vd_fs_rm_rf (self->path, error);
}

VdDatasetBackend
vd_dataset_get_backend (VdDataset *self)
{
  return self->backend;
}

const gchar *
vd_dataset_get_path (VdDataset *self)
{
  return self->path;
}

guint64
vd_dataset_get_quota (VdDataset *self)
{
  return self->quota;
}

/* `btrfs qgroup show -rf --raw PATH` prints a header and one row:
 * qgroupid rfer excl max_rfer. */
static gboolean
btrfs_used (VdDataset *self, guint64 *out, GError **error)
{
  g_autofree gchar *text = NULL;
  g_auto(GStrv) lines = NULL;
  int fd = open (self->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  /* qgroup numbers lag until the transaction commits. */
  if (fd >= 0) {
    syncfs (fd);
    close (fd);
  }
  if (!run_tool (&text, error, "btrfs", "qgroup", "show", "-rf", "--raw", self->path, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) cols = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
    g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
    g_auto(GStrv) words = NULL;
    for (guint j = 0; cols[j] != NULL; j++)
      if (cols[j][0] != '\0')
        g_strv_builder_add (b, cols[j]);
    words = g_strv_builder_end (b);
    if (g_strv_length (words) >= 2 && g_str_has_prefix (words[0], "0/"))
      return g_ascii_string_to_unsigned (words[1], 10, 0, G_MAXUINT64, out, error);
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
               "btrfs printed no qgroup for %s", self->path);
  return FALSE;
}

gboolean
vd_dataset_get_used_bytes (VdDataset *self, guint64 *out, GError **error)
{
  struct statvfs sv;

  if (self->backend == VD_DATASET_BACKEND_BTRFS)
    return btrfs_used (self, out, error);
  if (!vd_dataset_is_mounted (self)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "%s is not mounted", self->path);
    return FALSE;
  }
  if (statvfs (self->path, &sv) != 0)
    return fail_errno (error, errno, "inspect", self->path);
  *out = (guint64) (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
  return TRUE;
}

/* Walks with directory descriptors and AT_SYMLINK_NOFOLLOW, so that no
 * link planted in the tree can make root change the owner of a file
 * outside it. */
static gboolean
chown_children (int dirfd, const gchar *where, uid_t uid, gid_t gid, guint depth, GError **error)
{
  DIR *dir;
  struct dirent *de;
  gboolean ok = TRUE;
  int dup_fd;

  if (depth > CHOWN_DEPTH_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                 "The tree under %s is nested deeper than %d directories", where, CHOWN_DEPTH_MAX);
    return FALSE;
  }
  dup_fd = fcntl (dirfd, F_DUPFD_CLOEXEC, 3);
  dir = dup_fd >= 0 ? fdopendir (dup_fd) : NULL;
  if (dir == NULL) {
    if (dup_fd >= 0)
      close (dup_fd);
    return fail_errno (error, errno, "read", where);
  }
  while (ok && (de = readdir (dir)) != NULL) {
    struct stat st;
    if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
      continue;
    if (fstatat (dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        fchownat (dirfd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      ok = fail_errno (error, errno, "change the owner of a file in", where);
      break;
    }
    if (S_ISDIR (st.st_mode)) {
      int child = openat (dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        ok = fail_errno (error, errno, "open a directory in", where);
        break;
      }
      ok = chown_children (child, where, uid, gid, depth + 1, error);
      close (child);
    }
  }
  closedir (dir);
  return ok;
}

gboolean
vd_dataset_chown_tree (VdDataset *self, uid_t uid, gid_t gid, GError **error)
{
  int fd = open (self->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  gboolean ok;

  if (fd < 0)
    return fail_errno (error, errno, "open", self->path);
  /* The root decides who may enter at all, so it changes first on revoke
   * (access ends at once) and is checked on grant. */
  if (fchown (fd, uid, gid) != 0 || fchmod (fd, 0700) != 0) {
    int saved = errno;
    close (fd);
    return fail_errno (error, saved, "change the owner of", self->path);
  }
  ok = chown_children (fd, self->path, uid, gid, 0, error);
  close (fd);
  return ok;
}
