/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdAuthority"

#include "config.h"

#include <stdlib.h>
#include <systemd/sd-login.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-authority.h"
#include "vd-check-queue.h"

/* The bouncer: every method of every interface maps to one polkit action,
 * reading an interface (its properties, its signals, its place in the
 * object tree) maps to another, and whatever is not in this table is
 * refused. VdExported consults it for everything that reaches the bus, so
 * adding a verb without deciding who may call it is impossible by
 * construction. tests/unit/test-contract.c checks the table against the
 * XML and the polkit policy. */

#define I(x) VIVARIUM_DBUS_IFACE_PREFIX "." x
#define A(x) VIVARIUM_POLKIT_PREFIX x
#define M(iface, method, action) { I (iface), method, action, VD_ACTION_ROW_METHOD }
#define R(iface, action)         { I (iface), VD_AUTHORITY_READ, action, VD_ACTION_ROW_READ }
#define S(iface, signal, action) { I (iface), signal, action, VD_ACTION_ROW_SIGNAL }

static const VdActionRow action_map[] = {
  R ("Manager", A ("read-status")),
  M ("Manager", "ListSessions",    A ("read-status")),
  M ("Manager", "ListImages",      A ("read-status")),
  M ("Manager", "ListProjects",    A ("read-status")),
  M ("Manager", "ListRecipes",     A ("read-status")),
  M ("Manager", "GetCapacity",     A ("read-status")),
  M ("Manager", "BuildImage",      A ("image-build")),
  M ("Manager", "ImportImage",     A ("image-import")),
  M ("Manager", "StartSession",    A ("session-start")),
  M ("Manager", "CreateProject",   A ("project-create")),
  M ("Manager", "SubmitTask",      A ("task-submit")),
  M ("Manager", "ListTasks",       A ("read-status")),
  M ("Manager", "ListReports",     A ("read-reports")),
  /* A list's signals follow its List method: who may not list the
   * reports hears of none coming or going; the tasks' are ListTasks's. */
  S ("Manager", "TaskAdded",       A ("read-status")),
  S ("Manager", "TaskRemoved",     A ("read-status")),
  S ("Manager", "ReportAdded",     A ("read-reports")),
  S ("Manager", "ReportRemoved",   A ("read-reports")),
  M ("Manager", "CheckEgress",     A ("read-status")),
  /* Which hosts hold tokens is an administrator's business too. */
  M ("Manager", "AddSecret",       A ("secret-manage")),
  M ("Manager", "ListSecrets",     A ("secret-manage")),
  M ("Manager", "RemoveSecret",    A ("secret-manage")),
  M ("Manager", "AddSshKey",       A ("secret-manage")),
  M ("Manager", "ListSshKeys",     A ("secret-manage")),
  M ("Manager", "RemoveSshKey",    A ("secret-manage")),
  R ("Image",   A ("read-status")),
  M ("Image",   "Freeze",          A ("image-freeze")),
  M ("Image",   "Verify",          A ("read-status")),
  M ("Image",   "Delete",          A ("image-delete")),
  R ("Session", A ("read-status")),
  M ("Session", "Exec",            A ("session-exec")),
  M ("Session", "ReadFile",        A ("session-exec")),
  M ("Session", "WriteFile",       A ("session-exec")),
  M ("Session", "Screenshot",      A ("session-exec")),
  M ("Session", "GetCommandLog",   A ("read-reports")),
  /* Where the guest went is as telling as what it ran. */
  M ("Session", "GetEgressLog",    A ("read-reports")),
  M ("Session", "Resume",          A ("session-exec")),  /* drives the machine on; runs nothing new */
  M ("Session", "Pause",           A ("session-exec")),  /* holds the machine still; runs nothing new */
  M ("Session", "SaveAsImage",     A ("session-save")),
  M ("Session", "Stop",            A ("session-stop")),
  /* A command log entry: whoever may not read the log may not hear it. */
  S ("Session", "CommandFinished", A ("read-reports")),
  R ("Job",     A ("read-status")),
  M ("Job",     "Cancel",          A ("image-build")),
  R ("Project", A ("read-status")),
  M ("Project", "Log",             A ("read-status")),
  M ("Project", "SetRemote",       A ("project-publish")),
  M ("Project", "Publish",         A ("project-publish")),
  M ("Project", "SetEgress",       A ("project-egress")),
  M ("Project", "SetSecrets",      A ("secret-manage")),
  M ("Project", "SetSshKeys",      A ("secret-manage")),
  M ("Project", "Delete",          A ("project-delete")),
  R ("Task",    A ("read-status")),
  M ("Task",    "Wait",            A ("read-status")),
  M ("Task",    "Answer",          A ("task-submit")),
  M ("Task",    "Cancel",          A ("task-submit")),
  /* The worker's own verbs: its uid is admitted by the daemon, never by
   * polkit; task-work allows nobody. */
  M ("Task",    "Ask",             VD_AUTHORITY_WORKER_ONLY),
  M ("Task",    "Finish",          VD_AUTHORITY_WORKER_ONLY),
  M ("Task",    "Record",          VD_AUTHORITY_WORKER_ONLY),
  /* The agent's transcript holds guest output, like the command log. */
  M ("Task",    "GetTranscript",   A ("read-reports")),
  M ("Task",    "GetEgressLog",    A ("read-reports")),
  R ("Report",  A ("read-reports")),
  M ("Report",  "GetJson",         A ("read-reports")),
  M ("Report",  "GetText",         A ("read-reports")),
  R ("Guard",   A ("read-status")),
  M ("Guard",   "RunSelfTest",     A ("guard-selftest")),
};

#undef I
#undef A
#undef M
#undef R
#undef S

struct _VdAuthority {
  GObject          parent_instance;
  PolkitAuthority *polkit;       /* kept: its proxy follows polkitd's restarts */
  GDBusConnection *shared_bus;   /* GDBus's system bus singleton, libpolkit's */
  guint            generation;   /* bumped when the bus was lost */
  VdWorkerGrants  *grants;       /* task workers: judged before polkit, never by it */
  VdCheckQueue    *queue;        /* checks waiting for a turn (vd-check-queue.h) */
  guint            in_flight;    /* checks polkit has not answered yet */
  GHashTable      *refusals;     /* refusal key → monotonic expiry (gint64 *) */
};

G_DEFINE_TYPE (VdAuthority, vd_authority, G_TYPE_OBJECT)

static void
vd_authority_finalize (GObject *object)
{
  g_clear_object (&VD_AUTHORITY (object)->polkit);
  g_clear_object (&VD_AUTHORITY (object)->shared_bus);
  g_clear_object (&VD_AUTHORITY (object)->grants);
  g_clear_pointer (&VD_AUTHORITY (object)->queue, vd_check_queue_free);
  g_clear_pointer (&VD_AUTHORITY (object)->refusals, g_hash_table_unref);
  G_OBJECT_CLASS (vd_authority_parent_class)->finalize (object);
}

static void
vd_authority_class_init (VdAuthorityClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_authority_finalize;
}

static void
vd_authority_init (VdAuthority *self)
{
  self->queue = vd_check_queue_new ();
  self->refusals = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}

VdAuthority *
vd_authority_new (void)
{
  return g_object_new (VD_TYPE_AUTHORITY, NULL);
}

const VdActionRow *
vd_authority_get_action_map (gsize *n_rows)
{
  *n_rows = G_N_ELEMENTS (action_map);
  return action_map;
}

static const gchar *
lookup (const gchar *interface_name, const gchar *member, VdActionRowKind kind)
{
  for (gsize i = 0; i < G_N_ELEMENTS (action_map); i++) {
    if (action_map[i].kind == kind && g_strcmp0 (action_map[i].interface, interface_name) == 0 &&
        g_strcmp0 (action_map[i].member, member) == 0)
      return action_map[i].action;
  }
  return NULL;
}

void
vd_authority_set_worker_grants (VdAuthority *self, VdWorkerGrants *grants)
{
  g_set_object (&self->grants, grants);
}

gboolean
vd_authority_has_workers (VdAuthority *self)
{
  return self->grants != NULL;
}

/* A task's worker gets exactly its grants, and polkit never hears of it:
 * whatever rules an administrator wrote do not widen a worker's reach.
 * Returns TRUE when @uid is a worker's (and sets @allowed); FALSE when the
 * call is for polkit to decide. @pid, the caller's process as the bus
 * knows it, is resolved to its unit only for a worker's uid: a grant holds
 * for its own unit's processes alone. */
gboolean
vd_authority_judge_worker (VdAuthority *self, guint32 uid, guint32 pid, const gchar *interface_name,
                           const gchar *method, const gchar *object_path, gboolean *allowed)
{
  g_autofree gchar *unit = NULL;

  if (self->grants == NULL || !vd_worker_grants_is_worker (self->grants, uid))
    return FALSE;
  if (pid != 0 && sd_pid_get_unit ((pid_t) pid, &unit) < 0)
    g_clear_pointer (&unit, free);
  *allowed = vd_worker_grants_allows (self->grants, uid, unit, interface_name, method, object_path);
  return TRUE;
}

const gchar *
vd_authority_action_for (const gchar *interface_name, const gchar *method_name)
{
  return lookup (interface_name, method_name, VD_ACTION_ROW_METHOD);
}

const gchar *
vd_authority_read_action_for (const gchar *interface_name)
{
  return lookup (interface_name, VD_AUTHORITY_READ, VD_ACTION_ROW_READ);
}

const gchar *
vd_authority_signal_action_for (const gchar *interface_name, const gchar *signal_name)
{
  const gchar *action = lookup (interface_name, signal_name, VD_ACTION_ROW_SIGNAL);

  return action != NULL ? action : vd_authority_read_action_for (interface_name);
}

/* --- one check ------------------------------------------------------- */

/* polkit's own calls have no bound we control (a stopped polkitd kept a
 * caller waiting 50 s: 25 s to create the proxy, 25 s for the check), so the
 * check runs under a timer of ours that answers "no" by itself; whatever
 * polkit says after that is ignored. */
typedef struct {
  gchar         *sender;
  gchar         *action;
  PolkitDetails *details;
  gboolean       interactive;
  GCancellable  *cancellable;
  guint          timeout_id;
  guint          generation;
  gboolean       done;
  gboolean       dispatched;   /* counted in in_flight until polkit answers */
  gchar         *refusal_key;  /* the caller, the action and its details */
} Check;

static void
check_free (Check *check)
{
  g_clear_handle_id (&check->timeout_id, g_source_remove);
  g_free (check->sender);
  g_free (check->action);
  g_free (check->refusal_key);
  g_clear_object (&check->details);
  g_clear_object (&check->cancellable);
  g_free (check);
}

/* The one way a check ends without a grant; a second end is ignored. */
static void
check_fail (GTask *task, gint code, const gchar *why)
{
  Check *check = g_task_get_task_data (task);

  if (check->done)
    return;
  check->done = TRUE;
  g_clear_handle_id (&check->timeout_id, g_source_remove);
  g_cancellable_cancel (check->cancellable);
  g_task_return_new_error (task, VIVARIUM_ERROR, code, "%s", why);
}

static void
check_refuse (GTask *task, const gchar *why)
{
  check_fail (task, VIVARIUM_ERROR_NOT_AUTHORIZED, why);
}

static void
check_allow (GTask *task)
{
  Check *check = g_task_get_task_data (task);

  if (check->done)
    return;
  check->done = TRUE;
  g_clear_handle_id (&check->timeout_id, g_source_remove);
  g_task_return_boolean (task, TRUE);
}

static gboolean
check_timeout_cb (gpointer user_data)
{
  GTask *task = G_TASK (user_data);
  Check *check = g_task_get_task_data (task);
  g_autofree gchar *why = g_strdup_printf ("the authorization service (polkit) did not answer within %u seconds",
                                           check->interactive ? VD_AUTHORITY_CHECK_TIMEOUT_INTERACTIVE_SEC
                                                              : VD_AUTHORITY_CHECK_TIMEOUT_SEC);

  g_warning ("polkit check of %s for %s timed out; refusing", check->action, check->sender);
  check->timeout_id = 0;
  check_refuse (task, why);
  return G_SOURCE_REMOVE;
}

/* --- refusals remembered ------------------------------------------------ */

/* A caller polkit just refused is refused again without asking, for the
 * same action with the same details, for VD_AUTHORITY_REFUSAL_TTL_SEC: a
 * flood of refused calls then costs polkit one check, not ten thousand, and
 * the others' checks are not queued behind it. Only refusals are kept
 * (remembering a grant would outlive its revocation), only of
 * non-interactive checks (an interactive one may yet authenticate), and
 * only while the bus lasts (a new bus hands the unique names out again). */
#define VD_AUTHORITY_REFUSAL_TTL_SEC 5
#define VD_AUTHORITY_REFUSALS_MAX    1024

static gint
compare_keys (gconstpointer a, gconstpointer b, gpointer user_data)
{
  return g_strcmp0 (*(const gchar * const *) a, *(const gchar * const *) b);
}

static gchar *
refusal_key_for (const gchar *sender, const gchar *action, PolkitDetails *details)
{
  g_autoptr(GString) key = g_string_new (NULL);
  g_auto(GStrv) keys = polkit_details_get_keys (details);
  guint n = keys != NULL ? g_strv_length (keys) : 0;

  g_string_append_printf (key, "%s\n%s", sender, action);
  if (n > 0)
    g_qsort_with_data (keys, n, sizeof (gchar *), compare_keys, NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (key, "\n%s=%s", keys[i], polkit_details_lookup (details, keys[i]));
  return g_string_free (g_steal_pointer (&key), FALSE);
}

static gboolean
refused_recently (VdAuthority *self, const gchar *key)
{
  gint64 *until = g_hash_table_lookup (self->refusals, key);

  if (until == NULL)
    return FALSE;
  if (*until > g_get_monotonic_time ())
    return TRUE;
  g_hash_table_remove (self->refusals, key);
  return FALSE;
}

static void
remember_refusal (VdAuthority *self, const gchar *key)
{
  gint64 *until = g_new (gint64, 1);

  *until = g_get_monotonic_time () + VD_AUTHORITY_REFUSAL_TTL_SEC * G_USEC_PER_SEC;
  if (g_hash_table_size (self->refusals) >= VD_AUTHORITY_REFUSALS_MAX)
    g_hash_table_remove_all (self->refusals);
  g_hash_table_insert (self->refusals, g_strdup (key), until);
}

/* --- turns: at most VD_CHECK_QUEUE_IN_FLIGHT checks at polkit ----------- */

static void authority_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data);
static void start_check (GTask *task, PolkitAuthority *authority);
static void hold_shared_bus (VdAuthority *self);

static void
dispatch (VdAuthority *self, GTask *task)
{
  Check *check = g_task_get_task_data (task);

  check->dispatched = TRUE;
  self->in_flight++;
  hold_shared_bus (self);
  if (self->polkit != NULL)
    start_check (task, self->polkit);
  else
    polkit_authority_get_async (check->cancellable, authority_ready_cb, g_object_ref (task));
}

/* A turn ends when polkit answers (or its call fails), never at our own
 * timeout: the call still waits at the bus until then. The next waiting
 * checks go; one that timed out while it waited is skipped. */
static void
check_returned (VdAuthority *self, Check *check)
{
  GTask *next;

  if (check->dispatched) {
    check->dispatched = FALSE;
    self->in_flight--;
  }
  while (self->in_flight < VD_CHECK_QUEUE_IN_FLIGHT && (next = vd_check_queue_pop (self->queue)) != NULL) {
    if (!((Check *) g_task_get_task_data (next))->done)
      dispatch (self, next);
    g_object_unref (next);
  }
}

static void
check_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAuthority *self = g_task_get_source_object (task);
  Check *check = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(PolkitAuthorizationResult) result = NULL;

  result = polkit_authority_check_authorization_finish (POLKIT_AUTHORITY (source), res, &error);
  check_returned (self, check);
  if (check->done)
    return;
  if (result == NULL) {
    g_warning ("polkit check of %s failed, refusing: %s", check->action, error->message);
    check_refuse (task, "the authorization check failed");
    return;
  }
  if (polkit_authorization_result_get_is_authorized (result)) {
    check_allow (task);
    return;
  }
  if (!check->interactive)
    remember_refusal (self, check->refusal_key);
  if (polkit_authorization_result_get_is_challenge (result))
    check_refuse (task, "authentication is required (call with interactive authorization allowed)");
  else
    check_refuse (task, "the system policy does not allow it");
}

static void
start_check (GTask *task, PolkitAuthority *authority)
{
  Check *check = g_task_get_task_data (task);
  g_autoptr(PolkitSubject) subject = NULL;

  subject = polkit_system_bus_name_new (check->sender);
  polkit_authority_check_authorization (authority, subject, check->action, check->details,
                                        check->interactive ? POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION
                                                           : POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE,
                                        check->cancellable, check_done_cb, g_object_ref (task));
}

static void
authority_ready_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = G_TASK (user_data);
  VdAuthority *self = g_task_get_source_object (task);
  Check *check = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(PolkitAuthority) authority = polkit_authority_get_finish (res, &error);

  if (check->done || authority == NULL) {
    if (!check->done)
      g_warning ("cannot reach polkit, refusing %s: %s", check->action, error->message);
    check_refuse (task, "the authorization service (polkit) is not available");
    check_returned (self, check);
    return;
  }
  if (self->polkit == NULL && check->generation == self->generation)
    self->polkit = g_object_ref (authority);
  start_check (task, authority);
}

/* libpolkit talks over GDBus's shared system bus connection (the daemon's
 * own is private: vd-daemon.c), and GDBus raises SIGTERM when that one
 * closes unless told not to: a restart of dbus-daemon would stop us. So the
 * singleton is held here, told, for as long as polkit's client uses it. */
static void
hold_shared_bus (VdAuthority *self)
{
  g_autoptr(GError) error = NULL;

  if (self->shared_bus != NULL && !g_dbus_connection_is_closed (self->shared_bus))
    return;
  if (self->shared_bus != NULL)
    vd_authority_forget_bus (self);
  self->shared_bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  if (self->shared_bus == NULL) {
    g_info ("cannot reach the system bus for polkit: %s", error->message);
    return;
  }
  g_dbus_connection_set_exit_on_close (self->shared_bus, FALSE);
  /* GDBus hands out the closed one while a check under way still holds
   * it: not kept, so that a later check gets the new one. */
  if (g_dbus_connection_is_closed (self->shared_bus))
    g_clear_object (&self->shared_bus);
}

/* Subject is the caller's system bus name, never a PID; any failure along
 * the way is a refusal. Runs on the caller's main context, so a password
 * prompt never blocks anyone else. */
void
vd_authority_check_async (VdAuthority *self, const gchar *sender, const gchar *action, PolkitDetails *details,
                          gboolean interactive, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, callback, user_data);
  Check *check;

  /* polkit allows root everything; a worker's own verbs are for the worker
   * alone, which VdExported admits by its grants before asking here. */
  if (g_strcmp0 (action, VD_AUTHORITY_WORKER_ONLY) == 0) {
    g_task_return_new_error (task, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                             "only the task's own worker may do this");
    return;
  }
  check = g_new0 (Check, 1);
  check->sender = g_strdup (sender);
  check->action = g_strdup (action);
  check->details = details != NULL ? g_object_ref (details) : polkit_details_new ();
  check->interactive = interactive;
  check->cancellable = g_cancellable_new ();
  check->generation = self->generation;
  check->refusal_key = refusal_key_for (sender, action, check->details);
  g_task_set_task_data (task, check, (GDestroyNotify) check_free);
  check->timeout_id = g_timeout_add_seconds_full (G_PRIORITY_DEFAULT,
                                                  interactive ? VD_AUTHORITY_CHECK_TIMEOUT_INTERACTIVE_SEC
                                                              : VD_AUTHORITY_CHECK_TIMEOUT_SEC,
                                                  check_timeout_cb, g_object_ref (task), g_object_unref);
  if (!interactive && refused_recently (self, check->refusal_key)) {
    check_refuse (task, "the system policy does not allow it");
    return;
  }
  if (self->in_flight < VD_CHECK_QUEUE_IN_FLIGHT)
    dispatch (self, task);
  else if (!vd_check_queue_push (self->queue, sender, task))
    check_fail (task, VIVARIUM_ERROR_BUSY, "too many of this caller's calls are waiting for authorization; "
                                           "try again when some have been answered");
}

gboolean
vd_authority_check_finish (VdAuthority *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* The daemon lost the bus: polkit's client talks over the system bus
 * connection that is gone, so it is dropped, and the next check gets a
 * client on the new one. libpolkit keeps one client per process and
 * GDBus one system bus connection, each alive while anyone holds it: a
 * client fetched by a check already under way is not kept. */
void
vd_authority_forget_bus (VdAuthority *self)
{
  self->generation++;
  g_hash_table_remove_all (self->refusals);
  g_clear_object (&self->polkit);
  g_clear_object (&self->shared_bus);
}
