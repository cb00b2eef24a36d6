/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdEgressLog"

#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-egress-policy.h"
#include "vd-egress-log.h"
#include "vivarium-secret.h"
#include "vd-fs.h"

/* Caps on what one entry may carry into a reply or a report. */
#define HOST_MAX   253
#define REASON_MAX 512
#define WORD_MAX   16
/* The report names at most this many destinations of each verdict. */
#define SUMMARY_HOSTS_MAX 5
/* Placeholder refusals quoted in the summary; the rest are counted. */
#define SUMMARY_SECRET_REFUSALS_MAX 3

typedef struct {
  gint64   time_usec;
  gchar   *host;
  guint16  port;
  gchar   *via;
  gchar   *verdict;
  gchar   *reason;
  guint64  bytes_up;
  guint64  bytes_down;
  guint64  duration_ms;
} Entry;

static void
entry_clear (Entry *e)
{
  g_free (e->host);
  g_free (e->via);
  g_free (e->verdict);
  g_free (e->reason);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Entry, entry_clear)

static gchar *
capped_string (JsonObject *o, const gchar *member, gsize max)
{
  JsonNode *n = json_object_get_member (o, member);
  const gchar *s;

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return g_strdup ("");
  s = json_node_get_string (n);
  if (!g_utf8_validate (s, -1, NULL))
    return g_strdup ("(invalid)");
  return g_utf8_make_valid (s, MIN (strlen (s), max));
}

static guint64
count (JsonObject *o, const gchar *member)
{
  JsonNode *n = json_object_get_member (o, member);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    return 0;
  return (guint64) MAX (json_node_get_int (n), 0);
}

/* The proxy logs hosts normalised, or "(invalid)"; anything else is not
 * taken on its word: a report line names only what is a host name. */
static gchar *
host_of (JsonObject *o)
{
  g_autofree gchar *host = capped_string (o, "host", HOST_MAX);
  g_autofree gchar *normal = host[0] != '\0' ? vivarium_egress_normalize_host (host) : NULL;

  if (host[0] == '\0' || g_str_equal (host, "(invalid)"))
    return g_steal_pointer (&host);
  return normal != NULL ? g_steal_pointer (&normal) : g_strdup ("(invalid)");
}

static gint64
parse_time (JsonObject *o)
{
  g_autofree gchar *text = capped_string (o, "time", 64);
  g_autoptr(GDateTime) dt = g_date_time_new_from_iso8601 (text, NULL);

  return dt != NULL ? g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt) : 0;
}

static gboolean
parse_entry (const gchar *line, gsize len, Entry *e)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  JsonNode *root;
  JsonObject *o;

  if (len == 0 || len > 4096 || !json_parser_load_from_data (parser, line, (gssize) len, NULL))
    return FALSE;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  o = json_node_get_object (root);
  e->time_usec = parse_time (o);
  e->host = host_of (o);
  e->port = (guint16) MIN (count (o, "port"), G_MAXUINT16);
  e->via = capped_string (o, "via", WORD_MAX);
  e->verdict = capped_string (o, "verdict", WORD_MAX);
  e->reason = capped_string (o, "reason", REASON_MAX);
  e->bytes_up = count (o, "bytes_up");
  e->bytes_down = count (o, "bytes_down");
  e->duration_ms = count (o, "duration_ms");
  return e->verdict[0] != '\0';
}

static GVariant *
entry_to_variant (const Entry *e)
{
  GVariantDict d;

  g_variant_dict_init (&d, NULL);
  g_variant_dict_insert (&d, "time", "x", e->time_usec);
  g_variant_dict_insert (&d, "host", "s", e->host);
  g_variant_dict_insert (&d, "port", "q", e->port);
  g_variant_dict_insert (&d, "via", "s", e->via);
  g_variant_dict_insert (&d, "verdict", "s", e->verdict);
  g_variant_dict_insert (&d, "reason", "s", e->reason);
  g_variant_dict_insert (&d, "bytes-up", "t", e->bytes_up);
  g_variant_dict_insert (&d, "bytes-down", "t", e->bytes_down);
  g_variant_dict_insert (&d, "duration-ms", "t", e->duration_ms);
  return g_variant_dict_end (&d);
}

typedef gboolean (*EntryFunc) (const Entry *e, guint64 index, gpointer user_data);

/* Calls @func for each entry of @bytes in order; *n: how many there are. */
static void
for_each_entry_in (GBytes *bytes, EntryFunc func, gpointer user_data, guint64 *n)
{
  gsize size;
  const gchar *p = g_bytes_get_data (bytes, &size);
  const gchar *end;

  *n = 0;
  /* An empty GBytes may hold NULL, and NULL + 0 is undefined. */
  if (size == 0)
    return;
  end = p + size;
  while (p < end) {
    const gchar *nl = memchr (p, '\n', (gsize) (end - p));
    const gchar *line_end = nl != NULL ? nl : end;
    g_auto(Entry) e = { 0 };

    if (parse_entry (p, (gsize) (line_end - p), &e)) {
      if (func != NULL && !func (&e, *n, user_data))
        func = NULL;
      (*n)++;
    }
    p = line_end + 1;
  }
}

/* The file's bytes, bounded; a missing file is an empty log. */
static GBytes *
read_log (const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  GBytes *bytes = vd_fs_read_untrusted (path, VD_EGRESS_LOG_MAX_BYTES, &local);

  if (bytes != NULL)
    return bytes;
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND) || g_error_matches (local, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND))
    return g_bytes_new (NULL, 0);
  g_propagate_error (error, g_steal_pointer (&local));
  return NULL;
}

typedef struct {
  guint64          offset;
  guint            limit;
  GVariantBuilder *builder;
  guint            added;
} Page;

static gboolean
add_to_page (const Entry *e, guint64 index, gpointer user_data)
{
  Page *page = user_data;

  if (index < page->offset)
    return TRUE;
  if (page->added >= page->limit)
    return FALSE;
  g_variant_builder_add_value (page->builder, entry_to_variant (e));
  page->added++;
  return TRUE;
}

static gboolean
check_limit (guint limit, GError **error)
{
  if (limit == 0 || limit > VD_EGRESS_LOG_PAGE_MAX) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The limit is %u; it must be between 1 and %u", limit, VD_EGRESS_LOG_PAGE_MAX);
    return FALSE;
  }
  return TRUE;
}

GVariant *
vd_egress_log_read_bytes (GBytes *bytes, guint64 offset, guint limit, guint64 *next, guint64 *total, GError **error)
{
  GVariantBuilder b;
  Page page = { offset, limit, &b, 0 };

  if (!check_limit (limit, error))
    return NULL;
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for_each_entry_in (bytes, add_to_page, &page, total);
  *next = MIN (offset + page.added, MAX (*total, offset));
  return g_variant_builder_end (&b);
}

GVariant *
vd_egress_log_read (const gchar *path, guint64 offset, guint limit, guint64 *next, guint64 *total, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;

  if (!check_limit (limit, error))
    return NULL;
  bytes = read_log (path, error);
  if (bytes == NULL)
    return NULL;
  return vd_egress_log_read_bytes (bytes, offset, limit, next, total, error);
}

/* --- the report's line ------------------------------------------------ */

typedef struct {
  guint       allowed;
  guint       denied;
  guint64     bytes_up;
  guint64     bytes_down;
  GHashTable *allowed_hosts;  /* "host:port" → count */
  GHashTable *denied_hosts;
  GPtrArray  *secret_refusals;   /* distinct reasons, at most SUMMARY_SECRET_REFUSALS_MAX */
  guint       n_secret_refusals;
  gboolean    full;
} Summary;

/* A placeholder is the guest's, never the report's: the log may hold one
 * (a DNS question that carried it), the summary says where it went
 * without it. */
static gchar *
scrub_placeholders (const gchar *text)
{
  const gsize prefix = strlen (VIVARIUM_SECRET_PLACEHOLDER_PREFIX);
  GString *out = g_string_new (NULL);
  const gchar *p = text;
  const gchar *hit;

  while ((hit = strstr (p, VIVARIUM_SECRET_PLACEHOLDER_PREFIX)) != NULL) {
    const gchar *end = hit + prefix;

    while (g_ascii_isxdigit (*end))
      end++;
    g_string_append_len (out, p, hit - p);
    g_string_append (out, "vivarium-secret-…");
    p = end;
  }
  g_string_append (out, p);
  return g_string_free (out, FALSE);
}

/* A DNS decision has no port: "name (DNS)". */
static void
count_host (GHashTable *table, const Entry *e)
{
  g_autofree gchar *host = scrub_placeholders (e->host);
  g_autofree gchar *key = g_str_equal (e->via, "dns") ? g_strdup_printf ("%s (DNS)", host)
                                                      : g_strdup_printf ("%s:%u", host, e->port);
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (table, key));

  g_hash_table_insert (table, g_steal_pointer (&key), GUINT_TO_POINTER (n + 1));
}

/* The proxy's words for a placeholder seen where it may not go (docs/secrets.md):
 * the report quotes them. */
#define SECRET_REFUSAL_PREFIX "a secret's placeholder ("

static void
note_secret_refusal (Summary *s, const Entry *e)
{
  g_autofree gchar *reason = NULL;

  if (e->reason == NULL || !g_str_has_prefix (e->reason, SECRET_REFUSAL_PREFIX))
    return;
  s->n_secret_refusals++;
  reason = scrub_placeholders (e->reason);
  if (s->secret_refusals->len < SUMMARY_SECRET_REFUSALS_MAX &&
      !g_ptr_array_find_with_equal_func (s->secret_refusals, reason, g_str_equal, NULL))
    g_ptr_array_add (s->secret_refusals, g_steal_pointer (&reason));
}

static gboolean
add_to_summary (const Entry *e, guint64 index, gpointer user_data)
{
  Summary *s = user_data;

  if (g_str_equal (e->verdict, "allowed")) {
    s->allowed++;
    count_host (s->allowed_hosts, e);
  } else if (g_str_equal (e->verdict, "denied")) {
    s->denied++;
    count_host (s->denied_hosts, e);
    note_secret_refusal (s, e);
  } else if (g_str_equal (e->verdict, "log-full")) {
    s->full = TRUE;
  }
  s->bytes_up += e->bytes_up;
  s->bytes_down += e->bytes_down;
  return TRUE;
}

static gint
by_count_then_name (gconstpointer a, gconstpointer b, gpointer user_data)
{
  GHashTable *table = user_data;
  const gchar *ka = *(const gchar * const *) a, *kb = *(const gchar * const *) b;

  guint na = GPOINTER_TO_UINT (g_hash_table_lookup (table, ka)), nb = GPOINTER_TO_UINT (g_hash_table_lookup (table, kb));

  return na != nb ? (na < nb ? 1 : -1) : g_strcmp0 (ka, kb);
}

static void
append_hosts (GString *out, GHashTable *table)
{
  g_autoptr(GPtrArray) keys = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer key_ptr;
  guint n;

  g_hash_table_iter_init (&iter, table);
  while (g_hash_table_iter_next (&iter, &key_ptr, NULL))
    g_ptr_array_add (keys, key_ptr);
  n = keys->len;

  g_ptr_array_sort_with_data (keys, by_count_then_name, table);
  g_string_append (out, " (");
  for (guint i = 0; i < MIN (n, SUMMARY_HOSTS_MAX); i++) {
    const gchar *key = g_ptr_array_index (keys, i);
    guint times = GPOINTER_TO_UINT (g_hash_table_lookup (table, key));
    g_string_append_printf (out, "%s%s", i > 0 ? ", " : "", key);
    if (times > 1)
      g_string_append_printf (out, " ×%u", times);
  }
  if (n > SUMMARY_HOSTS_MAX)
    g_string_append_printf (out, ", %u more", n - SUMMARY_HOSTS_MAX);
  g_string_append (out, ")");
}

gchar *
vd_egress_log_summarize_bytes (GBytes *bytes)
{
  Summary s = { 0 };
  guint64 n = 0;
  GString *out;

  s.allowed_hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  s.denied_hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  s.secret_refusals = g_ptr_array_new_with_free_func (g_free);
  for_each_entry_in (bytes, add_to_summary, &s, &n);
  out = g_string_new (NULL);
  g_string_append_printf (out, "%u allowed", s.allowed);
  if (s.allowed > 0)
    append_hosts (out, s.allowed_hosts);
  g_string_append_printf (out, ", %u denied", s.denied);
  if (s.denied > 0)
    append_hosts (out, s.denied_hosts);
  g_string_append_printf (out, "; %" G_GUINT64_FORMAT " bytes up, %" G_GUINT64_FORMAT " down", s.bytes_up, s.bytes_down);
  for (guint i = 0; i < s.secret_refusals->len; i++)
    g_string_append_printf (out, "; %s", (const gchar *) s.secret_refusals->pdata[i]);
  if (s.n_secret_refusals > s.secret_refusals->len)
    g_string_append_printf (out, "; %u more refusal%s of a secret's placeholder",
                            s.n_secret_refusals - s.secret_refusals->len,
                            s.n_secret_refusals - s.secret_refusals->len == 1 ? "" : "s");
  if (s.full)
    g_string_append (out, "; the log is full, later decisions are counted only");
  g_ptr_array_unref (s.secret_refusals);
  g_hash_table_unref (s.allowed_hosts);
  g_hash_table_unref (s.denied_hosts);
  return g_string_free (out, FALSE);
}

gchar *
vd_egress_log_summarize (const gchar *path)
{
  g_autoptr(GBytes) bytes = read_log (path, NULL);

  return bytes != NULL ? vd_egress_log_summarize_bytes (bytes) : NULL;
}
