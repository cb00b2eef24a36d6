/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vd-guard-table"

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"

#include "vd-guard-table.h"

#define GUARD_CHAIN       "output"
#define GUARD_SET4        "deny4"
#define GUARD_SET6        "deny6"
#define GUARD_SET4_ID     1
#define GUARD_SET6_ID     2
/* nft's own datatype numbers, so that `nft list` prints the sets' types */
#define GUARD_TYPE_IPADDR  7
#define GUARD_TYPE_IP6ADDR 8

/* The kernel answers a batch before sendmsg() returns, so these bounds only
 * matter if something is badly wrong; they keep every loop finite. */
#define GUARD_RECV_TIMEOUT_MS 5000
#define GUARD_RECV_ROUNDS_MAX 100000
#define GUARD_DUMP_TRIES_MAX  3
#define GUARD_RECV_BUFSIZE    (64 * 1024)

typedef struct nftnl_table NftnlTable;
typedef struct nftnl_chain NftnlChain;
typedef struct nftnl_set NftnlSet;
typedef struct nftnl_rule NftnlRule;
typedef struct nftnl_udata_buf NftnlUdataBuf;
typedef struct nftnl_expr_iter NftnlExprIter;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlTable, nftnl_table_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlChain, nftnl_chain_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlSet, nftnl_set_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlRule, nftnl_rule_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlUdataBuf, nftnl_udata_buf_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NftnlExprIter, nftnl_expr_iter_destroy)

/* An inclusive address range, big-endian; IPv4 uses the first 4 bytes. */
typedef struct {
  guint8 start[16];
  guint8 end[16];
} GuardRange;

typedef struct {
  guint32 uid;
  guint64 handle4;   /* 0 while not installed */
  guint64 handle6;
} GuardSession;

struct _VdGuardTable {
  GObject            parent_instance;
  guint32            uid_first;
  guint32            uid_last;
  GArray            *extra4;    /* GuardRange: administrator and host additions */
  GArray            *extra6;
  GArray            *sessions;  /* GuardSession, in the chain's rule order */
  struct mnl_socket *nl;        /* owns the table: closing it removes the table */
  guint32            portid;
  guint32            seq;
};

G_DEFINE_TYPE (VdGuardTable, vd_guard_table, G_TYPE_OBJECT)

/* ---- addresses and intervals ------------------------------------------- */

static gboolean
guard_range_from_cidr (const gchar *cidr, GSocketFamily *family, GuardRange *range, GError **error)
{
  g_autoptr(GInetAddress) addr = NULL;
  const guint8 *bytes;
  guint prefix = 0;
  gsize len;

  if (cidr == NULL || cidr[0] == '\0') {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                         "An empty string is not an IP address or network");
    return FALSE;
  }
  if (!vivarium_cidr_parse (cidr, &addr, &prefix, error))
    return FALSE;
  bytes = g_inet_address_to_bytes (addr);
  len = g_inet_address_get_native_size (addr);
  memset (range, 0, sizeof (*range));
  for (gsize bit = 0; bit < len * 8; bit++) {
    guint8 mask = 0x80 >> (bit % 8);
    gboolean set = (bytes[bit / 8] & mask) != 0;
    if (bit >= prefix && set) {
      /* a typo such as 10.1.0.0/8 must not silently widen or narrow the list */
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "“%s” has address bits set beyond its prefix length %u", cidr, prefix);
      return FALSE;
    }
    if (set)
      range->start[bit / 8] |= mask;
    if (set || bit >= prefix)
      range->end[bit / 8] |= mask;
  }
  *family = g_inet_address_get_family (addr);
  return TRUE;
}

/* Adds one to a big-endian number; FALSE if it wrapped (it was all ones). */
static gboolean
guard_addr_increment (guint8 *addr, gsize len)
{
  for (gsize i = len; i > 0; i--) {
    if (++addr[i - 1] != 0)
      return TRUE;
  }
  return FALSE;
}

static gint
guard_range_compare (gconstpointer a, gconstpointer b, gpointer user_data)
{
  return memcmp (((const GuardRange *) a)->start, ((const GuardRange *) b)->start,
                 GPOINTER_TO_SIZE (user_data));
}

/* The kernel refuses overlapping intervals (EEXIST), and an administrator's
 * range may well sit inside a builtin one: merge overlapping and adjacent
 * ranges into the smallest equivalent list, sorted. */
static GArray *
guard_ranges_merge (GArray *ranges, gsize len)
{
  GArray *out = g_array_new (FALSE, TRUE, sizeof (GuardRange));
  g_autoptr(GArray) sorted = g_array_copy (ranges);

  g_array_sort_with_data (sorted, guard_range_compare, GSIZE_TO_POINTER (len));
  for (guint i = 0; i < sorted->len; i++) {
    GuardRange *next = &g_array_index (sorted, GuardRange, i);
    GuardRange *cur = out->len > 0 ? &g_array_index (out, GuardRange, out->len - 1) : NULL;
    guint8 after[16];

    if (cur != NULL) {
      memcpy (after, cur->end, sizeof (after));
      if (!guard_addr_increment (after, len) || memcmp (next->start, after, len) <= 0) {
        if (memcmp (next->end, cur->end, len) > 0)
          memcpy (cur->end, next->end, len);
        continue;
      }
    }
    g_array_append_val (out, *next);
  }
  return out;
}

static GArray *
guard_table_collect_ranges (VdGuardTable *self, GSocketFamily family)
{
  g_autoptr(GArray) all = g_array_new (FALSE, TRUE, sizeof (GuardRange));
  const VivariumDenyEntry *entries;
  gsize n_entries = 0;

  entries = vivarium_denylist_builtin (&n_entries);
  for (gsize i = 0; i < n_entries; i++) {
    g_autofree gchar *cidr = NULL;
    g_autoptr(GError) error_local = NULL;
    GSocketFamily got = G_SOCKET_FAMILY_INVALID;
    GuardRange range;

    if (entries[i].family != family)
      continue;
    cidr = g_strdup_printf ("%s/%u", entries[i].address, entries[i].prefix);
    if (!guard_range_from_cidr (cidr, &got, &range, &error_local) || got != family) {
      /* the builtin list is ours: a bad entry is a programming error */
      g_critical ("builtin deny entry %s is invalid: %s", cidr,
                  error_local != NULL ? error_local->message : "wrong family");
      continue;
    }
    g_array_append_val (all, range);
  }
  g_array_append_vals (all, (family == G_SOCKET_FAMILY_IPV4 ? self->extra4 : self->extra6)->data,
                       (family == G_SOCKET_FAMILY_IPV4 ? self->extra4 : self->extra6)->len);
  return guard_ranges_merge (all, family == G_SOCKET_FAMILY_IPV4 ? 4 : 16);
}

static gchar *
guard_addr_to_string (const guint8 *bytes, gsize len)
{
  g_autoptr(GInetAddress) addr = NULL;

  addr = g_inet_address_new_from_bytes (bytes, len == 4 ? G_SOCKET_FAMILY_IPV4 : G_SOCKET_FAMILY_IPV6);
  return g_inet_address_to_string (addr);
}

/* ---- building objects -------------------------------------------------- */

static struct nftnl_set *
guard_set_new (GSocketFamily family, gboolean with_id)
{
  struct nftnl_set *s = nftnl_set_alloc ();
  gboolean v4 = family == G_SOCKET_FAMILY_IPV4;

  nftnl_set_set_u32 (s, NFTNL_SET_FAMILY, NFPROTO_INET);
  nftnl_set_set_str (s, NFTNL_SET_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_set_set_str (s, NFTNL_SET_NAME, v4 ? GUARD_SET4 : GUARD_SET6);
  if (with_id)
    nftnl_set_set_u32 (s, NFTNL_SET_ID, v4 ? GUARD_SET4_ID : GUARD_SET6_ID);
  return s;
}

static struct nftnl_set *
guard_set_new_full (GSocketFamily family)
{
  struct nftnl_set *s = guard_set_new (family, TRUE);
  gboolean v4 = family == G_SOCKET_FAMILY_IPV4;

  nftnl_set_set_u32 (s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL);
  nftnl_set_set_u32 (s, NFTNL_SET_KEY_TYPE, v4 ? GUARD_TYPE_IPADDR : GUARD_TYPE_IP6ADDR);
  nftnl_set_set_u32 (s, NFTNL_SET_KEY_LEN, v4 ? 4 : 16);
  return s;
}

static void
guard_rule_add_meta (struct nftnl_rule *r, guint32 key)
{
  struct nftnl_expr *e = nftnl_expr_alloc ("meta");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_META_KEY, key);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_META_DREG, NFT_REG_1);
  nftnl_rule_add_expr (r, e);
}

static void
guard_rule_add_cmp (struct nftnl_rule *r, const void *data, guint32 len)
{
  struct nftnl_expr *e = nftnl_expr_alloc ("cmp");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
  nftnl_expr_set (e, NFTNL_EXPR_CMP_DATA, data, len);
  nftnl_rule_add_expr (r, e);
}

/* meta skuid is in host byte order and the kernel compares ranges with
 * memcmp(), so the uid is converted to big-endian before the range test,
 * exactly as nft does for `meta skuid A-B`. */
static void
guard_rule_add_uid_range (struct nftnl_rule *r, guint32 first, guint32 last)
{
  struct nftnl_expr *e = nftnl_expr_alloc ("byteorder");
  guint32 from = GUINT32_TO_BE (first);
  guint32 to = GUINT32_TO_BE (last);

  nftnl_expr_set_u32 (e, NFTNL_EXPR_BYTEORDER_SREG, NFT_REG_1);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_BYTEORDER_DREG, NFT_REG_1);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_BYTEORDER_OP, NFT_BYTEORDER_HTON);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_BYTEORDER_LEN, 4);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_BYTEORDER_SIZE, 4);
  nftnl_rule_add_expr (r, e);

  e = nftnl_expr_alloc ("range");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_RANGE_SREG, NFT_REG_1);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_RANGE_OP, NFT_RANGE_EQ);
  nftnl_expr_set (e, NFTNL_EXPR_RANGE_FROM_DATA, &from, sizeof (from));
  nftnl_expr_set (e, NFTNL_EXPR_RANGE_TO_DATA, &to, sizeof (to));
  nftnl_rule_add_expr (r, e);
}

/* `ip daddr @deny4 counter drop` (or the ip6 twin) in an inet table */
static void
guard_rule_add_daddr_drop (struct nftnl_rule *r, gboolean v4, gboolean with_set_id)
{
  struct nftnl_expr *e;
  guint8 proto = v4 ? NFPROTO_IPV4 : NFPROTO_IPV6;

  guard_rule_add_meta (r, NFT_META_NFPROTO);
  guard_rule_add_cmp (r, &proto, sizeof (proto));

  e = nftnl_expr_alloc ("payload");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_PAYLOAD_OFFSET, v4 ? 16 : 24);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_PAYLOAD_LEN, v4 ? 4 : 16);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
  nftnl_rule_add_expr (r, e);

  e = nftnl_expr_alloc ("lookup");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  nftnl_expr_set_str (e, NFTNL_EXPR_LOOKUP_SET, v4 ? GUARD_SET4 : GUARD_SET6);
  /* the id names a set created in the same transaction; later the name does */
  if (with_set_id)
    nftnl_expr_set_u32 (e, NFTNL_EXPR_LOOKUP_SET_ID, v4 ? GUARD_SET4_ID : GUARD_SET6_ID);
  nftnl_rule_add_expr (r, e);

  nftnl_rule_add_expr (r, nftnl_expr_alloc ("counter"));

  e = nftnl_expr_alloc ("immediate");
  nftnl_expr_set_u32 (e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32 (e, NFTNL_EXPR_IMM_VERDICT, NF_DROP);
  nftnl_rule_add_expr (r, e);
}

static gchar *
guard_rule_comment_for_uid (guint32 uid, gboolean v4)
{
  return g_strdup_printf ("vivarium session uid %u %s", uid, v4 ? "ipv4" : "ipv6");
}

static gchar *
guard_rule_comment_for_range (VdGuardTable *self, gboolean v4)
{
  return g_strdup_printf ("vivarium uids %u-%u %s", self->uid_first, self->uid_last,
                          v4 ? "ipv4" : "ipv6");
}

/* uid_first == uid_last with range == FALSE: one session; otherwise the
 * catch-all for the whole covered range. */
static struct nftnl_rule *
guard_rule_new (VdGuardTable *self, guint32 uid, gboolean catch_all, gboolean v4, gboolean with_set_id)
{
  struct nftnl_rule *r = nftnl_rule_alloc ();
  g_autoptr(NftnlUdataBuf) udata = nftnl_udata_buf_alloc (256);
  g_autofree gchar *comment = NULL;

  nftnl_rule_set_u32 (r, NFTNL_RULE_FAMILY, NFPROTO_INET);
  nftnl_rule_set_str (r, NFTNL_RULE_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_rule_set_str (r, NFTNL_RULE_CHAIN, GUARD_CHAIN);

  guard_rule_add_meta (r, NFT_META_SKUID);
  if (catch_all) {
    guard_rule_add_uid_range (r, self->uid_first, self->uid_last);
    comment = guard_rule_comment_for_range (self, v4);
  } else {
    guard_rule_add_cmp (r, &uid, sizeof (uid));
    comment = guard_rule_comment_for_uid (uid, v4);
  }
  guard_rule_add_daddr_drop (r, v4, with_set_id);

  /* the same comment format as nft, so `nft list` shows who a rule is for */
  nftnl_udata_put_strz (udata, NFTNL_UDATA_RULE_COMMENT, comment);
  nftnl_rule_set_data (r, NFTNL_RULE_USERDATA, nftnl_udata_buf_data (udata), nftnl_udata_buf_len (udata));
  return r;
}

static gchar *
guard_rule_get_comment (struct nftnl_rule *r)
{
  const guint8 *data;
  guint32 len = 0;

  if (!nftnl_rule_is_set (r, NFTNL_RULE_USERDATA))
    return NULL;
  data = nftnl_rule_get_data (r, NFTNL_RULE_USERDATA, &len);
  /* TLV: type, length, value; the comment is NUL-terminated by nft's rules */
  for (guint32 off = 0; off + 2 <= len;) {
    guint8 type = data[off];
    guint8 vlen = data[off + 1];
    if (off + 2 + vlen > len)
      break;
    if (type == NFTNL_UDATA_RULE_COMMENT && vlen > 0)
      return g_strndup ((const gchar *) data + off + 2, vlen);
    off += 2 + vlen;
  }
  return NULL;
}

/* ---- a stable text form, shared by describe and verify ------------------ */

static void
guard_append_words (GString *out, const void *data, guint32 len)
{
  const guint8 *bytes = data;

  /* 32-bit words in host order, as `nft --debug=netlink` prints them */
  for (guint32 off = 0; off < len; off += 4) {
    guint32 word = 0;
    memcpy (&word, bytes + off, MIN (4, len - off));
    g_string_append_printf (out, " 0x%08x", word);
  }
}

static const gchar *
guard_meta_key_name (guint32 key)
{
  switch (key) {
  case NFT_META_SKUID:
    return "skuid";
  case NFT_META_NFPROTO:
    return "nfproto";
  default:
    return "other";
  }
}

static void
guard_append_expr (GString *out, struct nftnl_expr *e)
{
  const gchar *name = nftnl_expr_get_str (e, NFTNL_EXPR_NAME);
  const void *data;
  guint32 len = 0;

  if (g_strcmp0 (name, "meta") == 0) {
    guint32 key = nftnl_expr_get_u32 (e, NFTNL_EXPR_META_KEY);
    g_string_append_printf (out, "[ meta load %s(%u) => reg %u ]", guard_meta_key_name (key), key,
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_META_DREG));
  } else if (g_strcmp0 (name, "cmp") == 0) {
    g_string_append_printf (out, "[ cmp op %u reg %u", nftnl_expr_get_u32 (e, NFTNL_EXPR_CMP_OP),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_CMP_SREG));
    data = nftnl_expr_get (e, NFTNL_EXPR_CMP_DATA, &len);
    guard_append_words (out, data, len);
    g_string_append_printf (out, " (%u bytes) ]", len);
  } else if (g_strcmp0 (name, "payload") == 0) {
    g_string_append_printf (out, "[ payload load %ub @ base %u + %u => reg %u ]",
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_PAYLOAD_LEN),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_PAYLOAD_BASE),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_PAYLOAD_OFFSET),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_PAYLOAD_DREG));
  } else if (g_strcmp0 (name, "lookup") == 0) {
    g_string_append_printf (out, "[ lookup reg %u set %s flags %u ]",
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_LOOKUP_SREG),
                            nftnl_expr_get_str (e, NFTNL_EXPR_LOOKUP_SET),
                            nftnl_expr_is_set (e, NFTNL_EXPR_LOOKUP_FLAGS) ?
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_LOOKUP_FLAGS) : 0);
  } else if (g_strcmp0 (name, "counter") == 0) {
    /* the values change with traffic; verify compares the shape only */
    g_string_append (out, "[ counter ]");
  } else if (g_strcmp0 (name, "immediate") == 0) {
    gint verdict = (gint) nftnl_expr_get_u32 (e, NFTNL_EXPR_IMM_VERDICT);
    g_string_append_printf (out, "[ immediate reg %u verdict %d%s ]",
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_IMM_DREG), verdict,
                            verdict == NF_DROP ? " (drop)" : "");
  } else if (g_strcmp0 (name, "byteorder") == 0) {
    g_string_append_printf (out, "[ byteorder reg %u = op %u(reg %u, %u, %u) ]",
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_BYTEORDER_DREG),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_BYTEORDER_OP),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_BYTEORDER_SREG),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_BYTEORDER_LEN),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_BYTEORDER_SIZE));
  } else if (g_strcmp0 (name, "range") == 0) {
    g_string_append_printf (out, "[ range op %u reg %u", nftnl_expr_get_u32 (e, NFTNL_EXPR_RANGE_OP),
                            nftnl_expr_get_u32 (e, NFTNL_EXPR_RANGE_SREG));
    data = nftnl_expr_get (e, NFTNL_EXPR_RANGE_FROM_DATA, &len);
    guard_append_words (out, data, len);
    data = nftnl_expr_get (e, NFTNL_EXPR_RANGE_TO_DATA, &len);
    guard_append_words (out, data, len);
    g_string_append (out, " ]");
  } else {
    g_string_append_printf (out, "[ %s ]", name != NULL ? name : "(unnamed)");
  }
}

static gchar *
guard_rule_to_string (struct nftnl_rule *r)
{
  g_autoptr(NftnlExprIter) iter = nftnl_expr_iter_create (r);
  g_autofree gchar *comment = guard_rule_get_comment (r);
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "rule %s %s comment \"%s\"",
                          nftnl_rule_get_str (r, NFTNL_RULE_TABLE),
                          nftnl_rule_get_str (r, NFTNL_RULE_CHAIN),
                          comment != NULL ? comment : "");
  for (struct nftnl_expr *e = nftnl_expr_iter_next (iter); e != NULL; e = nftnl_expr_iter_next (iter)) {
    g_string_append (out, "\n    ");
    guard_append_expr (out, e);
  }
  return g_string_free (out, FALSE);
}

typedef struct {
  guint8  key[16];
  guint32 len;
  guint32 flags;
} GuardElem;

static gint
guard_elem_compare (gconstpointer a, gconstpointer b)
{
  const GuardElem *ea = a;
  const GuardElem *eb = b;
  return memcmp (ea->key, eb->key, MIN (ea->len, eb->len));
}

/* Reads the elements of a NEWSETELEM message. libnftnl numbers the element
 * nests 1, 2, 3… when building (the kernel ignores the nest type) but wants
 * every nest to be NFTA_LIST_ELEM when parsing, so it cannot read back its
 * own messages; this reads both forms. */
static gboolean
guard_parse_elems (const struct nlmsghdr *nlh, GArray *elems, gchar **set_name, guint32 *set_id)
{
  const struct nlattr *attr;
  const struct nlattr *nest;
  const struct nlattr *inner;
  const struct nlattr *data;

  mnl_attr_for_each (attr, nlh, sizeof (struct nfgenmsg)) {
    switch (mnl_attr_get_type (attr)) {
    case NFTA_SET_ELEM_LIST_SET:
      if (set_name != NULL && mnl_attr_validate (attr, MNL_TYPE_NUL_STRING) == 0) {
        g_free (*set_name);
        *set_name = g_strdup (mnl_attr_get_str (attr));
      }
      break;
    case NFTA_SET_ELEM_LIST_SET_ID:
      if (set_id != NULL && mnl_attr_validate (attr, MNL_TYPE_U32) == 0)
        *set_id = ntohl (mnl_attr_get_u32 (attr));
      break;
    case NFTA_SET_ELEM_LIST_ELEMENTS:
      mnl_attr_for_each_nested (nest, attr) {
        GuardElem elem = { 0 };
        mnl_attr_for_each_nested (inner, nest) {
          if (mnl_attr_get_type (inner) == NFTA_SET_ELEM_FLAGS && mnl_attr_validate (inner, MNL_TYPE_U32) == 0)
            elem.flags = ntohl (mnl_attr_get_u32 (inner));
          if (mnl_attr_get_type (inner) != NFTA_SET_ELEM_KEY)
            continue;
          mnl_attr_for_each_nested (data, inner) {
            guint16 len = mnl_attr_get_payload_len (data);
            if (mnl_attr_get_type (data) == NFTA_DATA_VALUE && (len == 4 || len == 16)) {
              memcpy (elem.key, mnl_attr_get_payload (data), len);
              elem.len = len;
            }
          }
        }
        if (elem.len == 0)
          return FALSE;
        g_array_append_val (elems, elem);
      }
      break;
    default:
      break;
    }
  }
  return TRUE;
}

/* One line per element, sorted by key: the kernel dumps in its own order. */
static GPtrArray *
guard_elems_to_strings (GArray *elems)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);

  g_array_sort (elems, guard_elem_compare);
  for (guint i = 0; i < elems->len; i++) {
    GuardElem *elem = &g_array_index (elems, GuardElem, i);
    g_autofree gchar *addr = guard_addr_to_string (elem->key, elem->len);
    g_ptr_array_add (out, g_strdup_printf ("elem %s%s", addr,
                                           (elem->flags & NFT_SET_ELEM_INTERVAL_END) != 0 ?
                                           " interval-end" : ""));
  }
  return out;
}

/* The elements an install puts in a set, in the same form. */
static GArray *
guard_ranges_to_elems (GArray *ranges, gsize len)
{
  GArray *elems = g_array_new (FALSE, TRUE, sizeof (GuardElem));

  for (guint i = 0; i < ranges->len; i++) {
    GuardRange *range = &g_array_index (ranges, GuardRange, i);
    GuardElem elem = { .len = (guint32) len };

    memcpy (elem.key, range->start, len);
    g_array_append_val (elems, elem);
    memcpy (elem.key, range->end, len);
    if (!guard_addr_increment (elem.key, len))
      continue;
    elem.flags = NFT_SET_ELEM_INTERVAL_END;
    g_array_append_val (elems, elem);
  }
  return elems;
}

/* Interval sets hold [start, end + 1): a start element, then an element
 * flagged INTERVAL_END one past the last address, unless the range runs to
 * the end of the address space. */
static void
guard_set_add_ranges (struct nftnl_set *s, GArray *ranges, gsize len)
{
  g_autoptr(GArray) elems = guard_ranges_to_elems (ranges, len);

  for (guint i = 0; i < elems->len; i++) {
    GuardElem *elem = &g_array_index (elems, GuardElem, i);
    struct nftnl_set_elem *e = nftnl_set_elem_alloc ();

    nftnl_set_elem_set (e, NFTNL_SET_ELEM_KEY, elem->key, elem->len);
    if (elem->flags != 0)
      nftnl_set_elem_set_u32 (e, NFTNL_SET_ELEM_FLAGS, elem->flags);
    nftnl_set_elem_add (s, e);
  }
}

/* ---- netlink conversation ---------------------------------------------- */

typedef struct {
  struct mnl_nlmsg_batch *batch;
  gchar                  *buf;
  guint32                 seq_first;
  guint32                 seq;
  GPtrArray              *what;  /* what each message does, by seq - seq_first */
} GuardBatch;

static void
guard_batch_free (GuardBatch *b)
{
  mnl_nlmsg_batch_stop (b->batch);
  g_free (b->buf);
  g_ptr_array_unref (b->what);
  g_free (b);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (GuardBatch, guard_batch_free)

/* libmnl wants a buffer twice the limit: the message that overflows the
 * limit is still written behind it. */
static GuardBatch *
guard_batch_new (gsize limit, guint32 seq)
{
  GuardBatch *b = g_new0 (GuardBatch, 1);

  b->buf = g_malloc0 (limit * 2);
  b->batch = mnl_nlmsg_batch_start (b->buf, limit);
  b->seq_first = seq;
  b->seq = seq;
  b->what = g_ptr_array_new_with_free_func (g_free);
  nftnl_batch_begin (mnl_nlmsg_batch_current (b->batch), b->seq++);
  g_ptr_array_add (b->what, g_strdup ("starting the transaction"));
  mnl_nlmsg_batch_next (b->batch);
  return b;
}

static struct nlmsghdr *
guard_batch_msg (GuardBatch *b, guint16 type, guint16 flags)
{
  return nftnl_nlmsg_build_hdr (mnl_nlmsg_batch_current (b->batch), type, NFPROTO_INET,
                                flags, b->seq++);
}

/* FALSE when the batch outgrew its buffer; the caller starts over bigger */
static gboolean
guard_batch_next (GuardBatch *b, const gchar *what)
{
  g_ptr_array_add (b->what, g_strdup (what));
  return mnl_nlmsg_batch_next (b->batch);
}

static gboolean
guard_batch_end (GuardBatch *b)
{
  nftnl_batch_end (mnl_nlmsg_batch_current (b->batch), b->seq++);
  return guard_batch_next (b, "committing the transaction");
}

static const gchar *
guard_batch_what (GuardBatch *b, guint32 seq)
{
  if (seq < b->seq_first || seq - b->seq_first >= b->what->len)
    return "the transaction";
  return g_ptr_array_index (b->what, seq - b->seq_first);
}

static void
guard_set_kernel_error (GError **error, const gchar *doing, int errnum)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
               "The network guard (nftables table inet %s) is unavailable: %s failed: %s",
               VIVARIUM_NFT_TABLE, doing, g_strerror (errnum));
}

static gboolean
guard_socket_wait (struct mnl_socket *nl, GError **error)
{
  struct pollfd pfd = { .fd = mnl_socket_get_fd (nl), .events = POLLIN };
  int rc;

  do
    rc = poll (&pfd, 1, GUARD_RECV_TIMEOUT_MS);
  while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    guard_set_kernel_error (error, "waiting for the kernel's answer", errno);
    return FALSE;
  }
  if (rc == 0) {
    guard_set_kernel_error (error, "waiting for the kernel's answer", ETIMEDOUT);
    return FALSE;
  }
  return TRUE;
}

static gssize
guard_socket_recv (struct mnl_socket *nl, gchar *buf, gsize size, GError **error)
{
  gssize n;

  if (!guard_socket_wait (nl, error))
    return -1;
  n = mnl_socket_recvfrom (nl, buf, size);
  if (n < 0) {
    /* ENOBUFS here means answers were lost: never guess what they said */
    guard_set_kernel_error (error, "reading the kernel's answer", errno);
    return -1;
  }
  return n;
}

typedef void (*GuardEchoFunc) (const struct nlmsghdr *nlh, gpointer user_data);

/* Handles one message of the kernel's answer to a batch; TRUE when the
 * answer is complete: the ack of the last message (the only one that asks
 * for an ack), or an error about the batch as a whole. */
static gboolean
guard_batch_handle (GuardBatch *b, const struct nlmsghdr *nlh, gint *first_errno,
                    guint32 *failed_seq, GuardEchoFunc echo, gpointer echo_data)
{
  const struct nlmsgerr *err;
  guint32 last_seq = b->seq - 2;  /* the message before the batch end */

  if (nlh->nlmsg_type != NLMSG_ERROR) {
    if (echo != NULL)
      echo (nlh, echo_data);
    return FALSE;
  }
  if (nlh->nlmsg_len < mnl_nlmsg_size (sizeof (struct nlmsgerr)))
    return FALSE;
  err = mnl_nlmsg_get_payload (nlh);
  if (err->error != 0 && *first_errno == 0) {
    *first_errno = -err->error;
    *failed_seq = nlh->nlmsg_seq;
  }
  return nlh->nlmsg_seq == last_seq || (err->error != 0 && nlh->nlmsg_seq == b->seq_first);
}

static gboolean
guard_batch_send (struct mnl_socket *nl, GuardBatch *b, const gchar *doing,
                  GuardEchoFunc echo, gpointer echo_data, GError **error)
{
  g_autofree gchar *buf = g_malloc (GUARD_RECV_BUFSIZE);
  gsize size = mnl_nlmsg_batch_size (b->batch);
  int sndbuf = (int) MIN (size * 2 + 65536, G_MAXINT);
  gint first_errno = 0;
  guint32 failed_seq = 0;

  /* the whole transaction goes in one sendmsg(); a big one needs a big
   * buffer (FORCE needs CAP_NET_ADMIN, which any nftables change needs) */
  if (setsockopt (mnl_socket_get_fd (nl), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof (sndbuf)) < 0)
    (void) setsockopt (mnl_socket_get_fd (nl), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof (sndbuf));
  if (mnl_socket_sendto (nl, mnl_nlmsg_batch_head (b->batch), size) < 0) {
    guard_set_kernel_error (error, doing, errno);
    return FALSE;
  }
  for (guint round = 0; round < GUARD_RECV_ROUNDS_MAX; round++) {
    gssize n = guard_socket_recv (nl, buf, GUARD_RECV_BUFSIZE, error);
    int len = (int) n;

    if (n < 0)
      return FALSE;
    for (const struct nlmsghdr *nlh = (const struct nlmsghdr *) buf; mnl_nlmsg_ok (nlh, len);
         nlh = mnl_nlmsg_next (nlh, &len)) {
      if (!guard_batch_handle (b, nlh, &first_errno, &failed_seq, echo, echo_data))
        continue;
      if (first_errno != 0) {
        g_autofree gchar *what = g_strdup_printf ("%s (%s)", doing, guard_batch_what (b, failed_seq));
        guard_set_kernel_error (error, what, first_errno);
        return FALSE;
      }
      return TRUE;
    }
  }
  guard_set_kernel_error (error, doing, EPROTO);
  return FALSE;
}

typedef gboolean (*GuardQueryFunc) (const struct nlmsghdr *nlh, gpointer user_data);

typedef struct {
  GuardQueryFunc func;
  gpointer       user_data;
} GuardQueryCtx;

static int
guard_query_cb (const struct nlmsghdr *nlh, void *data)
{
  GuardQueryCtx *ctx = data;
  return ctx->func (nlh, ctx->user_data) ? MNL_CB_OK : MNL_CB_ERROR;
}

/* One request (a get or a dump), answers handed to @func one by one.
 * @errnum is the kernel's error, if it answered with one. */
static gboolean
guard_query_once (VdGuardTable *self, struct nlmsghdr *req, GuardQueryFunc func,
                  gpointer user_data, int *errnum, GError **error)
{
  g_autofree gchar *buf = g_malloc (GUARD_RECV_BUFSIZE);
  GuardQueryCtx ctx = { func, user_data };
  guint32 seq = req->nlmsg_seq;

  *errnum = 0;
  if (mnl_socket_sendto (self->nl, req, req->nlmsg_len) < 0) {
    guard_set_kernel_error (error, "sending a query", errno);
    return FALSE;
  }
  for (guint round = 0; round < GUARD_RECV_ROUNDS_MAX; round++) {
    gssize n = guard_socket_recv (self->nl, buf, GUARD_RECV_BUFSIZE, error);
    int rc;

    if (n < 0)
      return FALSE;
    errno = 0;
    rc = mnl_cb_run (buf, n, seq, self->portid, guard_query_cb, &ctx);
    if (rc == MNL_CB_STOP)
      return TRUE;
    if (rc < 0) {
      *errnum = errno != 0 ? errno : EPROTO;
      return TRUE;
    }
  }
  guard_set_kernel_error (error, "reading a query's answer", EPROTO);
  return FALSE;
}

/* A dump interrupted by a concurrent change (EINTR) is simply asked again. */
static gboolean
guard_query (VdGuardTable *self, struct nlmsghdr *req, GuardQueryFunc func, gpointer user_data,
             GFunc reset, int *errnum, GError **error)
{
  for (guint i = 0; i < GUARD_DUMP_TRIES_MAX; i++) {
    req->nlmsg_seq = self->seq++;
    if (reset != NULL)
      reset (user_data, NULL);
    if (!guard_query_once (self, req, func, user_data, errnum, error))
      return FALSE;
    if (*errnum != EINTR)
      return TRUE;
  }
  return TRUE;
}

/* ---- the install batch ------------------------------------------------- */

static gboolean
guard_batch_add_table (GuardBatch *b, gboolean delete_stale)
{
  g_autoptr(NftnlTable) t = nftnl_table_alloc ();
  struct nlmsghdr *nlh;

  nftnl_table_set_u32 (t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
  nftnl_table_set_str (t, NFTNL_TABLE_NAME, VIVARIUM_NFT_TABLE);
  if (delete_stale) {
    /* in the same transaction, so there is never a moment without a guard */
    nlh = guard_batch_msg (b, NFT_MSG_DELTABLE, 0);
    nftnl_table_nlmsg_build_payload (nlh, t);
    if (!guard_batch_next (b, "deleting the stale table"))
      return FALSE;
  }
  nftnl_table_set_u32 (t, NFTNL_TABLE_FLAGS, NFT_TABLE_F_OWNER);
  nlh = guard_batch_msg (b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
  nftnl_table_nlmsg_build_payload (nlh, t);
  return guard_batch_next (b, "creating the table");
}

static gboolean
guard_batch_add_chain (GuardBatch *b)
{
  g_autoptr(NftnlChain) c = nftnl_chain_alloc ();
  struct nlmsghdr *nlh;

  nftnl_chain_set_u32 (c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
  nftnl_chain_set_str (c, NFTNL_CHAIN_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_chain_set_str (c, NFTNL_CHAIN_NAME, GUARD_CHAIN);
  nftnl_chain_set_str (c, NFTNL_CHAIN_TYPE, "filter");
  nftnl_chain_set_u32 (c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
  nftnl_chain_set_s32 (c, NFTNL_CHAIN_PRIO, 0);  /* priority filter */
  nftnl_chain_set_u32 (c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
  nlh = guard_batch_msg (b, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL);
  nftnl_chain_nlmsg_build_payload (nlh, c);
  return guard_batch_next (b, "creating the output chain");
}

static gboolean
guard_batch_add_set (VdGuardTable *self, GuardBatch *b, GSocketFamily family)
{
  g_autoptr(NftnlSet) s = guard_set_new_full (family);
  g_autoptr(NftnlSet) elems = guard_set_new (family, TRUE);
  g_autoptr(GArray) ranges = guard_table_collect_ranges (self, family);
  gboolean v4 = family == G_SOCKET_FAMILY_IPV4;
  struct nlmsghdr *nlh;

  nlh = guard_batch_msg (b, NFT_MSG_NEWSET, NLM_F_CREATE | NLM_F_EXCL);
  nftnl_set_nlmsg_build_payload (nlh, s);
  if (!guard_batch_next (b, v4 ? "creating set " GUARD_SET4 : "creating set " GUARD_SET6))
    return FALSE;
  guard_set_add_ranges (elems, ranges, v4 ? 4 : 16);
  nlh = guard_batch_msg (b, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL);
  nftnl_set_elems_nlmsg_build_payload (nlh, elems);
  return guard_batch_next (b, v4 ? "filling set " GUARD_SET4 : "filling set " GUARD_SET6);
}

static gboolean
guard_batch_add_rule (VdGuardTable *self, GuardBatch *b, guint32 uid, gboolean catch_all,
                      gboolean v4, gboolean install, guint16 flags)
{
  g_autoptr(NftnlRule) r = guard_rule_new (self, uid, catch_all, v4, install);
  g_autofree gchar *what = NULL;
  struct nlmsghdr *nlh;

  nlh = guard_batch_msg (b, NFT_MSG_NEWRULE, NLM_F_CREATE | flags);
  nftnl_rule_nlmsg_build_payload (nlh, r);
  what = catch_all ? g_strdup_printf ("adding the rule for uids %u-%u", self->uid_first, self->uid_last)
                   : g_strdup_printf ("adding the rule for session uid %u", uid);
  return guard_batch_next (b, what);
}

static GuardBatch *
guard_table_build_install_once (VdGuardTable *self, gsize limit, guint32 seq, gboolean delete_stale)
{
  g_autoptr(GuardBatch) b = guard_batch_new (limit, seq);

  if (!guard_batch_add_table (b, delete_stale) ||
      !guard_batch_add_chain (b) ||
      !guard_batch_add_set (self, b, G_SOCKET_FAMILY_IPV4) ||
      !guard_batch_add_set (self, b, G_SOCKET_FAMILY_IPV6))
    return NULL;
  for (guint i = 0; i < self->sessions->len; i++) {
    guint32 uid = g_array_index (self->sessions, GuardSession, i).uid;
    if (!guard_batch_add_rule (self, b, uid, FALSE, TRUE, TRUE, NLM_F_APPEND) ||
        !guard_batch_add_rule (self, b, uid, FALSE, FALSE, TRUE, NLM_F_APPEND))
      return NULL;
  }
  /* only the last message asks for an ack: it marks the end of the answer,
   * and errors are reported for every message anyway */
  if (!guard_batch_add_rule (self, b, 0, TRUE, TRUE, TRUE, NLM_F_APPEND) ||
      !guard_batch_add_rule (self, b, 0, TRUE, FALSE, TRUE, NLM_F_APPEND | NLM_F_ACK) ||
      !guard_batch_end (b))
    return NULL;
  return g_steal_pointer (&b);
}

static GuardBatch *
guard_table_build_install (VdGuardTable *self, guint32 seq, gboolean delete_stale, GError **error)
{
  gsize limit = 64 * 1024 + (gsize) self->sessions->len * 2 * 1024 +
                (self->extra4->len + self->extra6->len) * 128;

  for (guint i = 0; i < 8; i++, limit *= 2) {
    GuardBatch *b = guard_table_build_install_once (self, limit, seq, delete_stale);
    if (b != NULL)
      return b;
  }
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
               "The network guard's nftables batch is too large to build (%u sessions)",
               self->sessions->len);
  return NULL;
}

static const gchar *
guard_msg_type_name (guint16 type)
{
  if (type == NFNL_MSG_BATCH_BEGIN)
    return "NFNL_MSG_BATCH_BEGIN";
  if (type == NFNL_MSG_BATCH_END)
    return "NFNL_MSG_BATCH_END";
  switch (NFNL_MSG_TYPE (type)) {
  case NFT_MSG_NEWTABLE:
    return "NFT_MSG_NEWTABLE";
  case NFT_MSG_DELTABLE:
    return "NFT_MSG_DELTABLE";
  case NFT_MSG_NEWCHAIN:
    return "NFT_MSG_NEWCHAIN";
  case NFT_MSG_NEWSET:
    return "NFT_MSG_NEWSET";
  case NFT_MSG_NEWSETELEM:
    return "NFT_MSG_NEWSETELEM";
  case NFT_MSG_NEWRULE:
    return "NFT_MSG_NEWRULE";
  case NFT_MSG_DELRULE:
    return "NFT_MSG_DELRULE";
  default:
    return "NFT_MSG_(other)";
  }
}

static gchar *
guard_flags_to_string (guint16 flags)
{
  GString *out = g_string_new ("REQUEST");

  if ((flags & NLM_F_ACK) != 0)
    g_string_append (out, "|ACK");
  if ((flags & NLM_F_ECHO) != 0)
    g_string_append (out, "|ECHO");
  if ((flags & NLM_F_EXCL) != 0)
    g_string_append (out, "|EXCL");
  if ((flags & NLM_F_CREATE) != 0)
    g_string_append (out, "|CREATE");
  if ((flags & NLM_F_APPEND) != 0)
    g_string_append (out, "|APPEND");
  return g_string_free (out, FALSE);
}

static void
guard_describe_table (GString *out, const struct nlmsghdr *nlh)
{
  g_autoptr(NftnlTable) t = nftnl_table_alloc ();

  if (nftnl_table_nlmsg_parse (nlh, t) < 0) {
    g_string_append (out, "  (unparsable table)\n");
    return;
  }
  g_string_append_printf (out, "  table %s flags 0x%x%s\n", nftnl_table_get_str (t, NFTNL_TABLE_NAME),
                          nftnl_table_get_u32 (t, NFTNL_TABLE_FLAGS),
                          (nftnl_table_get_u32 (t, NFTNL_TABLE_FLAGS) & NFT_TABLE_F_OWNER) != 0 ? " (owner)" : "");
}

static void
guard_describe_chain (GString *out, const struct nlmsghdr *nlh)
{
  g_autoptr(NftnlChain) c = nftnl_chain_alloc ();

  if (nftnl_chain_nlmsg_parse (nlh, c) < 0) {
    g_string_append (out, "  (unparsable chain)\n");
    return;
  }
  g_string_append_printf (out, "  chain %s %s type %s hook %u priority %d policy %u\n",
                          nftnl_chain_get_str (c, NFTNL_CHAIN_TABLE), nftnl_chain_get_str (c, NFTNL_CHAIN_NAME),
                          nftnl_chain_get_str (c, NFTNL_CHAIN_TYPE), nftnl_chain_get_u32 (c, NFTNL_CHAIN_HOOKNUM),
                          nftnl_chain_get_s32 (c, NFTNL_CHAIN_PRIO), nftnl_chain_get_u32 (c, NFTNL_CHAIN_POLICY));
}

static void
guard_describe_elems (GString *out, const struct nlmsghdr *nlh)
{
  g_autoptr(GArray) elems = g_array_new (FALSE, TRUE, sizeof (GuardElem));
  g_autoptr(GPtrArray) lines = NULL;
  g_autofree gchar *name = NULL;
  guint32 set_id = 0;

  if (!guard_parse_elems (nlh, elems, &name, &set_id)) {
    g_string_append (out, "  (unparsable elements)\n");
    return;
  }
  g_string_append_printf (out, "  elements of set %s id %u\n", name, set_id);
  lines = guard_elems_to_strings (elems);
  for (guint i = 0; i < lines->len; i++)
    g_string_append_printf (out, "    %s\n", (const gchar *) g_ptr_array_index (lines, i));
}

static void
guard_describe_set (GString *out, const struct nlmsghdr *nlh)
{
  g_autoptr(NftnlSet) s = nftnl_set_alloc ();

  if (nftnl_set_nlmsg_parse (nlh, s) < 0) {
    g_string_append (out, "  (unparsable set)\n");
    return;
  }
  g_string_append_printf (out, "  set %s %s id %u flags 0x%x key type %u len %u\n",
                            nftnl_set_get_str (s, NFTNL_SET_TABLE), nftnl_set_get_str (s, NFTNL_SET_NAME),
                            nftnl_set_get_u32 (s, NFTNL_SET_ID), nftnl_set_get_u32 (s, NFTNL_SET_FLAGS),
                            nftnl_set_get_u32 (s, NFTNL_SET_KEY_TYPE), nftnl_set_get_u32 (s, NFTNL_SET_KEY_LEN));
}

static void
guard_describe_rule (GString *out, const struct nlmsghdr *nlh)
{
  g_autoptr(NftnlRule) r = nftnl_rule_alloc ();
  g_autofree gchar *text = NULL;

  if (nftnl_rule_nlmsg_parse (nlh, r) < 0) {
    g_string_append (out, "  (unparsable rule)\n");
    return;
  }
  text = guard_rule_to_string (r);
  g_string_append_printf (out, "  %s\n", text);
}

static void
guard_describe_msg (GString *out, guint index, const struct nlmsghdr *nlh)
{
  const struct nfgenmsg *nfg = mnl_nlmsg_get_payload (nlh);
  g_autofree gchar *flags = guard_flags_to_string (nlh->nlmsg_flags);

  g_string_append_printf (out, "#%u %s len %u flags %s family %u%s res_id %u\n", index,
                          guard_msg_type_name (nlh->nlmsg_type), nlh->nlmsg_len, flags,
                          nfg->nfgen_family, nfg->nfgen_family == NFPROTO_INET ? " (inet)" : "",
                          ntohs (nfg->res_id));
  if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN || nlh->nlmsg_type == NFNL_MSG_BATCH_END)
    return;
  switch (NFNL_MSG_TYPE (nlh->nlmsg_type)) {
  case NFT_MSG_NEWTABLE:
  case NFT_MSG_DELTABLE:
    guard_describe_table (out, nlh);
    break;
  case NFT_MSG_NEWCHAIN:
    guard_describe_chain (out, nlh);
    break;
  case NFT_MSG_NEWSET:
    guard_describe_set (out, nlh);
    break;
  case NFT_MSG_NEWSETELEM:
    guard_describe_elems (out, nlh);
    break;
  case NFT_MSG_NEWRULE:
    guard_describe_rule (out, nlh);
    break;
  default:
    break;
  }
}

/* ---- reading the live table back --------------------------------------- */

static gboolean
guard_parse_table_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  return nftnl_table_nlmsg_parse (nlh, user_data) >= 0;
}

static gboolean
guard_parse_chain_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  return nftnl_chain_nlmsg_parse (nlh, user_data) >= 0;
}

static gboolean
guard_parse_set_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  return nftnl_set_nlmsg_parse (nlh, user_data) >= 0;
}

/* a dump of a big set comes in several messages; each adds its elements */
static gboolean
guard_parse_elems_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  return guard_parse_elems (nlh, user_data, NULL, NULL);
}

static void
guard_elems_reset (gpointer data, gpointer unused)
{
  g_array_set_size (data, 0);
}

static gboolean
guard_parse_rules_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  GPtrArray *rules = user_data;
  struct nftnl_rule *r = nftnl_rule_alloc ();

  if (nftnl_rule_nlmsg_parse (nlh, r) < 0) {
    nftnl_rule_free (r);
    return FALSE;
  }
  g_ptr_array_add (rules, r);
  return TRUE;
}

static void
guard_rules_reset (gpointer data, gpointer unused)
{
  g_ptr_array_set_size (data, 0);
}

static void
guard_set_mismatch (GError **error, const gchar *what, const gchar *got, const gchar *expected)
{
  g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
               "The live nftables table inet %s does not match what was installed: %s is “%s”, expected “%s”",
               VIVARIUM_NFT_TABLE, what, got, expected);
}

/* Fetches the table by name; *exists is FALSE (and no error) if there is none. */
static gboolean
guard_table_read_table (VdGuardTable *self, struct nftnl_table *t, gboolean *exists, GError **error)
{
  gchar buf[MNL_SOCKET_BUFFER_SIZE];
  g_autoptr(NftnlTable) req = nftnl_table_alloc ();
  struct nlmsghdr *nlh;
  int errnum = 0;

  nftnl_table_set_u32 (req, NFTNL_TABLE_FAMILY, NFPROTO_INET);
  nftnl_table_set_str (req, NFTNL_TABLE_NAME, VIVARIUM_NFT_TABLE);
  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, 0);
  nftnl_table_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_table_cb, t, NULL, &errnum, error))
    return FALSE;
  *exists = errnum == 0;
  if (errnum != 0 && errnum != ENOENT) {
    guard_set_kernel_error (error, "reading the table", errnum);
    return FALSE;
  }
  return TRUE;
}

static gboolean
guard_table_verify_table (VdGuardTable *self, GError **error)
{
  g_autoptr(NftnlTable) t = nftnl_table_alloc ();
  gboolean exists = FALSE;
  guint32 flags;

  if (!guard_table_read_table (self, t, &exists, error))
    return FALSE;
  if (!exists) {
    guard_set_kernel_error (error, "reading the table back", ENOENT);
    return FALSE;
  }
  flags = nftnl_table_get_u32 (t, NFTNL_TABLE_FLAGS);
  if ((flags & NFT_TABLE_F_OWNER) == 0 || !nftnl_table_is_set (t, NFTNL_TABLE_OWNER) ||
      nftnl_table_get_u32 (t, NFTNL_TABLE_OWNER) != self->portid) {
    g_autofree gchar *got = g_strdup_printf ("flags 0x%x owner %u", flags,
                                             nftnl_table_get_u32 (t, NFTNL_TABLE_OWNER));
    g_autofree gchar *expected = g_strdup_printf ("owner %u", self->portid);
    guard_set_mismatch (error, "the table's owner", got, expected);
    return FALSE;
  }
  return TRUE;
}

static gboolean
guard_table_verify_chain (VdGuardTable *self, GError **error)
{
  gchar buf[MNL_SOCKET_BUFFER_SIZE];
  g_autoptr(NftnlChain) req = nftnl_chain_alloc ();
  g_autoptr(NftnlChain) c = nftnl_chain_alloc ();
  g_autofree gchar *got = NULL;
  g_autofree gchar *expected = NULL;
  struct nlmsghdr *nlh;
  int errnum = 0;

  nftnl_chain_set_u32 (req, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
  nftnl_chain_set_str (req, NFTNL_CHAIN_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_chain_set_str (req, NFTNL_CHAIN_NAME, GUARD_CHAIN);
  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_ACK, 0);
  nftnl_chain_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_chain_cb, c, NULL, &errnum, error))
    return FALSE;
  if (errnum != 0) {
    guard_set_kernel_error (error, "reading the output chain back", errnum);
    return FALSE;
  }
  got = g_strdup_printf ("type %s hook %u priority %d policy %u", nftnl_chain_get_str (c, NFTNL_CHAIN_TYPE),
                         nftnl_chain_get_u32 (c, NFTNL_CHAIN_HOOKNUM), nftnl_chain_get_s32 (c, NFTNL_CHAIN_PRIO),
                         nftnl_chain_get_u32 (c, NFTNL_CHAIN_POLICY));
  expected = g_strdup_printf ("type filter hook %u priority 0 policy %u", NF_INET_LOCAL_OUT, NF_ACCEPT);
  if (g_strcmp0 (got, expected) != 0) {
    guard_set_mismatch (error, "the output chain", got, expected);
    return FALSE;
  }
  return TRUE;
}

static gboolean
guard_table_verify_set (VdGuardTable *self, GSocketFamily family, GError **error)
{
  gchar buf[MNL_SOCKET_BUFFER_SIZE];
  g_autoptr(NftnlSet) req = guard_set_new (family, FALSE);
  g_autoptr(NftnlSet) live = nftnl_set_alloc ();
  g_autoptr(GArray) live_elems = g_array_new (FALSE, TRUE, sizeof (GuardElem));
  g_autoptr(GArray) ranges = guard_table_collect_ranges (self, family);
  g_autoptr(GArray) want_elems = NULL;
  g_autoptr(GPtrArray) got_lines = NULL;
  g_autoptr(GPtrArray) want_lines = NULL;
  g_autofree gchar *got = NULL;
  g_autofree gchar *expected = NULL;
  gboolean v4 = family == G_SOCKET_FAMILY_IPV4;
  struct nlmsghdr *nlh;
  int errnum = 0;

  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETSET, NFPROTO_INET, NLM_F_ACK, 0);
  nftnl_set_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_set_cb, live, NULL, &errnum, error))
    return FALSE;
  if (errnum != 0) {
    guard_set_kernel_error (error, v4 ? "reading set " GUARD_SET4 : "reading set " GUARD_SET6, errnum);
    return FALSE;
  }
  got = g_strdup_printf ("%s flags 0x%x key type %u len %u", nftnl_set_get_str (live, NFTNL_SET_NAME),
                         nftnl_set_get_u32 (live, NFTNL_SET_FLAGS), nftnl_set_get_u32 (live, NFTNL_SET_KEY_TYPE),
                         nftnl_set_get_u32 (live, NFTNL_SET_KEY_LEN));
  expected = g_strdup_printf ("%s flags 0x%x key type %u len %u", v4 ? GUARD_SET4 : GUARD_SET6, NFT_SET_INTERVAL,
                              v4 ? GUARD_TYPE_IPADDR : GUARD_TYPE_IP6ADDR, v4 ? 4 : 16);
  if (g_strcmp0 (got, expected) != 0) {
    guard_set_mismatch (error, "a set", got, expected);
    return FALSE;
  }

  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, 0);
  nftnl_set_elems_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_elems_cb, live_elems, guard_elems_reset, &errnum, error))
    return FALSE;
  if (errnum != 0) {
    guard_set_kernel_error (error, "reading the set's elements", errnum);
    return FALSE;
  }
  want_elems = guard_ranges_to_elems (ranges, v4 ? 4 : 16);
  got_lines = guard_elems_to_strings (live_elems);
  want_lines = guard_elems_to_strings (want_elems);
  g_ptr_array_add (got_lines, NULL);
  g_ptr_array_add (want_lines, NULL);
  g_clear_pointer (&got, g_free);
  g_clear_pointer (&expected, g_free);
  got = g_strjoinv (", ", (gchar **) got_lines->pdata);
  expected = g_strjoinv (", ", (gchar **) want_lines->pdata);
  if (g_strcmp0 (got, expected) != 0) {
    guard_set_mismatch (error, v4 ? "set " GUARD_SET4 : "set " GUARD_SET6, got, expected);
    return FALSE;
  }
  return TRUE;
}

static GPtrArray *
guard_table_expected_rules (VdGuardTable *self)
{
  GPtrArray *rules = g_ptr_array_new_with_free_func ((GDestroyNotify) nftnl_rule_free);

  for (guint i = 0; i < self->sessions->len; i++) {
    guint32 uid = g_array_index (self->sessions, GuardSession, i).uid;
    g_ptr_array_add (rules, guard_rule_new (self, uid, FALSE, TRUE, FALSE));
    g_ptr_array_add (rules, guard_rule_new (self, uid, FALSE, FALSE, FALSE));
  }
  g_ptr_array_add (rules, guard_rule_new (self, 0, TRUE, TRUE, FALSE));
  g_ptr_array_add (rules, guard_rule_new (self, 0, TRUE, FALSE, FALSE));
  return rules;
}

/* Learns each session rule's handle from its comment, for later deletion;
 * a hash keeps this linear with a thousand sessions. */
static void
guard_table_learn_handles (VdGuardTable *self, GPtrArray *live)
{
  g_autoptr(GHashTable) by_comment = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint j = 0; j < self->sessions->len; j++) {
    GuardSession *s = &g_array_index (self->sessions, GuardSession, j);
    g_hash_table_insert (by_comment, guard_rule_comment_for_uid (s->uid, TRUE), &s->handle4);
    g_hash_table_insert (by_comment, guard_rule_comment_for_uid (s->uid, FALSE), &s->handle6);
  }
  for (guint i = 0; i < live->len; i++) {
    struct nftnl_rule *r = g_ptr_array_index (live, i);
    g_autofree gchar *comment = guard_rule_get_comment (r);
    guint64 *handle = comment != NULL ? g_hash_table_lookup (by_comment, comment) : NULL;

    if (handle != NULL)
      *handle = nftnl_rule_get_u64 (r, NFTNL_RULE_HANDLE);
  }
}

static gboolean
guard_table_verify_rules (VdGuardTable *self, GError **error)
{
  gchar buf[MNL_SOCKET_BUFFER_SIZE];
  g_autoptr(NftnlRule) req = nftnl_rule_alloc ();
  g_autoptr(GPtrArray) live = g_ptr_array_new_with_free_func ((GDestroyNotify) nftnl_rule_free);
  g_autoptr(GPtrArray) want = guard_table_expected_rules (self);
  struct nlmsghdr *nlh;
  int errnum = 0;

  nftnl_rule_set_u32 (req, NFTNL_RULE_FAMILY, NFPROTO_INET);
  nftnl_rule_set_str (req, NFTNL_RULE_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_rule_set_str (req, NFTNL_RULE_CHAIN, GUARD_CHAIN);
  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP | NLM_F_ACK, 0);
  nftnl_rule_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_rules_cb, live, guard_rules_reset, &errnum, error))
    return FALSE;
  if (errnum != 0) {
    guard_set_kernel_error (error, "reading the rules back", errnum);
    return FALSE;
  }
  for (guint i = 0; i < MAX (live->len, want->len); i++) {
    g_autofree gchar *got = i < live->len ? guard_rule_to_string (g_ptr_array_index (live, i)) : g_strdup ("(none)");
    g_autofree gchar *expected = i < want->len ? guard_rule_to_string (g_ptr_array_index (want, i)) : g_strdup ("(none)");
    g_autofree gchar *what = g_strdup_printf ("rule %u", i + 1);
    if (g_strcmp0 (got, expected) != 0) {
      guard_set_mismatch (error, what, got, expected);
      return FALSE;
    }
  }
  guard_table_learn_handles (self, live);
  return TRUE;
}

/* ---- sessions at runtime ----------------------------------------------- */

static gint
guard_table_find_session (VdGuardTable *self, guint32 uid)
{
  for (guint i = 0; i < self->sessions->len; i++) {
    if (g_array_index (self->sessions, GuardSession, i).uid == uid)
      return (gint) i;
  }
  return -1;
}

static void
guard_echo_rule (const struct nlmsghdr *nlh, gpointer user_data)
{
  GuardSession *s = user_data;
  g_autoptr(NftnlRule) r = nftnl_rule_alloc ();
  g_autofree gchar *comment = NULL;
  g_autofree gchar *c4 = guard_rule_comment_for_uid (s->uid, TRUE);
  g_autofree gchar *c6 = guard_rule_comment_for_uid (s->uid, FALSE);

  if (NFNL_MSG_TYPE (nlh->nlmsg_type) != NFT_MSG_NEWRULE || nftnl_rule_nlmsg_parse (nlh, r) < 0)
    return;
  comment = guard_rule_get_comment (r);
  if (g_strcmp0 (comment, c4) == 0)
    s->handle4 = nftnl_rule_get_u64 (r, NFTNL_RULE_HANDLE);
  else if (g_strcmp0 (comment, c6) == 0)
    s->handle6 = nftnl_rule_get_u64 (r, NFTNL_RULE_HANDLE);
}

static gboolean
guard_table_push_session (VdGuardTable *self, GuardSession *s, GError **error)
{
  g_autoptr(GuardBatch) b = guard_batch_new (64 * 1024, self->seq);

  /* inserted at the head of the chain, ahead of the catch-all, so the
   * session's own counter sees its packets; ipv6 first so ipv4 ends on top */
  if (!guard_batch_add_rule (self, b, s->uid, FALSE, FALSE, FALSE, NLM_F_ECHO) ||
      !guard_batch_add_rule (self, b, s->uid, FALSE, TRUE, FALSE, NLM_F_ECHO | NLM_F_ACK) ||
      !guard_batch_end (b)) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                         "The network guard's nftables batch is too large to build");
    return FALSE;
  }
  self->seq = b->seq;
  if (!guard_batch_send (self->nl, b, "adding a session's rules", guard_echo_rule, s, error))
    return FALSE;
  if (s->handle4 == 0 || s->handle6 == 0) {
    guard_set_kernel_error (error, "learning the new rules' handles", EPROTO);
    return FALSE;
  }
  return TRUE;
}

static gboolean
guard_table_drop_session (VdGuardTable *self, GuardSession *s, GError **error)
{
  g_autoptr(GuardBatch) b = guard_batch_new (64 * 1024, self->seq);
  guint64 handles[] = { s->handle4, s->handle6 };

  for (guint i = 0; i < G_N_ELEMENTS (handles); i++) {
    g_autoptr(NftnlRule) r = nftnl_rule_alloc ();
    struct nlmsghdr *nlh;

    nftnl_rule_set_u32 (r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    nftnl_rule_set_str (r, NFTNL_RULE_TABLE, VIVARIUM_NFT_TABLE);
    nftnl_rule_set_str (r, NFTNL_RULE_CHAIN, GUARD_CHAIN);
    nftnl_rule_set_u64 (r, NFTNL_RULE_HANDLE, handles[i]);
    nlh = guard_batch_msg (b, NFT_MSG_DELRULE, i + 1 == G_N_ELEMENTS (handles) ? NLM_F_ACK : 0);
    nftnl_rule_nlmsg_build_payload (nlh, r);
    guard_batch_next (b, "deleting a session's rule");
  }
  guard_batch_end (b);
  self->seq = b->seq;
  return guard_batch_send (self->nl, b, "removing a session's rules", NULL, NULL, error);
}

typedef struct {
  guint64 packets;
  guint64 bytes;
  gboolean found;
} GuardCounter;

static gboolean
guard_parse_counter_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  GuardCounter *counter = user_data;
  g_autoptr(NftnlRule) r = nftnl_rule_alloc ();
  g_autoptr(NftnlExprIter) iter = NULL;

  if (nftnl_rule_nlmsg_parse (nlh, r) < 0)
    return FALSE;
  iter = nftnl_expr_iter_create (r);
  for (struct nftnl_expr *e = nftnl_expr_iter_next (iter); e != NULL; e = nftnl_expr_iter_next (iter)) {
    if (g_strcmp0 (nftnl_expr_get_str (e, NFTNL_EXPR_NAME), "counter") != 0)
      continue;
    counter->packets += nftnl_expr_get_u64 (e, NFTNL_EXPR_CTR_PACKETS);
    counter->bytes += nftnl_expr_get_u64 (e, NFTNL_EXPR_CTR_BYTES);
    counter->found = TRUE;
  }
  return TRUE;
}

static gboolean
guard_table_read_counter (VdGuardTable *self, guint64 handle, GuardCounter *counter, GError **error)
{
  gchar buf[MNL_SOCKET_BUFFER_SIZE];
  g_autoptr(NftnlRule) req = nftnl_rule_alloc ();
  struct nlmsghdr *nlh;
  int errnum = 0;

  nftnl_rule_set_u32 (req, NFTNL_RULE_FAMILY, NFPROTO_INET);
  nftnl_rule_set_str (req, NFTNL_RULE_TABLE, VIVARIUM_NFT_TABLE);
  nftnl_rule_set_str (req, NFTNL_RULE_CHAIN, GUARD_CHAIN);
  nftnl_rule_set_u64 (req, NFTNL_RULE_HANDLE, handle);
  nlh = nftnl_nlmsg_build_hdr (buf, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_ACK, 0);
  nftnl_rule_nlmsg_build_payload (nlh, req);
  if (!guard_query (self, nlh, guard_parse_counter_cb, counter, NULL, &errnum, error))
    return FALSE;
  if (errnum != 0) {
    guard_set_kernel_error (error, "reading a session's counter", errnum);
    return FALSE;
  }
  return TRUE;
}

/* ---- public API -------------------------------------------------------- */

static void
vd_guard_table_finalize (GObject *object)
{
  VdGuardTable *self = VD_GUARD_TABLE (object);

  vd_guard_table_uninstall (self);
  g_array_unref (self->extra4);
  g_array_unref (self->extra6);
  g_array_unref (self->sessions);
  G_OBJECT_CLASS (vd_guard_table_parent_class)->finalize (object);
}

static void
vd_guard_table_class_init (VdGuardTableClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_guard_table_finalize;
}

static void
vd_guard_table_init (VdGuardTable *self)
{
  self->extra4 = g_array_new (FALSE, TRUE, sizeof (GuardRange));
  self->extra6 = g_array_new (FALSE, TRUE, sizeof (GuardRange));
  self->sessions = g_array_new (FALSE, TRUE, sizeof (GuardSession));
  self->seq = (guint32) time (NULL);
}

VdGuardTable *
vd_guard_table_new (guint32 uid_first, guint32 uid_last)
{
  VdGuardTable *self;

  g_return_val_if_fail (uid_first <= uid_last, NULL);
  self = g_object_new (VD_TYPE_GUARD_TABLE, NULL);
  self->uid_first = uid_first;
  self->uid_last = uid_last;
  return self;
}

gboolean
vd_guard_table_add_extra (VdGuardTable *self, const gchar *cidr, GError **error)
{
  GSocketFamily family = G_SOCKET_FAMILY_INVALID;
  GuardRange range;

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  if (self->nl != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                 "Cannot add %s to the network guard after it is installed", cidr);
    return FALSE;
  }
  if (!guard_range_from_cidr (cidr, &family, &range, error))
    return FALSE;
  g_array_append_val (family == G_SOCKET_FAMILY_IPV4 ? self->extra4 : self->extra6, range);
  return TRUE;
}

gchar *
vd_guard_table_describe_batch (VdGuardTable *self, GError **error)
{
  g_autoptr(GuardBatch) b = NULL;
  GString *out;
  const struct nlmsghdr *nlh;
  int len;
  guint index = 0;

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), NULL);
  /* fixed sequence numbers and no stale-table probe: same input, same text */
  b = guard_table_build_install (self, 1, FALSE, error);
  if (b == NULL)
    return NULL;
  out = g_string_new (NULL);
  len = (int) mnl_nlmsg_batch_size (b->batch);
  for (nlh = mnl_nlmsg_batch_head (b->batch); mnl_nlmsg_ok (nlh, len); nlh = mnl_nlmsg_next (nlh, &len))
    guard_describe_msg (out, index++, nlh);
  return g_string_free (out, FALSE);
}

static gboolean
guard_table_open (VdGuardTable *self, GError **error)
{
  struct mnl_socket *nl = mnl_socket_open (NETLINK_NETFILTER);

  if (nl == NULL) {
    guard_set_kernel_error (error, "opening a netfilter netlink socket", errno);
    return FALSE;
  }
  if (mnl_socket_bind (nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    int errsv = errno;
    mnl_socket_close (nl);
    guard_set_kernel_error (error, "binding the netfilter netlink socket", errsv);
    return FALSE;
  }
  self->nl = nl;
  self->portid = mnl_socket_get_portid (nl);
  return TRUE;
}

/* A table of our name that nobody owns is a leftover (nft, an old daemon
 * built without the owner flag); one with a live owner is another daemon's,
 * and taking it over would leave that daemon unguarded. */
static gboolean
guard_table_probe_stale (VdGuardTable *self, gboolean *stale, GError **error)
{
  g_autoptr(NftnlTable) t = nftnl_table_alloc ();
  gboolean exists = FALSE;

  *stale = FALSE;
  if (!guard_table_read_table (self, t, &exists, error))
    return FALSE;
  if (!exists)
    return TRUE;
  if ((nftnl_table_get_u32 (t, NFTNL_TABLE_FLAGS) & NFT_TABLE_F_OWNER) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                 "The nftables table inet %s is owned by another process (netlink port %u); "
                 "is another vivariumd running?", VIVARIUM_NFT_TABLE,
                 nftnl_table_get_u32 (t, NFTNL_TABLE_OWNER));
    return FALSE;
  }
  g_message ("replacing a stale nftables table inet %s", VIVARIUM_NFT_TABLE);
  *stale = TRUE;
  return TRUE;
}

gboolean
vd_guard_table_install (VdGuardTable *self, GError **error)
{
  g_autoptr(GuardBatch) b = NULL;
  gboolean stale = FALSE;

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  if (self->nl != NULL) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE,
                         "The network guard table is already installed");
    return FALSE;
  }
  if (!guard_table_open (self, error))
    return FALSE;
  if (!guard_table_probe_stale (self, &stale, error)) {
    vd_guard_table_uninstall (self);
    return FALSE;
  }
  b = guard_table_build_install (self, self->seq, stale, error);
  if (b == NULL) {
    vd_guard_table_uninstall (self);
    return FALSE;
  }
  self->seq = b->seq;
  if (!guard_batch_send (self->nl, b, "installing the table", NULL, NULL, error) ||
      !vd_guard_table_verify (self, error)) {
    vd_guard_table_uninstall (self);
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_guard_table_verify (VdGuardTable *self, GError **error)
{
  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  if (self->nl == NULL) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                         "The network guard table is not installed");
    return FALSE;
  }
  return guard_table_verify_table (self, error) &&
         guard_table_verify_chain (self, error) &&
         guard_table_verify_set (self, G_SOCKET_FAMILY_IPV4, error) &&
         guard_table_verify_set (self, G_SOCKET_FAMILY_IPV6, error) &&
         guard_table_verify_rules (self, error);
}

gboolean
vd_guard_table_add_session (VdGuardTable *self, guint32 uid, GError **error)
{
  GuardSession s = { .uid = uid };

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  if (uid < self->uid_first || uid > self->uid_last) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "uid %u is outside the session range %u–%u", uid, self->uid_first, self->uid_last);
    return FALSE;
  }
  if (guard_table_find_session (self, uid) >= 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_EXISTS,
                 "uid %u already has network guard rules", uid);
    return FALSE;
  }
  if (self->nl == NULL) {
    /* not installed yet: the install batch will carry it */
    g_array_append_val (self->sessions, s);
    return TRUE;
  }
  if (!guard_table_push_session (self, &s, error))
    return FALSE;
  g_array_prepend_val (self->sessions, s);
  return TRUE;
}

gboolean
vd_guard_table_remove_session (VdGuardTable *self, guint32 uid, GError **error)
{
  gint idx;

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  idx = guard_table_find_session (self, uid);
  if (idx < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 "uid %u has no network guard rules", uid);
    return FALSE;
  }
  if (self->nl != NULL &&
      !guard_table_drop_session (self, &g_array_index (self->sessions, GuardSession, idx), error))
    return FALSE;
  g_array_remove_index (self->sessions, (guint) idx);
  return TRUE;
}

gboolean
vd_guard_table_get_counters (VdGuardTable *self, guint32 uid, guint64 *packets, guint64 *bytes,
                             GError **error)
{
  GuardCounter counter = { 0 };
  GuardSession *s;
  gint idx;

  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  idx = guard_table_find_session (self, uid);
  if (idx < 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 "uid %u has no network guard rules", uid);
    return FALSE;
  }
  if (self->nl == NULL) {
    g_set_error_literal (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                         "The network guard table is not installed");
    return FALSE;
  }
  s = &g_array_index (self->sessions, GuardSession, idx);
  if (!guard_table_read_counter (self, s->handle4, &counter, error) ||
      !guard_table_read_counter (self, s->handle6, &counter, error))
    return FALSE;
  if (!counter.found) {
    guard_set_kernel_error (error, "reading a session's counter", ENOENT);
    return FALSE;
  }
  if (packets != NULL)
    *packets = counter.packets;
  if (bytes != NULL)
    *bytes = counter.bytes;
  return TRUE;
}

gboolean
vd_guard_table_is_installed (VdGuardTable *self)
{
  g_return_val_if_fail (VD_IS_GUARD_TABLE (self), FALSE);
  return self->nl != NULL;
}

void
vd_guard_table_uninstall (VdGuardTable *self)
{
  g_return_if_fail (VD_IS_GUARD_TABLE (self));
  if (self->nl == NULL)
    return;
  /* the kernel removes an owned table when its owner's socket closes */
  mnl_socket_close (self->nl);
  self->nl = NULL;
  self->portid = 0;
  for (guint i = 0; i < self->sessions->len; i++) {
    GuardSession *s = &g_array_index (self->sessions, GuardSession, i);
    s->handle4 = 0;
    s->handle6 = 0;
  }
}
