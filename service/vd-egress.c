/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdEgress"

#include "config.h"

#include <string.h>

#include <errno.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <glib-unix.h>
#include <gio/gunixfdlist.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-egress.h"
#include "vivarium-secret.h"
#include "vivarium-ssh-key.h"
#include "vd-egress-log.h"
#include "vd-egress-rules.h"
#include "vd-fs.h"
#include "vd-log.h"
#include "vd-unit-sandbox.h"

/* How long after the proxy's exit systemd is asked how it ended. */
#define EXIT_DESCRIBE_DELAY_MS 500
/* How many sessions' decision logs are kept after they end. */
#define KEPT_LOGS_MAX 256

struct _VdEgress {
  GObject               parent_instance;
  VdConfig             *config;
  VdSystemd            *systemd;
  gchar                *session_id;
  guint32               proxy_uid;
  guint32               peer_uid;
  VivariumEgressPolicy *policy;
  GPtrArray            *deny_list;
  gchar                *dir;
  gchar                *unit;
  const gchar          *state;
  gchar                *reason;
  gchar                *resolv_conf;   /* the DNS relay's, or NULL */
  GPtrArray            *secrets;       /* VivariumSecret*, or NULL */
  GPtrArray            *ssh_keys;      /* VivariumSshKey*, or NULL */
  guint                 unit_watch;
  guint                 exit_source;
  gint                  pidfd;         /* the proxy's process while it runs, or -1 */
  gboolean              stopped;
  gboolean              died;          /* ended on its own while it served, and described */
};

G_DEFINE_FINAL_TYPE (VdEgress, vd_egress, G_TYPE_OBJECT)

enum { SIGNAL_STATE_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

static const gchar *mode_names[] = {
  [VD_EGRESS_MODE_OPEN] = VIVARIUM_EGRESS_MODE_OPEN,
  [VD_EGRESS_MODE_ALLOWLIST] = VIVARIUM_EGRESS_MODE_ALLOWLIST,
  [VD_EGRESS_MODE_NONE] = VIVARIUM_EGRESS_MODE_NONE,
};

const gchar *
vd_egress_mode_to_string (VdEgressMode mode)
{
  return mode < G_N_ELEMENTS (mode_names) ? mode_names[mode] : "open";
}

gboolean
vd_egress_mode_from_string (const gchar *text, VdEgressMode *mode)
{
  for (guint i = 0; i < G_N_ELEMENTS (mode_names); i++) {
    if (g_strcmp0 (text, mode_names[i]) == 0) {
      *mode = (VdEgressMode) i;
      return TRUE;
    }
  }
  return FALSE;
}

static void
close_pidfd (VdEgress *self)
{
  if (self->pidfd >= 0)
    close (self->pidfd);
  self->pidfd = -1;
}

static void
vd_egress_finalize (GObject *object)
{
  VdEgress *self = VD_EGRESS (object);

  close_pidfd (self);
  if (self->exit_source != 0)
    g_source_remove (self->exit_source);
  if (self->unit_watch != 0)
    vd_systemd_unwatch_unit (self->systemd, self->unit_watch);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_pointer (&self->policy, vivarium_egress_policy_free);
  g_clear_pointer (&self->deny_list, g_ptr_array_unref);
  g_free (self->session_id);
  g_free (self->dir);
  g_free (self->unit);
  g_free (self->reason);
  g_free (self->resolv_conf);
  g_clear_pointer (&self->secrets, g_ptr_array_unref);
  g_clear_pointer (&self->ssh_keys, g_ptr_array_unref);
  G_OBJECT_CLASS (vd_egress_parent_class)->finalize (object);
}

static void
vd_egress_class_init (VdEgressClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_egress_finalize;
  /* The state changed (vd_egress_get_state): "running", or "failed" with a reason. */
  signals[SIGNAL_STATE_CHANGED] = g_signal_new ("state-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                                0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
vd_egress_init (VdEgress *self)
{
  self->state = "starting";
  self->pidfd = -1;
  self->reason = g_strdup ("");
}

VdEgress *
vd_egress_new (VdConfig *config, VdSystemd *systemd, const gchar *session_id, guint32 proxy_uid, guint32 peer_uid,
               VivariumEgressPolicy *policy, GPtrArray *deny_list)
{
  VdEgress *self = g_object_new (VD_TYPE_EGRESS, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->session_id = g_strdup (session_id);
  self->proxy_uid = proxy_uid;
  self->peer_uid = peer_uid;
  self->policy = policy;
  self->deny_list = g_ptr_array_ref (deny_list);
  self->dir = g_build_filename (vd_config_get_runtime_dir (config), "egress", session_id, NULL);
  self->unit = g_strdup_printf ("vivarium-egress-%s.service", session_id);
  return self;
}

void
vd_egress_set_resolv_conf (VdEgress *self, const gchar *path)
{
  g_free (self->resolv_conf);
  self->resolv_conf = g_strdup (path);
}

const gchar *
vd_egress_get_unit (VdEgress *self)
{
  return self->unit;
}

const gchar *
vd_egress_get_dir (VdEgress *self)
{
  return self->dir;
}

const gchar *
vd_egress_get_state (VdEgress *self)
{
  return self->state;
}

const gchar *
vd_egress_get_reason (VdEgress *self)
{
  return self->reason;
}

gboolean
vd_egress_died (VdEgress *self)
{
  return self->died;
}

VivariumEgressPolicy *
vd_egress_get_policy (VdEgress *self)
{
  return self->policy;
}

GStrv
vd_egress_describe_rules (VdEgress *self)
{
  return vivarium_egress_policy_describe (self->policy);
}

static void
set_state (VdEgress *self, const gchar *state, const gchar *reason)
{
  self->state = state;
  g_free (self->reason);
  self->reason = g_strdup (reason != NULL ? reason : "");
  g_signal_emit (self, signals[SIGNAL_STATE_CHANGED], 0);
}

/* The proxy runs the guest's network itself (restricted libslirp, its
 * forwards into its own sockets): QEMU only passes frames, and starts
 * nothing per connection (docs/egress.md, "How allowlist is wired"). */
gchar *
vd_egress_net_socket (VdEgress *self)
{
  return g_build_filename (self->dir, "net.sock", NULL);
}

void
vd_egress_set_secrets (VdEgress *self, GPtrArray *secrets)
{
  g_clear_pointer (&self->secrets, g_ptr_array_unref);
  self->secrets = secrets != NULL && secrets->len > 0 ? g_ptr_array_ref (secrets) : NULL;
}

void
vd_egress_set_ssh_keys (VdEgress *self, GPtrArray *ssh_keys)
{
  g_clear_pointer (&self->ssh_keys, g_ptr_array_unref);
  self->ssh_keys = ssh_keys != NULL && ssh_keys->len > 0 ? g_ptr_array_ref (ssh_keys) : NULL;
}

/* The CA's certificate is the proxy's writing: read as untrusted. */
#define CA_PEM_MAX (64 * 1024)

static gboolean
is_pem_text (const gchar *data, gsize len)
{
  for (gsize i = 0; i < len; i++)
    if (!(data[i] == '\n' || (data[i] >= 0x20 && data[i] < 0x7f)))
      return FALSE;
  return TRUE;
}

gchar *
vd_egress_dup_ca_pem (VdEgress *self, GError **error)
{
  g_autofree gchar *path = g_build_filename (self->dir, "ca.pem", NULL);
  g_autoptr(GBytes) bytes = vd_fs_read_untrusted (path, CA_PEM_MAX, error);
  gsize len = 0;
  const gchar *data = bytes != NULL ? g_bytes_get_data (bytes, &len) : NULL;

  if (bytes == NULL)
    return NULL;
  if (len < 27 || memcmp (data, "-----BEGIN CERTIFICATE-----", 27) != 0 || !is_pem_text (data, len)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The egress proxy's CA certificate %s is not a PEM certificate", path);
    return NULL;
  }
  return g_strndup (data, len);
}

/* --- start ------------------------------------------------------------ */

/* The values, for the proxy only: root writes the file, then gives it to
 * the proxy's uid (which may remove it from its own directory). */
static gboolean
write_secrets_file (VdEgress *self, GError **error)
{
  g_autofree gchar *path = g_build_filename (self->dir, "secrets", NULL);

  if (self->secrets == NULL)
    return TRUE;
  if (!vivarium_secrets_save (self->secrets, path, 0400, error))
    return FALSE;
  if (lchown (path, self->proxy_uid, (gid_t) -1) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot give %s to the egress proxy", path);
  return TRUE;
}

/* Like the secrets: root writes, the proxy's uid may read and remove. */
static gboolean
write_ssh_keys_file (VdEgress *self, GError **error)
{
  g_autofree gchar *path = g_build_filename (self->dir, "ssh-keys", NULL);

  if (self->ssh_keys == NULL)
    return TRUE;
  if (!vivarium_ssh_keys_save (self->ssh_keys, path, 0400, error))
    return FALSE;
  if (lchown (path, self->proxy_uid, (gid_t) -1) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot give %s to the egress proxy", path);
  return TRUE;
}

static gboolean
write_deny_file (VdEgress *self, GError **error)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree gchar *path = g_build_filename (self->dir, "deny", NULL);

  for (guint i = 0; i < self->deny_list->len; i++)
    g_string_append_printf (text, "%s\n", (const gchar *) g_ptr_array_index (self->deny_list, i));
  return vd_fs_write_durably (path, text->str, 0644, error);
}

/* /run/vivarium/egress 0711 root: the session's QEMU passes through to its
 * proxy's sockets; the directory is the proxy's (it makes its doors and
 * its log there), the policy, the deny list and net.sock in it root's. */
static gboolean
prepare_dir (VdEgress *self, GError **error)
{
  g_autofree gchar *parent = g_path_get_dirname (self->dir);
  g_autofree gchar *policy = g_build_filename (self->dir, "policy.conf", NULL);
  struct group *grp = getgrnam (VIVARIUM_QEMU_GROUP);

  vd_fs_rm_rf (self->dir, NULL);
  return vd_fs_mkdir (parent, 0711, 0, 0, error) &&
         vd_fs_mkdir (self->dir, 0711, self->proxy_uid, grp != NULL ? grp->gr_gid : 0, error) &&
         vivarium_egress_policy_save (self->policy, policy, 0644, error) &&
         write_deny_file (self, error) && write_secrets_file (self, error) &&
         write_ssh_keys_file (self, error);
}

static GVariant *
exec_start (VdEgress *self)
{
  g_autofree gchar *binary = g_build_filename (VIVARIUM_LIBEXECDIR, "vivarium", "vivarium-egress", NULL);
  g_autofree gchar *policy = g_build_filename (self->dir, "policy.conf", NULL);
  g_autofree gchar *deny = g_build_filename (self->dir, "deny", NULL);
  g_autofree gchar *peer = g_strdup_printf ("%u", self->peer_uid);
  g_autofree gchar *up = g_strdup_printf ("%" G_GUINT64_FORMAT, vd_config_get_egress_limit_up (self->config));
  g_autofree gchar *down = g_strdup_printf ("%" G_GUINT64_FORMAT, vd_config_get_egress_limit_down (self->config));
  g_autofree gchar *entries = g_strdup_printf ("%u", vd_config_get_egress_log_max_entries (self->config));
  g_autofree gchar *secrets = g_build_filename (self->dir, "secrets", NULL);
  g_autofree gchar *upstream_ca = vd_config_dup_egress_upstream_ca (self->config);
  g_autofree gchar *ssh_keys = g_build_filename (self->dir, "ssh-keys", NULL);
  const gchar *argv[] = { binary, "--dir", self->dir, "--policy", policy, "--deny", deny, "--peer-uid", peer,
                          "--guest-address", VD_EGRESS_GUEST_ADDRESS, "--limit-up", up, "--limit-down", down,
                          "--log-max-entries", entries, "--net-fd", "0", NULL };
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) all = NULL;

  g_strv_builder_addv (b, argv);
  if (self->secrets != NULL) {
    g_strv_builder_add_many (b, "--secrets", secrets, NULL);
    if (upstream_ca != NULL)
      g_strv_builder_add_many (b, "--upstream-ca", upstream_ca, NULL);
  }
  if (self->ssh_keys != NULL)
    g_strv_builder_add_many (b, "--ssh-keys", ssh_keys, NULL);
  all = g_strv_builder_end (b);
  return g_variant_new_parsed ("[(%s, %^as, false)]", binary, all);
}

/* The proxy reaches the internet, never the host's networks: layer 1 here,
 * layer 2 by its uid (the session pool adds it to the nftables table). */
static void
add_sandbox (VdEgress *self, GVariantBuilder *b)
{
  const gchar *families[] = { "AF_UNIX", "AF_INET", "AF_INET6", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@privileged", "@resources", NULL };
  const gchar *binds[] = { self->dir, NULL };
  VdUnitSandbox sandbox = {
    .address_families = families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .runtime_dir = vd_config_get_runtime_dir (self->config),
    .binds = binds,
  };

  vd_unit_sandbox_add (b, &sandbox);
}

static GVariant *
unit_properties (VdEgress *self)
{
  g_autofree gchar *description = g_strdup_printf ("Vivarium egress proxy of session %s", self->session_id);
  g_autofree gchar *user = g_strdup_printf ("%u", self->proxy_uid);
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string (description));
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("notify"));
  g_variant_builder_add (&b, "(sv)", "NotifyAccess", g_variant_new_string ("main"));
  g_variant_builder_add (&b, "(sv)", "Slice", g_variant_new_string (VIVARIUM_SLICE));
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "After", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (&b, "(sv)", "User", g_variant_new_string (user));
  g_variant_builder_add (&b, "(sv)", "Group", g_variant_new_string (VIVARIUM_QEMU_GROUP));
  g_variant_builder_add (&b, "(sv)", "ExecStart", exec_start (self));
  /* net.sock, listening (make_net_socket): standard input, and nothing
   * written to it. */
  g_variant_builder_add (&b, "(sv)", "StandardInputFileDescriptor", g_variant_new_handle (0));
  g_variant_builder_add (&b, "(sv)", "StandardOutput", g_variant_new_string ("journal"));
  g_variant_builder_add (&b, "(sv)", "StandardError", g_variant_new_string ("journal"));
  g_variant_builder_add (&b, "(sv)", "IPAddressDeny", vd_unit_sandbox_ip_deny (self->deny_list));
  /* The kernel's count of what the proxy sends: the self-test's witness
   * that a DNS question from the guest left nothing (IPEgressPackets). */
  g_variant_builder_add (&b, "(sv)", "IPAccounting", g_variant_new_boolean (TRUE));
  if (self->resolv_conf != NULL)
    g_variant_builder_add (&b, "(sv)", "BindReadOnlyPaths",
                           g_variant_new_parsed ("[(%s, '/etc/resolv.conf', false, @t 0)]", self->resolv_conf));
  g_variant_builder_add (&b, "(sv)", "MemoryMax", g_variant_new_uint64 (256 * 1024 * 1024));
  /* The proxy serves each connection on a thread (at most 64), besides its
   * main loop and GLib's own. */
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (96));
  g_variant_builder_add (&b, "(sv)", "TimeoutStartUSec", g_variant_new_uint64 (15 * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "TimeoutStopUSec", g_variant_new_uint64 (5 * G_USEC_PER_SEC));
  add_sandbox (self, &b);
  return g_variant_builder_end (&b);
}

static gchar *
unit_status_text (VdEgress *self)
{
  g_autoptr(GVariant) v = vd_systemd_get_unit_property (self->systemd, self->unit, "org.freedesktop.systemd1.Service",
                                                        "StatusText", NULL);

  return v != NULL && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING) ? g_variant_dup_string (v, NULL) : NULL;
}

static gchar *
describe_end (VdEgress *self)
{
  g_autofree gchar *how = vd_systemd_describe_unit_end (self->systemd, self->unit_watch);
  g_autofree gchar *status = unit_status_text (self);

  return g_strdup_printf ("the egress proxy %s ended (%s)%s%s", self->unit, how != NULL ? how : "how is unknown",
                          status != NULL && status[0] != '\0' ? ": " : "", status != NULL ? status : "");
}

/* systemd has had its say on how the process ended by now. */
static gboolean
describe_failure_cb (gpointer user_data)
{
  VdEgress *self = VD_EGRESS (user_data);
  g_autofree gchar *reason = NULL;

  self->exit_source = 0;
  if (self->stopped)
    return G_SOURCE_REMOVE;
  reason = describe_end (self);
  vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "session %s: %s; the guest has no way out now",
                  self->session_id, reason);
  self->died = TRUE;
  set_state (self, "failed", reason);
  return G_SOURCE_REMOVE;
}

static gboolean
proxy_exited_cb (gint fd, GIOCondition condition, gpointer user_data)
{
  VdEgress *self = VD_EGRESS (user_data);

  self->exit_source = 0;
  close_pidfd (self);
  if (self->stopped)
    return G_SOURCE_REMOVE;
  /* The way out is gone this instant; why, systemd says a moment later. */
  set_state (self, "failed", "the egress proxy exited");
  self->exit_source = g_timeout_add (EXIT_DESCRIBE_DELAY_MS, describe_failure_cb, self);
  return G_SOURCE_REMOVE;
}

/* A pidfd is readable once its process is gone: the daemon hears of the
 * proxy's end at once, without polling systemd. */
static gboolean
watch_main_pid (VdEgress *self, GError **error)
{
  g_autoptr(GVariant) v = vd_systemd_get_unit_property (self->systemd, self->unit, "org.freedesktop.systemd1.Service",
                                                        "MainPID", error);
  guint32 pid;
  int fd;

  if (v == NULL)
    return FALSE;
  pid = g_variant_get_uint32 (v);
  fd = pid != 0 ? (int) syscall (SYS_pidfd_open, (pid_t) pid, 0) : -1;
  if (fd < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The egress proxy is not running (%s)",
                 pid == 0 ? "no main process" : g_strerror (errno));
    return FALSE;
  }
  self->pidfd = fd;
  self->exit_source = g_unix_fd_add_full (G_PRIORITY_DEFAULT, fd, G_IO_IN, proxy_exited_cb, self, NULL);
  return TRUE;
}

static void
unit_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdEgress *self = g_task_get_source_object (task);
  g_autoptr(GError) error = NULL;

  if (!vd_systemd_start_transient_finish (self->systemd, res, &error)) {
    g_autofree gchar *reason = describe_end (self);
    set_state (self, "failed", reason);
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The egress proxy did not start: %s (%s)",
                             reason, error->message);
    return;
  }
  if (!watch_main_pid (self, &error)) {
    set_state (self, "failed", error->message);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  set_state (self, "running", NULL);
  g_task_return_boolean (task, TRUE);
}

/* The guest's network socket, made and listening before the proxy runs:
 * the session starts QEMU beside the proxy rather than after it, and
 * QEMU's stream netdev connects once, at its start (QEMU 7.2 has no
 * reconnect). The connection waits in the backlog until the proxy, which
 * gets the socket as its standard input, accepts it and checks its uid. */
static GUnixFDList *
make_net_socket (VdEgress *self, GError **error)
{
  g_autofree gchar *path = vd_egress_net_socket (self);
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new ();
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof sun.sun_path) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "%s: the path is too long for a socket", path);
    return NULL;
  }
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  /* Any local process may connect (the proxy checks the peer's uid); the
   * directory lets only the session's QEMU pass. */
  if (fd < 0 || bind (fd, (struct sockaddr *) &sun, sizeof sun) != 0 || chmod (path, 0666) != 0 ||
      listen (fd, 4) != 0 || g_unix_fd_list_append (fds, fd, NULL) != 0) {
    int saved = errno;
    if (fd >= 0)
      close (fd);
    vd_fs_set_error_errno (error, saved, "Cannot make the guest's network socket %s", path);
    return NULL;
  }
  close (fd);
  return g_steal_pointer (&fds);
}

void
vd_egress_start_async (VdEgress *self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GUnixFDList) fds = NULL;
  GError *error = NULL;

  if (!prepare_dir (self, &error) || (fds = make_net_socket (self, &error)) == NULL) {
    set_state (self, "failed", error->message);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  if (self->unit_watch == 0)
    self->unit_watch = vd_systemd_watch_unit (self->systemd, self->unit);
  vd_systemd_start_transient_async (self->systemd, self->unit, unit_properties (self), fds, cancellable,
                                    unit_started_cb, task);
}

gboolean
vd_egress_start_finish (VdEgress *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* --- the end: keep the log, leave nothing else ------------------------- */

gchar *
vd_egress_kept_log_path (VdConfig *config, const gchar *session_id)
{
  g_autofree gchar *name = g_strconcat (session_id, ".jsonl", NULL);

  return vd_config_build_state_path (config, "logs", "egress", name, NULL);
}

static gint
compare_mtime (gconstpointer a, gconstpointer b)
{
  const gchar *pa = *(const gchar * const *) a, *pb = *(const gchar * const *) b;
  GStatBuf sa = { 0 }, sb = { 0 };

  g_stat (pa, &sa);
  g_stat (pb, &sb);
  return sa.st_mtime < sb.st_mtime ? 1 : sa.st_mtime > sb.st_mtime ? -1 : g_strcmp0 (pa, pb);
}

/* The newest KEPT_LOGS_MAX logs stay; the others go. */
static void
prune_kept_logs (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; names != NULL && names[i] != NULL; i++)
    if (g_str_has_suffix (names[i], ".jsonl"))
      g_ptr_array_add (paths, g_build_filename (dir, names[i], NULL));
  g_ptr_array_sort (paths, compare_mtime);
  for (guint i = KEPT_LOGS_MAX; i < paths->len; i++)
    g_unlink (g_ptr_array_index (paths, i));
}

/* The proxy wrote it, so it is read as untrusted and bounded; copied as
 * root's file into a root-only directory. */
static void
keep_log (VdEgress *self)
{
  g_autofree gchar *live = g_build_filename (self->dir, "decisions.jsonl", NULL);
  g_autofree gchar *kept = vd_egress_kept_log_path (self->config, self->session_id);
  g_autofree gchar *dir = g_path_get_dirname (kept);
  g_autofree gchar *logs = g_path_get_dirname (dir);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;

  bytes = vd_fs_read_untrusted (live, VD_EGRESS_LOG_MAX_BYTES, &error);
  if (bytes == NULL && !g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND)) {
    vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "session %s: cannot read the egress log: %s",
                    self->session_id, error->message);
  }
  g_clear_error (&error);
  if (!vd_fs_mkdir (logs, 0700, 0, 0, &error) || !vd_fs_mkdir (dir, 0700, 0, 0, &error)) {
    vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "cannot keep the egress log: %s", error->message);
    return;
  }
  {
    g_autofree gchar *text = bytes != NULL ? g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes))
                                           : g_strdup ("");
    if (!vd_fs_write_durably (kept, text, 0600, &error))
      vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "cannot keep the egress log: %s", error->message);
  }
  prune_kept_logs (dir);
}

/* What comes after the unit's stop, however it was stopped. */
static void
finish_stop (VdEgress *self)
{
  g_autoptr(GError) error = NULL;

  vd_systemd_reset_failed_unit (self->systemd, self->unit);
  keep_log (self);
  if (!vd_fs_rm_rf (self->dir, &error))
    vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "cannot remove %s: %s", self->dir, error->message);
}

/* FALSE when there is nothing to stop any more. */
static gboolean
begin_stop (VdEgress *self)
{
  if (self->stopped)
    return FALSE;
  self->stopped = TRUE;
  if (self->exit_source != 0)
    g_source_remove (self->exit_source);
  self->exit_source = 0;
  close_pidfd (self);
  return TRUE;
}

void
vd_egress_stop_sync (VdEgress *self)
{
  g_autoptr(GError) error = NULL;

  if (!begin_stop (self))
    return;
  if (vd_systemd_unit_is_loaded (self->systemd, self->unit) &&
      !vd_systemd_stop_unit_sync (self->systemd, self->unit, 10000, &error))
    vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "cannot stop %s: %s", self->unit, error->message);
  finish_stop (self);
}

static void
unit_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdEgress *self = g_task_get_source_object (task);
  g_autoptr(GError) error = NULL;

  /* A proxy that is gone already makes StopUnit fail: nothing to say. */
  if (!vd_systemd_stop_unit_finish (self->systemd, res, &error) && vd_systemd_unit_is_loaded (self->systemd, self->unit))
    vd_log_session (G_LOG_LEVEL_WARNING, self->session_id, "cannot stop %s: %s", self->unit, error->message);
  finish_stop (self);
  g_task_return_boolean (task, TRUE);
}

void
vd_egress_stop_async (VdEgress *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);

  if (!begin_stop (self)) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, unit_stopped_cb, task);
}

gboolean
vd_egress_stop_finish (VdEgress *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

gchar *
vd_egress_dup_log_path (VdEgress *self)
{
  if (self->stopped)
    return vd_egress_kept_log_path (self->config, self->session_id);
  return g_build_filename (self->dir, "decisions.jsonl", NULL);
}
