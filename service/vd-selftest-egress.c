/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSelfTest"

#include "config.h"

#include "vivarium-egress-policy.h"
#include "vd-egress.h"
#include "vd-egress-log.h"
#include "vd-selftest-egress.h"

/* The guest's busybox nc sends the request and half-closes; the proxy
 * answers with its status line first. Bounded: a proxy that never answers
 * reads as "no status". */
#define CONNECT_TIMEOUT_SEC 5

gchar *
vd_self_test_egress_rule (guint16 tcp_port)
{
  return g_strdup_printf ("198.51.100.1:%u", tcp_port);
}

gchar *
vd_self_test_egress_script (const VdSelfTestProxyProbe *probes, guint n_probes, guint16 tcp_port)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < n_probes; i++)
    g_string_append_printf (s,
                            "( r=$(printf 'CONNECT %s:%u HTTP/1.1\\r\\nHost: %s:%u\\r\\n\\r\\n' "
                            "| timeout %u nc %s %u 2>/dev/null | head -n 1); "
                            "c=$(echo \"$r\" | sed -n 's/^HTTP\\/1\\.[01] \\([0-9][0-9][0-9]\\).*/\\1/p'); "
                            "echo \"%s http ${c:-0}\" ) &\n",
                            probes[i].host, tcp_port, probes[i].host, tcp_port, CONNECT_TIMEOUT_SEC,
                            VD_EGRESS_GUEST_ADDRESS, VD_EGRESS_PROXY_PORT, probes[i].name);
  g_string_append (s, "wait\n");
  return g_string_free (s, FALSE);
}

/* The proxy normalises the host it logs; so is ours before comparing. */
gboolean
vd_self_test_egress_decision (const gchar *log_path, const gchar *host, guint16 port, gchar **verdict, gchar **reason)
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

    g_variant_unref (entry);
    if (!g_variant_dict_lookup (d, "host", "&s", &h) || !g_variant_dict_lookup (d, "port", "q", &p) ||
        !g_variant_dict_lookup (d, "verdict", "&s", &v) || !g_variant_dict_lookup (d, "reason", "&s", &r) ||
        g_strcmp0 (h, want) != 0 || p != port)
      continue;
    /* The last one wins: the log is in the order the proxy decided. */
    g_free (*verdict);
    g_free (*reason);
    *verdict = g_strdup (v);
    *reason = g_strdup (r);
    found = TRUE;
  }
  return found;
}
