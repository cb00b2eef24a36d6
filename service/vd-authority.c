/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdAuthority"

#include "config.h"

#include <polkit/polkit.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-authority.h"
#include "vd-log.h"
#include "vd-worker-grants.h"

/* The bouncer: every method of every interface maps to one polkit action,
 * and a method that is not in this table is refused. Adding a verb without
 * deciding who may call it is therefore impossible by construction. */
typedef struct {
  const gchar *interface;
  const gchar *method;
  const gchar *action;
} VdActionMap;

#define I(x) VIVARIUM_DBUS_IFACE_PREFIX "." x
#define A(x) VIVARIUM_POLKIT_PREFIX x

static const VdActionMap action_map[] = {
  { I ("Manager"), "ListSessions",  A ("read-status") },
  { I ("Manager"), "ListImages",    A ("read-status") },
  { I ("Manager"), "ListProjects",  A ("read-status") },
  { I ("Manager"), "ListRecipes",   A ("read-status") },
  { I ("Manager"), "BuildImage",    A ("image-build") },
  { I ("Manager"), "ImportImage",   A ("image-import") },
  { I ("Manager"), "StartSession",  A ("session-start") },
  { I ("Manager"), "CreateProject", A ("project-create") },
  { I ("Manager"), "SubmitTask",    A ("task-submit") },
  { I ("Manager"), "ListTasks",     A ("read-status") },
  { I ("Task"),    "Wait",          A ("read-status") },
  { I ("Task"),    "Answer",        A ("task-submit") },
  { I ("Task"),    "Cancel",        A ("task-submit") },
  /* Task.Ask and Task.Finish are deliberately not here: only the task's
   * worker may call them, and it is admitted by its grants, never by
   * polkit; for everyone else they are unmapped, so refused. */
  { I ("Manager"), "ListReports",   A ("read-reports") },
  { I ("Report"),  "GetJson",       A ("read-reports") },
  { I ("Report"),  "GetText",       A ("read-reports") },
  { I ("Project"), "Log",           A ("read-status") },
  { I ("Project"), "SetRemote",     A ("project-publish") },
  { I ("Project"), "Publish",       A ("project-publish") },
  { I ("Project"), "Delete",        A ("project-delete") },
  { I ("Image"),   "Freeze",        A ("image-freeze") },
  { I ("Image"),   "Verify",        A ("read-status") },
  { I ("Image"),   "Delete",        A ("image-delete") },
  { I ("Session"), "Exec",          A ("session-exec") },
  { I ("Session"), "ReadFile",      A ("session-exec") },
  { I ("Session"), "WriteFile",     A ("session-exec") },
  { I ("Session"), "Screenshot",    A ("session-exec") },
  { I ("Session"), "GetCommandLog", A ("read-reports") },
  { I ("Session"), "Resume",        A ("session-exec") },  /* drives the machine on; runs nothing new */
  { I ("Session"), "Stop",          A ("session-stop") },
  { I ("Job"),     "Cancel",        A ("image-build") },
  { I ("Guard"),   "RunSelfTest",   A ("guard-selftest") },
};

#undef I
#undef A

/* A password prompt may legitimately take minutes; a non-interactive check
 * that takes this long means polkit is stuck, and stuck means no. */
#define CHECK_TIMEOUT_SEC             25
#define CHECK_TIMEOUT_INTERACTIVE_SEC 300

struct _VdAuthority {
  GObject         parent_instance;
  gint            call_count;   /* atomic: read by the idle logic */
  VdWorkerGrants *grants;       /* task workers: judged before polkit */
};

G_DEFINE_TYPE (VdAuthority, vd_authority, G_TYPE_OBJECT)

static void
vd_authority_finalize (GObject *object)
{
  g_clear_object (&VD_AUTHORITY (object)->grants);
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
}

VdAuthority *
vd_authority_new (void)
{
  return g_object_new (VD_TYPE_AUTHORITY, NULL);
}

const gchar *
vd_authority_action_for (const gchar *interface_name, const gchar *method_name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (action_map); i++) {
    if (g_strcmp0 (action_map[i].interface, interface_name) == 0 &&
        g_strcmp0 (action_map[i].method, method_name) == 0)
      return action_map[i].action;
  }
  return NULL;
}

void
vd_authority_set_worker_grants (VdAuthority *self, VdWorkerGrants *grants)
{
  g_set_object (&self->grants, grants);
}

guint
vd_authority_get_call_count (VdAuthority *self)
{
  return (guint) g_atomic_int_get (&self->call_count);
}

typedef struct {
  GMainContext              *context;
  PolkitAuthorizationResult *result;
  GError                    *error;
  gboolean                   done;
} CheckData;

static void
check_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  CheckData *data = user_data;

  data->result = polkit_authority_check_authorization_finish (POLKIT_AUTHORITY (source), res, &data->error);
  data->done = TRUE;
  g_main_context_wakeup (data->context);
}

static gboolean
cancel_on_timeout_cb (gpointer user_data)
{
  g_cancellable_cancel (G_CANCELLABLE (user_data));
  return G_SOURCE_REMOVE;
}

static PolkitDetails *
details_for (GDBusMethodInvocation *invocation)
{
  PolkitDetails *details = polkit_details_new ();

  polkit_details_insert (details, "vivarium.method", g_dbus_method_invocation_get_method_name (invocation));
  polkit_details_insert (details, "vivarium.object", g_dbus_method_invocation_get_object_path (invocation));
  return details;
}

/* Runs in the worker thread GDBus uses for g-authorize-method, on a private
 * main context, so the daemon's own loop keeps serving while polkit (and
 * maybe a person typing a password) decides. */
static PolkitAuthorizationResult *
check_with_polkit (GDBusMethodInvocation *invocation, const gchar *action, GError **error)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(PolkitAuthority) authority = NULL;
  g_autoptr(PolkitSubject) subject = NULL;
  g_autoptr(PolkitDetails) details = details_for (invocation);
  g_autoptr(GSource) timeout = NULL;
  GDBusMessage *message = g_dbus_method_invocation_get_message (invocation);
  gboolean interactive = (g_dbus_message_get_flags (message) &
                          G_DBUS_MESSAGE_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION) != 0;
  CheckData data = { context, NULL, NULL, FALSE };

  g_main_context_push_thread_default (context);
  authority = polkit_authority_get_sync (cancellable, error);
  if (authority == NULL) {
    g_main_context_pop_thread_default (context);
    return NULL;
  }
  subject = polkit_system_bus_name_new (g_dbus_method_invocation_get_sender (invocation));
  timeout = g_timeout_source_new_seconds (interactive ? CHECK_TIMEOUT_INTERACTIVE_SEC : CHECK_TIMEOUT_SEC);
  g_source_set_callback (timeout, cancel_on_timeout_cb, cancellable, NULL);
  g_source_attach (timeout, context);
  polkit_authority_check_authorization (authority, subject, action, details,
                                        interactive ? POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION
                                                    : POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE,
                                        cancellable, check_done_cb, &data);
  while (!data.done)
    g_main_context_iteration (context, TRUE);
  g_source_destroy (timeout);
  g_main_context_pop_thread_default (context);
  if (data.error != NULL)
    g_propagate_error (error, data.error);
  return data.result;
}

static guint32
caller_uid (GDBusMethodInvocation *invocation)
{
  GDBusConnection *connection = g_dbus_method_invocation_get_connection (invocation);
  g_autoptr(GVariant) reply = NULL;
  guint32 uid = G_MAXUINT32;

  reply = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetConnectionUnixUser",
                                       g_variant_new ("(s)", g_dbus_method_invocation_get_sender (invocation)),
                                       G_VARIANT_TYPE ("(u)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, NULL);
  if (reply != NULL)
    g_variant_get (reply, "(u)", &uid);
  return uid;
}

static gboolean
refuse (GDBusMethodInvocation *invocation, const gchar *action, const gchar *why)
{
  g_autofree gchar *uid = g_strdup_printf ("%u", caller_uid (invocation));

  vd_log_action (G_LOG_LEVEL_INFO, action != NULL ? action : "unmapped", uid,
                 "refused %s.%s for uid %s: %s",
                 g_dbus_method_invocation_get_interface_name (invocation),
                 g_dbus_method_invocation_get_method_name (invocation), uid, why);
  g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                                         "Not authorized to %s: %s",
                                         g_dbus_method_invocation_get_method_name (invocation), why);
  return FALSE;
}

static gboolean
authorize_method_cb (GDBusInterfaceSkeleton *skeleton,
                     GDBusMethodInvocation  *invocation,
                     gpointer                user_data)
{
  VdAuthority *self = VD_AUTHORITY (user_data);
  const gchar *action;
  g_autoptr(GError) error = NULL;
  g_autoptr(PolkitAuthorizationResult) result = NULL;

  g_atomic_int_inc (&self->call_count);
  /* A task's worker gets exactly its grants, and polkit never hears of it:
   * whatever rules an administrator wrote do not widen a worker's reach. */
  if (self->grants != NULL) {
    guint32 uid = caller_uid (invocation);
    if (uid == G_MAXUINT32)
      return refuse (invocation, NULL, "the caller's uid is unknown");
    if (vd_worker_grants_is_worker (self->grants, uid)) {
      if (vd_worker_grants_allows (self->grants, uid, g_dbus_method_invocation_get_interface_name (invocation),
                                   g_dbus_method_invocation_get_method_name (invocation),
                                   g_dbus_method_invocation_get_object_path (invocation)))
        return TRUE;
      return refuse (invocation, NULL, "a task's worker may only act through its own task");
    }
  }
  action = vd_authority_action_for (g_dbus_method_invocation_get_interface_name (invocation),
                                    g_dbus_method_invocation_get_method_name (invocation));
  if (action == NULL)
    return refuse (invocation, NULL, "this method is not mapped to a polkit action");

  result = check_with_polkit (invocation, action, &error);
  if (result == NULL) {
    g_warning ("polkit check for %s failed, refusing: %s", action, error->message);
    return refuse (invocation, action, "the authorization check failed");
  }
  if (polkit_authorization_result_get_is_challenge (result))
    return refuse (invocation, action, "authentication is required (call with interactive authorization allowed)");
  if (!polkit_authorization_result_get_is_authorized (result))
    return refuse (invocation, action, "the system policy does not allow it");
  return TRUE;
}

/* Must be called before the skeleton is exported. */
void
vd_authority_protect (VdAuthority *self, GDBusInterfaceSkeleton *skeleton)
{
  g_signal_connect_object (skeleton, "g-authorize-method", G_CALLBACK (authorize_method_cb), self, 0);
}
