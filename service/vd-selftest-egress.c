/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSelfTest"

#include "config.h"

#include <string.h>

#include "vivarium-egress-policy.h"
#include "vd-egress.h"
#include "vd-egress-log.h"
#include "vd-selftest-egress.h"

/* The guest's busybox nc sends the request and half-closes; the proxy
 * answers with its status line first. Bounded: a proxy that never answers
 * reads as "no status". */
#define CONNECT_TIMEOUT_SEC 5
/* The proxy's DNS door in the guest (vd-egress.c's forwards). */
#define DNS_PORT 53
/* The question's id, and the name of the proxy's usage file. */
#define DNS_QUERY_ID 0x5654
#define USAGE_NAME "usage"

GStrv
vd_self_test_egress_rules (guint16 tcp_port)
{
  GStrv rules = g_new0 (gchar *, 3);

  rules[0] = g_strdup_printf ("198.51.100.1:%u", tcp_port);
  rules[1] = g_strdup_printf ("localhost:%u", tcp_port);
  return rules;
}

static void
put16 (GByteArray *out, guint v)
{
  guint8 b[2] = { (v >> 8) & 0xff, v & 0xff };

  g_byte_array_append (out, b, 2);
}

/* The DNS wire form of a host name: labels, each after its length. */
static void
put_name (GByteArray *out, const gchar *name)
{
  g_auto(GStrv) labels = g_strsplit (name, ".", -1);

  for (guint i = 0; labels[i] != NULL; i++) {
    guint8 n = (guint8) MIN (strlen (labels[i]), 63);
    g_byte_array_append (out, &n, 1);
    g_byte_array_append (out, (const guint8 *) labels[i], n);
  }
  g_byte_array_append (out, (const guint8 *) "", 1);
}

GBytes *
vd_self_test_egress_dns_query (const gchar *name)
{
  g_autoptr(GByteArray) msg = g_byte_array_new ();
  g_autoptr(GByteArray) out = g_byte_array_new ();

  put16 (msg, DNS_QUERY_ID);
  put16 (msg, 0x0100);           /* a standard query, recursion desired */
  put16 (msg, 1);                /* one question, nothing else */
  put16 (msg, 0);
  put16 (msg, 0);
  put16 (msg, 0);
  put_name (msg, name);
  put16 (msg, 1);                /* A */
  put16 (msg, 1);                /* IN */
  put16 (out, msg->len);         /* over TCP: its length first */
  g_byte_array_append (out, msg->data, msg->len);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

/* Just what the proxy's SNI reader needs: one record, one ClientHello
 * (TLS 1.2 version field, one cipher suite, no compression) and one
 * extension, server_name with one host_name. */
GBytes *
vd_self_test_egress_hello (const gchar *server_name)
{
  g_autoptr(GByteArray) out = g_byte_array_new ();
  guint n = (guint) MIN (strlen (server_name), 200);
  guint body = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 9 + n;
  static const guint8 random[32] = { 0 };
  static const guint8 fixed[] = { 0,                   /* no session id */
                                  0, 2, 0x13, 0x01,    /* TLS_AES_128_GCM_SHA256 */
                                  1, 0 };              /* null compression */

  g_byte_array_append (out, (const guint8 *) "\x16\x03\x01", 3);
  put16 (out, body + 4);
  g_byte_array_append (out, (const guint8 *) "\x01\x00", 2);   /* ClientHello, length < 64 KiB */
  put16 (out, body);
  put16 (out, 0x0303);
  g_byte_array_append (out, random, sizeof random);
  g_byte_array_append (out, fixed, sizeof fixed);
  put16 (out, 9 + n);            /* the extensions */
  put16 (out, 0);                /* server_name */
  put16 (out, 5 + n);
  put16 (out, 3 + n);            /* the list */
  g_byte_array_append (out, (const guint8 *) "", 1);   /* host_name */
  put16 (out, n);
  g_byte_array_append (out, (const guint8 *) server_name, n);
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

/* Bytes as printf(1) escapes: every byte octal, so none is taken for a
 * format directive or by the shell. */
static void
append_octal (GString *s, GBytes *bytes)
{
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  for (gsize i = 0; i < len; i++)
    g_string_append_printf (s, "\\%03o", data[i]);
}

static void
append_connect (GString *s, const VdSelfTestProxyProbe *probe, guint16 tcp_port)
{
  g_autoptr(GBytes) hello = probe->ask == VD_SELF_TEST_ASK_HELLO ? vd_self_test_egress_hello (probe->sni) : NULL;

  g_string_append_printf (s, "( r=$(printf 'CONNECT %s:%u HTTP/1.1\\r\\nHost: %s:%u\\r\\n\\r\\n", probe->host, tcp_port,
                          probe->host, tcp_port);
  if (hello != NULL)
    append_octal (s, hello);
  g_string_append_printf (s, "' | timeout %u nc %s %u 2>/dev/null | head -n 1); "
                             "c=$(echo \"$r\" | sed -n 's/^HTTP\\/1\\.[01] \\([0-9][0-9][0-9]\\).*/\\1/p'); "
                             "echo \"%s http ${c:-0}\" ) &\n",
                          CONNECT_TIMEOUT_SEC, VD_EGRESS_GUEST_ADDRESS, VD_EGRESS_PROXY_PORT, probe->name);
}

/* The answer's RCODE: the low bits of its fourth byte, after the length. */
static void
append_dns (GString *s, const VdSelfTestProxyProbe *probe)
{
  g_autoptr(GBytes) query = vd_self_test_egress_dns_query (probe->host);

  g_string_append (s, "( c=$(printf '");
  append_octal (s, query);
  g_string_append_printf (s, "' | timeout %u nc %s %u 2>/dev/null | od -An -tu1 -j5 -N1 | tr -d ' '); "
                             "[ -n \"$c\" ] && echo \"%s dns $((c & 15))\" ) &\n",
                          CONNECT_TIMEOUT_SEC, VD_EGRESS_GUEST_ADDRESS, DNS_PORT, probe->name);
}

gchar *
vd_self_test_egress_script (const VdSelfTestProxyProbe *probes, guint n_probes, guint16 tcp_port)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < n_probes; i++) {
    if (probes[i].ask == VD_SELF_TEST_ASK_DNS)
      append_dns (s, &probes[i]);
    else
      append_connect (s, &probes[i], tcp_port);
  }
  g_string_append (s, "wait\n");
  return g_string_free (s, FALSE);
}

/* The proxy normalises the host it logs; so is ours before comparing. */
gboolean
vd_self_test_egress_decision (const gchar *log_path, const gchar *host, guint16 port, const gchar *reason_part,
                              gchar **verdict, gchar **reason, guint64 *duration_ms)
{
  g_autofree gchar *want = vivarium_egress_normalize_host (host);
  g_autoptr(GVariant) entries = NULL;
  g_autoptr(GError) error = NULL;
  guint64 next = 0, total = 0;
  gboolean found = FALSE;
  GVariantIter iter;
  GVariant *entry;

  *verdict = NULL;
  *reason = NULL;
  *duration_ms = 0;
  entries = vd_egress_log_read (log_path, 0, VD_EGRESS_LOG_PAGE_MAX, &next, &total, &error);
  if (entries == NULL) {
    g_debug ("self-test: reading %s: %s", log_path, error->message);
    return FALSE;
  }
  g_variant_iter_init (&iter, entries);
  while ((entry = g_variant_iter_next_value (&iter)) != NULL) {
    g_autoptr(GVariantDict) d = g_variant_dict_new (entry);
    const gchar *h = NULL, *v = NULL, *r = NULL;
    guint16 p = 0;
    guint64 ms = 0;

    g_variant_unref (entry);
    if (!g_variant_dict_lookup (d, "host", "&s", &h) || !g_variant_dict_lookup (d, "port", "q", &p) ||
        !g_variant_dict_lookup (d, "verdict", "&s", &v) || !g_variant_dict_lookup (d, "reason", "&s", &r) ||
        g_strcmp0 (h, want) != 0 || p != port || (reason_part != NULL && strstr (r, reason_part) == NULL))
      continue;
    /* The last one wins: the log is in the order the proxy decided. */
    g_free (*verdict);
    g_free (*reason);
    *verdict = g_strdup (v);
    *reason = g_strdup (r);
    *duration_ms = g_variant_dict_lookup (d, "duration-ms", "t", &ms) ? ms : 0;
    found = TRUE;
  }
  return found;
}

gboolean
vd_self_test_egress_lookups (const gchar *dir, guint64 *lookups)
{
  g_autofree gchar *path = g_build_filename (dir, USAGE_NAME, NULL);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) error = NULL;

  *lookups = 0;
  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, &error)) {
    /* No decision yet, no file yet: nothing looked up. */
    if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      return TRUE;
    g_debug ("self-test: reading %s: %s", path, error->message);
    return FALSE;
  }
  *lookups = g_key_file_get_uint64 (kf, "Usage", "Lookups", &error);
  return error == NULL;
}
