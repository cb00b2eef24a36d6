/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-sni.h"

#define TLS_RECORD_HANDSHAKE 0x16
#define TLS_HANDSHAKE_CLIENT_HELLO 0x01
#define TLS_RECORD_HEADER 5
#define TLS_HANDSHAKE_HEADER 4
/* RFC 8446 5.1: a record's plaintext is at most 2^14 bytes. */
#define TLS_MAX_RECORD (16 * 1024)
#define TLS_EXT_SERVER_NAME 0x0000
#define SNI_HOST_NAME 0x00
/* RFC 6066 3: a DNS host name; 255 covers any valid one. */
#define SNI_MAX_NAME 255

/* A bounded reader: every take checks what is left, a failure sticks. */
typedef struct {
  const guint8 *p;
  gsize         left;
  gboolean      bad;
} Reader;

static gboolean
take (Reader *r, gsize n, const guint8 **out)
{
  if (r->bad || n > r->left) {
    r->bad = TRUE;
    return FALSE;
  }
  if (out != NULL)
    *out = r->p;
  r->p += n;
  r->left -= n;
  return TRUE;
}

static guint
take_uint (Reader *r, gsize n)
{
  const guint8 *b;
  guint v = 0;

  if (!take (r, n, &b))
    return 0;
  for (gsize i = 0; i < n; i++)
    v = (v << 8) | b[i];
  return v;
}

/* A sub-reader over the next n bytes (a length-prefixed vector). */
static Reader
take_vector (Reader *r, gsize len_bytes)
{
  Reader sub = { NULL, 0, TRUE };
  gsize n = take_uint (r, len_bytes);

  if (!r->bad && take (r, n, &sub.p)) {
    sub.left = n;
    sub.bad = FALSE;
  }
  return sub;
}

/* The server_name extension: a list of (type, name); the host_name entry. */
static VivariumSniResult
parse_server_name (Reader ext, gchar **name)
{
  Reader list = take_vector (&ext, 2);

  if (list.bad || ext.left != 0 || list.left == 0)
    return VIVARIUM_SNI_MALFORMED;
  while (list.left > 0) {
    guint type = take_uint (&list, 1);
    Reader entry = take_vector (&list, 2);
    if (list.bad || entry.bad)
      return VIVARIUM_SNI_MALFORMED;
    if (type != SNI_HOST_NAME)
      continue;
    if (entry.left == 0 || entry.left > SNI_MAX_NAME || memchr (entry.p, '\0', entry.left) != NULL)
      return VIVARIUM_SNI_MALFORMED;
    *name = g_strndup ((const gchar *) entry.p, entry.left);
    return VIVARIUM_SNI_FOUND;
  }
  return VIVARIUM_SNI_NONE;
}

/* The ClientHello body (RFC 8446 4.1.2), the handshake header removed. */
static VivariumSniResult
parse_client_hello (Reader hello, gchar **name)
{
  Reader extensions;

  take (&hello, 2 + 32, NULL);           /* legacy_version, random */
  take_vector (&hello, 1);               /* legacy_session_id */
  take_vector (&hello, 2);               /* cipher_suites */
  take_vector (&hello, 1);               /* legacy_compression_methods */
  if (hello.bad)
    return VIVARIUM_SNI_MALFORMED;
  if (hello.left == 0)
    return VIVARIUM_SNI_NONE;            /* no extensions at all (TLS 1.0 style) */
  extensions = take_vector (&hello, 2);
  if (hello.bad || hello.left != 0)
    return VIVARIUM_SNI_MALFORMED;
  while (extensions.left > 0) {
    guint type = take_uint (&extensions, 2);
    Reader ext = take_vector (&extensions, 2);
    if (extensions.bad || ext.bad)
      return VIVARIUM_SNI_MALFORMED;
    if (type == TLS_EXT_SERVER_NAME)
      return parse_server_name (ext, name);
  }
  return VIVARIUM_SNI_NONE;
}

/* Joins the payloads of consecutive handshake records into out (at most
 * VIVARIUM_SNI_MAX_HELLO bytes) until the handshake message is whole. */
static VivariumSniResult
reassemble (const guint8 *data, gsize len, GByteArray *out)
{
  gsize at = 0;

  for (;;) {
    gsize record;
    if (out->len >= TLS_HANDSHAKE_HEADER) {
      gsize want = TLS_HANDSHAKE_HEADER + ((gsize) out->data[1] << 16 | (gsize) out->data[2] << 8 | out->data[3]);
      if (out->data[0] != TLS_HANDSHAKE_CLIENT_HELLO)
        return VIVARIUM_SNI_MALFORMED;
      if (want > VIVARIUM_SNI_MAX_HELLO - TLS_RECORD_HEADER)
        return VIVARIUM_SNI_TOO_LARGE;
      if (out->len >= want) {
        g_byte_array_set_size (out, want);
        return VIVARIUM_SNI_FOUND;
      }
    }
    if (at >= VIVARIUM_SNI_MAX_HELLO)
      return VIVARIUM_SNI_TOO_LARGE;
    if (len - at < TLS_RECORD_HEADER)
      return VIVARIUM_SNI_NEED_MORE;
    if (data[at] != TLS_RECORD_HANDSHAKE || data[at + 1] != 0x03)
      return at == 0 ? VIVARIUM_SNI_NOT_TLS : VIVARIUM_SNI_MALFORMED;
    record = (gsize) data[at + 3] << 8 | data[at + 4];
    if (record == 0 || record > TLS_MAX_RECORD)
      return VIVARIUM_SNI_MALFORMED;
    if (at + TLS_RECORD_HEADER + record > VIVARIUM_SNI_MAX_HELLO)
      return VIVARIUM_SNI_TOO_LARGE;
    if (len - at - TLS_RECORD_HEADER < record)
      return VIVARIUM_SNI_NEED_MORE;
    g_byte_array_append (out, data + at + TLS_RECORD_HEADER, record);
    at += TLS_RECORD_HEADER + record;
  }
}

VivariumSniResult
vivarium_egress_sni_parse (const guint8 *data, gsize len, gchar **name)
{
  g_autoptr(GByteArray) message = g_byte_array_new ();
  VivariumSniResult result;
  Reader hello;

  *name = NULL;
  if (len == 0)
    return VIVARIUM_SNI_NEED_MORE;
  if (data[0] != TLS_RECORD_HANDSHAKE)
    return VIVARIUM_SNI_NOT_TLS;
  result = reassemble (data, len, message);
  if (result != VIVARIUM_SNI_FOUND)
    return result;
  hello = (Reader) { message->data + TLS_HANDSHAKE_HEADER, message->len - TLS_HANDSHAKE_HEADER, FALSE };
  return parse_client_hello (hello, name);
}
