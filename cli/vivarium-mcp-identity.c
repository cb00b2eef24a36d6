/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-report.h"
#include "vivarium-mcp-identity.h"

struct _VmcpIdentity {
  gchar    *task;
  gchar    *session;
  gchar    *image;
  gchar    *image_digest;
  gchar    *report;
  gchar    *signature;
  gchar    *signed_by;
  gchar    *key_fingerprint;
  gboolean  verified;
};

VmcpIdentity *
vmcp_identity_new_for_key (const gchar *key_fingerprint)
{
  VmcpIdentity *self = g_new0 (VmcpIdentity, 1);

  if (key_fingerprint != NULL && key_fingerprint[0] != '\0')
    self->key_fingerprint = g_strdup (key_fingerprint);
  return self;
}

VmcpIdentity *
vmcp_identity_new (VmcpDaemon *daemon)
{
  /* A caller polkit refuses does not learn the key either: null. */
  g_autofree gchar *key = vmcp_daemon_get_string (daemon, VIVARIUM_DBUS_PATH, "Manager", "KeyFingerprint", NULL);

  return vmcp_identity_new_for_key (key);
}

void
vmcp_identity_free (VmcpIdentity *self)
{
  if (self == NULL)
    return;
  g_free (self->task);
  g_free (self->session);
  g_free (self->image);
  g_free (self->image_digest);
  g_free (self->report);
  g_free (self->signature);
  g_free (self->signed_by);
  g_free (self->key_fingerprint);
  g_free (self);
}

static const gchar *
or_empty (const gchar *s)
{
  return s != NULL ? s : "";
}

static void
replace (gchar **field, const gchar *value)
{
  if (value == NULL || value[0] == '\0')
    return;
  g_free (*field);
  *field = g_strdup (value);
}

void
vmcp_identity_set_task (VmcpIdentity *self, const gchar *task, const gchar *image)
{
  replace (&self->task, task);
  replace (&self->image, image);
}

void
vmcp_identity_set_session (VmcpIdentity *self, const gchar *session, const gchar *image_digest)
{
  replace (&self->session, session);
  replace (&self->image_digest, image_digest);
}

gboolean
vmcp_identity_has_image_digest (VmcpIdentity *self)
{
  return self->image_digest != NULL;
}

const gchar *
vmcp_identity_key_fingerprint (VmcpIdentity *self)
{
  return self->key_fingerprint;
}

/* The envelope's signature value, read before the check so that a report
 * that fails it is still named in the error's identity. */
static void
read_envelope (VmcpIdentity *self, const gchar *data, gsize len)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  JsonObject *root, *sig;

  if (len > VIVARIUM_REPORT_DOCUMENT_MAX ||
      !json_parser_load_from_data (parser, data, (gssize) len, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  root = json_node_get_object (json_parser_get_root (parser));
  if (!json_object_has_member (root, "signature") ||
      !JSON_NODE_HOLDS_OBJECT (json_object_get_member (root, "signature")))
    return;
  sig = json_object_get_object_member (root, "signature");
  replace (&self->signature, json_object_get_string_member_with_default (sig, "value", NULL));
  replace (&self->signed_by, json_object_get_string_member_with_default (sig, "key-fingerprint", NULL));
}

static JsonNode *
files_node (VivariumReport *r)
{
  GPtrArray *files = vivarium_report_get_files (r);
  JsonArray *array = json_array_sized_new (files->len);
  JsonNode *node = json_node_new (JSON_NODE_ARRAY);

  for (guint i = 0; i < files->len; i++) {
    const VivariumReportFile *f = g_ptr_array_index (files, i);
    JsonObject *o = json_object_new ();
    json_object_set_string_member (o, "path", f->path);
    json_object_set_string_member (o, "change", vivarium_file_change_to_string (f->change));
    json_object_set_string_member (o, "kind", vivarium_file_kind_to_string (f->kind));
    json_object_set_int_member (o, "lines_added", f->lines_added);
    json_object_set_int_member (o, "lines_removed", f->lines_removed);
    json_array_add_object_element (array, o);
  }
  json_node_take_array (node, array);
  return node;
}

static JsonObject *
verification_object (VivariumReport *r)
{
  JsonObject *o = json_object_new ();
  const gchar *command = vivarium_report_get_verify_command (r);

  json_object_set_string_member (o, "verdict", vivarium_verdict_to_string (vivarium_report_get_verify_verdict (r)));
  json_object_set_int_member (o, "exit_status", vivarium_report_get_verify_exit_status (r));
  json_object_set_string_member (o, "whose", vivarium_verify_whose_to_string (vivarium_report_get_verify_whose (r)));
  /* Whose check decided: only a caller's verdict is the caller's finding. */
  switch (vivarium_report_get_verify_whose (r)) {
  case VIVARIUM_VERIFY_WHOSE_CALLER:
    json_object_set_string_member (o, "by", "caller");
    break;
  case VIVARIUM_VERIFY_WHOSE_WORKER:
    json_object_set_string_member (o, "by", "worker");
    break;
  case VIVARIUM_VERIFY_WHOSE_NONE:
  default:
    json_object_set_null_member (o, "by");
    break;
  }
  json_object_set_string_member (o, "command", command != NULL ? command : "");
  return o;
}

/* The worker's words keep their label in every form. */
static JsonObject *
claim_object (VivariumReport *r)
{
  JsonObject *o = json_object_new ();
  const gchar *summary = vivarium_report_get_summary (r);

  json_object_set_string_member (o, "label", "the worker's unverified claim");
  json_object_set_string_member (o, "summary", summary != NULL ? summary : "");
  json_object_set_boolean_member (o, "truncated", vivarium_report_get_summary_truncated (r));
  json_object_set_int_member (o, "size", (gint64) MIN (vivarium_report_get_summary_size (r), G_MAXINT64));
  return o;
}

static JsonNode *
report_node (VivariumReport *r, const gchar *text)
{
  JsonObject *o = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  GPtrArray *commands = vivarium_report_get_commands (r);
  const gchar *commit = vivarium_report_get_commit (r);

  json_object_set_string_member (o, "id", vivarium_report_get_id (r));
  json_object_set_string_member (o, "text", text);
  json_object_set_string_member (o, "commit", commit != NULL ? commit : "");
  json_object_set_member (o, "files", files_node (r));
  json_object_set_int_member (o, "files_omitted", (gint64) MIN (vivarium_report_get_files_omitted (r), G_MAXINT64));
  json_object_set_int_member (o, "commands",
                              (gint64) MIN (commands->len + vivarium_report_get_commands_omitted (r), G_MAXINT64));
  json_object_set_object_member (o, "verification", verification_object (r));
  json_object_set_object_member (o, "worker_claim", claim_object (r));
  json_node_take_object (node, o);
  return node;
}

/* A report that verifies but is about another task or project is not
 * the answer to this question: a daemon (or anything between) that hands
 * over another signed report must not pass for this task's. */
static gboolean
check_about (VivariumReport *r, const gchar *task, const gchar *project, GError **error)
{
  if (g_strcmp0 (vivarium_report_get_task_id (r), task) != 0) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (vivarium_report_get_task_id (r), TRUE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                 "The signed report is about the task %s, not the task %s that was asked about", shown, task);
    return FALSE;
  }
  if (g_strcmp0 (vivarium_report_get_project (r), project) != 0) {
    g_autofree gchar *shown = vivarium_report_escape_untrusted (or_empty (vivarium_report_get_project (r)), TRUE);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                 "The signed report is about the project %s, not the project %s of the task asked about",
                 shown, project);
    return FALSE;
  }
  return TRUE;
}

JsonNode *
vmcp_identity_take_report (VmcpIdentity *self, const gchar *signed_file, gsize len, const gchar *task,
                           const gchar *project, GError **error)
{
  g_autoptr(VivariumReport) r = NULL;
  g_autofree gchar *fingerprint = NULL;
  g_autofree gchar *text = NULL;

  read_envelope (self, signed_file, len);
  self->verified = FALSE;
  if (self->key_fingerprint == NULL) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_DIGEST_MISMATCH,
                         "The daemon's key fingerprint could not be read, so the report's signature cannot be checked");
    return NULL;
  }
  r = vivarium_signed_report_verify (signed_file, len, self->key_fingerprint, &fingerprint, error);
  if (r == NULL) {
    g_prefix_error (error, "The report does not verify against the daemon's key: ");
    return NULL;
  }
  if (!check_about (r, task, project, error))
    return NULL;
  self->verified = TRUE;
  replace (&self->report, vivarium_report_get_id (r));
  replace (&self->task, vivarium_report_get_task_id (r));
  replace (&self->session, vivarium_report_get_session_id (r));
  replace (&self->image, vivarium_report_get_image_name (r));
  replace (&self->image_digest, vivarium_report_get_image_digest (r));
  replace (&self->signed_by, fingerprint);
  /* The text is rendered here, from the very report that was checked: a
   * text fetched apart from it could say something else. */
  text = vivarium_report_render_text (r, fingerprint);
  return report_node (r, text);
}

static void
add_nullable (JsonObject *o, const gchar *member, const gchar *value)
{
  if (value != NULL)
    json_object_set_string_member (o, member, value);
  else
    json_object_set_null_member (o, member);
}

JsonNode *
vmcp_identity_to_json (VmcpIdentity *self)
{
  JsonObject *o = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  add_nullable (o, "task", self->task);
  add_nullable (o, "session", self->session);
  add_nullable (o, "image", self->image);
  add_nullable (o, "image_digest", self->image_digest);
  add_nullable (o, "report", self->report);
  add_nullable (o, "signature", self->signature);
  add_nullable (o, "signed_by", self->signed_by);
  add_nullable (o, "key_fingerprint", self->key_fingerprint);
  json_object_set_boolean_member (o, "signature_verified", self->verified);
  json_node_take_object (node, o);
  return node;
}
