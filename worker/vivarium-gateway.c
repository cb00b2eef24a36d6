/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumGateway"

/* vivarium-gateway: an agent worker's one path to a model. For each task
 * directory the daemon makes under /run/vivarium/tasks/ (vd-gateway-client.h)
 * it serves a unix socket only that task's worker uid may connect to, and
 * forwards exactly POST /v1/chat/completions and GET /v1/models to
 * [Agent] Endpoint= (libsoup: a SoupServer per socket, a SoupSession per
 * upstream request, TLS by glib-networking), rewritten (vivarium-gateway-rewrite.h: the members of
 * an allow-list only, the model forced to [Agent] Model=, n 1, max_tokens
 * bounded), sizes, nesting and requests per task capped, and the
 * Authorization header added from a root-only key file or a secret of the
 * daemon's store (the worker never holds the key). An endpoint on an
 * address: its unit allows that one address, read back at start. An
 * endpoint by name (https only): each connection resolves it again through
 * vivarium-gateway-resolver.h, which refuses the guard's denied ranges and
 * opens the unit's firewall to the checked addresses only
 * (vivarium-gateway-firewall.h). Each request is logged by
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
#include <libsoup/soup.h>
#include <systemd/sd-daemon.h>

#include "vivarium-config-layers.h"
#include "vivarium-gateway-firewall.h"
#include "vivarium-gateway-resolver.h"
#include "vivarium-gateway-rewrite.h"
#include "vivarium-secret.h"

#define SOCKET_NAME "model.sock"
#define USAGE_NAME "usage"
/* sysexits.h's EX_CONFIG: the unit does not restart a gateway that refused
 * its configuration (RestartPreventExitStatus=), it stays failed and says why. */
#define EXIT_CONFIG 78
/* Connections a task's worker may hold open at once (the old gateway's
 * four threads per task, and a few waiting); more are shut at once. */
#define CONNECTIONS_MAX 8
/* A worker that opens a connection and says nothing holds it this long. */
#define IDLE_SEC 120
#define KEY_MAX 4096
/* The guard's additions to the deny list, written by the daemon at its
 * start (vd-gateway-client.h); a few hundred bytes on most hosts. */
#define HOST_DENY_NAME "gateway-deny"
#define HOST_DENY_FILE_MAX (1024 * 1024)

typedef struct {
  gchar   *endpoint_host;     /* an IP literal (http) or a name (https) */
  guint16  endpoint_port;
  gboolean by_name;           /* https: resolved by the gateway, firewall follows */
  GUri    *endpoint_base;     /* scheme://host:port */
  gchar   *endpoint_prefix;   /* "/v1" */
  gchar   *endpoint;          /* as configured, for messages */
  gchar   *ca_file;           /* EndpointCAFile=, or NULL: the system's trust store */
  gchar   *model;
  gchar   *auth_header;       /* "Authorization", or a secret's header; NULL without a key */
  gchar   *auth_value;        /* "Bearer KEY" (never logged) */
  gchar   *key_source;        /* "KeyFile=PATH" or "KeySecret=NAME", for messages */
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
  SoupServer     *server;
  guint           open;       /* connections being served */
  GMutex          lock;
  VivariumGatewayUsage usage;
} TaskGate;

static Config config;
static GHashTable *gates;   /* id → TaskGate */
static gchar *tasks_dir;
static gchar *host_deny_path;
static GTlsDatabase *endpoint_db;          /* EndpointCAFile=, or NULL */
static VivariumGatewayResolver *resolver;  /* the process's, checking */

/* --- configuration ------------------------------------------------------------- */

/* Root's, readable by root only: anything else is refused, not used. */
static gboolean
check_root_only (const gchar *what, const gchar *path, GError **error)
{
  struct stat st;

  if (g_lstat (path, &st) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "%s %s: %s", what, path, g_strerror (errno));
    return FALSE;
  }
  if (!S_ISREG (st.st_mode) || st.st_uid != 0 || (st.st_mode & 0077) != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                 "%s %s must be a file that belongs to root and is readable by root only (mode 0600)", what, path);
    return FALSE;
  }
  return TRUE;
}

static gboolean
read_key (const gchar *path, GError **error)
{
  g_autofree gchar *text = NULL;

  if (!check_root_only ("KeyFile", path, error) || !g_file_get_contents (path, &text, NULL, error))
    return FALSE;
  g_strstrip (text);
  if (text[0] == '\0' || strchr (text, '\n') != NULL || strchr (text, '\r') != NULL || strlen (text) > KEY_MAX) {
    memset (text, 0, strlen (text));
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "KeyFile %s must hold one line, the key", path);
    return FALSE;
  }
  config.auth_header = g_strdup ("Authorization");
  config.auth_value = g_strconcat ("Bearer ", text, NULL);
  config.key_source = g_strdup_printf ("KeyFile=%s", path);
  memset (text, 0, strlen (text));
  return TRUE;
}

/* A secret of the daemon's store (docs/secrets.md), sent in its own header
 * and format, and only to a host it names: the endpoint must be https by
 * a name the secret lists. */
static gboolean
read_secret (const gchar *name, GError **error)
{
  const gchar *state = g_getenv ("VIVARIUM_STATE_DIR");
  g_autofree gchar *dir = g_build_filename (state != NULL ? state : VIVARIUM_STATEDIR, "secrets", NULL);
  g_autofree gchar *file = g_strconcat (name, ".secret", NULL);
  g_autofree gchar *path = g_build_filename (dir, file, NULL);
  g_autoptr(GPtrArray) secrets = NULL;
  g_autofree gchar *host = NULL;
  VivariumSecret *secret;

  if (!vivarium_secret_name_is_valid (name)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] KeySecret=%s is not a secret's name (a letter or _, then letters, digits, _)", name);
    return FALSE;
  }
  if (!check_root_only ("the secret", path, error) || (secrets = vivarium_secrets_load (path, error)) == NULL)
    return FALSE;
  if (secrets->len != 1 || g_strcmp0 (((VivariumSecret *) secrets->pdata[0])->name, name) != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s does not hold the one secret %s", path, name);
    return FALSE;
  }
  secret = secrets->pdata[0];
  host = g_ascii_strdown (config.endpoint_host, -1);
  if (!config.by_name || !vivarium_secret_applies_to (secret, host)) {
    g_autofree gchar *hosts = g_strjoinv (", ", secret->hosts);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                 "the secret %s is for %s, not for the endpoint %s: a secret goes only to an https endpoint "
                 "whose name it lists", name, hosts, config.endpoint);
    return FALSE;
  }
  config.auth_header = g_strdup (secret->header);
  config.auth_value = vivarium_secret_render (secret);
  config.key_source = g_strdup_printf ("KeySecret=%s", name);
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
endpoint_refused (const gchar *endpoint, GError **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
               "[Agent] Endpoint=%s must be http://ADDRESS:PORT/PATH or https://NAME[:PORT]/PATH "
               "(no user, no query, no fragment)", endpoint);
  return FALSE;
}

static gboolean
parse_endpoint (const gchar *endpoint, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (endpoint, G_URI_FLAGS_NONE, NULL);
  g_autoptr(GInetAddress) addr = NULL;
  const gchar *scheme;
  gboolean tls;

  if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0' ||
      g_uri_get_userinfo (uri) != NULL || g_uri_get_query (uri) != NULL || g_uri_get_fragment (uri) != NULL)
    return endpoint_refused (endpoint, error);
  scheme = g_uri_get_scheme (uri);
  tls = g_strcmp0 (scheme, "https") == 0;
  if (!tls && g_strcmp0 (scheme, "http") != 0)
    return endpoint_refused (endpoint, error);
  addr = g_inet_address_new_from_string (g_uri_get_host (uri));
  /* Plain http on an address, its unit's one allowed address; a name
   * only with TLS, whose certificate proves the name. */
  if (!tls && addr == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] Endpoint=%s: plain http must name an IP address; a host name needs https", endpoint);
    return FALSE;
  }
  if (tls && addr != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] Endpoint=%s: an https endpoint is named by its host name (its certificate is checked "
                 "against it), not by an address", endpoint);
    return FALSE;
  }
  config.by_name = tls;
  config.endpoint_host = g_strdup (g_uri_get_host (uri));
  config.endpoint_port = g_uri_get_port (uri) > 0 ? (guint16) g_uri_get_port (uri) : (tls ? 443 : 80);
  config.endpoint_base = g_uri_build (G_URI_FLAGS_NONE, scheme, NULL, config.endpoint_host, config.endpoint_port,
                                      "", NULL, NULL);
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

static gchar *
get_optional (GKeyFile *kf, const gchar *key)
{
  g_autofree gchar *value = g_key_file_get_string (kf, "Agent", key, NULL);

  if (value != NULL)
    g_strstrip (value);
  return value != NULL && value[0] != '\0' ? g_steal_pointer (&value) : NULL;
}

static gboolean
load_key (GKeyFile *kf, GError **error)
{
  g_autofree gchar *key_file = get_optional (kf, "KeyFile");
  g_autofree gchar *key_secret = get_optional (kf, "KeySecret");

  if (key_file != NULL && key_secret != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] KeyFile= and KeySecret= are both set: the endpoint's key comes from one of them; "
                 "remove the other");
    return FALSE;
  }
  if (key_file != NULL)
    return read_key (key_file, error);
  if (key_secret != NULL)
    return read_secret (key_secret, error);
  return TRUE;
}

static gboolean
load_config (GError **error)
{
  g_autoptr(GKeyFile) kf = vivarium_config_load_layers (vivarium_config_data_dir (), vivarium_config_config_dir (),
                                                        error);

  if (kf == NULL)
    return FALSE;
  config.model = get_required (kf, "Model", error);
  config.endpoint = config.model != NULL ? get_required (kf, "Endpoint", error) : NULL;
  if (config.endpoint == NULL)
    return FALSE;
  config.max_request = get_uint (kf, "MaxRequestBytes", 4 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_response = get_uint (kf, "MaxResponseBytes", 16 * 1024 * 1024, 4096, 64 * 1024 * 1024);
  config.max_requests = get_uint (kf, "MaxRequestsPerTask", 200, 1, 100000);
  config.timeout_sec = get_uint (kf, "RequestTimeoutSec", 600, 1, 3600);
  config.max_tokens = get_uint (kf, "MaxTokens", 8192, 16, 1000000);
  config.ca_file = get_optional (kf, "EndpointCAFile");
  if (!parse_endpoint (config.endpoint, error))
    return FALSE;
  if (config.ca_file != NULL && !config.by_name) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "[Agent] EndpointCAFile= is for an https endpoint; %s is plain http", config.endpoint);
    return FALSE;
  }
  return load_key (kf, error);
}

/* --- the network: the firewall, the resolver, the client ------------------------------ */

/* What the daemon's guard denies besides the built-in ranges: the host's
 * own addresses and [Guard] ExtraDeny=. A name that resolves only there is
 * refused like one in a built-in range; without the list the gateway does
 * not follow a name at all. */
static GPtrArray *
load_host_deny (GError **error)
{
  g_autofree gchar *text = NULL;
  g_autoptr(GError) local = NULL;
  gsize len = 0;
  struct stat st;

  if (!check_root_only ("the guard's list for the gateway", host_deny_path, &local) ||
      !g_file_get_contents (host_deny_path, &text, &len, &local)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                 "an https endpoint by name needs the guard's list of the host's own addresses, which vivariumd "
                 "writes when it starts: %s", local->message);
    return NULL;
  }
  if (g_lstat (host_deny_path, &st) != 0 || st.st_size > HOST_DENY_FILE_MAX || len > HOST_DENY_FILE_MAX ||
      memchr (text, '\0', len) != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not the guard's list for the gateway (over %u "
                 "bytes, or not text)", host_deny_path, HOST_DENY_FILE_MAX);
    return NULL;
  }
  return vivarium_gateway_deny_parse (text, error);
}

/* Every lookup of the process comes here (vivarium-gateway-resolver.h),
 * its addresses already outside the deny list: the endpoint's name only,
 * the firewall opened to them before the connection. */
static gboolean
admit_cb (const gchar *host, GList *addresses, gpointer user_data, GError **error)
{
  if (!config.by_name || g_ascii_strcasecmp (host, config.endpoint_host) != 0) {
    g_set_error (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, "the gateway resolves %s only",
                 config.by_name ? config.endpoint_host : "no name");
    return FALSE;
  }
  return vivarium_gateway_firewall_follow (addresses, error);
}

static gboolean
set_up_network (GError **error)
{
  g_autoptr(GResolver) system = g_resolver_get_default ();
  g_autoptr(GInetAddress) fixed = config.by_name ? NULL : g_inet_address_new_from_string (config.endpoint_host);
  g_autoptr(GPtrArray) host_deny = NULL;

  if (config.by_name ? !vivarium_gateway_firewall_follow_init (config.timeout_sec + 60, error)
                     : !vivarium_gateway_firewall_fixed (fixed, error))
    return FALSE;
  if (config.by_name && !g_tls_backend_supports_tls (g_tls_backend_get_default ())) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                         "an https endpoint needs glib-networking (GIO's TLS backend), which is not installed");
    return FALSE;
  }
  if (config.ca_file != NULL) {
    g_autoptr(GError) local = NULL;
    endpoint_db = g_tls_file_database_new (config.ca_file, &local);
    if (endpoint_db == NULL) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "[Agent] EndpointCAFile=%s is not a readable PEM bundle of certificates: %s", config.ca_file,
                   local->message);
      return FALSE;
    }
  }
  if (config.by_name && (host_deny = load_host_deny (error)) == NULL)
    return FALSE;
  if (host_deny != NULL)
    g_message ("the guard denies %u ranges besides the built-in ones (the host's own addresses, [Guard] ExtraDeny=)",
               host_deny->len);
  resolver = vivarium_gateway_resolver_new (system, host_deny, admit_cb, NULL);
  g_resolver_set_default (G_RESOLVER (resolver));
  return TRUE;
}

/* A session per request: libsoup keeps a host's GNetworkAddress, which
 * keeps what it resolved, for the session's life; a new one resolves the
 * name again. No proxy (the environment's or GNOME's): the gateway
 * connects to the endpoint itself, to an address it checked. */
static SoupSession *
session_new (void)
{
  SoupSession *session = soup_session_new_with_options ("timeout", config.timeout_sec, "idle-timeout", 1,
                                                        "proxy-resolver", NULL, "user-agent", "vivarium-gateway",
                                                        NULL);

  if (endpoint_db != NULL)
    soup_session_set_tls_database (session, endpoint_db);
  return session;
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

/* One request of a worker, from its headers to the answer it gets. */
typedef struct {
  TaskGate          *gate;
  SoupServerMessage *msg;
  SoupSession       *session;   /* its own: a fresh lookup of the name */
  SoupMessage       *up;        /* to the endpoint, or NULL */
  GInputStream      *stream;    /* its body */
  GByteArray        *body;
  const gchar       *method;    /* shown: "GET", "POST" or "(other method)" */
  const gchar       *path;      /* shown */
  gsize              in_size;
  gint64             start;
  gboolean           chat;
  gboolean           paused;
  GTlsCertificateFlags tls_errors;   /* what glib-networking found wrong, if it did */
} Exchange;

static void
exchange_free (Exchange *x)
{
  g_clear_object (&x->up);
  g_clear_object (&x->stream);
  g_clear_object (&x->session);
  g_clear_pointer (&x->body, g_byte_array_unref);
  g_object_unref (x->msg);
  g_free (x);
}

/* The worker's words never reach the journal: only names we know. */
static const gchar *
shown_method (const gchar *method)
{
  return g_strcmp0 (method, "GET") == 0 ? "GET" : g_strcmp0 (method, "POST") == 0 ? "POST" : "(other method)";
}

static const gchar *
shown_path (const gchar *path)
{
  if (g_strcmp0 (path, "/v1/chat/completions") == 0)
    return "/v1/chat/completions";
  return g_strcmp0 (path, "/v1/models") == 0 ? "/v1/models" : "(other path)";
}

/* The answer the worker gets, and the one journal line: sizes, status,
 * latency, never what was said. @sent: it was counted as a request. */
static void
answer (Exchange *x, guint status, GBytes *body, gboolean sent)
{
  TaskGate *gate = x->gate;
  gsize len = 0;
  const gchar *data = g_bytes_get_data (body, &len);

  g_mutex_lock (&gate->lock);
  if (!sent)
    gate->usage.refused++;
  write_usage (gate);
  g_mutex_unlock (&gate->lock);
  g_message ("task %s: %s %s, %zu bytes in, status %u, %zu bytes out, %" G_GINT64_FORMAT " ms", gate->id,
             x->method, x->path, x->in_size, status, len, (g_get_monotonic_time () - x->start) / 1000);
  soup_server_message_set_status (x->msg, status, NULL);
  soup_server_message_set_response (x->msg, "application/json", SOUP_MEMORY_COPY, data, len);
  /* One request per connection, as the agent and the old gateway speak. */
  soup_message_headers_replace (soup_server_message_get_response_headers (x->msg), "Connection", "close");
  if (x->paused)
    soup_server_message_unpause (x->msg);
  exchange_free (x);
}

static void
refuse (Exchange *x, guint status, const gchar *why, gboolean sent)
{
  g_autoptr(GBytes) body = vivarium_gateway_error_body (why);

  answer (x, status, body, sent);
}

/* What the worker may see of the endpoint's answer: a 200 that is JSON
 * within the depth bound (its tokens counted), else the gateway's own
 * sentence; the endpoint's own error text never passes (it may quote the
 * key, the prompt, or anything else it pleases). */
static void
answer_upstream (Exchange *x)
{
  guint status = soup_message_get_status (x->up);
  g_autoptr(GBytes) body = g_byte_array_free_to_bytes (g_steal_pointer (&x->body));
  g_autofree gchar *why = NULL;
  guint64 prompt = 0, completion = 0;

  if (status != 200) {
    g_autoptr(GBytes) replaced = vivarium_gateway_upstream_error (status);
    answer (x, status, replaced, TRUE);
    return;
  }
  if (!vivarium_gateway_check_response (body, &prompt, &completion, &why)) {
    refuse (x, 502, why, TRUE);
    return;
  }
  if (x->chat) {
    g_mutex_lock (&x->gate->lock);
    x->gate->usage.prompt_tokens += prompt;
    x->gate->usage.completion_tokens += completion;
    g_mutex_unlock (&x->gate->lock);
  }
  answer (x, 200, body, TRUE);
}

static void read_more (Exchange *x);

static void
read_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Exchange *x = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) chunk = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), result, &error);

  if (chunk == NULL) {
    refuse (x, 502, "the model's response is unreadable", TRUE);
    return;
  }
  if (g_bytes_get_size (chunk) == 0) {
    answer_upstream (x);
    return;
  }
  if (x->body->len + g_bytes_get_size (chunk) > config.max_response) {
    refuse (x, 502, "the model's response is larger than the gateway's cap", TRUE);
    return;
  }
  g_byte_array_append (x->body, g_bytes_get_data (chunk, NULL), g_bytes_get_size (chunk));
  read_more (x);
}

static void
read_more (Exchange *x)
{
  g_input_stream_read_bytes_async (x->stream, 64 * 1024, G_PRIORITY_DEFAULT, NULL, read_cb, x);
}

/* A sentence of the gateway's own for a connection that failed: which
 * check it was, never a key (none is in any error). */
static gchar *
unreachable_reason (Exchange *x, const GError *error)
{
  GTlsCertificateFlags flags = x->tls_errors | soup_message_get_tls_peer_certificate_errors (x->up);

  if (error->domain == G_TLS_ERROR && (flags & G_TLS_CERTIFICATE_UNKNOWN_CA) != 0)
    return g_strdup_printf ("the model endpoint %s presented a certificate signed by an authority the gateway does "
                            "not trust (%s)", config.endpoint,
                            config.ca_file != NULL ? "not in [Agent] EndpointCAFile=" : "not in the system's trust "
                            "store; for a private CA set [Agent] EndpointCAFile=");
  if (error->domain == G_TLS_ERROR && (flags & G_TLS_CERTIFICATE_BAD_IDENTITY) != 0)
    return g_strdup_printf ("the model endpoint %s presented a certificate for another name than %s",
                            config.endpoint, config.endpoint_host);
  if (error->domain == G_TLS_ERROR)
    return g_strdup_printf ("the model endpoint %s failed TLS verification (certificate problems 0x%x: expired, "
                            "revoked or otherwise unacceptable)", config.endpoint, (guint) flags);
  if (error->domain == G_RESOLVER_ERROR) {
    g_autofree gchar *ours = vivarium_gateway_resolver_last_refusal (resolver);
    return g_strdup_printf ("the model endpoint %s is refused: %s", config.endpoint,
                            ours != NULL ? ours : error->message);
  }
  return g_strdup_printf ("the model endpoint %s is not reachable: %s", config.endpoint, error->message);
}

/* Asked only when the certificate failed verification: it stays refused;
 * what was wrong with it goes into the sentence. */
static gboolean
accept_certificate_cb (SoupMessage *msg, GTlsCertificate *cert, GTlsCertificateFlags errors, gpointer user_data)
{
  Exchange *x = user_data;

  x->tls_errors = errors;
  return FALSE;
}

static void
sent_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Exchange *x = user_data;
  g_autoptr(GError) error = NULL;
  goffset length;

  x->stream = soup_session_send_finish (SOUP_SESSION (source), result, &error);
  if (x->stream == NULL) {
    g_autofree gchar *why = unreachable_reason (x, error);
    g_message ("task %s: %s", x->gate->id, why);
    refuse (x, 502, why, TRUE);
    return;
  }
  length = soup_message_headers_get_content_length (soup_message_get_response_headers (x->up));
  if (length > (goffset) config.max_response) {
    refuse (x, 502, "the model's response is larger than the gateway's cap", TRUE);
    return;
  }
  x->body = g_byte_array_new ();
  read_more (x);
}

/* Counted before it goes out, like the attempt: a gateway killed while
 * the endpoint thinks has counted the request the endpoint is working on. */
static void
forward (Exchange *x, const gchar *method, const gchar *suffix, GBytes *body)
{
  g_autofree gchar *path = g_strconcat (config.endpoint_prefix, suffix, NULL);
  g_autoptr(GUri) uri = g_uri_parse_relative (config.endpoint_base, path, G_URI_FLAGS_NONE, NULL);
  SoupMessageHeaders *headers;

  g_mutex_lock (&x->gate->lock);
  x->gate->usage.requests++;
  write_usage (x->gate);
  g_mutex_unlock (&x->gate->lock);
  x->up = soup_message_new_from_uri (method, uri);
  headers = soup_message_get_request_headers (x->up);
  soup_message_headers_replace (headers, "Connection", "close");
  if (config.auth_header != NULL)
    soup_message_headers_replace (headers, config.auth_header, config.auth_value);
  if (body != NULL)
    soup_message_set_request_body_from_bytes (x->up, "application/json", body);
  g_signal_connect (x->up, "accept-certificate", G_CALLBACK (accept_certificate_cb), x);
  soup_server_message_pause (x->msg);
  x->paused = TRUE;
  x->session = session_new ();
  soup_session_send_async (x->session, x->up, G_PRIORITY_DEFAULT, NULL, sent_cb, x);
}

static void
serve (Exchange *x, const gchar *method, const gchar *path, GBytes *body)
{
  g_autoptr(GBytes) rewritten = NULL;
  g_autofree gchar *why = NULL;
  guint64 n;
  VivariumGatewayPolicy policy = { config.model, config.max_tokens };

  /* Persisted at once: a restart of the gateway does not give it back. */
  g_mutex_lock (&x->gate->lock);
  n = ++x->gate->usage.attempts;
  write_usage (x->gate);
  g_mutex_unlock (&x->gate->lock);
  if (n > config.max_requests)
    refuse (x, 429, "this task used up its model requests", FALSE);
  else if (g_str_equal (path, "/v1/models") && !g_str_equal (method, "GET"))
    refuse (x, 405, "GET only", FALSE);
  else if (g_str_equal (path, "/v1/models"))
    forward (x, "GET", "/models", NULL);
  else if (!g_str_equal (path, "/v1/chat/completions"))
    refuse (x, 404, "the gateway serves only POST /v1/chat/completions and GET /v1/models", FALSE);
  else if (!g_str_equal (method, "POST"))
    refuse (x, 405, "POST only", FALSE);
  else if ((rewritten = vivarium_gateway_rewrite_chat (body, &policy, &why)) == NULL)
    refuse (x, 403, why, FALSE);
  else {
    x->chat = TRUE;
    forward (x, "POST", "/chat/completions", rewritten);
  }
}

static Exchange *
exchange_new (TaskGate *gate, SoupServerMessage *msg)
{
  Exchange *x = g_new0 (Exchange, 1);

  x->gate = gate;
  x->msg = g_object_ref (msg);
  x->start = g_get_monotonic_time ();
  x->method = shown_method (soup_server_message_get_method (msg));
  x->path = shown_path (g_uri_get_path (soup_server_message_get_uri (msg)));
  return x;
}

static void
handle_cb (SoupServer *server, SoupServerMessage *msg, const gchar *path, GHashTable *query, gpointer user_data)
{
  Exchange *x = exchange_new (user_data, msg);
  g_autoptr(GBytes) body = soup_message_body_flatten (soup_server_message_get_request_body (msg));

  x->in_size = g_bytes_get_size (body);
  if (x->in_size > config.max_request) {
    refuse (x, 413, "the request is malformed or too large", FALSE);
    return;
  }
  /* libsoup decodes %-escapes in the path; a query is not served. */
  if (query != NULL) {
    refuse (x, 404, "the gateway serves only POST /v1/chat/completions and GET /v1/models", FALSE);
    return;
  }
  serve (x, soup_server_message_get_method (msg), path, body);
}

/* Before the body is read: one larger than the bound is refused unread,
 * and one without a length (chunked) is not taken at all. */
static void
early_cb (SoupServer *server, SoupServerMessage *msg, const gchar *path, GHashTable *query, gpointer user_data)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  SoupEncoding encoding = soup_message_headers_get_encoding (headers);

  if (encoding == SOUP_ENCODING_CHUNKED || encoding == SOUP_ENCODING_EOF ||
      (encoding == SOUP_ENCODING_CONTENT_LENGTH &&
       soup_message_headers_get_content_length (headers) > (goffset) config.max_request)) {
    Exchange *x = exchange_new (user_data, msg);
    refuse (x, encoding == SOUP_ENCODING_CONTENT_LENGTH ? 413 : 411, "the request is malformed or too large", FALSE);
  }
}

static void
connection_gone (gpointer user_data, GObject *where_the_message_was)
{
  TaskGate *gate = user_data;

  gate->open--;
}

/* Each connection carries one request: a worker holds at most
 * CONNECTIONS_MAX of them, none idle for long. */
static void
started_cb (SoupServer *server, SoupServerMessage *msg, gpointer user_data)
{
  TaskGate *gate = user_data;
  GSocket *sock = soup_server_message_get_socket (msg);

  if (sock != NULL)
    g_socket_set_timeout (sock, IDLE_SEC);
  gate->open++;
  g_object_weak_ref (G_OBJECT (msg), connection_gone, gate);
  if (gate->open > CONNECTIONS_MAX && sock != NULL) {
    g_message ("task %s: more than %u connections at once; one shut", gate->id, CONNECTIONS_MAX);
    g_socket_shutdown (sock, TRUE, TRUE, NULL);
  }
}

static gboolean
serve_socket (TaskGate *gate, GSocket *sock, GError **error)
{
  gate->server = soup_server_new ("server-header", NULL, NULL);
  soup_server_add_early_handler (gate->server, NULL, early_cb, gate, NULL);
  soup_server_add_handler (gate->server, NULL, handle_cb, gate, NULL);
  g_signal_connect (gate->server, "request-started", G_CALLBACK (started_cb), gate);
  return soup_server_listen_socket (gate->server, sock, 0, error);
}

/* --- task directories ---------------------------------------------------------------- */

static void
gate_free (TaskGate *gate)
{
  if (gate->server != NULL) {
    soup_server_disconnect (gate->server);
    g_object_unref (gate->server);
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
  if (!serve_socket (gate, sock, error)) {
    gate_free (gate);
    return NULL;
  }
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
  host_deny_path = g_build_filename (runtime != NULL ? runtime : VIVARIUM_RUNTIMEDIR, HOST_DENY_NAME, NULL);
  if (!load_config (&error) || !vivarium_gateway_firewall_open (&error) || !set_up_network (&error))
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
  g_message ("serving model sockets under %s for %s, model %s, max_tokens %u%s%s", tasks_dir,
             config.endpoint, config.model, config.max_tokens,
             config.key_source != NULL ? ", with the key of " : "", config.key_source != NULL ? config.key_source : "");
  sd_notifyf (0, "READY=1\nSTATUS=serving %s for %s", config.model, config.endpoint);
  g_main_loop_run (loop);
  return 0;
}
