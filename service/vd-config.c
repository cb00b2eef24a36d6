/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdConfig"

#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "vivarium-config-layers.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-config.h"

/* Layers, later ones win key by key (common/vivarium-config-layers.h):
 * defaults.conf (package) < vivarium.conf (admin) < conf.d/ *.conf (drop-ins, sorted).
 * The values compiled in below stand only for a key no layer sets. */
struct _VdConfig {
  GObject    parent_instance;
  GKeyFile  *merged;
  gchar     *state_dir;
  gchar     *runtime_dir;
  gchar     *config_dir;
  gchar     *data_dir;
  gchar     *libexec_dir;
};

G_DEFINE_TYPE (VdConfig, vd_config, G_TYPE_OBJECT)

static void
vd_config_finalize (GObject *object)
{
  VdConfig *self = VD_CONFIG (object);

  g_key_file_unref (self->merged);
  g_free (self->state_dir);
  g_free (self->runtime_dir);
  g_free (self->config_dir);
  g_free (self->data_dir);
  g_free (self->libexec_dir);
  G_OBJECT_CLASS (vd_config_parent_class)->finalize (object);
}

static void
vd_config_class_init (VdConfigClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_config_finalize;
}

/* The environment overrides exist for the test hosts, which run the real
 * daemon against throwaway directories; under systemd they are unset. */
static gchar *
dir_from_env (const gchar *variable, const gchar *fallback)
{
  const gchar *value = g_getenv (variable);
  return g_strdup (value != NULL && value[0] == '/' ? value : fallback);
}

static void
vd_config_init (VdConfig *self)
{
  self->merged = g_key_file_new ();
  self->state_dir = dir_from_env ("VIVARIUM_STATE_DIR", VIVARIUM_STATEDIR);
  self->runtime_dir = dir_from_env ("VIVARIUM_RUNTIME_DIR", VIVARIUM_RUNTIMEDIR);
  self->config_dir = g_strdup (vivarium_config_config_dir ());
  self->data_dir = g_strdup (vivarium_config_data_dir ());
  self->libexec_dir = dir_from_env ("VIVARIUM_LIBEXEC_DIR", VIVARIUM_LIBEXECDIR "/vivarium");
}

VdConfig *
vd_config_new (void)
{
  return g_object_new (VD_TYPE_CONFIG, NULL);
}

/* The one loader of the layers every program shares (common/). */
gboolean
vd_config_load (VdConfig *self, GError **error)
{
  GKeyFile *merged = vivarium_config_load_layers (self->data_dir, self->config_dir, error);

  if (merged == NULL)
    return FALSE;
  g_key_file_unref (self->merged);
  self->merged = merged;
  return TRUE;
}

static guint
get_uint (VdConfig *self, const gchar *group, const gchar *key, guint fallback, guint min, guint max)
{
  g_autofree gchar *value = g_key_file_get_value (self->merged, group, key, NULL);
  guint64 parsed;

  if (value == NULL)
    return fallback;
  if (!g_ascii_string_to_unsigned (g_strstrip (value), 10, min, max, &parsed, NULL)) {
    g_warning ("[%s] %s=%s is not a number in %u–%u; using %u", group, key, value, min, max, fallback);
    return fallback;
  }
  return (guint) parsed;
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const gchar * const *) a, *(const gchar * const *) b);
}

const gchar *vd_config_get_state_dir (VdConfig *self) { return self->state_dir; }
const gchar *vd_config_get_runtime_dir (VdConfig *self) { return self->runtime_dir; }
const gchar *vd_config_get_data_dir (VdConfig *self) { return self->data_dir; }
const gchar *vd_config_get_libexec_dir (VdConfig *self) { return self->libexec_dir; }

gchar *
vd_config_build_state_path (VdConfig *self, const gchar *first, ...)
{
  va_list args;
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();

  g_ptr_array_add (parts, self->state_dir);
  va_start (args, first);
  for (const gchar *p = first; p != NULL; p = va_arg (args, const gchar *))
    g_ptr_array_add (parts, (gpointer) p);
  va_end (args);
  g_ptr_array_add (parts, NULL);
  return g_build_filenamev ((gchar **) parts->pdata);
}

guint
vd_config_get_idle_timeout_sec (VdConfig *self)
{
  return get_uint (self, "Daemon", "IdleTimeoutSec", 60, 0, 86400);
}

guint
vd_config_get_read_grant_sec (VdConfig *self)
{
  return get_uint (self, "Daemon", "ReadGrantSec", VIVARIUM_READ_GRANT_SEC, 2, 86400);
}

guint
vd_config_get_default_memory_mib (VdConfig *self)
{
  return get_uint (self, "Sessions", "DefaultMemoryMiB", 512, 128, 65536);
}

guint
vd_config_get_default_cpus (VdConfig *self)
{
  return get_uint (self, "Sessions", "DefaultCpus", 1, 1, 64);
}

guint
vd_config_get_max_sessions (VdConfig *self)
{
  return get_uint (self, "Sessions", "MaxSessions", 8, 1, 1024);
}

/* SubmitTask past MaxSessions: this many tasks wait for a session, in
 * the order submitted; one more is Busy. */
guint
vd_config_get_max_queued_tasks (VdConfig *self)
{
  return get_uint (self, "Tasks", "MaxQueuedTasks", 32, 0, 1024);
}

guint
vd_config_get_agent_timeout_sec (VdConfig *self)
{
  return get_uint (self, "Sessions", "AgentTimeoutSec", 180, 5, 3600);
}

/* The commit's cap per file, in bytes; the project's quota caps it too. */
guint64
vd_config_get_commit_file_max (VdConfig *self)
{
  return (guint64) get_uint (self, "Tasks", "CommitFileMaxMiB", 100, 1, 1024 * 1024) * 1024 * 1024;
}

guint
vd_config_get_commit_timeout_sec (VdConfig *self)
{
  return get_uint (self, "Tasks", "CommitTimeoutSec", 600, 10, 86400);
}

guint
vd_config_get_transfer_timeout_sec (VdConfig *self)
{
  return get_uint (self, "Projects", "TransferTimeoutSec", 1800, 10, 86400);
}

/* Retention: how many finished tasks stay on the bus (and on disk), how
 * many signed reports are kept. Bounded above, since each costs an object
 * on the bus and, for a report, up to its command log's 8 MiB on disk. */
guint
vd_config_get_max_finished_tasks (VdConfig *self)
{
  return get_uint (self, "Tasks", "MaxFinishedTasks", VD_CONFIG_MAX_FINISHED_TASKS_DEFAULT, 1, 1000);
}

guint
vd_config_get_max_reports (VdConfig *self)
{
  return get_uint (self, "Tasks", "MaxReports", VD_CONFIG_MAX_REPORTS_DEFAULT, 1, 2000);
}

guint32
vd_config_get_uid_base (VdConfig *self)
{
  return VIVARIUM_SESSION_UID_BASE;
}

guint32
vd_config_get_uid_count (VdConfig *self)
{
  return VIVARIUM_SESSION_UID_COUNT;
}

GStrv
vd_config_get_extra_deny (VdConfig *self)
{
  g_auto(GStrv) list = g_key_file_get_string_list (self->merged, "Guard", "ExtraDeny", NULL, NULL);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; list != NULL && list[i] != NULL; i++) {
    g_strstrip (list[i]);
    if (list[i][0] != '\0')
      g_strv_builder_add (builder, list[i]);
  }
  return g_strv_builder_end (builder);
}

gboolean
vd_config_get_allow_unenforced_layer1 (VdConfig *self)
{
  return g_key_file_get_boolean (self->merged, "Guard", "AllowUnenforcedLayer1", NULL);
}

/* Lets RunSelfTest's "negative-control" option boot a guest with neither
 * layer of the guard, to prove the self-test can fail. Off by default. */
gboolean
vd_config_get_allow_negative_control (VdConfig *self)
{
  return g_key_file_get_boolean (self->merged, "Guard", "AllowNegativeControl", NULL);
}

/* One of known (the first is the default); anything else is read as the
 * default with a warning. */
static const gchar *
get_choice (VdConfig *self, const gchar *group, const gchar *key, const gchar * const *known)
{
  g_autofree gchar *value = g_key_file_get_string (self->merged, group, key, NULL);
  g_autofree gchar *choices = NULL;

  if (value == NULL)
    return known[0];
  g_strstrip (value);
  for (guint i = 0; known[i] != NULL; i++) {
    if (g_strcmp0 (value, known[i]) == 0)
      return known[i];
  }
  choices = g_strjoinv (", ", (gchar **) known);
  g_warning ("[%s] %s=%s is not one of %s; using %s", group, key, value, choices, known[0]);
  return known[0];
}

/* "auto", "always" or "never". */
const gchar *
vd_config_get_dns_relay (VdConfig *self)
{
  static const gchar * const known[] = { "auto", "always", "never", NULL };

  return get_choice (self, "Guard", "DnsRelay", known);
}

/* "auto", "kvm" or "tcg". */
const gchar *
vd_config_get_accelerator (VdConfig *self)
{
  static const gchar * const known[] = { "auto", "kvm", "tcg", NULL };

  return get_choice (self, "Sessions", "Accelerator", known);
}

/* Whether Freeze boots the image once to save a boot snapshot. */
gboolean
vd_config_get_boot_snapshots (VdConfig *self)
{
  g_autoptr(GError) error = NULL;
  gboolean value = g_key_file_get_boolean (self->merged, "Sessions", "BootSnapshots", &error);

  return error != NULL ? TRUE : value;
}

gboolean
vd_config_use_kvm (VdConfig *self)
{
  const gchar *accel = vd_config_get_accelerator (self);

  if (g_strcmp0 (accel, "auto") == 0)
    return g_file_test ("/dev/kvm", G_FILE_TEST_EXISTS);
  return g_strcmp0 (accel, "kvm") == 0;
}

/* The first of known is the built-in default. */
const gchar *
vd_config_get_egress_session_mode (VdConfig *self)
{
  static const gchar * const known[] = { "open", "allowlist", "none", NULL };

  return get_choice (self, "Egress", "SessionMode", known);
}

/* A task's worker is the untrusted party: its sessions reach only what
 * their groups allow unless the operator says otherwise. */
const gchar *
vd_config_get_egress_task_mode (VdConfig *self)
{
  static const gchar * const known[] = { "allowlist", "none", "open", NULL };

  return get_choice (self, "Egress", "TaskMode", known);
}

static GStrv
get_list (VdConfig *self, const gchar *group, const gchar *key)
{
  g_auto(GStrv) list = g_key_file_get_string_list (self->merged, group, key, NULL, NULL);
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  for (guint i = 0; list != NULL && list[i] != NULL; i++) {
    g_strstrip (list[i]);
    if (list[i][0] != '\0')
      g_strv_builder_add (builder, list[i]);
  }
  return g_strv_builder_end (builder);
}

GStrv
vd_config_get_egress_session_groups (VdConfig *self)
{
  return get_list (self, "Egress", "SessionGroups");
}

GStrv
vd_config_get_egress_task_groups (VdConfig *self)
{
  return get_list (self, "Egress", "TaskGroups");
}

guint64
vd_config_get_egress_limit_up (VdConfig *self)
{
  return (guint64) get_uint (self, "Egress", "LimitUpMiB", 1024, 0, 1024 * 1024) * 1024 * 1024;
}

guint64
vd_config_get_egress_limit_down (VdConfig *self)
{
  return (guint64) get_uint (self, "Egress", "LimitDownMiB", 8192, 0, 1024 * 1024) * 1024 * 1024;
}

guint
vd_config_get_egress_log_max_entries (VdConfig *self)
{
  return get_uint (self, "Egress", "LogMaxEntries", 10000, 100, 1000000);
}

/* NULL: the host's trust store. Only an absolute path is taken. */
gchar *
vd_config_dup_egress_upstream_ca (VdConfig *self)
{
  g_autofree gchar *path = g_key_file_get_string (self->merged, "Egress", "UpstreamCAFile", NULL);

  if (path != NULL)
    g_strstrip (path);
  if (path == NULL || !g_path_is_absolute (path))
    return NULL;
  return g_steal_pointer (&path);
}

static gboolean
egress_group_name_ok (const gchar *name)
{
  return strlen (name) <= VD_EGRESS_GROUP_NAME_MAX && vivarium_name_validate ("egress group", name, NULL);
}

GStrv
vd_config_get_egress_group_names (VdConfig *self)
{
  g_auto(GStrv) groups = g_key_file_get_groups (self->merged, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new ();

  for (guint i = 0; groups[i] != NULL; i++) {
    const gchar *name = groups[i] + strlen (VIVARIUM_CONFIG_EGRESS_GROUP_PREFIX);
    if (!g_str_has_prefix (groups[i], VIVARIUM_CONFIG_EGRESS_GROUP_PREFIX))
      continue;
    if (!egress_group_name_ok (name)) {
      g_warning ("[%s] is not a usable egress group name (letters, digits, '-', '_', '.', at most %d); ignored",
                 groups[i], VD_EGRESS_GROUP_NAME_MAX);
      continue;
    }
    g_ptr_array_add (names, g_strdup (name));
  }
  g_ptr_array_sort (names, compare_strings);
  g_ptr_array_add (names, NULL);
  return (GStrv) g_ptr_array_free (g_steal_pointer (&names), FALSE);
}

gboolean
vd_config_get_egress_group (VdConfig *self, const gchar *name, GStrv *allow, GStrv *deny, gchar **description)
{
  g_autofree gchar *group = g_strconcat (VIVARIUM_CONFIG_EGRESS_GROUP_PREFIX, name, NULL);
  g_autofree gchar *text = NULL;

  if (!egress_group_name_ok (name) || !g_key_file_has_group (self->merged, group))
    return FALSE;
  if (allow != NULL)
    *allow = get_list (self, group, "Allow");
  if (deny != NULL)
    *deny = get_list (self, group, "Deny");
  if (description != NULL) {
    text = g_key_file_get_string (self->merged, group, "Description", NULL);
    *description = text != NULL ? g_strstrip (g_steal_pointer (&text)) : g_strdup ("");
  }
  return TRUE;
}
