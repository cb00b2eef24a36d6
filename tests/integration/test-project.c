/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Project datasets for real: ext4 images loop-mounted (and a btrfs
 * filesystem the test makes, for the subvolume backend), real libgit2,
 * the git CLI to inspect what was committed. Run through
 * run-in-mount-ns.sh (root, a private mount namespace, a scratch dir).
 *
 * A "worker" here is a shell run as an unprivileged uid with setpriv,
 * writing into the working tree between grant and revoke, as a session's
 * QEMU would through virtio-9p.
 */
#define G_LOG_DOMAIN "TestProject"

#include "config.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-project.h"

#define WORKER_UID  61234
#define QUOTA       (32 * 1024 * 1024)

static gchar *scratch;
static gchar *projects_dir;
static gchar *keys_dir;

/* ---- helpers ----------------------------------------------------------- */

static gint
run (gchar **out, gchar **err, const gchar * const *argv)
{
  g_autoptr(GError) error = NULL;
  gint status = -1;

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               out, err, &status, &error));
  g_assert_no_error (error);
  return g_spawn_check_wait_status (status, NULL) ? 0 : (WIFEXITED (status) ? WEXITSTATUS (status) : 255);
}

static gchar *
run_ok (const gchar * const *argv)
{
  gchar *out = NULL;
  g_autofree gchar *err = NULL;
  gint rc = run (&out, &err, argv);

  if (rc != 0)
    g_error ("%s failed (%d): %s", argv[0], rc, err);
  return out;
}

static gchar *
git (VdProject *p, const gchar *a1, const gchar *a2, const gchar *a3, const gchar *a4)
{
  g_autofree gchar *gd = g_strconcat ("--git-dir=", vd_project_get_repo_path (p), NULL);
  const gchar *argv[] = { "git", gd, a1, a2, a3, a4, NULL };
  return run_ok (argv);
}

/* The worker: a shell as WORKER_UID in the working tree. */
static gint
worker_sh (VdProject *p, const gchar *script, gchar **err)
{
  const gchar *argv[] = { "setpriv", "--reuid=61234", "--regid=61234", "--clear-groups",
                          "sh", "-c", script, "worker", vd_project_get_work_path (p), NULL };
  g_autofree gchar *out = NULL;
  return run (&out, err, argv);
}

static void
put (VdProject *p, const gchar *rel, const gchar *text)
{
  g_autofree gchar *path = g_build_filename (vd_project_get_work_path (p), rel, NULL);
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

/* What a failed or undone operation must leave exactly as it was: the
 * projects and keys dirs, the mounts and the loop devices under scratch. */
static gchar *
snapshot (void)
{
  const gchar *mounts[] = { "findmnt", "--raw", "--noheadings", "-o", "TARGET", NULL };
  const gchar *loops[] = { "losetup", "--noheadings", "-O", "BACK-FILE", "--list", NULL };
  g_autofree gchar *m = run_ok (mounts);
  g_autofree gchar *l = run_ok (loops);
  g_autoptr(GString) s = g_string_new (NULL);
  g_auto(GStrv) ml = g_strsplit (m, "\n", -1);
  g_auto(GStrv) ll = g_strsplit (l, "\n", -1);
  g_autoptr(GDir) d1 = g_dir_open (projects_dir, 0, NULL);
  g_autoptr(GDir) d2 = g_dir_open (keys_dir, 0, NULL);
  const gchar *n;

  for (guint i = 0; ml[i] != NULL; i++)
    if (strstr (ml[i], scratch) != NULL)
      g_string_append_printf (s, "mount %s\n", ml[i]);
  for (guint i = 0; ll[i] != NULL; i++)
    if (strstr (ll[i], scratch) != NULL)
      g_string_append_printf (s, "loop %s\n", ll[i]);
  while (d1 != NULL && (n = g_dir_read_name (d1)) != NULL)
    g_string_append_printf (s, "project-dir %s\n", n);
  while (d2 != NULL && (n = g_dir_read_name (d2)) != NULL)
    g_string_append_printf (s, "key %s\n", n);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static VdProject *
make_project (const gchar *name, GVariant *options)
{
  g_autoptr(GError) error = NULL;
  VdProject *p = vd_project_create (projects_dir, keys_dir, name, QUOTA, options, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (p);
  return p;
}

static void
async_done (GObject *source, GAsyncResult *res, gpointer data)
{
  *(GAsyncResult **) data = g_object_ref (res);
}

static GAsyncResult *
wait_async (GAsyncResult **slot)
{
  while (*slot == NULL)
    g_main_context_iteration (NULL, TRUE);
  return *slot;
}

static void
drop_project (VdProject *p)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_project_delete (p, &error));
  g_assert_no_error (error);
  g_object_unref (p);
}

static void
do_grant (VdProject *p)
{
  g_autoptr(GError) error = NULL;
  g_assert_true (vd_project_grant (p, WORKER_UID, &error));
  g_assert_no_error (error);
}

static void
do_revoke (VdProject *p)
{
  g_autoptr(GError) error = NULL;
  g_assert_true (vd_project_revoke (p, &error));
  g_assert_no_error (error);
}

static gchar *
commit (VdProject *p, const gchar *message, GPtrArray **changes)
{
  g_autoptr(GError) error = NULL;
  gchar *id = NULL;

  g_assert_true (vd_project_commit (p, message, &id, changes, &error));
  g_assert_no_error (error);
  return id;
}

static gchar *
head (VdProject *p)
{
  g_autoptr(GError) error = NULL;
  gchar *h = vd_project_get_head (p, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (strlen (h), ==, 40);
  return h;
}

static const VdChange *
find_change (GPtrArray *changes, const gchar *path)
{
  for (guint i = 0; i < changes->len; i++) {
    const VdChange *c = changes->pdata[i];
    if (g_strcmp0 (c->path, path) == 0)
      return c;
  }
  g_error ("no change for %s", path);
  return NULL;
}

static void
assert_change (GPtrArray *changes, const gchar *path, VdChangeStatus status, VdChangeKind kind,
               guint64 added, guint64 removed)
{
  const VdChange *c = find_change (changes, path);

  g_assert_cmpstr (vd_change_status_to_string (c->status), ==, vd_change_status_to_string (status));
  g_assert_cmpstr (vd_change_kind_to_string (c->kind), ==, vd_change_kind_to_string (kind));
  g_assert_cmpuint (c->lines_added, ==, added);
  g_assert_cmpuint (c->lines_removed, ==, removed);
}

static gboolean
is_mountpoint (const gchar *path)
{
  const gchar *argv[] = { "findmnt", "--mountpoint", path, NULL };
  g_autofree gchar *out = NULL, *err = NULL;
  return run (&out, &err, argv) == 0;
}

static gchar *
sha256_of (const gchar *path)
{
  g_autofree gchar *text = NULL;
  gsize len = 0;

  g_assert_true (g_file_get_contents (path, &text, &len, NULL));
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text, len);
}

/* Every file under the repository's hooks dir with its digest. */
static gchar *
hooks_state (VdProject *p)
{
  g_autofree gchar *hooks = g_build_filename (vd_project_get_repo_path (p), "hooks", NULL);
  const gchar *argv[] = { "sh", "-c", "cd \"$1\" && find . -print0 | sort -z | xargs -0 ls -ld --time-style=+; "
                          "find . -type f -print0 | sort -z | xargs -0 -r sha256sum", "sh", hooks, NULL };
  return run_ok (argv);
}

/* ---- tests ------------------------------------------------------------- */

static VdProject *
make_project_async (const gchar *name)
{
  g_autoptr(GAsyncResult) res = NULL;
  g_autoptr(GError) error = NULL;
  VdProject *p;

  vd_project_create_async (projects_dir, keys_dir, name, QUOTA, NULL, NULL, NULL, async_done, &res);
  p = vd_project_create_finish (wait_async (&res), &error);
  g_assert_no_error (error);
  return p;
}

static void
test_create_layout (void)
{
  g_autoptr(VdProject) p = make_project_async ("alpha");
  g_autofree gchar *dotgit = g_build_filename (vd_project_get_work_path (p), ".git", NULL);
  g_autofree gchar *img = g_build_filename (projects_dir, "alpha", "dataset.img", NULL);
  g_autofree gchar *record = g_build_filename (projects_dir, "alpha", "project.json", NULL);
  g_autofree gchar *key = g_build_filename (keys_dir, "project-alpha", NULL);
  const gchar *opts[] = { "findmnt", "-n", "-o", "OPTIONS,FSTYPE,SOURCE", "--mountpoint", vd_project_get_work_path (p), NULL };
  const gchar *loops[] = { "losetup", "-n", "-O", "NAME", "-j", img, NULL };
  g_autofree gchar *mnt = run_ok (opts);
  g_autofree gchar *loop = run_ok (loops);
  g_autofree gchar *record_text = NULL;
  g_autofree gchar *deploy = NULL;
  g_autofree gchar *h = head (p);
  g_autofree gchar *count = git (p, "rev-list", "--count", "HEAD", NULL);
  g_autoptr(GError) error = NULL;
  struct statvfs sv;
  struct stat st;

  g_assert_cmpint (vd_project_get_backend (p), ==, VD_DATASET_BACKEND_EXT4);
  g_assert_true (is_mountpoint (vd_project_get_work_path (p)));
  g_assert_nonnull (strstr (mnt, "nosuid"));
  g_assert_nonnull (strstr (mnt, "nodev"));
  g_assert_nonnull (strstr (mnt, "noexec"));
  g_assert_nonnull (strstr (mnt, "ext4"));
  g_assert_nonnull (strstr (mnt, "/dev/loop"));
  g_assert_cmpuint (strlen (g_strstrip (loop)), >, 0);
  /* The filesystem is the quota: its size, less ext4's own metadata. */
  g_assert_cmpint (statvfs (vd_project_get_work_path (p), &sv), ==, 0);
  g_assert_cmpuint ((guint64) sv.f_blocks * sv.f_frsize, <=, QUOTA);
  g_assert_cmpuint ((guint64) sv.f_blocks * sv.f_frsize, >, QUOTA / 10 * 8);
  /* The image is allocated, not sparse. */
  g_assert_cmpint (stat (img, &st), ==, 0);
  g_assert_cmpuint ((guint64) st.st_blocks * 512, >=, QUOTA);
  g_assert_false (g_file_test (dotgit, G_FILE_TEST_EXISTS));
  g_assert_cmpint (stat (vd_project_get_repo_path (p), &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpint (stat (vd_project_get_work_path (p), &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpint (st.st_uid, ==, 0);
  /* HEAD is born: one empty commit by the daemon. */
  g_assert_cmpstr (g_strstrip (count), ==, "1");
  g_assert_true (g_file_get_contents (record, &record_text, NULL, NULL));
  g_assert_nonnull (strstr (record_text, "\"name\" : \"alpha\""));
  g_assert_nonnull (strstr (record_text, "\"backend\" : \"ext4\""));
  g_assert_nonnull (strstr (record_text, "\"quota_bytes\" : 33554432"));
  g_assert_cmpint (stat (record, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  deploy = vd_project_get_deploy_key (p, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (deploy, "ssh-ed25519 "));
  g_assert_true (g_str_has_suffix (deploy, " vivarium-project-alpha"));
  g_assert_cmpint (stat (key, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0600);
  drop_project (g_steal_pointer (&p));
}

static void
test_quota_enospc (void)
{
  g_autoptr(VdProject) p = make_project ("quota", NULL);
  g_autofree gchar *err = NULL;
  g_autoptr(GError) error = NULL;
  struct statvfs before, after;
  guint64 used = 0;
  gint rc;

  g_assert_cmpint (statvfs (scratch, &before), ==, 0);
  do_grant (p);
  rc = worker_sh (p, "dd if=/dev/zero of=\"$1/big\" bs=1M count=64 status=none", &err);
  g_assert_cmpint (rc, !=, 0);
  g_assert_nonnull (strstr (err, "No space left on device"));
  /* The host's filesystem paid nothing for the guest's attempt: the image
   * was allocated when the project was made. */
  g_assert_cmpint (statvfs (scratch, &after), ==, 0);
  g_assert_cmpuint ((guint64) after.f_bavail * after.f_frsize + 4 * 1024 * 1024, >=,
                    (guint64) before.f_bavail * before.f_frsize);
  g_assert_true (vd_project_get_used_bytes (p, &used, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (used, >, QUOTA / 2);
  /* The project itself still works: the repository is not in the dataset. */
  g_assert_cmpint (worker_sh (p, "rm -f \"$1/big\" && echo ok > \"$1/small\"", NULL), ==, 0);
  do_revoke (p);
  g_free (commit (p, "after the quota", NULL));
  drop_project (g_steal_pointer (&p));
}

static void
test_grant_revoke (void)
{
  g_autoptr(VdProject) p = make_project ("access", NULL);
  g_autofree gchar *host_file = g_build_filename (scratch, "host-file", NULL);
  g_autofree gchar *link = g_build_filename (vd_project_get_work_path (p), "link", NULL);
  g_autofree gchar *f = g_build_filename (vd_project_get_work_path (p), "f", NULL);
  g_autofree gchar *script = g_strdup_printf ("ls \"%s\"", vd_project_get_repo_path (p));
  struct stat st;

  put (p, "f", "data\n");
  g_assert_true (g_file_set_contents (host_file, "host\n", -1, NULL));
  g_assert_cmpint (symlink (host_file, link), ==, 0);
  /* Before the grant the worker cannot even enter. */
  g_assert_cmpint (worker_sh (p, "ls \"$1\"", NULL), !=, 0);
  do_grant (p);
  g_assert_cmpint (stat (vd_project_get_work_path (p), &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, WORKER_UID);
  g_assert_cmpint (stat (f, &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, WORKER_UID);
  /* The link was changed, not what it points at. */
  g_assert_cmpint (lstat (link, &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, WORKER_UID);
  g_assert_cmpint (stat (host_file, &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, 0);
  g_assert_cmpint (worker_sh (p, "echo more >> \"$1/f\"", NULL), ==, 0);
  /* Never the repository. */
  g_assert_cmpint (worker_sh (p, script, NULL), !=, 0);
  do_revoke (p);
  g_assert_cmpint (stat (f, &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, 0);
  g_assert_cmpint (stat (vd_project_get_work_path (p), &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpint (worker_sh (p, "echo more >> \"$1/f\"", NULL), !=, 0);
  g_unlink (host_file);
  drop_project (g_steal_pointer (&p));
}

static void
test_change_set (void)
{
  g_autoptr(VdProject) p = make_project ("changes", NULL);
  g_autoptr(GPtrArray) computed = NULL;
  g_autoptr(GPtrArray) committed = NULL;
  g_autoptr(GPtrArray) none = NULL;
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *base = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *again = NULL;
  g_autofree gchar *numstat = NULL;
  g_autofree gchar *stat_text = NULL;
  g_autofree gchar *author = NULL;
  g_autofree gchar *h = NULL;

  put (p, "a.txt", "1\n2\n3\n");
  put (p, "b.txt", "x\n");
  put (p, "c.txt", "gone\n");
  base = commit (p, "seed", NULL);

  do_grant (p);
  g_assert_cmpint (worker_sh (p, "cd \"$1\" && printf '1\\nTWO\\n3\\n4\\n' > a.txt && printf 'x\\ny\\n' > b.txt "
                                 "&& rm c.txt && printf 'new\\nfile\\n' > d.txt", NULL), ==, 0);
  do_revoke (p);

  computed = vd_project_compute_changes (p, base, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (computed->len, ==, 4);
  assert_change (computed, "a.txt", VD_CHANGE_MODIFIED, VD_CHANGE_KIND_FILE, 2, 1);
  assert_change (computed, "b.txt", VD_CHANGE_MODIFIED, VD_CHANGE_KIND_FILE, 1, 0);
  assert_change (computed, "c.txt", VD_CHANGE_DELETED, VD_CHANGE_KIND_FILE, 0, 1);
  assert_change (computed, "d.txt", VD_CHANGE_ADDED, VD_CHANGE_KIND_FILE, 2, 0);

  {
    g_autoptr(GAsyncResult) res = NULL;
    vd_project_commit_async (p, "task t1: two modified, one added, one deleted", 0, 60, NULL, async_done, &res);
    g_assert_true (vd_project_commit_finish (p, wait_async (&res), &id, &committed, &error));
    g_assert_no_error (error);
  }
  g_assert_cmpuint (committed->len, ==, 4);
  assert_change (committed, "c.txt", VD_CHANGE_DELETED, VD_CHANGE_KIND_FILE, 0, 1);
  h = head (p);
  g_assert_cmpstr (id, ==, h);
  g_assert_cmpstr (id, !=, base);

  numstat = git (p, "show", "--numstat", "--format=", "HEAD");
  g_assert_cmpstr (numstat, ==, "2\t1\ta.txt\n1\t0\tb.txt\n0\t1\tc.txt\n2\t0\td.txt\n");
  stat_text = git (p, "show", "--stat", "--format=", "HEAD");
  g_assert_nonnull (strstr (stat_text, "4 files changed, 5 insertions(+), 2 deletions(-)"));
  author = git (p, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", "HEAD");
  g_assert_cmpstr (author, ==, "Vivarium <vivarium@localhost>|Vivarium <vivarium@localhost>|"
                               "task t1: two modified, one added, one deleted\n");

  /* Nothing changed: no empty commit, HEAD stays. */
  again = commit (p, "nothing", &none);
  g_assert_cmpstr (again, ==, id);
  g_assert_cmpuint (none->len, ==, 0);

  log = vd_project_log (p, 10, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (log->len, ==, 3);
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[0])->id, ==, id);
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[0])->subject, ==, "task t1: two modified, one added, one deleted");
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[0])->author, ==, "Vivarium <vivarium@localhost>");
  g_assert_cmpint (((VdCommitInfo *) log->pdata[0])->time_us, >, 0);
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[1])->id, ==, base);

  /* A bad base commit is refused, typed. */
  g_clear_pointer (&computed, g_ptr_array_unref);
  computed = vd_project_compute_changes (p, "not-a-commit", &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_assert_null (computed);
  g_clear_error (&error);
  computed = vd_project_compute_changes (p, "0123456789012345678901234567890123456789", &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (vd_project_commit (p, "", NULL, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  drop_project (g_steal_pointer (&p));
}

static void
test_tampering (void)
{
  g_autoptr(VdProject) p = make_project ("tamper", NULL);
  g_autofree gchar *config = g_build_filename (vd_project_get_repo_path (p), "config", NULL);
  g_autofree gchar *config_before = sha256_of (config);
  g_autofree gchar *hooks_before = hooks_state (p);
  g_autofree gchar *config_after = NULL;
  g_autofree gchar *hooks_after = NULL;
  g_autoptr(GPtrArray) changes = NULL;
  g_autofree gchar *id = NULL;
  g_autofree gchar *mode = NULL;
  g_autofree gchar *target = NULL;
  g_autofree gchar *names = NULL;
  const VdChange *c;

  do_grant (p);
  g_assert_cmpint (worker_sh (p,
      "cd \"$1\" && mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/x && chmod +x .git/hooks/x "
      "&& printf '[core]\\n\\thooksPath = /tmp\\n' > .git/config "
      "&& mkdir sub && printf 'gitdir: /etc\\n' > sub/.git && echo kept > sub/kept "
      "&& mkdir -p deep/.GIT && echo x > deep/.GIT/config "
      "&& ln -s /etc/shadow shadow-link "
      "&& printf 'a\\n' > \"$(printf 'odd\\nname')\" "
      "&& printf 'b\\n' > \"$(printf 'esc\\033[31mred')\" "
      "&& mkfifo pipe && mkfifo .gitattributes && mkdir -p attrs && ln -s /etc/shadow attrs/.gitattributes", NULL), ==, 0);
  do_revoke (p);

  id = commit (p, "task tamper", &changes);
  /* Committed: the symlink as a link, the odd names, sub/kept. */
  assert_change (changes, "shadow-link", VD_CHANGE_ADDED, VD_CHANGE_KIND_SYMLINK, 1, 0);
  assert_change (changes, "odd\nname", VD_CHANGE_ADDED, VD_CHANGE_KIND_FILE, 1, 0);
  assert_change (changes, "esc\033[31mred", VD_CHANGE_ADDED, VD_CHANGE_KIND_FILE, 1, 0);
  assert_change (changes, "sub/kept", VD_CHANGE_ADDED, VD_CHANGE_KIND_FILE, 1, 0);
  g_assert_cmpstr (find_change (changes, "odd\nname")->display_path, ==, "odd\\x0aname");
  g_assert_cmpstr (find_change (changes, "esc\033[31mred")->display_path, ==, "esc\\x1b[31mred");
  /* Skipped, each said why. */
  c = find_change (changes, ".git");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_GIT);
  c = find_change (changes, "sub/.git");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_GIT);
  c = find_change (changes, "deep/.GIT");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  c = find_change (changes, "pipe");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_SPECIAL);
  g_assert_nonnull (c->reason);
  /* .gitattributes as a fifo and as a link to /etc/shadow: libgit2 would
   * block on the one and follow the other if it read the tree's attributes. */
  c = find_change (changes, ".gitattributes");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_SPECIAL);
  /* A .gitattributes that is a link is refused outright: git on the far
   * side would follow it. */
  c = find_change (changes, "attrs/.gitattributes");
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_SYMLINK);
  g_assert_nonnull (strstr (c->reason, "symlink"));
  g_assert_cmpuint (changes->len, ==, 10);
  /* Committed first, sorted; then the skipped, sorted. */
  {
    const gchar *order[] = { "esc\033[31mred", "odd\nname", "shadow-link", "sub/kept",
                             ".git", ".gitattributes", "attrs/.gitattributes", "deep/.GIT", "pipe", "sub/.git" };
    for (guint i = 0; i < G_N_ELEMENTS (order); i++)
      g_assert_cmpstr (((VdChange *) changes->pdata[i])->path, ==, order[i]);
  }

  /* The commit, read back with git: a link whose content is its target
   * (11 bytes, not /etc/shadow's content), the raw names, no .git. */
  mode = git (p, "ls-tree", "HEAD", "shadow-link", NULL);
  g_assert_true (g_str_has_prefix (mode, "120000 blob "));
  target = git (p, "cat-file", "-p", "HEAD:shadow-link", NULL);
  g_assert_cmpstr (target, ==, "/etc/shadow");
  names = git (p, "ls-tree", "-r", "--name-only", "HEAD");
  /* git quotes what it would not print raw. */
  g_assert_cmpstr (names, ==, "\"esc\\033[31mred\"\n\"odd\\nname\"\nshadow-link\nsub/kept\n");

  /* The tree holds exactly the commit now: what was skipped is gone (and
   * the directories it leaves empty), what was committed stays. */
  {
    const gchar *gone[] = { ".git", ".gitattributes", "attrs", "deep", "pipe", "sub/.git" };
    const gchar *kept[] = { "shadow-link", "sub/kept", "odd\nname" };
    for (guint i = 0; i < G_N_ELEMENTS (gone); i++) {
      g_autofree gchar *path = g_build_filename (vd_project_get_work_path (p), gone[i], NULL);
      struct stat st;
      g_test_message ("gone: %s", gone[i]);
      g_assert_cmpint (lstat (path, &st), !=, 0);
    }
    for (guint i = 0; i < G_N_ELEMENTS (kept); i++) {
      g_autofree gchar *path = g_build_filename (vd_project_get_work_path (p), kept[i], NULL);
      struct stat st;
      g_assert_cmpint (lstat (path, &st), ==, 0);
    }
  }

  /* The host's repository: config and hooks as they were. */
  config_after = sha256_of (config);
  hooks_after = hooks_state (p);
  g_assert_cmpstr (config_before, ==, config_after);
  g_assert_cmpstr (hooks_before, ==, hooks_after);
  g_assert_false (g_file_test ("/tmp/pwned", G_FILE_TEST_EXISTS));
  drop_project (g_steal_pointer (&p));
}

static void
publish_done (GObject *source, GAsyncResult *res, gpointer data)
{
  GError **error = data;

  vd_project_publish_finish (VD_PROJECT (source), res, error);
  if (*error == NULL)
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NONE, "ok");
}

/* Returns NULL on success, else the error. */
static GError *
publish (VdProject *p)
{
  GError *error = NULL;

  vd_project_publish_async (p, NULL, publish_done, &error);
  while (error == NULL)
    g_main_context_iteration (NULL, TRUE);
  if (error->domain == G_IO_ERROR && error->code == G_IO_ERROR_NONE)
    g_clear_error (&error);
  return error;
}

static gchar *
make_bare (const gchar *name)
{
  gchar *bare = g_build_filename (scratch, name, NULL);
  const gchar *argv[] = { "git", "init", "-q", "--bare", "-b", "main", bare, NULL };
  g_free (run_ok (argv));
  return bare;
}

static void
test_publish_file (void)
{
  g_autoptr(VdProject) p = make_project ("publish", NULL);
  g_autofree gchar *bare = make_bare ("publish-remote.git");
  g_autofree gchar *url = g_strconcat ("file://", bare, NULL);
  g_autofree gchar *gd = g_strconcat ("--git-dir=", bare, NULL);
  g_autofree gchar *other = g_build_filename (scratch, "publish-other", NULL);
  const gchar *rev[] = { "git", gd, "rev-parse", "refs/heads/main", NULL };
  const gchar *clone[] = { "git", "clone", "-q", bare, other, NULL };
  const gchar *diverge[] = { "sh", "-c", "cd \"$1\" && echo theirs > theirs && git add theirs && "
                             "git -c user.name=T -c user.email=t@t commit -qm theirs && git push -q origin main",
                             "sh", other, NULL };
  g_autofree gchar *h = NULL;
  g_autofree gchar *there = NULL;
  g_autofree gchar *remote = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_project_set_remote (p, url, &error));
  g_assert_no_error (error);
  remote = vd_project_get_remote (p);
  g_assert_cmpstr (remote, ==, url);
  put (p, "README", "hello\n");
  g_free (commit (p, "task pub", NULL));
  error = publish (p);
  g_assert_no_error (error);
  h = head (p);
  there = run_ok (rev);
  g_assert_cmpstr (g_strstrip (there), ==, h);

  /* The remote moved on without us: the push is refused, typed, with why. */
  g_rmdir (other);
  g_free (run_ok (clone));
  g_free (run_ok (diverge));
  put (p, "README", "hello again\n");
  g_free (commit (p, "task pub 2", NULL));
  error = publish (p);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_test_message ("refusal: %s", error->message);
  g_free (there);
  there = run_ok (rev);
  g_assert_cmpstr (g_strstrip (there), !=, h);
  drop_project (g_steal_pointer (&p));
}

/* The project's egress defaults live in its record on the host: they
 * survive a reload, and a record's list keeps names only. */
static void
test_egress_defaults (void)
{
  g_autoptr(VdProject) p = make_project ("egress", NULL);
  g_autoptr(VdProject) again = NULL;
  g_autofree gchar *record = g_build_filename (projects_dir, "egress", "project.json", NULL);
  g_autofree gchar *mode = NULL;
  g_autofree gchar *tampered = NULL;
  g_auto(GStrv) groups = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *set[] = { "debian", "github", NULL };

  g_assert_null (vd_project_get_egress_mode (p));
  g_assert_null (vd_project_get_egress_groups (p));
  g_assert_true (vd_project_set_egress (p, "allowlist", set, &error));
  g_assert_no_error (error);
  g_clear_object (&p);
  again = vd_project_load (projects_dir, keys_dir, "egress", &error);
  g_assert_no_error (error);
  mode = vd_project_get_egress_mode (again);
  groups = vd_project_get_egress_groups (again);
  g_assert_cmpstr (mode, ==, "allowlist");
  g_assert_cmpstrv (groups, set);
  g_clear_object (&again);
  /* Root's file, yet only names come out of it. */
  {
    g_autoptr(JsonParser) parser = json_parser_new ();
    g_autoptr(JsonGenerator) gen = json_generator_new ();
    JsonArray *hostile = json_array_new ();
    JsonObject *o;

    g_assert_true (json_parser_load_from_file (parser, record, NULL));
    o = json_node_get_object (json_parser_get_root (parser));
    json_array_add_string_element (hostile, "bad name");
    json_array_add_int_element (hostile, 7);
    json_array_add_string_element (hostile, "../x");
    json_array_add_string_element (hostile, "debian");
    json_object_set_array_member (o, "egress_groups", hostile);
    json_generator_set_root (gen, json_parser_get_root (parser));
    tampered = json_generator_to_data (gen, NULL);
    g_assert_true (g_file_set_contents (record, tampered, -1, NULL));
  }
  again = vd_project_load (projects_dir, keys_dir, "egress", &error);
  g_assert_no_error (error);
  g_clear_pointer (&groups, g_strfreev);
  groups = vd_project_get_egress_groups (again);
  g_assert_cmpuint (g_strv_length (groups), ==, 1);
  g_assert_cmpstr (groups[0], ==, "debian");
  /* "" and [] go back to the configuration's. */
  g_assert_true (vd_project_set_egress (again, "", NULL, &error));
  g_clear_pointer (&mode, g_free);
  mode = vd_project_get_egress_mode (again);
  g_assert_null (mode);
  drop_project (g_steal_pointer (&again));
}

static void
test_set_remote_refused (void)
{
  g_autoptr(VdProject) p = make_project ("remotes", NULL);
  g_autofree gchar *record = g_build_filename (projects_dir, "remotes", "project.json", NULL);
  g_autofree gchar *record_before = NULL;
  g_autofree gchar *record_after = NULL;
  g_autofree gchar *remote = NULL;
  const gchar *bad[] = {
    "http://example.org/x.git", "ftp://example.org/x.git", "git://example.org/x.git",
    "https://user:password@example.org/x.git", "https://token@example.org/x.git",
    "ssh://git:secret@example.org/x.git", "file://otherhost/srv/x.git", "file:relative/x.git",
    "https://example.org/x.git?token=1", "https://example.org/x.git#frag", "https://exa mple.org/x",
    "https://example.org/a\nb", "", "example.org:x.git", "https:///x.git", "ssh://example.org/../etc",
  };

  g_assert_true (g_file_get_contents (record, &record_before, NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_test_message ("refusing %s", bad[i]);
    g_assert_false (vd_project_set_remote (p, bad[i], &error));
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
    g_assert_true (g_str_has_prefix (error->message, "The remote URL "));
  }
  /* file:// into the daemon's own state: another project, the keys. */
  {
    g_autofree gchar *other = g_strconcat ("file://", projects_dir, "/changes/repo", NULL);
    g_autofree gchar *keys = g_strconcat ("file://", keys_dir, NULL);
    g_autofree gchar *self_repo = g_strconcat ("file://", vd_project_get_repo_path (p), NULL);
    const gchar *inside[] = { other, keys, self_repo };
    for (guint i = 0; i < G_N_ELEMENTS (inside); i++) {
      g_autoptr(GError) error = NULL;
      g_assert_false (vd_project_set_remote (p, inside[i], &error));
      g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "own state"));
    }
  }
  remote = vd_project_get_remote (p);
  g_assert_null (remote);
  g_assert_true (g_file_get_contents (record, &record_after, NULL, NULL));
  g_assert_cmpstr (record_before, ==, record_after);
  drop_project (g_steal_pointer (&p));
}

static void
assert_refused (const gchar *name, guint64 quota, GVariant *options, gint code)
{
  g_autoptr(GVariant) owned = options != NULL ? g_variant_ref_sink (options) : NULL;
  g_autofree gchar *before = snapshot ();
  g_autofree gchar *after = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(VdProject) p = vd_project_create (projects_dir, keys_dir, name, quota, owned, NULL, &error);

  g_assert_null (p);
  g_assert_error (error, VIVARIUM_ERROR, code);
  g_assert_cmpuint (strlen (error->message), >, 10);
  after = snapshot ();
  g_assert_cmpstr (before, ==, after);
}

static GVariant *
clone_option (const gchar *url)
{
  g_autoptr(GVariantDict) d = g_variant_dict_new (NULL);
  g_variant_dict_insert (d, "clone", "s", url);
  return g_variant_dict_end (d);
}

static void
test_bad_input_leaves_nothing (void)
{
  g_autofree gchar *missing = g_strconcat ("file://", scratch, "/no-such-repo.git", NULL);
  g_autofree gchar *long_name = g_strnfill (64, 'a');
  g_autoptr(VdProject) existing = make_project ("taken", NULL);
  g_autoptr(GVariantDict) unknown = g_variant_dict_new (NULL);
  struct statvfs sv;

  g_variant_dict_insert (unknown, "colour", "s", "red");
  g_assert_cmpint (statvfs (projects_dir, &sv), ==, 0);
  assert_refused ("Upper", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("-dash", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused (".hidden", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("a/b", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("..", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("sp ace", QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused (long_name, QUOTA, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("small", VIVARIUM_PROJECT_QUOTA_MIN - 1, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("zero", 0, NULL, VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("huge", (guint64) sv.f_bavail * sv.f_frsize + 1024 * 1024 * 1024ull, NULL, VIVARIUM_ERROR_NO_SPACE);
  assert_refused ("taken", QUOTA, NULL, VIVARIUM_ERROR_EXISTS);
  assert_refused ("opts", QUOTA, g_variant_dict_end (unknown), VIVARIUM_ERROR_INVALID_ARGUMENT);
  assert_refused ("badurl", QUOTA, clone_option ("http://example.org/x.git"), VIVARIUM_ERROR_INVALID_ARGUMENT);
  {
    g_autofree gchar *taken_repo = g_strconcat ("file://", projects_dir, "/taken/repo", NULL);
    assert_refused ("stateclone", QUOTA, clone_option (taken_repo), VIVARIUM_ERROR_INVALID_ARGUMENT);
  }
  /* Refused late: after the dataset was mounted and the key made. */
  assert_refused ("noclone", QUOTA, clone_option (missing), VIVARIUM_ERROR_FAILED);
  /* A name at the limit is fine. */
  long_name[63] = '\0';
  drop_project (make_project (long_name, NULL));
  drop_project (g_steal_pointer (&existing));
}

static void
test_clone (void)
{
  g_autofree gchar *bare = make_bare ("clone-src.git");
  g_autofree gchar *src = g_build_filename (scratch, "clone-src", NULL);
  g_autofree gchar *url = g_strconcat ("file://", bare, NULL);
  const gchar *seed[] = { "sh", "-c", "git clone -q \"$1\" \"$2\" 2>/dev/null && cd \"$2\" && mkdir d && echo one > d/one "
                          "&& ln -s d/one l && printf '*.bat text eol=crlf\\n' > .gitattributes && printf 'a\\nb\\n' > run.bat "
                          "&& git add -A && git -c user.name=S -c user.email=s@s commit -qm seed "
                          "&& git push -q origin main", "sh", bare, src, NULL };
  g_autofree gchar *gd = g_strconcat ("--git-dir=", bare, NULL);
  const gchar *rev[] = { "git", gd, "rev-parse", "refs/heads/main", NULL };
  g_autofree gchar *there = NULL;
  g_autofree gchar *h = NULL;
  g_autofree gchar *one = NULL;
  g_autofree gchar *remote = NULL;
  g_autoptr(VdProject) p = NULL;
  g_autoptr(VdProject) empty = NULL;
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *one_path = NULL;
  g_autofree gchar *dotgit = NULL;
  g_autofree gchar *empty_url = NULL;
  g_autofree gchar *empty_bare = make_bare ("clone-empty.git");
  struct stat st;

  g_free (run_ok (seed));
  there = run_ok (rev);
  p = make_project ("cloned", clone_option (url));
  h = head (p);
  g_assert_cmpstr (g_strstrip (there), ==, h);
  one_path = g_build_filename (vd_project_get_work_path (p), "d", "one", NULL);
  g_assert_true (g_file_get_contents (one_path, &one, NULL, NULL));
  g_assert_cmpstr (one, ==, "one\n");
  g_assert_cmpint (stat (one_path, &st), ==, 0);
  g_assert_cmpint (st.st_uid, ==, 0);
  dotgit = g_build_filename (vd_project_get_work_path (p), ".git", NULL);
  g_assert_false (g_file_test (dotgit, G_FILE_TEST_EXISTS));
  remote = vd_project_get_remote (p);
  g_assert_cmpstr (remote, ==, url);
  /* Checked out exactly (run.bat keeps the blob's LF): nothing to commit. */
  {
    g_autofree gchar *bat_path = g_build_filename (vd_project_get_work_path (p), "run.bat", NULL);
    g_autofree gchar *bat = NULL;
    g_assert_true (g_file_get_contents (bat_path, &bat, NULL, NULL));
    g_assert_cmpstr (bat, ==, "a\nb\n");
  }
  changes = vd_project_compute_changes (p, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (changes->len, ==, 0);
  drop_project (g_steal_pointer (&p));

  /* A submodule: its link is kept as it is, its files are not ours. */
  {
    g_autofree gchar *sub_bare = make_bare ("clone-sub.git");
    g_autofree gchar *sub_src = g_build_filename (scratch, "clone-sub-src", NULL);
    g_autofree gchar *sub_mod = g_build_filename (scratch, "clone-sub-module", NULL);
    g_autofree gchar *sub_url = g_strconcat ("file://", sub_bare, NULL);
    const gchar *with_sub[] = { "sh", "-c",
      "git init -q -b main \"$3\" && cd \"$3\" && echo s > s && git add s "
      "&& git -c user.name=S -c user.email=s@s commit -qm s && cd .. "
      "&& git clone -q \"$1\" \"$2\" 2>/dev/null && cd \"$2\" && echo top > top "
      "&& git -c protocol.file.allow=always submodule add -q \"$3\" mods/sub >/dev/null 2>&1 && git add -A "
      "&& git -c user.name=S -c user.email=s@s commit -qm with-sub && git push -q origin main",
      "sh", sub_bare, sub_src, sub_mod, NULL };
    g_autoptr(VdProject) ps = NULL;
    g_autoptr(GPtrArray) sc = NULL;
    g_autofree gchar *link_before = NULL;
    g_autofree gchar *link_after = NULL;

    g_free (run_ok (with_sub));
    ps = make_project ("cloned-sub", clone_option (sub_url));
    link_before = git (ps, "ls-tree", "HEAD", "mods/sub", NULL);
    g_assert_true (g_str_has_prefix (link_before, "160000 commit "));
    sc = vd_project_compute_changes (ps, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (sc->len, ==, 0);
    g_clear_pointer (&sc, g_ptr_array_unref);
    {
      g_autofree gchar *inside = g_build_filename (vd_project_get_work_path (ps), "mods", "sub", "new", NULL);
      g_autofree gchar *subdir = g_build_filename (vd_project_get_work_path (ps), "mods", "sub", NULL);
      g_mkdir_with_parents (subdir, 0755);
      g_assert_true (g_file_set_contents (inside, "x\n", -1, NULL));
    }
    put (ps, "top", "changed\n");
    sc = NULL;
    {
      g_autofree gchar *cid = NULL;
      g_assert_true (vd_project_commit (ps, "task sub", &cid, &sc, &error));
      g_assert_no_error (error);
    }
    g_assert_cmpuint (sc->len, ==, 2);
    assert_change (sc, "top", VD_CHANGE_MODIFIED, VD_CHANGE_KIND_FILE, 1, 1);
    g_assert_cmpint (find_change (sc, "mods/sub")->status, ==, VD_CHANGE_SKIPPED);
    link_after = git (ps, "ls-tree", "HEAD", "mods/sub", NULL);
    g_assert_cmpstr (link_before, ==, link_after);
    drop_project (g_steal_pointer (&ps));
  }

  /* A clone larger than the quota: NoSpace, and nothing left. */
  {
    g_autofree gchar *big_bare = make_bare ("clone-big.git");
    g_autofree gchar *big_src = g_build_filename (scratch, "clone-big", NULL);
    g_autofree gchar *big_url = g_strconcat ("file://", big_bare, NULL);
    const gchar *big[] = { "sh", "-c", "git clone -q \"$1\" \"$2\" 2>/dev/null && cd \"$2\" "
                           "&& head -c 24M /dev/urandom > big && git add big "
                           "&& git -c user.name=S -c user.email=s@s commit -qm big && git push -q origin main",
                           "sh", big_bare, big_src, NULL };
    g_autofree gchar *before = NULL;
    g_autofree gchar *after = NULL;
    g_autoptr(VdProject) too_big = NULL;

    g_free (run_ok (big));
    before = snapshot ();
    too_big = vd_project_create (projects_dir, keys_dir, "too-big", VIVARIUM_PROJECT_QUOTA_MIN,
                                 clone_option (big_url), NULL, &error);
    g_assert_null (too_big);
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NO_SPACE);
    g_test_message ("refusal: %s", error->message);
    g_clear_error (&error);
    after = snapshot ();
    g_assert_cmpstr (before, ==, after);
  }

  /* An empty repository gets the first commit: HEAD is never unborn. */
  empty_url = g_strconcat ("file://", empty_bare, NULL);
  empty = make_project ("cloned-empty", clone_option (empty_url));
  g_free (head (empty));
  drop_project (g_steal_pointer (&empty));
}

static void
test_restart (void)
{
  g_autofree gchar *before = snapshot ();
  g_autofree gchar *after = NULL;
  g_autoptr(VdProject) p = make_project ("restart", NULL);
  g_autoptr(VdProject) again = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *h1 = NULL;
  g_autofree gchar *h2 = NULL;
  g_autofree gchar *work = g_strdup (vd_project_get_work_path (p));
  g_autofree gchar *kept = g_build_filename (work, "kept", NULL);
  g_autofree gchar *text = NULL;
  g_auto(GStrv) names = NULL;

  put (p, "kept", "across restarts\n");
  g_free (commit (p, "task r", NULL));
  h1 = head (p);
  /* Daemon shutdown. */
  g_assert_true (vd_project_unmount (p, &error));
  g_assert_no_error (error);
  /* Unmounted, the tree is an empty host directory: no commit (it would
   * delete everything), no grant (space without a quota). */
  g_assert_false (vd_project_commit (p, "would delete all", NULL, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&error);
  g_assert_false (vd_project_grant (p, WORKER_UID, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&error);
  g_clear_object (&p);
  g_assert_false (is_mountpoint (work));
  g_assert_false (g_file_test (kept, G_FILE_TEST_EXISTS));

  names = vd_project_list_names (projects_dir);
  g_assert_true (g_strv_contains ((const gchar * const *) names, "restart"));
  again = vd_project_load (projects_dir, keys_dir, "restart", &error);
  g_assert_no_error (error);
  g_assert_true (is_mountpoint (work));
  h2 = head (again);
  g_assert_cmpstr (h1, ==, h2);
  g_assert_true (g_file_get_contents (kept, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "across restarts\n");
  g_assert_cmpuint (vd_project_get_quota (again), ==, QUOTA);

  /* Loading twice is harmless; loading what is not there is NotFound. */
  g_clear_object (&p);
  p = vd_project_load (projects_dir, keys_dir, "restart", &error);
  g_assert_no_error (error);
  g_clear_object (&p);
  p = vd_project_load (projects_dir, keys_dir, "never-made", &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND);
  g_assert_null (p);

  drop_project (g_steal_pointer (&again));
  after = snapshot ();
  g_assert_cmpstr (before, ==, after);
}

/* A daemon that died half-way through creating a project: the sweep at the
 * next start removes the mount, the loop device, the key and the dir. */
static void
test_sweep_after_crash (void)
{
  g_autofree gchar *before = snapshot ();
  g_autofree gchar *after = NULL;
  g_autofree gchar *record = g_build_filename (projects_dir, "crashed", "project.json", NULL);
  g_autofree gchar *stray = g_build_filename (keys_dir, "project-crashed.tmp-0000abcd", NULL);
  g_autofree gchar *work = NULL;
  g_autoptr(VdProject) p = make_project ("crashed", NULL);
  g_autoptr(VdProject) kept = make_project ("complete", NULL);
  g_autoptr(VdProject) loaded = NULL;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) swept = NULL;
  g_autofree gchar *mid = NULL;

  mid = snapshot ();
  work = g_strdup (vd_project_get_work_path (p));
  /* What the crash left: no record, the dataset still mounted, a temp key. */
  g_assert_cmpint (g_unlink (record), ==, 0);
  g_assert_true (g_file_set_contents (stray, "half a key", -1, NULL));
  g_clear_object (&p);
  /* And the complete one was granted when the daemon died. */
  do_grant (kept);
  g_clear_object (&kept);
  g_assert_true (is_mountpoint (work));

  swept = vd_project_sweep (projects_dir, keys_dir);
  g_assert_cmpuint (g_strv_length (swept), ==, 1);
  g_assert_cmpstr (swept[0], ==, "crashed");
  g_assert_false (is_mountpoint (work));
  g_assert_false (g_file_test (stray, G_FILE_TEST_EXISTS));

  loaded = vd_project_load (projects_dir, keys_dir, "complete", &error);
  g_assert_no_error (error);
  {
    struct stat st;
    g_assert_cmpint (stat (vd_project_get_work_path (loaded), &st), ==, 0);
    g_assert_cmpint (st.st_uid, ==, 0);
  }
  drop_project (g_steal_pointer (&loaded));
  after = snapshot ();
  g_assert_cmpstr (before, ==, after);
  g_assert_cmpstr (before, !=, mid);
}

/* ---- publishing over ssh with the deploy key --------------------------- */

typedef struct {
  GSubprocess *proc;
  guint16      port;
} Sshd;

static guint16
free_port (void)
{
  g_autoptr(GSocket) sock = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_socket_bind (sock, any, FALSE, &error));
  g_assert_no_error (error);
  bound = g_socket_get_local_address (sock, &error);
  g_assert_no_error (error);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

/* An sshd of the test's own, on 127.0.0.1, for root with only @authorized. */
static void
sshd_start (Sshd *d, const gchar *host_key, const gchar *authorized)
{
  g_autofree gchar *config = g_build_filename (scratch, "sshd_config", NULL);
  g_autofree gchar *text = NULL;
  g_autoptr(GError) error = NULL;

  d->port = free_port ();
  text = g_strdup_printf ("ListenAddress 127.0.0.1:%u\nHostKey %s\nAuthorizedKeysFile %s\n"
                          "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                          "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n"
                          "LogLevel ERROR\n", d->port, host_key, authorized);
  g_assert_true (g_file_set_contents (config, text, -1, &error));
  g_mkdir ("/run/sshd", 0755);
  d->proc = g_subprocess_new (G_SUBPROCESS_FLAGS_NONE, &error, "/usr/sbin/sshd", "-D", "-e", "-f", config, NULL);
  g_assert_no_error (error);
  /* Ready when it accepts: bounded by attempts, no assertion on time. */
  for (guint i = 0; i < 200; i++) {
    g_autoptr(GSocketClient) client = g_socket_client_new ();
    g_autoptr(GSocketConnection) conn = g_socket_client_connect_to_host (client, "127.0.0.1", d->port, NULL, NULL);
    if (conn != NULL)
      return;
    g_usleep (50000);
  }
  g_error ("sshd on port %u never accepted a connection", d->port);
}

static void
sshd_stop (Sshd *d)
{
  g_subprocess_send_signal (d->proc, SIGTERM);
  g_assert_true (g_subprocess_wait (d->proc, NULL, NULL));
  g_clear_object (&d->proc);
}

static gchar *
host_key (const gchar *name)
{
  gchar *path = g_build_filename (scratch, name, NULL);
  const gchar *argv[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path, NULL };
  g_free (run_ok (argv));
  return path;
}

static void
test_publish_ssh (void)
{
  g_autoptr(VdProject) p = make_project ("sshpub", NULL);
  g_autofree gchar *bare = make_bare ("ssh-remote.git");
  g_autofree gchar *gd = g_strconcat ("--git-dir=", bare, NULL);
  const gchar *rev[] = { "git", gd, "rev-parse", "refs/heads/main", NULL };
  g_autofree gchar *authorized = g_build_filename (scratch, "authorized_keys", NULL);
  g_autofree gchar *hook = g_build_filename (bare, "hooks", "pre-receive", NULL);
  g_autofree gchar *key1 = host_key ("ssh-host-1");
  g_autofree gchar *key2 = host_key ("ssh-host-2");
  g_autofree gchar *deploy = NULL;
  g_autofree gchar *url = NULL;
  g_autofree gchar *h = NULL;
  g_autofree gchar *there = NULL;
  g_autofree gchar *record = NULL;
  g_autofree gchar *record_path = g_build_filename (projects_dir, "sshpub", "project.json", NULL);
  g_autofree gchar *work_listing = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *grep_key[] = { "grep", "-rqs", "PRIVATE KEY", vd_project_get_work_path (p), NULL };
  Sshd d = { 0 };

  deploy = vd_project_get_deploy_key (p, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (authorized, deploy, -1, NULL));
  sshd_start (&d, key1, authorized);
  url = g_strdup_printf ("ssh://root@127.0.0.1:%u%s", d.port, bare);
  g_assert_true (vd_project_set_remote (p, url, &error));
  g_assert_no_error (error);
  put (p, "over-ssh", "pushed with the deploy key\n");
  g_free (commit (p, "task ssh", NULL));
  error = publish (p);
  g_assert_no_error (error);
  h = head (p);
  there = run_ok (rev);
  g_assert_cmpstr (g_strstrip (there), ==, h);
  /* The host key was pinned; the key never entered the dataset. */
  g_assert_true (g_file_get_contents (record_path, &record, NULL, NULL));
  g_assert_null (strstr (record, "\"ssh_host_key_sha256\" : \"\""));
  {
    g_autofree gchar *o = NULL, *e = NULL;
    g_assert_cmpint (run (&o, &e, grep_key), !=, 0);
  }

  /* The remote refuses, and says why: the reason reaches the caller. */
  g_assert_true (g_file_set_contents (hook, "#!/bin/sh\necho 'policy: no pushes on Tuesdays' >&2\nexit 1\n", -1, NULL));
  g_assert_cmpint (chmod (hook, 0755), ==, 0);
  put (p, "over-ssh", "refused\n");
  g_free (commit (p, "task ssh 2", NULL));
  error = publish (p);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_test_message ("refusal: %s", error->message);
  g_assert_nonnull (strstr (error->message, "policy: no pushes on Tuesdays"));
  g_clear_error (&error);
  g_unlink (hook);

  /* Another host key on the same address: refused, not trusted anew. */
  sshd_stop (&d);
  sshd_start (&d, key2, authorized);
  g_free (url);
  url = g_strdup_printf ("ssh://root@127.0.0.1:%u%s", d.port, bare);
  /* Same URL but the port: set_remote would forget the pin, so edit the
   * repository's own config the way a port change would look. */
  {
    g_autofree gchar *cfg = g_strconcat ("--git-dir=", vd_project_get_repo_path (p), NULL);
    const gchar *set[] = { "git", cfg, "remote", "set-url", "origin", url, NULL };
    g_free (run_ok (set));
  }
  error = publish (p);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED);
  g_test_message ("refusal: %s", error->message);
  g_clear_error (&error);

  /* A key the server does not know is refused too. */
  g_assert_true (g_file_set_contents (authorized, "", -1, NULL));
  g_assert_true (vd_project_set_remote (p, url, &error));
  error = publish (p);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED);
  g_test_message ("refusal: %s", error->message);
  g_assert_nonnull (strstr (error->message, "deploy key"));
  sshd_stop (&d);
  drop_project (g_steal_pointer (&p));
}

/* The btrfs backend, on a btrfs filesystem this test makes and mounts. */
static void
test_btrfs (void)
{
  g_autofree gchar *img = g_build_filename (scratch, "btrfs.img", NULL);
  g_autofree gchar *mnt = g_build_filename (scratch, "btrfs", NULL);
  g_autofree gchar *pdir = g_build_filename (mnt, "projects", NULL);
  const gchar *mkfs[] = { "mkfs.btrfs", "-q", img, NULL };
  const gchar *mount[] = { "mount", "-o", "loop", img, mnt, NULL };
  const gchar *umount[] = { "umount", mnt, NULL };
  const gchar *subvols[] = { "btrfs", "subvolume", "list", mnt, NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(VdProject) p = NULL;
  g_autofree gchar *err = NULL;
  g_autofree gchar *list = NULL;
  g_autofree gchar *h = NULL;
  guint64 used = 0;
  int fd;

  fd = open (img, O_WRONLY | O_CREAT | O_EXCL, 0600);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (ftruncate (fd, 512 * 1024 * 1024), ==, 0);
  close (fd);
  g_free (run_ok (mkfs));
  g_assert_cmpint (g_mkdir (mnt, 0755), ==, 0);
  g_free (run_ok (mount));
  g_assert_cmpint (g_mkdir (pdir, 0755), ==, 0);

  p = vd_project_create (pdir, keys_dir, "subvol", QUOTA, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (vd_project_get_backend (p), ==, VD_DATASET_BACKEND_BTRFS);
  list = run_ok (subvols);
  g_assert_nonnull (strstr (list, "projects/subvol/work"));
  do_grant (p);
  g_assert_cmpint (worker_sh (p, "dd if=/dev/urandom of=\"$1/big\" bs=1M count=64 status=none && sync", &err), !=, 0);
  g_assert_true (strstr (err, "Disk quota exceeded") != NULL || strstr (err, "No space left") != NULL);
  do_revoke (p);
  g_assert_true (vd_project_get_used_bytes (p, &used, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (used, >, QUOTA / 2);
  g_assert_cmpint (worker_sh (p, "true", NULL), ==, 0);
  g_free (commit (p, "btrfs", NULL));
  h = head (p);
  drop_project (g_steal_pointer (&p));
  g_free (list);
  list = run_ok (subvols);
  g_assert_null (strstr (list, "projects/subvol/work"));
  /* Nor its qgroup. */
  {
    const gchar *qgroups[] = { "btrfs", "qgroup", "show", mnt, NULL };
    g_autofree gchar *q = run_ok (qgroups);
    g_assert_null (strstr (q, "<stale>"));
    g_assert_null (strstr (q, "0/256"));
  }
  g_free (run_ok (umount));
}

int
main (int argc, char **argv)
{
  const gchar *dir = g_getenv ("VIVARIUM_TEST_SCRATCH");

  g_test_init (&argc, &argv, NULL);
  if (dir == NULL || getuid () != 0) {
    g_printerr ("test-project: FAIL: run it through run-in-mount-ns.sh, as root\n");
    return 1;
  }
  scratch = g_strdup (dir);
  projects_dir = g_build_filename (scratch, "projects", NULL);
  keys_dir = g_build_filename (scratch, "keys", NULL);
  g_assert_cmpint (g_mkdir (projects_dir, 0755), ==, 0);
  vivarium_error_quark ();

  g_test_add_func ("/project/create-layout", test_create_layout);
  g_test_add_func ("/project/quota-enospc", test_quota_enospc);
  g_test_add_func ("/project/grant-revoke", test_grant_revoke);
  g_test_add_func ("/project/change-set", test_change_set);
  g_test_add_func ("/project/tampering", test_tampering);
  g_test_add_func ("/project/publish-file", test_publish_file);
  g_test_add_func ("/project/publish-ssh", test_publish_ssh);
  g_test_add_func ("/project/set-remote-refused", test_set_remote_refused);
  g_test_add_func ("/project/egress-defaults", test_egress_defaults);
  g_test_add_func ("/project/bad-input-leaves-nothing", test_bad_input_leaves_nothing);
  g_test_add_func ("/project/clone", test_clone);
  g_test_add_func ("/project/restart", test_restart);
  g_test_add_func ("/project/sweep-after-crash", test_sweep_after_crash);
  g_test_add_func ("/project/btrfs", test_btrfs);
  return g_test_run ();
}
