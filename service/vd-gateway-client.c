/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdGatewayClient"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>

#include "vivarium-denylist.h"
#include "vd-fs.h"
#include "vd-gateway-client.h"

static gchar *
task_dir (const gchar *runtime_dir, const gchar *prefix, const gchar *task_id)
{
  g_autofree gchar *name = g_strconcat (prefix, task_id, NULL);

  return g_build_filename (runtime_dir, "tasks", name, NULL);
}

static gboolean
in_strv (GPtrArray *list, const gchar *s)
{
  for (guint i = 0; i < list->len; i++) {
    if (g_str_equal (list->pdata[i], s))
      return TRUE;
  }
  return FALSE;
}

gboolean
vd_gateway_write_host_deny (VdConfig *config, GPtrArray *deny_list, GError **error)
{
  g_autoptr(GPtrArray) builtin = vivarium_denylist_to_strings ();
  g_auto(GStrv) admin = vd_config_get_extra_deny (config);
  g_autofree gchar *path = g_build_filename (vd_config_get_runtime_dir (config), VD_GATEWAY_DENY_NAME, NULL);
  g_autoptr(GString) text = g_string_new ("# The guard's deny list beyond the built-in ranges, for vivarium-gateway\n");

  for (guint i = 0; deny_list != NULL && i < deny_list->len; i++) {
    const gchar *cidr = deny_list->pdata[i];
    if (in_strv (builtin, cidr))
      continue;
    g_string_append_printf (text, "%s %s\n", cidr,
                            g_strv_contains ((const gchar *const *) admin, cidr) ? "denied by [Guard] ExtraDeny="
                                                                                 : "one of the host's own addresses");
  }
  return vd_fs_write_durably (path, text->str, 0600, error);
}

gchar *
vd_gateway_task_open (const gchar *runtime_dir, const gchar *task_id, guint32 uid, GError **error)
{
  g_autofree gchar *tasks = g_build_filename (runtime_dir, "tasks", NULL);
  g_autofree gchar *staging = task_dir (runtime_dir, ".new-", task_id);
  g_autofree gchar *final = task_dir (runtime_dir, "", task_id);
  g_autofree gchar *uid_file = g_build_filename (staging, "uid", NULL);
  g_autofree gchar *text = g_strdup_printf ("%u\n", uid);

  /* 0711: the worker's uid passes through to its socket, lists nothing. */
  if (!vd_fs_mkdir (tasks, 0711, 0, 0, error))
    return NULL;
  vd_fs_rm_rf (staging, NULL);
  vd_fs_rm_rf (final, NULL);
  if (!vd_fs_mkdir (staging, 0711, 0, 0, error) || !vd_fs_write_durably (uid_file, text, 0600, error))
    return NULL;
  if (g_rename (staging, final) != 0) {
    vd_fs_set_error_errno (error, errno, "Cannot create %s", final);
    return NULL;
  }
  return g_build_filename (final, VD_GATEWAY_SOCKET_NAME, NULL);
}

gboolean
vd_gateway_task_read_usage (const gchar *runtime_dir, const gchar *task_id, guint64 usage[4])
{
  g_autofree gchar *dir = task_dir (runtime_dir, "", task_id);
  g_autofree gchar *path = g_build_filename (dir, "usage", NULL);
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  const gchar *keys[] = { "Requests", "Refused", "PromptTokens", "CompletionTokens" };

  memset (usage, 0, 4 * sizeof (guint64));
  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, NULL))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    usage[i] = g_key_file_get_uint64 (kf, "Usage", keys[i], NULL);
  return TRUE;
}

void
vd_gateway_task_close (const gchar *runtime_dir, const gchar *task_id)
{
  g_autofree gchar *dir = task_dir (runtime_dir, "", task_id);
  g_autoptr(GError) error = NULL;

  if (!vd_fs_rm_rf (dir, &error))
    g_warning ("cannot remove %s: %s", dir, error->message);
}

static gchar *
unit_string (VdSystemd *systemd, const gchar *iface, const gchar *property)
{
  g_autoptr(GVariant) v = vd_systemd_get_unit_property (systemd, VD_GATEWAY_UNIT, iface, property, NULL);

  return v != NULL && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING) ? g_variant_dup_string (v, NULL) : NULL;
}

gchar *
vd_gateway_dup_down_reason (VdSystemd *systemd)
{
  g_autofree gchar *state = unit_string (systemd, "org.freedesktop.systemd1.Unit", "ActiveState");
  g_autofree gchar *result = NULL;
  g_autofree gchar *status = NULL;
  g_autoptr(GVariant) code = NULL;

  if (state == NULL)
    return g_strdup ("the model gateway did not start: " VD_GATEWAY_UNIT " is not loaded (is it installed?)");
  if (g_str_equal (state, "active") || g_str_equal (state, "reloading"))
    return NULL;
  result = unit_string (systemd, "org.freedesktop.systemd1.Service", "Result");
  /* The gateway puts its refusal in StatusText= (systemd keeps it while
   * the unit stays failed): its own sentence, about its own configuration,
   * quoted only when it exited by itself (a start refused by systemd's rate
   * limit leaves the text of an older run there). */
  if (g_strcmp0 (result, "exit-code") == 0)
    status = unit_string (systemd, "org.freedesktop.systemd1.Service", "StatusText");
  code = vd_systemd_get_unit_property (systemd, VD_GATEWAY_UNIT, "org.freedesktop.systemd1.Service",
                                       "ExecMainStatus", NULL);
  return g_strdup_printf ("the model gateway is not running: " VD_GATEWAY_UNIT " is %s (%s, exit status %d)%s%s",
                          state, result != NULL ? result : "result unknown",
                          code != NULL && g_variant_is_of_type (code, G_VARIANT_TYPE_INT32) ? g_variant_get_int32 (code) : -1,
                          status != NULL && status[0] != '\0' ? ": " : "",
                          status != NULL ? status : "");
}
