/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include <string.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-state.h"
#include "vivarium-mcp-identity.h"
#include "vivarium-mcp-tools.h"

/* SubmitTask boots the work session before it answers. */
#define SUBMIT_TIMEOUT_MSEC (10 * 60 * 1000)
#define CALL_TIMEOUT_MSEC   (60 * 1000)

struct _VmcpTools {
  VmcpSchema   *schema;
  VmcpManifest *manifest;
  VmcpDaemon   *daemon;
};

VmcpTools *
vmcp_tools_new (VmcpSchema *schema, VmcpManifest *manifest, VmcpDaemon *daemon)
{
  VmcpTools *self = g_new0 (VmcpTools, 1);

  self->schema = schema;
  self->manifest = manifest;
  self->daemon = daemon;
  return self;
}

void
vmcp_tools_free (VmcpTools *self)
{
  g_free (self);
}

static const gchar * const worker_verify_optional[] = { "verify", NULL };

/* What this client may leave out of @tool's arguments. */
static const gchar * const *
optional_for (VmcpTools *self, const gchar *tool)
{
  if (g_str_equal (tool, "vm_task") && vmcp_manifest_allows_worker_verify (self->manifest))
    return worker_verify_optional;
  return NULL;
}

/* The tool as this client sees it: what it may leave out is not required. */
static JsonNode *
definition_for (VmcpTools *self, const gchar *tool)
{
  JsonNode *def = vmcp_schema_tool_definition (self->schema, tool);
  const gchar * const *optional = optional_for (self, tool);
  JsonObject *input;
  JsonArray *required, *kept;

  if (def == NULL || optional == NULL)
    return def;
  input = json_object_get_object_member (json_node_get_object (def), "inputSchema");
  required = json_object_get_array_member (input, "required");
  kept = json_array_new ();
  for (guint i = 0; i < json_array_get_length (required); i++) {
    const gchar *member = json_array_get_string_element (required, i);
    if (!g_strv_contains (optional, member))
      json_array_add_string_element (kept, member);
  }
  json_object_set_array_member (input, "required", kept);
  return def;
}

JsonNode *
vmcp_tools_list (VmcpTools *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  const gchar * const *names = vmcp_schema_tool_names (self->schema);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "tools");
  json_builder_begin_array (b);
  for (guint i = 0; names[i] != NULL; i++) {
    if (vmcp_manifest_allows_tool (self->manifest, names[i]))
      json_builder_add_value (b, definition_for (self, names[i]));
  }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* --- results -------------------------------------------------------------- */

/* {content: [text], structuredContent, isError}: the text for a reader,
 * the same facts as fields for a program. */
static JsonNode *
tool_result (JsonObject *structured, const gchar *text, gboolean is_error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_take_object (node, structured);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "content");
  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "type");
  json_builder_add_string_value (b, "text");
  json_builder_set_member_name (b, "text");
  json_builder_add_string_value (b, text);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "structuredContent");
  json_builder_add_value (b, node);
  json_builder_set_member_name (b, "isError");
  json_builder_add_boolean_value (b, is_error);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static JsonNode *
error_result (VmcpIdentity *identity, const GError *error)
{
  JsonObject *structured = json_object_new ();
  JsonObject *err = json_object_new ();
  g_autofree gchar *name = vmcp_error_name (error);
  g_autofree gchar *message = vmcp_error_message (error);
  g_autofree gchar *text = NULL;

  json_object_set_string_member (err, "name", name);
  json_object_set_string_member (err, "message", message);
  json_object_set_member (structured, "identity", vmcp_identity_to_json (identity));
  json_object_set_object_member (structured, "error", err);
  text = g_strdup_printf ("Refused or failed: %s\n%s", name, message);
  return tool_result (structured, text, TRUE);
}

static JsonNode *
success_result (VmcpIdentity *identity, JsonObject *structured, const gchar *text)
{
  json_object_set_member (structured, "identity", vmcp_identity_to_json (identity));
  return tool_result (structured, text, FALSE);
}

/* --- listings ------------------------------------------------------------- */

/* One of the Manager's List* calls, e.g. vivarium_dbus_manager_call_list_tasks_sync. */
typedef gboolean (*ListCall) (VivariumDBusManager *manager, GDBusCallFlags call_flags, gint timeout_msec,
                              gchar ***out_paths, GCancellable *cancellable, GError **error);

static gchar **
list_paths (VmcpTools *self, ListCall list, GError **error)
{
  g_autoptr(VivariumDBusManager) manager = vmcp_daemon_manager (self->daemon, error);
  gchar **paths = NULL;

  if (manager == NULL || !list (manager, VMCP_CALL_FLAGS, CALL_TIMEOUT_MSEC, &paths, NULL, error))
    return NULL;
  return paths;
}

static gboolean
get_props (VmcpTools *self, const gchar *path, const gchar *iface, const gchar * const *names,
           const gchar *types, GVariant **out, GError **error)
{
  for (guint i = 0; names[i] != NULL; i++) {
    gchar type[2] = { types[i], '\0' };
    out[i] = vmcp_daemon_get (self->daemon, path, iface, names[i], G_VARIANT_TYPE (type), error);
    if (out[i] == NULL)
      return FALSE;
  }
  return TRUE;
}

static JsonObject *
image_row (GVariant **v)
{
  JsonObject *row = json_object_new ();

  json_object_set_string_member (row, "name", g_variant_get_string (v[0], NULL));
  json_object_set_boolean_member (row, "frozen", g_variant_get_boolean (v[1]));
  json_object_set_string_member (row, "digest", g_variant_get_string (v[2], NULL));
  json_object_set_int_member (row, "size", (gint64) MIN (g_variant_get_uint64 (v[3]), G_MAXINT64));
  return row;
}

static JsonObject *
project_row (GVariant **v)
{
  JsonObject *row = json_object_new ();

  json_object_set_string_member (row, "name", g_variant_get_string (v[0], NULL));
  json_object_set_string_member (row, "head", g_variant_get_string (v[1], NULL));
  json_object_set_int_member (row, "quota_bytes", (gint64) MIN (g_variant_get_uint64 (v[2]), G_MAXINT64));
  json_object_set_int_member (row, "used_bytes", (gint64) MIN (g_variant_get_uint64 (v[3]), G_MAXINT64));
  return row;
}

typedef struct {
  ListCall              list;
  const gchar          *iface;
  const gchar * const  *props;
  const gchar          *types;
  const gchar          *member;
  JsonObject         *(*row) (GVariant **v);
  gboolean            (*allowed) (VmcpManifest *m, const gchar *name);
} Listing;

static const gchar * const image_props[] = { "Name", "Frozen", "Digest", "Size", NULL };
static const gchar * const project_props[] = { "Name", "Head", "QuotaBytes", "UsedBytes", NULL };
static const Listing images_listing = {
  vivarium_dbus_manager_call_list_images_sync, "Image", image_props, "sbst", "images", image_row, vmcp_manifest_allows_image,
};
static const Listing projects_listing = {
  vivarium_dbus_manager_call_list_projects_sync, "Project", project_props, "sstt", "projects", project_row,
  vmcp_manifest_allows_project,
};

static JsonNode *
run_listing (VmcpTools *self, const Listing *listing, VmcpIdentity *identity)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) paths = list_paths (self, listing->list, &error);
  g_autoptr(GString) text = g_string_new (NULL);
  JsonArray *rows;
  JsonObject *structured;

  if (paths == NULL)
    return error_result (identity, error);
  rows = json_array_new ();
  for (guint i = 0; paths[i] != NULL; i++) {
    GVariant *v[5] = { NULL };
    if (!get_props (self, paths[i], listing->iface, listing->props, listing->types, v, &error)) {
      for (guint j = 0; j < 5; j++)
        g_clear_pointer (&v[j], g_variant_unref);
      json_array_unref (rows);
      return error_result (identity, error);
    }
    if (listing->allowed (self->manifest, g_variant_get_string (v[0], NULL))) {
      JsonObject *row = listing->row (v);
      g_string_append_printf (text, "%s\n", json_object_get_string_member (row, "name"));
      json_array_add_object_element (rows, row);
    }
    for (guint j = 0; j < 5; j++)
      g_clear_pointer (&v[j], g_variant_unref);
  }
  structured = json_object_new ();
  json_object_set_array_member (structured, listing->member, rows);
  if (text->len == 0)
    g_string_append_printf (text, "No %s.", listing->member);
  return success_result (identity, structured, text->str);
}

/* --- tasks ---------------------------------------------------------------- */

static guint
wait_argument (JsonObject *args, const gchar *member)
{
  if (args != NULL && json_object_has_member (args, member))
    return (guint) json_object_get_int_member (args, member);
  return VMCP_WAIT_DEFAULT_SEC;
}

static gboolean
check_scope (VmcpTools *self, const gchar *project, const gchar *image, GError **error)
{
  const gchar *client = vmcp_manifest_client (self->manifest);

  if (project != NULL && !vmcp_manifest_allows_project (self->manifest, project)) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (project, TRUE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                 "This client (%s) may not use the project %s", client, shown);
    return FALSE;
  }
  if (image != NULL && !vmcp_manifest_allows_image (self->manifest, image)) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (image, TRUE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                 "This client (%s) may not use the image %s", client, shown);
    return FALSE;
  }
  return TRUE;
}

/* Asked of the task list rather than of the path: a property read on a
 * path the daemon does not know is answered by GDBus ("no such
 * interface"), not with the daemon's NotFound. */
static gboolean
task_exists (VmcpTools *self, const gchar *path, const gchar *id, GError **error)
{
  g_auto(GStrv) tasks = list_paths (self, vivarium_dbus_manager_call_list_tasks_sync, error);

  if (tasks == NULL)
    return FALSE;
  if (!g_strv_contains ((const gchar * const *) tasks, path)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 "There is no task %s (the daemon forgets finished tasks when it exits; their reports stay)",
                 id);
    return FALSE;
  }
  return TRUE;
}

/* The task's path, after the manifest allowed its project and image. */
static gchar *
task_path (VmcpTools *self, const gchar *id, VmcpIdentity *identity, GError **error)
{
  g_autofree gchar *path = NULL;
  g_autofree gchar *project = NULL;
  g_autofree gchar *image = NULL;

  if (!vivarium_name_validate ("task", id, error))
    return NULL;
  path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_TASKS, id);
  if (!task_exists (self, path, id, error))
    return NULL;
  project = vmcp_daemon_get_string (self->daemon, path, "Task", "Project", error);
  if (project == NULL)
    return NULL;
  image = vmcp_daemon_get_string (self->daemon, path, "Task", "Image", error);
  if (image == NULL)
    return NULL;
  vmcp_identity_set_task (identity, id, image);
  if (!check_scope (self, project, image, error))
    return NULL;
  return g_steal_pointer (&path);
}

static gboolean
wait_for (VmcpTools *self, const gchar *path, guint seconds, GError **error)
{
  g_autoptr(VivariumDBusTask) task = NULL;
  g_autofree gchar *outcome = NULL;

  if (seconds == 0)
    return TRUE;
  task = vmcp_daemon_task (self->daemon, path, error);
  /* The daemon ends the wait itself; the call must outlive it. */
  return task != NULL &&
         vivarium_dbus_task_call_wait_sync (task, seconds, VMCP_CALL_FLAGS, (gint) (seconds + 60) * 1000,
                                            &outcome, NULL, error);
}

static void
append_question (GString *text, const gchar *question)
{
  g_auto(GStrv) lines = g_strsplit (question, "\n", 64);

  g_string_append (text, "The worker asks (its own words, unchecked; answer with vm_answer):\n");
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (lines[i], FALSE);
    g_string_append_printf (text, "> %s\n", shown);
  }
}

static JsonNode *
question_node (const gchar *question)
{
  JsonObject *q;
  JsonNode *node;

  if (question == NULL || question[0] == '\0')
    return json_node_new (JSON_NODE_NULL);
  q = json_object_new ();
  json_object_set_string_member (q, "label", "the worker's question (its own words, unchecked)");
  json_object_set_string_member (q, "text", question);
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_take_object (node, q);
  return node;
}

typedef struct {
  gchar *id, *project, *image, *outcome, *step, *reason, *question, *session, *report;
  /* The outcome parsed; a word this build does not know is no outcome. */
  gboolean        outcome_known;
  VivariumOutcome outcome_value;
} TaskProps;

static void
task_props_clear (TaskProps *p)
{
  g_free (p->id);
  g_free (p->project);
  g_free (p->image);
  g_free (p->outcome);
  g_free (p->step);
  g_free (p->reason);
  g_free (p->question);
  g_free (p->session);
  g_free (p->report);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (TaskProps, task_props_clear)

static gboolean
read_task (VmcpTools *self, const gchar *path, TaskProps *p, GError **error)
{
  const gchar * const names[] = { "Id", "Project", "Image", "Outcome", "Step", "Reason", "Question",
                                  NULL };
  gchar **fields[] = { &p->id, &p->project, &p->image, &p->outcome, &p->step, &p->reason,
                       &p->question };
  g_autoptr(GVariant) session = NULL;
  g_autoptr(GVariant) report = NULL;

  for (guint i = 0; names[i] != NULL; i++) {
    *fields[i] = vmcp_daemon_get_string (self->daemon, path, "Task", names[i], error);
    if (*fields[i] == NULL)
      return FALSE;
  }
  session = vmcp_daemon_get (self->daemon, path, "Task", "Session", G_VARIANT_TYPE_OBJECT_PATH, error);
  if (session == NULL)
    return FALSE;
  report = vmcp_daemon_get (self->daemon, path, "Task", "Report", G_VARIANT_TYPE_OBJECT_PATH, error);
  if (report == NULL)
    return FALSE;
  p->session = g_variant_dup_string (session, NULL);
  p->report = g_variant_dup_string (report, NULL);
  p->outcome_known = vivarium_outcome_from_string (p->outcome, &p->outcome_value);
  return TRUE;
}

static gboolean
task_outcome_is (const TaskProps *p, VivariumOutcome outcome)
{
  return p->outcome_known && p->outcome_value == outcome;
}

/* While the task runs its work session names the machine; once reported,
 * the signed report does (vmcp_identity_take_report). */
static void
identity_from_session (VmcpTools *self, VmcpIdentity *identity, const gchar *session_path)
{
  g_autofree gchar *id = NULL;
  g_autofree gchar *digest = NULL;

  if (g_strcmp0 (session_path, "/") == 0)
    return;
  id = vmcp_daemon_get_string (self->daemon, session_path, "Session", "Id", NULL);
  digest = vmcp_daemon_get_string (self->daemon, session_path, "Session", "ImageDigest", NULL);
  vmcp_identity_set_session (identity, id, digest);
}

static void
identity_from_image (VmcpTools *self, VmcpIdentity *identity, const gchar *image)
{
  g_autofree gchar *path = NULL;
  g_autofree gchar *digest = NULL;

  if (vmcp_identity_has_image_digest (identity) || vivarium_name_validate ("image", image, NULL) == FALSE)
    return;
  path = vivarium_object_path_for (VIVARIUM_DBUS_PATH_IMAGES, image);
  digest = vmcp_daemon_get_string (self->daemon, path, "Image", "Digest", NULL);
  vmcp_identity_set_session (identity, NULL, digest);
}

static JsonNode *
fetch_report (VmcpTools *self, const gchar *report_path, const TaskProps *p, VmcpIdentity *identity,
              GString *text, GError **error)
{
  g_autoptr(VivariumDBusReport) proxy = vmcp_daemon_report (self->daemon, report_path, error);
  g_autofree gchar *data = NULL;
  const gchar *shown;
  JsonNode *report;

  if (proxy == NULL ||
      !vivarium_dbus_report_call_get_json_sync (proxy, VMCP_CALL_FLAGS, CALL_TIMEOUT_MSEC, &data, NULL, error))
    return NULL;
  report = vmcp_identity_take_report (identity, data, strlen (data), p->id, p->project, error);
  if (report == NULL)
    return NULL;
  shown = json_object_get_string_member (json_node_get_object (report), "text");
  g_string_append_printf (text, "\n%s", shown);
  if (shown[0] != '\0' && shown[strlen (shown) - 1] != '\n')
    g_string_append_c (text, '\n');
  g_string_append_printf (text, "\nvivarium-mcp checked the report's signature against the daemon's key %s.\n",
                          vmcp_identity_key_fingerprint (identity));
  return report;
}

static JsonNode *
task_result (VmcpTools *self, const gchar *path, VmcpIdentity *identity)
{
  g_auto(TaskProps) p = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  JsonObject *structured;
  JsonNode *report = NULL;

  if (!read_task (self, path, &p, &error))
    return error_result (identity, error);
  vmcp_identity_set_task (identity, p.id, p.image);
  identity_from_session (self, identity, p.session);
  g_string_append_printf (text, "Task %s: %s (step: %s)\n", p.id, p.outcome, p.step);
  if (p.reason[0] != '\0') {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (p.reason, TRUE);
    g_string_append_printf (text, "Reason: %s\n", shown);
  }
  if (task_outcome_is (&p, VIVARIUM_OUTCOME_NEEDS_INPUT))
    append_question (text, p.question);
  if (g_strcmp0 (p.report, "/") != 0) {
    report = fetch_report (self, p.report, &p, identity, text, &error);
    if (report == NULL)
      return error_result (identity, error);
  } else {
    identity_from_image (self, identity, p.image);
    if (task_outcome_is (&p, VIVARIUM_OUTCOME_IN_PROGRESS))
      g_string_append (text, "Still running: call vm_wait with this task id.\n");
  }
  structured = json_object_new ();
  json_object_set_string_member (structured, "task", p.id);
  json_object_set_string_member (structured, "project", p.project);
  json_object_set_string_member (structured, "image", p.image);
  json_object_set_string_member (structured, "outcome", p.outcome);
  json_object_set_string_member (structured, "step", p.step);
  if (p.reason[0] != '\0')
    json_object_set_string_member (structured, "reason", p.reason);
  else
    json_object_set_null_member (structured, "reason");
  json_object_set_member (structured, "question",
                          question_node (task_outcome_is (&p, VIVARIUM_OUTCOME_NEEDS_INPUT) ? p.question : NULL));
  json_object_set_member (structured, "report", report != NULL ? report : json_node_new (JSON_NODE_NULL));
  return success_result (identity, structured, text->str);
}

static GVariant *
string_array (JsonArray *array)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) strv = NULL;

  for (guint i = 0; i < json_array_get_length (array); i++)
    g_strv_builder_add (b, json_array_get_string_element (array, i));
  strv = g_strv_builder_end (b);
  return g_variant_new_strv ((const gchar * const *) strv, -1);
}

/* The schema checked the types; the daemon checks the groups and rules. */
static void
add_egress_options (GVariantBuilder *options, JsonObject *args)
{
  if (json_object_has_member (args, "egress"))
    g_variant_builder_add (options, "{sv}", "egress", g_variant_new_string (json_object_get_string_member (args, "egress")));
  if (json_object_has_member (args, "egress_groups"))
    g_variant_builder_add (options, "{sv}", "egress_groups",
                           string_array (json_object_get_array_member (args, "egress_groups")));
  if (json_object_has_member (args, "egress_allow"))
    g_variant_builder_add (options, "{sv}", "egress_allow",
                           string_array (json_object_get_array_member (args, "egress_allow")));
}

static JsonNode *
run_task (VmcpTools *self, JsonObject *args, VmcpIdentity *identity)
{
  const gchar *project = json_object_get_string_member (args, "project");
  const gchar *image = json_object_get_string_member (args, "image");
  const gchar *instructions = json_object_get_string_member (args, "instructions");
  g_auto(GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumDBusManager) manager = NULL;
  g_autofree gchar *path = NULL;

  if (!vivarium_project_name_validate (project, &error) ||
      !vivarium_name_validate ("image", image, &error))
    return error_result (identity, error);
  vmcp_identity_set_task (identity, NULL, image);
  if (!check_scope (self, project, image, &error))
    return error_result (identity, error);
  g_variant_builder_add (&options, "{sv}", "worker", g_variant_new_string ("agent"));
  if (json_object_has_member (args, "verify"))
    g_variant_builder_add (&options, "{sv}", "verify",
                           g_variant_new_string (json_object_get_string_member (args, "verify")));
  add_egress_options (&options, args);
  manager = vmcp_daemon_manager (self->daemon, &error);
  if (manager == NULL ||
      !vivarium_dbus_manager_call_submit_task_sync (manager, project, image, instructions,
                                                    g_variant_builder_end (&options), VMCP_CALL_FLAGS,
                                                    SUBMIT_TIMEOUT_MSEC, &path, NULL, &error))
    return error_result (identity, error);
  if (!wait_for (self, path, wait_argument (args, "wait_seconds"), &error)) {
    g_autofree gchar *id = vmcp_daemon_get_string (self->daemon, path, "Task", "Id", NULL);
    vmcp_identity_set_task (identity, id, NULL);
    return error_result (identity, error);
  }
  return task_result (self, path, identity);
}

typedef enum { ACT_NONE, ACT_ANSWER, ACT_CANCEL } TaskAction;

static JsonNode *
act_on_task (VmcpTools *self, JsonObject *args, VmcpIdentity *identity, TaskAction action,
             const gchar *wait_member)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *path = task_path (self, json_object_get_string_member (args, "task"), identity, &error);
  g_autoptr(VivariumDBusTask) task = NULL;

  if (path == NULL)
    return error_result (identity, error);
  if (action != ACT_NONE && (task = vmcp_daemon_task (self->daemon, path, &error)) == NULL)
    return error_result (identity, error);
  if (action == ACT_ANSWER &&
      !vivarium_dbus_task_call_answer_sync (task, json_object_get_string_member (args, "text"), VMCP_CALL_FLAGS,
                                            CALL_TIMEOUT_MSEC, NULL, &error))
    return error_result (identity, error);
  if (action == ACT_CANCEL &&
      !vivarium_dbus_task_call_cancel_sync (task, VMCP_CALL_FLAGS, CALL_TIMEOUT_MSEC, NULL, &error))
    return error_result (identity, error);
  if (wait_member != NULL &&
      !wait_for (self, path, action == ACT_CANCEL ? VMCP_WAIT_DEFAULT_SEC : wait_argument (args, wait_member),
                 &error))
    return error_result (identity, error);
  return task_result (self, path, identity);
}

/* --- dispatch ------------------------------------------------------------- */

static JsonNode *
dispatch (VmcpTools *self, const gchar *name, JsonObject *args, VmcpIdentity *identity)
{
  if (g_str_equal (name, "vm_images"))
    return run_listing (self, &images_listing, identity);
  if (g_str_equal (name, "vm_projects"))
    return run_listing (self, &projects_listing, identity);
  if (g_str_equal (name, "vm_task"))
    return run_task (self, args, identity);
  if (g_str_equal (name, "vm_answer"))
    return act_on_task (self, args, identity, ACT_ANSWER, "wait_seconds");
  if (g_str_equal (name, "vm_wait"))
    return act_on_task (self, args, identity, ACT_NONE, "seconds");
  if (g_str_equal (name, "vm_report"))
    return act_on_task (self, args, identity, ACT_NONE, NULL);
  if (g_str_equal (name, "vm_cancel"))
    return act_on_task (self, args, identity, ACT_CANCEL, "");
  {
    g_autoptr(GError) error = NULL;
    g_set_error (&error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED, "%s has no handler", name);
    return error_result (identity, error);
  }
}

JsonNode *
vmcp_tools_call (VmcpTools *self, const gchar *name, JsonObject *arguments, gchar **protocol_error)
{
  g_autoptr(VmcpIdentity) identity = NULL;
  g_autoptr(JsonNode) def = vmcp_schema_tool_definition (self->schema, name);
  g_autoptr(GError) error = NULL;

  if (def == NULL) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (name, TRUE);
    *protocol_error = g_strdup_printf ("Unknown tool %.200s", shown);
    return NULL;
  }
  identity = vmcp_identity_new (self->daemon);
  if (!vmcp_manifest_allows_tool (self->manifest, name)) {
    g_set_error (&error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_AUTHORIZED,
                 "This client (%s) may not use %s", vmcp_manifest_client (self->manifest), name);
    return error_result (identity, error);
  }
  if (g_str_equal (name, "vm_task") && optional_for (self, name) == NULL &&
      (arguments == NULL || !json_object_has_member (arguments, "verify"))) {
    g_set_error (&error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "vm_task needs the argument “verify”: the command a fresh machine runs to check the work. "
                 "Without it the worker's own command would decide the verdict, which proves only what the "
                 "worker chose to check (the client's manifest may allow that with WorkerVerify=true)");
    return error_result (identity, error);
  }
  if (!vmcp_schema_check_arguments (self->schema, name, arguments, optional_for (self, name), &error))
    return error_result (identity, error);
  return dispatch (self, name, arguments, identity);
}
