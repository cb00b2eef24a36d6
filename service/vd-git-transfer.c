/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdGitTransfer"

#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <glib-unix.h>
#include <gio/gunixfdlist.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-git-transfer.h"
#include "vd-systemd.h"
#include "vd-unit-sandbox.h"

#define SYSTEMD_NAME      "org.freedesktop.systemd1"
#define SYSTEMD_PATH      "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER   "org.freedesktop.systemd1.Manager"
#define SYSTEMD_CALL_MS   30000
/* Until vd_git_transfer_set_timeout(): [Projects] TransferTimeoutSec='s
 * default. A stalled remote holds its project no longer than this. */
#define TRANSFER_TIMEOUT_DEFAULT_SEC  (30 * 60)
/* The result is a few sentences; a program that says more is not ours. */
#define RESULT_CAP        (64 * 1024)
/* How long a unit that ended, or was stopped, may take to be gone. */
#define UNIT_GONE_MS      10000

struct _VdGitTransfer {
  GObject          parent_instance;
  GMutex           lock;        /* the connection, which the main thread replaces */
  GDBusConnection *connection;
  gchar           *state_dir;
  gchar           *runtime_dir;
  guint            timeout_sec; /* under the lock too */
};

G_DEFINE_TYPE (VdGitTransfer, vd_git_transfer, G_TYPE_OBJECT)

static void
vd_git_transfer_finalize (GObject *object)
{
  VdGitTransfer *self = VD_GIT_TRANSFER (object);

  g_clear_object (&self->connection);
  g_free (self->state_dir);
  g_free (self->runtime_dir);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (vd_git_transfer_parent_class)->finalize (object);
}

static void
vd_git_transfer_class_init (VdGitTransferClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_git_transfer_finalize;
}

static void
vd_git_transfer_init (VdGitTransfer *self)
{
  g_mutex_init (&self->lock);
  self->timeout_sec = TRANSFER_TIMEOUT_DEFAULT_SEC;
}

VdGitTransfer *
vd_git_transfer_new (GDBusConnection *connection, const gchar *state_dir, const gchar *runtime_dir)
{
  VdGitTransfer *self = g_object_new (VD_TYPE_GIT_TRANSFER, NULL);

  self->connection = connection != NULL ? g_object_ref (connection) : NULL;
  self->state_dir = g_strdup (state_dir);
  self->runtime_dir = g_strconcat ("-", runtime_dir, NULL);
  return self;
}

void
vd_git_transfer_set_connection (VdGitTransfer *self, GDBusConnection *connection)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  g_set_object (&self->connection, connection);
}

void
vd_git_transfer_set_timeout (VdGitTransfer *self, guint seconds)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  self->timeout_sec = seconds;
}

static guint
get_timeout (VdGitTransfer *self)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  return self->timeout_sec;
}

/* The connection to run the unit over, or NULL: no systemd there (the
 * integration suite's private bus), so the transfer runs in-process. */
static GDBusConnection *
systemd_connection (VdGitTransfer *self)
{
  g_autoptr(GDBusConnection) connection = NULL;
  g_autoptr(GVariant) reply = NULL;
  gboolean has_owner = FALSE;

  if (self == NULL)
    return NULL;
  {
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);
    if (self->connection != NULL)
      connection = g_object_ref (self->connection);
  }
  if (connection == NULL)
    return NULL;
  reply = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "NameHasOwner", g_variant_new ("(s)", SYSTEMD_NAME),
                                       G_VARIANT_TYPE ("(b)"), G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, NULL, NULL);
  if (reply != NULL)
    g_variant_get (reply, "(b)", &has_owner);
  return has_owner ? g_steal_pointer (&connection) : NULL;
}

/* ---- one run of the program in its unit ---------------------------------- */

typedef struct {
  const gchar         *what;      /* "clone", "push": for the sentences */
  const gchar         *project;
  gchar               *unit;
  gchar               *unit_path;
  const gchar * const *argv;
  const gchar * const *binds;     /* read-write */
  const gchar * const *ro_binds;
  VdServiceEnd         end;       /* what systemd said of the service, from PropertiesChanged */
} Run;

static void
run_clear (Run *run)
{
  g_free (run->unit);
  g_free (run->unit_path);
  vd_service_end_clear (&run->end);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Run, run_clear)

static GVariant *
unit_properties (VdGitTransfer *self, Run *run)
{
  const gchar *families[] = { "AF_UNIX", "AF_INET", "AF_INET6", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@privileged", "@resources", NULL };
  const gchar *inaccessible[] = { self->runtime_dir, NULL };
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  g_autofree gchar *description = g_strdup_printf ("Vivarium git %s for project %s", run->what, run->project);
  /* Root, for the git directory and the key are root's (0700, 0600), but
   * with no capability at all: it cannot reach past their owner's modes. */
  VdUnitSandbox sandbox = {
    .address_families = families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .runtime_dir = self->state_dir,
    .binds = run->binds,
    .ro_binds = run->ro_binds,
    .inaccessible = inaccessible,
  };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string (description));
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("oneshot"));
  g_variant_builder_add (&b, "(sv)", "ExecStart",
                         g_variant_new_parsed ("[(%s, %^as, false)]", run->argv[0], run->argv));
  g_variant_builder_add (&b, "(sv)", "StandardOutputFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "StandardError", g_variant_new_string ("journal"));
  /* libgit2 reads $HOME/.ssh/known_hosts and $HOME/.gitconfig; root's are
   * none of a project's business (the daemon had ProtectHome= too). */
  g_variant_builder_add (&b, "(sv)", "Environment", g_variant_new_parsed ("['HOME=/nonexistent']"));
  /* Stops with the daemon. Not After=: a daemon not yet ready would hold
   * the unit's start, and the daemon waits for the unit. */
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (32));
  g_variant_builder_add (&b, "(sv)", "PrivateDevices", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "DevicePolicy", g_variant_new_string ("closed"));
  g_variant_builder_add (&b, "(sv)", "PrivateMounts", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "KeyringMode", g_variant_new_string ("private"));
  vd_unit_sandbox_add (&b, &sandbox);
  return g_variant_builder_end (&b);
}

static void
service_changed_cb (GDBusConnection *connection, const gchar *sender, const gchar *path,
                    const gchar *interface_name, const gchar *signal_name, GVariant *parameters,
                    gpointer user_data)
{
  Run *run = user_data;
  g_autoptr(GVariant) changed = NULL;

  if (!g_variant_is_of_type (parameters, G_VARIANT_TYPE ("(sa{sv}as)")))
    return;
  changed = g_variant_get_child_value (parameters, 1);
  vd_service_end_take (&run->end, changed);
}

static gboolean
unit_loaded (GDBusConnection *connection, Run *run)
{
  g_autoptr(GVariant) reply =
    g_dbus_connection_call_sync (connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "GetUnit",
                                 g_variant_new ("(s)", run->unit), G_VARIANT_TYPE ("(o)"),
                                 G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, NULL, NULL);
  return reply != NULL;
}

/* Until systemd collected the unit (so that the next transfer of the
 * project can take its name), hearing how it ended meanwhile. */
static void
wait_gone (GDBusConnection *connection, GMainContext *context, Run *run)
{
  gint64 end = g_get_monotonic_time () + UNIT_GONE_MS * 1000;

  while (unit_loaded (connection, run) && g_get_monotonic_time () < end) {
    while (g_main_context_iteration (context, FALSE))
      ;
    g_usleep (20 * 1000);
  }
  while (g_main_context_iteration (context, FALSE))
    ;
  /* A failed unit is collected too (CollectMode=); one that would not stop
   * is the sweep's at the next start. */
  if (unit_loaded (connection, run))
    g_warning ("%s is still loaded %u s after it ended", run->unit, UNIT_GONE_MS / 1000);
}

static void
stop_unit (GDBusConnection *connection, Run *run)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply =
    g_dbus_connection_call_sync (connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "StopUnit",
                                 g_variant_new ("(ss)", run->unit, "replace"), G_VARIANT_TYPE ("(o)"),
                                 G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, NULL, &error);

  if (reply == NULL)
    g_warning ("stopping %s: %s", run->unit, error->message);
}

static gboolean
start_unit (VdGitTransfer *self, GDBusConnection *connection, Run *run, gint write_fd, GError **error)
{
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  g_autoptr(GVariant) reply = NULL;
  GVariant *aux = g_variant_new_array (G_VARIANT_TYPE ("(sa(sv))"), NULL, 0);

  if (g_unix_fd_list_append (fds, write_fd, error) < 0)
    return FALSE;
  reply = g_dbus_connection_call_with_unix_fd_list_sync (
    connection, SYSTEMD_NAME, SYSTEMD_PATH, SYSTEMD_MANAGER, "StartTransientUnit",
    g_variant_new ("(ss@a(sv)@a(sa(sv)))", run->unit, "fail", unit_properties (self, run), aux),
    G_VARIANT_TYPE ("(o)"), G_DBUS_CALL_FLAGS_NONE, SYSTEMD_CALL_MS, fds, NULL, NULL, error);
  if (reply == NULL) {
    g_dbus_error_strip_remote_error (*error);
    g_prefix_error (error, "Cannot start the git %s of project %s (%s): ", run->what, run->project, run->unit);
    return FALSE;
  }
  return TRUE;
}

typedef enum { READ_DONE, READ_CANCELLED, READ_TIMED_OUT, READ_TOO_MUCH, READ_FAILED } ReadEnd;

/* To EOF (the program exited, or was killed), within the deadline and
 * @cancellable, keeping at most RESULT_CAP bytes; systemd's signals are
 * heard between reads. */
static ReadEnd
read_result (gint fd, guint timeout_sec, GMainContext *context, GCancellable *cancellable, GByteArray *out)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_sec * G_USEC_PER_SEC;
  gint cancel_fd = cancellable != NULL ? g_cancellable_get_fd (cancellable) : -1;
  ReadEnd end = READ_FAILED;

  for (;;) {
    struct pollfd pfd[2] = { { fd, POLLIN, 0 }, { cancel_fd, POLLIN, 0 } };
    gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
    guint8 chunk[4096];
    gssize n;

    while (g_main_context_iteration (context, FALSE))
      ;
    if (g_cancellable_is_cancelled (cancellable)) {
      end = READ_CANCELLED;
      break;
    }
    if (left_ms <= 0) {
      end = READ_TIMED_OUT;
      break;
    }
    if (poll (pfd, cancel_fd >= 0 ? 2 : 1, (gint) MIN (left_ms, 250)) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfd[0].revents == 0)
      continue;
    n = read (fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      end = n == 0 ? READ_DONE : READ_FAILED;
      break;
    }
    if (out->len + (gsize) n > RESULT_CAP) {
      end = READ_TOO_MUCH;
      break;
    }
    g_byte_array_append (out, chunk, (guint) n);
  }
  if (cancel_fd >= 0)
    g_cancellable_release_fd (cancellable);
  return end;
}

static gchar *
describe_end (Run *run)
{
  gchar *how = vd_service_end_describe (&run->end);

  return how != NULL ? how : g_strdup ("systemd said nothing of how it ended");
}

/* The program's (bsss): its error, named as on the bus, back to the same
 * VivariumError; anything else of it is the program's failure. */
static gboolean
take_result (Run *run, GBytes *bytes, gchar **host_key_seen, GError **error)
{
  g_autoptr(GVariant) v = g_variant_ref_sink (g_variant_new_from_bytes (G_VARIANT_TYPE ("(bsss)"), bytes, FALSE));
  g_autoptr(GError) remote = NULL;
  const gchar *name, *message, *seen;
  gboolean ok;

  if (g_bytes_get_size (bytes) == 0 || !g_variant_is_normal_form (v)) {
    g_autofree gchar *how = describe_end (run);
    g_autoptr(GString) dump = g_string_new (NULL);
    for (gsize i = 0; i < MIN (g_bytes_get_size (bytes), 256); i++)
      g_string_append_printf (dump, "%02x", ((const guint8 *) g_bytes_get_data (bytes, NULL))[i]);
    /* For whoever reads the journal: what it wrote instead. */
    g_warning ("%s wrote %" G_GSIZE_FORMAT " bytes that are no (bsss): %s", run->unit, g_bytes_get_size (bytes),
               dump->str);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 g_bytes_get_size (bytes) == 0 ? "The git %s of project %s ended without a result (%s: %s)"
                                               : "The git %s of project %s gave a result that is not one (%s: %s)",
                 run->what, run->project, run->unit, how);
    return FALSE;
  }
  g_variant_get (v, "(b&s&s&s)", &ok, &name, &message, &seen);
  if (ok) {
    if (host_key_seen != NULL && vd_repo_host_key_pin_valid (seen))
      *host_key_seen = g_ascii_strdown (seen, -1);
    return TRUE;
  }
  remote = g_dbus_error_new_for_dbus_error (name, message);
  if (remote->domain != VIVARIUM_ERROR || !g_str_has_prefix (name, VIVARIUM_DBUS_ERROR_PREFIX "."))
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, message);
  else
    g_set_error_literal (error, VIVARIUM_ERROR, remote->code, message);
  return FALSE;
}

static gboolean
run_in_unit (VdGitTransfer *self, GDBusConnection *connection, Run *run, gchar **host_key_seen,
             GCancellable *cancellable, GError **error)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GByteArray) out = g_byte_array_new ();
  guint timeout = get_timeout (self);
  g_autoptr(GBytes) bytes = NULL;
  gint fds[2];
  guint subscription;
  ReadEnd end;

  if (!g_unix_open_pipe (fds, FD_CLOEXEC, error))
    return FALSE;
  /* Heard in this thread's own context, which read_result() turns. */
  g_main_context_push_thread_default (context);
  subscription = g_dbus_connection_signal_subscribe (connection, SYSTEMD_NAME, "org.freedesktop.DBus.Properties",
                                                     "PropertiesChanged", run->unit_path,
                                                     "org.freedesktop.systemd1.Service", G_DBUS_SIGNAL_FLAGS_NONE,
                                                     service_changed_cb, run, NULL);
  g_main_context_pop_thread_default (context);
  if (!start_unit (self, connection, run, fds[1], error)) {
    close (fds[0]);
    close (fds[1]);
    g_dbus_connection_signal_unsubscribe (connection, subscription);
    return FALSE;
  }
  /* Only the unit holds the write end now: EOF is its end. */
  close (fds[1]);
  end = read_result (fds[0], timeout, context, cancellable, out);
  close (fds[0]);
  if (end != READ_DONE)
    stop_unit (connection, run);
  wait_gone (connection, context, run);
  g_dbus_connection_signal_unsubscribe (connection, subscription);
  switch (end) {
  case READ_CANCELLED:
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED, "The %s was cancelled", run->what);
    return FALSE;
  case READ_TIMED_OUT:
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT,
                 "The %s took longer than its limit of %u s ([Projects] TransferTimeoutSec) and was stopped (%s)",
                 run->what, timeout, run->unit);
    return FALSE;
  case READ_TOO_MUCH:
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The git %s of project %s wrote more than %u KiB of result and was stopped (%s)", run->what,
                 run->project, RESULT_CAP / 1024, run->unit);
    return FALSE;
  case READ_FAILED:
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot read the result of %s: %s", run->unit,
                 g_strerror (errno));
    return FALSE;
  case READ_DONE:
  default:
    break;
  }
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&out));
  return take_result (run, bytes, host_key_seen, error);
}

static void
run_init (Run *run, const gchar *what, const gchar *project)
{
  run->what = what;
  run->project = project;
  run->unit = g_strconcat (VIVARIUM_GIT_TRANSFER_UNIT_PREFIX, project, ".service", NULL);
  run->unit_path = vd_systemd_unit_path (run->unit);
}

/* A file:// remote's directory, as the unit must see it, or NULL. */
static gchar *
file_remote_path (const gchar *url)
{
  g_autofree gchar *path = NULL;
  gchar *real;

  if (!g_str_has_prefix (url, "file://"))
    return NULL;
  path = g_uri_unescape_string (url + strlen ("file://"), NULL);
  real = path != NULL ? realpath (path, NULL) : NULL;
  if (real == NULL)
    return NULL;
  {
    gchar *copy = g_strdup (real);
    free (real);
    return copy;
  }
}

/* ---- clone and push ----------------------------------------------------- */

VdRepo *
vd_git_transfer_clone (VdGitTransfer *self, const gchar *project, const gchar *url, const gchar *gitdir,
                       const gchar *workdir, const gchar *ssh_key, GCancellable *cancellable, GError **error)
{
  g_autoptr(GDBusConnection) connection = NULL;
  g_autofree gchar *program = NULL;
  g_autofree gchar *pub = NULL;
  g_autofree gchar *remote_path = NULL;
  g_auto(Run) run = { 0 };
  gboolean ok;

  if (!vd_remote_url_validate (url, error))
    return NULL;
  connection = systemd_connection (self);
  if (connection == NULL)
    return vd_repo_clone (url, gitdir, workdir, ssh_key, cancellable, error);
  /* The unit binds it onto itself, so it must exist; empty, as git_clone wants. */
  if (g_mkdir (gitdir, 0700) != 0) {
    gint saved = errno;
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot create %s: %s", gitdir, g_strerror (saved));
    return NULL;
  }
  program = g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium-git-transfer", NULL);
  pub = g_strconcat (ssh_key, ".pub", NULL);
  remote_path = file_remote_path (url);
  {
    const gchar *argv[] = { program, "clone", url, gitdir, ssh_key, NULL };
    const gchar *binds[] = { gitdir, NULL };
    const gchar *ro_binds[] = { ssh_key, pub, remote_path, NULL };

    run_init (&run, "clone", project);
    run.argv = argv;
    run.binds = binds;
    run.ro_binds = ro_binds;
    g_info ("cloning %s for project %s in %s", url, project, run.unit);
    ok = run_in_unit (self, connection, &run, NULL, cancellable, error);
  }
  if (!ok)
    return NULL;
  return vd_repo_clone_finish (gitdir, workdir, error);
}

gboolean
vd_git_transfer_push (VdGitTransfer *self, const gchar *project, VdRepo *repo, const gchar *gitdir,
                      const gchar *url, const gchar *ssh_key, const gchar *host_key_pin, gchar **host_key_seen,
                      GCancellable *cancellable, GError **error)
{
  g_autoptr(GDBusConnection) connection = NULL;
  g_autofree gchar *program = NULL;
  g_autofree gchar *pub = NULL;
  g_autofree gchar *remote_path = NULL;
  g_auto(Run) run = { 0 };

  connection = systemd_connection (self);
  if (connection == NULL)
    return vd_repo_push (repo, ssh_key, host_key_pin, host_key_seen, cancellable, error);
  if (url == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The project has no remote to publish to");
    return FALSE;
  }
  if (!vd_remote_url_validate (url, error))
    return FALSE;
  program = g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium-git-transfer", NULL);
  pub = g_strconcat (ssh_key, ".pub", NULL);
  remote_path = file_remote_path (url);
  {
    const gchar *argv[] = { program, "push", gitdir, ssh_key, host_key_pin != NULL ? host_key_pin : "-", NULL };
    const gchar *binds[] = { gitdir, remote_path, NULL };
    const gchar *ro_binds[] = { ssh_key, pub, NULL };

    run_init (&run, "push", project);
    run.argv = argv;
    run.binds = binds;
    run.ro_binds = ro_binds;
    g_info ("pushing project %s to %s in %s", project, url, run.unit);
    return run_in_unit (self, connection, &run, host_key_seen, cancellable, error);
  }
}
