/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <arpa/inet.h>
#include <string.h>
#include <glib/gstdio.h>

#include "vivarium-egress-policy.h"
#include "vivarium-file.h"

/* Longer than any valid rule ("[" 39-char IPv6 "]:65535" or a 253-char
 * name plus a port); anything past it is refused before it is looked at. */
#define RULE_MAX_LEN 300
#define NAME_MAX_LEN 253
#define LABEL_MAX_LEN 63
#define ORIGIN_MAX_LEN 64
/* 1024 rules of at most ~400 bytes each, with room to spare. */
#define POLICY_FILE_MAX (1024 * 1024)
#define POLICY_FORMAT "vivarium-egress-policy"
#define POLICY_VERSION 1
/* The one option a rule may carry, after a space. */
#define OPTION_NO_INTERCEPT "no-intercept"

typedef enum {
  HOST_NAME,
  HOST_WILDCARD,
  HOST_IPV4,
  HOST_IPV6,
} HostKind;

typedef struct {
  VivariumEgressAction action;
  HostKind kind;
  gchar *host;   /* normalised; "*.example.org"; "[2001:db8::1]" */
  guint16 port;  /* 0: 80 and 443 */
  gchar *text;   /* host[:port], as shown in reasons and descriptions */
  gchar *origin;
  gboolean no_intercept;  /* TLS there is always tunnelled (docs/secrets.md) */
} Rule;

struct _VivariumEgressPolicy {
  GPtrArray *rules;
};

static void
rule_free (gpointer data)
{
  Rule *rule = data;

  g_free (rule->host);
  g_free (rule->text);
  g_free (rule->origin);
  g_free (rule);
}

gboolean
vivarium_egress_mode_is_valid (const gchar *mode)
{
  return g_strcmp0 (mode, VIVARIUM_EGRESS_MODE_NONE) == 0 ||
         g_strcmp0 (mode, VIVARIUM_EGRESS_MODE_ALLOWLIST) == 0 ||
         g_strcmp0 (mode, VIVARIUM_EGRESS_MODE_OPEN) == 0;
}

/* A rule or a host in an error message may be anything a caller sent:
 * shown escaped and cut, so a message can never carry a terminal escape
 * or a forged line. */
static gchar *
quote_for_message (const gchar *text, gsize len)
{
  g_autoptr(GString) out = g_string_new (NULL);

  for (gsize i = 0; i < len && i < 80; i++) {
    guchar c = (guchar) text[i];
    if (c >= 0x20 && c < 0x7f && c != '\\')
      g_string_append_c (out, (gchar) c);
    else
      g_string_append_printf (out, "\\x%02x", c);
  }
  if (len > 80)
    g_string_append (out, "…");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static const gchar *
check_chars (const gchar *text, gsize len)
{
  for (gsize i = 0; i < len; i++) {
    guchar c = (guchar) text[i];
    if (c >= 0x80)
      return "it is not ASCII (write an international name in its xn-- form)";
    if (c < 0x20 || c == 0x7f)
      return "it contains a control character";
  }
  return NULL;
}

/* RFC 1123 host names: the proxy resolves exactly this name, so nothing
 * a resolver might read another way (underscores, numeric top labels that
 * inet_aton() would take for an address) gets through. */
static const gchar *
check_name (const gchar *name, gsize len)
{
  gsize label = 0;
  gboolean top_numeric = TRUE;

  if (len == 0)
    return "the host name is empty";
  if (len > NAME_MAX_LEN)
    return "the host name is longer than 253 characters";
  for (gsize i = 0; i <= len; i++) {
    gchar c = i < len ? name[i] : '.';
    if (c == '.') {
      if (label == 0)
        return "a label of the host name is empty";
      if (name[i - 1] == '-')
        return "a label of the host name ends with '-'";
      label = 0;
      continue;
    }
    if (label == 0) {
      top_numeric = TRUE;
      if (c == '-')
        return "a label of the host name starts with '-'";
    }
    if (!g_ascii_isalnum (c) && c != '-')
      return "a host name has only letters, digits, '-' and '.'";
    if (!g_ascii_isdigit (c))
      top_numeric = FALSE;
    if (++label > LABEL_MAX_LEN)
      return "a label of the host name is longer than 63 characters";
  }
  if (top_numeric)
    return "the last label of a host name is never all digits (an IPv4 address is written as four numbers)";
  return NULL;
}

/* An IPv4-mapped IPv6 address is the IPv4 address: one spelling each, so
 * a deny rule on one form catches the other. */
static gchar *
normalize_inet (GInetAddress *address, HostKind *kind)
{
  const guint8 *b = g_inet_address_to_bytes (address);
  static const guint8 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
  g_autofree gchar *text = NULL;

  if (g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV6 && memcmp (b, mapped, 12) == 0) {
    *kind = HOST_IPV4;
    return g_strdup_printf ("%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
  }
  if (g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV4) {
    *kind = HOST_IPV4;
    return g_inet_address_to_string (address);
  }
  text = g_inet_address_to_string (address);
  *kind = HOST_IPV6;
  return g_strdup_printf ("[%s]", text);
}

static const gchar *
parse_ipv6 (const gchar *text, gsize len, HostKind *kind, gchar **out)
{
  g_autofree gchar *inner = g_strndup (text, len);
  g_autoptr(GInetAddress) address = NULL;

  if (strchr (inner, '%') != NULL)
    return "an IPv6 address in a rule has no zone";
  address = g_inet_address_new_from_string (inner);
  if (address == NULL || g_inet_address_get_family (address) != G_SOCKET_FAMILY_IPV6)
    return "the text in brackets is not an IPv6 address";
  *out = normalize_inet (address, kind);
  return NULL;
}

/* text[0..len) without a port: a name, "*.name", an IPv4 address or a
 * bracketed IPv6 address. */
static const gchar *
parse_host (const gchar *text, gsize len, gboolean wildcard_ok, HostKind *kind, gchar **out)
{
  g_autofree gchar *lower = NULL;
  g_autoptr(GInetAddress) address = NULL;
  struct in_addr any;
  const gchar *why;
  gsize skip = 0;

  if (len == 0)
    return "the host is empty";
  if (text[0] == '[') {
    if (len < 3 || text[len - 1] != ']')
      return "an IPv6 address is written in brackets, [2001:db8::1]";
    return parse_ipv6 (text + 1, len - 2, kind, out);
  }
  if (memchr (text, ':', len) != NULL)
    return "an IPv6 address is written in brackets, [2001:db8::1]";
  lower = g_ascii_strdown (text, (gssize) len);
  if (len > 1 && lower[len - 1] == '.')
    lower[--len] = '\0';
  address = g_inet_address_new_from_string (lower);
  if (address != NULL)
    return (*out = normalize_inet (address, kind), NULL);
  if (inet_aton (lower, &any) != 0)
    return "it is an IPv4 address in an unusual form; write it as four decimal numbers";
  if (lower[0] == '*') {
    if (!wildcard_ok)
      return "a wildcard is not a host";
    if (len < 2 || lower[1] != '.')
      return "a wildcard is a whole first label, as in *.example.org";
    skip = 2;
  }
  if (strchr (lower + skip, '*') != NULL)
    return "a wildcard is a whole first label, as in *.example.org";
  why = check_name (lower + skip, len - skip);
  if (why != NULL)
    return why;
  if (skip > 0 && inet_aton (lower + skip, &any) != 0)
    return "a wildcard never covers an IP address";
  *kind = skip > 0 ? HOST_WILDCARD : HOST_NAME;
  *out = g_steal_pointer (&lower);
  return NULL;
}

static const gchar *
parse_port (const gchar *text, guint16 *port)
{
  guint value = 0;

  if (text[0] == '\0')
    return "the port after ':' is empty";
  for (const gchar *p = text; *p != '\0'; p++) {
    if (!g_ascii_isdigit (*p) || p - text >= 5)
      return "the port is not a number from 1 to 65535";
    value = value * 10 + (guint) (*p - '0');
  }
  if (value < 1 || value > 65535)
    return "the port is not a number from 1 to 65535";
  *port = (guint16) value;
  return NULL;
}

/* Splits host[:port]: the port follows the last ':' outside brackets. */
static const gchar *
parse_rule (const gchar *rule, HostKind *kind, gchar **host, guint16 *port)
{
  gsize len = strlen (rule);
  const gchar *close = NULL;
  const gchar *colon;
  const gchar *why;

  *port = 0;
  if (len == 0)
    return "the rule is empty";
  if (len > RULE_MAX_LEN)
    return "the rule is too long";
  why = check_chars (rule, len);
  if (why != NULL)
    return why;
  if (rule[0] == '[') {
    close = strchr (rule, ']');
    if (close == NULL)
      return "an IPv6 address is written in brackets, [2001:db8::1]";
    if (close[1] != '\0' && close[1] != ':')
      return "only a port may follow the brackets, as in [2001:db8::1]:443";
    colon = close[1] == ':' ? close + 1 : NULL;
  } else {
    colon = strchr (rule, ':');
    if (colon != NULL && strchr (colon + 1, ':') != NULL)
      return "an IPv6 address is written in brackets, [2001:db8::1]";
  }
  if (colon != NULL && (why = parse_port (colon + 1, port)) != NULL)
    return why;
  return parse_host (rule, colon != NULL ? (gsize) (colon - rule) : len, TRUE, kind, host);
}

/* "host[:port]" or "host[:port] no-intercept": *bare is the destination
 * part. Exactly one space and a known option, so that a rule reads one
 * way only. */
static const gchar *
split_options (const gchar *rule, gchar **bare, gboolean *no_intercept)
{
  const gchar *space = strchr (rule, ' ');

  *no_intercept = FALSE;
  if (space == NULL) {
    *bare = g_strdup (rule);
    return NULL;
  }
  if (!g_str_equal (space + 1, OPTION_NO_INTERCEPT))
    return "the only option a rule takes is “" OPTION_NO_INTERCEPT "”, after one space";
  *bare = g_strndup (rule, space - rule);
  *no_intercept = TRUE;
  return NULL;
}

static const gchar *
parse_rule_with_options (const gchar *rule, HostKind *kind, gchar **host, guint16 *port, gboolean *no_intercept)
{
  g_autofree gchar *bare = NULL;
  const gchar *why = split_options (rule, &bare, no_intercept);

  if (why != NULL)
    return why;
  return parse_rule (bare, kind, host, port);
}

gboolean
vivarium_egress_rule_parse (const gchar *rule, gchar **host, guint16 *port, GError **error)
{
  g_autofree gchar *parsed = NULL;
  HostKind kind;
  guint16 parsed_port = 0;
  gboolean no_intercept;
  const gchar *why;

  g_return_val_if_fail (rule != NULL, FALSE);
  why = parse_rule_with_options (rule, &kind, &parsed, &parsed_port, &no_intercept);
  if (why != NULL) {
    g_autofree gchar *quoted = quote_for_message (rule, strlen (rule));
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "Bad egress rule “%s”: %s", quoted, why);
    return FALSE;
  }
  if (host != NULL)
    *host = g_steal_pointer (&parsed);
  if (port != NULL)
    *port = parsed_port;
  return TRUE;
}

static gchar *
normalize_destination (const gchar *host, HostKind *kind)
{
  gsize len;
  gchar *out = NULL;

  if (host == NULL)
    return NULL;
  len = strnlen (host, RULE_MAX_LEN + 1);
  if (len > RULE_MAX_LEN || check_chars (host, len) != NULL)
    return NULL;
  /* A guest may name an IPv6 address with or without brackets. */
  if (strchr (host, ':') != NULL && host[0] != '[') {
    if (parse_ipv6 (host, len, kind, &out) != NULL)
      return NULL;
    return out;
  }
  if (parse_host (host, len, FALSE, kind, &out) != NULL)
    return NULL;
  return out;
}

gchar *
vivarium_egress_normalize_host (const gchar *host)
{
  HostKind kind;

  return normalize_destination (host, &kind);
}

VivariumEgressPolicy *
vivarium_egress_policy_new (void)
{
  VivariumEgressPolicy *policy = g_new0 (VivariumEgressPolicy, 1);

  policy->rules = g_ptr_array_new_with_free_func (rule_free);
  return policy;
}

void
vivarium_egress_policy_free (VivariumEgressPolicy *policy)
{
  if (policy == NULL)
    return;
  g_ptr_array_unref (policy->rules);
  g_free (policy);
}

static gboolean
origin_is_valid (const gchar *origin)
{
  gsize len = strnlen (origin, ORIGIN_MAX_LEN + 1);

  if (len == 0 || len > ORIGIN_MAX_LEN)
    return FALSE;
  for (gsize i = 0; i < len; i++) {
    if (origin[i] < 0x20 || origin[i] >= 0x7f)
      return FALSE;
  }
  return TRUE;
}

static Rule *
find_rule (VivariumEgressPolicy *policy, VivariumEgressAction action, const gchar *host, guint16 port)
{
  for (guint i = 0; i < policy->rules->len; i++) {
    Rule *rule = g_ptr_array_index (policy->rules, i);
    if (rule->action == action && rule->port == port && g_str_equal (rule->host, host))
      return rule;
  }
  return NULL;
}

gboolean
vivarium_egress_policy_add_rule (VivariumEgressPolicy *policy, VivariumEgressAction action,
                                 const gchar *rule_text, const gchar *origin, GError **error)
{
  g_autofree gchar *host = NULL;
  HostKind kind;
  guint16 port = 0;
  gboolean no_intercept = FALSE;
  const gchar *why;
  Rule *rule;

  g_return_val_if_fail (policy != NULL, FALSE);
  g_return_val_if_fail (rule_text != NULL && origin != NULL, FALSE);
  g_return_val_if_fail (action == VIVARIUM_EGRESS_ALLOW || action == VIVARIUM_EGRESS_DENY, FALSE);

  if (!origin_is_valid (origin)) {
    g_autofree gchar *quoted = quote_for_message (origin, strlen (origin));
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "The origin “%s” of an egress rule is not 1-%d printable ASCII characters",
                 quoted, ORIGIN_MAX_LEN);
    return FALSE;
  }
  why = parse_rule_with_options (rule_text, &kind, &host, &port, &no_intercept);
  if (why == NULL && no_intercept && action != VIVARIUM_EGRESS_ALLOW)
    why = "“" OPTION_NO_INTERCEPT "” is an option of allow rules";
  if (why != NULL) {
    g_autofree gchar *quoted = quote_for_message (rule_text, strlen (rule_text));
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "Bad egress rule “%s”: %s", quoted, why);
    return FALSE;
  }
  /* Groups overlap (two groups may both allow github.com): the first
   * definition stays and is the one reasons name; "no-intercept" said by
   * any of them stays said (the narrower promise wins). */
  rule = find_rule (policy, action, host, port);
  if (rule != NULL) {
    rule->no_intercept |= no_intercept;
    return TRUE;
  }
  if (policy->rules->len >= VIVARIUM_EGRESS_POLICY_MAX_RULES) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "Too many egress rules: a policy holds at most %d", VIVARIUM_EGRESS_POLICY_MAX_RULES);
    return FALSE;
  }
  rule = g_new0 (Rule, 1);
  rule->action = action;
  rule->kind = kind;
  rule->port = port;
  rule->text = port != 0 ? g_strdup_printf ("%s:%u", host, port) : g_strdup (host);
  rule->host = g_steal_pointer (&host);
  rule->origin = g_strdup (origin);
  rule->no_intercept = no_intercept;
  g_ptr_array_add (policy->rules, rule);
  return TRUE;
}

guint
vivarium_egress_policy_get_n_rules (VivariumEgressPolicy *policy)
{
  g_return_val_if_fail (policy != NULL, 0);
  return policy->rules->len;
}

static gboolean
host_matches (const Rule *rule, const gchar *host, HostKind kind)
{
  switch (rule->kind) {
  case HOST_IPV4:
  case HOST_IPV6:
  case HOST_NAME:
    return rule->kind == kind && g_str_equal (rule->host, host);
  case HOST_WILDCARD:
    if (kind != HOST_NAME)
      return FALSE;
    /* rule->host + 1 is ".example.org": a valid name ending in it has
     * at least one label more, so it is strictly below. */
    return g_str_has_suffix (host, rule->host + 1);
  default:
    g_assert_not_reached ();
  }
}

static gboolean
port_matches (const Rule *rule, guint16 port)
{
  return rule->port == 0 ? (port == 80 || port == 443) : rule->port == port;
}

static const Rule *
first_match (VivariumEgressPolicy *policy, VivariumEgressAction action,
             const gchar *host, HostKind kind, guint16 port)
{
  for (guint i = 0; i < policy->rules->len; i++) {
    const Rule *rule = g_ptr_array_index (policy->rules, i);
    if (rule->action == action && port_matches (rule, port) && host_matches (rule, host, kind))
      return rule;
  }
  return NULL;
}

static gboolean
decide_normalized (VivariumEgressPolicy *policy, const gchar *host, HostKind kind,
                   guint16 port, gchar **reason)
{
  const Rule *deny = first_match (policy, VIVARIUM_EGRESS_DENY, host, kind, port);
  const Rule *allow = deny == NULL ? first_match (policy, VIVARIUM_EGRESS_ALLOW, host, kind, port) : NULL;

  if (reason != NULL) {
    if (deny != NULL)
      *reason = g_strdup_printf ("denied by %s (%s)", deny->text, deny->origin);
    else if (allow != NULL)
      *reason = g_strdup_printf ("allowed by %s (%s)", allow->text, allow->origin);
    else
      *reason = g_strdup_printf ("no rule allows %s:%u", host, port);
  }
  return allow != NULL;
}

gboolean
vivarium_egress_policy_decide (VivariumEgressPolicy *policy, const gchar *host,
                               guint16 port, gchar **reason)
{
  g_autofree gchar *normal = NULL;
  HostKind kind;

  g_return_val_if_fail (policy != NULL, FALSE);
  normal = normalize_destination (host, &kind);
  if (normal == NULL) {
    if (reason != NULL)
      *reason = g_strdup ("not a valid host name");
    return FALSE;
  }
  if (port == 0) {
    if (reason != NULL)
      *reason = g_strdup ("port 0 is not a port");
    return FALSE;
  }
  return decide_normalized (policy, normal, kind, port, reason);
}

GStrv
vivarium_egress_policy_describe (VivariumEgressPolicy *policy)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  g_return_val_if_fail (policy != NULL, NULL);
  for (guint i = 0; i < policy->rules->len; i++) {
    const Rule *rule = g_ptr_array_index (policy->rules, i);
    g_autofree gchar *line = g_strdup_printf ("%s %s%s (%s)",
                                              rule->action == VIVARIUM_EGRESS_ALLOW ? "allow" : "deny",
                                              rule->text, rule->no_intercept ? " " OPTION_NO_INTERCEPT : "",
                                              rule->origin);
    g_strv_builder_add (builder, line);
  }
  return g_strv_builder_end (builder);
}

/* A name is worth an answer when some allow rule covers it on a port that
 * no deny rule takes back: exactly the ports decide() would allow. */
gboolean
vivarium_egress_policy_allows_name (VivariumEgressPolicy *policy, const gchar *host)
{
  g_autofree gchar *normal = NULL;
  HostKind kind;

  g_return_val_if_fail (policy != NULL, FALSE);
  normal = normalize_destination (host, &kind);
  if (normal == NULL || kind != HOST_NAME)
    return FALSE;
  for (guint i = 0; i < policy->rules->len; i++) {
    const Rule *rule = g_ptr_array_index (policy->rules, i);
    if (rule->action != VIVARIUM_EGRESS_ALLOW || !host_matches (rule, normal, kind))
      continue;
    if (rule->port != 0 && decide_normalized (policy, normal, kind, rule->port, NULL))
      return TRUE;
    if (rule->port == 0 && (decide_normalized (policy, normal, kind, 80, NULL) ||
                            decide_normalized (policy, normal, kind, 443, NULL)))
      return TRUE;
  }
  return FALSE;
}

/* Saved as one [Policy] group, one [Rule N] group per rule and an [End]
 * group last that repeats the count: a file cut anywhere lacks [End] or
 * disagrees with it, so load() can tell a whole policy from a part. */
static gchar *
policy_to_text (VivariumEgressPolicy *policy)
{
  g_autoptr(GKeyFile) file = g_key_file_new ();

  g_key_file_set_string (file, "Policy", "Format", POLICY_FORMAT);
  g_key_file_set_integer (file, "Policy", "Version", POLICY_VERSION);
  g_key_file_set_integer (file, "Policy", "Rules", (gint) policy->rules->len);
  for (guint i = 0; i < policy->rules->len; i++) {
    const Rule *rule = g_ptr_array_index (policy->rules, i);
    g_autofree gchar *group = g_strdup_printf ("Rule %u", i);
    g_key_file_set_string (file, group, "Action", rule->action == VIVARIUM_EGRESS_ALLOW ? "allow" : "deny");
    g_autofree gchar *text = g_strdup_printf ("%s%s", rule->text, rule->no_intercept ? " " OPTION_NO_INTERCEPT : "");
    g_key_file_set_string (file, group, "Rule", text);
    g_key_file_set_string (file, group, "Origin", rule->origin);
  }
  g_key_file_set_integer (file, "End", "Rules", (gint) policy->rules->len);
  return g_key_file_to_data (file, NULL, NULL);
}

/* Allowed, and no allow rule that matches says no-intercept: where two
 * rules cover a host (a wildcard and the name), the one that promises
 * not to look inside wins. */
gboolean
vivarium_egress_policy_may_intercept (VivariumEgressPolicy *policy, const gchar *host, guint16 port)
{
  g_autofree gchar *normal = NULL;
  HostKind kind;

  g_return_val_if_fail (policy != NULL, FALSE);
  if (!vivarium_egress_policy_decide (policy, host, port, NULL))
    return FALSE;
  normal = normalize_destination (host, &kind);
  for (guint i = 0; i < policy->rules->len; i++) {
    const Rule *rule = g_ptr_array_index (policy->rules, i);
    if (rule->action == VIVARIUM_EGRESS_ALLOW && rule->no_intercept && port_matches (rule, port) &&
        host_matches (rule, normal, kind))
      return FALSE;
  }
  return TRUE;
}

/* The tree's one durable write (common/vivarium-file.h), so the proxy
 * never reads half a policy. */
gboolean
vivarium_egress_policy_save (VivariumEgressPolicy *policy, const gchar *path, gint mode, GError **error)
{
  g_autofree gchar *text = NULL;

  g_return_val_if_fail (policy != NULL && path != NULL, FALSE);
  text = policy_to_text (policy);
  return vivarium_file_write_durably (path, text, strlen (text), mode, error);
}

static gchar *
read_bounded (const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  gsize len = 0;
  g_autofree gchar *buf = vivarium_file_read_bounded (path, POLICY_FILE_MAX, &len, &local);

  if (buf == NULL && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_INVALID_DATA)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "%s is not an egress policy: not a regular file of at most %d bytes", path, POLICY_FILE_MAX);
    return NULL;
  }
  if (buf == NULL) {
    g_propagate_error (error, g_steal_pointer (&local));
    return NULL;
  }
  if (memchr (buf, '\0', len) != NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not an egress policy: it holds a NUL byte", path);
    return NULL;
  }
  return g_steal_pointer (&buf);
}

/* GKeyFile reads a value with an invalid escape ("\z") as a string AND an
 * error: the error wins, save() never writes one. */
static gchar *
get_string (GKeyFile *file, const gchar *group, const gchar *key, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree gchar *value = g_key_file_get_string (file, group, key, &local);

  if (local != NULL) {
    g_propagate_error (error, g_steal_pointer (&local));
    return NULL;
  }
  return g_steal_pointer (&value);
}

static gboolean
load_rule (VivariumEgressPolicy *policy, GKeyFile *file, guint i, GError **error)
{
  g_autofree gchar *group = g_strdup_printf ("Rule %u", i);
  g_autofree gchar *action = get_string (file, group, "Action", error);
  g_autofree gchar *rule = NULL;
  g_autofree gchar *origin = NULL;

  if (action == NULL)
    return FALSE;
  rule = get_string (file, group, "Rule", error);
  if (rule == NULL)
    return FALSE;
  origin = get_string (file, group, "Origin", error);
  if (origin == NULL)
    return FALSE;
  if (!g_str_equal (action, "allow") && !g_str_equal (action, "deny")) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "[%s] Action is neither allow nor deny", group);
    return FALSE;
  }
  return vivarium_egress_policy_add_rule (policy,
                                          g_str_equal (action, "allow") ? VIVARIUM_EGRESS_ALLOW : VIVARIUM_EGRESS_DENY,
                                          rule, origin, error);
}

static gboolean
load_from_keyfile (VivariumEgressPolicy *policy, GKeyFile *file, GError **error)
{
  g_autofree gchar *format = g_key_file_get_string (file, "Policy", "Format", NULL);
  gint version = g_key_file_get_integer (file, "Policy", "Version", NULL);
  gint n = g_key_file_get_integer (file, "Policy", "Rules", NULL);
  gint end = g_key_file_has_key (file, "End", "Rules", NULL) ? g_key_file_get_integer (file, "End", "Rules", NULL) : -1;
  g_auto(GStrv) groups = g_key_file_get_groups (file, NULL);
  gsize n_groups = g_strv_length (groups);

  if (g_strcmp0 (format, POLICY_FORMAT) != 0 || version != POLICY_VERSION) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "it is not a version %d egress policy", POLICY_VERSION);
    return FALSE;
  }
  if (n < 0 || n > VIVARIUM_EGRESS_POLICY_MAX_RULES || end != n || n_groups != (gsize) n + 2) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "it is cut short or its rule count does not add up");
    return FALSE;
  }
  for (gint i = 0; i < n; i++) {
    if (!load_rule (policy, file, (guint) i, error))
      return FALSE;
  }
  return TRUE;
}

VivariumEgressPolicy *
vivarium_egress_policy_load (const gchar *path, GError **error)
{
  g_autoptr(VivariumEgressPolicy) policy = vivarium_egress_policy_new ();
  g_autoptr(GKeyFile) file = g_key_file_new ();
  g_autoptr(GError) local_error = NULL;
  g_autofree gchar *text = NULL;

  g_return_val_if_fail (path != NULL, NULL);
  text = read_bounded (path, error);
  if (text == NULL)
    return NULL;
  /* save() ends the file with a newline; without it the last line may be
   * a cut one ("Rules=1" of "Rules=12"). */
  if (!g_str_has_suffix (text, "\n")) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "%s is not a whole egress policy: it does not end with a newline", path);
    return NULL;
  }
  if (!g_key_file_load_from_data (file, text, (gsize) -1, G_KEY_FILE_NONE, &local_error) ||
      !load_from_keyfile (policy, file, &local_error)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                 "%s is not a whole egress policy: %s", path, local_error->message);
    return NULL;
  }
  return g_steal_pointer (&policy);
}
