/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "test-guard-table-live"

#include "config.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "vivarium-error.h"
#include "vivarium-names.h"

#include "vd-guard-table.h"

/* The guard table against the real kernel. Needs root. The whole process
 * moves into a private network namespace first, so the table, the dummy
 * interface and every packet stay there, and all of it vanishes with the
 * process even if a test aborts. */

#define UID_FIRST   2147000000u
#define UID_LAST    2147065534u
#define UID_SESSION (UID_FIRST + 8)
#define UID_SPARE   (UID_FIRST + 9)   /* in the range, never registered */
#define UID_OUTSIDE 65534u            /* nobody: outside the range */
#define CANARY      "10.255.255.254"
#define DUMMY_IF    "vvguard0"

static gboolean
run (const gchar * const *argv, gchar **out, GError **error)
{
  g_autofree gchar *err = NULL;
  gint status = 0;

  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                     out, &err, &status, error))
    return FALSE;
  if (!g_spawn_check_wait_status (status, error)) {
    g_prefix_error (error, "%s: %s: ", argv[0], err != NULL ? g_strstrip (err) : "");
    return FALSE;
  }
  return TRUE;
}

static void
run_ok (const gchar * const *argv)
{
  g_autoptr(GError) error = NULL;
  run (argv, NULL, &error);
  g_assert_no_error (error);
}

static gboolean
table_listed (void)
{
  const gchar *argv[] = { "nft", "list", "tables", NULL };
  g_autofree gchar *out = NULL;
  g_autoptr(GError) error = NULL;

  run (argv, &out, &error);
  g_assert_no_error (error);
  return strstr (out, "table inet " VIVARIUM_NFT_TABLE "\n") != NULL;
}

/* A TCP connect to the canary as @uid, through setpriv; TRUE if it connected.
 * A dropped SYN is retransmitted, not refused, so timeout(1) bounds the
 * attempt; the session counter, not the clock, proves who dropped it. */
static gboolean
connect_as (guint32 uid, guint16 port)
{
  g_autofree gchar *uid_str = g_strdup_printf ("%u", uid);
  g_autofree gchar *script = g_strdup_printf ("exec 3<>/dev/tcp/" CANARY "/%u", port);
  const gchar *argv[] = { "setpriv", "--reuid", uid_str, "--regid", uid_str, "--clear-groups",
                          "timeout", "5", "bash", "-c", script, NULL };
  g_autoptr(GError) error = NULL;
  gboolean ok = run (argv, NULL, &error);

  g_test_message ("connect as uid %u to " CANARY ":%u: %s", uid, port,
                  ok ? "connected" : error->message);
  return ok;
}

static JsonNode *
nft_json (void)
{
  const gchar *argv[] = { "nft", "-j", "list", "table", "inet", VIVARIUM_NFT_TABLE, NULL };
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gchar *out = NULL;

  run (argv, &out, &error);
  g_assert_no_error (error);
  json_parser_load_from_data (parser, out, -1, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

static gboolean
json_array_has_string (JsonArray *array, const gchar *value)
{
  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++) {
    if (g_strcmp0 (json_array_get_string_element (array, i), value) == 0)
      return TRUE;
  }
  return FALSE;
}

static gboolean
set_has_prefix (JsonObject *set, const gchar *addr, gint64 len)
{
  JsonArray *elems = json_object_get_array_member (set, "elem");

  for (guint i = 0; i < json_array_get_length (elems); i++) {
    JsonNode *node = json_array_get_element (elems, i);
    JsonObject *prefix;
    if (JSON_NODE_HOLDS_VALUE (node)) {
      if (len == -1 && g_strcmp0 (json_node_get_string (node), addr) == 0)
        return TRUE;
      continue;
    }
    prefix = json_object_get_object_member (json_node_get_object (node), "prefix");
    if (prefix != NULL && g_strcmp0 (json_object_get_string_member (prefix, "addr"), addr) == 0 &&
        json_object_get_int_member (prefix, "len") == len)
      return TRUE;
  }
  return FALSE;
}

/* What a rule matches, as "skuid=<uid or a-b> set=@denyN drop counter". */
static gchar *
rule_summary (JsonObject *rule)
{
  JsonArray *exprs = json_object_get_array_member (rule, "expr");
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (exprs); i++) {
    JsonObject *expr = json_array_get_object_element (exprs, i);
    if (json_object_has_member (expr, "match")) {
      JsonObject *match = json_object_get_object_member (expr, "match");
      JsonObject *left = json_object_get_object_member (match, "left");
      JsonNode *right = json_object_get_member (match, "right");
      if (json_object_has_member (left, "meta")) {
        if (JSON_NODE_HOLDS_VALUE (right)) {
          g_string_append_printf (out, "skuid=%" G_GINT64_FORMAT " ", json_node_get_int (right));
        } else {
          JsonArray *range = json_object_get_array_member (json_node_get_object (right), "range");
          g_string_append_printf (out, "skuid=%" G_GINT64_FORMAT "-%" G_GINT64_FORMAT " ",
                                  json_array_get_int_element (range, 0),
                                  json_array_get_int_element (range, 1));
        }
      } else {
        g_string_append_printf (out, "set=%s ", json_node_get_string (right));
      }
    } else if (json_object_has_member (expr, "counter")) {
      g_string_append (out, "counter ");
    } else if (json_object_has_member (expr, "drop")) {
      g_string_append (out, "drop");
    }
  }
  return g_string_free (out, FALSE);
}

/* Reads the table back through nft's own JSON, independently of libnftnl. */
static void
check_with_nft (guint n_sessions, guint32 first_session)
{
  g_autoptr(JsonNode) root = nft_json ();
  JsonArray *items = json_object_get_array_member (json_node_get_object (root), "nftables");
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func (g_free);
  gboolean seen_table = FALSE, seen4 = FALSE, seen6 = FALSE, seen_chain = FALSE;

  for (guint i = 0; i < json_array_get_length (items); i++) {
    JsonObject *item = json_array_get_object_element (items, i);
    if (json_object_has_member (item, "table")) {
      JsonObject *table = json_object_get_object_member (item, "table");
      g_assert_cmpstr (json_object_get_string_member (table, "name"), ==, VIVARIUM_NFT_TABLE);
      seen_table = TRUE;
    } else if (json_object_has_member (item, "set")) {
      JsonObject *set = json_object_get_object_member (item, "set");
      const gchar *name = json_object_get_string_member (set, "name");
      gboolean v4 = g_strcmp0 (name, "deny4") == 0;
      g_assert_true (v4 || g_strcmp0 (name, "deny6") == 0);
      g_assert_cmpstr (json_object_get_string_member (set, "type"), ==, v4 ? "ipv4_addr" : "ipv6_addr");
      g_assert_true (json_array_has_string (json_object_get_array_member (set, "flags"), "interval"));
      if (v4) {
        g_assert_true (set_has_prefix (set, "10.0.0.0", 8));
        g_assert_true (set_has_prefix (set, "127.0.0.0", 8));
        g_assert_true (set_has_prefix (set, "169.254.0.0", 16));
        g_assert_true (set_has_prefix (set, "255.255.255.255", -1));
        seen4 = TRUE;
      } else {
        g_assert_true (set_has_prefix (set, "::1", -1));
        g_assert_true (set_has_prefix (set, "fc00::", 7));
        g_assert_true (set_has_prefix (set, "fe80::", 10));
        seen6 = TRUE;
      }
    } else if (json_object_has_member (item, "chain")) {
      JsonObject *chain = json_object_get_object_member (item, "chain");
      g_assert_cmpstr (json_object_get_string_member (chain, "hook"), ==, "output");
      g_assert_cmpstr (json_object_get_string_member (chain, "type"), ==, "filter");
      g_assert_cmpstr (json_object_get_string_member (chain, "policy"), ==, "accept");
      g_assert_cmpint (json_object_get_int_member (chain, "prio"), ==, 0);
      seen_chain = TRUE;
    } else if (json_object_has_member (item, "rule")) {
      g_ptr_array_add (rules, rule_summary (json_object_get_object_member (item, "rule")));
    }
  }
  g_assert_true (seen_table && seen4 && seen6 && seen_chain);
  g_assert_cmpuint (rules->len, ==, 2 * n_sessions + 2);
  for (guint i = 0; i < rules->len; i++)
    g_test_message ("nft rule %u: %s", i, (const gchar *) g_ptr_array_index (rules, i));
  if (n_sessions > 0) {
    g_autofree gchar *r4 = g_strdup_printf ("skuid=%u set=@deny4 counter drop", first_session);
    g_autofree gchar *r6 = g_strdup_printf ("skuid=%u set=@deny6 counter drop", first_session);
    g_assert_cmpstr (g_ptr_array_index (rules, 0), ==, r4);
    g_assert_cmpstr (g_ptr_array_index (rules, 1), ==, r6);
  }
  g_assert_cmpstr (g_ptr_array_index (rules, rules->len - 2), ==,
                   "skuid=2147000000-2147065534 set=@deny4 counter drop");
  g_assert_cmpstr (g_ptr_array_index (rules, rules->len - 1), ==,
                   "skuid=2147000000-2147065534 set=@deny6 counter drop");
}

static void
test_guard (void)
{
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GSocketAddress) bind_addr = NULL;
  g_autoptr(GSocketAddress) local = NULL;
  g_autoptr(GError) error = NULL;
  const gchar *delete_argv[] = { "nft", "delete", "table", "inet", VIVARIUM_NFT_TABLE, NULL };
  guint64 packets_before = 0, packets_after = 0, bytes = 0;
  guint16 port;

  g_assert_false (table_listed ());
  g_assert_true (vd_guard_table_add_session (table, UID_FIRST + 7, &error));
  g_assert_no_error (error);
  g_assert_true (vd_guard_table_install (table, &error));
  g_assert_no_error (error);
  g_assert_true (vd_guard_table_is_installed (table));
  g_assert_true (vd_guard_table_verify (table, &error));
  g_assert_no_error (error);
  check_with_nft (1, UID_FIRST + 7);

  /* nobody else may change the table while its owner lives */
  g_assert_false (run (delete_argv, NULL, &error));
  g_test_message ("nft delete refused: %s", error->message);
  g_clear_error (&error);
  g_assert_true (table_listed ());
  g_assert_true (vd_guard_table_verify (table, &error));
  g_assert_no_error (error);

  /* a session registered at runtime lands ahead of the catch-all */
  g_assert_true (vd_guard_table_add_session (table, UID_SESSION, &error));
  g_assert_no_error (error);
  g_assert_true (vd_guard_table_verify (table, &error));
  g_assert_no_error (error);
  check_with_nft (2, UID_SESSION);

  listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  bind_addr = g_inet_socket_address_new_from_string (CANARY, 0);
  g_socket_bind (listener, bind_addr, TRUE, &error);
  g_assert_no_error (error);
  g_socket_set_listen_backlog (listener, 16);
  g_socket_listen (listener, &error);
  g_assert_no_error (error);
  local = g_socket_get_local_address (listener, &error);
  g_assert_no_error (error);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));

  g_assert_true (vd_guard_table_get_counters (table, UID_SESSION, &packets_before, &bytes, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (packets_before, ==, 0);

  /* positive control first: the listener answers a uid outside the range */
  g_assert_true (connect_as (UID_OUTSIDE, port));
  g_assert_false (connect_as (UID_SESSION, port));
  g_assert_true (vd_guard_table_get_counters (table, UID_SESSION, &packets_after, &bytes, &error));
  g_assert_no_error (error);
  g_test_message ("session uid %u: %" G_GUINT64_FORMAT " packets, %" G_GUINT64_FORMAT " bytes dropped",
                  UID_SESSION, packets_after, bytes);
  g_assert_cmpuint (packets_after, >, packets_before);
  g_assert_cmpuint (bytes, >, 0);
  /* an unregistered uid of the range is caught by the catch-all */
  g_assert_false (connect_as (UID_SPARE, port));
  g_assert_true (connect_as (UID_OUTSIDE, port));

  g_assert_true (vd_guard_table_remove_session (table, UID_SESSION, &error));
  g_assert_no_error (error);
  g_assert_true (vd_guard_table_verify (table, &error));
  g_assert_no_error (error);
  check_with_nft (1, UID_FIRST + 7);
  g_assert_false (connect_as (UID_SESSION, port));

  vd_guard_table_uninstall (table);
  g_assert_false (vd_guard_table_is_installed (table));
  g_assert_false (table_listed ());
  /* with layer 2 gone, the same connect goes through: the drop was ours */
  g_assert_true (connect_as (UID_SESSION, port));
}

/* A table a crashed process left without an owner is replaced. */
static void
test_stale (void)
{
  const gchar *add_argv[] = { "nft", "add", "table", "inet", VIVARIUM_NFT_TABLE, NULL };
  g_autoptr(VdGuardTable) table = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;

  run_ok (add_argv);
  g_assert_true (table_listed ());
  g_assert_true (vd_guard_table_install (table, &error));
  g_assert_no_error (error);
  check_with_nft (0, 0);
  vd_guard_table_uninstall (table);
  g_assert_false (table_listed ());
}

/* A table with a live owner is another daemon's: refuse, do not take over. */
static void
test_second_owner (void)
{
  g_autoptr(VdGuardTable) first = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(VdGuardTable) second = vd_guard_table_new (UID_FIRST, UID_LAST);
  g_autoptr(GError) error = NULL;

  g_assert_true (vd_guard_table_install (first, &error));
  g_assert_no_error (error);
  g_assert_false (vd_guard_table_install (second, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE);
  g_test_message ("second install refused: %s", error->message);
  g_clear_error (&error);
  g_assert_false (vd_guard_table_is_installed (second));
  g_assert_true (vd_guard_table_verify (first, &error));
  g_assert_no_error (error);
  vd_guard_table_uninstall (first);
  g_assert_false (table_listed ());
}

static void
setup_namespace (void)
{
  const gchar *lo_up[] = { "ip", "link", "set", "lo", "up", NULL };
  const gchar *add[] = { "ip", "link", "add", DUMMY_IF, "type", "dummy", NULL };
  const gchar *add_veth[] = { "ip", "link", "add", DUMMY_IF, "type", "veth", "peer", "name", DUMMY_IF "p", NULL };
  const gchar *addr[] = { "ip", "addr", "add", CANARY "/32", "dev", DUMMY_IF, NULL };
  const gchar *up[] = { "ip", "link", "set", DUMMY_IF, "up", NULL };
  g_autoptr(GError) error = NULL;

  run_ok (lo_up);
  /* some kernels are built without the dummy driver; a veth pair whose both
   * ends stay in this namespace serves the same purpose */
  if (!run (add, NULL, &error)) {
    g_printerr ("# no dummy interfaces (%s); using a veth pair\n", error->message);
    run_ok (add_veth);
  }
  run_ok (addr);
  run_ok (up);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* a missing prerequisite fails, loudly; it never skips */
  if (geteuid () != 0) {
    g_printerr ("test-guard-table-live needs root (CAP_NET_ADMIN) to program nftables\n");
    return 1;
  }
  if (unshare (CLONE_NEWNET) < 0) {
    g_printerr ("cannot enter a private network namespace: %s\n", g_strerror (errno));
    return 1;
  }
  setup_namespace ();

  g_test_add_func ("/guard-table-live/guard", test_guard);
  g_test_add_func ("/guard-table-live/stale", test_stale);
  g_test_add_func ("/guard-table-live/second-owner", test_second_owner);
  return g_test_run ();
}
