/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-placeholder.h"

#define PREFIX VIVARIUM_SECRET_PLACEHOLDER_PREFIX
#define PREFIX_LEN (sizeof PREFIX - 1)
#define PLACEHOLDER_LEN VIVARIUM_SECRET_PLACEHOLDER_LEN
/* %252D is "%2D" once decoded: a guest may encode more than once. */
#define MAX_DECODE_ROUNDS 3
/* Each alignment's pattern, in the standard and the URL alphabet. */
#define MAX_PATTERNS 6

/* The base64 of the prefix at one alignment (a bytes before it): only
 * the characters that depend on the prefix alone; start is how many
 * characters of the encoding come before them. */
typedef struct {
  gchar pattern[32];
  gsize len;
  guint align;
  gsize start;
} Pattern;

struct _VivariumPlaceholders {
  GPtrArray *secrets;   /* borrowed */
  Pattern    patterns[MAX_PATTERNS];
  guint      n_patterns;
};

static void
add_pattern (VivariumPlaceholders *set, guint align, gboolean url)
{
  guint8 input[2 + PREFIX_LEN] = { 0 };
  g_autofree gchar *encoded = NULL;
  Pattern *p = &set->patterns[set->n_patterns];

  memcpy (input + align, PREFIX, PREFIX_LEN);
  encoded = g_base64_encode (input, align + PREFIX_LEN);
  /* Character k holds bits 6k..6k+5 of the input. */
  p->start = (8 * align + 5) / 6;
  p->len = (8 * (align + PREFIX_LEN)) / 6 - p->start;
  p->align = align;
  memcpy (p->pattern, encoded + p->start, p->len);
  if (url) {
    gboolean differs = FALSE;
    for (gsize i = 0; i < p->len; i++) {
      if (p->pattern[i] == '+' || p->pattern[i] == '/') {
        p->pattern[i] = p->pattern[i] == '+' ? '-' : '_';
        differs = TRUE;
      }
    }
    if (!differs)
      return;
  }
  set->n_patterns++;
}

VivariumPlaceholders *
vivarium_placeholders_new (GPtrArray *secrets)
{
  VivariumPlaceholders *set = g_new0 (VivariumPlaceholders, 1);

  set->secrets = g_ptr_array_ref (secrets);
  for (guint align = 0; align < 3; align++) {
    add_pattern (set, align, FALSE);
    add_pattern (set, align, TRUE);
  }
  return set;
}

void
vivarium_placeholders_free (VivariumPlaceholders *set)
{
  if (set == NULL)
    return;
  g_ptr_array_unref (set->secrets);
  g_free (set);
}

/* candidate: PLACEHOLDER_LEN bytes, lower case. */
static const VivariumSecret *
which_secret (VivariumPlaceholders *set, const guint8 *candidate)
{
  for (guint i = 0; i < set->secrets->len; i++) {
    const VivariumSecret *secret = set->secrets->pdata[i];
    if (secret->placeholder != NULL && memcmp (secret->placeholder, candidate, PLACEHOLDER_LEN) == 0)
      return secret;
  }
  return NULL;
}

/* lower: already in lower case. */
static const VivariumSecret *
find_plain (VivariumPlaceholders *set, const guint8 *lower, gsize len)
{
  const guint8 *at = lower;
  const guint8 *end = lower + len;

  while ((at = memmem (at, end - at, PREFIX, PREFIX_LEN)) != NULL) {
    const VivariumSecret *secret;
    if ((gsize) (end - at) < PLACEHOLDER_LEN)
      return NULL;
    secret = which_secret (set, at);
    if (secret != NULL)
      return secret;
    at += PREFIX_LEN;
  }
  return NULL;
}

static gint
hex_value (guint8 c)
{
  return g_ascii_isxdigit (c) ? g_ascii_xdigit_value (c) : -1;
}

static gint
hex_run (const guint8 *p, gsize n)
{
  gint v = 0;

  for (gsize i = 0; i < n; i++) {
    gint d = hex_value (p[i]);
    if (d < 0)
      return -1;
    v = v << 4 | d;
  }
  return v;
}

/* One round of %XX and \uXXXX (a character past ASCII becomes '?': no
 * placeholder holds one), in lower case; FALSE when nothing was decoded. */
static gboolean
decode_once (const guint8 *in, gsize len, guint8 *out, gsize *out_len)
{
  gsize o = 0;
  gboolean changed = FALSE;

  for (gsize i = 0; i < len; i++) {
    gint v = -1;
    if (in[i] == '%' && i + 2 < len)
      v = hex_run (in + i + 1, 2);
    if (v >= 0) {
      out[o++] = g_ascii_tolower ((gchar) v);
      i += 2;
      changed = TRUE;
      continue;
    }
    if (in[i] == '\\' && i + 5 < len && (in[i + 1] == 'u' || in[i + 1] == 'U') &&
        (v = hex_run (in + i + 2, 4)) >= 0) {
      out[o++] = v < 0x80 ? g_ascii_tolower ((gchar) v) : '?';
      i += 5;
      changed = TRUE;
      continue;
    }
    out[o++] = in[i];
  }
  *out_len = o;
  return changed;
}

static const VivariumSecret *
find_decoded (VivariumPlaceholders *set, const guint8 *lower, gsize len)
{
  g_autofree guint8 *a = NULL;
  g_autofree guint8 *b = NULL;
  const guint8 *in = lower;
  gsize n = len;

  if (memchr (lower, '%', len) == NULL && memchr (lower, '\\', len) == NULL)
    return NULL;
  a = g_malloc (len);
  b = g_malloc (len);
  for (guint round = 0; round < MAX_DECODE_ROUNDS; round++) {
    guint8 *out = round % 2 == 0 ? a : b;
    gsize out_len;
    const VivariumSecret *secret;
    if (!decode_once (in, n, out, &out_len))
      return NULL;
    secret = find_plain (set, out, out_len);
    if (secret != NULL)
      return secret;
    in = out;
    n = out_len;
  }
  return NULL;
}

/* Both alphabets; -1 for anything else ('=' included: it ends the run). */
static gint
b64_value (guint8 c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || c == '-')
    return 62;
  if (c == '/' || c == '_')
    return 63;
  return -1;
}

/* Decodes groups of four from text, at most max bytes; a last group of
 * two or three characters (padded with '=' or not) gives its one or two
 * bytes. */
static gsize
b64_decode (const guint8 *text, gsize len, guint8 *out, gsize max)
{
  gsize o = 0;

  for (gsize i = 0; i + 2 <= len && o + 3 <= max; i += 4) {
    gint v[4] = { -1, -1, -1, -1 };
    guint k;
    for (k = 0; k < 4 && i + k < len; k++)
      if ((v[k] = b64_value (text[i + k])) < 0)
        break;
    if (k < 2)
      return o;
    out[o++] = (guint8) (v[0] << 2 | v[1] >> 4);
    if (k < 3)
      return o;
    out[o++] = (guint8) ((v[1] & 0xf) << 4 | v[2] >> 2);
    if (k < 4)
      return o;
    out[o++] = (guint8) ((v[2] & 0x3) << 6 | v[3]);
  }
  return o;
}

static const VivariumSecret *
check_b64_at (VivariumPlaceholders *set, const guint8 *data, gsize len, gsize at, const Pattern *p)
{
  guint8 decoded[PLACEHOLDER_LEN + 6];
  gsize n, from;

  if (at < p->start)
    return NULL;   /* begins before the buffer: the overlap holds it whole elsewhere */
  from = at - p->start;
  n = b64_decode (data + from, len - from, decoded, sizeof decoded);
  if (n < p->align + PLACEHOLDER_LEN)
    return NULL;
  for (gsize i = 0; i < PLACEHOLDER_LEN; i++)
    decoded[p->align + i] = g_ascii_tolower (decoded[p->align + i]);
  return which_secret (set, decoded + p->align);
}

static const VivariumSecret *
find_base64 (VivariumPlaceholders *set, const guint8 *data, gsize len)
{
  for (guint i = 0; i < set->n_patterns; i++) {
    const Pattern *p = &set->patterns[i];
    const guint8 *at = data;
    while ((at = memmem (at, data + len - at, p->pattern, p->len)) != NULL) {
      const VivariumSecret *secret = check_b64_at (set, data, len, at - data, p);
      if (secret != NULL)
        return secret;
      at++;
    }
  }
  return NULL;
}

const VivariumSecret *
vivarium_placeholders_find (VivariumPlaceholders *set, const guint8 *data, gsize len)
{
  g_autofree guint8 *lower = NULL;
  const VivariumSecret *secret;

  if (set == NULL || set->secrets->len == 0 || len == 0)
    return NULL;
  lower = g_malloc (len);
  for (gsize i = 0; i < len; i++)
    lower[i] = g_ascii_tolower (data[i]);
  secret = find_plain (set, lower, len);
  if (secret == NULL)
    secret = find_decoded (set, lower, len);
  if (secret == NULL)
    secret = find_base64 (set, data, len);
  return secret;
}

void
vivarium_placeholder_scan_init (VivariumPlaceholderScan *scan, VivariumPlaceholders *set)
{
  scan->set = set;
  scan->tail_len = 0;
}

const VivariumSecret *
vivarium_placeholder_scan_feed (VivariumPlaceholderScan *scan, const guint8 *data, gsize len)
{
  g_autofree guint8 *joined = NULL;
  const VivariumSecret *secret;
  gsize total = scan->tail_len + len;
  gsize keep;

  if (scan->set == NULL || len == 0)
    return NULL;
  joined = g_malloc (total);
  memcpy (joined, scan->tail, scan->tail_len);
  memcpy (joined + scan->tail_len, data, len);
  secret = vivarium_placeholders_find (scan->set, joined, total);
  keep = MIN (total, sizeof scan->tail);
  memcpy (scan->tail, joined + total - keep, keep);
  scan->tail_len = keep;
  return secret;
}

gchar *
vivarium_placeholder_reason (const VivariumSecret *secret, const gchar *host, guint16 port, const gchar *where)
{
  return g_strdup_printf ("a secret's placeholder (%s) was sent to %s:%u in the %s: refused", secret->name,
                          host != NULL ? host : "(invalid)", port, where);
}
