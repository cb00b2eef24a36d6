/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumctl"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivariumctl-commands.h"

static VivariumDBusGuard *
guard_proxy (VctlContext *ctx, GDBusProxyFlags flags, GError **error)
{
  return vivarium_dbus_guard_proxy_new_sync (ctx->bus, flags, VIVARIUM_DBUS_NAME,
                                             VIVARIUM_DBUS_PATH, NULL, error);
}

static void
print_guard_text (VivariumDBusGuard *guard)
{
  const gchar * const *deny = vivarium_dbus_guard_get_deny_list (guard);
  g_autofree gchar *layer1 = vctl_escape_line (vivarium_dbus_guard_get_layer1 (guard));
  g_autofree gchar *layer2 = vctl_escape_line (vivarium_dbus_guard_get_layer2 (guard));
  g_autofree gchar *verdict = vctl_escape_line (vivarium_dbus_guard_get_verdict (guard));
  g_autofree gchar *last = vctl_format_time (vivarium_dbus_guard_get_last_run_at (guard));

  g_print ("%-15s %s\n", _("Layer 1:"), layer1);
  g_print ("%-15s %s\n", _("Layer 2:"), layer2);
  g_print ("%-15s %s\n", _("Self-test:"), verdict);
  g_print ("%-15s %s\n", _("Last run:"), last);
  g_print ("%s\n", _("Denied destinations:"));
  for (guint i = 0; deny != NULL && deny[i] != NULL; i++) {
    g_autofree gchar *shown = vctl_escape_line (deny[i]);
    g_print ("  %s\n", shown);
  }
}

gboolean
vctl_cmd_guard_status (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv, GError **error)
{
  g_autoptr(VivariumDBusGuard) guard = NULL;

  if (!vctl_parse_args (ctx, cmd, NULL, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  guard = guard_proxy (ctx, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES |
                             G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS, error);
  if (guard == NULL || !vctl_ensure_properties (ctx, guard, error))
    return FALSE;
  if (ctx->json) {
    g_autoptr(JsonNode) root = vctl_proxy_to_json (guard);
    vctl_print_json (root);
  } else {
    print_guard_text (guard);
  }
  return TRUE;
}

/* The result's shape belongs to the daemon; the client reads it leniently:
 * an array of rows under one of these names, each row a probe run under a
 * configuration, with an expected and an observed outcome. */
static const gchar *rows_members[] = { "results", "probes", "matrix", "cases", "rows", NULL };

typedef struct {
  gchar    *probe;
  gchar    *config;
  gchar    *mode;       /* the guest's StartMode: restored or cold */
  gchar    *expected;
  gchar    *observed;
  gchar    *evidence;
  gboolean  pass;
} SelfTestRow;

static void
self_test_row_free (SelfTestRow *row)
{
  g_free (row->probe);
  g_free (row->config);
  g_free (row->mode);
  g_free (row->expected);
  g_free (row->observed);
  g_free (row->evidence);
  g_free (row);
}

/* Any member as escaped text, whatever its JSON type; NULL when absent. */
static gchar *
member_text (JsonObject *obj, const gchar * const *names)
{
  for (guint i = 0; names[i] != NULL; i++) {
    JsonNode *node = json_object_get_member (obj, names[i]);
    g_autofree gchar *text = NULL;

    if (node == NULL || JSON_NODE_HOLDS_NULL (node))
      continue;
    if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
      text = json_node_dup_string (node);
    else
      text = json_to_string (node, FALSE);
    return vctl_escape_line (text);
  }
  return NULL;
}

static SelfTestRow *
self_test_row_new (JsonObject *obj)
{
  static const gchar *probe_names[] = { "probe", "name", "target", NULL };
  static const gchar *config_names[] = { "configuration", "config", "layers", NULL };
  static const gchar *expected_names[] = { "expected", NULL };
  static const gchar *mode_names[] = { "start-mode", NULL };
  static const gchar *observed_names[] = { "observed", NULL };
  static const gchar *evidence_names[] = { "evidence", NULL };
  static const gchar *pass_names[] = { "pass", "passed", "ok", NULL };
  SelfTestRow *row = g_new0 (SelfTestRow, 1);

  row->probe = member_text (obj, probe_names);
  row->config = member_text (obj, config_names);
  row->mode = member_text (obj, mode_names);
  row->expected = member_text (obj, expected_names);
  row->observed = member_text (obj, observed_names);
  row->evidence = member_text (obj, evidence_names);
  row->pass = FALSE;
  for (guint i = 0; pass_names[i] != NULL; i++) {
    JsonNode *node = json_object_get_member (obj, pass_names[i]);
    if (node != NULL && JSON_NODE_HOLDS_VALUE (node) &&
        json_node_get_value_type (node) == G_TYPE_BOOLEAN) {
      row->pass = json_node_get_boolean (node);
      return row;
    }
  }
  row->pass = row->expected != NULL && g_strcmp0 (row->expected, row->observed) == 0;
  return row;
}

static GPtrArray *
self_test_rows (JsonObject *root)
{
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify) self_test_row_free);

  for (guint i = 0; rows_members[i] != NULL; i++) {
    JsonNode *node = json_object_get_member (root, rows_members[i]);
    JsonArray *array;

    if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
      continue;
    array = json_node_get_array (node);
    for (guint j = 0; j < json_array_get_length (array); j++) {
      JsonNode *item = json_array_get_element (array, j);
      if (JSON_NODE_HOLDS_OBJECT (item))
        g_ptr_array_add (rows, self_test_row_new (json_node_get_object (item)));
    }
    break;
  }
  return rows;
}

static void
print_self_test_text (GPtrArray *rows, const gchar *verdict)
{
  for (guint i = 0; i < rows->len; i++) {
    SelfTestRow *row = g_ptr_array_index (rows, i);
    g_autofree gchar *config = row->mode != NULL && row->mode[0] != '\0' ?
      g_strdup_printf ("%s (%s)", row->config != NULL ? row->config : "", row->mode) :
      g_strdup (row->config != NULL ? row->config : "");
    g_print ("%-4s %-28s %-24s %s %-12s %s %s\n",
             row->pass ? _("PASS") : _("FAIL"),
             row->probe != NULL ? row->probe : "?",
             config,
             _("expected"), row->expected != NULL ? row->expected : "?",
             _("observed"), row->observed != NULL ? row->observed : "?");
  }
  g_print ("%s %s\n", _("Verdict:"), verdict);
}

static void
append_junit_case (GString *xml, const gchar *classname, const SelfTestRow *row)
{
  g_autofree gchar *head = g_markup_printf_escaped ("    <testcase classname=\"%s\" name=\"%s\">\n",
                                                    classname,
                                                    row->probe != NULL ? row->probe : "?");
  g_string_append (xml, head);
  if (!row->pass) {
    g_autofree gchar *failure = g_markup_printf_escaped (
        "      <failure message=\"expected %s, observed %s\"/>\n",
        row->expected != NULL ? row->expected : "?",
        row->observed != NULL ? row->observed : "?");
    g_string_append (xml, failure);
  }
  if (row->evidence != NULL) {
    g_autofree gchar *out = g_markup_printf_escaped ("      <system-out>%s</system-out>\n",
                                                     row->evidence);
    g_string_append (xml, out);
  }
  g_string_append (xml, "    </testcase>\n");
}

/* Every text in here went through the escaper first, so no control byte
 * reaches the XML (XML 1.0 cannot carry most of them even as entities). */
static gboolean
write_junit (const gchar *file, GPtrArray *rows, const gchar *verdict, gboolean passed, GError **error)
{
  g_autoptr(GString) xml = g_string_new ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  SelfTestRow verdict_row = { .probe = (gchar *) "verdict",
                              .expected = (gchar *) vivarium_verdict_to_string (VIVARIUM_VERDICT_PASS),
                              .observed = (gchar *) verdict, .pass = passed };
  guint failures = verdict_row.pass ? 0 : 1;

  for (guint i = 0; i < rows->len; i++) {
    SelfTestRow *row = g_ptr_array_index (rows, i);
    failures += row->pass ? 0 : 1;
  }
  g_string_append_printf (xml, "<testsuites>\n  <testsuite name=\"vivarium-guard-selftest\" "
                          "tests=\"%u\" failures=\"%u\">\n", rows->len + 1, failures);
  for (guint i = 0; i < rows->len; i++) {
    SelfTestRow *row = g_ptr_array_index (rows, i);
    g_autofree gchar *classname = g_strconcat ("guard.",
                                               row->config != NULL ? row->config : "all", NULL);
    append_junit_case (xml, classname, row);
  }
  append_junit_case (xml, "guard", &verdict_row);
  g_string_append (xml, "  </testsuite>\n</testsuites>\n");
  return g_file_set_contents (file, xml->str, (gssize) xml->len, error);
}

typedef struct {
  GMainLoop    *loop;
  VctlProgress *progress;
  GVariant     *ret;
  GError       *error;
} SelfTestWait;

static void
on_self_test_progress (VivariumDBusGuard *guard, guint percent, const gchar *step,
                       gpointer user_data)
{
  SelfTestWait *w = user_data;
  vctl_progress_update (w->progress, percent, step);
}

static void
on_self_test_done (GObject *source, GAsyncResult *res, gpointer user_data)
{
  SelfTestWait *w = user_data;

  w->ret = g_dbus_proxy_call_finish (G_DBUS_PROXY (source), res, &w->error);
  g_main_loop_quit (w->loop);
}

/* The call itself carries the outcome (and fails if the daemon goes away);
 * the main loop only runs so that progress signals can be shown meanwhile. */
static gchar *
run_self_test (VctlContext *ctx, VivariumDBusGuard *guard, const gchar *image, const gchar *session,
               GError **error)
{
  SelfTestWait w = { 0 };
  g_auto(GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  gchar *result = NULL;

  if (image != NULL)
    g_variant_builder_add (&options, "{sv}", "image", g_variant_new_string (image));
  if (session != NULL)
    g_variant_builder_add (&options, "{sv}", "session", g_variant_new_string (session));
  w.loop = g_main_loop_new (NULL, FALSE);
  /* With --json, stdout holds the document alone. */
  w.progress = vctl_progress_new (ctx->json ? stderr : stdout);
  g_signal_connect (guard, "self-test-progress", G_CALLBACK (on_self_test_progress), &w);
  vivarium_dbus_guard_call_run_self_test (guard, g_variant_builder_end (&options), vctl_call_flags (ctx),
                                          VCTL_TIMEOUT_LONG, NULL, on_self_test_done, &w);
  g_main_loop_run (w.loop);
  g_signal_handlers_disconnect_by_data (guard, &w);
  vctl_progress_free (w.progress);
  g_main_loop_unref (w.loop);
  if (w.ret == NULL) {
    g_propagate_error (error, w.error);
    return NULL;
  }
  g_variant_get (w.ret, "(s)", &result);
  g_variant_unref (w.ret);
  return result;
}

static gchar *
self_test_verdict (VctlContext *ctx, VivariumDBusGuard *guard, JsonObject *root)
{
  g_autoptr(GVariant) value = NULL;

  if (json_object_has_member (root, "verdict")) {
    const gchar *names[] = { "verdict", NULL };
    return member_text (root, names);
  }
  /* Otherwise the daemon's own summary of the run just stored. */
  value = vctl_get_property (ctx, guard, "Verdict", NULL);
  if (value == NULL || !g_variant_is_of_type (value, G_VARIANT_TYPE_STRING))
    return g_strdup (vivarium_verdict_to_string (VIVARIUM_VERDICT_INCONCLUSIVE));
  return vctl_escape_line (g_variant_get_string (value, NULL));
}

gboolean
vctl_cmd_guard_selftest (VctlContext *ctx, const VctlCommand *cmd, gchar ***argv,
                         GError **error)
{
  g_autofree gchar *image = NULL;
  g_autofree gchar *session = NULL;
  g_autofree gchar *junit = NULL;
  g_autofree gchar *result = NULL;
  g_autofree gchar *verdict = NULL;
  VivariumVerdict parsed;
  gboolean passed;
  g_autoptr(VivariumDBusGuard) guard = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GPtrArray) rows = NULL;
  g_autoptr(GError) error_local = NULL;
  JsonNode *root;
  const GOptionEntry entries[] = {
    { "image", 0, 0, G_OPTION_ARG_STRING, &image, N_("Frozen image to boot (default: tiny)"),
      "NAME" },
    { "session", 0, 0, G_OPTION_ARG_STRING, &session,
      N_("Probe this running session instead of booting scratch guests"), "ID" },
    { "junit", 0, 0, G_OPTION_ARG_FILENAME, &junit, N_("Also write the result as JUnit XML"),
      "FILE" },
    { NULL }
  };

  if (!vctl_parse_args (ctx, cmd, entries, TRUE, argv, 0, 0, error))
    return FALSE;
  if (!vctl_connect (ctx, error))
    return FALSE;
  guard = guard_proxy (ctx, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES, error);
  if (guard == NULL)
    return FALSE;
  result = run_self_test (ctx, guard, image, session, error);
  if (result == NULL)
    return FALSE;

  if (!json_parser_load_from_data (parser, result, -1, &error_local) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_PROTOCOL,
                 _("The self-test result is not a JSON object: %s"),
                 error_local != NULL ? error_local->message : _("wrong type"));
    return FALSE;
  }
  root = json_parser_get_root (parser);
  rows = self_test_rows (json_node_get_object (root));
  verdict = self_test_verdict (ctx, guard, json_node_get_object (root));
  passed = vivarium_verdict_from_string (verdict, &parsed) && parsed == VIVARIUM_VERDICT_PASS;
  if (junit != NULL && !write_junit (junit, rows, verdict, passed, error))
    return FALSE;
  if (ctx->json)
    vctl_print_json (root);
  else
    print_self_test_text (rows, verdict);
  if (!passed) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_FAILED,
                 _("The isolation self-test verdict is “%s”"), verdict);
    return FALSE;
  }
  return TRUE;
}
