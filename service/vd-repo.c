/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdRepo"

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <git2.h>
#include <git2/sys/path.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-repo.h"

#define REMOTE_NAME        "origin"
#define INITIAL_BRANCH     "main"
#define URL_MAX            2048
#define MESSAGE_MAX        (64 * 1024)
#define LOG_MAX            10000
/* Deeper is cut at commit time: the walks (this one, the grant's chown)
 * hold a descriptor or two per level, and the daemon has 1024. */
#define TREE_DEPTH_MAX     256
#define REMOTE_TEXT_CAP    2048

struct _VdRepo {
  GObject          parent_instance;
  git_repository  *repo;
  git_repository  *bare;   /* the same git directory without a working tree: see bare_view() */
  gchar           *identity_name;
  gchar           *identity_email;
};

G_DEFINE_TYPE (VdRepo, vd_repo, G_TYPE_OBJECT)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_tree, git_tree_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_commit, git_commit_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_diff, git_diff_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_patch, git_patch_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_treebuilder, git_treebuilder_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_signature, git_signature_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_reference, git_reference_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_remote, git_remote_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_revwalk, git_revwalk_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_index, git_index_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_repository, git_repository_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_config, git_config_free)

static void
vd_repo_finalize (GObject *object)
{
  VdRepo *self = VD_REPO (object);

  git_repository_free (self->repo);
  git_repository_free (self->bare);
  g_free (self->identity_name);
  g_free (self->identity_email);
  G_OBJECT_CLASS (vd_repo_parent_class)->finalize (object);
}

static void
vd_repo_class_init (VdRepoClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_repo_finalize;
}

/* libgit2's global state lives as long as the daemon: initialised once,
 * before the first call, never shut down (a shutdown while another thread
 * is mid-clone would pull it away under that thread).
 *
 * Its object cache is off.  Left on, it keeps every commit and tree it has
 * parsed, in every repository, until it counts 256 MiB of them: a task's
 * commit stayed for good, 2.6 KiB of heap each (libgit2 counts the raw
 * object, 323 bytes, not what parsing it takes).  Bounded lower it evicts,
 * but the heap still grew by 300 bytes a commit past the bound.  Nothing
 * here looks an object up often enough to miss it: a commit, a diff and a
 * log each read what they need from the object database. */
static void
ensure_libgit2 (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once)) {
    gsize state = git_libgit2_init () > 0 ? 1 : 2;

    if (state == 1 && git_libgit2_opts (GIT_OPT_ENABLE_CACHING, 0) < 0)
      g_warning ("libgit2's object cache could not be turned off: %s",
                 git_error_last () != NULL ? git_error_last ()->message : "no reason given");
    g_once_init_leave (&once, state);
  }
}

static void
vd_repo_init (VdRepo *self)
{
  ensure_libgit2 ();
  self->identity_name = g_strdup ("Vivarium");
  self->identity_email = g_strdup ("vivarium@localhost");
}

/* ---- errors ---------------------------------------------------------- */

static VivariumError
code_for_git (int rc, int klass)
{
  switch (rc) {
  case GIT_ENOTFOUND:       return VIVARIUM_ERROR_NOT_FOUND;
  case GIT_EEXISTS:         return VIVARIUM_ERROR_EXISTS;
  case GIT_EAUTH:           return VIVARIUM_ERROR_NOT_AUTHORIZED;
  case GIT_ECERTIFICATE:    return VIVARIUM_ERROR_NOT_AUTHORIZED;
  case GIT_ENONFASTFORWARD: return VIVARIUM_ERROR_BAD_STATE;
  case GIT_EUNBORNBRANCH:   return VIVARIUM_ERROR_BAD_STATE;
  case GIT_EUSER:           return VIVARIUM_ERROR_CANCELLED;
  default:
    return klass == GIT_ERROR_OS && errno == ENOSPC ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED;
  }
}

static gboolean
set_git_error (GError **error, int rc, const gchar *what)
{
  int saved = errno;   /* before anything here can change it */
  const git_error *e = git_error_last ();
  VivariumError code = code_for_git (rc, e != NULL ? e->klass : 0);

  /* libgit2 keeps the OS's words, not its errno: a full dataset shows here. */
  if (e != NULL && e->message != NULL && strstr (e->message, g_strerror (ENOSPC)) != NULL)
    code = VIVARIUM_ERROR_NO_SPACE;
  if (e != NULL && e->message != NULL) {
    g_set_error (error, VIVARIUM_ERROR, code, "Cannot %s: %s", what, e->message);
    return FALSE;
  }
  /* A failed write of its loose-object stream sets no error of libgit2's
   * own (a full disk at the commit said only "unknown"): the system's last
   * error is all there is to go by. */
  if (saved == ENOSPC)
    code = VIVARIUM_ERROR_NO_SPACE;
  if (saved != 0)
    g_set_error (error, VIVARIUM_ERROR, code, "Cannot %s: unknown libgit2 error (the system's last error: %s)",
                 what, g_strerror (saved));
  else
    g_set_error (error, VIVARIUM_ERROR, code, "Cannot %s: unknown libgit2 error", what);
  return FALSE;
}

static gboolean
fail_errno (GError **error, int saved, const gchar *what, const gchar *path)
{
  g_autofree gchar *shown = vivarium_escape_untrusted (path, strlen (path), 256, NULL);

  g_set_error (error, VIVARIUM_ERROR,
               saved == ENOSPC ? VIVARIUM_ERROR_NO_SPACE : VIVARIUM_ERROR_FAILED,
               "Cannot %s %s: %s", what, shown, g_strerror (saved));
  return FALSE;
}

/* ---- small value types ------------------------------------------------- */

const gchar *
vd_change_status_to_string (VdChangeStatus status)
{
  switch (status) {
  case VD_CHANGE_ADDED:      return "added";
  case VD_CHANGE_MODIFIED:   return "modified";
  case VD_CHANGE_DELETED:    return "deleted";
  case VD_CHANGE_TYPECHANGE: return "typechange";
  case VD_CHANGE_SKIPPED:    return "skipped";
  default:                   return "unknown";
  }
}

const gchar *
vd_change_kind_to_string (VdChangeKind kind)
{
  switch (kind) {
  case VD_CHANGE_KIND_FILE:    return "file";
  case VD_CHANGE_KIND_SYMLINK: return "symlink";
  case VD_CHANGE_KIND_SPECIAL: return "special";
  case VD_CHANGE_KIND_GIT:     return "git";
  case VD_CHANGE_KIND_DIRECTORY: return "directory";
  default:                     return "unknown";
  }
}

void
vd_change_free (VdChange *change)
{
  if (change == NULL)
    return;
  g_free (change->path);
  g_free (change->display_path);
  g_free (change->reason);
  g_free (change);
}

void
vd_commit_info_free (VdCommitInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->id);
  g_free (info->author);
  g_free (info->subject);
  g_free (info);
}

/* A path is one line of a report: unlike vivarium_escape_untrusted(), a
 * newline or a tab is escaped too, and so is the backslash, so that the
 * escaped form reads back to exactly one path. */
static gchar *
escape_path (const gchar *path)
{
  GString *out = g_string_sized_new (strlen (path) + 8);

  for (const guchar *p = (const guchar *) path; *p != '\0'; p++) {
    if (*p == '\\')
      g_string_append (out, "\\\\");
    else if (*p >= 0x20 && *p < 0x7f)
      g_string_append_c (out, (gchar) *p);
    else
      g_string_append_printf (out, "\\x%02x", *p);
  }
  return g_string_free (out, FALSE);
}

static VdChange *
change_new (VdChangeStatus status, VdChangeKind kind, const gchar *path, const gchar *reason)
{
  VdChange *c = g_new0 (VdChange, 1);

  c->status = status;
  c->kind = kind;
  c->path = g_strdup (path);
  c->display_path = escape_path (path);
  c->reason = g_strdup (reason);
  return c;
}

static gchar *
escape_text (const gchar *s)
{
  g_autofree gchar *raw = vivarium_escape_untrusted (s, strlen (s), 1024, NULL);

  /* One line: a newline in an author or subject is data, not layout. */
  return g_strdelimit (g_steal_pointer (&raw), "\n\t", ' ');
}

/* ---- URLs -------------------------------------------------------------- */

static gboolean
refuse_url (GError **error, const gchar *why)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "The remote URL %s", why);
  return FALSE;
}

static gboolean
url_text_ok (const gchar *url, GError **error)
{
  if (url == NULL || url[0] == '\0')
    return refuse_url (error, "is empty");
  if (strlen (url) > URL_MAX)
    return refuse_url (error, "is longer than 2048 bytes");
  if (!g_utf8_validate (url, -1, NULL))
    return refuse_url (error, "is not valid UTF-8");
  for (const gchar *p = url; *p != '\0'; p++) {
    if ((guchar) *p <= 0x20 || *p == 0x7f)
      return refuse_url (error, "holds whitespace or a control character");
  }
  return TRUE;
}

static gboolean
url_parts_ok (GUri *uri, GError **error)
{
  const gchar *scheme = g_uri_get_scheme (uri);
  const gchar *host = g_uri_get_host (uri);
  gboolean is_file = g_strcmp0 (scheme, "file") == 0;

  if (g_strcmp0 (scheme, "https") != 0 && g_strcmp0 (scheme, "ssh") != 0 && !is_file)
    return refuse_url (error, "must be https://, ssh:// or file://");
  if (g_uri_get_password (uri) != NULL)
    return refuse_url (error, "may not hold a password: the daemon holds the credentials");
  if (g_uri_get_user (uri) != NULL && g_strcmp0 (scheme, "ssh") != 0)
    return refuse_url (error, "may not hold a user name outside ssh://: it would be a credential");
  if (g_uri_get_query (uri) != NULL || g_uri_get_fragment (uri) != NULL)
    return refuse_url (error, "may not hold a query or a fragment");
  if (is_file && host != NULL && host[0] != '\0' && g_strcmp0 (host, "localhost") != 0)
    return refuse_url (error, "must name a local path for file://");
  if (!is_file && (host == NULL || host[0] == '\0'))
    return refuse_url (error, "has no host");
  if (g_uri_get_path (uri)[0] != '/')
    return refuse_url (error, "must have an absolute path");
  return TRUE;
}

/* On the text as given: GUri would already have removed the dot segments
 * from what it parsed, and what is stored is the text. */
static gboolean
url_dot_segments_ok (const gchar *url, GError **error)
{
  if (strstr (url, "/../") != NULL || strstr (url, "/./") != NULL ||
      g_str_has_suffix (url, "/..") || g_str_has_suffix (url, "/."))
    return refuse_url (error, "may not hold \".\" or \"..\" path segments");
  return TRUE;
}

gboolean
vd_remote_url_validate (const gchar *url, GError **error)
{
  g_autoptr(GUri) uri = NULL;
  g_autoptr(GError) parse_error = NULL;

  if (!url_text_ok (url, error) || !url_dot_segments_ok (url, error))
    return FALSE;
  uri = g_uri_parse (url, G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED, &parse_error);
  if (uri == NULL)
    return refuse_url (error, "is not a URL of the form scheme://host/path");
  if (!url_parts_ok (uri, error))
    return FALSE;
  if (g_strcmp0 (g_uri_get_scheme (uri), "ssh") == 0 && !(git_libgit2_features () & GIT_FEATURE_SSH)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED,
                 "This libgit2 was built without ssh");
    return FALSE;
  }
  return TRUE;
}

/* ---- opening ----------------------------------------------------------- */

static VdRepo *
repo_wrap (git_repository *repo)
{
  VdRepo *self = g_object_new (VD_TYPE_REPO, NULL);

  self->repo = repo;
  return self;
}

static gboolean
write_initial_commit (git_repository *repo, GError **error)
{
  g_autoptr(git_treebuilder) bld = NULL;
  g_autoptr(git_tree) tree = NULL;
  g_autoptr(git_signature) sig = NULL;
  git_oid tree_id, commit_id;
  int rc;

  if ((rc = git_treebuilder_new (&bld, repo, NULL)) < 0 ||
      (rc = git_treebuilder_write (&tree_id, bld)) < 0 ||
      (rc = git_tree_lookup (&tree, repo, &tree_id)) < 0 ||
      (rc = git_signature_now (&sig, "Vivarium", "vivarium@localhost")) < 0 ||
      (rc = git_commit_create (&commit_id, repo, "HEAD", sig, sig, "UTF-8",
                               "Vivarium: project created\n", tree, 0, NULL)) < 0)
    return set_git_error (error, rc, "write the first commit");
  return TRUE;
}

static int
init_repository (git_repository **out, const gchar *gitdir, const gchar *workdir, const gchar *initial_head)
{
  git_repository_init_options opts = GIT_REPOSITORY_INIT_OPTIONS_INIT;
  g_autofree gchar *link = g_build_filename (workdir, ".git", NULL);
  struct stat st;
  int rc;

  /* NO_DOTGIT_DIR: the git directory is @gitdir itself and the tree gets no
   * .git directory; core.worktree in @gitdir's config (root's) names
   * the tree. */
  opts.flags = GIT_REPOSITORY_INIT_NO_DOTGIT_DIR | GIT_REPOSITORY_INIT_MKDIR | GIT_REPOSITORY_INIT_NO_REINIT;
  opts.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
  opts.workdir_path = workdir;
  opts.initial_head = initial_head;
  if ((rc = git_repository_init_ext (out, gitdir, &opts)) < 0)
    return rc;
  /* libgit2 still writes a "gitdir:" link file into the tree, as git's
   * --separate-git-dir does. Nothing here needs it (the repository is
   * always opened by its own path) and the tree is the guest's. */
  if (lstat (link, &st) == 0 && S_ISREG (st.st_mode) && unlink (link) != 0) {
    git_error_set (GIT_ERROR_OS, "cannot remove %s: %s", link, g_strerror (errno));
    git_repository_free (*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

VdRepo *
vd_repo_create (const gchar *gitdir, const gchar *workdir, GError **error)
{
  g_autoptr(git_repository) repo = NULL;
  int rc;

  ensure_libgit2 ();
  rc = init_repository (&repo, gitdir, workdir, INITIAL_BRANCH);
  if (rc < 0) {
    set_git_error (error, rc, "create the repository");
    return NULL;
  }
  if (!write_initial_commit (repo, error))
    return NULL;
  return repo_wrap (g_steal_pointer (&repo));
}

VdRepo *
vd_repo_open (const gchar *gitdir, GError **error)
{
  git_repository *repo = NULL;
  int rc;

  ensure_libgit2 ();
  /* NO_SEARCH: exactly this directory, never a parent's .git. */
  rc = git_repository_open_ext (&repo, gitdir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL);
  if (rc < 0) {
    set_git_error (error, rc, "open the repository");
    return NULL;
  }
  if (git_repository_is_bare (repo) || git_repository_workdir (repo) == NULL) {
    git_repository_free (repo);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "The repository %s has no working tree", gitdir);
    return NULL;
  }
  return repo_wrap (repo);
}

/* Without its working tree, which need not exist where this runs (the
 * push in vivarium-git-transfer's unit): refs and objects only. */
VdRepo *
vd_repo_open_bare (const gchar *gitdir, GError **error)
{
  git_repository *repo = NULL;
  int rc;

  ensure_libgit2 ();
  if ((rc = git_repository_open_bare (&repo, gitdir)) < 0) {
    set_git_error (error, rc, "open the repository");
    return NULL;
  }
  return repo_wrap (repo);
}

static gboolean
identity_part_ok (const gchar *s)
{
  if (s == NULL || s[0] == '\0' || strlen (s) > 256 || !g_utf8_validate (s, -1, NULL))
    return FALSE;
  for (const guchar *p = (const guchar *) s; *p != '\0'; p++) {
    if (*p < 0x20 || *p == 0x7f || *p == '<' || *p == '>')
      return FALSE;
  }
  return TRUE;
}

gboolean
vd_repo_set_identity (VdRepo *self, const gchar *name, const gchar *email, GError **error)
{
  if (!identity_part_ok (name) || !identity_part_ok (email)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A commit identity is a name and an email of 1 to 256 bytes of UTF-8 "
                 "without control characters, '<' or '>'");
    return FALSE;
  }
  g_free (self->identity_name);
  g_free (self->identity_email);
  self->identity_name = g_strdup (name);
  self->identity_email = g_strdup (email);
  return TRUE;
}

gchar *
vd_repo_get_head (VdRepo *self, GError **error)
{
  git_oid oid;
  gchar hex[GIT_OID_HEXSZ + 1];
  int rc = git_reference_name_to_id (&oid, self->repo, "HEAD");

  if (rc < 0) {
    set_git_error (error, rc, "resolve HEAD");
    return NULL;
  }
  git_oid_tostr (hex, sizeof hex, &oid);
  return g_strdup (hex);
}

/* ---- credentials and transport callbacks ------------------------------ */

typedef struct {
  const gchar  *ssh_key;
  const gchar  *host_key_pin;
  gchar        *host_key_seen;
  GCancellable *cancellable;
  guint         credential_calls;
  guint         key_offers;
  GString      *remote_text;
  gchar        *rejected;
} Transfer;

static void
transfer_clear (Transfer *t)
{
  g_free (t->host_key_seen);
  g_free (t->rejected);
  if (t->remote_text != NULL)
    g_string_free (t->remote_text, TRUE);
}

static int
credentials_cb (git_credential **out, const char *url, const char *username_from_url,
                unsigned int allowed_types, void *payload)
{
  Transfer *t = payload;
  g_autofree gchar *pub = NULL;

  /* libgit2 asks again after each refusal. The user name may be asked for
   * first (a URL without user@); one offer of the deploy key is all there
   * is, so a second request for a key means "refused". */
  if (t->ssh_key == NULL || t->credential_calls++ > 4)
    return GIT_PASSTHROUGH;
  if (allowed_types & GIT_CREDENTIAL_USERNAME)
    return git_credential_username_new (out, username_from_url != NULL ? username_from_url : "git");
  if (!(allowed_types & GIT_CREDENTIAL_SSH_KEY) || t->key_offers++ > 0)
    return GIT_PASSTHROUGH;
  pub = g_strconcat (t->ssh_key, ".pub", NULL);
  return git_credential_ssh_key_new (out, username_from_url != NULL ? username_from_url : "git",
                                     pub, t->ssh_key, "");
}

/* libgit2 1.5 checks no known_hosts of its own: pin the host key's SHA-256
 * (trust on first use, recorded by the caller), refuse a different one. */
gboolean
vd_repo_host_key_pin_valid (const gchar *pin)
{
  gsize i;

  for (i = 0; pin[i] != '\0' && g_ascii_isxdigit (pin[i]); i++)
    ;
  return pin[i] == '\0' && i == 64;
}

static int
certificate_cb (git_cert *cert, int valid, const char *host, void *payload)
{
  Transfer *t = payload;
  git_cert_hostkey *hk = (git_cert_hostkey *) cert;
  g_autofree gchar *seen = NULL;

  if (cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2)
    return GIT_PASSTHROUGH;  /* TLS: libgit2's own verification stands */
  if (!(hk->type & GIT_CERT_SSH_SHA256)) {
    git_error_set_str (GIT_ERROR_SSH, "the ssh server's host key has no SHA-256 fingerprint");
    return GIT_ECERTIFICATE;
  }
  seen = g_malloc0 (65);
  for (guint i = 0; i < 32; i++)
    g_snprintf (seen + 2 * i, 3, "%02x", hk->hash_sha256[i]);
  if (t->host_key_pin != NULL && g_ascii_strcasecmp (t->host_key_pin, seen) != 0) {
    git_error_set_str (GIT_ERROR_SSH, "the ssh server's host key is not the one pinned for this project");
    return GIT_ECERTIFICATE;
  }
  g_free (t->host_key_seen);
  t->host_key_seen = g_steal_pointer (&seen);
  return 0;
}

/* What the remote prints ("remote: ..."): part of its reason for a refusal. */
static int
sideband_cb (const char *str, int len, void *payload)
{
  Transfer *t = payload;

  if (t->remote_text == NULL)
    t->remote_text = g_string_new (NULL);
  if (t->remote_text->len < REMOTE_TEXT_CAP)
    g_string_append_len (t->remote_text, str, MIN ((gsize) len, REMOTE_TEXT_CAP - t->remote_text->len));
  return g_cancellable_is_cancelled (t->cancellable) ? GIT_EUSER : 0;
}

static int
update_reference_cb (const char *refname, const char *status, void *payload)
{
  Transfer *t = payload;

  if (status != NULL && t->rejected == NULL)
    t->rejected = g_strdup_printf ("%s: %s", refname, status);
  return 0;
}

static int
push_progress_cb (unsigned int current, unsigned int total, size_t bytes, void *payload)
{
  Transfer *t = payload;

  return g_cancellable_is_cancelled (t->cancellable) ? GIT_EUSER : 0;
}

static int
fetch_progress_cb (const git_indexer_progress *stats, void *payload)
{
  Transfer *t = payload;

  return g_cancellable_is_cancelled (t->cancellable) ? GIT_EUSER : 0;
}

static void
transfer_callbacks (git_remote_callbacks *cb, Transfer *t)
{
  cb->credentials = credentials_cb;
  cb->certificate_check = certificate_cb;
  cb->sideband_progress = sideband_cb;
  cb->push_update_reference = update_reference_cb;
  cb->push_transfer_progress = push_progress_cb;
  cb->transfer_progress = fetch_progress_cb;
  cb->payload = t;
}

/* ---- clone ------------------------------------------------------------- */

/* The network half: a bare clone, no checkout, so that it needs the git
 * directory and nothing else (vivarium-git-transfer runs it in a unit that
 * sees no working tree: the guest's files stay out of its reach). */
gboolean
vd_repo_clone_fetch (const gchar *url, const gchar *gitdir, const gchar *ssh_key, GCancellable *cancellable,
                     GError **error)
{
  git_clone_options opts = GIT_CLONE_OPTIONS_INIT;
  Transfer t = { .ssh_key = ssh_key, .cancellable = cancellable };
  git_repository *repo = NULL;
  int rc;

  if (!vd_remote_url_validate (url, error))
    return FALSE;
  ensure_libgit2 ();
  opts.bare = 1;
  opts.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
  transfer_callbacks (&opts.fetch_opts.callbacks, &t);
  rc = git_clone (&repo, url, gitdir, &opts);
  transfer_clear (&t);
  if (rc < 0)
    return set_git_error (error, rc, "clone the repository");
  git_repository_free (repo);
  return TRUE;
}

/* The local half: @gitdir gets @workdir as its working tree and HEAD is
 * checked out into it. No index yet, so libgit2 checks out against an
 * empty baseline, as git_clone() itself does. */
VdRepo *
vd_repo_clone_finish (const gchar *gitdir, const gchar *workdir, GError **error)
{
  git_checkout_options co = GIT_CHECKOUT_OPTIONS_INIT;
  g_autoptr(git_repository) bare = NULL;
  g_autoptr(git_config) config = NULL;
  git_repository *repo = NULL;
  int rc;

  ensure_libgit2 ();
  if ((rc = git_repository_open_bare (&bare, gitdir)) < 0 ||
      (rc = git_repository_config (&config, bare)) < 0 ||
      (rc = git_config_set_bool (config, "core.bare", 0)) < 0 ||
      (rc = git_config_set_string (config, "core.worktree", workdir)) < 0) {
    set_git_error (error, rc, "give the clone its working tree");
    return NULL;
  }
  if ((rc = git_repository_open_ext (&repo, gitdir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0) {
    set_git_error (error, rc, "open the clone");
    return NULL;
  }
  /* SAFE: checkout refuses paths libgit2 considers dangerous (.git, links
   * that would lead outside the tree). The tree holds the blobs' bytes as
   * they are, as commits read them: a checkout that converted line ends
   * (.gitattributes eol=crlf) would make every such file look modified to
   * the first task. */
  co.checkout_strategy = GIT_CHECKOUT_SAFE;
  co.disable_filters = 1;
  if (git_repository_head_unborn (repo) == 1) {
    if (!write_initial_commit (repo, error)) {
      git_repository_free (repo);
      return NULL;
    }
  } else if ((rc = git_checkout_head (repo, &co)) < 0) {
    set_git_error (error, rc, "clone the repository");
    git_repository_free (repo);
    return NULL;
  }
  return repo_wrap (repo);
}

VdRepo *
vd_repo_clone (const gchar *url, const gchar *gitdir, const gchar *workdir, const gchar *ssh_key,
               GCancellable *cancellable, GError **error)
{
  if (!vd_repo_clone_fetch (url, gitdir, ssh_key, cancellable, error))
    return NULL;
  return vd_repo_clone_finish (gitdir, workdir, error);
}

/* ---- the working tree as a tree object --------------------------------- */

#define READ_CHUNK    (64 * 1024)
/* Holes a file may have before it counts as sparse: filesystems round
 * their allocations, and a few holes are normal; a file mostly made of
 * holes is not. */
#define SPARSE_SLACK  (1024 * 1024)

typedef struct {
  VdRepo             *self;
  GPtrArray          *skipped;
  git_tree           *head_tree;   /* whose submodule links are kept */
  const VdRepoBounds *bounds;      /* NULL: unbounded (compute_changes of a tree already committed) */
  gint64              deadline;    /* monotonic µs; 0: none */
  guint64             read_total;  /* bytes read from the tree so far */
  GHashTable         *inodes;      /* "dev:ino" of a file with several names → its git_oid */
} TreeWalk;

/* Between files and between chunks: a Cancel or the deadline stops the
 * walk within one chunk's read. */
static gboolean
walk_may_go_on (TreeWalk *w, GError **error)
{
  if (w->bounds == NULL)
    return TRUE;
  if (g_cancellable_is_cancelled (w->bounds->cancellable)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED, "The commit was cancelled");
    return FALSE;
  }
  if (w->deadline > 0 && g_get_monotonic_time () > w->deadline) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                 "The commit took longer than its deadline of %u s", w->bounds->timeout_sec);
    return FALSE;
  }
  return TRUE;
}

/* A submodule is a link to another repository's commit, checked out (or
 * not) in a directory of the tree: that directory's files are not this
 * repository's, and its link stays as HEAD has it. */
static gboolean
head_gitlink (TreeWalk *w, const gchar *rel, git_oid *out)
{
  git_tree_entry *e = NULL;
  gboolean is_link;

  if (w->head_tree == NULL || git_tree_entry_bypath (&e, w->head_tree, rel) < 0)
    return FALSE;
  is_link = git_tree_entry_filemode (e) == GIT_FILEMODE_COMMIT;
  if (is_link)
    git_oid_cpy (out, git_tree_entry_id (e));
  git_tree_entry_free (e);
  return is_link;
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_odb, git_odb_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (git_odb_stream, git_odb_stream_free)

/* Exactly @size bytes, announced first: the object database deflates them
 * as they come (nothing is staged raw on the host's disk), and a file that
 * grew or shrank meanwhile is an error, not a different blob. No filter,
 * no attribute from the tree applies. */
static gboolean
blob_from_fd (TreeWalk *w, int fd, guint64 size, git_oid *out, const gchar *rel, GError **error)
{
  g_autoptr(git_odb) odb = NULL;
  g_autoptr(git_odb_stream) stream = NULL;
  g_autofree gchar *buf = g_malloc (READ_CHUNK);
  guint64 left = size;
  int rc;

  if ((rc = git_repository_odb (&odb, w->self->repo)) < 0 ||
      (rc = git_odb_open_wstream (&stream, odb, size, GIT_OBJECT_BLOB)) < 0)
    return set_git_error (error, rc, "store a file");
  while (left > 0) {
    ssize_t n;
    if (!walk_may_go_on (w, error))
      return FALSE;
    n = read (fd, buf, MIN (left, (guint64) READ_CHUNK));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail_errno (error, errno, "read", rel);
    if (n == 0)
      return fail_errno (error, ENODATA, "read all of", rel);
    if ((rc = git_odb_stream_write (stream, buf, (size_t) n)) < 0)
      return set_git_error (error, rc, "store a file");
    left -= (guint64) n;
    w->read_total += (guint64) n;
  }
  if ((rc = git_odb_stream_finalize_write (out, stream)) < 0)
    return set_git_error (error, rc, "store a file");
  return TRUE;
}

static gchar *
inode_key (const struct stat *st)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT, (guint64) st->st_dev, (guint64) st->st_ino);
}

/* Why a file is left out before a byte of it is read, or NULL. */
static gchar *
size_refusal (TreeWalk *w, const struct stat *st)
{
  guint64 size = (guint64) st->st_size;
  guint64 allocated = (guint64) st->st_blocks * 512;
  guint64 holes = size > allocated ? size - allocated : 0;

  if (w->bounds == NULL)
    return NULL;
  if (holes > SPARSE_SLACK && holes > allocated)
    return g_strdup_printf ("a sparse file (%" G_GUINT64_FORMAT " bytes long, %" G_GUINT64_FORMAT
                            " bytes on disk) is not committed: reading its holes would cost the host "
                            "time and disk outside the quota", size, allocated);
  if (w->bounds->file_max > 0 && size > w->bounds->file_max)
    return g_strdup_printf ("a file of %" G_GUINT64_FORMAT " bytes is larger than the commit's cap of %"
                            G_GUINT64_FORMAT " bytes per file", size, w->bounds->file_max);
  return NULL;
}

static gboolean
total_allows (TreeWalk *w, guint64 size, const gchar *rel, GError **error)
{
  g_autofree gchar *shown = NULL;

  if (w->bounds == NULL || w->bounds->total_max == 0 || w->read_total + size <= w->bounds->total_max)
    return TRUE;
  shown = vivarium_escape_untrusted (rel, strlen (rel), 256, NULL);
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
               "The working tree holds more than the project's quota of %" G_GUINT64_FORMAT
               " bytes to read; the commit stopped at %s", w->bounds->total_max, shown);
  return FALSE;
}

/* A regular file's blob; *left_out when it is not committed (gone, no
 * longer a regular file, or refused for its size: then said why). */
static gboolean
blob_for_regular (TreeWalk *w, int dirfd, const gchar *name, const gchar *rel,
                  git_oid *out, git_filemode_t *mode, gboolean *left_out, GError **error)
{
  /* NOFOLLOW and NONBLOCK: if the entry was swapped for a link or a fifo
   * since it was looked at, the open fails or fstat tells, and nothing
   * outside the tree is read and nothing blocks. */
  int fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  g_autofree gchar *key = NULL;
  g_autofree gchar *refusal = NULL;
  git_oid *seen;
  struct stat st;
  gboolean ok;

  if (fd < 0 || fstat (fd, &st) != 0 || !S_ISREG (st.st_mode)) {
    if (fd >= 0)
      close (fd);
    *left_out = TRUE;
    return TRUE;
  }
  *mode = (st.st_mode & 0111) != 0 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
  /* Another name of an inode already read is the same blob: hardlinks
   * cost one read, however many names they have. */
  key = st.st_nlink > 1 ? inode_key (&st) : NULL;
  if (key != NULL && (seen = g_hash_table_lookup (w->inodes, key)) != NULL) {
    git_oid_cpy (out, seen);
    close (fd);
    return TRUE;
  }
  refusal = size_refusal (w, &st);
  if (refusal != NULL) {
    close (fd);
    g_ptr_array_add (w->skipped, change_new (VD_CHANGE_SKIPPED, VD_CHANGE_KIND_FILE, rel, refusal));
    *left_out = TRUE;
    return TRUE;
  }
  ok = total_allows (w, (guint64) st.st_size, rel, error) &&
       blob_from_fd (w, fd, (guint64) st.st_size, out, rel, error);
  close (fd);
  if (ok && key != NULL)
    g_hash_table_insert (w->inodes, g_steal_pointer (&key), g_memdup2 (out, sizeof *out));
  return ok;
}

static gboolean
blob_for_symlink (git_repository *repo, int dirfd, const gchar *name, const gchar *rel,
                  git_oid *out, gboolean *left_out, GError **error)
{
  gchar target[VIVARIUM_PATH_MAX + 1];
  ssize_t n = readlinkat (dirfd, name, target, sizeof target);
  int rc;

  if (n < 0 || (gsize) n >= sizeof target) {
    *left_out = TRUE;
    return TRUE;
  }
  /* The link's content is its target string, as git stores links. */
  if ((rc = git_blob_create_from_buffer (out, repo, target, (size_t) n)) < 0)
    return set_git_error (error, rc, "store a symlink");
  return TRUE;
}

static gboolean tree_from_dir (TreeWalk *w, int fd, const gchar *rel, guint depth,
                               git_oid *out, gboolean *empty, GError **error);

static void
skip (TreeWalk *w, VdChangeKind kind, const gchar *rel, const gchar *reason)
{
  g_ptr_array_add (w->skipped, change_new (VD_CHANGE_SKIPPED, kind, rel, reason));
}

static gboolean
dir_is_empty (int dirfd, const gchar *name)
{
  int fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *de;
  gboolean empty = TRUE;

  if (dir == NULL) {
    if (fd >= 0)
      close (fd);
    return TRUE;
  }
  while (empty && (de = readdir (dir)) != NULL)
    empty = strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0;
  closedir (dir);
  return empty;
}

/* The code points HFS+ ignores in a name (git's is_hfs_dotgit()). */
static gboolean
hfs_ignorable (gunichar c)
{
  return c == 0x200c || c == 0x200d || c == 0x200e || c == 0x200f ||
         (c >= 0x202a && c <= 0x202e) || (c >= 0x206a && c <= 0x206f) || c == 0xfeff;
}

/* ".git" as HFS+ reads it: any case, ignorable code points anywhere. */
static gboolean
is_hfs_dotgit (const gchar *name)
{
  g_autoptr(GString) folded = g_string_new (NULL);

  if (!g_utf8_validate (name, -1, NULL))
    return FALSE;
  for (const gchar *p = name; *p != '\0'; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    if (!hfs_ignorable (c))
      g_string_append_unichar (folded, c);
  }
  return g_ascii_strcasecmp (folded->str, ".git") == 0;
}

/* ".git" as NTFS reads it: any case, trailing dots and spaces, an
 * alternate data stream (":..."), the short name "git~1" (git's
 * is_ntfs_dotgit()). */
static gboolean
is_ntfs_dotgit (const gchar *name)
{
  const gchar *rest;

  if (g_ascii_strncasecmp (name, ".git", 4) == 0)
    rest = name + 4;
  else if (g_ascii_strncasecmp (name, "git~1", 5) == 0)
    rest = name + 5;
  else
    return FALSE;
  for (; *rest != '\0' && *rest != ':'; rest++) {
    if (*rest != '.' && *rest != ' ')
      return FALSE;
  }
  return TRUE;
}

/* A link named so would be followed by git on the other side (git refuses
 * such trees since 2.31); libgit2 knows their NTFS and HFS spellings. */
static gboolean
is_git_control_file (const gchar *name)
{
  static const git_path_gitfile files[] = { GIT_PATH_GITFILE_GITMODULES, GIT_PATH_GITFILE_GITATTRIBUTES,
                                            GIT_PATH_GITFILE_GITIGNORE };

  for (guint i = 0; i < G_N_ELEMENTS (files); i++) {
    if (git_path_is_gitfile (name, strlen (name), files[i], GIT_PATH_FS_GENERIC) == 1)
      return TRUE;
  }
  return FALSE;
}

/* What a directory entry's name (with its type) alone rules out: recorded,
 * and TRUE. */
static gboolean
refused_by_name (TreeWalk *w, const gchar *name, const gchar *rel, const struct stat *st)
{
  if (is_hfs_dotgit (name) || is_ntfs_dotgit (name)) {
    skip (w, VD_CHANGE_KIND_GIT, rel,
          "a .git entry (in any spelling a filesystem reads as .git) is never committed");
    return TRUE;
  }
  if (S_ISLNK (st->st_mode) && is_git_control_file (name)) {
    skip (w, VD_CHANGE_KIND_SYMLINK, rel,
          "a .gitmodules, .gitattributes or .gitignore that is a symlink is never committed: git would follow it");
    return TRUE;
  }
  return FALSE;
}

static gboolean
subtree (TreeWalk *w, int dirfd, const gchar *name, const gchar *rel, guint depth,
         git_oid *oid, gboolean *left_out, GError **error)
{
  int child;
  gboolean empty = FALSE;

  /* Cut here: deeper, neither git nor the next task's grant would follow;
   * the tree is cut back to what is committed afterwards. */
  if (depth + 1 > TREE_DEPTH_MAX) {
    g_autofree gchar *why = g_strdup_printf ("a directory nested deeper than %d levels is not committed",
                                             TREE_DEPTH_MAX);
    skip (w, VD_CHANGE_KIND_DIRECTORY, rel, why);
    *left_out = TRUE;
    return TRUE;
  }
  child = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0) {
    *left_out = TRUE;
    return TRUE;
  }
  if (!tree_from_dir (w, child, rel, depth + 1, oid, &empty, error))
    return FALSE;
  *left_out = empty;  /* git keeps no empty directories */
  return TRUE;
}

/* One directory entry into @bld; what cannot be committed is recorded. */
static gboolean
add_entry (TreeWalk *w, git_treebuilder *bld, int dirfd, const gchar *name, const gchar *rel,
           guint depth, GError **error)
{
  git_repository *repo = w->self->repo;
  struct stat st;
  git_oid oid;
  git_filemode_t mode = GIT_FILEMODE_BLOB;
  gboolean left_out = FALSE;
  int rc;

  if (!walk_may_go_on (w, error))
    return FALSE;
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return TRUE;  /* gone since readdir: nothing to commit */
  if (refused_by_name (w, name, rel, &st))
    return TRUE;
  if (S_ISREG (st.st_mode)) {
    if (!blob_for_regular (w, dirfd, name, rel, &oid, &mode, &left_out, error))
      return FALSE;
  } else if (S_ISLNK (st.st_mode)) {
    mode = GIT_FILEMODE_LINK;
    if (!blob_for_symlink (repo, dirfd, name, rel, &oid, &left_out, error))
      return FALSE;
  } else if (S_ISDIR (st.st_mode) && head_gitlink (w, rel, &oid)) {
    mode = GIT_FILEMODE_COMMIT;
    if (!dir_is_empty (dirfd, name))
      skip (w, VD_CHANGE_KIND_SPECIAL, rel, "a submodule's files belong to its own repository and are not committed here");
  } else if (S_ISDIR (st.st_mode)) {
    mode = GIT_FILEMODE_TREE;
    if (!subtree (w, dirfd, name, rel, depth, &oid, &left_out, error))
      return FALSE;
  } else {
    skip (w, VD_CHANGE_KIND_SPECIAL, rel, "a fifo, socket or device is never read or committed");
    return TRUE;
  }
  if (left_out)
    return TRUE;
  if ((rc = git_treebuilder_insert (NULL, bld, name, &oid, mode)) < 0) {
    const git_error *e = git_error_last ();
    skip (w, mode == GIT_FILEMODE_LINK ? VD_CHANGE_KIND_SYMLINK : VD_CHANGE_KIND_FILE, rel,
          e != NULL ? e->message : "git refuses this name");
  }
  return TRUE;
}

/* Takes @fd (a directory): one descriptor per level, so that the deepest
 * tree allowed costs TREE_DEPTH_MAX descriptors, not twice that. */
static gboolean
tree_from_dir (TreeWalk *w, int fd, const gchar *rel, guint depth,
               git_oid *out, gboolean *empty, GError **error)
{
  g_autoptr(git_treebuilder) bld = NULL;
  DIR *dir;
  struct dirent *de;
  gboolean ok = TRUE;
  int rc;

  if ((rc = git_treebuilder_new (&bld, w->self->repo, NULL)) < 0) {
    close (fd);
    return set_git_error (error, rc, "build a tree");
  }
  dir = fdopendir (fd);
  if (dir == NULL) {
    int saved = errno;
    close (fd);
    return fail_errno (error, saved, "read the directory", rel[0] != '\0' ? rel : ".");
  }
  while (ok && (de = readdir (dir)) != NULL) {
    g_autofree gchar *child_rel = NULL;
    if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
      continue;
    child_rel = rel[0] != '\0' ? g_strconcat (rel, "/", de->d_name, NULL) : g_strdup (de->d_name);
    ok = add_entry (w, bld, dirfd (dir), de->d_name, child_rel, depth, error);
  }
  closedir (dir);
  if (!ok)
    return FALSE;
  *empty = git_treebuilder_entrycount (bld) == 0;
  if ((rc = git_treebuilder_write (out, bld)) < 0)
    return set_git_error (error, rc, "write a tree");
  return TRUE;
}

/* Every file is hashed afresh: no index, no stat cache the guest could
 * have fooled with timestamps. Objects already stored are not rewritten. */
static git_tree *
tree_from_workdir (VdRepo *self, git_tree *head_tree, const VdRepoBounds *bounds, GPtrArray *skipped,
                   GError **error)
{
  const gchar *workdir = git_repository_workdir (self->repo);
  g_autoptr(GHashTable) inodes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  TreeWalk w = { self, skipped, head_tree, bounds, 0, 0, inodes };
  git_tree *tree = NULL;
  gboolean empty;
  git_oid oid;
  int fd, rc;

  if (bounds != NULL && bounds->timeout_sec > 0)
    w.deadline = g_get_monotonic_time () + (gint64) bounds->timeout_sec * G_USEC_PER_SEC;
  fd = open (workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    fail_errno (error, errno, "open the working tree", workdir);
    return NULL;
  }
  if (!tree_from_dir (&w, fd, "", 0, &oid, &empty, error))
    return NULL;
  if ((rc = git_tree_lookup (&tree, self->repo, &oid)) < 0)
    set_git_error (error, rc, "read back the tree");
  return tree;
}

/* ---- diffs --------------------------------------------------------------- */

static VdChangeKind
kind_for_mode (guint16 mode)
{
  if (mode == GIT_FILEMODE_LINK)
    return VD_CHANGE_KIND_SYMLINK;
  if (mode == GIT_FILEMODE_COMMIT)
    return VD_CHANGE_KIND_SPECIAL;
  return VD_CHANGE_KIND_FILE;
}

static VdChangeStatus
status_for_delta (git_delta_t status)
{
  switch (status) {
  case GIT_DELTA_ADDED:      return VD_CHANGE_ADDED;
  case GIT_DELTA_DELETED:    return VD_CHANGE_DELETED;
  case GIT_DELTA_TYPECHANGE: return VD_CHANGE_TYPECHANGE;
  default:                   return VD_CHANGE_MODIFIED;
  }
}

static VdChange *
change_for_delta (git_diff *diff, size_t i, GError **error)
{
  const git_diff_delta *d = git_diff_get_delta (diff, i);
  g_autoptr(git_patch) patch = NULL;
  gboolean deleted = d->status == GIT_DELTA_DELETED;
  const git_diff_file *f = deleted ? &d->old_file : &d->new_file;
  VdChange *c;
  size_t added = 0, removed = 0;
  int rc;

  if ((rc = git_patch_from_diff (&patch, diff, i)) < 0 ||
      (patch != NULL && (rc = git_patch_line_stats (NULL, &added, &removed, patch)) < 0)) {
    set_git_error (error, rc, "compute a diff");
    return NULL;
  }
  c = change_new (status_for_delta (d->status), kind_for_mode (f->mode), f->path, NULL);
  c->lines_added = added;
  c->lines_removed = removed;
  /* Flags are final once the patch was generated. */
  c->binary = (git_diff_get_delta (diff, i)->flags & GIT_DIFF_FLAG_BINARY) != 0;
  return c;
}

/* Diffs read attributes (binary, diff drivers) from the working tree's
 * .gitattributes when the repository has one: those are the guest's, and
 * libgit2 would follow their links and block on a fifo named so. The same
 * git directory opened bare has only its own info/attributes. */
static git_repository *
bare_view (VdRepo *self, GError **error)
{
  int rc;

  if (self->bare == NULL && (rc = git_repository_open_bare (&self->bare, git_repository_path (self->repo))) < 0) {
    set_git_error (error, rc, "open the repository for diffs");
    return NULL;
  }
  return self->bare;
}

static gint
compare_changes (gconstpointer a, gconstpointer b)
{
  const VdChange *ca = *(VdChange * const *) a;
  const VdChange *cb = *(VdChange * const *) b;

  return strcmp (ca->path, cb->path);
}

static GPtrArray *
changes_between (VdRepo *self, git_tree *old_tree, git_tree *new_tree, GPtrArray *skipped, GError **error)
{
  git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
  g_autoptr(git_diff) diff = NULL;
  g_autoptr(GPtrArray) changes = g_ptr_array_new_with_free_func ((GDestroyNotify) vd_change_free);
  g_autoptr(git_tree) old_bare = NULL;
  g_autoptr(git_tree) new_bare = NULL;
  git_repository *bare = bare_view (self, error);
  int rc;

  if (bare == NULL)
    return NULL;
  if ((rc = git_tree_lookup (&old_bare, bare, git_tree_id (old_tree))) < 0 ||
      (rc = git_tree_lookup (&new_bare, bare, git_tree_id (new_tree))) < 0) {
    set_git_error (error, rc, "read the trees to compare");
    return NULL;
  }
  /* No rename detection: a rename is a deletion and an addition, each
   * exactly what it is. */
  opts.flags = GIT_DIFF_INCLUDE_TYPECHANGE;
  if ((rc = git_diff_tree_to_tree (&diff, bare, old_bare, new_bare, &opts)) < 0) {
    set_git_error (error, rc, "compare trees");
    return NULL;
  }
  for (size_t i = 0; i < git_diff_num_deltas (diff); i++) {
    VdChange *c = change_for_delta (diff, i, error);
    if (c == NULL)
      return NULL;
    g_ptr_array_add (changes, c);
  }
  /* readdir's order is the filesystem's: sort, so that the same tree
   * always gives the same report. */
  g_ptr_array_sort (skipped, compare_changes);
  for (guint i = 0; i < skipped->len; i++)
    g_ptr_array_add (changes, g_steal_pointer (&skipped->pdata[i]));
  g_ptr_array_set_size (skipped, 0);
  return g_steal_pointer (&changes);
}

static gboolean
parse_commit_id (VdRepo *self, const gchar *id, git_commit **out, GError **error)
{
  git_oid oid;
  int rc;

  if (id == NULL) {
    if ((rc = git_reference_name_to_id (&oid, self->repo, "HEAD")) < 0)
      return set_git_error (error, rc, "resolve HEAD");
  } else if (strlen (id) != GIT_OID_HEXSZ || git_oid_fromstr (&oid, id) < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A commit id is %d hexadecimal digits", GIT_OID_HEXSZ);
    return FALSE;
  }
  if ((rc = git_commit_lookup (out, self->repo, &oid)) < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 "The repository has no commit %s", id != NULL ? id : "HEAD");
    return FALSE;
  }
  return TRUE;
}

GPtrArray *
vd_repo_compute_changes (VdRepo *self, const gchar *base, GError **error)
{
  g_autoptr(git_commit) commit = NULL;
  g_autoptr(git_commit) head = NULL;
  g_autoptr(git_tree) head_tree = NULL;
  g_autoptr(git_tree) old_tree = NULL;
  g_autoptr(git_tree) new_tree = NULL;
  g_autoptr(GPtrArray) skipped = g_ptr_array_new_with_free_func ((GDestroyNotify) vd_change_free);
  int rc;

  if (!parse_commit_id (self, base, &commit, error) || !parse_commit_id (self, NULL, &head, error))
    return NULL;
  if ((rc = git_commit_tree (&old_tree, commit)) < 0 || (rc = git_commit_tree (&head_tree, head)) < 0) {
    set_git_error (error, rc, "read a commit's tree");
    return NULL;
  }
  /* HEAD's tree, not the base's: it says which directories are submodules. */
  new_tree = tree_from_workdir (self, head_tree, NULL, skipped, error);
  if (new_tree == NULL)
    return NULL;
  return changes_between (self, old_tree, new_tree, skipped, error);
}

/* ---- commit ------------------------------------------------------------ */

static gboolean
message_ok (const gchar *message, GError **error)
{
  if (message == NULL || message[0] == '\0' || strlen (message) > MESSAGE_MAX ||
      !g_utf8_validate (message, -1, NULL)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A commit message is 1 to %d bytes of UTF-8", MESSAGE_MAX);
    return FALSE;
  }
  return TRUE;
}

/* The index is only for people who run git by hand on the host: kept equal
 * to HEAD so that `git status` there shows what the guest changed since. */
static void
sync_index (VdRepo *self, git_tree *tree)
{
  g_autoptr(git_index) index = NULL;

  if (git_repository_index (&index, self->repo) < 0 ||
      git_index_read_tree (index, tree) < 0 || git_index_write (index) < 0)
    g_debug ("Cannot update the index: %s", git_error_last () ? git_error_last ()->message : "?");
}

static gboolean
write_commit (VdRepo *self, const gchar *message, git_commit *parent, git_tree *tree,
              git_oid *out, GError **error)
{
  g_autoptr(git_signature) sig = NULL;
  const git_commit *parents[] = { parent };
  int rc;

  if ((rc = git_signature_now (&sig, self->identity_name, self->identity_email)) < 0)
    return set_git_error (error, rc, "make the commit's signature");
  if ((rc = git_commit_create (out, self->repo, "HEAD", sig, sig, "UTF-8", message, tree, 1, parents)) < 0)
    return set_git_error (error, rc, "commit");
  return TRUE;
}

gboolean
vd_repo_commit_bounded (VdRepo *self, const gchar *message, const VdRepoBounds *bounds, gchar **commit_id,
                        GPtrArray **changes, GError **error)
{
  g_autoptr(git_commit) head = NULL;
  g_autoptr(git_tree) head_tree = NULL;
  g_autoptr(git_tree) tree = NULL;
  g_autoptr(GPtrArray) skipped = g_ptr_array_new_with_free_func ((GDestroyNotify) vd_change_free);
  g_autoptr(GPtrArray) list = NULL;
  git_oid oid;
  gchar hex[GIT_OID_HEXSZ + 1];
  int rc;

  if (!message_ok (message, error) || !parse_commit_id (self, NULL, &head, error))
    return FALSE;
  if ((rc = git_commit_tree (&head_tree, head)) < 0)
    return set_git_error (error, rc, "read HEAD's tree");
  tree = tree_from_workdir (self, head_tree, bounds, skipped, error);
  if (tree == NULL)
    return FALSE;
  git_oid_cpy (&oid, git_commit_id (head));
  if (!git_oid_equal (git_tree_id (tree), git_tree_id (head_tree))) {
    if (!write_commit (self, message, head, tree, &oid, error))
      return FALSE;
    sync_index (self, tree);
  }
  list = changes_between (self, head_tree, tree, skipped, error);
  if (list == NULL)
    return FALSE;
  git_oid_tostr (hex, sizeof hex, &oid);
  if (commit_id != NULL)
    *commit_id = g_strdup (hex);
  if (changes != NULL)
    *changes = g_steal_pointer (&list);
  return TRUE;
}

gboolean
vd_repo_commit (VdRepo *self, const gchar *message, gchar **commit_id, GPtrArray **changes, GError **error)
{
  return vd_repo_commit_bounded (self, message, NULL, commit_id, changes, error);
}

/* ---- the working tree made equal to HEAD -------------------------------- */

/* Removes every entry of @fd but one non-empty directory, whose name it
 * returns in *@sub (NULL when @fd is empty now). */
static gboolean
empty_but_one (int fd, gchar **sub, GError **error)
{
  int dup_fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  DIR *dir = dup_fd >= 0 ? fdopendir (dup_fd) : NULL;
  struct dirent *de;
  gboolean ok = TRUE;

  *sub = NULL;
  if (dir == NULL) {
    int saved = errno;
    if (dup_fd >= 0)
      close (dup_fd);
    return fail_errno (error, saved, "read", "a directory of the tree");
  }
  rewinddir (dir);
  while (ok && *sub == NULL && (de = readdir (dir)) != NULL) {
    struct stat st;
    if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0 ||
        fstatat (fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (unlinkat (fd, de->d_name, S_ISDIR (st.st_mode) ? AT_REMOVEDIR : 0) == 0 || errno == ENOENT)
      continue;
    if (S_ISDIR (st.st_mode) && (errno == ENOTEMPTY || errno == EEXIST))
      *sub = g_strdup (de->d_name);
    else
      ok = fail_errno (error, errno, "remove", de->d_name);
  }
  closedir (dir);
  return ok;
}

/* Removes @name in @parent and everything under it, however deep, with
 * two descriptors: down into a non-empty directory, up ("..") when it is
 * empty. No recursion, so no depth is too deep. Only the daemon touches
 * the tree now (the guest and the worker are stopped, the tree is root's
 * and 0700), so ".." is the directory it came from. */
static gboolean
remove_tree_at (int parent, const gchar *name, GError **error)
{
  struct stat st;
  guint depth = 0;
  int fd;

  if (fstatat (parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? TRUE : fail_errno (error, errno, "look at", name);
  if (!S_ISDIR (st.st_mode))
    return unlinkat (parent, name, 0) == 0 || errno == ENOENT ? TRUE : fail_errno (error, errno, "remove", name);
  fd = openat (parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail_errno (error, errno, "open", name);
  for (;;) {
    g_autofree gchar *sub = NULL;
    int next;
    if (!empty_but_one (fd, &sub, error)) {
      close (fd);
      return FALSE;
    }
    if (sub == NULL && depth == 0)
      break;
    next = openat (fd, sub != NULL ? sub : "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      int saved = errno;
      close (fd);
      return fail_errno (error, saved, "open a directory under", name);
    }
    close (fd);
    fd = next;
    depth = sub != NULL ? depth + 1 : depth - 1;
  }
  close (fd);
  if (unlinkat (parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    return fail_errno (error, errno, "remove", name);
  return TRUE;
}

static gboolean
remove_children (int fd, GError **error)
{
  /* Each non-empty directory, one after another, until none is left. */
  for (;;) {
    g_autofree gchar *sub = NULL;
    if (!empty_but_one (fd, &sub, error))
      return FALSE;
    if (sub == NULL)
      return TRUE;
    if (!remove_tree_at (fd, sub, error))
      return FALSE;
  }
}

/* Whether an entry of the tree on disk is what @e of the commit holds. */
static gboolean
entry_matches (const git_tree_entry *e, const struct stat *st)
{
  switch (git_tree_entry_filemode (e)) {
  case GIT_FILEMODE_BLOB:
  case GIT_FILEMODE_BLOB_EXECUTABLE:
    return S_ISREG (st->st_mode);
  case GIT_FILEMODE_LINK:
    return S_ISLNK (st->st_mode);
  case GIT_FILEMODE_TREE:
  case GIT_FILEMODE_COMMIT:
    return S_ISDIR (st->st_mode);
  default:
    return FALSE;
  }
}

static gboolean clean_dir (VdRepo *self, int fd, git_tree *tree, GError **error);

static gboolean
clean_entry (VdRepo *self, int fd, const gchar *name, git_tree *tree, GError **error)
{
  const git_tree_entry *e = git_tree_entry_byname (tree, name);
  g_autoptr(git_tree) sub = NULL;
  struct stat st;
  int child, rc;

  if (fstatat (fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return TRUE;
  if (e == NULL || !entry_matches (e, &st))
    return remove_tree_at (fd, name, error);
  if (!S_ISDIR (st.st_mode))
    return TRUE;
  child = openat (fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (child < 0)
    return fail_errno (error, errno, "open", name);
  /* A submodule's directory stays, empty, as git leaves one not checked out. */
  if (git_tree_entry_filemode (e) == GIT_FILEMODE_COMMIT) {
    gboolean ok = remove_children (child, error);
    close (child);
    return ok;
  }
  if ((rc = git_tree_lookup (&sub, self->repo, git_tree_entry_id (e))) < 0) {
    close (child);
    return set_git_error (error, rc, "read a tree");
  }
  return clean_dir (self, child, sub, error);
}

/* Takes @fd. Recurses as deep as the commit's tree goes (TREE_DEPTH_MAX
 * at most), one descriptor per level. */
static gboolean
clean_dir (VdRepo *self, int fd, git_tree *tree, GError **error)
{
  DIR *dir = fdopendir (fd);
  struct dirent *de;
  gboolean ok = TRUE;

  if (dir == NULL) {
    int saved = errno;
    close (fd);
    return fail_errno (error, saved, "read", "a directory of the tree");
  }
  while (ok && (de = readdir (dir)) != NULL) {
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      ok = clean_entry (self, dirfd (dir), de->d_name, tree, error);
  }
  closedir (dir);
  return ok;
}

static int
open_workdir (VdRepo *self, GError **error)
{
  const gchar *workdir = git_repository_workdir (self->repo);
  int fd = open (workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0)
    fail_errno (error, errno, "open the working tree", workdir);
  return fd;
}

gboolean
vd_repo_clean_tree (VdRepo *self, GError **error)
{
  g_autoptr(git_commit) head = NULL;
  g_autoptr(git_tree) tree = NULL;
  int fd, rc;

  if (!parse_commit_id (self, NULL, &head, error))
    return FALSE;
  if ((rc = git_commit_tree (&tree, head)) < 0)
    return set_git_error (error, rc, "read HEAD's tree");
  if ((fd = open_workdir (self, error)) < 0)
    return FALSE;
  return clean_dir (self, fd, tree, error);
}

gboolean
vd_repo_restore_tree (VdRepo *self, GError **error)
{
  git_checkout_options opts = GIT_CHECKOUT_OPTIONS_INIT;
  g_autoptr(git_commit) head = NULL;
  g_autoptr(git_tree) tree = NULL;
  gboolean ok;
  int fd, rc;

  if (!parse_commit_id (self, NULL, &head, error))
    return FALSE;
  if ((rc = git_commit_tree (&tree, head)) < 0)
    return set_git_error (error, rc, "read HEAD's tree");
  if ((fd = open_workdir (self, error)) < 0)
    return FALSE;
  ok = remove_children (fd, error);
  close (fd);
  if (!ok)
    return FALSE;
  /* Into an empty tree: nothing of the guest's is left for libgit2 to
   * read; no filter, as a clone checks out. */
  opts.checkout_strategy = GIT_CHECKOUT_FORCE;
  opts.disable_filters = 1;
  if ((rc = git_checkout_tree (self->repo, (git_object *) tree, &opts)) < 0)
    return set_git_error (error, rc, "check HEAD out");
  return TRUE;
}

/* ---- log --------------------------------------------------------------- */

static VdCommitInfo *
commit_info (git_commit *commit)
{
  const git_signature *a = git_commit_author (commit);
  g_autofree gchar *author = g_strdup_printf ("%s <%s>", a->name, a->email);
  const gchar *summary = git_commit_summary (commit);
  VdCommitInfo *info = g_new0 (VdCommitInfo, 1);
  gchar hex[GIT_OID_HEXSZ + 1];

  git_oid_tostr (hex, sizeof hex, git_commit_id (commit));
  info->id = g_strdup (hex);
  /* A cloned history is anybody's text. */
  info->author = escape_text (author);
  info->subject = escape_text (summary != NULL ? summary : "");
  info->time_us = (gint64) a->when.time * G_USEC_PER_SEC;
  return info;
}

GPtrArray *
vd_repo_log (VdRepo *self, guint n, GError **error)
{
  g_autoptr(git_revwalk) walk = NULL;
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) vd_commit_info_free);
  git_oid oid;
  int rc;

  if (n == 0 || n > LOG_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A log holds 1 to %d commits", LOG_MAX);
    return NULL;
  }
  if ((rc = git_revwalk_new (&walk, self->repo)) < 0 ||
      (rc = git_revwalk_sorting (walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME)) < 0 ||
      (rc = git_revwalk_push_head (walk)) < 0) {
    set_git_error (error, rc, "walk the history");
    return NULL;
  }
  while (out->len < n && (rc = git_revwalk_next (&oid, walk)) == 0) {
    g_autoptr(git_commit) commit = NULL;
    if ((rc = git_commit_lookup (&commit, self->repo, &oid)) < 0)
      break;
    g_ptr_array_add (out, commit_info (commit));
  }
  if (rc < 0 && rc != GIT_ITEROVER) {
    set_git_error (error, rc, "walk the history");
    return NULL;
  }
  return g_steal_pointer (&out);
}

/* ---- remote and push --------------------------------------------------- */

gchar *
vd_repo_get_remote (VdRepo *self)
{
  g_autoptr(git_remote) remote = NULL;

  if (git_remote_lookup (&remote, self->repo, REMOTE_NAME) < 0)
    return NULL;
  return g_strdup (git_remote_url (remote));
}

gboolean
vd_repo_set_remote (VdRepo *self, const gchar *url, GError **error)
{
  g_autoptr(git_remote) remote = NULL;
  int rc;

  if (!vd_remote_url_validate (url, error))
    return FALSE;
  if (git_remote_lookup (&remote, self->repo, REMOTE_NAME) == 0)
    rc = git_remote_set_url (self->repo, REMOTE_NAME, url);
  else
    rc = git_remote_create (&remote, self->repo, REMOTE_NAME, url);
  if (rc < 0)
    return set_git_error (error, rc, "set the remote");
  return TRUE;
}

static gboolean
push_result (Transfer *t, int rc, GError **error)
{
  g_autofree gchar *said = NULL;

  if (t->remote_text != NULL)
    said = g_strstrip (escape_text (t->remote_text->str));
  if (rc < 0 && rc == GIT_EUSER && g_cancellable_is_cancelled (t->cancellable)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED, "The push was cancelled");
    return FALSE;
  }
  if (rc < 0 && t->key_offers > 1) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                 "The remote refused the project's deploy key: add the project's DeployKey on the remote");
    return FALSE;
  }
  if (rc < 0) {
    g_autoptr(GError) e = NULL;
    set_git_error (&e, rc, "push");
    g_set_error (error, e->domain, e->code, "%s%s%s", e->message,
                 said != NULL ? "; the remote said: " : "", said != NULL ? said : "");
    return FALSE;
  }
  if (t->rejected != NULL) {
    g_autofree gchar *why = escape_text (t->rejected);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "The remote refused the push of %s%s%s", why,
                 said != NULL ? "; it said: " : "", said != NULL ? said : "");
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_repo_push (VdRepo *self, const gchar *ssh_key, const gchar *host_key_pin, gchar **host_key_seen,
              GCancellable *cancellable, GError **error)
{
  git_push_options opts = GIT_PUSH_OPTIONS_INIT;
  g_autoptr(git_remote) remote = NULL;
  g_autoptr(git_reference) head = NULL;
  Transfer t = { .ssh_key = ssh_key, .host_key_pin = host_key_pin, .cancellable = cancellable };
  g_autofree gchar *refspec = NULL;
  gchar *specs[1];
  git_strarray arr = { specs, 1 };
  gboolean ok;
  int rc;

  if (git_remote_lookup (&remote, self->repo, REMOTE_NAME) < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The project has no remote to publish to");
    return FALSE;
  }
  /* The URL was validated when set, but the config is a file on disk. */
  if (!vd_remote_url_validate (git_remote_url (remote), error))
    return FALSE;
  if ((rc = git_repository_head (&head, self->repo)) < 0 || !git_reference_is_branch (head))
    return rc < 0 ? set_git_error (error, rc, "resolve HEAD's branch")
                  : (g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "HEAD is not on a branch"), FALSE);
  refspec = g_strdup_printf ("%s:%s", git_reference_name (head), git_reference_name (head));
  specs[0] = refspec;
  transfer_callbacks (&opts.callbacks, &t);
  rc = git_remote_push (remote, &arr, &opts);
  ok = push_result (&t, rc, error);
  if (ok && host_key_seen != NULL)
    *host_key_seen = g_steal_pointer (&t.host_key_seen);
  transfer_clear (&t);
  return ok;
}
