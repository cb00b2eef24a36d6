/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bytes the self-test's allowlist guest sends its proxy (a DNS
 * question over TCP, a ClientHello after a CONNECT), read back by the
 * proxy's own parsers: what the guest's printf sends is what the proxy
 * reads. And the script's shape (one line per probe, then wait). */

#include "config.h"

#include <string.h>

#include "vivarium-egress-dns.h"
#include "vivarium-egress-sni.h"
#include "vd-selftest-egress.h"

static void
test_dns_query (void)
{
  g_autoptr(GBytes) bytes = vd_self_test_egress_dns_query ("unlisted.selftest.vivarium.invalid");
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  g_auto(VivariumDnsQuery) query = { 0 };

  g_assert_cmpuint (len, >, 2);
  g_assert_cmpuint ((gsize) (data[0] << 8 | data[1]), ==, len - 2);
  g_assert_true (vivarium_egress_dns_parse (data + 2, len - 2, &query));
  g_assert_cmpstr (query.name, ==, "unlisted.selftest.vivarium.invalid");
  g_assert_cmpuint (query.qtype, ==, VIVARIUM_DNS_TYPE_A);
  g_assert_cmpuint (query.qclass, ==, VIVARIUM_DNS_CLASS_IN);
  g_assert_cmpuint (query.question_end, ==, len - 2);
}

static void
test_hello (void)
{
  g_autoptr(GBytes) bytes = vd_self_test_egress_hello ("other.selftest.vivarium.invalid");
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  g_autofree gchar *name = NULL;

  g_assert_cmpint (vivarium_egress_sni_parse (data, len, &name), ==, VIVARIUM_SNI_FOUND);
  g_assert_cmpstr (name, ==, "other.selftest.vivarium.invalid");
  /* A prefix is not yet a hello: the proxy waits for the rest. */
  g_clear_pointer (&name, g_free);
  g_assert_cmpint (vivarium_egress_sni_parse (data, len - 1, &name), ==, VIVARIUM_SNI_NEED_MORE);
}

static void
test_rules_and_script (void)
{
  g_auto(GStrv) rules = vd_self_test_egress_rules (4321);
  const VdSelfTestProxyProbe probes[] = {
    { "a", VD_SELF_TEST_ASK_CONNECT, "198.51.100.1", NULL, NULL, "reached", NULL },
    { "b", VD_SELF_TEST_ASK_HELLO, "198.51.100.1", "other.test", NULL, "refused", NULL },
    { "c", VD_SELF_TEST_ASK_DNS, "localhost", NULL, NULL, "answered", NULL },
  };
  g_autofree gchar *script = vd_self_test_egress_script (probes, G_N_ELEMENTS (probes), 4321);

  g_assert_cmpuint (g_strv_length (rules), ==, 2);
  g_assert_cmpstr (rules[0], ==, "198.51.100.1:4321");
  g_assert_cmpstr (rules[1], ==, "localhost:4321");
  g_assert_nonnull (strstr (script, "echo \"a http ${c:-0}\""));
  /* The hello follows the CONNECT head, octal-escaped: 0x16 first. */
  g_assert_nonnull (strstr (script, "\\r\\n\\r\\n\\026\\003\\001"));
  g_assert_nonnull (strstr (script, "nc 10.0.2.100 53"));
  g_assert_nonnull (strstr (script, "echo \"c dns $((c & 15))\""));
  g_assert_true (g_str_has_suffix (script, "wait\n"));
  /* No byte the shell or printf would read as its own. */
  g_assert_null (strchr (script, '%'));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/selftest-egress/dns-query", test_dns_query);
  g_test_add_func ("/selftest-egress/hello", test_hello);
  g_test_add_func ("/selftest-egress/rules-and-script", test_rules_and_script);
  return g_test_run ();
}
