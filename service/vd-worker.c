/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdWorker"

#include "config.h"

#include <errno.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>
#include <sys/wait.h>
#include <glib/gstdio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-fs.h"
#include "vd-log.h"
#include "vd-unit-sandbox.h"
#include "vd-worker.h"

struct _VdWorker {
  GObject    parent_instance;
  VdSystemd *systemd;
  VdConfig  *config;
  gchar     *task_id;
  gchar     *unit;
  gchar     *dir;
  guint32    uid;
  gboolean   started;
  gboolean   exited;
  gboolean   stopping;
  gchar     *failure;   /* why the unit failed, in words; NULL if it did not */
  gchar     *agent_program;   /* an agent worker runs this, not a script */
  gchar     *model_socket;    /* and reaches its model through this */
};

G_DEFINE_TYPE (VdWorker, vd_worker, G_TYPE_OBJECT)

enum { SIGNAL_EXITED, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
vd_worker_finalize (GObject *object)
{
  VdWorker *self = VD_WORKER (object);

  g_clear_object (&self->systemd);
  g_clear_object (&self->config);
  g_free (self->task_id);
  g_free (self->unit);
  g_free (self->dir);
  g_free (self->failure);
  g_free (self->agent_program);
  g_free (self->model_socket);
  G_OBJECT_CLASS (vd_worker_parent_class)->finalize (object);
}

static void
vd_worker_class_init (VdWorkerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_worker_finalize;
  signals[SIGNAL_EXITED] = g_signal_new ("exited", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                         NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_BOOLEAN);
}

static void
vd_worker_init (VdWorker *self)
{
}

VdWorker *
vd_worker_new (VdSystemd *systemd, VdConfig *config, const gchar *task_id, guint32 uid)
{
  VdWorker *self = g_object_new (VD_TYPE_WORKER, NULL);

  self->systemd = g_object_ref (systemd);
  self->config = g_object_ref (config);
  self->task_id = g_strdup (task_id);
  self->unit = vd_worker_unit_for (task_id);
  self->dir = g_build_filename (vd_config_get_runtime_dir (config), "workers", task_id, NULL);
  self->uid = uid;
  return self;
}

gchar *
vd_worker_unit_for (const gchar *task_id)
{
  return g_strdup_printf ("vivarium-worker-%s.service", task_id);
}

const gchar *
vd_worker_get_unit (VdWorker *self)
{
  return self->unit;
}

guint32
vd_worker_get_uid (VdWorker *self)
{
  return self->uid;
}

/* Owned by root, readable (and for the program, runnable) by the worker's
 * own group only: no other worker, QEMU uid or local user reads it. */
static gboolean
write_file (const gchar *path, const gchar *data, gsize len, guint mode, guint32 gid, GError **error)
{
  if (!g_file_set_contents_full (path, data, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, mode, error))
    return FALSE;
  /* g_file_set_contents_full applies the umask-free mode only to new files;
   * be explicit. */
  if (chown (path, 0, gid) != 0 || g_chmod (path, mode) != 0)
    return vd_fs_set_error_errno (error, errno, "Cannot set the owner or mode of %s", path);
  return TRUE;
}

void
vd_worker_set_agent (VdWorker *self, const gchar *program, const gchar *model_socket)
{
  g_free (self->agent_program);
  g_free (self->model_socket);
  self->agent_program = g_strdup (program);
  self->model_socket = g_strdup (model_socket);
}

static gboolean
worker_gid (guint32 uid, guint32 *gid, GError **error)
{
  struct passwd *pw = getpwuid (uid);

  if (pw == NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 "The worker uid %u has no user (are Vivarium's sysusers.d users made?)", uid);
    return FALSE;
  }
  *gid = pw->pw_gid;
  return TRUE;
}

/* RUNTIME/workers is root's 0711 (nobody lists it), a task's directory
 * root:<its worker's group> 0750. */
static gboolean
write_files (VdWorker *self, GBytes *script, const gchar *instructions, GError **error)
{
  g_autofree gchar *program = g_build_filename (self->dir, "worker", NULL);
  g_autofree gchar *text = g_build_filename (self->dir, "instructions", NULL);
  g_autofree gchar *parent = g_path_get_dirname (self->dir);
  guint32 gid;

  if (!worker_gid (self->uid, &gid, error) || !vd_fs_mkdir (parent, 0711, 0, 0, error) ||
      !vd_fs_mkdir (self->dir, 0750, 0, gid, error))
    return FALSE;
  if (!write_file (text, instructions, strlen (instructions), 0640, gid, error))
    return FALSE;
  if (self->agent_program != NULL)
    return TRUE;
  return write_file (program, g_bytes_get_data (script, NULL), g_bytes_get_size (script), 0750, gid, error);
}

/* A host program acting only over D-Bus (the system bus is AF_UNIX; an
 * agent's model socket too): of the runtime directory it sees its own
 * files and its model socket's directory, of the state nothing. */
static void
add_sandbox (VdWorker *self, GVariantBuilder *b)
{
  const gchar *families[] = { "AF_UNIX", NULL };
  const gchar *syscalls[] = { "@system-service", NULL };
  const gchar *denied[] = { "@privileged", "@resources", NULL };
  g_autofree gchar *state = g_strconcat ("-", vd_config_get_state_dir (self->config), NULL);
  g_autofree gchar *model_dir = self->model_socket != NULL ? g_path_get_dirname (self->model_socket) : NULL;
  const gchar *binds[] = { model_dir, NULL };
  const gchar *ro_binds[] = { self->dir, NULL };
  const gchar *inaccessible[] = { state, NULL };
  VdUnitSandbox sandbox = {
    .address_families = families,
    .syscalls = syscalls,
    .denied_syscalls = denied,
    .runtime_dir = vd_config_get_runtime_dir (self->config),
    .binds = binds,
    .ro_binds = ro_binds,
    .inaccessible = inaccessible,
  };

  vd_unit_sandbox_add (b, &sandbox);
}

static GVariant *
unit_properties (VdWorker *self, const gchar *task_path, const gchar *session_path, guint memory_mib)
{
  g_autofree gchar *description = g_strdup_printf ("Vivarium worker of task %s", self->task_id);
  g_autofree gchar *user = g_strdup_printf ("%u", self->uid);
  g_autofree gchar *program = self->agent_program != NULL ? g_strdup (self->agent_program)
                                                          : g_build_filename (self->dir, "worker", NULL);
  g_autofree gchar *env_model = g_strconcat ("VIVARIUM_MODEL_SOCKET=", self->model_socket, NULL);
  g_autofree gchar *env_task = g_strconcat ("VIVARIUM_TASK=", task_path, NULL);
  g_autofree gchar *env_session = g_strconcat ("VIVARIUM_SESSION=", session_path, NULL);
  g_autofree gchar *env_instructions = g_strconcat ("VIVARIUM_INSTRUCTIONS_FILE=", self->dir, "/instructions", NULL);
  const gchar *env[] = { env_task, env_session, env_instructions, "HOME=/", "LANG=C.UTF-8",
                         "PATH=/usr/local/bin:/usr/bin:/bin",
                         self->model_socket != NULL ? env_model : NULL, NULL };
  const gchar *argv[] = { program, NULL };
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };
  const gchar *gateway[] = { VIVARIUM_DAEMON_UNIT, "vivarium-gateway.service", NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(sv)"));
  g_variant_builder_add (&b, "(sv)", "Description", g_variant_new_string (description));
  /* The start job ends when the program does: that is how "exited" comes. */
  g_variant_builder_add (&b, "(sv)", "Type", g_variant_new_string ("oneshot"));
  g_variant_builder_add (&b, "(sv)", "TimeoutStartUSec", g_variant_new_uint64 (G_MAXUINT64));
  g_variant_builder_add (&b, "(sv)", "Slice", g_variant_new_string (VIVARIUM_SLICE));
  g_variant_builder_add (&b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  /* An agent's one path to its model: the gateway is up before it starts.
   * The unix socket needs no network; PrivateNetwork= stays. */
  if (self->agent_program != NULL)
    g_variant_builder_add (&b, "(sv)", "Wants", g_variant_new_strv (gateway + 1, -1));
  g_variant_builder_add (&b, "(sv)", "After", g_variant_new_strv (self->agent_program != NULL ? gateway : bind_to, -1));
  /* A failed unit stays loaded until the daemon has read why (ExecMain*,
   * Result) and reset it: a collected unit could no longer say. */
  g_variant_builder_add (&b, "(sv)", "CollectMode", g_variant_new_string ("inactive"));
  g_variant_builder_add (&b, "(sv)", "User", g_variant_new_string (user));
  g_variant_builder_add (&b, "(sv)", "ExecStart", g_variant_new_parsed ("[(%s, %^as, false)]", program, argv));
  g_variant_builder_add (&b, "(sv)", "Environment", g_variant_new_strv (env, -1));
  g_variant_builder_add (&b, "(sv)", "WorkingDirectory", g_variant_new_string ("/"));
  g_variant_builder_add (&b, "(sv)", "PrivateNetwork", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "IPAddressDeny", g_variant_new_parsed (
                           "[(2, [byte 0, 0, 0, 0], @u 0), (10, [byte 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], @u 0)]"));
  g_variant_builder_add (&b, "(sv)", "PrivateDevices", g_variant_new_boolean (TRUE));
  g_variant_builder_add (&b, "(sv)", "DevicePolicy", g_variant_new_string ("closed"));
  add_sandbox (self, &b);
  g_variant_builder_add (&b, "(sv)", "MemoryMax", g_variant_new_uint64 ((guint64) memory_mib * 1024 * 1024));
  g_variant_builder_add (&b, "(sv)", "TasksMax", g_variant_new_uint64 (256));
  g_variant_builder_add (&b, "(sv)", "TimeoutStopUSec", g_variant_new_uint64 (10 * G_USEC_PER_SEC));
  return g_variant_builder_end (&b);
}

/* systemd's own exit statuses for a unit it could not set up (EXIT_CHDIR
 * and up, systemd.exec(5) "Process Exit Codes"); 203 is EXIT_EXEC. */
#define SYSTEMD_EXIT_FIRST 200
#define SYSTEMD_EXIT_LAST  243
#define SYSTEMD_EXIT_EXEC  203

static gchar *
describe_exit (gint code, gint status, const gchar *result)
{
  if (code == CLD_EXITED && status == SYSTEMD_EXIT_EXEC)
    return g_strdup ("the worker program could not be executed (systemd exit status 203/EXEC: "
                     "it is not a program, or a script without a valid #! line)");
  if (code == CLD_EXITED && status >= SYSTEMD_EXIT_FIRST && status <= SYSTEMD_EXIT_LAST)
    return g_strdup_printf ("systemd could not set up the worker's unit (exit status %d, "
                            "see systemd.exec(5))", status);
  if (code == CLD_EXITED)
    return g_strdup_printf ("the worker exited with status %d without calling Finish", status);
  if (code == CLD_KILLED || code == CLD_DUMPED)
    return g_strdup_printf ("the worker was killed by signal %d (%s) without calling Finish", status,
                            g_strsignal (status));
  return g_strdup_printf ("the worker's unit failed (systemd's result: %s)", result);
}

/* The unit is still loaded (CollectMode=inactive): ask systemd how it ended. */
static gchar *
describe_failure (VdWorker *self, const GError *job_error)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) props = vd_systemd_get_unit_properties (self->systemd, self->unit,
                                                              "org.freedesktop.systemd1.Service", &error);
  const gchar *result = "unknown";
  gint32 code = 0, status = 0;

  if (props == NULL)
    return g_strdup_printf ("the worker's unit did not start: %s", job_error->message);
  g_variant_lookup (props, "Result", "&s", &result);
  if (!g_variant_lookup (props, "ExecMainCode", "i", &code) ||
      !g_variant_lookup (props, "ExecMainStatus", "i", &status) || code == 0)
    return g_strdup_printf ("the worker's unit did not start (systemd's result: %s)", result);
  return describe_exit (code, status, result);
}

static void
unit_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdWorker) self = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = vd_systemd_start_transient_finish (VD_SYSTEMD (source), res, &error);

  if (!ok && !self->stopping) {
    self->failure = describe_failure (self, error);
    vd_log_task (G_LOG_LEVEL_INFO, self->task_id, "worker of task %s failed: %s", self->task_id, self->failure);
  } else if (!ok) {
    vd_log_task (G_LOG_LEVEL_INFO, self->task_id, "worker of task %s ended: %s", self->task_id, error->message);
  }
  if (!ok && !self->stopping)
    vd_systemd_reset_failed_unit (self->systemd, self->unit);
  self->exited = TRUE;
  g_signal_emit (self, signals[SIGNAL_EXITED], 0, ok);
}

const gchar *
vd_worker_get_failure (VdWorker *self)
{
  return self->failure;
}

gboolean
vd_worker_start (VdWorker *self, GBytes *script, const gchar *instructions, const gchar *task_path,
                 const gchar *session_path, guint memory_mib, GError **error)
{
  if (!write_files (self, script, instructions, error))
    return FALSE;
  self->started = TRUE;
  vd_systemd_start_transient_async (self->systemd, self->unit, unit_properties (self, task_path, session_path, memory_mib),
                                    NULL, NULL, unit_done_cb, g_object_ref (self));
  return TRUE;
}

/* Stopped or not, a unit that ended failed is reset, so nothing is left. */
static void
stopped_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(VdWorker) self = user_data;

  vd_systemd_stop_unit_finish (VD_SYSTEMD (source), res, NULL);
  vd_systemd_reset_failed_unit (self->systemd, self->unit);
}

void
vd_worker_stop (VdWorker *self)
{
  if (!self->started || self->exited)
    return;
  self->stopping = TRUE;
  vd_systemd_stop_unit_async (self->systemd, self->unit, NULL, stopped_cb, g_object_ref (self));
}

void
vd_worker_cleanup (VdWorker *self)
{
  g_autoptr(GError) error = NULL;

  if (!vd_fs_rm_rf (self->dir, &error))
    g_warning ("cannot remove %s: %s", self->dir, error->message);
}
