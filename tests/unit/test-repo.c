/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The project name and remote URL rules, and VdRepo on a plain directory
 * (no dataset, no root): real libgit2, read back with the git CLI.
 */
#define G_LOG_DOMAIN "TestRepo"

#include "config.h"

#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <git2.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-memory.h"
#include "vd-repo.h"

static void
test_project_names (void)
{
  const gchar *good[] = { "a", "0", "my-project", "a.b_c-d", "x1.2.3", "a..b" };
  const gchar *bad[] = { "", "A", "Project", "-a", ".a", "_a", "a/b", "a b", "a:b", "é", "a\nb", "..", "." };
  g_autofree gchar *max = g_strnfill (VIVARIUM_PROJECT_NAME_MAX, 'z');
  g_autofree gchar *over = g_strnfill (VIVARIUM_PROJECT_NAME_MAX + 1, 'z');

  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_autoptr(GError) error = NULL;
    g_assert_true (vivarium_project_name_validate (good[i], &error));
    g_assert_no_error (error);
  }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_assert_false (vivarium_project_name_validate (bad[i], &error));
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  }
  g_assert_true (vivarium_project_name_validate (max, NULL));
  g_assert_false (vivarium_project_name_validate (over, NULL));
  g_assert_false (vivarium_project_name_validate (NULL, NULL));
}

static void
test_remote_urls (void)
{
  const gchar *good[] = {
    "https://example.org/team/x.git", "ssh://git@example.org/team/x.git", "ssh://example.org:2222/x",
    "file:///srv/git/x.git", "file://localhost/srv/git/x.git",
  };
  const gchar *bad[] = {
    "http://example.org/x.git", "ftp://example.org/x", "git://example.org/x", "rsync://example.org/x",
    "https://u:p@example.org/x", "https://token@example.org/x", "ssh://git:pw@example.org/x",
    "file://host/x", "file:x", "/srv/x.git", "git@example.org:x.git", "https://example.org/x?a=b",
    "https://example.org/x#f", "https://example.org/a b", "https://example.org/a\tb", "https:///x",
    "ssh://example.org/a/../b", "file:///srv/./x", "", "https://example.org/\x1b[31m",
  };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_autoptr(GError) error = NULL;
    g_test_message ("accepting %s", good[i]);
    g_assert_true (vd_remote_url_validate (good[i], &error));
    g_assert_no_error (error);
  }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_test_message ("refusing %s", bad[i]);
    g_assert_false (vd_remote_url_validate (bad[i], &error));
    g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  }
  g_assert_false (vd_remote_url_validate (NULL, NULL));
}

typedef struct {
  gchar  *dir;
  gchar  *gitdir;
  gchar  *work;
  VdRepo *repo;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("vivarium-test-repo.XXXXXX", &error);
  g_assert_no_error (error);
  f->gitdir = g_build_filename (f->dir, "repo", NULL);
  f->work = g_build_filename (f->dir, "work", NULL);
  g_assert_cmpint (g_mkdir (f->work, 0700), ==, 0);
  f->repo = vd_repo_create (f->gitdir, f->work, &error);
  g_assert_no_error (error);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_clear_object (&f->repo);
  g_assert_true (vd_fs_rm_rf (f->dir, NULL));
  g_free (f->dir);
  g_free (f->gitdir);
  g_free (f->work);
}

static void
put (Fixture *f, const gchar *rel, const gchar *text)
{
  g_autofree gchar *path = g_build_filename (f->work, rel, NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
}

static gchar *
git (Fixture *f, const gchar *a1, const gchar *a2, const gchar *a3)
{
  g_autofree gchar *gd = g_strconcat ("--git-dir=", f->gitdir, NULL);
  const gchar *argv[] = { "git", gd, a1, a2, a3, NULL };
  gchar *out = NULL;
  gint status;

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return out;
}

/* HEAD's paths, one a line, as git prints them. */
static gchar *
ls_tree_names (Fixture *f)
{
  g_autofree gchar *gd = g_strconcat ("--git-dir=", f->gitdir, NULL);
  const gchar *argv[] = { "git", gd, "ls-tree", "-r", "--name-only", "HEAD", NULL };
  gchar *out = NULL;
  gint status;

  g_assert_true (g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, NULL, &status, NULL));
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return out;
}

static void
test_repo_basics (Fixture *f, gconstpointer data)
{
  g_autofree gchar *dotgit = g_build_filename (f->work, ".git", NULL);
  g_autofree gchar *link = g_build_filename (f->work, "a", NULL);
  g_autofree gchar *h0 = NULL, *h1 = NULL, *h2 = NULL, *tree = NULL, *worktree = NULL;
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GPtrArray) log = NULL;
  g_autoptr(GError) error = NULL;
  const VdChange *c;

  /* Born with one empty commit; no link file left in the tree; the git
   * directory's own config names the tree. */
  h0 = vd_repo_get_head (f->repo, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (h0), ==, 40);
  g_assert_false (g_file_test (dotgit, G_FILE_TEST_EXISTS));
  worktree = git (f, "config", "core.worktree", NULL);
  g_assert_true (g_str_has_prefix (worktree, f->work));

  put (f, "a", "1\n");
  put (f, "back\\slash", "x\n");
  g_assert_true (vd_repo_commit (f->repo, "one", &h1, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (h1, !=, h0);

  /* A file becomes a link: a typechange of kind symlink, never followed. */
  g_assert_cmpint (g_unlink (link), ==, 0);
  g_assert_cmpint (symlink ("/nonexistent/target", link), ==, 0);
  changes = vd_repo_compute_changes (f->repo, h1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (changes->len, ==, 1);
  c = changes->pdata[0];
  g_assert_cmpint (c->status, ==, VD_CHANGE_TYPECHANGE);
  g_assert_cmpint (c->kind, ==, VD_CHANGE_KIND_SYMLINK);
  g_assert_true (vd_repo_commit (f->repo, "two\n\nbody", &h2, NULL, &error));
  tree = git (f, "ls-tree", "HEAD", "--");
  g_assert_nonnull (strstr (tree, "120000 blob"));
  g_assert_nonnull (strstr (tree, "\"back\\\\slash\""));

  /* A link to a file that exists, outside the tree: the blob is the
   * link's target text, never the file's content (a walk that followed
   * links would commit the secret). */
  {
    g_autofree gchar *secret = g_build_filename (f->dir, "secret", NULL);
    g_autofree gchar *to_secret = g_build_filename (f->work, "to-secret", NULL);
    g_autofree gchar *entry = NULL;
    g_autofree gchar *blob = NULL;

    g_assert_true (g_file_set_contents (secret, "SECRET CONTENT\n", -1, NULL));
    g_assert_cmpint (symlink (secret, to_secret), ==, 0);
    g_assert_true (vd_repo_commit (f->repo, "three", NULL, NULL, &error));
    g_assert_no_error (error);
    entry = git (f, "ls-tree", "HEAD", "to-secret");
    g_assert_true (g_str_has_prefix (entry, "120000 blob "));
    blob = git (f, "cat-file", "-p", "HEAD:to-secret");
    g_assert_cmpstr (blob, ==, secret);
  }

  log = vd_repo_log (f->repo, 3, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (log->len, ==, 3);
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[0])->subject, ==, "three");
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[1])->subject, ==, "two");
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[2])->id, ==, h1);
  g_clear_pointer (&log, g_ptr_array_unref);
  log = vd_repo_log (f->repo, 0, &error);
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_assert_null (log);
}

static void
test_repo_display_paths (Fixture *f, gconstpointer data)
{
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GError) error = NULL;

  put (f, "tab\there", "x\n");
  put (f, "back\\x0aslash", "x\n");
  changes = vd_repo_compute_changes (f->repo, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (changes->len, ==, 2);
  /* A real backslash reads back as one, so it cannot pose as an escape. */
  g_assert_cmpstr (((VdChange *) changes->pdata[0])->display_path, ==, "back\\\\x0aslash");
  g_assert_cmpstr (((VdChange *) changes->pdata[1])->display_path, ==, "tab\\x09here");
}

static void
test_repo_identity (Fixture *f, gconstpointer data)
{
  const gchar *bad[][2] = { { "", "a@b" }, { "x", "" }, { "Evil <e@e>", "a@b" }, { "x", "a@b>" },
                            { "two\nlines", "a@b" }, { "esc\033", "a@b" } };
  g_autoptr(GError) error = NULL;
  g_autofree gchar *author = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) e = NULL;
    g_assert_false (vd_repo_set_identity (f->repo, bad[i][0], bad[i][1], &e));
    g_assert_error (e, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  }
  g_assert_true (vd_repo_set_identity (f->repo, "Build Host", "ci@example.org", &error));
  g_assert_no_error (error);
  put (f, "f", "x\n");
  g_assert_true (vd_repo_commit (f->repo, "by config", NULL, NULL, &error));
  g_assert_no_error (error);
  author = git (f, "log", "-1", "--format=%an <%ae>");
  g_assert_cmpstr (author, ==, "Build Host <ci@example.org>\n");
}

static void
test_repo_remote (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *url = NULL;

  g_assert_null (vd_repo_get_remote (f->repo));
  g_assert_false (vd_repo_push (f->repo, NULL, NULL, NULL, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&error);
  g_assert_false (vd_repo_set_remote (f->repo, "http://example.org/x", &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_true (vd_repo_set_remote (f->repo, "https://example.org/x.git", &error));
  g_assert_true (vd_repo_set_remote (f->repo, "file:///srv/x.git", &error));
  g_assert_no_error (error);
  url = vd_repo_get_remote (f->repo);
  g_assert_cmpstr (url, ==, "file:///srv/x.git");
}


/* ---- the commit's bounds and the tree made equal to it ------------------ */

static const VdChange *
find_change (GPtrArray *changes, const gchar *path)
{
  for (guint i = 0; changes != NULL && i < changes->len; i++) {
    const VdChange *c = changes->pdata[i];
    if (strcmp (c->path, path) == 0)
      return c;
  }
  return NULL;
}

static void
assert_skipped (GPtrArray *changes, const gchar *path, VdChangeKind kind, const gchar *reason_part)
{
  const VdChange *c = find_change (changes, path);

  g_test_message ("skipped? %s", path);
  if (c == NULL)
    g_error ("%s is not in the list", path);
  g_assert_cmpint (c->status, ==, VD_CHANGE_SKIPPED);
  g_assert_cmpint (c->kind, ==, kind);
  g_assert_nonnull (strstr (c->reason, reason_part));
}

static gboolean
exists_in_work (Fixture *f, const gchar *rel)
{
  g_autofree gchar *path = g_build_filename (f->work, rel, NULL);
  struct stat st;

  return lstat (path, &st) == 0;
}

static void
make_sized (Fixture *f, const gchar *rel, goffset size, gboolean sparse)
{
  g_autofree gchar *path = g_build_filename (f->work, rel, NULL);
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

  g_assert_cmpint (fd, >=, 0);
  if (sparse) {
    g_assert_cmpint (ftruncate (fd, size), ==, 0);
  } else {
    g_autofree gchar *buf = g_malloc (size);
    memset (buf, 'x', size);
    g_assert_cmpint (write (fd, buf, size), ==, size);
  }
  close (fd);
}

/* A sparse file and one above the cap: skipped, said why, never read;
 * hardlinks read once (three names of 600 KiB under a 1 MiB total). */
static void
test_repo_bounds_files (Fixture *f, gconstpointer data)
{
  VdRepoBounds bounds = { .file_max = 700 * 1024, .total_max = 1024 * 1024, .timeout_sec = 60 };
  g_autofree gchar *a = g_build_filename (f->work, "shared-a", NULL);
  g_autofree gchar *b = g_build_filename (f->work, "shared-b", NULL);
  g_autofree gchar *c = g_build_filename (f->work, "sub-c", NULL);
  g_autofree gchar *c_in = g_build_filename (f->work, "sub-c", "shared-c", NULL);
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *names = NULL;
  g_autofree gchar *ids = NULL;

  make_sized (f, "sparse", (goffset) 64 * 1024 * 1024 * 1024, TRUE);
  make_sized (f, "big", 800 * 1024, FALSE);
  make_sized (f, "shared-a", 600 * 1024, FALSE);
  g_assert_cmpint (link (a, b), ==, 0);
  g_assert_cmpint (g_mkdir (c, 0700), ==, 0);
  g_assert_cmpint (link (a, c_in), ==, 0);
  put (f, "small", "small\n");

  g_assert_true (vd_repo_commit_bounded (f->repo, "bounded", &bounds, NULL, &changes, &error));
  g_assert_no_error (error);
  assert_skipped (changes, "sparse", VD_CHANGE_KIND_FILE, "sparse file (68719476736 bytes long");
  assert_skipped (changes, "big", VD_CHANGE_KIND_FILE, "a file of 819200 bytes is larger than the commit's cap of 716800 bytes per file");
  names = git (f, "ls-tree", "-r", "HEAD");
  g_assert_null (strstr (names, "sparse"));
  g_assert_null (strstr (names, "\tbig"));
  /* The three names, one blob. */
  ids = git (f, "rev-parse", "HEAD:shared-a", NULL);
  {
    g_autofree gchar *id_b = git (f, "rev-parse", "HEAD:shared-b", NULL);
    g_autofree gchar *id_c = git (f, "rev-parse", "HEAD:sub-c/shared-c", NULL);
    g_assert_cmpstr (ids, ==, id_b);
    g_assert_cmpstr (ids, ==, id_c);
  }

  /* The tree made equal to the commit: the skipped files are gone. */
  g_assert_true (vd_repo_clean_tree (f->repo, &error));
  g_assert_no_error (error);
  g_assert_false (exists_in_work (f, "sparse"));
  g_assert_false (exists_in_work (f, "big"));
  g_assert_true (exists_in_work (f, "shared-b"));
  g_assert_true (exists_in_work (f, "sub-c/shared-c"));
  g_assert_true (exists_in_work (f, "small"));
}

/* More than the total read stops the commit: nothing committed; the tree
 * restored to HEAD. A cancelled commit stops the same way. */
static void
test_repo_bounds_total (Fixture *f, gconstpointer data)
{
  VdRepoBounds bounds = { .file_max = 1024 * 1024, .total_max = 1024 * 1024, .timeout_sec = 60 };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autofree gchar *h0 = NULL, *h1 = NULL, *h2 = NULL, *kept = NULL;
  g_autofree gchar *kept_path = g_build_filename (f->work, "kept", NULL);
  g_autoptr(GError) error = NULL;

  put (f, "kept", "committed before\n");
  g_assert_true (vd_repo_commit (f->repo, "before", &h0, NULL, &error));
  g_assert_no_error (error);
  put (f, "kept", "changed by the worker\n");
  make_sized (f, "one", 600 * 1024, FALSE);
  make_sized (f, "two", 600 * 1024, FALSE);
  g_assert_false (vd_repo_commit_bounded (f->repo, "too much", &bounds, NULL, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "more than the project's quota of 1048576 bytes"));
  g_clear_error (&error);
  h1 = vd_repo_get_head (f->repo, NULL);
  g_assert_cmpstr (h1, ==, h0);

  g_assert_true (vd_repo_restore_tree (f->repo, &error));
  g_assert_no_error (error);
  g_assert_false (exists_in_work (f, "one"));
  g_assert_false (exists_in_work (f, "two"));
  g_assert_true (g_file_get_contents (kept_path, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "committed before\n");

  put (f, "new", "x\n");
  bounds.cancellable = cancellable;
  g_cancellable_cancel (cancellable);
  g_assert_false (vd_repo_commit_bounded (f->repo, "cancelled", &bounds, NULL, NULL, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
  h2 = vd_repo_get_head (f->repo, NULL);
  g_assert_cmpstr (h2, ==, h0);
}

/* .git in the spellings NTFS and HFS+ read as .git, and symlinked
 * .gitmodules/.gitattributes/.gitignore: never committed, removed after. */
static void
test_repo_dotgit_spellings (Fixture *f, gconstpointer data)
{
  const gchar *dotgits[] = { ".GIT", ".Git", ".git\xe2\x80\x8c", "\xef\xbb\xbf.git", ".g\xe2\x80\x8dit",
                             "git~1", "GIT~1", ".git.", ".git ", ".git. .", ".git::$INDEX_ALLOCATION" };
  const gchar *links[] = { ".gitmodules", ".gitattributes", ".gitignore", ".GITIGNORE", "gitmod~1",
                           ".gitmodules\xe2\x80\x8c", ".gitattributes." };
  const gchar *fine[] = { ".gitx", ".git~1", "git", "xgit~1", ".gi t", ".gitmodules" };
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *tree = NULL;
  g_autofree gchar *sub = g_build_filename (f->work, "sub", NULL);

  g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (dotgits); i++) {
    g_autofree gchar *rel = g_build_filename ("sub", dotgits[i], NULL);
    put (f, rel, "[core]\n\tworktree = /\n");
  }
  for (guint i = 0; i < G_N_ELEMENTS (links); i++) {
    g_autofree gchar *path = g_build_filename (f->work, links[i], NULL);
    g_assert_cmpint (symlink ("/etc/passwd", path), ==, 0);
  }
  /* Not links, or not those names: committed. */
  for (guint i = 0; i < G_N_ELEMENTS (fine); i++) {
    g_autofree gchar *rel = g_build_filename ("sub", fine[i], NULL);
    put (f, rel, "fine\n");
  }
  g_assert_true (vd_repo_commit (f->repo, "spellings", NULL, &changes, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (dotgits); i++) {
    g_autofree gchar *rel = g_build_filename ("sub", dotgits[i], NULL);
    assert_skipped (changes, rel, VD_CHANGE_KIND_GIT, ".git");
  }
  for (guint i = 0; i < G_N_ELEMENTS (links); i++)
    assert_skipped (changes, links[i], VD_CHANGE_KIND_SYMLINK, "symlink");
  tree = ls_tree_names (f);
  g_assert_cmpstr (tree, ==, "sub/.gi t\nsub/.gitmodules\nsub/.gitx\nsub/.git~1\nsub/git\nsub/xgit~1\n");
}

/* 300 levels, a fifo and a .GIT directory: the commit cuts the tree at
 * its depth limit, and after it the tree holds exactly the commit. */
static void
test_repo_clean_tree (Fixture *f, gconstpointer data)
{
  g_autoptr(GString) rel = g_string_new (NULL);
  g_autoptr(GPtrArray) changes = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *fifo = g_build_filename (f->work, "pipe", NULL);
  g_autofree gchar *dotgit = g_build_filename (f->work, ".GIT", NULL);
  g_autofree gchar *names = NULL;
  int fd = open (f->work, O_RDONLY | O_DIRECTORY);

  /* Made with openat: the path of the deepest is longer than PATH_MAX. */
  g_assert_cmpint (fd, >=, 0);
  for (guint i = 0; i < 300; i++) {
    int next;
    g_assert_cmpint (mkdirat (fd, "d", 0700), ==, 0);
    next = openat (fd, "d", O_RDONLY | O_DIRECTORY);
    g_assert_cmpint (next, >=, 0);
    close (fd);
    fd = next;
  }
  g_assert_cmpint (close (openat (fd, "bottom", O_WRONLY | O_CREAT, 0600)), ==, 0);
  close (fd);
  put (f, "d/kept", "kept\n");
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (g_mkdir (dotgit, 0700), ==, 0);
  put (f, ".GIT/config", "[core]\n");

  g_assert_true (vd_repo_commit (f->repo, "deep", NULL, &changes, &error));
  g_assert_no_error (error);
  assert_skipped (changes, "pipe", VD_CHANGE_KIND_SPECIAL, "fifo");
  assert_skipped (changes, ".GIT", VD_CHANGE_KIND_GIT, ".git");
  g_string_assign (rel, "d");
  for (guint i = 1; i < 257; i++)
    g_string_append (rel, "/d");
  assert_skipped (changes, rel->str, VD_CHANGE_KIND_DIRECTORY, "deeper than 256");
  /* HEAD holds d/kept and nothing deeper than 256 directories. */
  names = ls_tree_names (f);
  g_assert_cmpstr (names, ==, "d/kept\n");

  g_assert_true (vd_repo_clean_tree (f->repo, &error));
  g_assert_no_error (error);
  g_assert_false (exists_in_work (f, "pipe"));
  g_assert_false (exists_in_work (f, ".GIT"));
  g_assert_true (exists_in_work (f, "d/kept"));
  /* Only d/kept was committed under d: every level below is gone. */
  g_assert_false (exists_in_work (f, "d/d"));
}

/* The bytes malloc has handed out and not had back: glibc's count, or
 * AddressSanitizer's when it owns the heap (its mallinfo2() says 0). */
#if !VD_MEMORY_GLIBC_MALLOC
size_t __sanitizer_get_current_allocated_bytes (void);
static gsize
heap_in_use (void)
{
  return __sanitizer_get_current_allocated_bytes ();
}
#else
static gsize
heap_in_use (void)
{
  return mallinfo2 ().uordblks;
}
#endif

/* libgit2 keeps each commit and tree it parses in a process-wide cache,
 * 256 MiB of them unless told: a daemon that commits once a task held every
 * one.  500 commits after the first hundred, each of a 3.5 KiB message
 * (below libgit2's 4 KiB cut for caching a commit) and each read back, leave
 * nothing cached and the heap where it was (with the cache on: 2.2 MiB
 * cached, 2.9 MiB more heap; bounded at 64 KiB: 44 KiB cached, 430 KiB more
 * heap). */
static void
test_repo_object_cache_off (Fixture *f, gconstpointer data)
{
  const guint first = 100, n = 600;
  g_autofree gchar *filler = g_strnfill (3500, 'm');
  ssize_t cached = -1, allowed = -1;
  gsize heap_at_first = 0, heap_at_end;

  for (guint i = 0; i < n; i++) {
    g_autofree gchar *text = g_strdup_printf ("%u\n", i);
    g_autofree gchar *message = g_strdup_printf ("commit %u\n\n%s", i, filler);
    g_autoptr(GPtrArray) log = NULL;
    g_autoptr(GError) error = NULL;

    put (f, "stamp.txt", text);
    g_assert_true (vd_repo_commit (f->repo, message, NULL, NULL, &error));
    g_assert_no_error (error);
    log = vd_repo_log (f->repo, 2, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (log->len, ==, 2);
    if (i == first)
      heap_at_first = heap_in_use ();
  }
  heap_at_end = heap_in_use ();
  g_assert_cmpint (git_libgit2_opts (GIT_OPT_GET_CACHED_MEMORY, &cached, &allowed), ==, 0);
  g_assert_cmpint (cached, ==, 0);
  g_test_message ("heap in use after %u commits %zu bytes, after %u %zu", first, heap_at_first, n, heap_at_end);
  g_assert_cmpuint (heap_at_end, <, heap_at_first + 128 * 1024);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  vivarium_error_quark ();
  g_test_add_func ("/repo/project-names", test_project_names);
  g_test_add_func ("/repo/remote-urls", test_remote_urls);
  g_test_add ("/repo/basics", Fixture, NULL, fixture_setup, test_repo_basics, fixture_teardown);
  g_test_add ("/repo/display-paths", Fixture, NULL, fixture_setup, test_repo_display_paths, fixture_teardown);
  g_test_add ("/repo/identity", Fixture, NULL, fixture_setup, test_repo_identity, fixture_teardown);
  g_test_add ("/repo/remote", Fixture, NULL, fixture_setup, test_repo_remote, fixture_teardown);
  g_test_add ("/repo/bounds-files", Fixture, NULL, fixture_setup, test_repo_bounds_files, fixture_teardown);
  g_test_add ("/repo/bounds-total", Fixture, NULL, fixture_setup, test_repo_bounds_total, fixture_teardown);
  g_test_add ("/repo/clean-tree", Fixture, NULL, fixture_setup, test_repo_clean_tree, fixture_teardown);
  g_test_add ("/repo/dotgit-spellings", Fixture, NULL, fixture_setup, test_repo_dotgit_spellings, fixture_teardown);
  g_test_add ("/repo/object-cache-off", Fixture, NULL, fixture_setup, test_repo_object_cache_off, fixture_teardown);
  return g_test_run ();
}
