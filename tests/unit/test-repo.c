/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The project name and remote URL rules, and VdRepo on a plain directory
 * (no dataset, no root): real libgit2, read back with the git CLI.
 */
#define G_LOG_DOMAIN "TestRepo"

#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
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

  log = vd_repo_log (f->repo, 2, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (log->len, ==, 2);
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[0])->subject, ==, "two");
  g_assert_cmpstr (((VdCommitInfo *) log->pdata[1])->id, ==, h1);
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
  return g_test_run ();
}
