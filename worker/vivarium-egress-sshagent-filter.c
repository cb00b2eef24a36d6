/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-sshagent-filter.h"

static gboolean
read_u32 (const guint8 *p, gsize len, gsize *off, guint32 *value)
{
  if (len - *off < 4)
    return FALSE;
  *value = (guint32) p[*off] << 24 | (guint32) p[*off + 1] << 16 | (guint32) p[*off + 2] << 8 | p[*off + 3];
  *off += 4;
  return TRUE;
}

/* An SSH string: a length then that many bytes, within the message. */
static gboolean
read_string (const guint8 *p, gsize len, gsize *off, const guint8 **data, guint32 *n)
{
  if (!read_u32 (p, len, off, n) || len - *off < *n)
    return FALSE;
  *data = p + *off;
  *off += *n;
  return TRUE;
}

static gint
find_blob (GPtrArray *blobs, const guint8 *blob, guint32 n)
{
  for (guint i = 0; i < blobs->len; i++) {
    gsize size = 0;
    const guint8 *known = g_bytes_get_data (blobs->pdata[i], &size);
    if (size == n && memcmp (known, blob, n) == 0)
      return (gint) i;
  }
  return -1;
}

/* SIGN_REQUEST: string key blob, string data, uint32 flags, nothing after. */
static VivariumSshAgentVerdict
filter_sign (const guint8 *body, gsize len, GPtrArray *blobs, guint *key_index, const gchar **reason)
{
  gsize off = 1;
  const guint8 *blob, *data;
  guint32 blob_len, data_len, flags;
  gint index;

  if (!read_string (body, len, &off, &blob, &blob_len) || !read_string (body, len, &off, &data, &data_len) ||
      !read_u32 (body, len, &off, &flags) || off != len) {
    *reason = "a sign request that is not well-formed";
    return VIVARIUM_SSH_AGENT_REFUSE;
  }
  index = find_blob (blobs, blob, blob_len);
  if (index < 0) {
    *reason = "a sign request for a key the session does not name";
    return VIVARIUM_SSH_AGENT_REFUSE;
  }
  *key_index = (guint) index;
  return VIVARIUM_SSH_AGENT_RELAY_SIGN;
}

VivariumSshAgentVerdict
vivarium_ssh_agent_filter (const guint8 *body, gsize len, GPtrArray *blobs, guint *key_index, const gchar **reason)
{
  *reason = NULL;
  if (len == 0 || len > VIVARIUM_SSH_AGENT_MAX_MESSAGE) {
    *reason = "an empty or oversized message";
    return VIVARIUM_SSH_AGENT_REFUSE;
  }
  switch (body[0]) {
  case VIVARIUM_SSH_AGENTC_REQUEST_IDENTITIES:
    if (len != 1) {
      *reason = "an identities request with trailing bytes";
      return VIVARIUM_SSH_AGENT_REFUSE;
    }
    return VIVARIUM_SSH_AGENT_RELAY_IDENTITIES;
  case VIVARIUM_SSH_AGENTC_SIGN_REQUEST:
    return filter_sign (body, len, blobs, key_index, reason);
  case 17: case 25:
    *reason = "a request to add a key (the session's agent holds only the keys it names)";
    return VIVARIUM_SSH_AGENT_REFUSE;
  case 18: case 19: case 20: case 21:
    *reason = "a request to remove keys";
    return VIVARIUM_SSH_AGENT_REFUSE;
  case 22: case 23:
    *reason = "a request to lock or unlock the agent";
    return VIVARIUM_SSH_AGENT_REFUSE;
  case 27:
    *reason = "an extension request";
    return VIVARIUM_SSH_AGENT_REFUSE;
  default:
    *reason = "a request of a type the session's agent does not serve";
    return VIVARIUM_SSH_AGENT_REFUSE;
  }
}
