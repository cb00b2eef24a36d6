/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdImage"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-glib/json-glib.h>
#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-image.h"
#include "vd-log.h"

/* The files a guest boots from; the digest covers exactly these, in name
 * order. The boot snapshot (boot.json: what it was saved with; boot.qcow2:
 * the disk as the saved guest left it, over disk.qcow2; boot.state: the
 * saved machine) is there when Freeze took one. */
static const gchar *boot_files[] = { "boot.json", "boot.qcow2", "boot.state", "cmdline", "disk.qcow2",
                                     "initrd.img", "vmlinuz", NULL };
static const gchar *snapshot_files[] = { "boot.json", "boot.qcow2", "boot.state", NULL };

#define MANIFEST      "manifest.json"
#define METADATA      "image.json"
#define BUILD_LOG     "build.log"
#define LINEAGE       "lineage.json"   /* a saved session's origin (SaveAsImage) */
#define LINEAGE_SHOWN 200              /* commands the Lineage property lists */
#define HASH_CHUNK    (1024 * 1024)

struct _VdImage {
  GObject             parent_instance;
  gchar              *name;
  gchar              *dir;
  gchar              *object_path;
  JsonObject         *manifest;   /* NULL until frozen */
  VivariumDBusImage  *skeleton;
  GPtrArray          *users;      /* session object paths */
  gboolean            freezing;   /* a freeze (or its boot snapshot) owns the files */
  gboolean            snapshotting; /* the boot snapshot is being taken */
  JsonObject         *snapshot;   /* boot.json of a frozen image, or NULL */
  VdImageSnapshotFunc       take_snapshot;   /* NULL: Freeze seals without one */
  VdImageSnapshotFinishFunc take_snapshot_finish;
  gpointer                  snapshot_data;
};

G_DEFINE_TYPE (VdImage, vd_image, G_TYPE_OBJECT)

enum { SIGNAL_DELETED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_image_finalize (GObject *object)
{
  VdImage *self = VD_IMAGE (object);

  g_clear_object (&self->skeleton);
  g_clear_pointer (&self->manifest, json_object_unref);
  g_clear_pointer (&self->snapshot, json_object_unref);
  g_ptr_array_unref (self->users);
  g_free (self->name);
  g_free (self->dir);
  g_free (self->object_path);
  G_OBJECT_CLASS (vd_image_parent_class)->finalize (object);
}

static void
vd_image_class_init (VdImageClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_image_finalize;
  signals[SIGNAL_DELETED] = g_signal_new ("deleted", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                          NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static gboolean handle_freeze (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_verify (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);
static gboolean handle_delete (VivariumDBusImage *, GDBusMethodInvocation *, gpointer);

/* Every method of org.vivarium.Vivarium1.Image is answered here. */
static void
vd_image_init (VdImage *self)
{
  self->users = g_ptr_array_new_with_free_func (g_free);
  self->skeleton = vivarium_dbus_image_skeleton_new ();
  g_signal_connect (self->skeleton, "handle-freeze", G_CALLBACK (handle_freeze), self);
  g_signal_connect (self->skeleton, "handle-verify", G_CALLBACK (handle_verify), self);
  g_signal_connect (self->skeleton, "handle-delete", G_CALLBACK (handle_delete), self);
}

void
vd_image_set_snapshotter (VdImage *self, VdImageSnapshotFunc take, VdImageSnapshotFinishFunc finish,
                          gpointer user_data)
{
  self->take_snapshot = take;
  self->take_snapshot_finish = finish;
  self->snapshot_data = user_data;
}

static JsonObject *
read_json_object (const gchar *path, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;

  if (!json_parser_load_from_file (parser, path, error)) {
    g_prefix_error (error, "Cannot read %s: ", path);
    vivarium_error_convert (error);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s is not a JSON object", path);
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

static gchar   *json_text      (JsonObject *object);
static gboolean recover_freeze (const gchar *dir, const gchar *name, GError **error);
static gboolean remove_node    (const gchar *path, GError **error);

/* An unfrozen image has no boot snapshot: files left by a freeze that
 * never committed (a failure, a crash) go, so that a freeze is all or
 * nothing for them too. */
static gboolean
remove_snapshot_files (const gchar *dir, GError **error)
{
  for (guint i = 0; snapshot_files[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, snapshot_files[i], NULL);
    g_autofree gchar *tmp = g_strconcat (path, ".tmp", NULL);

    if (!remove_node (path, error) || !remove_node (tmp, error))
      return FALSE;
  }
  return TRUE;
}

/* A paused session saved as an image brings its memory as the boot
 * snapshot from the start: that one is no leftover. */
static gboolean
saved_with_memory (const gchar *dir)
{
  g_autofree gchar *path = g_build_filename (dir, LINEAGE, NULL);
  g_autoptr(JsonObject) lineage = g_file_test (path, G_FILE_TEST_EXISTS) ? read_json_object (path, NULL) : NULL;

  return lineage != NULL && json_object_get_boolean_member_with_default (lineage, "memory", FALSE);
}

static void
load_snapshot (VdImage *self)
{
  g_autofree gchar *path = g_build_filename (self->dir, "boot.json", NULL);
  g_autofree gchar *state = g_build_filename (self->dir, "boot.state", NULL);

  g_clear_pointer (&self->snapshot, json_object_unref);
  if (g_file_test (path, G_FILE_TEST_EXISTS) && g_file_test (state, G_FILE_TEST_EXISTS))
    self->snapshot = read_json_object (path, NULL);
}

/* Atomic: a crash leaves the old file or the new one, never half of one. */
static gboolean
write_json_object (const gchar *path, JsonObject *object, GError **error)
{
  g_autofree gchar *text = json_text (object);

  return vd_fs_write_durably (path, text, 0644, error);
}

gboolean
vd_image_write_metadata (const gchar *dir, const gchar *recipe, GError **error)
{
  g_autoptr(JsonObject) meta = json_object_new ();
  g_autofree gchar *path = g_build_filename (dir, METADATA, NULL);

  json_object_set_string_member (meta, "recipe", recipe);
  json_object_set_int_member (meta, "created-at", g_get_real_time ());
  return write_json_object (path, meta, error);
}

/* What qemu-img says about a disk, as JSON; InvalidArgument when it does
 * not recognise the file as a disk at all. */
JsonObject *
vd_image_query_disk (const gchar *disk, GError **error)
{
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GBytes) out = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;

  /* -U: a session may hold the image open; we only read its header. */
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE, error,
                           "qemu-img", "info", "-U", "--output=json", disk, NULL);
  if (proc == NULL || !g_subprocess_communicate (proc, NULL, NULL, &out, NULL, error)) {
    g_prefix_error (error, "Cannot run qemu-img info on %s: ", disk);
    vivarium_error_convert (error);
    return NULL;
  }
  if (!g_subprocess_get_successful (proc)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "qemu-img does not recognise %s as a disk image", disk);
    return NULL;
  }
  if (!json_parser_load_from_data (parser, g_bytes_get_data (out, NULL), g_bytes_get_size (out), error)) {
    g_prefix_error (error, "qemu-img info gave no JSON for %s: ", disk);
    vivarium_error_convert (error);
    return NULL;
  }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "qemu-img info gave no object");
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

static guint64
dir_size (const gchar *dir)
{
  guint64 total = 0;
  for (guint i = 0; boot_files[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, boot_files[i], NULL);
    GStatBuf st;
    if (g_stat (path, &st) == 0)
      total += (guint64) st.st_blocks * 512;
  }
  return total;
}

/* One escaped line per command: "exit STATUS: ARGV" (or its state). The
 * argv is the guest's business, so it is escaped and capped here. */
static gchar *
command_line (JsonObject *entry)
{
  JsonArray *argv = json_object_get_array_member (entry, "argv");
  g_autoptr(GString) line = g_string_new (NULL);
  const gchar *state = json_object_get_string_member_with_default (entry, "state", "");
  g_autofree gchar *capped = NULL;

  if (g_strcmp0 (state, "finished") == 0)
    g_string_append_printf (line, "exit %" G_GINT64_FORMAT ":", json_object_get_int_member_with_default (entry, "exit-status", -1));
  else
    g_string_append_printf (line, "%s:", state);
  for (guint i = 0; argv != NULL && i < json_array_get_length (argv); i++) {
    g_autofree gchar *item = g_strescape (json_array_get_string_element (argv, i), NULL);
    g_string_append_printf (line, " %s", item);
  }
  capped = g_utf8_make_valid (line->str, MIN (line->len, 512));
  return g_steal_pointer (&capped);
}

static void
publish_lineage (VdImage *self)
{
  g_autofree gchar *path = g_build_filename (self->dir, LINEAGE, NULL);
  g_autoptr(JsonObject) lineage = g_file_test (path, G_FILE_TEST_EXISTS) ? read_json_object (path, NULL) : NULL;
  GVariantBuilder b;
  g_autoptr(GStrvBuilder) lines = g_strv_builder_new ();
  g_auto(GStrv) shown = NULL;
  JsonArray *commands;
  guint n, first;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{sv}"));
  if (lineage == NULL) {
    vivarium_dbus_image_set_lineage (self->skeleton, g_variant_builder_end (&b));
    return;
  }
  commands = json_object_get_array_member (lineage, "commands");
  n = commands != NULL ? json_array_get_length (commands) : 0;
  first = n > LINEAGE_SHOWN ? n - LINEAGE_SHOWN : 0;
  for (guint i = first; i < n; i++) {
    JsonNode *node = json_array_get_element (commands, i);
    if (JSON_NODE_HOLDS_OBJECT (node)) {
      g_autofree gchar *line = command_line (json_node_get_object (node));
      g_strv_builder_add (lines, line);
    }
  }
  shown = g_strv_builder_end (lines);
  g_variant_builder_add (&b, "{sv}", "parent", g_variant_new_string (json_object_get_string_member_with_default (lineage, "parent", "")));
  g_variant_builder_add (&b, "{sv}", "parent-digest", g_variant_new_string (json_object_get_string_member_with_default (lineage, "parent-digest", "")));
  g_variant_builder_add (&b, "{sv}", "session", g_variant_new_string (json_object_get_string_member_with_default (lineage, "session", "")));
  g_variant_builder_add (&b, "{sv}", "saved-at", g_variant_new_uint64 ((guint64) json_object_get_int_member_with_default (lineage, "saved-at", 0)));
  g_variant_builder_add (&b, "{sv}", "memory", g_variant_new_boolean (json_object_get_boolean_member_with_default (lineage, "memory", FALSE)));
  g_variant_builder_add (&b, "{sv}", "commands-total", g_variant_new_uint64 ((guint64) json_object_get_int_member_with_default (lineage, "commands-total", 0)));
  g_variant_builder_add (&b, "{sv}", "commands", g_variant_new_strv ((const gchar * const *) shown, -1));
  vivarium_dbus_image_set_lineage (self->skeleton, g_variant_builder_end (&b));
}

static void
update_skeleton (VdImage *self, JsonObject *info, JsonObject *meta)
{
  VivariumDBusImage *s = self->skeleton;
  JsonObject *m = self->manifest;

  vivarium_dbus_image_set_name (s, self->name);
  vivarium_dbus_image_set_frozen (s, m != NULL);
  vivarium_dbus_image_set_digest (s, m != NULL ? json_object_get_string_member (m, "digest") : "");
  vivarium_dbus_image_set_frozen_at (s, m != NULL ? (guint64) json_object_get_int_member (m, "frozen-at") : 0);
  vivarium_dbus_image_set_size (s, dir_size (self->dir));
  if (info != NULL) {
    vivarium_dbus_image_set_format (s, json_object_get_string_member_with_default (info, "format", ""));
    vivarium_dbus_image_set_virtual_size (s, (guint64) json_object_get_int_member_with_default (info, "virtual-size", 0));
  }
  publish_lineage (self);
  if (meta != NULL) {
    vivarium_dbus_image_set_recipe (s, json_object_get_string_member_with_default (meta, "recipe", ""));
    vivarium_dbus_image_set_created_at (s, (guint64) json_object_get_int_member_with_default (meta, "created-at", 0));
  }
}

VdImage *
vd_image_load (const gchar *dir, GError **error)
{
  g_autoptr(VdImage) self = g_object_new (VD_TYPE_IMAGE, NULL);
  g_autofree gchar *disk = g_build_filename (dir, "disk.qcow2", NULL);
  g_autofree gchar *manifest = g_build_filename (dir, MANIFEST, NULL);
  g_autofree gchar *metadata = g_build_filename (dir, METADATA, NULL);
  g_autoptr(JsonObject) info = NULL;
  g_autoptr(JsonObject) meta = NULL;

  self->dir = g_strdup (dir);
  self->name = g_path_get_basename (dir);
  if (!vivarium_name_validate ("image", self->name, error))
    return NULL;
  self->object_path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_IMAGES, self->name);
  if (!recover_freeze (dir, self->name, error))
    return NULL;
  if (g_file_test (manifest, G_FILE_TEST_EXISTS)) {
    self->manifest = read_json_object (manifest, error);
    if (self->manifest == NULL)
      return NULL;
    load_snapshot (self);
  } else if (!saved_with_memory (dir) && !remove_snapshot_files (dir, error)) {
    return NULL;
  }
  info = vd_image_query_disk (disk, error);
  if (info == NULL)
    return NULL;
  meta = read_json_object (metadata, NULL);
  update_skeleton (self, info, meta != NULL ? meta : self->manifest);
  return g_steal_pointer (&self);
}

GDBusInterfaceSkeleton *vd_image_get_skeleton (VdImage *self) { return G_DBUS_INTERFACE_SKELETON (self->skeleton); }
const gchar *vd_image_get_name (VdImage *self) { return self->name; }
const gchar *vd_image_get_dir (VdImage *self) { return self->dir; }
const gchar *vd_image_get_object_path (VdImage *self) { return self->object_path; }
gboolean vd_image_is_frozen (VdImage *self) { return self->manifest != NULL; }
gboolean vd_image_is_in_use (VdImage *self) { return self->users->len > 0; }

const gchar *
vd_image_get_digest (VdImage *self)
{
  return self->manifest != NULL ? json_object_get_string_member (self->manifest, "digest") : NULL;
}

gchar *
vd_image_get_file (VdImage *self, const gchar *name)
{
  g_autofree gchar *path = g_build_filename (self->dir, name, NULL);
  return g_file_test (path, G_FILE_TEST_EXISTS) ? g_steal_pointer (&path) : NULL;
}

/* What the boot snapshot was saved with (memory-mib, cpus, device-set,
 * accelerator, ...), or NULL when the image has none. Covered by the
 * digest: a session start verifies it with the rest. */
JsonObject *
vd_image_get_boot_snapshot (VdImage *self)
{
  return self->snapshot;
}

/* Freeze's first half: the files are the snapshot's until the freeze
 * commits or vd_image_snapshot_abort() removes what it left. */
gboolean
vd_image_snapshot_begin (VdImage *self, GError **error)
{
  if (self->manifest != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The image “%s” is already frozen", self->name);
    return FALSE;
  }
  if (self->freezing) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "The image “%s” is being frozen already", self->name);
    return FALSE;
  }
  if (!remove_snapshot_files (self->dir, error))
    return FALSE;
  self->freezing = TRUE;
  self->snapshotting = TRUE;
  return TRUE;
}

void
vd_image_snapshot_abort (VdImage *self)
{
  g_autoptr(GError) error = NULL;

  if (!self->snapshotting)
    return;
  self->snapshotting = FALSE;
  self->freezing = FALSE;
  if (!remove_snapshot_files (self->dir, &error))
    vd_log_image (G_LOG_LEVEL_WARNING, self->name, "image %s: %s", self->name, error->message);
}

gchar *
vd_image_get_cmdline (VdImage *self)
{
  g_autofree gchar *path = g_build_filename (self->dir, "cmdline", NULL);
  gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strstrip (text);
}

static void
publish_users (VdImage *self)
{
  g_ptr_array_add (self->users, NULL);
  vivarium_dbus_image_set_in_use_by (self->skeleton, (const gchar * const *) self->users->pdata);
  g_ptr_array_remove_index (self->users, self->users->len - 1);
}

void
vd_image_add_user (VdImage *self, const gchar *session_path)
{
  g_ptr_array_add (self->users, g_strdup (session_path));
  publish_users (self);
}

void
vd_image_remove_user (VdImage *self, const gchar *session_path)
{
  for (guint i = 0; i < self->users->len; i++) {
    if (g_strcmp0 (g_ptr_array_index (self->users, i), session_path) == 0) {
      g_ptr_array_remove_index (self->users, i);
      break;
    }
  }
  publish_users (self);
}

/* --- hashing --------------------------------------------------------- */

static gchar *
hash_file (const gchar *path, GCancellable *cancellable, GError **error)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileInputStream) in = g_file_read (file, cancellable, error);
  g_autofree guchar *buf = g_malloc (HASH_CHUNK);
  gssize n;

  if (in == NULL) {
    vivarium_error_convert (error);
    return NULL;
  }
  while ((n = g_input_stream_read (G_INPUT_STREAM (in), buf, HASH_CHUNK, cancellable, error)) > 0)
    g_checksum_update (sum, buf, (gsize) n);
  if (n < 0) {
    g_prefix_error (error, "Cannot read %s: ", path);
    vivarium_error_convert (error);
    return NULL;
  }
  return g_strdup (g_checksum_get_string (sum));
}

static JsonObject *
describe_file (const gchar *dir, const gchar *name, gboolean with_hash, GCancellable *c, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autoptr(JsonObject) entry = json_object_new ();
  GStatBuf st;

  if (g_lstat (path, &st) != 0 || !S_ISREG (st.st_mode)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                 "%s is missing or not a regular file", path);
    return NULL;
  }
  json_object_set_string_member (entry, "name", name);
  json_object_set_int_member (entry, "size", st.st_size);
  json_object_set_int_member (entry, "inode", (gint64) st.st_ino);
  json_object_set_int_member (entry, "mtime-ns", (gint64) st.st_mtim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_mtim.tv_nsec);
  json_object_set_int_member (entry, "ctime-ns", (gint64) st.st_ctim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_ctim.tv_nsec);
  if (with_hash) {
    g_autofree gchar *sha = hash_file (path, c, error);
    if (sha == NULL)
      return NULL;
    json_object_set_string_member (entry, "sha256", sha);
  }
  return g_steal_pointer (&entry);
}

/* digest = sha256 over "<name> <sha256> <size>\n" for each boot file, in
 * name order: one value that changes when any file the guest boots from
 * changes, renames included. */
static JsonArray *
describe_boot_files (const gchar *dir, gboolean with_hash, gchar **digest, GCancellable *c, GError **error)
{
  g_autoptr(JsonArray) files = json_array_new ();
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  for (guint i = 0; boot_files[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, boot_files[i], NULL);
    g_autoptr(JsonObject) entry = NULL;
    g_autofree gchar *line = NULL;

    if (!g_file_test (path, G_FILE_TEST_EXISTS) && g_strcmp0 (boot_files[i], "disk.qcow2") != 0)
      continue;
    entry = describe_file (dir, boot_files[i], with_hash, c, error);
    if (entry == NULL)
      return NULL;
    if (with_hash) {
      line = g_strdup_printf ("%s %s %" G_GINT64_FORMAT "\n", boot_files[i],
                              json_object_get_string_member (entry, "sha256"),
                              json_object_get_int_member (entry, "size"));
      g_checksum_update (sum, (const guchar *) line, -1);
    }
    json_array_add_object_element (files, g_steal_pointer (&entry));
  }
  if (digest != NULL)
    *digest = g_strdup_printf ("sha256:%s", g_checksum_get_string (sum));
  return g_steal_pointer (&files);
}

/* --- freezing -------------------------------------------------------- */

/* A freeze is all-or-nothing, and the presence of manifest.json is what
 * "frozen" means. Before anything changes, the manifest, with what each
 * file was like before (mode, owner, immutable flag), is written durably
 * as manifest.json.pending: a full disk fails there, with nothing changed.
 * Then the files are sealed, manifest.json is renamed into place (the
 * commit point), the manifest and the directory are sealed, and the
 * pending file goes last. A failure undoes what was done; a crash is
 * settled by vd_image_load: a pending file without manifest.json is rolled
 * back, a pending file next to manifest.json is rolled forward. */

#define PENDING       MANIFEST ".pending"
#define SEALED_MODE   0444
#define SEALED_DIR    0555

/* Besides the boot files, these are sealed too: they say where the image
 * came from. */
static const gchar *sealed_extra[] = { METADATA, BUILD_LOG, LINEAGE, NULL };

static gchar *
json_text (JsonObject *object)
{
  g_autoptr(JsonNode) node = json_node_init_object (json_node_alloc (), object);
  return json_to_string (node, TRUE);
}

/* By descriptor, never following a link planted in the directory. */
static int
open_node (const gchar *path, GError **error)
{
  int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0)
    vd_fs_set_error_errno (error, errno, "Cannot open %s", path);
  return fd;
}

/* Mode, owner and immutable flag, in the order the kernel allows: the flag
 * must be off while the rest changes. Where the filesystem has no such
 * flag (tmpfs, some overlays, NFS) that part is skipped, and *flag_set
 * says whether the flag is now on. */
static gboolean
set_node_state (const gchar *path, guint mode, uid_t uid, gid_t gid, gboolean immutable,
                gboolean *flag_set, GError **error)
{
  int fd = open_node (path, error);
  int flags = 0;
  gboolean have_flags;
  int saved = 0;

  if (fd < 0)
    return FALSE;
  have_flags = ioctl (fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (have_flags && (flags & FS_IMMUTABLE_FL) != 0) {
    flags &= ~FS_IMMUTABLE_FL;
    if (ioctl (fd, FS_IOC_SETFLAGS, &flags) != 0)
      saved = errno;
  }
  if (saved == 0 && (fchown (fd, uid, gid) != 0 || fchmod (fd, mode) != 0))
    saved = errno;
  if (saved == 0 && immutable && have_flags) {
    flags |= FS_IMMUTABLE_FL;
    have_flags = ioctl (fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  close (fd);
  if (saved != 0)
    return vd_fs_set_error_errno (error, saved, "Cannot change the mode, owner or flags of %s", path);
  if (flag_set != NULL)
    *flag_set = immutable && have_flags;
  return TRUE;
}

static JsonObject *
describe_state (const gchar *dir, const gchar *name, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autoptr(JsonObject) entry = json_object_new ();
  struct stat st;
  int flags = 0;
  int fd = open_node (path, error);

  if (fd < 0)
    return NULL;
  if (fstat (fd, &st) != 0) {
    int saved = errno;
    close (fd);
    vd_fs_set_error_errno (error, saved, "Cannot inspect %s", path);
    return NULL;
  }
  if (ioctl (fd, FS_IOC_GETFLAGS, &flags) != 0)
    flags = 0;
  close (fd);
  json_object_set_string_member (entry, "name", name);
  json_object_set_int_member (entry, "mode", st.st_mode & 07777);
  json_object_set_int_member (entry, "uid", st.st_uid);
  json_object_set_int_member (entry, "gid", st.st_gid);
  json_object_set_boolean_member (entry, "immutable", (flags & FS_IMMUTABLE_FL) != 0);
  return g_steal_pointer (&entry);
}

static gboolean
add_state (JsonArray *states, const gchar *dir, const gchar *name, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  JsonObject *entry;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return TRUE;
  entry = describe_state (dir, name, error);
  if (entry == NULL)
    return FALSE;
  json_array_add_object_element (states, entry);
  return TRUE;
}

/* Every file a freeze seals, as it is now: the list both sealing and
 * undoing walk. */
static JsonArray *
capture_before (const gchar *dir, GError **error)
{
  g_autoptr(JsonArray) states = json_array_new ();

  for (guint i = 0; boot_files[i] != NULL; i++) {
    if (!add_state (states, dir, boot_files[i], error))
      return NULL;
  }
  for (guint i = 0; sealed_extra[i] != NULL; i++) {
    if (!add_state (states, dir, sealed_extra[i], error))
      return NULL;
  }
  return g_steal_pointer (&states);
}

static gboolean
restore_state (const gchar *dir, JsonObject *entry, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, json_object_get_string_member (entry, "name"), NULL);

  return set_node_state (path, (guint) json_object_get_int_member (entry, "mode"),
                         (uid_t) json_object_get_int_member (entry, "uid"),
                         (gid_t) json_object_get_int_member (entry, "gid"),
                         json_object_get_boolean_member (entry, "immutable"), NULL, error);
}

/* Carries on past a failure, so that as much as can be is put back, and
 * reports the first one. A file that is gone has nothing to put back. */
static gboolean
restore_files (const gchar *dir, JsonArray *before, GError **error)
{
  gboolean ok = TRUE;

  for (guint i = 0; i < json_array_get_length (before); i++) {
    JsonObject *entry = json_array_get_object_element (before, i);
    g_autofree gchar *path = g_build_filename (dir, json_object_get_string_member (entry, "name"), NULL);
    g_autoptr(GError) local_error = NULL;

    if (!g_file_test (path, G_FILE_TEST_EXISTS))
      continue;
    if (!restore_state (dir, entry, &local_error)) {
      g_warning ("%s", local_error->message);
      if (ok)
        g_propagate_error (error, g_steal_pointer (&local_error));
      ok = FALSE;
    }
  }
  return ok;
}

static gboolean
seal_files (const gchar *dir, JsonArray *before, gboolean *immutable, GError **error)
{
  for (guint i = 0; i < json_array_get_length (before); i++) {
    JsonObject *entry = json_array_get_object_element (before, i);
    g_autofree gchar *path = g_build_filename (dir, json_object_get_string_member (entry, "name"), NULL);
    gboolean flag_set = FALSE;

    if (!set_node_state (path, SEALED_MODE, 0, 0, TRUE, &flag_set, error))
      return FALSE;
    if (!flag_set)
      *immutable = FALSE;
  }
  return TRUE;
}

static gchar *
hash_build_log (const gchar *dir, GCancellable *c)
{
  g_autofree gchar *path = g_build_filename (dir, BUILD_LOG, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return g_strdup ("");
  return hash_file (path, c, NULL);
}

/* A saved session's origin, in the manifest itself: parent, its digest,
 * the session, and the digest of the full record (lineage.json). */
static gboolean
add_lineage (JsonObject *m, const gchar *dir, GCancellable *c, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, LINEAGE, NULL);
  g_autoptr(JsonObject) lineage = NULL;
  g_autoptr(JsonObject) summary = json_object_new ();
  g_autofree gchar *sha = NULL;
  const gchar *keys[] = { "parent", "parent-digest", "session", NULL };

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return TRUE;
  lineage = read_json_object (path, error);
  sha = lineage != NULL ? hash_file (path, c, error) : NULL;
  if (sha == NULL)
    return FALSE;
  for (guint i = 0; keys[i] != NULL; i++)
    json_object_set_string_member (summary, keys[i], json_object_get_string_member_with_default (lineage, keys[i], ""));
  json_object_set_boolean_member (summary, "memory", json_object_get_boolean_member_with_default (lineage, "memory", FALSE));
  json_object_set_int_member (summary, "commands-total", json_object_get_int_member_with_default (lineage, "commands-total", 0));
  json_object_set_string_member (summary, "sha256", sha);
  json_object_set_object_member (m, "lineage", g_steal_pointer (&summary));
  return TRUE;
}

static JsonObject *
build_manifest (VdImage *self, JsonObject *info, GCancellable *c, GError **error)
{
  g_autoptr(JsonObject) m = json_object_new ();
  g_autoptr(JsonObject) meta = NULL;
  g_autofree gchar *metadata = g_build_filename (self->dir, METADATA, NULL);
  g_autofree gchar *digest = NULL;
  g_autofree gchar *log_sha = NULL;
  JsonArray *files;

  files = describe_boot_files (self->dir, TRUE, &digest, c, error);
  if (files == NULL)
    return NULL;
  meta = read_json_object (metadata, NULL);
  log_sha = hash_build_log (self->dir, c);
  json_object_set_int_member (m, "schema", 1);
  json_object_set_string_member (m, "name", self->name);
  json_object_set_string_member (m, "digest", digest);
  json_object_set_string_member (m, "format", json_object_get_string_member_with_default (info, "format", ""));
  json_object_set_int_member (m, "virtual-size", json_object_get_int_member_with_default (info, "virtual-size", 0));
  json_object_set_int_member (m, "size", (gint64) dir_size (self->dir));
  json_object_set_string_member (m, "recipe", meta != NULL ? json_object_get_string_member_with_default (meta, "recipe", "") : "");
  json_object_set_int_member (m, "created-at", meta != NULL ? json_object_get_int_member_with_default (meta, "created-at", 0) : 0);
  json_object_set_string_member (m, "build-log-sha256", log_sha != NULL ? log_sha : "");
  if (!add_lineage (m, self->dir, c, error))
    return NULL;
  json_object_set_int_member (m, "frozen-at", g_get_real_time ());
  json_object_set_array_member (m, "files", files);
  return g_steal_pointer (&m);
}

/* The stat data recorded after sealing lets the start path skip the full
 * re-hash while nothing about the files changed. The files were hashed
 * before they were sealed: one that changed meanwhile fails the freeze. */
static gboolean
record_stat (JsonObject *manifest, const gchar *dir, GError **error)
{
  JsonArray *files = json_object_get_array_member (manifest, "files");
  const gchar *same[] = { "size", "inode", "mtime-ns", NULL };

  for (guint i = 0; i < json_array_get_length (files); i++) {
    JsonObject *entry = json_array_get_object_element (files, i);
    const gchar *name = json_object_get_string_member (entry, "name");
    g_autoptr(JsonObject) now = describe_file (dir, name, FALSE, NULL, error);

    if (now == NULL)
      return FALSE;
    for (guint k = 0; same[k] != NULL; k++) {
      if (json_object_get_int_member (now, same[k]) != json_object_get_int_member (entry, same[k])) {
        g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                     "%s changed while the image was being frozen", name);
        return FALSE;
      }
    }
    json_object_set_int_member (entry, "ctime-ns", json_object_get_int_member (now, "ctime-ns"));
  }
  return TRUE;
}

/* The journal: the manifest as it will be, plus what to put back. */
static gboolean
write_pending (const gchar *dir, JsonObject *manifest, JsonArray *before, JsonObject *dir_before, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, PENDING, NULL);
  g_autoptr(JsonObject) journal = json_object_new ();
  g_autofree gchar *text = NULL;

  json_object_set_object_member (journal, "manifest", json_object_ref (manifest));
  json_object_set_array_member (journal, "before", json_array_ref (before));
  json_object_set_object_member (journal, "dir-before", json_object_ref (dir_before));
  text = json_text (journal);
  return vd_fs_write_durably (path, text, 0600, error);
}

/* What follows the commit point; also how vd_image_load finishes a freeze
 * that a crash interrupted after it. The pending file goes last, so that
 * until then a crash still rolls forward. */
static gboolean
finish_seal (const gchar *dir, gboolean immutable, GError **error)
{
  g_autofree gchar *manifest = g_build_filename (dir, MANIFEST, NULL);
  g_autofree gchar *pending = g_build_filename (dir, PENDING, NULL);
  g_autofree gchar *self_dir = g_build_filename (dir, ".", NULL);

  if (!set_node_state (manifest, SEALED_MODE, 0, 0, immutable, NULL, error) ||
      !set_node_state (self_dir, SEALED_DIR, 0, 0, FALSE, NULL, error))
    return FALSE;
  if (g_unlink (pending) != 0 && errno != ENOENT)
    return vd_fs_set_error_errno (error, errno, "Cannot remove %s", pending);
  return vd_fs_fsync_dir (dir, error);
}

static gboolean
seal_and_commit (const gchar *dir, JsonObject *manifest, JsonArray *before, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, MANIFEST, NULL);
  g_autofree gchar *text = NULL;
  gboolean immutable = TRUE;

  if (!seal_files (dir, before, &immutable, error) || !record_stat (manifest, dir, error))
    return FALSE;
  json_object_set_boolean_member (manifest, "immutable", immutable);
  text = json_text (manifest);
  if (!vd_fs_write_durably (path, text, SEALED_MODE, error))
    return FALSE;
  return finish_seal (dir, immutable, error);
}

static gboolean
remove_node (const gchar *path, GError **error)
{
  if (g_file_test (path, G_FILE_TEST_EXISTS) && !set_node_state (path, 0600, 0, 0, FALSE, NULL, error))
    return FALSE;
  if (g_unlink (path) != 0 && errno != ENOENT)
    return vd_fs_set_error_errno (error, errno, "Cannot remove %s", path);
  return TRUE;
}

/* Back to what it was before the freeze began: no manifest, every file
 * with its old mode, owner and flag, the directory as it was. */
static gboolean
undo_freeze (const gchar *dir, JsonArray *before, JsonObject *dir_before, GError **error)
{
  g_autofree gchar *manifest = g_build_filename (dir, MANIFEST, NULL);
  g_autofree gchar *manifest_tmp = g_build_filename (dir, MANIFEST ".tmp", NULL);
  g_autofree gchar *pending = g_build_filename (dir, PENDING, NULL);
  g_autofree gchar *pending_tmp = g_build_filename (dir, PENDING ".tmp", NULL);

  /* The directory first: root may write in it anyway, but its old mode is
   * part of "as it was". */
  return restore_state (dir, dir_before, error) &&
         remove_node (manifest, error) && remove_node (manifest_tmp, error) &&
         restore_files (dir, before, error) &&
         remove_node (pending, error) && remove_node (pending_tmp, error) &&
         vd_fs_fsync_dir (dir, error);
}

static gboolean
freeze_files (VdImage *self, JsonObject *manifest, GError **error)
{
  g_autoptr(JsonArray) before = NULL;
  g_autoptr(JsonObject) dir_before = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GError) undo_error = NULL;

  before = capture_before (self->dir, &local_error);
  if (before != NULL)
    dir_before = describe_state (self->dir, ".", &local_error);
  if (dir_before == NULL || !write_pending (self->dir, manifest, before, dir_before, &local_error)) {
    g_set_error (error, VIVARIUM_ERROR, local_error->code,
                 "Cannot freeze the image “%s”: %s. Nothing was changed.", self->name, local_error->message);
    return FALSE;
  }
  if (seal_and_commit (self->dir, manifest, before, &local_error))
    return TRUE;
  if (!undo_freeze (self->dir, before, dir_before, &undo_error)) {
    g_set_error (error, VIVARIUM_ERROR, local_error->code,
                 "Cannot freeze the image “%s”: %s. Undoing it failed too (%s); the daemon tries again when it next starts.",
                 self->name, local_error->message, undo_error->message);
    return FALSE;
  }
  g_set_error (error, VIVARIUM_ERROR, local_error->code,
               "Cannot freeze the image “%s”: %s. Nothing was changed.", self->name, local_error->message);
  return FALSE;
}

static void
freeze_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *c)
{
  VdImage *self = VD_IMAGE (source);
  g_autofree gchar *disk = g_build_filename (self->dir, "disk.qcow2", NULL);
  g_autoptr(JsonObject) info = NULL;
  g_autoptr(JsonObject) manifest = NULL;
  GError *error = NULL;

  info = vd_image_query_disk (disk, &error);
  if (info == NULL) {
    g_task_return_error (task, error);
    return;
  }
  if (json_object_has_member (info, "backing-filename")) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                             "The disk has a backing file; only self-contained disks can be frozen");
    return;
  }
  manifest = build_manifest (self, info, c, &error);
  if (manifest == NULL || !freeze_files (self, manifest, &error)) {
    vivarium_error_convert (&error);
    g_task_return_error (task, error);
    return;
  }
  g_task_return_pointer (task, g_steal_pointer (&manifest), (GDestroyNotify) json_object_unref);
}

static void
seal_async (VdImage *self, GCancellable *c, GAsyncReadyCallback cb, gpointer data)
{
  g_autoptr(GTask) task = g_task_new (self, c, cb, data);

  if (self->manifest != NULL) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                             "The image “%s” is already frozen", self->name);
    return;
  }
  /* Two freezes at once would each undo the other's work. The one that
   * took the boot snapshot goes on to seal it. */
  if (self->snapshotting) {
    self->snapshotting = FALSE;
  } else if (self->freezing) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                             "The image “%s” is being frozen already", self->name);
    return;
  }
  self->freezing = TRUE;
  g_task_set_source_tag (task, seal_async);
  g_task_run_in_thread (task, freeze_thread);
}

static gboolean
seal_finish (VdImage *self, GAsyncResult *res, GError **error)
{
  JsonObject *manifest;

  /* Only a task that ran the thread held the flag. */
  if (g_task_get_source_tag (G_TASK (res)) == seal_async)
    self->freezing = FALSE;
  manifest = g_task_propagate_pointer (G_TASK (res), error);
  if (manifest == NULL) {
    g_autoptr(GError) local_error = NULL;
    if (self->manifest == NULL && !self->freezing && !remove_snapshot_files (self->dir, &local_error))
      vd_log_image (G_LOG_LEVEL_WARNING, self->name, "image %s: %s", self->name, local_error->message);
    return FALSE;
  }
  self->manifest = manifest;
  load_snapshot (self);
  update_skeleton (self, NULL, manifest);
  vd_log_image (G_LOG_LEVEL_INFO, self->name, "froze image %s: %s", self->name,
                json_object_get_string_member (manifest, "digest"));
  return TRUE;
}

static void
sealed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  GError *error = NULL;

  if (!seal_finish (VD_IMAGE (source), res, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

static void
snapshot_taken_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdImage *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!self->take_snapshot_finish (res, &error, self->snapshot_data)) {
    vd_image_snapshot_abort (self);
    g_prefix_error (&error, "Cannot freeze the image “%s”: the boot snapshot failed (nothing was changed; "
                    "BootSnapshots=false in the configuration freezes without one): ", self->name);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  seal_async (self, NULL, sealed_cb, task);
}

/* With a snapshotter (boot snapshots on), the image boots once before it
 * is sealed, and the saved guest is sealed with it (see the XML); an image
 * that already carries one (a paused session saved with its memory) is
 * sealed as it is. Only a direct-kernel-boot image (what the builder
 * makes, guest agent included) is known to reach a guest agent; an
 * imported disk may never answer, and boots cold. */
void
vd_image_freeze_async (VdImage *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);
  g_autofree gchar *state = vd_image_get_file (self, "boot.state");
  g_autofree gchar *kernel = vd_image_get_file (self, "vmlinuz");
  GError *error = NULL;

  if (self->take_snapshot == NULL || vd_image_is_frozen (self) || state != NULL || kernel == NULL) {
    seal_async (self, NULL, sealed_cb, task);
    return;
  }
  if (!vd_image_snapshot_begin (self, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  self->take_snapshot (self, NULL, snapshot_taken_cb, task, self->snapshot_data);
}

gboolean
vd_image_freeze_finish (VdImage *self, GAsyncResult *res, GError **error)
{
  return g_task_propagate_boolean (G_TASK (res), error);
}

static void
freeze_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  GError *error = NULL;

  if (!vd_image_freeze_finish (VD_IMAGE (source), res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_freeze (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  vd_image_freeze_async (VD_IMAGE (user_data), freeze_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* The journal names only files a freeze seals, so that undoing it can
 * never change anything outside the image. */
static gboolean
state_is_whole (JsonNode *node)
{
  const gchar *keys[] = { "name", "mode", "uid", "gid", "immutable", NULL };

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return FALSE;
  for (guint i = 0; keys[i] != NULL; i++) {
    if (!json_object_has_member (json_node_get_object (node), keys[i]))
      return FALSE;
  }
  return TRUE;
}

static gboolean
journal_is_sane (JsonObject *journal, GError **error)
{
  JsonNode *before = json_object_get_member (journal, "before");
  JsonNode *dir_before = json_object_get_member (journal, "dir-before");

  if (before == NULL || !JSON_NODE_HOLDS_ARRAY (before) || !state_is_whole (dir_before) ||
      g_strcmp0 (json_object_get_string_member_with_default (json_node_get_object (dir_before), "name", ""), ".") != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "its journal is not one the daemon wrote");
    return FALSE;
  }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (before)); i++) {
    JsonNode *node = json_array_get_element (json_node_get_array (before), i);
    const gchar *name = state_is_whole (node) ?
      json_object_get_string_member_with_default (json_node_get_object (node), "name", "") : "";

    if (!g_strv_contains (boot_files, name) && !g_strv_contains (sealed_extra, name)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "its journal names “%s”, which a freeze never seals", name);
      return FALSE;
    }
  }
  return TRUE;
}

/* A freeze a crash interrupted (see above): settled before the image is
 * shown, so that it is either frozen whole or not frozen at all. */
static gboolean
recover_freeze (const gchar *dir, const gchar *name, GError **error)
{
  g_autofree gchar *pending = g_build_filename (dir, PENDING, NULL);
  g_autofree gchar *manifest = g_build_filename (dir, MANIFEST, NULL);
  g_autoptr(JsonObject) journal = NULL;
  g_autoptr(JsonObject) m = NULL;

  if (!g_file_test (pending, G_FILE_TEST_EXISTS))
    return TRUE;
  if (g_file_test (manifest, G_FILE_TEST_EXISTS)) {
    m = read_json_object (manifest, error);
    if (m == NULL || !finish_seal (dir, json_object_get_boolean_member_with_default (m, "immutable", FALSE), error))
      return FALSE;
    vd_log_image (G_LOG_LEVEL_WARNING, name, "finished the freeze of %s that was interrupted", name);
    return TRUE;
  }
  /* The pending file is renamed into place whole, so one that cannot be
   * read is damage, not an interrupted write: leave it for a person. */
  journal = read_json_object (pending, error);
  if (journal == NULL || !journal_is_sane (journal, error)) {
    g_prefix_error (error, "Cannot undo the interrupted freeze of %s: ", dir);
    return FALSE;
  }
  if (!undo_freeze (dir, json_object_get_array_member (journal, "before"),
                    json_object_get_object_member (journal, "dir-before"), error))
    return FALSE;
  vd_log_image (G_LOG_LEVEL_WARNING, name, "rolled back the freeze of %s that was interrupted", name);
  return TRUE;
}

/* --- verification ---------------------------------------------------- */

static gboolean
stat_unchanged (JsonObject *manifest, const gchar *dir)
{
  JsonArray *files = json_object_get_array_member (manifest, "files");
  const gchar *keys[] = { "size", "inode", "mtime-ns", "ctime-ns", NULL };

  for (guint i = 0; i < json_array_get_length (files); i++) {
    JsonObject *entry = json_array_get_object_element (files, i);
    g_autoptr(JsonObject) now = describe_file (dir, json_object_get_string_member (entry, "name"), FALSE, NULL, NULL);
    if (now == NULL)
      return FALSE;
    for (guint k = 0; keys[k] != NULL; k++) {
      if (json_object_get_int_member (now, keys[k]) != json_object_get_int_member_with_default (entry, keys[k], -1))
        return FALSE;
    }
  }
  return TRUE;
}

static void
verify_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *c)
{
  VdImage *self = VD_IMAGE (source);
  gboolean full = GPOINTER_TO_INT (task_data);
  const gchar *want = json_object_get_string_member (self->manifest, "digest");
  g_autofree gchar *digest = NULL;
  g_autoptr(JsonArray) files = NULL;
  GError *error = NULL;

  if (!full && stat_unchanged (self->manifest, self->dir)) {
    g_task_return_boolean (task, TRUE);
    return;
  }
  files = describe_boot_files (self->dir, TRUE, &digest, c, &error);
  if (files == NULL) {
    g_task_return_error (task, error);
    return;
  }
  if (g_strcmp0 (digest, want) != 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                             "The image “%s” no longer matches its frozen digest (%s, now %s)",
                             self->name, want, digest);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

void
vd_image_verify_async (VdImage *self, gboolean full, GCancellable *c, GAsyncReadyCallback cb, gpointer data)
{
  g_autoptr(GTask) task = g_task_new (self, c, cb, data);

  if (self->manifest == NULL) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FROZEN,
                             "The image “%s” is not frozen", self->name);
    return;
  }
  g_task_set_task_data (task, GINT_TO_POINTER (full), NULL);
  g_task_run_in_thread (task, verify_thread);
}

gboolean
vd_image_verify_finish (VdImage *self, GAsyncResult *res, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (g_task_propagate_boolean (G_TASK (res), &local_error))
    return TRUE;
  if (g_error_matches (local_error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH))
    vd_log_image (G_LOG_LEVEL_WARNING, self->name, "%s", local_error->message);
  g_propagate_error (error, g_steal_pointer (&local_error));
  return FALSE;
}

static void
verify_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = vd_image_verify_finish (VD_IMAGE (source), res, &error);

  /* A mismatch is the answer (false), not a failure of the call. */
  if (!ok && !g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH)) {
    g_dbus_method_invocation_return_gerror (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(b)", ok));
}

static gboolean
handle_verify (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  vd_image_verify_async (VD_IMAGE (user_data), TRUE, NULL, verify_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- deletion -------------------------------------------------------- */

/* The files go here; the store hears "deleted" and takes the object off
 * the bus and out of its list. */
static gboolean
handle_delete (VivariumDBusImage *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  g_autoptr(VdImage) self = g_object_ref (VD_IMAGE (user_data));
  GError *error = NULL;

  if (!vd_image_delete (self, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_image_complete_delete (iface, invocation);
  g_signal_emit (self, signals[SIGNAL_DELETED], 0);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

gboolean
vd_image_delete (VdImage *self, GError **error)
{
  g_autoptr(GDir) dir = NULL;
  const gchar *name;

  if (vd_image_is_in_use (self)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                 "The image “%s” is used by %u session(s)", self->name, self->users->len);
    return FALSE;
  }
  if (self->freezing) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY, "The image “%s” is being frozen", self->name);
    return FALSE;
  }
  dir = g_dir_open (self->dir, 0, error);
  if (dir == NULL) {
    vivarium_error_convert (error);
    return FALSE;
  }
  if (chmod (self->dir, 0755) != 0)
    g_debug ("chmod %s: %s", self->dir, g_strerror (errno));
  while ((name = g_dir_read_name (dir)) != NULL) {
    g_autofree gchar *path = g_build_filename (self->dir, name, NULL);
    /* Only to lift the immutable flag; a link or a directory just fails. */
    set_node_state (path, 0600, 0, 0, FALSE, NULL, NULL);
    if (g_unlink (path) != 0)
      return vd_fs_set_error_errno (error, errno, "Cannot remove %s", path);
  }
  if (g_rmdir (self->dir) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot remove %s", self->dir);
  vd_log_image (G_LOG_LEVEL_INFO, self->name, "deleted image %s", self->name);
  return TRUE;
}
