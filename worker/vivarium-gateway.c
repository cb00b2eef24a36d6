/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

/* vivarium-gateway: an agent worker's one path to a model. For each task
 * directory the daemon makes under /run/vivarium/tasks/ (vd-gateway-client.h)
 * it serves a unix socket only that task's worker uid may connect to, and
 * forwards exactly POST /v1/chat/completions and GET /v1/models to
 * [Agent] Endpoint=, with the model forced to [Agent] Model=, sizes and
 * requests per task capped, and the Authorization header added from a
 * root-only key file (the worker never holds the key). Its unit allows
 * one address, the endpoint's; it reads that back at start and refuses to
 * run otherwise. Each request is logged by sizes, status and latency, never
 * content, and counted into <task>/usage for the report. */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <systemd/sd-daemon.h>

#include "vivarium-http.h"

#define SOCKET_NAME "model.sock"

typedef struct {
  gchar   *endpoint_host;     /* an IP literal */
  guint16  endpoint_port;
  gchar   *endpoint_prefix;   /* "/v1" */
  gchar   *model;
  gchar   *key;               /* from KeyFile=, or NULL */
  gsize    max_request;
  gsize    max_response;
  guint    max_requests;
  guint    timeout_sec;
} Config;

typedef struct {
  gchar          *id;
  gchar          *dir;
  guint32         uid;
  GSocketService *service;
  GMutex          lock;
  guint64         attempts;   /* every request the worker made: what the cap counts */
  guint64         requests, refused, prompt_tokens, completion_tokens;
} TaskGate;

static Config config;
static GHashTable *gates;   /* id → TaskGate */
static gchar *tasks_dir;

/* --- configuration ------------------------------------------------------------- */

static void
load_layer (GKeyFile *merged, const gchar *path)
{
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_auto(GStrv) keys = NULL;

  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, NULL))
    return;
  keys = g_key_file_get_keys (kf, "Agent", NULL, NULL);
  for (guint i = 0; keys != NULL && keys[i] != NULL; i++) {
    g_autofree gchar *v = g_key_file_get_value (kf, "Agent", keys[i], NULL);
    g_key_file_set_value (merged, "Agent", keys[i], v);
  }
}

/* The daemon's layers: defaults.conf < vivarium.conf < conf.d/ in name order. */
static GKeyFile *
load_layers (void)
{
  GKeyFile *kf = g_key_file_new ();
  const gchar *conf_dir = g_getenv ("VIVARIUM_CONFIG_DIR");
  g_autofree gchar *sysconf = g_strdup (conf_dir != NULL ? conf_dir : VIVARIUM_SYSCONFDIR);
  g_autofree gchar *defaults = g_build_filename (VIVARIUM_PKGDATADIR, "defaults.conf", NULL);
  g_autofree gchar *main_conf = g_build_filename (sysconf, "vivarium.conf", NULL);
  g_autofree gchar *dropins = g_build_filename (sysconf, "conf.d", NULL);
  g_autoptr(GDir) dir = g_dir_open (dropins, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const gchar *name;

  load_layer (kf, defaults);
  load_layer (kf, main_conf);
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    if (g_str_has_suffix (name, ".conf"))
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  for (guint i = 0; i < names->len; i++) {
    g_autofree gchar *path = g_build_filename (dropins, *(gchar **) &names->pdata[i], NULL);
    load_layer (kf, path);
  }
  return kf;
}

static gboolean
read_key (const gchar *path, GError **error)
{
  struct stat st;
  g_autofree gchar *text = NULL;

  if (g_stat (path, &st) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "KeyFile %s: %s", path, g_strerror (errno));
    return FALSE;
  }
  /* The key stays root's: a file others can read is refused, not used. */
  if (st.st_uid != 0 || (st.st_mode & 0077) != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                 "KeyFile %s must belong to root and be readable by root only (mode 0600)", path);
    return FALSE;
  }
  if (!g_file_get_contents (path, &text, NULL, error))
    return FALSE;
  g_strstrip (text);
  if (text[0] == '\0' || strchr (text, '\n') != NULL || strchr (text, '\r') != NULL || strlen (text) > 4096) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "KeyFile %s must hold one line, the key", path);
    return FALSE;
  }
  config.key = g_steal_pointer (&text);
  return TRUE;
}

static guint64
get_uint (GKeyFile *kf, const gchar *key, guint64 def, guint64 min, guint64 max)
{
  g_autoptr(GError) error = NULL;
  guint64 v;

  if (!g_key_file_has_key (kf, "Agent", key, NULL))
    return def;
  v = g_key_file_get_uint64 (kf, "Agent", key, &error);
  if (error != NULL || v < min || v > max) {
    g_warning ("[Agent] %s is out of range (%" G_GUINT64_FORMAT "–%" G_GUINT64_FORMAT "); using %" G_GUINT64_FORMAT,
               key, min, max, def);
    return def;
  }
  return v;
}

static gboolean
parse_endpoint (const gchar *endpoint, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (endpoint, G_URI_FLAGS_NONE, error);
  g_autoptr(GInetAddress) addr = NULL;

  if (uri == NULL)
    return FALSE;
  if (g_strcmp0 (g_uri_get_scheme (uri), "http") != 0 || g_uri_get_host (uri) == NULL ||
      g_uri_get_userinfo (uri) != NULL || g_uri_get_query (uri) != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] Endpoint=%s must be http://ADDRESS:PORT/PATH (no user, no query)", endpoint);
    return FALSE;
  }
  /* An address, not a name: the unit's IPAddressAllow= is one address. */
  addr = g_inet_address_new_from_string (g_uri_get_host (uri));
  if (addr == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] Endpoint=%s must name an IP address, not a host name", endpoint);
    return FALSE;
  }
  config.endpoint_host = g_strdup (g_uri_get_host (uri));
  config.endpoint_port = g_uri_get_port (uri) > 0 ? (guint16) g_uri_get_port (uri) : 80;
  config.endpoint_prefix = g_strdup (g_uri_get_path (uri));
  if (g_str_has_suffix (config.endpoint_prefix, "/"))
    config.endpoint_prefix[strlen (config.endpoint_prefix) - 1] = '\0';
  return TRUE;
}

static gboolean
load_config (GError **error)
{
  g_autoptr(GKeyFile) kf = load_layers ();
  g_autofree gchar *endpoint = g_key_file_get_string (kf, "Agent", "Endpoint", NULL);
  g_autofree gchar *key_file = g_key_file_get_string (kf, "Agent", "KeyFile", NULL);

  config.model = g_key_file_get_string (kf, "Agent", "Model", NULL);
  if (config.model == NULL || config.model[0] == '\0' || strlen (config.model) > 256) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "[Agent] Model= is not set");
    return FALSE;
  }
  config.max_request = get_uint (kf, "MaxRequestBytes", 4 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_response = get_uint (kf, "MaxResponseBytes", 16 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_requests = get_uint (kf, "MaxRequestsPerTask", 200, 1, 100000);
  config.timeout_sec = get_uint (kf, "RequestTimeoutSec", 600, 1, 3600);
  if (!parse_endpoint (endpoint != NULL ? endpoint : "http://127.0.0.1:11434/v1", error))
    return FALSE;
  return key_file == NULL || key_file[0] == '\0' || read_key (key_file, error);
}

/* --- the unit's one allowed address, read back ------------------------------------- */

static gboolean
check_allowed_address (GError **error)
{
  g_autoptr(GDBusConnection) bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, error);
  g_autoptr(GVariant) unit = NULL;
  g_autoptr(GVariant) prop = NULL;
  g_autoptr(GVariant) allow = NULL;
  g_autoptr(GInetAddress) want = g_inet_address_new_from_string (config.endpoint_host);
  const gchar *path;
  guint32 prefix = 0;
  gint32 family = 0;
  g_autoptr(GVariant) bytes = NULL;

  if (bus == NULL)
    return FALSE;
  unit = g_dbus_connection_call_sync (bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                      "org.freedesktop.systemd1.Manager", "GetUnitByPID",
                                      g_variant_new ("(u)", (guint32) getpid ()), G_VARIANT_TYPE ("(o)"),
                                      G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);
  if (unit == NULL)
    return FALSE;
  g_variant_get (unit, "(&o)", &path);
  prop = g_dbus_connection_call_sync (bus, "org.freedesktop.systemd1", path, "org.freedesktop.DBus.Properties", "Get",
                                      g_variant_new ("(ss)", "org.freedesktop.systemd1.Service", "IPAddressAllow"),
                                      G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);
  if (prop == NULL)
    return FALSE;
  g_variant_get (prop, "(v)", &allow);
  if (g_variant_n_children (allow) == 1) {
    g_variant_get_child (allow, 0, "(i@ayu)", &family, &bytes, &prefix);
    gsize len = g_variant_get_size (bytes);
    if (len == g_inet_address_get_native_size (want) && prefix == len * 8 &&
        memcmp (g_variant_get_data (bytes), g_inet_address_to_bytes (want), len) == 0)
      return TRUE;
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
               "the unit must allow exactly the endpoint's address (IPAddressAllow=%s, with IPAddressDeny=any); "
               "it allows %zu entries otherwise: set it in a drop-in (systemctl edit vivarium-gateway.service)",
               config.endpoint_host, g_variant_n_children (allow));
  return FALSE;
}

/* --- counters ---------------------------------------------------------------------- */

static void
write_usage (TaskGate *gate)
{
  g_autofree gchar *path = g_build_filename (gate->dir, "usage", NULL);
  g_autofree gchar *text = g_strdup_printf ("[Usage]\nRequests=%" G_GUINT64_FORMAT "\nRefused=%" G_GUINT64_FORMAT
                                            "\nPromptTokens=%" G_GUINT64_FORMAT "\nCompletionTokens=%" G_GUINT64_FORMAT
                                            "\n", gate->requests, gate->refused, gate->prompt_tokens,
                                            gate->completion_tokens);
  g_autoptr(GError) error = NULL;

  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, &error))
    g_warning ("task %s: cannot write its usage: %s", gate->id, error->message);
}

static void
count_usage (TaskGate *gate, GBytes *body)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *usage;
  JsonNode *node;

  if (!json_parser_load_from_data (parser, g_bytes_get_data (body, NULL), (gssize) g_bytes_get_size (body), NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return;
  node = json_object_get_member (json_node_get_object (json_parser_get_root (parser)), "usage");
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return;
  usage = json_node_get_object (node);
  gate->prompt_tokens += (guint64) MAX (0, json_object_get_int_member_with_default (usage, "prompt_tokens", 0));
  gate->completion_tokens += (guint64) MAX (0, json_object_get_int_member_with_default (usage, "completion_tokens", 0));
}

/* --- one request ------------------------------------------------------------------- */

typedef struct {
  guint    status;
  GBytes  *body;
  gboolean forwarded;   /* the endpoint answered (any status); else the gateway refused */
} Answer;

static Answer
refuse (guint status, const gchar *why)
{
  return (Answer) { status, vivarium_http_error_body (why), FALSE };
}

/* The body the model gets: the worker's, with the model forced. */
static GBytes *
rewrite_chat (GBytes *body, gchar **why)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  JsonObject *o;
  const gchar *model;
  gsize len = 0;
  gchar *text;

  if (!json_parser_load_from_data (parser, g_bytes_get_data (body, NULL), (gssize) g_bytes_get_size (body), NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    *why = g_strdup ("the request is not a JSON object");
    return NULL;
  }
  o = json_node_get_object (json_parser_get_root (parser));
  model = json_object_get_string_member_with_default (o, "model", NULL);
  if (model != NULL && g_strcmp0 (model, config.model) != 0) {
    *why = g_strdup ("this gateway serves one model; the request named another");
    return NULL;
  }
  if (json_object_get_boolean_member_with_default (o, "stream", FALSE)) {
    *why = g_strdup ("streaming is not served");
    return NULL;
  }
  json_object_set_string_member (o, "model", config.model);
  json_generator_set_root (gen, json_parser_get_root (parser));
  text = json_generator_to_data (gen, &len);
  return g_bytes_new_take (text, len);
}

static Answer
forward (const gchar *method, const gchar *suffix, GBytes *body)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) conn = NULL;
  g_autoptr(VivariumHttpMessage) reply = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gchar *path = g_strconcat (config.endpoint_prefix, suffix, NULL);
  g_autofree gchar *auth = config.key != NULL ? g_strconcat ("Authorization: Bearer ", config.key, NULL) : NULL;
  g_autofree gchar *host = g_strdup_printf ("%s:%u", config.endpoint_host, config.endpoint_port);
  const gchar *headers[] = { auth, NULL };

  g_socket_client_set_timeout (client, config.timeout_sec);
  conn = g_socket_client_connect_to_host (client, config.endpoint_host, config.endpoint_port, NULL, &error);
  if (conn == NULL)
    return refuse (502, "the model endpoint is not reachable");
  if (!vivarium_http_write_request (g_io_stream_get_output_stream (G_IO_STREAM (conn)), method, path, host, headers,
                                    body, &error))
    return refuse (502, "the model endpoint dropped the request");
  reply = vivarium_http_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), FALSE, config.max_response, &error);
  if (reply == NULL)
    return refuse (502, g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE)
                        ? "the model's response is larger than the gateway's cap" : "the model's response is unreadable");
  return (Answer) { reply->status, g_bytes_ref (reply->body), TRUE };
}

static Answer
serve (TaskGate *gate, VivariumHttpMessage *req)
{
  g_autoptr(GBytes) body = NULL;
  g_autofree gchar *why = NULL;
  guint64 n;

  g_mutex_lock (&gate->lock);
  n = ++gate->attempts;
  g_mutex_unlock (&gate->lock);
  if (n > config.max_requests)
    return refuse (429, "this task used up its model requests");
  if (g_str_equal (req->path, "/v1/models"))
    return g_str_equal (req->method, "GET") ? forward ("GET", "/models", NULL) : refuse (405, "GET only");
  if (!g_str_equal (req->path, "/v1/chat/completions"))
    return refuse (404, "the gateway serves only POST /v1/chat/completions and GET /v1/models");
  if (!g_str_equal (req->method, "POST"))
    return refuse (405, "POST only");
  body = rewrite_chat (req->body, &why);
  if (body == NULL)
    return refuse (403, why);
  return forward ("POST", "/chat/completions", body);
}

/* The worker's words never reach the journal: only names we know. */
static const gchar *
shown_method (VivariumHttpMessage *req)
{
  if (req != NULL && (g_str_equal (req->method, "GET") || g_str_equal (req->method, "POST")))
    return req->method;
  return "(other method)";
}

static const gchar *
shown_path (VivariumHttpMessage *req)
{
  if (req != NULL && (g_str_equal (req->path, "/v1/chat/completions") || g_str_equal (req->path, "/v1/models")))
    return req->path;
  return "(other path)";
}

static gboolean
handle_connection (GThreadedSocketService *service, GSocketConnection *conn, GObject *source, gpointer user_data)
{
  TaskGate *gate = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VivariumHttpMessage) req = NULL;
  gint64 start = g_get_monotonic_time ();
  Answer answer;
  gsize in_size = 0;

  /* A worker that opens a connection and says nothing holds one of its own
   * task's threads, for a while only. */
  g_socket_set_timeout (g_socket_connection_get_socket (conn), 120);
  req = vivarium_http_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), TRUE, config.max_request, &error);
  if (req == NULL)
    answer = refuse (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE) ? 413 : 400,
                     "the request is malformed or too large");
  else {
    in_size = g_bytes_get_size (req->body);
    answer = serve (gate, req);
  }
  g_mutex_lock (&gate->lock);
  if (answer.status == 200 && req != NULL && g_str_equal (req->path, "/v1/chat/completions"))
    count_usage (gate, answer.body);
  if (answer.forwarded)
    gate->requests++;
  else
    gate->refused++;
  write_usage (gate);
  g_mutex_unlock (&gate->lock);
  /* Sizes, status, latency: never what was said. */
  g_message ("task %s: %s %s, %zu bytes in, status %u, %zu bytes out, %" G_GINT64_FORMAT " ms", gate->id,
             shown_method (req), shown_path (req), in_size,
             answer.status, g_bytes_get_size (answer.body), (g_get_monotonic_time () - start) / 1000);
  if (!vivarium_http_write_response (g_io_stream_get_output_stream (G_IO_STREAM (conn)), answer.status,
                                     "application/json", answer.body, &error))
    g_debug ("task %s: the worker left before the answer", gate->id);
  g_bytes_unref (answer.body);
  return TRUE;
}

/* --- task directories ---------------------------------------------------------------- */

static void
gate_free (TaskGate *gate)
{
  if (gate->service != NULL) {
    g_socket_service_stop (gate->service);
    g_socket_listener_close (G_SOCKET_LISTENER (gate->service));
    g_object_unref (gate->service);
  }
  g_mutex_clear (&gate->lock);
  g_free (gate->id);
  g_free (gate->dir);
  g_free (gate);
}

static gboolean
read_uid (const gchar *dir, guint32 *uid)
{
  g_autofree gchar *path = g_build_filename (dir, "uid", NULL);
  g_autofree gchar *text = NULL;
  guint64 v;
  struct stat st;

  /* Only the daemon's own files: root's directory, root's uid file. */
  if (g_lstat (dir, &st) != 0 || !S_ISDIR (st.st_mode) || st.st_uid != 0 || (st.st_mode & 0022) != 0)
    return FALSE;
  if (g_lstat (path, &st) != 0 || !S_ISREG (st.st_mode) || st.st_uid != 0 ||
      !g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  g_strstrip (text);
  if (!g_ascii_string_to_unsigned (text, 10, 1, G_MAXUINT32 - 1, &v, NULL))
    return FALSE;
  *uid = (guint32) v;
  return TRUE;
}

static TaskGate *
open_gate (const gchar *id, GError **error)
{
  TaskGate *gate = g_new0 (TaskGate, 1);
  g_autofree gchar *path = NULL;
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(GSocketAddress) addr = NULL;

  g_mutex_init (&gate->lock);
  gate->id = g_strdup (id);
  gate->dir = g_build_filename (tasks_dir, id, NULL);
  path = g_build_filename (gate->dir, SOCKET_NAME, NULL);
  if (!read_uid (gate->dir, &gate->uid)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not a task directory the daemon made", gate->dir);
    gate_free (gate);
    return NULL;
  }
  g_unlink (path);
  addr = g_unix_socket_address_new (path);
  sock = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, error);
  /* Bound 0600 by root in root's directory, then handed to the worker's uid:
   * nobody else can connect, and nobody can swap the path meanwhile. */
  if (sock == NULL ||
      !g_socket_bind (sock, addr, FALSE, error) || chmod (path, 0600) != 0 || lchown (path, gate->uid, 0) != 0 ||
      !g_socket_listen (sock, error)) {
    if (error != NULL && *error == NULL)
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "%s: %s", path, g_strerror (errno));
    gate_free (gate);
    return NULL;
  }
  gate->service = g_threaded_socket_service_new (4);
  g_signal_connect (gate->service, "run", G_CALLBACK (handle_connection), gate);
  if (!g_socket_listener_add_socket (G_SOCKET_LISTENER (gate->service), sock, NULL, error)) {
    gate_free (gate);
    return NULL;
  }
  g_socket_service_start (gate->service);
  g_message ("task %s: model socket open for uid %u", id, gate->uid);
  return gate;
}

static void
rescan (void)
{
  g_autoptr(GDir) dir = g_dir_open (tasks_dir, 0, NULL);
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer key;
  const gchar *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    if (name[0] == '.')
      continue;
    g_hash_table_add (seen, g_strdup (name));
    if (!g_hash_table_contains (gates, name)) {
      g_autoptr(GError) error = NULL;
      TaskGate *gate = open_gate (name, &error);
      if (gate == NULL)
        g_warning ("task %s: no model socket: %s", name, error->message);
      else
        g_hash_table_insert (gates, g_strdup (name), gate);
    }
  }
  g_hash_table_iter_init (&iter, gates);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    if (!g_hash_table_contains (seen, key)) {
      g_message ("task %s: model socket closed", (const gchar *) key);
      g_hash_table_iter_remove (&iter);
    }
  }
}

static void
changed_cb (GFileMonitor *monitor, GFile *file, GFile *other, GFileMonitorEvent event, gpointer user_data)
{
  rescan ();
}

/* A periodic look as well: a directory made and renamed in between two
 * inotify reads must not be missed. */
static gboolean
tick_cb (gpointer user_data)
{
  rescan ();
  return G_SOURCE_CONTINUE;
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GFile) dir = NULL;
  g_autoptr(GFileMonitor) monitor = NULL;
  const gchar *runtime = g_getenv ("VIVARIUM_RUNTIME_DIR");

  tasks_dir = g_build_filename (runtime != NULL ? runtime : VIVARIUM_RUNTIMEDIR, "tasks", NULL);
  if (!load_config (&error) || !check_allowed_address (&error)) {
    g_printerr ("vivarium-gateway: %s\n", error->message);
    return 1;
  }
  if (g_mkdir_with_parents (tasks_dir, 0711) != 0) {
    g_printerr ("vivarium-gateway: cannot create %s: %s\n", tasks_dir, g_strerror (errno));
    return 1;
  }
  gates = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) gate_free);
  dir = g_file_new_for_path (tasks_dir);
  monitor = g_file_monitor_directory (dir, G_FILE_MONITOR_WATCH_MOVES, NULL, &error);
  if (monitor == NULL) {
    g_printerr ("vivarium-gateway: cannot watch %s: %s\n", tasks_dir, error->message);
    return 1;
  }
  g_signal_connect (monitor, "changed", G_CALLBACK (changed_cb), NULL);
  g_timeout_add_seconds (2, tick_cb, NULL);
  rescan ();
  g_message ("serving model sockets under %s for %s:%u%s, model %s%s", tasks_dir, config.endpoint_host,
             config.endpoint_port, config.endpoint_prefix, config.model, config.key != NULL ? ", with a key" : "");
  sd_notify (0, "READY=1");
  g_main_loop_run (loop);
  return 0;
}
