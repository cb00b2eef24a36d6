/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSession"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-command-log.h"
#include "vd-egress-log.h"
#include "vd-egress-rules.h"
#include "vd-fs.h"
#include "vd-log.h"
#include "vd-qemu-command.h"
#include "vd-session.h"
#include "vd-session-private.h"
#include "vivarium-secret.h"
#include "vivarium-ssh-key.h"
#include "vd-unit-sandbox.h"
#include "vd-session-snapshot.h"

#define SOCKET_WAIT_MS        15000
/* A reply must stay under the bus's 32 MiB message limit, header and all:
 * a reply the bus refuses costs the daemon its connection. A PNG of QEMU's
 * largest VGA mode is far smaller than this. */
#define SCREENSHOT_MAX        (24 * 1024 * 1024)
#define FILE_TIMEOUT_MS       60000
#define STOP_TIMEOUT_MS       30000
#define MEMORY_OVERHEAD_MIB   256
/* How long a command that outlived its caller's timeout is still watched:
 * long enough for a slow build step to end, short enough that a guest
 * cannot keep the daemon polling forever. */
#define REAP_TIMEOUT_SEC      (15 * 60)


G_DEFINE_TYPE (VdSession, vd_session, G_TYPE_OBJECT)

enum { SIGNAL_ENDED, SIGNAL_EGRESS_DIED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_session_finalize (GObject *object)
{
  VdSession *self = VD_SESSION (object);

  if (self->unit_watch != 0)
    vd_systemd_unwatch_unit (self->systemd, self->unit_watch);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->egress);
  g_strfreev (self->egress_groups);
  g_strfreev (self->egress_allow);
  g_clear_pointer (&self->secrets, g_ptr_array_unref);
  g_clear_pointer (&self->ssh_keys, g_ptr_array_unref);
  g_clear_object (&self->helper);
  g_clear_object (&self->image);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_pointer (&self->deny_list, g_ptr_array_unref);
  g_clear_object (&self->log);
  g_clear_object (&self->reapers);
  g_free (self->io_error);
  g_free (self->end_detail);
  g_free (self->helper_death);
  g_hash_table_unref (self->timings);
  g_free (self->id);
  g_free (self->object_path);
  g_free (self->unit);
  g_free (self->state_dir);
  g_free (self->runtime_dir);
  g_free (self->overlay);
  g_free (self->project_dir);
  g_free (self->resolv_conf);
  g_free (self->share_dir);
  g_free (self->vmgenid);
  G_OBJECT_CLASS (vd_session_parent_class)->finalize (object);
}

static void
vd_session_class_init (VdSessionClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_session_finalize;
  signals[SIGNAL_ENDED] = g_signal_new ("ended", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                        0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /* The egress proxy died under the running guest: its way out is gone
   * for good (nothing restarts it). The argument says how. */
  signals[SIGNAL_EGRESS_DIED] = g_signal_new ("egress-died", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                              0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
vd_session_init (VdSession *self)
{
  g_autofree gchar *uuid = g_uuid_string_random ();

  /* 12 hex digits: short enough for unit names, far from colliding. */
  self->id = g_strdup_printf ("%.8s%.4s", uuid, uuid + 9);
  self->object_path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_SESSIONS, self->id);
  self->unit = g_strdup_printf (VIVARIUM_SESSION_UNIT_PREFIX "%s.service", self->id);
  self->skeleton = vivarium_dbus_session_skeleton_new ();
  self->state = VIVARIUM_SESSION_STATE_STARTING;
  self->reapers = g_cancellable_new ();
  self->timings = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->vmgenid = g_uuid_string_random ();
}

const gchar *vd_session_get_id (VdSession *self) { return self->id; }
const gchar *vd_session_get_object_path (VdSession *self) { return self->object_path; }
const gchar *vd_session_get_unit (VdSession *self) { return self->unit; }
guint32 vd_session_get_uid (VdSession *self) { return self->uid; }
VdImage *vd_session_get_image (VdSession *self) { return self->image; }
GDBusInterfaceSkeleton *vd_session_get_skeleton (VdSession *self) { return G_DBUS_INTERFACE_SKELETON (self->skeleton); }

VivariumSessionState vd_session_get_session_state (VdSession *self) { return self->state; }
VdCommandLog *vd_session_get_command_log (VdSession *self) { return self->log; }

/* The string, for callers that still compare names. */
const gchar *
vd_session_get_state (VdSession *self)
{
  return vivarium_session_state_to_string (self->state);
}

gboolean
vd_session_died (VdSession *self)
{
  return self->died;
}

const gchar *
vd_session_get_end_detail (VdSession *self)
{
  return self->end_detail;
}

gchar *
vd_session_describe_death (VdSession *self)
{
  const gchar *what = self->helper_death != NULL ? self->helper_death : "QEMU exited on its own";

  if (self->end_detail == NULL)
    return g_strdup (what);
  if (self->helper_death == NULL)
    return g_strdup_printf ("systemd: %s", self->end_detail);
  return g_strdup_printf ("%s; systemd: %s", what, self->end_detail);
}

const gchar *
vd_session_get_state_reason (VdSession *self)
{
  return vivarium_dbus_session_get_state_reason (self->skeleton);
}

gboolean
vd_session_is_active (VdSession *self)
{
  return vivarium_session_state_is_active (self->state);
}

/* The one place the state changes; the skeleton only mirrors it. */
static void
set_state_with_reason (VdSession *self, VivariumSessionState state, const gchar *reason)
{
  const gchar *name = vivarium_session_state_to_string (state);
  gboolean changed = self->state != state;

  if (!changed && g_strcmp0 (vivarium_dbus_session_get_state_reason (self->skeleton), reason) == 0)
    return;
  self->state = state;
  vivarium_dbus_session_set_state_reason (self->skeleton, reason != NULL ? reason : "");
  vivarium_dbus_session_set_state (self->skeleton, name);
  if (!changed)
    return;
  vivarium_dbus_session_emit_state_changed (self->skeleton, name);
  if (reason != NULL && reason[0] != '\0')
    vd_log_session (G_LOG_LEVEL_INFO, self->id, "session %s is %s: %s", self->id, name, reason);
  else
    vd_log_session (G_LOG_LEVEL_INFO, self->id, "session %s is %s", self->id, name);
}

static void
set_state (VdSession *self, VivariumSessionState state)
{
  set_state_with_reason (self, state, "");
}

static void
step_begin (VdSession *self)
{
  self->step_started = g_get_monotonic_time ();
}

/* QEMU's user-mode DNS forwards to the nameservers of the resolv.conf it
 * sees: with the DNS relay up, that is the relay's. */
void
vd_session_set_resolv_conf (VdSession *self, const gchar *path)
{
  g_free (self->resolv_conf);
  self->resolv_conf = g_strdup (path);
}

void
vd_session_record_timing (VdSession *self, const gchar *step, guint64 usec)
{
  GVariantBuilder b;
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_insert (self->timings, g_strdup (step), g_memdup2 (&usec, sizeof usec));
  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{st}"));
  g_hash_table_iter_init (&iter, self->timings);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_variant_builder_add (&b, "{st}", key, *(guint64 *) value);
  vivarium_dbus_session_set_startup_timings (self->skeleton, g_variant_builder_end (&b));
}

static void
append_timing (GString *out, const gchar *step, guint64 usec)
{
  g_string_append_printf (out, "%s%s %.1f ms", out->len > 0 ? ", " : "", step, usec / 1000.0);
}

/* "unit-start 66.1 ms, qmp-connect 55.0 ms, …", in the order a start takes
 * them; a step this start did not take is left out, and one not in the
 * list (a step added later) comes after the others rather than not at all. */
static gchar *
describe_timings (VdSession *self)
{
  static const gchar * const order[] = { "image-check", "overlay", "guard", "egress", "helper-start", "unit-start",
                                         "qmp-connect", "restore", "agent-ready", "reseed", "egress-guest", NULL };
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree gpointer *steps = g_hash_table_get_keys_as_array (self->timings, NULL);

  for (gsize i = 0; order[i] != NULL; i++) {
    const guint64 *usec = g_hash_table_lookup (self->timings, order[i]);

    if (usec != NULL)
      append_timing (out, order[i], *usec);
  }
  for (gsize i = 0; steps[i] != NULL; i++) {
    if (!g_strv_contains (order, steps[i]))
      append_timing (out, steps[i], *(const guint64 *) g_hash_table_lookup (self->timings, steps[i]));
  }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static void
step_end (VdSession *self, const gchar *step)
{
  vd_session_record_timing (self, step, (guint64) (g_get_monotonic_time () - self->step_started));
}

/* --- construction ---------------------------------------------------- */

static gboolean handle_exec (VivariumDBusSession *, GDBusMethodInvocation *, const gchar * const *,
                             const gchar * const *, const gchar *, guint, gpointer);
static gboolean handle_read_file (VivariumDBusSession *, GDBusMethodInvocation *, const gchar *, gpointer);
static gboolean handle_write_file (VivariumDBusSession *, GDBusMethodInvocation *, const gchar *, GVariant *, gpointer);
static gboolean handle_screenshot (VivariumDBusSession *, GDBusMethodInvocation *, gpointer);
static gboolean handle_get_command_log (VivariumDBusSession *, GDBusMethodInvocation *, guint64, guint, gpointer);
static gboolean handle_resume (VivariumDBusSession *, GDBusMethodInvocation *, gpointer);
static gboolean handle_pause (VivariumDBusSession *, GDBusMethodInvocation *, gpointer);
static gboolean handle_stop (VivariumDBusSession *, GDBusMethodInvocation *, gpointer);
static gboolean handle_get_egress_log (VivariumDBusSession *, GDBusMethodInvocation *, guint64, guint, gpointer);
static void log_changed_cb (VdCommandLog *, GVariant *, gpointer);

/* The file outlives the session and the daemon: it is under logs/, which
 * neither teardown nor the start-up sweep touches. Without it the session
 * still runs, with its log in memory only. */
static void
open_command_log_file (VdSession *self)
{
  g_autofree gchar *dir = vd_config_build_state_path (self->config, "logs", "sessions", NULL);
  g_autoptr(GError) error = NULL;

  if (!vd_command_log_persist_to (self->log, dir, &error))
    vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s: the command log is kept in memory only: %s",
                    self->id, error->message);
}

/* Names only: a placeholder is the guest's, a value nobody's. */
static void
set_secrets_property (VdSession *self)
{
  g_autoptr(GStrvBuilder) names = g_strv_builder_new ();
  g_auto(GStrv) list = NULL;

  for (guint i = 0; self->secrets != NULL && i < self->secrets->len; i++)
    g_strv_builder_add (names, ((VivariumSecret *) self->secrets->pdata[i])->name);
  list = g_strv_builder_end (names);
  vivarium_dbus_session_set_secrets (self->skeleton, (const gchar * const *) list);
}

/* Names only: the keys stay in the proxy. */
static void
set_ssh_keys_property (VdSession *self)
{
  g_autoptr(GStrvBuilder) names = g_strv_builder_new ();
  g_auto(GStrv) list = NULL;

  for (guint i = 0; self->ssh_keys != NULL && i < self->ssh_keys->len; i++)
    g_strv_builder_add (names, ((VivariumSshKey *) self->ssh_keys->pdata[i])->name);
  list = g_strv_builder_end (names);
  vivarium_dbus_session_set_ssh_keys (self->skeleton, (const gchar * const *) list);
}

VdSession *
vd_session_new (VdConfig *config, VdSystemd *systemd, GDBusConnection *connection, VdImage *image,
                const gchar *project_dir, guint32 uid, const VdSessionOptions *options, GPtrArray *deny_list)
{
  VdSession *self = g_object_new (VD_TYPE_SESSION, NULL);
  VivariumDBusSession *s = self->skeleton;
  const gchar *none[] = { NULL };

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->image = g_object_ref (image);
  self->project_dir = g_strdup (project_dir);
  self->uid = uid;
  self->options = *options;
  self->egress_groups = g_strdupv ((gchar **) options->egress_groups);
  self->egress_allow = g_strdupv ((gchar **) options->egress_allow);
  self->options.egress_groups = NULL;
  self->options.egress_allow = NULL;
  self->secrets = options->secrets != NULL && options->secrets->len > 0 ? g_ptr_array_ref (options->secrets) : NULL;
  self->options.secrets = NULL;
  self->ssh_keys = options->ssh_keys != NULL && options->ssh_keys->len > 0 ? g_ptr_array_ref (options->ssh_keys) : NULL;
  self->options.ssh_keys = NULL;
  self->deny_list = g_ptr_array_ref (deny_list);
  self->state_dir = vd_config_build_state_path (config, "sessions", self->id, NULL);
  self->runtime_dir = g_build_filename (vd_config_get_runtime_dir (config), "sessions", self->id, NULL);
  self->overlay = g_build_filename (self->state_dir, "overlay.qcow2", NULL);
  self->log = vd_command_log_new (self->id);
  open_command_log_file (self);
  g_signal_connect (self->log, "changed", G_CALLBACK (log_changed_cb), self);

  vivarium_dbus_session_set_id (s, self->id);
  vivarium_dbus_session_set_state (s, vivarium_session_state_to_string (self->state));
  vivarium_dbus_session_set_state_reason (s, "");
  vivarium_dbus_session_set_image (s, vd_image_get_name (image));
  vivarium_dbus_session_set_image_digest (s, vd_image_get_digest (image));
  vivarium_dbus_session_set_project (s, project_dir != NULL ? project_dir : "");
  vivarium_dbus_session_set_started_at (s, (guint64) g_get_real_time ());
  vivarium_dbus_session_set_uid (s, uid);
  vivarium_dbus_session_set_unit (s, self->unit);
  vivarium_dbus_session_set_accelerator (s, "");
  vivarium_dbus_session_set_start_mode (s, "");
  vivarium_dbus_session_set_leftovers (s, none);
  vivarium_dbus_session_set_egress_mode (s, vd_egress_mode_to_string (options->egress_mode));
  vivarium_dbus_session_set_egress_state (s, options->egress_mode == VD_EGRESS_MODE_ALLOWLIST ? "starting" : "off");
  vivarium_dbus_session_set_egress_state_reason (s, "");
  vivarium_dbus_session_set_egress_rules (s, none);
  set_secrets_property (self);
  set_ssh_keys_property (self);
  g_signal_connect (s, "handle-get-egress-log", G_CALLBACK (handle_get_egress_log), self);
  g_signal_connect (s, "handle-exec", G_CALLBACK (handle_exec), self);
  g_signal_connect (s, "handle-read-file", G_CALLBACK (handle_read_file), self);
  g_signal_connect (s, "handle-write-file", G_CALLBACK (handle_write_file), self);
  g_signal_connect (s, "handle-screenshot", G_CALLBACK (handle_screenshot), self);
  g_signal_connect (s, "handle-get-command-log", G_CALLBACK (handle_get_command_log), self);
  g_signal_connect (s, "handle-resume", G_CALLBACK (handle_resume), self);
  g_signal_connect (s, "handle-pause", G_CALLBACK (handle_pause), self);
  g_signal_connect (s, "handle-stop", G_CALLBACK (handle_stop), self);
  return self;
}

/* --- the unit -------------------------------------------------------- */

/* QEMU with user-mode networking (egress "open"): slirp's sockets are
 * AF_INET(6), QMP and the guest agent AF_UNIX; TCG writes the code it
 * runs; QEMU installs its own seccomp filter (-sandbox on) on top of this
 * one. Of the runtime directory it sees its own sockets' directory only,
 * and in allowlist mode its proxy's. With egress "none" QEMU's own stack
 * reaches nothing (restrict=on); with "allowlist" the guest's network runs
 * in the proxy and QEMU passes frames over a unix socket: either way QEMU
 * opens no socket but AF_UNIX (add_closed_network). */
static void
add_sandbox (VdSession *self, GVariantBuilder *b)
{
  const gchar *open_families[] = { "AF_UNIX", "AF_INET", "AF_INET6", NULL };
  const gchar *closed_families[] = { "AF_UNIX", NULL };
  const gchar *syscalls[] = { "@system-service", "seccomp", NULL };
  const gchar *denied[] = { "@privileged", NULL };
  const gchar *binds[] = { self->runtime_dir, self->egress != NULL ? vd_egress_get_dir (self->egress) : NULL, NULL };
  g_autofree gchar *runtime = g_path_get_dirname (g_path_get_dirname (self->runtime_dir));
  VdUnitSandbox sandbox = {
    .address_families = self->options.egress_mode == VD_EGRESS_MODE_OPEN ? open_families : closed_families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .writes_code = TRUE,
    .runtime_dir = runtime,
    .binds = binds,
  };

  vd_unit_sandbox_add (b, &sandbox);
}

/* Egress "none" and "allowlist": QEMU needs no network of the host's at
 * all, not even a loopback: every address is denied, none allowed. Its
 * network namespace of its own keeps it from the host's abstract unix
 * sockets too (they belong to a namespace). The way out, if any, is the
 * proxy's net.sock, a path no network namespace stops. */
static void
add_closed_network (GVariantBuilder *b)
{
  g_variant_builder_add (b, "(sv)", "PrivateNetwork", g_variant_new_boolean (TRUE));
  g_variant_builder_add (b, "(sv)", "IPAddressDeny", vd_unit_sandbox_ip_deny_all ());
}

static GVariant *
unit_properties (VdSession *self, const gchar * const *argv, gboolean kvm)
{
  g_autofree gchar *description = g_strdup_printf ("Vivarium session %s (%s)", self->id, vd_image_get_name (self->image));
  g_autoptr(GPtrArray) rw = g_ptr_array_new ();
  GVariantBuilder b;

  /* The runtime directory is bound read-write by the sandbox, over an
   * empty /run/vivarium. */
  g_ptr_array_add (rw, self->state_dir);
  if (self->project_dir != NULL)
    g_ptr_array_add (rw, self->project_dir);
  g_ptr_array_add (rw, NULL);

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  vd_unit_sandbox_add_session_service (&b, description, self->uid, argv);
  /* /dev/kvm is the only device QEMU may open, and only when present. */
  g_variant_builder_add (&b, "(sv)", "DevicePolicy", g_variant_new_string ("closed"));
  if (kvm) {
    const gchar *kvm_group[] = { "kvm", NULL };
    g_variant_builder_add (&b, "(sv)", "DeviceAllow", g_variant_new_parsed ("[('/dev/kvm', 'rw')]"));
    /* Debian's udev rule gives /dev/kvm to group kvm (0660). */
    if (getgrnam ("kvm") != NULL)
      g_variant_builder_add (&b, "(sv)", "SupplementaryGroups", g_variant_new_strv (kvm_group, -1));
  }
  if (self->options.egress_mode != VD_EGRESS_MODE_OPEN)
    add_closed_network (&b);
  else if (self->options.guard_layer1)
    g_variant_builder_add (&b, "(sv)", "IPAddressDeny", vd_unit_sandbox_ip_deny (self->deny_list));
  g_variant_builder_add (&b, "(sv)", "MemoryMax",
                         g_variant_new_uint64 ((guint64) (self->options.memory_mib + MEMORY_OVERHEAD_MIB) * 1024 * 1024));
  g_variant_builder_add (&b, "(sv)", "CPUQuotaPerSecUSec", g_variant_new_uint64 ((guint64) self->options.cpus * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (512));
  if (self->options.timeout_sec > 0)
    g_variant_builder_add (&b, "(sv)", "RuntimeMaxUSec", g_variant_new_uint64 ((guint64) self->options.timeout_sec * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "TimeoutStopUSec", g_variant_new_uint64 (15 * G_USEC_PER_SEC));
  g_variant_builder_add (&b, "(sv)", "ReadWritePaths", g_variant_new_strv ((const gchar * const *) rw->pdata, -1));
  if (self->resolv_conf != NULL)
    g_variant_builder_add (&b, "(sv)", "BindReadOnlyPaths",
                           g_variant_new_parsed ("[(%s, '/etc/resolv.conf', false, @t 0)]", self->resolv_conf));
  add_sandbox (self, &b);
  return g_variant_builder_end (&b);
}

static GStrv
qemu_argv (VdSession *self, gboolean kvm)
{
  g_autofree gchar *kernel = vd_image_get_file (self->image, "vmlinuz");
  g_autofree gchar *initrd = vd_image_get_file (self->image, "initrd.img");
  g_autofree gchar *cmdline = vd_image_get_cmdline (self->image);
  g_autofree gchar *net_socket = self->egress != NULL ? vd_egress_net_socket (self->egress) : NULL;
  VdQemuCommand cmd = {
    .session_id = self->id,
    .overlay = self->overlay,
    .kernel = kernel,
    .initrd = initrd,
    .cmdline = cmdline,
    .runtime_dir = self->runtime_dir,
    .project_dir = self->project_dir != NULL ? self->project_dir : self->share_dir,
    .project_readonly = self->options.project_readonly || self->project_dir == NULL,
    .memory_mib = self->options.memory_mib,
    .cpus = self->options.cpus,
    .kvm = kvm,
    .vmgenid = self->vmgenid,
    .incoming = self->restored,
    .net_socket = net_socket,
    .net_restricted = self->options.egress_mode == VD_EGRESS_MODE_NONE,
  };
  return vd_qemu_command_build (&cmd);
}

/* --- teardown -------------------------------------------------------- */

static GStrv
find_leftovers (VdSession *self)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();

  if (vd_systemd_unit_is_loaded (self->systemd, self->unit))
    g_strv_builder_add (b, self->unit);
  if (self->helper != NULL && vd_systemd_unit_is_loaded (self->systemd, vd_session_helper_get_unit (self->helper)))
    g_strv_builder_add (b, vd_session_helper_get_unit (self->helper));
  if (self->egress != NULL && vd_systemd_unit_is_loaded (self->systemd, vd_egress_get_unit (self->egress)))
    g_strv_builder_add (b, vd_egress_get_unit (self->egress));
  if (self->egress != NULL && g_file_test (vd_egress_get_dir (self->egress), G_FILE_TEST_EXISTS))
    g_strv_builder_add (b, vd_egress_get_dir (self->egress));
  if (g_file_test (self->state_dir, G_FILE_TEST_EXISTS))
    g_strv_builder_add (b, self->state_dir);
  if (g_file_test (self->runtime_dir, G_FILE_TEST_EXISTS))
    g_strv_builder_add (b, self->runtime_dir);
  return g_strv_builder_end (b);
}

static void
remove_files_and_check (VdSession *self, gboolean failed, const gchar *reason)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) leftovers = NULL;

  if (self->egress != NULL)
    vd_egress_stop_sync (self->egress);
  if (self->helper != NULL)
    vd_session_helper_stop_sync (self->helper);
  if (!vd_fs_rm_rf (self->runtime_dir, &error) || !vd_fs_rm_rf (self->state_dir, &error))
    vd_log_session (G_LOG_LEVEL_WARNING, self->id, "teardown of %s: %s", self->id, error->message);
  if (self->unit_watch != 0)
    vd_systemd_unwatch_unit (self->systemd, self->unit_watch);
  self->unit_watch = 0;
  leftovers = find_leftovers (self);
  vivarium_dbus_session_set_leftovers (self->skeleton, (const gchar * const *) leftovers);
  for (guint i = 0; leftovers[i] != NULL; i++)
    vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s left behind %s", self->id, leftovers[i]);
  self->torn_down = TRUE;
  /* Everything the guest did is in it by now (the teardown marked what it
   * left running); the lingering session pages it from memory. */
  vd_command_log_close_file (self->log);
  set_state_with_reason (self, failed ? VIVARIUM_SESSION_STATE_FAILED : VIVARIUM_SESSION_STATE_STOPPED, reason);
  g_signal_emit (self, signals[SIGNAL_ENDED], 0);
}

static void
close_channels (VdSession *self)
{
  g_cancellable_cancel (self->reapers);
  if (self->helper != NULL) {
    g_signal_handlers_disconnect_by_data (self->helper, self);
    vd_session_helper_close (self->helper);
  }
}

typedef struct {
  gboolean  failed;
  gchar    *reason;
} TeardownData;

static void
teardown_data_free (TeardownData *data)
{
  g_free (data->reason);
  g_free (data);
}

/* The proxy goes after QEMU (a guest never outlives its way out), as a
 * step of its own: the main loop goes on meanwhile. */
static void
egress_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  TeardownData *data = g_task_get_task_data (task);

  vd_egress_stop_finish (VD_EGRESS (source), res, NULL);
  remove_files_and_check (self, data->failed, data->reason);
  g_task_return_boolean (task, TRUE);
}

static void
unit_stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  TeardownData *data = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  /* A unit that is already gone (the guest powered off, the runtime limit
   * expired) makes StopUnit fail; what counts is the leftover check. */
  if (!vd_systemd_stop_unit_finish (self->systemd, res, &error))
    g_debug ("stopping %s: %s", self->unit, error->message);
  /* Its stop job is done: systemd has said how the unit ended by now. */
  if (self->died && self->helper_death != NULL && self->helper != NULL)
    self->end_detail = vd_session_helper_describe_end (self->helper);
  else if (self->died && self->unit_watch != 0)
    self->end_detail = vd_systemd_describe_unit_end (self->systemd, self->unit_watch);
  if (self->end_detail != NULL) {
    g_autofree gchar *reason = g_strdup_printf ("%s (systemd: %s)", data->reason, self->end_detail);
    vd_log_session (G_LOG_LEVEL_INFO, self->id, "session %s: %s", self->id, reason);
    g_free (data->reason);
    data->reason = g_steal_pointer (&reason);
  }
  if (self->egress == NULL) {
    remove_files_and_check (self, data->failed, data->reason);
    g_task_return_boolean (task, TRUE);
    return;
  }
  vd_egress_stop_async (self->egress, egress_stopped_cb, g_steal_pointer (&task));
}

/* @reason: what StateReason says once it ended, or NULL */
static void
teardown_async (VdSession *self, gboolean failed, const gchar *reason, GAsyncReadyCallback callback,
                gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);
  TeardownData *data = g_new0 (TeardownData, 1);

  data->failed = failed;
  data->reason = g_strdup (reason);
  g_task_set_task_data (task, data, (GDestroyNotify) teardown_data_free);
  if (self->torn_down) {
    g_task_return_boolean (task, TRUE);
    g_object_unref (task);
    return;
  }
  set_state (self, VIVARIUM_SESSION_STATE_STOPPING);
  close_channels (self);
  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, unit_stopped_cb, task);
}

void
vd_session_stop_sync (VdSession *self)
{
  g_autoptr(GError) error = NULL;

  if (self->torn_down)
    return;
  self->stop_requested = TRUE;
  close_channels (self);
  if (!vd_systemd_stop_unit_sync (self->systemd, self->unit, STOP_TIMEOUT_MS, &error))
    g_debug ("stopping %s: %s", self->unit, error->message);
  remove_files_and_check (self, FALSE, "the daemon shut down");
}

static void
stop_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  g_task_return_boolean (task, g_task_propagate_boolean (G_TASK (res), NULL));
}

void
vd_session_stop_async (VdSession *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);

  if (self->torn_down || self->stop_requested) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                             "The session %s is already %s", self->id,
                             self->torn_down ? vd_session_get_state (self) : "stopping");
    g_object_unref (task);
    return;
  }
  self->stop_requested = TRUE;
  teardown_async (self, FALSE, NULL, stop_done_cb, task);
}

gboolean
vd_session_stop_finish (VdSession *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
qmp_closed_cb (VdSessionHelper *helper, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  gboolean expired;

  if (self->stop_requested || self->torn_down)
    return;
  /* QEMU went away by itself: the runtime limit (an orderly end), or a
   * guest power-off or a crash (a failure: the caller did not ask for it). */
  expired = self->options.timeout_sec > 0 &&
            g_get_real_time () - (gint64) vivarium_dbus_session_get_started_at (self->skeleton) >=
            (gint64) self->options.timeout_sec * G_USEC_PER_SEC;
  vd_log_session (G_LOG_LEVEL_INFO, self->id, "QEMU of session %s exited %s", self->id,
                  expired ? "at the end of its runtime limit" : "on its own");
  self->stop_requested = TRUE;
  self->died = !expired;
  teardown_async (self, !expired, expired ? "the session reached its runtime limit" : "QEMU exited on its own",
                  NULL, NULL);
}

/* The helper carries every byte of the guest's: without it the session
 * cannot be run, whatever its QEMU does. A helper that crashed, hung up
 * or broke its protocol costs this session only. */
static void
helper_died_cb (VdSessionHelper *helper, const gchar *reason, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  if (self->stop_requested || self->torn_down)
    return;
  vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s: %s", self->id, reason);
  self->stop_requested = TRUE;
  /* The machine went, not the worker: a task says so in its reason. */
  self->died = TRUE;
  self->helper_death = g_strdup (reason);
  teardown_async (self, TRUE, reason, NULL, NULL);
}

/* The agent's socket closes when QEMU exits too: QEMU answering says it
 * was the agent alone, which broke its protocol (the helper closes it
 * then) or went away. Either way every later call would fail with no
 * word why: the session ends, failed, and says so. */
static void
agent_closed_checked_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdSession) self = user_data;
  gboolean kvm = FALSE;

  if (!vd_session_helper_query_kvm_finish (VD_SESSION_HELPER (source), res, &kvm, NULL) ||
      self->stop_requested || self->torn_down)
    return;
  vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s: the guest agent closed its connection or broke its "
                  "protocol", self->id);
  self->stop_requested = TRUE;
  teardown_async (self, TRUE, "the guest agent closed its connection or broke its protocol", NULL, NULL);
}

static void
agent_closed_cb (VdSessionHelper *helper, const gchar *reason, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  if (self->stop_requested || self->torn_down)
    return;
  vd_session_helper_query_kvm_async (helper, NULL, agent_closed_checked_cb, g_object_ref (self));
}

/* --- paused: QEMU stopped the guest -------------------------------- */

/* With werror/rerror=stop (vd-qemu-command.c) a failed disk request pauses
 * the guest: QEMU says BLOCK_IO_ERROR (why), then STOP. Without this the
 * session looked "running" while every Exec timed out for no stated reason. */
static void
qmp_block_io_error_cb (VdSessionHelper *helper, const gchar *reason, gboolean nospace, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  /* The first error is the cause; the requests in flight with it, and the
   * retries after a resume, say the same: one journal line per pause. */
  if (self->io_error != NULL)
    return;
  vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s: QEMU reports %s", self->id, reason);
  self->io_error = g_strdup (reason);
}

static void
qmp_guest_stopped_cb (VdSessionHelper *helper, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  /* Only the session's helper holds the QMP socket, and it sends "stop" only for
   * Pause() and a save: any other STOP is QEMU's own doing. */
  if (self->state != VIVARIUM_SESSION_STATE_RUNNING)
    return;
  set_state_with_reason (self, VIVARIUM_SESSION_STATE_PAUSED,
                         self->io_error != NULL ? self->io_error :
                         self->pause_requested ? "paused by Pause()" : "QEMU stopped the guest");
}

static void
qmp_guest_resumed_cb (VdSessionHelper *helper, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  g_clear_pointer (&self->io_error, g_free);
  self->pause_requested = FALSE;
  if (self->state == VIVARIUM_SESSION_STATE_PAUSED)
    set_state (self, VIVARIUM_SESSION_STATE_RUNNING);
}

/* --- start ----------------------------------------------------------- */

typedef struct {
  gint64   began;         /* monotonic, when the start was asked for */
  guint    launches;      /* the helper's unit, QEMU's and the egress proxy's, started side by side */
  gint64   helper_began;
  gint64   egress_began;
  GError  *launch_error;  /* the first of them to fail */
  gboolean kvm;
  GError  *error;      /* why the start failed, told once the teardown is done */
} StartData;

static void
start_data_free (StartData *data)
{
  g_clear_error (&data->error);
  g_clear_error (&data->launch_error);
  g_free (data);
}

static void
start_failed (GTask *task, GError *error);

static void
start_teardown_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  StartData *data = g_task_get_task_data (task);

  g_task_return_error (task, g_steal_pointer (&data->error));
}

/* Whatever step failed, the session is taken down completely before the
 * caller hears about it, so a refusal never leaves anything behind. */
static void
start_failed (GTask *task, GError *error)
{
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);

  vd_log_session (G_LOG_LEVEL_WARNING, self->id, "session %s failed to start: %s", self->id, error->message);
  g_clear_error (&data->error);
  data->error = error;
  self->stop_requested = TRUE;
  teardown_async (self, TRUE, error->message, start_teardown_done_cb, task);
}

static void agent_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data);

/* The caller sees the session only now: a restored guest has its own
 * random pool, clock and machine id by this point. */
static void
start_done (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);
  g_autofree gchar *steps = describe_timings (self);

  /* For the journal, where a task's sessions are gone from the bus: where
   * the start's time went. */
  vd_log_session (G_LOG_LEVEL_MESSAGE, self->id, "session %s started (%s) in %.1f ms: %s", self->id,
                  self->restored ? "restored" : "cold", (g_get_monotonic_time () - data->began) / 1000.0, steps);
  vivarium_dbus_session_set_start_mode (self->skeleton, self->restored ? "restored" : "cold");
  set_state (self, VIVARIUM_SESSION_STATE_RUNNING);
  g_task_return_boolean (task, TRUE);
  g_object_unref (task);
}

/* The guest learns where its way out is: a resolver that answers over TCP
 * (slirp drops UDP under restrict=on), whose answers for allowed names lead
 * to the proxy's transparent ports. No proxy variables: busybox wget sends
 * the proxy "GET https://…" under http_proxy and https_proxy alike (it has
 * no CONNECT), which the proxy cannot serve without terminating TLS, and
 * every client reaches allowed names on 80 and 443 transparently anyway.
 * CONNECT to 10.0.2.100:3128 is there for a client told to use it (any
 * port a rule allows). The guest's root may undo this; it then only loses
 * its own way out: the policy is the proxy's. */
#define EGRESS_GUEST_SETUP \
  "printf 'nameserver " VD_EGRESS_GUEST_ADDRESS "\\noptions use-vc\\n' > /etc/resolv.conf"

/* With secrets (docs/secrets.md), after the resolver: $1 the session CA's
 * certificate, then NAME PLACEHOLDER pairs. The CA goes where TLS clients
 * look (update-ca-certificates, where the guest has it, rebuilds the
 * bundle with it); each placeholder into /run/vivarium-secrets/NAME. The
 * arguments are data, never spliced into the script. */
#define SECRETS_GUEST_SETUP \
  "\nca=$1; shift\n" \
  "mkdir -p /usr/local/share/ca-certificates /etc/ssl/certs " VIVARIUM_SECRET_GUEST_DIR " || exit 1\n" \
  "printf '%s\\n' \"$ca\" > /usr/local/share/ca-certificates/vivarium-session-ca.crt || exit 1\n" \
  "printf '%s\\n' \"$ca\" >> /etc/ssl/certs/ca-certificates.crt || exit 1\n" \
  "if command -v update-ca-certificates >/dev/null; then update-ca-certificates >/dev/null 2>&1; fi\n" \
  "while [ $# -ge 2 ]; do\n" \
  "  printf '%s' \"$2\" > " VIVARIUM_SECRET_GUEST_DIR "/\"$1\" && chmod 0644 " VIVARIUM_SECRET_GUEST_DIR "/\"$1\" || exit 1\n" \
  "  shift 2\n" \
  "done\n"

/* With SSH keys (docs/secrets.md, "SSH keys"), last: the agent is the
 * proxy's door at 10.0.2.100:7022; a guest with socat gets it as the unix
 * socket $SSH_AUTH_SOCK names too (a client speaks unix sockets only), in
 * the background, waited for up to 2 s. Without socat the set-up still
 * succeeds: the door is there for whatever speaks TCP. */
#define SSH_AGENT_GUEST_SETUP \
  "\nif command -v socat >/dev/null 2>&1; then\n" \
  "  rm -f " VIVARIUM_SSH_AGENT_GUEST_SOCKET "\n" \
  "  socat UNIX-LISTEN:" VIVARIUM_SSH_AGENT_GUEST_SOCKET ",fork,mode=0600 TCP:" VD_EGRESS_GUEST_ADDRESS ":7022 " \
  "</dev/null >/dev/null 2>&1 &\n" \
  "  i=0; while [ ! -S " VIVARIUM_SSH_AGENT_GUEST_SOCKET " ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done\n" \
  "fi\n"

/* argv of the guest's egress set-up: sh -c SCRIPT sh [CA NAME PLACEHOLDER…]. */
static GStrv
egress_guest_setup_argv (VdSession *self, GError **error)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_autofree gchar *ca = NULL;

  const gchar *ssh = self->ssh_keys != NULL ? SSH_AGENT_GUEST_SETUP : "";
  g_autofree gchar *plain = g_strconcat (EGRESS_GUEST_SETUP, ssh, NULL);
  g_autofree gchar *with_secrets = g_strconcat (EGRESS_GUEST_SETUP SECRETS_GUEST_SETUP, ssh, NULL);

  if (self->secrets == NULL) {
    g_strv_builder_add_many (b, "/bin/sh", "-c", plain, NULL);
    return g_strv_builder_end (b);
  }
  ca = vd_egress_dup_ca_pem (self->egress, error);
  if (ca == NULL)
    return NULL;
  g_strchomp (ca);
  g_strv_builder_add_many (b, "/bin/sh", "-c", with_secrets, "sh", ca, NULL);
  for (guint i = 0; i < self->secrets->len; i++) {
    VivariumSecret *secret = self->secrets->pdata[i];
    g_strv_builder_add_many (b, secret->name, secret->placeholder, NULL);
  }
  return g_strv_builder_end (b);
}

static void
egress_guest_set_up_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  g_autoptr(VdAgentExecResult) result = NULL;
  GError *error = NULL;

  result = vd_session_helper_exec_finish (VD_SESSION_HELPER (source), res, NULL, &error);
  if (result == NULL || result->exit_status != 0) {
    start_failed (task, error != NULL ? error : g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_GUEST,
                                                             "Cannot tell the guest where its egress proxy is "
                                                             "(the set-up exited with status %d)", result->exit_status));
    return;
  }
  step_end (self, "egress-guest");
  start_done (task);
}

/* A restored guest took its nameserver with the reseed; one that booted,
 * or that needs the secrets' CA and placeholders or the SSH agent's
 * socket, gets the whole set-up as a command of its own. */
static gboolean
egress_needs_guest_command (VdSession *self)
{
  return self->egress != NULL && (!self->restored || self->secrets != NULL || self->ssh_keys != NULL);
}

static void
guest_ready (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  g_auto(GStrv) argv = NULL;
  GError *error = NULL;

  if (!egress_needs_guest_command (self)) {
    start_done (task);
    return;
  }
  step_begin (self);
  argv = egress_guest_setup_argv (self, &error);
  if (argv == NULL) {
    start_failed (task, error);
    return;
  }
  vd_session_helper_exec_async (self->helper, (const gchar * const *) argv, NULL, NULL, 30000, 4096,
                                g_task_get_cancellable (task), egress_guest_set_up_cb, task);
}

static void
reseeded_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_snapshot_reseed_finish (res, &error)) {
    start_failed (task, error);
    return;
  }
  step_end (self, "reseed");
  guest_ready (task);
}

static void
wait_agent (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);

  vd_session_helper_connect_agent_async (self->helper, vd_config_get_agent_timeout_sec (self->config) * 1000,
                                         g_task_get_cancellable (task), agent_ready_cb, task);
}

static void
restored_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_snapshot_restore_finish (res, &error)) {
    start_failed (task, error);
    return;
  }
  step_end (self, "restore");
  step_begin (self);
  wait_agent (task);
}

static void
agent_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_helper_call_finish (self->helper, res, &error)) {
    start_failed (task, error);
    return;
  }
  step_end (self, "agent-ready");
  if (self->restored) {
    step_begin (self);
    /* An older boot.json without the answer: renew, to be sure. */
    vd_session_snapshot_reseed_async (self->helper, self->project_dir != NULL,
                                      json_object_get_boolean_member_with_default (vd_image_get_boot_snapshot (self->image),
                                                                                   "machine-id", TRUE),
                                      self->egress != NULL ? VD_EGRESS_GUEST_ADDRESS : NULL,
                                      g_task_get_cancellable (task), reseeded_cb, task);
    return;
  }
  guest_ready (task);
}

static void
query_kvm_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;
  gboolean kvm = FALSE;

  if (!vd_session_helper_query_kvm_finish (self->helper, res, &kvm, &error)) {
    start_failed (task, error);
    return;
  }
  vivarium_dbus_session_set_accelerator (self->skeleton, kvm ? "kvm" : "tcg");
  if (self->restored) {
    g_autofree gchar *state = g_build_filename (vd_image_get_dir (self->image), VD_BOOT_SNAPSHOT_STATE, NULL);

    step_begin (self);
    vd_session_snapshot_restore_async (self->helper, state, g_task_get_cancellable (task), restored_cb, task);
    return;
  }
  wait_agent (task);
}

static void
qmp_connected_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_session_helper_call_finish (self->helper, res, &error)) {
    start_failed (task, error);
    return;
  }
  step_end (self, "qmp-connect");
  vd_session_helper_query_kvm_async (self->helper, g_task_get_cancellable (task), query_kvm_cb, task);
}

/* The helper's unit, QEMU's and the egress proxy's start side by side
 * (each is a systemd job of some tens of milliseconds); a failure is told
 * once all have ended, so that the teardown finds every unit that was
 * started. */
static void
launch_done (GTask *task, GError *error)
{
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);

  if (error != NULL && data->launch_error == NULL)
    data->launch_error = error;
  else if (error != NULL)
    g_error_free (error);
  if (--data->launches > 0)
    return;
  if (data->launch_error != NULL) {
    start_failed (task, g_steal_pointer (&data->launch_error));
    return;
  }
  step_begin (self);
  /* QEMU makes its QMP socket some tens of milliseconds after exec(): the
   * helper tries 5, 10, 20, … ms apart, at most 100, until this deadline. */
  vd_session_helper_connect_qmp_async (self->helper, SOCKET_WAIT_MS, g_task_get_cancellable (task),
                                       qmp_connected_cb, task);
}

static void
unit_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (vd_systemd_start_transient_finish (self->systemd, res, &error))
    step_end (self, "unit-start");
  launch_done (task, error);
}

static gboolean
prepare_dirs (VdSession *self, GError **error)
{
  g_autofree gchar *state_parent = g_path_get_dirname (self->state_dir);
  g_autofree gchar *runtime_parent = g_path_get_dirname (self->runtime_dir);
  struct group *grp = getgrnam (VIVARIUM_QEMU_GROUP);

  if (grp == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The group %s does not exist (is systemd-sysusers configured?)", VIVARIUM_QEMU_GROUP);
    return FALSE;
  }
  /* 0711 parents: the session uid may pass through to its own directory,
   * not list its neighbours'. */
  return vd_fs_mkdir (state_parent, 0711, 0, 0, error) &&
         vd_fs_mkdir (runtime_parent, 0711, 0, 0, error) &&
         vd_fs_mkdir (self->state_dir, 0700, self->uid, grp->gr_gid, error) &&
         vd_fs_mkdir (self->runtime_dir, 0700, self->uid, grp->gr_gid, error);
}

static void
start_qemu_unit (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);
  g_auto(GStrv) argv = NULL;

  step_begin (self);
  argv = qemu_argv (self, data->kvm);
  /* Before the start: systemd's word on how QEMU ended may come and go
   * (the unit is collected) before the daemon thinks of asking. */
  if (self->unit_watch == 0)
    self->unit_watch = vd_systemd_watch_unit (self->systemd, self->unit);
  vd_systemd_start_transient_async (self->systemd, self->unit, unit_properties (self, (const gchar * const *) argv, data->kvm),
                                    NULL, g_task_get_cancellable (task), unit_started_cb, task);
}

static void
helper_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);
  GError *error = NULL;

  self->helper = vd_session_helper_start_finish (res, &error);
  if (self->helper == NULL) {
    launch_done (task, error);
    return;
  }
  vd_session_record_timing (self, "helper-start", (guint64) (g_get_monotonic_time () - data->helper_began));
  g_signal_connect (self->helper, "died", G_CALLBACK (helper_died_cb), self);
  g_signal_connect (self->helper, "qmp-closed", G_CALLBACK (qmp_closed_cb), self);
  g_signal_connect (self->helper, "agent-closed", G_CALLBACK (agent_closed_cb), self);
  g_signal_connect (self->helper, "block-io-error", G_CALLBACK (qmp_block_io_error_cb), self);
  g_signal_connect (self->helper, "guest-stopped", G_CALLBACK (qmp_guest_stopped_cb), self);
  g_signal_connect (self->helper, "guest-resumed", G_CALLBACK (qmp_guest_resumed_cb), self);
  launch_done (task, NULL);
}

/* The helper and QEMU at once (and the proxy, started just before); QMP
 * is connected once all run. */
static void
start_helper (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);
  g_autofree gchar *qmp_socket = vd_qemu_command_qmp_socket (self->runtime_dir);
  g_autofree gchar *agent_socket = vd_qemu_command_agent_socket (self->runtime_dir);
  g_autofree gchar *runtime_root = g_path_get_dirname (g_path_get_dirname (self->runtime_dir));
  VdSessionHelperOptions options = {
    .session_id = self->id,
    .uid = self->uid,
    .runtime_dir = self->runtime_dir,
    .runtime_root = runtime_root,
    .qmp_socket = qmp_socket,
    .agent_socket = agent_socket,
  };

  data->launches += 2;
  data->helper_began = g_get_monotonic_time ();
  vd_session_helper_start_async (self->systemd, &options, g_task_get_cancellable (task), helper_started_cb, task);
  start_qemu_unit (task);
}

/* --- egress: the proxy starts beside QEMU, whose network leads into it -- */

static void
egress_state_changed_cb (VdEgress *egress, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  vivarium_dbus_session_set_egress_state (self->skeleton, vd_egress_get_state (egress));
  vivarium_dbus_session_set_egress_state_reason (self->skeleton, vd_egress_get_reason (egress));
  if (vd_egress_died (egress))
    g_signal_emit (self, signals[SIGNAL_EGRESS_DIED], 0, vd_egress_get_reason (egress));
}

static void
egress_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  StartData *data = g_task_get_task_data (task);
  GError *error = NULL;

  if (vd_egress_start_finish (VD_EGRESS (source), res, &error))
    vd_session_record_timing (self, "egress", (guint64) (g_get_monotonic_time () - data->egress_began));
  launch_done (task, error);
}

static void
start_egress (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  g_auto(GStrv) rules = NULL;
  StartData *data = g_task_get_task_data (task);
  VivariumEgressPolicy *policy;
  GError *error = NULL;

  policy = vd_egress_rules_build (self->config, (const gchar * const *) self->egress_groups,
                                  (const gchar * const *) self->egress_allow, &error);
  if (policy == NULL) {
    start_failed (task, error);
    return;
  }
  if (self->egress_uid == 0) {
    start_failed (task, g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "The egress proxy has no uid"));
    return;
  }
  self->egress = vd_egress_new (self->config, self->systemd, self->id, self->egress_uid, self->uid, policy,
                                self->deny_list);
  vd_egress_set_resolv_conf (self->egress, self->resolv_conf);
  vd_egress_set_secrets (self->egress, self->secrets);
  vd_egress_set_ssh_keys (self->egress, self->ssh_keys);
  rules = vd_egress_describe_rules (self->egress);
  vivarium_dbus_session_set_egress_rules (self->skeleton, (const gchar * const *) rules);
  g_signal_connect_object (self->egress, "state-changed", G_CALLBACK (egress_state_changed_cb), self, 0);
  /* Its socket is listening once this returns: QEMU may start. */
  data->launches = 1;
  data->egress_began = g_get_monotonic_time ();
  vd_egress_start_async (self->egress, g_task_get_cancellable (task), egress_started_cb, task);
  start_helper (task);
}

static void
overlay_created_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  g_autoptr(GBytes) err = NULL;
  GError *error = NULL;

  if (!g_subprocess_communicate_finish (G_SUBPROCESS (source), res, NULL, &err, &error)) {
    start_failed (task, error);
    return;
  }
  if (!g_subprocess_get_successful (G_SUBPROCESS (source)) || chown (self->overlay, self->uid, (gid_t) -1) != 0) {
    g_autofree gchar *msg = err != NULL ? g_strndup (g_bytes_get_data (err, NULL), MIN (g_bytes_get_size (err), 512)) : NULL;
    start_failed (task, g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "Cannot create the overlay: %s",
                                     msg != NULL ? g_strstrip (msg) : g_strerror (errno)));
    return;
  }
  step_end (self, "overlay");
  if (self->options.egress_mode == VD_EGRESS_MODE_ALLOWLIST) {
    start_egress (task);
    return;
  }
  start_helper (task);
}

/* A saved state restores only into the machine it was saved from: same
 * memory, cpus, devices and accelerator. Anything else boots cold. */
static gboolean
snapshot_matches (VdSession *self)
{
  JsonObject *snap = vd_image_get_boot_snapshot (self->image);

  if (snap == NULL || self->options.boot_snapshot)
    return FALSE;
  return json_object_get_int_member_with_default (snap, "memory-mib", 0) == self->options.memory_mib &&
         json_object_get_int_member_with_default (snap, "cpus", 0) == self->options.cpus &&
         g_strcmp0 (json_object_get_string_member_with_default (snap, "device-set", ""), VD_QEMU_COMMAND_DEVICE_SET) == 0 &&
         json_object_get_boolean_member_with_default (snap, "kvm", FALSE) == self->kvm;
}

/* The snapshot's device set has the share device; without a project it
 * points at an empty read-only directory the guest never mounts. */
static gboolean
prepare_share (VdSession *self, GError **error)
{
  if (self->project_dir != NULL || (!self->restored && !self->options.boot_snapshot))
    return TRUE;
  self->share_dir = g_build_filename (self->state_dir, "share", NULL);
  return vd_fs_mkdir (self->share_dir, 0555, 0, 0, error);
}

static void
create_overlay (GTask *task)
{
  VdSession *self = g_task_get_source_object (task);
  g_autofree gchar *base = NULL;
  g_autoptr(GSubprocess) proc = NULL;
  GError *error = NULL;

  self->restored = snapshot_matches (self);
  if (!prepare_dirs (self, &error) || !prepare_share (self, &error)) {
    start_failed (task, error);
    return;
  }
  base = g_build_filename (vd_image_get_dir (self->image), self->restored ? VD_BOOT_SNAPSHOT_DISK : "disk.qcow2", NULL);
  /* The overlay names its backing file and format explicitly, so QEMU
   * never probes a format from data the guest could have written. */
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                           "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, self->overlay, NULL);
  if (proc == NULL) {
    start_failed (task, error);
    return;
  }
  g_subprocess_communicate_async (proc, NULL, g_task_get_cancellable (task), overlay_created_cb, task);
}

static void
image_verified_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  VdSession *self = g_task_get_source_object (task);
  GError *error = NULL;

  if (!vd_image_verify_finish (self->image, res, &error)) {
    start_failed (task, error);
    return;
  }
  step_end (self, "image-check");
  step_begin (self);
  create_overlay (task);
}

void
vd_session_start_async (VdSession *self, GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  StartData *data = g_new0 (StartData, 1);

  data->kvm = vd_config_use_kvm (self->config);
  self->kvm = data->kvm;
  data->began = g_get_monotonic_time ();
  g_task_set_task_data (task, data, (GDestroyNotify) start_data_free);
  vd_image_add_user (self->image, self->object_path);
  step_begin (self);
  /* Freeze's scratch boot runs before there is a digest to check: the
   * freeze that follows hashes what it booted from. */
  if (self->options.boot_snapshot) {
    create_overlay (task);
    return;
  }
  vd_image_verify_async (self->image, FALSE, cancellable, image_verified_cb, task);
}

gboolean
vd_session_start_finish (VdSession *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* --- the command log ------------------------------------------------- */

/* Every change to an entry but its beginning is news for watchers: the
 * finished command, and later the late end of one that timed out (same
 * "seq"). The entry is the capped one, so the signal is bounded too. */
static void
log_changed_cb (VdCommandLog *log, GVariant *entry, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  const gchar *state = NULL;

  if (g_variant_lookup (entry, "state", "&s", &state) && g_strcmp0 (state, "running") == 0)
    return;
  vivarium_dbus_session_emit_command_finished (self->skeleton, entry);
}

typedef struct {
  VdSession             *self;
  GDBusMethodInvocation *invocation;
  VdCommandEntry        *entry;
  gboolean               is_exec;
  guint                  timeout_sec;
  gchar                 *path;
} CallData;

/* The entry is begun before anything is sent: a command the daemon dies
 * during is on disk as "running", which is what was true. */
static CallData *
call_data_new (VdSession *self, GDBusMethodInvocation *invocation, const gchar *kind, const gchar * const *argv,
               const gchar *cwd)
{
  CallData *call = g_new0 (CallData, 1);

  call->self = g_object_ref (self);
  call->invocation = invocation != NULL ? g_object_ref (invocation) : NULL;
  call->entry = vd_command_log_begin (self->log, kind, argv, cwd);
  call->is_exec = g_str_equal (kind, "exec");
  return call;
}

static void
call_data_free (CallData *call)
{
  g_object_unref (call->self);
  g_clear_object (&call->invocation);
  vd_command_entry_unref (call->entry);
  g_free (call->path);
  g_free (call);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CallData, call_data_free)

static void
call_finished (CallData *call, gint exit_status, gsize out_size, gsize err_size)
{
  vd_command_log_update (call->self->log, call->entry, VD_COMMAND_STATE_FINISHED, exit_status,
                         out_size, err_size, NULL);
}

/* --- commands that outlive their timeout ----------------------------- */

typedef struct {
  VdSession      *self;
  VdCommandEntry *entry;
  gint64          pid;
} Reap;

static void
reap_free (Reap *reap)
{
  g_object_unref (reap->self);
  vd_command_entry_unref (reap->entry);
  g_free (reap);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Reap, reap_free)

static void
reap_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(Reap) reap = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VdAgentExecResult) result = vd_session_helper_exec_wait_finish (VD_SESSION_HELPER (source), res, &error);
  g_autofree gchar *why = NULL;

  if (result != NULL) {
    vd_command_log_update (reap->self->log, reap->entry, VD_COMMAND_STATE_FINISHED_LATE, result->exit_status,
                           g_bytes_get_size (result->out), g_bytes_get_size (result->err),
                           "The command finished after its timeout; its output was discarded");
    return;
  }
  if (g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT))
    why = g_strdup_printf ("Still running in the guest (pid %" G_GINT64_FORMAT ") %d minutes after its timeout; "
                           "the daemon stopped watching it", reap->pid, REAP_TIMEOUT_SEC / 60);
  else if (reap->self->torn_down || reap->self->stop_requested)
    why = g_strdup_printf ("The session ended while the command (pid %" G_GINT64_FORMAT ") was still running",
                           reap->pid);
  else
    why = g_strdup_printf ("Lost track of the command (pid %" G_GINT64_FORMAT "): %s", reap->pid, error->message);
  vd_command_log_update (reap->self->log, reap->entry, VD_COMMAND_STATE_ABANDONED, -1, 0, 0, why);
}

/* qemu-ga cannot kill what it started, and killing by pid from inside the
 * guest could hit a reused pid: the daemon does not kill, it keeps
 * watching (bounded) and records how the command really ended. */
static void
reap_start (VdSession *self, VdCommandEntry *entry, gint64 pid)
{
  Reap *reap = g_new0 (Reap, 1);

  reap->self = g_object_ref (self);
  reap->entry = vd_command_entry_ref (entry);
  reap->pid = pid;
  vd_session_helper_exec_wait_async (self->helper, pid, REAP_TIMEOUT_SEC * 1000, VIVARIUM_OUTPUT_CAP, self->reapers,
                                     reap_done_cb, reap);
}

/* Records a failed call as what it is. A timeout is not a failure of the
 * command: the guest may still be running it. Returns the error for the
 * caller, which says so too. */
static GError *
call_failed (CallData *call, GError *error, gint64 pid)
{
  VdSession *self = call->self;
  gboolean timed_out = g_error_matches (error, VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT);
  g_autofree gchar *message = NULL;

  if (!timed_out || !call->is_exec) {
    vd_command_log_update (self->log, call->entry, VD_COMMAND_STATE_FAILED, -1, 0, 0, error->message);
    return error;
  }
  if (pid >= 0) {
    message = g_strdup_printf ("The command did not finish within %u s; it is still running in the guest "
                               "(pid %" G_GINT64_FORMAT "), and the command log will say how it ends",
                               call->timeout_sec, pid);
    vd_command_log_update (self->log, call->entry, VD_COMMAND_STATE_TIMED_OUT_RUNNING, -1, 0, 0, message);
    if (self->helper != NULL && vd_session_helper_has_agent (self->helper))
      reap_start (self, call->entry, pid);
  } else {
    message = g_strdup_printf ("The guest agent did not confirm the command's start within %u s; "
                               "it may or may not be running in the guest", call->timeout_sec);
    vd_command_log_update (self->log, call->entry, VD_COMMAND_STATE_TIMED_OUT_UNKNOWN, -1, 0, 0, message);
  }
  g_error_free (error);
  /* A paused guest runs nothing: say why, not just that time ran out. */
  if (self->state == VIVARIUM_SESSION_STATE_PAUSED)
    return g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The session %s was paused while the command ran "
                        "(%s). %s", self->id, vivarium_dbus_session_get_state_reason (self->skeleton), message);
  return g_error_new_literal (VIVARIUM_ERROR, VIVARIUM_ERROR_TIMED_OUT, message);
}

static void
call_fail (CallData *call, GError *error)
{
  g_dbus_method_invocation_take_error (call->invocation, call_failed (call, error, -1));
}

static gboolean
check_running (VdSession *self, GError **error)
{
  if (self->state == VIVARIUM_SESSION_STATE_RUNNING && self->helper != NULL && vd_session_helper_has_agent (self->helper))
    return TRUE;
  if (self->state == VIVARIUM_SESSION_STATE_PAUSED) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "The session %s is paused: %s. Make room and call Resume(), or Stop() it",
                 self->id, vivarium_dbus_session_get_state_reason (self->skeleton));
    return FALSE;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
               "The session %s is %s, not running", self->id, vd_session_get_state (self));
  return FALSE;
}

static gboolean
require_running (VdSession *self, GDBusMethodInvocation *invocation)
{
  GError *error = NULL;

  if (check_running (self, &error))
    return TRUE;
  g_dbus_method_invocation_take_error (invocation, error);
  return FALSE;
}

static void
exec_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(CallData) call = user_data;
  g_autoptr(VdAgentExecResult) result = NULL;
  GError *error = NULL;
  gint64 pid = -1;
  gsize out_size, err_size;

  result = vd_session_helper_exec_finish (VD_SESSION_HELPER (source), res, &pid, &error);
  if (result == NULL) {
    g_dbus_method_invocation_take_error (call->invocation, call_failed (call, error, pid));
    return;
  }
  out_size = g_bytes_get_size (result->out);
  err_size = g_bytes_get_size (result->err);
  vd_command_log_set_stderr_head (call->self->log, call->entry, result->err);
  call_finished (call, result->exit_status, out_size, err_size);
  vivarium_dbus_session_complete_exec (call->self->skeleton, call->invocation, result->exit_status,
                                       g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, g_bytes_get_data (result->out, NULL), out_size, 1),
                                       g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, g_bytes_get_data (result->err, NULL), err_size, 1),
                                       result->out_truncated, result->err_truncated);
}

/* The limits apply to what the caller sent: the cwd wrapper the agent
 * client adds (five items) is not the caller's. */
static gboolean
validate_exec (const gchar * const *argv, const gchar * const *env, const gchar *cwd, guint timeout, GError **error)
{
  if (!vivarium_argv_validate (argv, error) || !vivarium_env_validate (env, error))
    return FALSE;
  if (cwd[0] != '\0' && !vivarium_guest_path_validate (cwd, error))
    return FALSE;
  if (timeout == 0 || timeout > VIVARIUM_EXEC_TIMEOUT_MAX_SEC) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The timeout must be between 1 and %d seconds", VIVARIUM_EXEC_TIMEOUT_MAX_SEC);
    return FALSE;
  }
  return TRUE;
}

/* Every command sees the session's placeholders as $NAME, and with SSH
 * keys SSH_AUTH_SOCK; a caller's own NAME= wins. */
static gboolean
env_has (const gchar * const *env, const gchar *prefix)
{
  for (guint j = 0; env != NULL && env[j] != NULL; j++)
    if (g_str_has_prefix (env[j], prefix))
      return TRUE;
  return FALSE;
}

static GStrv
exec_env (VdSession *self, const gchar * const *env)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();

  g_strv_builder_addv (b, (const gchar **) env);
  for (guint i = 0; self->secrets != NULL && i < self->secrets->len; i++) {
    VivariumSecret *secret = self->secrets->pdata[i];
    g_autofree gchar *prefix = g_strconcat (secret->name, "=", NULL);
    gboolean given = FALSE;

    for (guint j = 0; env != NULL && env[j] != NULL && !given; j++)
      given = g_str_has_prefix (env[j], prefix);
    if (!given) {
      g_autofree gchar *entry = g_strconcat (prefix, secret->placeholder, NULL);
      g_strv_builder_add (b, entry);
    }
  }
  if (self->ssh_keys != NULL && !env_has (env, "SSH_AUTH_SOCK="))
    g_strv_builder_add (b, "SSH_AUTH_SOCK=" VIVARIUM_SSH_AGENT_GUEST_SOCKET);
  return g_strv_builder_end (b);
}

static gboolean
handle_exec (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, const gchar * const *argv,
             const gchar * const *env, const gchar *cwd, guint timeout, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  g_auto(GStrv) full_env = NULL;
  CallData *call;
  GError *error = NULL;

  if (!validate_exec (argv, env, cwd, timeout, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!require_running (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  /* The log records the caller's argv and cwd, not the agent's wrapper. */
  call = call_data_new (self, invocation, "exec", argv, cwd);
  call->timeout_sec = timeout;
  full_env = exec_env (self, env);
  vd_session_helper_exec_async (self->helper, argv, (const gchar * const *) full_env, cwd, timeout * 1000,
                              VIVARIUM_OUTPUT_CAP, NULL, exec_done_cb, call);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
read_file_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(CallData) call = user_data;
  g_autoptr(GBytes) data = NULL;
  GError *error = NULL;

  data = vd_session_helper_read_file_finish (VD_SESSION_HELPER (source), res, &error);
  if (data == NULL) {
    call_fail (call, error);
    return;
  }
  call_finished (call, 0, g_bytes_get_size (data), 0);
  vivarium_dbus_session_complete_read_file (call->self->skeleton, call->invocation,
                                            g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, data, TRUE));
}

static gboolean
handle_read_file (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, const gchar *path, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  const gchar *argv[] = { path, NULL };
  GError *error = NULL;

  if (!vivarium_guest_path_validate (path, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!require_running (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  vd_session_helper_read_file_async (self->helper, path, VIVARIUM_FILE_MAX, FILE_TIMEOUT_MS, NULL,
                                   read_file_done_cb, call_data_new (self, invocation, "read-file", argv, NULL));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
write_file_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(CallData) call = user_data;
  g_autoptr(GVariant) entry = NULL;
  GError *error = NULL;

  if (!vd_session_helper_call_finish (VD_SESSION_HELPER (source), res, &error)) {
    call_fail (call, error);
    return;
  }
  call_finished (call, 0, 0, 0);
  vivarium_dbus_session_complete_write_file (call->self->skeleton, call->invocation);
}

static gboolean
handle_write_file (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, const gchar *path,
                   GVariant *data, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  const gchar *argv[] = { path, NULL };
  g_autoptr(GBytes) bytes = NULL;
  GError *error = NULL;

  if (!vivarium_guest_path_validate (path, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (g_variant_get_size (data) > VIVARIUM_FILE_MAX) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_TOO_LARGE,
                                           "The file is %" G_GSIZE_FORMAT " bytes; the limit is %d",
                                           g_variant_get_size (data), VIVARIUM_FILE_MAX);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!require_running (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  bytes = g_variant_get_data_as_bytes (data);
  vd_session_helper_write_file_async (self->helper, path, bytes, FILE_TIMEOUT_MS, NULL,
                                    write_file_done_cb, call_data_new (self, invocation, "write-file", argv, NULL));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* QEMU writes the picture into the session's runtime directory, which its
 * uid owns (and could replace by a link, a FIFO, or a file it grows or
 * truncates under us): vd_fs_read_untrusted(). */
static GBytes *
read_screenshot (const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  GBytes *png = vd_fs_read_untrusted (path, SCREENSHOT_MAX, &local);

  if (png == NULL) {
    g_info ("screenshot %s: %s", path, local->message);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, "QEMU did not produce a usable screenshot");
  }
  return png;
}

static void
screenshot_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(CallData) call = user_data;
  g_autoptr(GBytes) png = NULL;
  GError *error = NULL;

  if (vd_session_helper_call_finish (VD_SESSION_HELPER (source), res, &error))
    png = read_screenshot (call->path, &error);
  g_unlink (call->path);
  if (png == NULL) {
    call_fail (call, error);
    return;
  }
  call_finished (call, 0, g_bytes_get_size (png), 0);
  vivarium_dbus_session_complete_screenshot (call->self->skeleton, call->invocation,
                                             g_variant_new_from_bytes (G_VARIANT_TYPE_BYTESTRING, png, TRUE));
}

static gboolean
handle_screenshot (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  const gchar *argv[] = { NULL };
  GVariantBuilder args;
  CallData *call;

  if (!require_running (self, invocation))
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  call = call_data_new (self, invocation, "screenshot", argv, NULL);
  call->path = g_strdup_printf ("%s/screen-%u.png", self->runtime_dir, ++self->screenshot_seq);
  g_variant_builder_init (&args, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&args, "{sv}", "filename", g_variant_new_string (call->path));
  g_variant_builder_add (&args, "{sv}", "format", g_variant_new_string ("png"));
  vd_session_helper_qmp_async (self->helper, "screendump", g_variant_builder_end (&args), QMP_TIMEOUT_MS, NULL,
                               screenshot_done_cb, call);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* Paged, so that no reply can approach the bus's message limit: a reply
 * the bus refuses would cost the daemon its connection, and every session
 * with it. */
static gboolean
handle_get_command_log (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, guint64 offset, guint limit,
                        gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  GError *error = NULL;
  guint64 next = 0;
  GVariant *page = vd_command_log_get_page (self->log, offset, limit, &next, &error);

  if (page == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_session_complete_get_command_log (iface, invocation, page, next, vd_command_log_get_total (self->log),
                                                  vd_command_log_get_dropped (self->log));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* Pause and Resume answer once QEMU replied to "stop" or "cont". The state
 * follows QEMU's STOP or RESUME event, which comes before the reply; after
 * a Resume, if the cause is still there, QEMU stops the guest again and
 * says why. */
static void
run_state_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  GError *error = NULL;

  if (!vd_session_helper_call_finish (VD_SESSION_HELPER (source), res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation, NULL);
}

static gboolean
handle_resume (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  if (self->state != VIVARIUM_SESSION_STATE_PAUSED || self->helper == NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The session %s is %s, not paused", self->id, vd_session_get_state (self));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vd_log_session (G_LOG_LEVEL_INFO, self->id, "session %s: resuming after %s", self->id,
                  vivarium_dbus_session_get_state_reason (self->skeleton));
  vd_session_helper_qmp_async (self->helper, "cont", NULL, QMP_TIMEOUT_MS, NULL, run_state_done_cb,
                               g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_pause (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);

  if (self->state != VIVARIUM_SESSION_STATE_RUNNING || self->helper == NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                                           "The session %s is %s, not running", self->id, vd_session_get_state (self));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  self->pause_requested = TRUE;
  vd_log_session (G_LOG_LEVEL_INFO, self->id, "session %s: pausing on request", self->id);
  vd_session_helper_qmp_async (self->helper, "stop", NULL, QMP_TIMEOUT_MS, NULL, run_state_done_cb,
                               g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
stop_call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdSession *self = VD_SESSION (source);
  GError *error = NULL;

  if (!vd_session_stop_finish (self, res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vivarium_dbus_session_complete_stop (self->skeleton, invocation);
}

static gboolean
handle_stop (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  vd_session_stop_async (VD_SESSION (user_data), stop_call_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- for the daemon's own use ---------------------------------------- */

const VdSessionOptions *
vd_session_get_options (VdSession *self)
{
  return &self->options;
}

const gchar *
vd_session_get_start_mode (VdSession *self)
{
  return vivarium_dbus_session_get_start_mode (self->skeleton);
}

static void
snapshot_saved_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  GError *error = NULL;

  if (!vd_session_snapshot_save_finish (res, &error)) {
    g_task_return_error (task, error);
    return;
  }
  g_task_return_boolean (task, TRUE);
}

void
vd_session_save_boot_snapshot_async (VdSession *self, const gchar *image_dir, GCancellable *cancellable,
                                     GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonObject) info = json_object_new ();
  GError *error = NULL;

  if (!self->options.boot_snapshot || !check_running (self, &error)) {
    if (error == NULL)
      error = g_error_new (VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE, "The session %s is not a scratch boot", self->id);
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  json_object_set_int_member (info, "schema", 1);
  json_object_set_int_member (info, "memory-mib", self->options.memory_mib);
  json_object_set_int_member (info, "cpus", self->options.cpus);
  json_object_set_string_member (info, "device-set", VD_QEMU_COMMAND_DEVICE_SET);
  json_object_set_boolean_member (info, "kvm", self->kvm);
  json_object_set_string_member (info, "accelerator", vivarium_dbus_session_get_accelerator (self->skeleton));
  json_object_set_string_member (info, "session", self->id);
  json_object_set_int_member (info, "boot-usec", g_get_real_time () - (gint64) vivarium_dbus_session_get_started_at (self->skeleton));
  vd_session_snapshot_save_async (self->helper, self->overlay, image_dir, info, cancellable,
                                  snapshot_saved_cb, task);
}

gboolean
vd_session_save_boot_snapshot_finish (VdSession *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

guint32
vd_session_get_main_pid (VdSession *self)
{
  g_autoptr(GVariant) pid = vd_systemd_get_unit_property (self->systemd, self->unit, "org.freedesktop.systemd1.Service",
                                                          "MainPID", NULL);
  return pid != NULL ? g_variant_get_uint32 (pid) : 0;
}

static void
internal_exec_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  CallData *call = g_task_get_task_data (task);
  GError *error = NULL;
  gint64 pid = -1;
  VdAgentExecResult *result = vd_session_helper_exec_finish (VD_SESSION_HELPER (source), res, &pid, &error);

  if (result == NULL) {
    g_task_return_error (task, call_failed (call, error, pid));
    return;
  }
  call_finished (call, result->exit_status, g_bytes_get_size (result->out), g_bytes_get_size (result->err));
  g_task_return_pointer (task, result, (GDestroyNotify) vd_agent_exec_result_free);
}

/* Commands the daemon itself runs (self-test probes) go through the same
 * agent and into the same command log as a caller's. */
void
vd_session_exec_async (VdSession *self, const gchar * const *argv, guint timeout_sec, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  GError *error = NULL;
  CallData *call;

  if (!check_running (self, &error)) {
    g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  /* No invocation: the daemon is the caller. */
  call = call_data_new (self, NULL, "exec", argv, NULL);
  call->timeout_sec = timeout_sec;
  g_task_set_task_data (task, call, (GDestroyNotify) call_data_free);
  vd_session_helper_exec_async (self->helper, argv, NULL, NULL, timeout_sec * 1000, VIVARIUM_OUTPUT_CAP, cancellable,
                              internal_exec_done_cb, task);
}

VdAgentExecResult *
vd_session_exec_finish (VdSession *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

void
vd_session_set_egress_uid (VdSession *self, guint32 uid)
{
  self->egress_uid = uid;
}

guint32
vd_session_get_egress_uid (VdSession *self)
{
  return self->egress_uid;
}

VdEgress *
vd_session_get_egress (VdSession *self)
{
  return self->egress;
}

static gboolean
handle_get_egress_log (VivariumDBusSession *iface, GDBusMethodInvocation *invocation, guint64 offset, guint limit,
                       gpointer user_data)
{
  VdSession *self = VD_SESSION (user_data);
  g_autofree gchar *path = self->egress != NULL ? vd_egress_dup_log_path (self->egress)
                                                : vd_egress_kept_log_path (self->config, self->id);
  guint64 next = 0, total = 0;
  GError *error = NULL;
  GVariant *entries = vd_egress_log_read (path, offset, limit, &next, &total, &error);

  if (entries == NULL)
    g_dbus_method_invocation_take_error (invocation, error);
  else
    vivarium_dbus_session_complete_get_egress_log (iface, invocation, entries, next, total);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}
