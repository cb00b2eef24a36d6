/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-egress-context.h"

gchar *
vivarium_egress_context_normalize (const gchar *host)
{
  g_autofree gchar *bracketed = NULL;

  if (host == NULL)
    return NULL;
  if (strchr (host, ':') != NULL && host[0] != '[')
    host = bracketed = g_strdup_printf ("[%s]", host);
  return vivarium_egress_normalize_host (host);
}

gboolean
vivarium_egress_context_decide (VivariumEgressContext *ctx, const gchar *host, guint16 port, gchar **reason)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ctx->policy_lock);

  return vivarium_egress_policy_decide (ctx->policy, host, port, reason);
}

gboolean
vivarium_egress_context_allows_name (VivariumEgressContext *ctx, const gchar *name)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&ctx->policy_lock);

  return vivarium_egress_policy_allows_name (ctx->policy, name);
}

gchar *
vivarium_egress_context_placeholder (VivariumEgressContext *ctx, const gchar *text, gsize len, const gchar *host,
                                     guint16 port, const gchar *where)
{
  const VivariumSecret *secret;

  if (ctx->placeholders == NULL || text == NULL)
    return NULL;
  secret = vivarium_placeholders_find (ctx->placeholders, (const guint8 *) text, len);
  return secret != NULL ? vivarium_placeholder_reason (secret, host, port, where) : NULL;
}
