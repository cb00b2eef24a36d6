/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

/* vivarium-gateway: an agent worker's one path to a model. For each task
 * directory the daemon makes under /run/vivarium/tasks/ (vd-gateway-client.h)
 * it serves a unix socket only that task's worker uid may connect to, and
 * forwards exactly POST /v1/chat/completions and GET /v1/models to
 * [Agent] Endpoint=, rewritten (vivarium-gateway-rewrite.h: the members of
 * an allow-list only, the model forced to [Agent] Model=, n 1, max_tokens
 * bounded), sizes, nesting and requests per task capped, and the
 * Authorization header added from a root-only key file (the worker never
 * holds the key). Its unit allows one address, the endpoint's; it reads that
 * back at start and refuses to run otherwise. Each request is logged by
 * sizes, status and latency, never content, and counted into <task>/usage
 * (root's, 0600) for the report; a gate reopened after a restart of the
 * gateway reads its counts back from there. */

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

#include "vivarium-config-layers.h"
#include "vivarium-gateway-rewrite.h"
#include "vivarium-http.h"

#define SOCKET_NAME "model.sock"
#define USAGE_NAME "usage"
/* sysexits.h's EX_CONFIG: the unit does not restart a gateway that refused
 * its configuration (RestartPreventExitStatus=), it stays failed and says why. */
#define EXIT_CONFIG 78

typedef struct {
  gchar   *endpoint_host;     /* an IP literal */
  guint16  endpoint_port;
  gchar   *endpoint_prefix;   /* "/v1" */
  gchar   *endpoint;          /* as configured, for messages */
  gchar   *model;
  gchar   *key;               /* from KeyFile=, or NULL */
  guint    max_tokens;
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
  VivariumGatewayUsage usage;
} TaskGate;

static Config config;
static GHashTable *gates;   /* id → TaskGate */
static gchar *tasks_dir;

/* --- configuration ------------------------------------------------------------- */

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

/* A required key no layer sets: the message says where a person sets it. */
static gchar *
get_required (GKeyFile *kf, const gchar *key, GError **error)
{
  g_autofree gchar *value = g_key_file_get_string (kf, "Agent", key, NULL);
  g_autofree gchar *where = NULL;

  if (value != NULL)
    g_strstrip (value);
  if (value != NULL && value[0] != '\0' && strlen (value) <= 256)
    return g_steal_pointer (&value);
  where = vivarium_config_layers_describe (vivarium_config_data_dir (), vivarium_config_config_dir ());
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
               "[Agent] %s= is not set (1 to 256 characters) in %s", key, where);
  return NULL;
}

static gboolean
load_config (GError **error)
{
  g_autoptr(GKeyFile) kf = vivarium_config_load_layers (vivarium_config_data_dir (), vivarium_config_config_dir (),
                                                        error);
  g_autofree gchar *key_file = NULL;

  if (kf == NULL)
    return FALSE;
  key_file = g_key_file_get_string (kf, "Agent", "KeyFile", NULL);
  config.model = get_required (kf, "Model", error);
  config.endpoint = config.model != NULL ? get_required (kf, "Endpoint", error) : NULL;
  if (config.endpoint == NULL)
    return FALSE;
  config.max_request = get_uint (kf, "MaxRequestBytes", 4 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_response = get_uint (kf, "MaxResponseBytes", 16 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_requests = get_uint (kf, "MaxRequestsPerTask", 200, 1, 100000);
  config.timeout_sec = get_uint (kf, "RequestTimeoutSec", 600, 1, 3600);
  config.max_tokens = get_uint (kf, "MaxTokens", 8192, 16, 1000000);
  if (!parse_endpoint (config.endpoint, error))
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

/* Root's, 0600, replaced atomically: the daemon reads it for the report, a
 * restarted gateway reads it back, nobody else reads it at all. */
static void
write_usage (TaskGate *gate)
{
  g_autofree gchar *path = g_build_filename (gate->dir, USAGE_NAME, NULL);
  g_autofree gchar *text = vivarium_gateway_usage_to_text (&gate->usage);
  g_autoptr(GError) error = NULL;

  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &error))
    g_warning ("task %s: cannot write its usage: %s", gate->id, error->message);
}

/* A gate opened again (the gateway restarted while the task ran) goes on
 * from the counts it had: the cap is not reset, the report not undercounted. */
static void
read_usage (TaskGate *gate)
{
  g_autofree gchar *path = g_build_filename (gate->dir, USAGE_NAME, NULL);
  g_autofree gchar *text = NULL;
  struct stat st;

  if (g_lstat (path, &st) != 0)
    return;
  if (!S_ISREG (st.st_mode) || st.st_uid != 0 || st.st_size > 4096 ||
      !g_file_get_contents (path, &text, NULL, NULL) || !vivarium_gateway_usage_parse (text, &gate->usage)) {
    /* Not ours: count from the most the cap allows, not from zero. */
    g_warning ("task %s: its usage file is unreadable; the task's request cap counts as spent", gate->id);
    gate->usage.attempts = config.max_requests;
    return;
  }
  g_message ("task %s: counts read back (%" G_GUINT64_FORMAT " requests made)", gate->id, gate->usage.attempts);
}

/* --- one request ------------------------------------------------------------------- */

typedef struct {
  guint    status;
  GBytes  *body;
  gboolean forwarded;   /* the endpoint answered (any status) */
  gboolean sent;        /* counted as a request: it went (or was sent) to the endpoint; else refused */
} Answer;

static Answer
refuse (guint status, const gchar *why)
{
  return (Answer) { status, vivarium_http_error_body (why), FALSE, FALSE };
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
  if (conn == NULL) {
    g_autofree gchar *why = g_strdup_printf ("the model endpoint %s is not reachable: %s", config.endpoint,
                                             error->message);
    return refuse (502, why);
  }
  if (!vivarium_http_write_request (g_io_stream_get_output_stream (G_IO_STREAM (conn)), method, path, host, headers,
                                    body, &error))
    return refuse (502, "the model endpoint dropped the request");
  reply = vivarium_http_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), FALSE, config.max_response, &error);
  if (reply == NULL)
    return refuse (502, g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE)
                        ? "the model's response is larger than the gateway's cap" : "the model's response is unreadable");
  return (Answer) { reply->status, g_bytes_ref (reply->body), TRUE, TRUE };
}

/* What the worker may see of the endpoint's answer: a 200 that is JSON
 * within the depth bound (its tokens counted), else the gateway's own
 * sentence; the endpoint's own error text never passes (it may quote the
 * key, the prompt, or anything else it pleases). */
static Answer
filter_answer (TaskGate *gate, Answer answer, gboolean chat)
{
  g_autofree gchar *why = NULL;
  guint64 prompt = 0, completion = 0;

  if (!answer.forwarded)
    return answer;
  if (answer.status != 200) {
    g_bytes_unref (answer.body);
    answer.body = vivarium_gateway_upstream_error (answer.status);
    return answer;
  }
  if (!vivarium_gateway_check_response (answer.body, &prompt, &completion, &why)) {
    g_bytes_unref (answer.body);
    answer = refuse (502, why);
    answer.sent = TRUE;
    return answer;
  }
  if (chat) {
    g_mutex_lock (&gate->lock);
    gate->usage.prompt_tokens += prompt;
    gate->usage.completion_tokens += completion;
    g_mutex_unlock (&gate->lock);
  }
  return answer;
}

/* Counted before it goes out, like the attempt: a gateway killed while
 * the endpoint thinks has counted the request the endpoint is working on. */
static Answer
forward_counted (TaskGate *gate, const gchar *method, const gchar *suffix, GBytes *body, gboolean chat)
{
  Answer answer;

  g_mutex_lock (&gate->lock);
  gate->usage.requests++;
  write_usage (gate);
  g_mutex_unlock (&gate->lock);
  answer = filter_answer (gate, forward (method, suffix, body), chat);
  answer.sent = TRUE;
  return answer;
}

static Answer
serve (TaskGate *gate, VivariumHttpMessage *req)
{
  g_autoptr(GBytes) body = NULL;
  g_autofree gchar *why = NULL;
  guint64 n;
  VivariumGatewayPolicy policy = { config.model, config.max_tokens };

  /* Persisted at once: a restart of the gateway does not give it back. */
  g_mutex_lock (&gate->lock);
  n = ++gate->usage.attempts;
  write_usage (gate);
  g_mutex_unlock (&gate->lock);
  if (n > config.max_requests)
    return refuse (429, "this task used up its model requests");
  if (g_str_equal (req->path, "/v1/models"))
    return g_str_equal (req->method, "GET") ? forward_counted (gate, "GET", "/models", NULL, FALSE)
                                            : refuse (405, "GET only");
  if (!g_str_equal (req->path, "/v1/chat/completions"))
    return refuse (404, "the gateway serves only POST /v1/chat/completions and GET /v1/models");
  if (!g_str_equal (req->method, "POST"))
    return refuse (405, "POST only");
  body = vivarium_gateway_rewrite_chat (req->body, &policy, &why);
  if (body == NULL)
    return refuse (403, why);
  return forward_counted (gate, "POST", "/chat/completions", body, TRUE);
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
  if (!answer.sent)
    gate->usage.refused++;
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
  read_usage (gate);
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

/* The reason goes to the journal and to the unit's StatusText=, which
 * systemd keeps while the unit stays failed: the daemon reads it there to
 * tell a task why its model gateway is not running. The barrier makes sure
 * systemd has taken the status before the process is gone. */
static int
refuse_to_start (const gchar *why)
{
  g_printerr ("vivarium-gateway: %s\n", why);
  sd_notifyf (0, "STATUS=%s", why);
  sd_notify_barrier (0, 5 * G_USEC_PER_SEC);
  return EXIT_CONFIG;
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
  if (!load_config (&error) || !check_allowed_address (&error))
    return refuse_to_start (error->message);
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
  g_message ("serving model sockets under %s for %s:%u%s, model %s, max_tokens %u%s", tasks_dir,
             config.endpoint_host, config.endpoint_port, config.endpoint_prefix, config.model, config.max_tokens,
             config.key != NULL ? ", with a key" : "");
  sd_notifyf (0, "READY=1\nSTATUS=serving %s for %s", config.model, config.endpoint);
  g_main_loop_run (loop);
  return 0;
}
