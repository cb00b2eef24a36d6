/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A session's egress policy in `allowlist` mode: rules `host[:port]`, each
 * allow or deny, each remembering where it came from (a rule group, the
 * session's own extras) so that a decision can say which rule made it.
 *
 * - host: a DNS name (lower-cased, a trailing dot dropped; letters, digits,
 *   '-' and '.', labels 1-63 not starting or ending with '-', whole name
 *   ≤ 253, the last label not all digits; no form inet_aton() would read as
 *   an address, like "127.1" or "0x7f000001"), a wildcard `*.example.org`
 *   (any name *below* example.org, never example.org itself), or an IP
 *   literal (IPv4 dotted quad, or IPv6 in brackets `[2001:db8::1]:443`;
 *   an IPv4-mapped IPv6 address is taken as the IPv4 address).
 * - port: 1-65535; a rule without a port covers 80 and 443 only.
 * - an allow rule may carry one option after one space, "no-intercept"
 *   (`api.example.org:443 no-intercept`): TLS there is always tunnelled,
 *   never terminated for a secret (docs/secrets.md).
 * - A deny rule that matches beats every allow rule; nothing is allowed
 *   unless a rule allows it (deny by default); there is no built-in
 *   carve-out.
 * - An IP literal destination is allowed only by a rule naming that very
 *   address (a wildcard never matches an address).
 *
 * The daemon builds the policy from config and options, writes it with
 * vivarium_egress_policy_save(), and the egress proxy loads it; the CLI's
 * dry run asks the same code. */

#define VIVARIUM_EGRESS_MODE_NONE      "none"
#define VIVARIUM_EGRESS_MODE_ALLOWLIST "allowlist"
#define VIVARIUM_EGRESS_MODE_OPEN      "open"
/* The explicit HTTP proxy's port at the proxy's guest address (the proxy's
 * network forwards it; the self-test and the docs name it). */
#define VIVARIUM_EGRESS_PROXY_PORT     3128

/* At most this many rules in one policy (groups and extras together). */
#define VIVARIUM_EGRESS_POLICY_MAX_RULES 1024
/* At most this many "egress_allow" rules in one StartSession/SubmitTask. */
#define VIVARIUM_EGRESS_MAX_EXTRA_RULES 256

typedef enum {
  VIVARIUM_EGRESS_ALLOW,
  VIVARIUM_EGRESS_DENY,
} VivariumEgressAction;

typedef struct _VivariumEgressPolicy VivariumEgressPolicy;

/* TRUE for "none", "allowlist" and "open". */
gboolean               vivarium_egress_mode_is_valid      (const gchar *mode);

/* Checks one rule's syntax; on success *host (normalised) and *port (0 =
 * 80 and 443) are set when not NULL. Errors are G_IO_ERROR_INVALID_ARGUMENT
 * with a sentence naming the rule. */
gboolean               vivarium_egress_rule_parse         (const gchar  *rule,
                                                           gchar       **host,
                                                           guint16      *port,
                                                           GError      **error);

/* Normalises a destination name the guest asked for (lower case, no
 * trailing dot; IPv6 with or without brackets comes back in brackets,
 * "[2001:db8::1]", IPv4-mapped as IPv4); NULL if it is not a valid name or
 * IP literal (a wildcard is not a destination). */
gchar                 *vivarium_egress_normalize_host     (const gchar *host);

VivariumEgressPolicy  *vivarium_egress_policy_new         (void);
void                   vivarium_egress_policy_free        (VivariumEgressPolicy *policy);

/* origin: where the rule comes from, shown in decisions ("group debian",
 * "session"); printable ASCII, at most 64 bytes. A rule already in the
 * policy (same action, host and port) is not added again: the first
 * origin stays. More than VIVARIUM_EGRESS_POLICY_MAX_RULES: refused. */
gboolean               vivarium_egress_policy_add_rule    (VivariumEgressPolicy *policy,
                                                           VivariumEgressAction  action,
                                                           const gchar          *rule,
                                                           const gchar          *origin,
                                                           GError              **error);
guint                  vivarium_egress_policy_get_n_rules (VivariumEgressPolicy *policy);

/* The decision for host:port (host as the guest gave it). Returns TRUE
 * when allowed. *reason (when not NULL) gets a sentence fit for the log:
 * "allowed by deb.debian.org (group debian)", "denied by *.evil.example
 * (session)", "no rule allows evil.example:443", "not a valid host name". */
gboolean               vivarium_egress_policy_decide      (VivariumEgressPolicy *policy,
                                                           const gchar          *host,
                                                           guint16               port,
                                                           gchar               **reason);

/* The rules, one line each, in order: "allow deb.debian.org (group debian)",
 * "deny *.evil.example:443 (session)"; for EgressRules and the docs. */
GStrv                  vivarium_egress_policy_describe    (VivariumEgressPolicy *policy);

/* For the proxy's DNS: TRUE when some port of this name is allowed (and
 * the name is not denied on every port an allow rule gives it). FALSE for
 * an IP literal or anything that is not a valid name. */
gboolean               vivarium_egress_policy_allows_name (VivariumEgressPolicy *policy,
                                                           const gchar          *host);

/* For secrets (docs/secrets.md): TRUE when the policy allows host:port by
 * a rule that lets the proxy terminate TLS there, i.e. an allow rule
 * without the "no-intercept" option (`api.example.org:443 no-intercept`),
 * and no deny rule matches. A secret whose host fails this is refused at
 * session start. */
gboolean               vivarium_egress_policy_may_intercept (VivariumEgressPolicy *policy,
                                                             const gchar          *host,
                                                             guint16               port);

/* A GKeyFile text, written atomically (PATH.tmp, fsync, rename, fsync of
 * the directory) with exactly the given mode; load refuses (G_IO_ERROR,
 * naming the path) a file that is not one whole policy: cut short, foreign,
 * over 1 MiB, not a regular file, a symbolic link, or a bad rule in it. */
gboolean               vivarium_egress_policy_save        (VivariumEgressPolicy *policy,
                                                           const gchar          *path,
                                                           gint                  mode,
                                                           GError              **error);
VivariumEgressPolicy  *vivarium_egress_policy_load        (const gchar          *path,
                                                           GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VivariumEgressPolicy, vivarium_egress_policy_free)

G_END_DECLS
