/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "vivarium-egress-secrets.h"

static gboolean
load_upstream_ca (VivariumEgressContext *ctx, const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;

  if (path == NULL) {
    ctx->upstream_ca = g_tls_backend_get_default_database (g_tls_backend_get_default ());
    if (ctx->upstream_ca == NULL) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   "the system has no TLS trust store to check upstream certificates against (glib-networking)");
      return FALSE;
    }
    return TRUE;
  }
  ctx->upstream_ca = g_tls_file_database_new (path, &local);
  if (ctx->upstream_ca == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "--upstream-ca %s does not load: %s", path,
                 local->message);
    return FALSE;
  }
  return TRUE;
}

/* Every host of every secret, for the CA's name constraints. */
static GStrv
all_hosts (GPtrArray *secrets)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; i < secrets->len; i++) {
    const VivariumSecret *secret = secrets->pdata[i];
    g_strv_builder_addv (builder, (const gchar **) secret->hosts);
  }
  return g_strv_builder_end (builder);
}

static gboolean
load_file (VivariumEgressContext *ctx, const gchar *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) secrets = vivarium_secrets_load (path, &local);

  /* Whatever it held, it does not stay on disk. */
  if (g_unlink (path) != 0 && errno != ENOENT) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "cannot remove the secrets file %s: %s", path,
                 g_strerror (errno));
    return FALSE;
  }
  if (secrets == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the secrets file does not load: %s", local->message);
    return FALSE;
  }
  if (secrets->len == 0 || secrets->len > VIVARIUM_SECRET_MAX_PER_SESSION) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the secrets file %s holds %u secrets (1 to %u)", path,
                 secrets->len, VIVARIUM_SECRET_MAX_PER_SESSION);
    return FALSE;
  }
  for (guint i = 0; i < secrets->len; i++) {
    const VivariumSecret *secret = secrets->pdata[i];
    if (secret->placeholder == NULL) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "the secret %s in %s has no placeholder", secret->name,
                   path);
      return FALSE;
    }
  }
  ctx->secrets = g_steal_pointer (&secrets);
  return TRUE;
}

gboolean
vivarium_egress_load_secrets (VivariumEgressContext *ctx, const gchar *dir, const gchar *secrets_path,
                              const gchar *upstream_ca_path, GError **error)
{
  g_autofree gchar *session = NULL;
  g_autofree gchar *ca_path = NULL;
  g_auto(GStrv) hosts = NULL;

  if (secrets_path == NULL)
    return upstream_ca_path == NULL || load_upstream_ca (ctx, upstream_ca_path, error);
  if (!load_file (ctx, secrets_path, error) || !load_upstream_ca (ctx, upstream_ca_path, error))
    return FALSE;
  ctx->placeholders = vivarium_placeholders_new (ctx->secrets);
  /* DIR is /run/vivarium/egress/<session>: the CA is named after it. */
  session = g_path_get_basename (dir);
  hosts = all_hosts (ctx->secrets);
  ctx->ca = vivarium_egress_ca_new (session, (const gchar *const *) hosts, error);
  if (ctx->ca == NULL)
    return FALSE;
  ca_path = g_build_filename (dir, VIVARIUM_EGRESS_CA_NAME, NULL);
  return vivarium_egress_ca_write (ctx->ca, ca_path, error);
}
