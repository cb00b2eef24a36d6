/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivarium-mcp"

#include "config.h"

#include <gio/gio.h>

#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-mcp-manifest.h"

struct _VmcpManifest {
  gchar  *client;
  GStrv   tools;     /* NULL: every tool */
  GStrv   projects;  /* NULL: every project */
  GStrv   images;    /* NULL: every image */
  gboolean worker_verify;  /* vm_task may leave `verify` out */
};

void
vmcp_manifest_free (VmcpManifest *self)
{
  if (self == NULL)
    return;
  g_free (self->client);
  g_strfreev (self->tools);
  g_strfreev (self->projects);
  g_strfreev (self->images);
  g_free (self);
}

typedef gboolean (*CheckFunc) (const gchar *value, GError **error);

static gboolean
check_image (const gchar *value, GError **error)
{
  return vivarium_name_validate ("image", value, error);
}

/* A list key: absent means no narrowing, present means exactly these (an
 * empty list allows none). Each value is checked, so that a typo is an
 * error at start and not a silent refusal later. */
static gboolean
read_list (GKeyFile *kf, const gchar *group, const gchar *key, CheckFunc check,
           const gchar * const *known, GStrv *out, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_auto(GStrv) values = NULL;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  values = g_key_file_get_string_list (kf, group, key, NULL, &local_error);
  if (values == NULL && local_error != NULL &&
      !g_error_matches (local_error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE)) {
    g_propagate_error (error, g_steal_pointer (&local_error));
    return FALSE;
  }
  if (values == NULL)
    values = g_new0 (gchar *, 1);
  for (guint i = 0; values[i] != NULL; i++) {
    g_strstrip (values[i]);
    if (known != NULL && !g_strv_contains (known, values[i])) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "[%s] %s= names “%s”, which is not a tool", group, key, values[i]);
      return FALSE;
    }
    if (check != NULL && !check (values[i], &local_error)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "[%s] %s=: %s",
                   group, key, local_error->message);
      return FALSE;
    }
  }
  *out = g_steal_pointer (&values);
  return TRUE;
}

/* Absent means FALSE; anything but true or false is an error at start. */
static gboolean
read_bool (GKeyFile *kf, const gchar *group, const gchar *key, gboolean *out, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  *out = g_key_file_get_boolean (kf, group, key, &local_error);
  if (local_error != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "[%s] %s= must be true or false",
                 group, key);
    return FALSE;
  }
  return TRUE;
}

VmcpManifest *
vmcp_manifest_load (const gchar *path, const gchar *client, const gchar * const *known_tools,
                    GError **error)
{
  g_autoptr(VmcpManifest) self = g_new0 (VmcpManifest, 1);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autofree gchar *group = NULL;

  if (client == NULL)
    return g_steal_pointer (&self);
  self->client = g_strdup (client);
  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, error)) {
    g_prefix_error (error, "Cannot read the MCP configuration %s: ", path);
    return NULL;
  }
  group = g_strconcat (VMCP_CLIENT_GROUP_PREFIX, client, NULL);
  if (!g_key_file_has_group (kf, group)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_FOUND,
                 "%s has no [%s] group for this client", path, group);
    return NULL;
  }
  if (!read_list (kf, group, "Tools", NULL, known_tools, &self->tools, error) ||
      !read_list (kf, group, "Projects", vivarium_project_name_validate, NULL, &self->projects, error) ||
      !read_list (kf, group, "Images", check_image, NULL, &self->images, error) ||
      !read_bool (kf, group, "WorkerVerify", &self->worker_verify, error))
    return NULL;
  return g_steal_pointer (&self);
}

const gchar *
vmcp_manifest_client (VmcpManifest *self)
{
  return self->client;
}

static gboolean
allows (GStrv list, const gchar *value)
{
  return list == NULL || g_strv_contains ((const gchar * const *) list, value);
}

gboolean
vmcp_manifest_allows_tool (VmcpManifest *self, const gchar *tool)
{
  return allows (self->tools, tool);
}

gboolean
vmcp_manifest_allows_project (VmcpManifest *self, const gchar *project)
{
  return allows (self->projects, project);
}

gboolean
vmcp_manifest_allows_image (VmcpManifest *self, const gchar *image)
{
  return allows (self->images, image);
}

gboolean
vmcp_manifest_allows_worker_verify (VmcpManifest *self)
{
  return self->worker_verify;
}
