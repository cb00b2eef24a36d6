/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdManager"

#include "config.h"

#include <errno.h>
#include <string.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-canary.h"
#include "vd-capacity.h"
#include "vd-dns-relay.h"
#include "vd-exported.h"
#include "vd-fs.h"
#include "vd-gateway-client.h"
#include "vd-guard.h"
#include "vd-idle.h"
#include "vd-image.h"
#include "vd-image-build.h"
#include "vd-image-import.h"
#include "vd-image-store.h"
#include "vd-job-store.h"
#include "vd-manager.h"
#include "vd-secret-store.h"
#include "vd-ssh-key-store.h"
#include "vd-egress-options.h"
#include "vd-egress-rules.h"
#include "vd-project-store.h"
#include "vd-report-store.h"
#include "vd-selftest-store.h"
#include "vd-session.h"
#include "vd-session-pool.h"
#include "vd-session-save.h"
#include "vd-systemd.h"
#include "vd-git-transfer.h"
#include "vd-task-runner.h"
#include "vd-worker-grants.h"

/* The engine: it creates the stores (images, jobs, projects, reports,
 * tasks, secrets, the self-test), the session pool and the guard, and
 * answers the Manager interface. It exports every object through
 * export_protected() on the connection it was given and keeps the daemon
 * on the bus with VdIdle inhibitors; the bus name and the daemon's life
 * are not its business. */
struct _VdManager {
  GObject               parent_instance;
  VdConfig             *config;
  VdAuthority          *authority;
  VdIdle               *idle;
  VdExported           *exported;     /* the only way onto the bus */
  GDBusConnection      *connection;
  VdSystemd            *systemd;
  VdGitTransfer        *git_transfer;
  VdGuard              *guard;
  VdDnsRelay           *dns_relay;
  VdSessionPool        *pool;
  VdProjectStore       *projects;
  VdReportStore        *reports;
  VdWorkerGrants       *grants;
  VdTaskRunner         *runner;
  VdSecretStore        *secrets;
  VdSshKeyStore        *ssh_keys;
  VdJobStore           *jobs;
  VdImageStore         *images;
  VdSelfTestStore      *self_test;
  VivariumDBusManager  *skeleton;
};

G_DEFINE_TYPE (VdManager, vd_manager, G_TYPE_OBJECT)

static void
vd_manager_finalize (GObject *object)
{
  VdManager *self = VD_MANAGER (object);

  g_clear_object (&self->exported);   /* takes every object off the bus */
  g_clear_object (&self->skeleton);
  g_clear_object (&self->self_test);
  g_clear_object (&self->images);
  g_clear_object (&self->jobs);
  g_clear_object (&self->pool);
  g_clear_object (&self->projects);
  g_clear_object (&self->runner);
  g_clear_object (&self->secrets);
  g_clear_object (&self->ssh_keys);
  g_clear_object (&self->reports);
  g_clear_object (&self->grants);
  g_clear_object (&self->guard);
  g_clear_object (&self->dns_relay);   /* stops it */
  g_clear_object (&self->systemd);
  g_clear_object (&self->git_transfer);
  g_clear_object (&self->config);
  g_clear_object (&self->authority);
  g_clear_object (&self->idle);
  g_clear_object (&self->connection);
  G_OBJECT_CLASS (vd_manager_parent_class)->finalize (object);
}

static void
vd_manager_class_init (VdManagerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_manager_finalize;
}

static void
vd_manager_init (VdManager *self)
{
}

/* The one place objects go on the bus: through the boundary, which
 * authorizes their methods, properties, signals and place in the tree. The
 * pool gets it as its VdExportFunc. */
static gboolean
export_protected (VdManager *self, GDBusInterfaceSkeleton *skeleton, const gchar *path, GError **error)
{
  return vd_exported_add (self->exported, path, skeleton, error);
}

static gboolean
export_func (GDBusInterfaceSkeleton *skeleton, const gchar *path, gpointer user_data, GError **error)
{
  return export_protected (VD_MANAGER (user_data), skeleton, path, error);
}

/* --- listing --------------------------------------------------------- */

static gboolean
handle_list_sessions (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_session_pool_list_paths (self->pool);

  vivarium_dbus_manager_complete_list_sessions (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_images (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_image_store_list_paths (self->images);

  vivarium_dbus_manager_complete_list_images (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_projects (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_project_store_list_paths (self->projects);

  vivarium_dbus_manager_complete_list_projects (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_reports (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_report_store_list_paths (self->reports);

  vivarium_dbus_manager_complete_list_reports (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_list_tasks (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autofree const gchar **paths = vd_task_runner_list_paths (self->runner);

  vivarium_dbus_manager_complete_list_tasks (iface, invocation, paths);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_get_capacity (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdCapacitySlots slots = {
    .slots = vd_config_get_max_sessions (self->config),
    .slots_in_use = vd_task_runner_count_slots_in_use (self->runner),
    .max_queued = vd_config_get_max_queued_tasks (self->config),
    .queued = vd_task_runner_count_queued (self->runner),
  };
  VdCapacityHost host = { 0 };
  GError *error = NULL;

  if (!vd_capacity_read_host (&host, &error)) {
    g_dbus_method_invocation_return_error_literal (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED, error->message);
    g_error_free (error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_get_capacity (iface, invocation, vd_capacity_to_variant (&slots, &host));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_submit_task (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *project,
                    const gchar *image_name, const gchar *instructions, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdImage *image;
  VdTask *task;
  GError *error = NULL;

  if (vd_report_store_get_fingerprint (self->reports)[0] == '\0') {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                                           "The daemon has no report-signing key; a task could not be reported");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  /* Past MaxSessions the runner queues the task, or says Busy. */
  if (vd_project_store_lookup (self->projects, project, &error) == NULL ||
      (image = vd_image_store_lookup_bootable (self->images, image_name, &error)) == NULL ||
      !vd_guard_check_can_start (self->guard, &error) ||
      (task = vd_task_runner_submit (self->runner, project, image, instructions, options, &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_submit_task (iface, invocation, vd_task_get_object_path (task));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
task_added_cb (VdTaskRunner *runner, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_task_added (VD_MANAGER (user_data)->skeleton, path);
}

/* Pruned objects leave the bus (the boundary holds every object it serves
 * until it is told), and the lists that showed them hear so: a client's
 * list shrinks as well as grows. */
static void
task_removed_cb (VdTaskRunner *runner, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_task_removed (self->skeleton, path);
}

static void
report_added_cb (VdReportStore *store, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_report_added (VD_MANAGER (user_data)->skeleton, path);
}

static void
report_removed_cb (VdReportStore *store, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_report_removed (self->skeleton, path);
}

/* --- projects -------------------------------------------------------- */

static void
project_created_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdProjectStore *store = VD_PROJECT_STORE (source);
  GError *error = NULL;
  g_autoptr(VdProject) project = vd_project_store_create_finish (store, res, &error);

  if (project == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  g_dbus_method_invocation_return_value (invocation,
                                         g_variant_new ("(o)", vd_project_store_get_path (store, vd_project_get_name (project))));
}

static gboolean
handle_create_project (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *name,
                       guint64 quota_bytes, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_project_store_create_async (self->projects, name, quota_bytes, options, project_created_cb,
                                 g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
project_added_cb (VdProjectStore *store, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_project_added (VD_MANAGER (user_data)->skeleton, path);
}

static void
project_removed_cb (VdProjectStore *store, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_project_removed (self->skeleton, path);
}

static gboolean
handle_list_recipes (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_auto(GStrv) recipes = vd_image_build_list_recipes (self->config);

  vivarium_dbus_manager_complete_list_recipes (iface, invocation, (const gchar * const *) recipes);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- images ---------------------------------------------------------- */

static void
image_added_cb (VdImageStore *store, const gchar *path, gpointer user_data)
{
  vivarium_dbus_manager_emit_image_added (VD_MANAGER (user_data)->skeleton, path);
}

static void
image_removed_cb (VdImageStore *store, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_image_removed (self->skeleton, path);
}

static gboolean
handle_build_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *recipe,
                    const gchar *name, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  GError *error = NULL;
  g_autoptr(VdJob) job = vd_image_store_build (self->images, recipe, name, &error);

  if (job == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_build_image (iface, invocation, vd_job_get_object_path (job));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
  guint                  inhibit;
} ImportData;

static void
import_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree ImportData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  VdManager *self = data->manager;
  GError *error = NULL;
  g_autoptr(VdImage) image = vd_image_store_import_finish (VD_IMAGE_STORE (source), res, &error);

  vd_idle_uninhibit (self->idle, data->inhibit);
  if (image == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vivarium_dbus_manager_complete_import_image (self->skeleton, invocation, NULL, vd_image_get_object_path (image));
}

static gboolean
handle_import_image (VivariumDBusManager *iface, GDBusMethodInvocation *invocation,
                     GUnixFDList *fd_list, const gchar *name, GVariant *handle, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  ImportData *data;
  GError *error = NULL;
  gint fd;

  if (!vd_image_store_check_new_name (self->images, name, &error) ||
      (fd = vd_image_import_take_fd (invocation, handle, &error)) < 0) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  data = g_new0 (ImportData, 1);
  data->manager = self;
  data->invocation = g_object_ref (invocation);
  data->inhibit = vd_idle_inhibit (self->idle, "an image import");
  vd_image_store_import_async (self->images, name, fd, import_done_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* --- sessions -------------------------------------------------------- */

static gboolean
parse_uint_option (GVariantDict *dict, const gchar *key, guint min, guint max, guint *value, GError **error)
{
  g_autoptr(GVariant) v = g_variant_dict_lookup_value (dict, key, NULL);

  if (v == NULL)
    return TRUE;
  if (!g_variant_is_of_type (v, G_VARIANT_TYPE_UINT32)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” must be an unsigned 32-bit number (type u)", key);
    return FALSE;
  }
  *value = g_variant_get_uint32 (v);
  if (*value < min || *value > max) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The option “%s” is %u; it must be between %u and %u", key, *value, min, max);
    return FALSE;
  }
  return TRUE;
}

static gboolean
parse_session_options (VdManager *self, const gchar *project, GVariant *options, VdSessionOptions *out,
                       VdEgressOptions *egress, GError **error)
{
  VdProject *p = project[0] != '\0' ? vd_project_store_lookup (self->projects, project, NULL) : NULL;
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  const gchar *known[] = { "memory", "cpus", "timeout", "egress", "egress_groups", "egress_allow", "secrets",
                           "ssh_keys", NULL };
  GVariantIter iter;
  const gchar *key;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, NULL)) {
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown session option “%s” (known: memory, cpus, timeout, egress, egress_groups, egress_allow, "
                   "secrets, ssh_keys)", key);
      return FALSE;
    }
  }
  out->memory_mib = vd_config_get_default_memory_mib (self->config);
  out->cpus = vd_config_get_default_cpus (self->config);
  out->timeout_sec = 0;
  out->guard_layer1 = TRUE;
  out->guard_layer2 = TRUE;
  if (!parse_uint_option (dict, "memory", VIVARIUM_MEMORY_MIN_MIB, VIVARIUM_MEMORY_MAX_MIB, &out->memory_mib, error) ||
      !parse_uint_option (dict, "cpus", 1, VIVARIUM_CPUS_MAX, &out->cpus, error) ||
      !parse_uint_option (dict, "timeout", 0, VIVARIUM_TIMEOUT_MAX_SEC, &out->timeout_sec, error) ||
      !vd_egress_options_parse (self->config, p, dict, VD_EGRESS_FOR_SESSION, egress, error) ||
      !vd_egress_options_parse_secrets (self->config, self->secrets, p, dict, egress, error) ||
      !vd_egress_options_parse_ssh_keys (self->config, p, dict, egress, error))
    return FALSE;
  out->secrets = egress->secrets;
  out->ssh_keys = egress->ssh_keys;
  out->egress_mode = egress->mode;
  out->egress_groups = (const gchar * const *) egress->groups;
  out->egress_allow = (const gchar * const *) egress->allow;
  return TRUE;
}

static gboolean
check_project (VdManager *self, const gchar *project, GError **error)
{
  if (project[0] == '\0')
    return TRUE;
  return vd_project_store_lookup (self->projects, project, error) != NULL;
}

/* A session's hold on its project: the tree is its uid's while it runs,
 * root's again (and the project free) once it has ended. */
typedef struct {
  VdManager *manager;
  gchar     *project;
} ProjectHold;

static void
project_hold_free (gpointer data, GClosure *closure)
{
  ProjectHold *hold = data;

  g_free (hold->project);
  g_free (hold);
}

/* The tree goes back to root in a thread (a long walk for a big tree), and
 * only then is the project free for the next holder. */
typedef struct {
  VdManager *manager;
  gchar     *project;
} GiveBack;

static void
given_back_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GiveBack *gb = user_data;
  g_autoptr(GError) error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error))
    g_warning ("project %s: cannot take the tree back: %s", gb->project, error->message);
  if (gb->manager->projects != NULL)
    vd_project_store_release (gb->manager->projects, gb->project);
  g_object_unref (gb->manager);
  g_free (gb->project);
  g_free (gb);
}

static void
give_back_project (VdManager *self, const gchar *name)
{
  VdProject *project = self->projects != NULL ? vd_project_store_lookup (self->projects, name, NULL) : NULL;
  GiveBack *gb;

  if (project == NULL) {
    if (self->projects != NULL)
      vd_project_store_release (self->projects, name);
    return;
  }
  gb = g_new0 (GiveBack, 1);
  gb->manager = g_object_ref (self);
  gb->project = g_strdup (name);
  vd_project_revoke_async (project, given_back_cb, gb);
}

static void
session_ended_release_cb (VdSession *session, gpointer user_data)
{
  ProjectHold *hold = user_data;

  if (hold->manager->projects != NULL)
    give_back_project (hold->manager, hold->project);
  g_signal_handlers_disconnect_by_data (session, hold);
}

/* Once the tree is the session's uid's: gives both back when it ends. */
static void
hold_project (VdManager *self, VdSession *session, const gchar *name)
{
  ProjectHold *hold = g_new0 (ProjectHold, 1);

  hold->manager = self;
  hold->project = g_strdup (name);
  g_signal_connect_data (session, "ended", G_CALLBACK (session_ended_release_cb), hold, project_hold_free, 0);
}

typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
} StartData;

static void
session_started_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree StartData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  VdSession *session = VD_SESSION (source);
  VdManager *self = data->manager;
  GError *error = NULL;

  if (!vd_session_pool_start_finish (self->pool, session, res, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  vivarium_dbus_manager_complete_start_session (self->skeleton, invocation, vd_session_get_object_path (session));
}

/* The project is held for @session: its tree becomes the session's uid's
 * (in a thread), then the session starts and StartSession returns. */
typedef struct {
  VdManager             *manager;
  GDBusMethodInvocation *invocation;
  VdSession             *session;
  gchar                 *project;
} GrantData;

static void
session_granted_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  GrantData *g = user_data;
  GError *error = NULL;

  if (!vd_project_owner_finish (VD_PROJECT (source), res, &error)) {
    vd_session_stop_async (g->session, NULL, NULL);
    give_back_project (g->manager, g->project);
    g_dbus_method_invocation_take_error (g->invocation, error);
  } else {
    StartData *data = g_new0 (StartData, 1);
    hold_project (g->manager, g->session, g->project);
    data->manager = g->manager;
    data->invocation = g_object_ref (g->invocation);
    vd_session_start_async (g->session, NULL, session_started_cb, data);
  }
  g_object_unref (g->invocation);
  g_object_unref (g->session);
  g_free (g->project);
  g_free (g);
}

static void
grant_project (VdManager *self, GDBusMethodInvocation *invocation, VdSession *session, const gchar *name)
{
  GrantData *g = g_new0 (GrantData, 1);

  g->manager = self;
  g->invocation = g_object_ref (invocation);
  g->session = g_object_ref (session);
  g->project = g_strdup (name);
  vd_project_grant_async (vd_project_store_lookup (self->projects, name, NULL), vd_session_get_uid (session),
                          session_granted_cb, g);
}

static VivariumEgressPolicy *
policy_of_session (VdManager *self, const gchar *path, gchar **no_policy, GError **error)
{
  const gchar *slash = strrchr (path, '/');
  VdSession *session = vd_session_pool_lookup_running (self->pool, slash != NULL ? slash + 1 : path, error);
  VdEgress *egress;

  if (session == NULL)
    return NULL;
  egress = vd_session_get_egress (session);
  if (egress == NULL) {
    *no_policy = g_strdup_printf ("the session's egress mode is “%s”, it has no allowlist",
                                  vd_egress_mode_to_string (vd_session_get_options (session)->egress_mode));
    return NULL;
  }
  return vd_egress_get_policy (egress);
}

/* A dry run: what the proxy of a session, or of a new one, would decide. */
static gboolean
handle_check_egress (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *destination,
                     GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  g_autoptr(GVariantDict) dict = g_variant_dict_new (options);
  g_autoptr(VivariumEgressPolicy) built = NULL;
  g_auto(VdEgressOptions) egress = { 0 };
  g_autofree gchar *reason = NULL;
  VivariumEgressPolicy *policy = NULL;
  const gchar *session = NULL;
  gboolean allowed = FALSE;
  GError *error = NULL;

  if (g_variant_dict_lookup (dict, "session", "&o", &session)) {
    policy = policy_of_session (self, session, &reason, &error);
  } else {
    g_variant_dict_insert (dict, "egress", "s", "allowlist");
    if (vd_egress_options_parse (self->config, NULL, dict, VD_EGRESS_FOR_SESSION, &egress, &error))
      policy = built = vd_egress_rules_build (self->config, (const gchar * const *) egress.groups,
                                              (const gchar * const *) egress.allow, &error);
  }
  if (reason != NULL) {
    vivarium_dbus_manager_complete_check_egress (iface, invocation, FALSE, reason);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (policy == NULL || !vd_egress_check (policy, destination, &allowed, &reason, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  vivarium_dbus_manager_complete_check_egress (iface, invocation, allowed, reason);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static gboolean
handle_start_session (VivariumDBusManager *iface, GDBusMethodInvocation *invocation, const gchar *project,
                      const gchar *image_name, GVariant *options, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);
  VdSessionOptions opts = { 0 };
  g_auto(VdEgressOptions) egress = { 0 };
  VdImage *image;
  g_autoptr(VdSession) session = NULL;
  const gchar *project_dir = NULL;
  StartData *data;
  GError *error = NULL;

  if (!parse_session_options (self, project, options, &opts, &egress, &error) || !check_project (self, project, &error) ||
      (image = vd_image_store_lookup_bootable (self->images, image_name, &error)) == NULL ||
      !vd_guard_check_can_start (self->guard, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (vd_task_runner_count_slots_in_use (self->runner) >= vd_config_get_max_sessions (self->config)) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "%u sessions are in use, the configured maximum",
                                           vd_config_get_max_sessions (self->config));
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (project[0] != '\0') {
    VdProject *p = vd_project_store_lookup (self->projects, project, &error);
    project_dir = p != NULL ? vd_project_get_work_path (p) : NULL;
  }
  session = vd_session_pool_create (self->pool, image, &opts, 0, project[0] != '\0' ? project : NULL, project_dir,
                                    &error);
  if (session != NULL && project_dir != NULL) {
    g_autofree gchar *holder = g_strdup_printf ("session %s", vd_session_get_id (session));
    if (!vd_project_store_acquire (self->projects, project, holder, &error)) {
      vd_session_stop_async (session, NULL, NULL);
      g_clear_object (&session);
    } else {
      grant_project (self, invocation, session, project);
      return G_DBUS_METHOD_INVOCATION_HANDLED;
    }
  }
  if (session == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  data = g_new0 (StartData, 1);
  data->manager = self;
  data->invocation = g_object_ref (invocation);
  vd_session_start_async (session, NULL, session_started_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

static void
session_added_cb (VdSessionPool *pool, VdSession *session, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  /* SaveAsImage is the session's, with the stores it needs handed over. */
  vd_session_save_connect (session, self->config, self->images, self->jobs);
  vivarium_dbus_manager_emit_session_added (self->skeleton, vd_session_get_object_path (session));
}

static void
session_removed_cb (VdSessionPool *pool, const gchar *path, gpointer user_data)
{
  VdManager *self = VD_MANAGER (user_data);

  vd_exported_remove (self->exported, path);
  vivarium_dbus_manager_emit_session_removed (self->skeleton, path);
}

/* --- start-up sweep -------------------------------------------------- */

static void
sweep_units (VdManager *self, const gchar *pattern)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) units = vd_systemd_list_units (self->systemd, pattern, &error);

  if (units == NULL) {
    g_info ("cannot list %s units (no systemd?): %s", pattern, error->message);
    return;
  }
  for (guint i = 0; units[i] != NULL; i++) {
    g_autoptr(GError) stop_error = NULL;
    g_warning ("sweep: stopping leftover unit %s", units[i]);
    if (!vd_systemd_stop_unit_sync (self->systemd, units[i], 30000, &stop_error))
      g_warning ("sweep: cannot stop %s: %s", units[i], stop_error->message);
    /* A worker unit that failed stays loaded until reset (vd-worker.c). */
    vd_systemd_reset_failed_unit (self->systemd, units[i]);
  }
}

static void
sweep_dir (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);

  for (guint i = 0; names[i] != NULL; i++) {
    g_autofree gchar *path = g_build_filename (dir, names[i], NULL);
    g_autoptr(GError) error = NULL;
    g_warning ("sweep: removing leftover %s", path);
    if (!vd_fs_rm_rf (path, &error))
      g_warning ("sweep: %s", error->message);
  }
}

/* A daemon that crashed, or was killed, leaves units (already stopped by
 * BindsTo= in the normal case), overlays and sockets behind. Nothing of a
 * previous instance can still be in use, so everything of it goes, except
 * the record of what happened: its Jobs stay (load_jobs() shows them). */
static void
sweep_leftovers (VdManager *self)
{
  g_autofree gchar *state_sessions = vd_config_build_state_path (self->config, "sessions", NULL);
  g_autofree gchar *staging = vd_config_build_state_path (self->config, "images", ".staging", NULL);
  g_autofree gchar *runtime_sessions = g_build_filename (vd_config_get_runtime_dir (self->config), "sessions", NULL);
  g_autofree gchar *runtime_workers = g_build_filename (vd_config_get_runtime_dir (self->config), "workers", NULL);
  g_autofree gchar *runtime_egress = g_build_filename (vd_config_get_runtime_dir (self->config), "egress", NULL);

  sweep_units (self, VIVARIUM_SESSION_UNIT_PREFIX "*.service");
  sweep_units (self, "vivarium-egress-*.service");
  sweep_units (self, "vivarium-build-*.service");
  sweep_units (self, "vivarium-worker-*.service");
  sweep_units (self, VIVARIUM_DNS_RELAY_UNIT);
  sweep_units (self, "vivarium-canary-*.service");
  sweep_units (self, VIVARIUM_GIT_TRANSFER_UNIT_PREFIX "*.service");
  sweep_dir (state_sessions);
  sweep_dir (runtime_sessions);
  sweep_dir (runtime_workers);
  sweep_dir (runtime_egress);
  sweep_dir (staging);
  vd_canary_sweep (vd_config_get_runtime_dir (self->config));
  vd_dns_relay_sweep (vd_config_get_runtime_dir (self->config));
}

/* --- life cycle ------------------------------------------------------ */

/* Where the administrator keeps the bare repositories that file:// URLs
 * may name (vd-project-store.h): root's alone. */
static void
make_remotes_dir (VdManager *self)
{
  g_autofree gchar *dir = vd_config_build_state_path (self->config, "remotes", NULL);

  if (g_mkdir_with_parents (dir, 0700) != 0)
    g_warning ("cannot create %s: %s", dir, g_strerror (errno));
}

VdManager *
vd_manager_new (VdConfig *config, VdAuthority *authority, VdIdle *idle, GDBusConnection *connection)
{
  VdManager *self = g_object_new (VD_TYPE_MANAGER, NULL);

  self->config = g_object_ref (config);
  self->authority = g_object_ref (authority);
  self->idle = g_object_ref (idle);
  self->connection = g_object_ref (connection);
  self->exported = vd_exported_new (authority, connection);
  vd_exported_set_read_grant_sec (self->exported, vd_config_get_read_grant_sec (config));
  self->systemd = vd_systemd_new (connection);
  self->guard = vd_guard_new (config, self->systemd);
  self->dns_relay = vd_dns_relay_new (config, self->systemd);
  self->pool = vd_session_pool_new (config, self->systemd, self->guard, self->dns_relay, idle, connection,
                                    export_func, self);
  self->jobs = vd_job_store_new (config, idle, export_func, self);
  self->images = vd_image_store_new (config, self->systemd, self->pool, self->jobs, export_func, self);
  self->self_test = vd_self_test_store_new (config, self->systemd, self->pool, self->guard, self->images, self->jobs);
  {
    g_autofree gchar *projects = vd_config_build_state_path (config, "projects", NULL);
    g_autofree gchar *keys = vd_config_build_state_path (config, "keys", NULL);
    g_autofree gchar *remotes = vd_config_build_state_path (config, "remotes", NULL);
    g_autofree gchar *reports = vd_config_build_state_path (config, "reports", NULL);
    self->projects = vd_project_store_new (projects, keys, remotes, export_func, self);
    self->git_transfer = vd_git_transfer_new (connection, vd_config_get_state_dir (config),
                                              vd_config_get_runtime_dir (config));
    vd_git_transfer_set_timeout (self->git_transfer, vd_config_get_transfer_timeout_sec (config));
    vd_project_store_set_git_transfer (self->projects, self->git_transfer);
    vd_project_store_set_config (self->projects, self->config);
    self->reports = vd_report_store_new (reports, keys, vd_config_get_max_reports (config), export_func, self);
  }
  /* The authority judges workers by these before it asks polkit. */
  self->grants = vd_worker_grants_new (VIVARIUM_WORKER_UID_BASE, VIVARIUM_SESSION_UID_COUNT);
  vd_authority_set_worker_grants (authority, self->grants);
  self->runner = vd_task_runner_new (config, self->systemd, self->pool, self->guard, self->projects, self->reports,
                                     self->grants, idle, export_func, self);
  {
    g_autofree gchar *secrets = vd_config_build_state_path (config, "secrets", NULL);
    self->secrets = vd_secret_store_new (secrets);
    self->ssh_keys = vd_ssh_key_store_new (secrets);
    vd_task_runner_set_secret_store (self->runner, self->secrets);
    vd_project_store_set_secret_store (self->projects, self->secrets);
  }
  return self;
}

/* The daemon got a new connection after it lost the bus (NULL: it lost it
 * and has none yet). Only the boundary and the systemd client talk over
 * it; the tasks only let go of the calls that came over the old one. */
gboolean
vd_manager_set_connection (VdManager *self, GDBusConnection *connection, GError **error)
{
  g_set_object (&self->connection, connection);
  vd_systemd_set_connection (self->systemd, connection);
  vd_git_transfer_set_connection (self->git_transfer, connection);
  vd_task_runner_set_connection (self->runner, connection);
  return vd_exported_set_connection (self->exported, connection, error);
}

static void
connect_handlers (VdManager *self)
{
  VivariumDBusManager *s = self->skeleton;

  g_signal_connect (s, "handle-list-sessions", G_CALLBACK (handle_list_sessions), self);
  g_signal_connect (s, "handle-list-images", G_CALLBACK (handle_list_images), self);
  g_signal_connect (s, "handle-list-projects", G_CALLBACK (handle_list_projects), self);
  g_signal_connect (s, "handle-create-project", G_CALLBACK (handle_create_project), self);
  g_signal_connect (self->projects, "project-added", G_CALLBACK (project_added_cb), self);
  g_signal_connect (self->projects, "project-removed", G_CALLBACK (project_removed_cb), self);
  g_signal_connect (self->reports, "report-removed", G_CALLBACK (report_removed_cb), self);
  g_signal_connect (self->runner, "task-removed", G_CALLBACK (task_removed_cb), self);
  g_signal_connect (s, "handle-list-reports", G_CALLBACK (handle_list_reports), self);
  g_signal_connect (self->reports, "report-added", G_CALLBACK (report_added_cb), self);
  g_signal_connect (s, "handle-list-tasks", G_CALLBACK (handle_list_tasks), self);
  g_signal_connect (s, "handle-get-capacity", G_CALLBACK (handle_get_capacity), self);
  g_signal_connect (s, "handle-submit-task", G_CALLBACK (handle_submit_task), self);
  g_signal_connect (self->runner, "task-added", G_CALLBACK (task_added_cb), self);
  g_signal_connect (s, "handle-list-recipes", G_CALLBACK (handle_list_recipes), self);
  g_signal_connect (s, "handle-build-image", G_CALLBACK (handle_build_image), self);
  g_signal_connect (s, "handle-import-image", G_CALLBACK (handle_import_image), self);
  g_signal_connect (self->images, "image-added", G_CALLBACK (image_added_cb), self);
  g_signal_connect (self->images, "image-removed", G_CALLBACK (image_removed_cb), self);
  g_signal_connect (s, "handle-start-session", G_CALLBACK (handle_start_session), self);
  g_signal_connect (s, "handle-check-egress", G_CALLBACK (handle_check_egress), self);
  vd_secret_store_connect (self->secrets, s);
  vd_ssh_key_store_connect (self->ssh_keys, s);
  g_signal_connect (self->pool, "session-added", G_CALLBACK (session_added_cb), self);
  g_signal_connect (self->pool, "session-removed", G_CALLBACK (session_removed_cb), self);
}

gboolean
vd_manager_start (VdManager *self, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!vd_systemd_subscribe (self->systemd, &local_error)) {
    g_info ("systemd is not reachable; sessions and builds will fail: %s", local_error->message);
    g_clear_error (&local_error);
  }
  sweep_leftovers (self);
  /* Before the guard: its deny list takes in the host's own addresses,
   * and the relay's end of the veth must be one of them. Without the
   * relay guests only lose DNS, so the daemon carries on. */
  if (!vd_dns_relay_start (self->dns_relay, &local_error)) {
    g_warning ("%s; guests may have no DNS", local_error->message);
    g_clear_error (&local_error);
  }
  vd_guard_start (self->guard);
  /* The gateway checks an endpoint's name against the same list. */
  if (!vd_gateway_write_host_deny (self->config, vd_guard_get_deny_list (self->guard), &local_error)) {
    g_message ("the model gateway will refuse an https endpoint: %s", local_error->message);
    g_clear_error (&local_error);
  }
  vd_self_test_store_load (self->self_test);
  self->skeleton = vivarium_dbus_manager_skeleton_new ();
  vivarium_dbus_manager_set_version (self->skeleton, PACKAGE_VERSION);
  vivarium_dbus_manager_set_state (self->skeleton, "running");
  vivarium_dbus_manager_set_accelerator (self->skeleton, vd_config_use_kvm (self->config) ? "kvm" : "tcg");
  /* Before the stores load: the reports past [Tasks] MaxReports= (lowered
   * since the last start) are exported and pruned by the load itself, and
   * must leave the boundary with their files. */
  connect_handlers (self);
  /* Without its key the daemon could sign nothing: tasks would end with
   * no report. It still serves sessions; SubmitTask refuses. */
  if (!vd_report_store_load (self->reports, &local_error)) {
    g_warning ("no report-signing key, reports are unavailable: %s", local_error->message);
    g_clear_error (&local_error);
  }
  {
    g_autofree gchar *public_key = vd_report_store_get_public_key (self->reports);
    vivarium_dbus_manager_set_public_key (self->skeleton, public_key);
    vivarium_dbus_manager_set_key_fingerprint (self->skeleton, vd_report_store_get_fingerprint (self->reports));
  }
  if (!export_protected (self, G_DBUS_INTERFACE_SKELETON (self->skeleton), VIVARIUM_DBUS_PATH, error) ||
      !export_protected (self, vd_guard_get_skeleton (self->guard), VIVARIUM_DBUS_PATH, error))
    return FALSE;
  vd_image_store_load (self->images);
  vd_job_store_load (self->jobs);
  make_remotes_dir (self);
  vd_project_store_load (self->projects);
  vd_task_runner_recover (self->runner);
  return TRUE;
}

/* SIGTERM or idle exit: sessions are torn down here, synchronously, so
 * that the next instance finds nothing to sweep. */
void
vd_manager_shutdown (VdManager *self)
{
  if (self->skeleton != NULL)
    vivarium_dbus_manager_set_state (self->skeleton, "stopping");
  vd_task_runner_stop_all (self->runner);
  vd_session_pool_stop_all_sync (self->pool);
  vd_project_store_unmount_all (self->projects);
  vd_dns_relay_stop (self->dns_relay);
}
