/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdGuard"

#include "config.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vd-guard.h"
#include "vd-guard-table.h"
#include "vd-fs.h"
#include "vd-selftest.h"

/* Stored self-test results kept under the state dir's selftest/. */
#define SELF_TEST_HISTORY 50

/* The network guard: one deny list, two layers. Layer 1 is IPAddressDeny=
 * on each session unit (cgroup BPF, enforced by systemd); layer 2 is the
 * nftables table, matched on the session uids. Sessions start only while
 * both can be enforced. */
struct _VdGuard {
  GObject             parent_instance;
  VdConfig           *config;
  VdSystemd          *systemd;
  VdGuardTable       *table;
  VivariumDBusGuard  *skeleton;
  GPtrArray          *deny_list;
  gchar              *layer1_problem;   /* NULL: enforced */
  gchar              *layer2_problem;
  VdManager          *manager;          /* unowned: it owns us */
  VdSelfTest         *self_test;        /* the run in progress, if any */
};

G_DEFINE_TYPE (VdGuard, vd_guard, G_TYPE_OBJECT)

static void
vd_guard_finalize (GObject *object)
{
  VdGuard *self = VD_GUARD (object);

  if (self->table != NULL)
    vd_guard_table_uninstall (self->table);
  g_clear_object (&self->table);
  g_clear_object (&self->self_test);
  g_clear_object (&self->skeleton);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_pointer (&self->deny_list, g_ptr_array_unref);
  g_free (self->layer1_problem);
  g_free (self->layer2_problem);
  G_OBJECT_CLASS (vd_guard_parent_class)->finalize (object);
}

static void
vd_guard_class_init (VdGuardClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = vd_guard_finalize;
}

static void
vd_guard_init (VdGuard *self)
{
  self->skeleton = vivarium_dbus_guard_skeleton_new ();
}

VdGuard *
vd_guard_new (VdConfig *config, VdSystemd *systemd)
{
  VdGuard *self = g_object_new (VD_TYPE_GUARD, NULL);

  self->config = g_object_ref (config);
  self->systemd = systemd != NULL ? g_object_ref (systemd) : NULL;
  return self;
}

GDBusInterfaceSkeleton *vd_guard_get_skeleton (VdGuard *self) { return G_DBUS_INTERFACE_SKELETON (self->skeleton); }
GPtrArray *vd_guard_get_deny_list (VdGuard *self) { return self->deny_list; }

/* The last uid of the reserved range is never covered by the table: the
 * self-test's "layer 1 alone" scratch session runs as it. */
guint32
vd_guard_get_uncovered_uid (VdGuard *self)
{
  return vd_config_get_uid_base (self->config) + vd_config_get_uid_count (self->config) - 1;
}

/* A host address inside a built-in range (127.0.0.1, ::1, a 10.x address)
 * is already denied; listing it again would only be noise. */
static gboolean
covered_by_builtin (GInetAddress *addr)
{
  gsize n;
  const VivariumDenyEntry *list = vivarium_denylist_builtin (&n);

  for (gsize i = 0; i < n; i++) {
    g_autofree gchar *cidr = g_strdup_printf ("%s/%u", list[i].address, list[i].prefix);
    g_autoptr(GInetAddressMask) mask = g_inet_address_mask_new_from_string (cidr, NULL);
    if (mask != NULL && g_inet_address_mask_matches (mask, addr))
      return TRUE;
  }
  return FALSE;
}

static void
add_host_addresses (GPtrArray *list)
{
  struct ifaddrs *ifa = NULL;

  if (getifaddrs (&ifa) != 0)
    return;
  for (struct ifaddrs *i = ifa; i != NULL; i = i->ifa_next) {
    g_autoptr(GInetAddress) addr = NULL;
    g_autofree gchar *text = NULL;

    if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    addr = g_inet_address_new_from_bytes (i->ifa_addr->sa_family == AF_INET
                                          ? (const guint8 *) &((struct sockaddr_in *) i->ifa_addr)->sin_addr
                                          : (const guint8 *) &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr,
                                          i->ifa_addr->sa_family == AF_INET ? G_SOCKET_FAMILY_IPV4 : G_SOCKET_FAMILY_IPV6);
    if (covered_by_builtin (addr))
      continue;
    text = g_inet_address_to_string (addr);
    g_ptr_array_add (list, g_strdup_printf ("%s/%u", text, i->ifa_addr->sa_family == AF_INET ? 32 : 128));
  }
  freeifaddrs (ifa);
}

static GPtrArray *
build_deny_list (VdGuard *self, GPtrArray **extra_out)
{
  GPtrArray *list = vivarium_denylist_to_strings ();
  g_autoptr(GPtrArray) extra = g_ptr_array_new_with_free_func (g_free);
  g_auto(GStrv) admin = vd_config_get_extra_deny (self->config);

  for (guint i = 0; admin[i] != NULL; i++) {
    g_autoptr(GInetAddress) addr = NULL;
    guint prefix;
    g_autoptr(GError) error = NULL;
    if (!vivarium_cidr_parse (admin[i], &addr, &prefix, &error)) {
      g_warning ("ignoring [Guard] ExtraDeny entry: %s", error->message);
      continue;
    }
    g_ptr_array_add (extra, g_strdup (admin[i]));
  }
  add_host_addresses (extra);
  for (guint i = 0; i < extra->len; i++)
    g_ptr_array_add (list, g_strdup (g_ptr_array_index (extra, i)));
  *extra_out = g_steal_pointer (&extra);
  return list;
}

static gchar *
check_layer1_support (void)
{
  struct statfs fs;

  /* IPAddressDeny= is a cgroup BPF program: it needs the unified hierarchy.
   * On a legacy or hybrid hierarchy systemd accepts the setting and then
   * silently does not enforce it. */
  if (statfs ("/sys/fs/cgroup", &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
    return g_strdup ("the cgroup v2 unified hierarchy is not mounted, so IPAddressDeny= would not be enforced");
  return NULL;
}

static void
publish (VdGuard *self)
{
  g_ptr_array_add (self->deny_list, NULL);
  vivarium_dbus_guard_set_deny_list (self->skeleton, (const gchar * const *) self->deny_list->pdata);
  g_ptr_array_remove_index (self->deny_list, self->deny_list->len - 1);
  vivarium_dbus_guard_set_layer1 (self->skeleton, self->layer1_problem != NULL ? self->layer1_problem : "enforced");
  vivarium_dbus_guard_set_layer2 (self->skeleton, self->layer2_problem != NULL ? self->layer2_problem : "enforced");
  if (vivarium_dbus_guard_get_verdict (self->skeleton) == NULL)
    vivarium_dbus_guard_set_verdict (self->skeleton, "never-run");
}

static gboolean
install_table (VdGuard *self, GPtrArray *extra, GError **error)
{
  guint32 first = vd_config_get_uid_base (self->config);
  guint32 last = vd_guard_get_uncovered_uid (self) - 1;

  self->table = vd_guard_table_new (first, last);
  for (guint i = 0; i < extra->len; i++) {
    if (!vd_guard_table_add_extra (self->table, g_ptr_array_index (extra, i), error))
      return FALSE;
  }
  return vd_guard_table_install (self->table, error);
}

void
vd_guard_start (VdGuard *self)
{
  g_autoptr(GPtrArray) extra = NULL;
  g_autoptr(GError) error = NULL;

  self->deny_list = build_deny_list (self, &extra);
  self->layer1_problem = check_layer1_support ();
  if (!install_table (self, extra, &error)) {
    self->layer2_problem = g_strdup (error->message);
    g_warning ("network guard layer 2 unavailable: %s", error->message);
  }
  if (self->layer1_problem != NULL)
    g_warning ("network guard layer 1 unavailable: %s", self->layer1_problem);
  publish (self);
}

static gboolean
slice_has_allow (VdGuard *self, const gchar *slice, GError **error)
{
  g_autoptr(GVariant) allow = vd_systemd_get_unit_property (self->systemd, slice, "org.freedesktop.systemd1.Slice",
                                                            "IPAddressAllow", error);
  if (allow == NULL)
    return TRUE;
  return g_variant_n_children (allow) > 0;
}

/* An IPAddressAllow= on any parent slice overrides the units' deny: walk
 * vivarium.slice up to the root slice, every time a session starts. */
static gboolean
check_parent_slices (VdGuard *self, GError **error)
{
  const gchar *slices[] = { VIVARIUM_SLICE, "-.slice", NULL };

  if (self->systemd == NULL)
    return TRUE;
  for (guint i = 0; slices[i] != NULL; i++) {
    g_autoptr(GError) local_error = NULL;
    if (slice_has_allow (self, slices[i], &local_error)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                   "The slice %s %s, which would override the sessions' IPAddressDeny=; refusing to start sessions",
                   slices[i], local_error != NULL ? "cannot be inspected" : "carries IPAddressAllow=");
      return FALSE;
    }
  }
  return TRUE;
}

gboolean
vd_guard_check_can_start (VdGuard *self, GError **error)
{
  if (self->layer2_problem != NULL) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                 "The nftables layer of the network guard is not in place (%s); refusing to start sessions",
                 self->layer2_problem);
    return FALSE;
  }
  if (self->layer1_problem != NULL) {
    if (!vd_config_get_allow_unenforced_layer1 (self->config)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                   "The systemd layer of the network guard cannot be enforced (%s); refusing to start sessions "
                   "(an administrator may set [Guard] AllowUnenforcedLayer1=true)", self->layer1_problem);
      return FALSE;
    }
    g_warning ("starting a session without layer 1 because [Guard] AllowUnenforcedLayer1=true: %s",
               self->layer1_problem);
  }
  return check_parent_slices (self, error);
}

gboolean
vd_guard_add_session (VdGuard *self, guint32 uid, GError **error)
{
  if (uid == vd_guard_get_uncovered_uid (self))
    return TRUE;
  return vd_guard_table_add_session (self->table, uid, error);
}

void
vd_guard_remove_session (VdGuard *self, guint32 uid)
{
  g_autoptr(GError) error = NULL;

  if (self->table == NULL || uid == vd_guard_get_uncovered_uid (self))
    return;
  if (!vd_guard_table_remove_session (self->table, uid, &error))
    g_warning ("cannot remove uid %u from the guard table: %s", uid, error->message);
}

gboolean
vd_guard_get_counters (VdGuard *self, guint32 uid, guint64 *packets, guint64 *bytes)
{
  return self->table != NULL && vd_guard_table_get_counters (self->table, uid, packets, bytes, NULL);
}

/* Read the started unit back: the deny list systemd actually holds must be
 * the one we asked for, and there must be no allow list. */
gboolean
vd_guard_check_unit (VdGuard *self, const gchar *unit, GError **error)
{
  g_autoptr(GVariant) deny = NULL;
  g_autoptr(GVariant) allow = NULL;
  gsize n_builtin;

  deny = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Service", "IPAddressDeny", error);
  if (deny == NULL)
    return FALSE;
  allow = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Service", "IPAddressAllow", error);
  if (allow == NULL)
    return FALSE;

  /* systemd folds prefixes covered by others (a host address inside
   * 127.0.0.0/8), but the built-in ranges never overlap, so at least that
   * many entries must be there. */
  vivarium_denylist_builtin (&n_builtin);
  if (g_variant_n_children (deny) < n_builtin || g_variant_n_children (allow) != 0) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                 "The unit %s does not carry the deny list it was started with (%" G_GSIZE_FORMAT " entries, %" G_GSIZE_FORMAT " allowed)",
                 unit, g_variant_n_children (deny), g_variant_n_children (allow));
    return FALSE;
  }
  return TRUE;
}

gboolean
vd_guard_verify_table (VdGuard *self, GError **error)
{
  if (self->table == NULL || !vd_guard_table_is_installed (self->table)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE, "The nftables table is not installed");
    return FALSE;
  }
  return vd_guard_table_verify (self->table, error);
}

/* --- the isolation self-test ----------------------------------------- */

static gchar *
self_test_dir (VdGuard *self)
{
  return vd_config_build_state_path (self->config, "selftest", NULL);
}

static void
publish_result (VdGuard *self, const gchar *json, const gchar *verdict, gint64 finished_at)
{
  vivarium_dbus_guard_set_last_result (self->skeleton, json);
  vivarium_dbus_guard_set_verdict (self->skeleton, verdict);
  vivarium_dbus_guard_set_last_run_at (self->skeleton, (guint64) finished_at);
}

/* Oldest first by name: the names are UTC timestamps. */
static void
prune_history (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) results = g_ptr_array_new ();
  guint n;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.')
      g_ptr_array_add (results, names[i]);
  }
  g_ptr_array_sort (results, (GCompareFunc) g_strcmp0);
  n = results->len;
  for (guint i = 0; n > SELF_TEST_HISTORY && i < n - SELF_TEST_HISTORY; i++) {
    g_autofree gchar *path = g_build_filename (dir, *(gchar **) g_ptr_array_index (results, i), NULL);
    if (g_unlink (path) != 0)
      g_warning ("cannot remove old self-test result %s: %s", path, g_strerror (errno));
  }
}

/* g_file_set_contents() writes a temporary file and renames it over the
 * target: a reader never sees half a result. */
static gboolean
store_result (VdGuard *self, const gchar *json, gint64 finished_at, GError **error)
{
  g_autofree gchar *dir = self_test_dir (self);
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc (finished_at / G_USEC_PER_SEC);
  g_autofree gchar *stamp = g_date_time_format (dt, "%Y%m%dT%H%M%S");
  g_autofree gchar *name = g_strdup_printf ("%s.%06" G_GINT64_FORMAT "Z.json", stamp, finished_at % G_USEC_PER_SEC);
  g_autofree gchar *path = g_build_filename (dir, name, NULL);

  if (g_mkdir_with_parents (dir, 0700) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "Cannot create %s: %s", dir, g_strerror (errno));
    return FALSE;
  }
  if (!g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    return FALSE;
  prune_history (dir);
  return TRUE;
}

static gboolean
parse_stored (const gchar *json, gchar **verdict, gint64 *finished_at)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *root;

  if (!json_parser_load_from_data (parser, json, -1, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  root = json_node_get_object (json_parser_get_root (parser));
  *verdict = g_strdup (json_object_get_string_member_with_default (root, "verdict", "inconclusive"));
  *finished_at = json_object_get_int_member_with_default (root, "finished-at-usec", 0);
  return TRUE;
}

/* The newest stored result becomes LastResult/Verdict/LastRunAt, so a
 * restarted (or re-activated) daemon still shows the last run. */
static void
load_last_result (VdGuard *self)
{
  g_autofree gchar *dir = self_test_dir (self);
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  const gchar *newest = NULL;
  g_autofree gchar *path = NULL;
  g_autofree gchar *json = NULL;
  g_autofree gchar *verdict = NULL;
  gint64 finished_at = 0;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.' && g_strcmp0 (names[i], newest) > 0)
      newest = names[i];
  }
  if (newest == NULL)
    return;
  path = g_build_filename (dir, newest, NULL);
  if (!g_file_get_contents (path, &json, NULL, &error) || !parse_stored (json, &verdict, &finished_at)) {
    g_warning ("cannot load the last self-test result %s: %s", path, error != NULL ? error->message : "not JSON");
    return;
  }
  publish_result (self, json, verdict, finished_at);
}

static void
self_test_progress_cb (VdSelfTest *test, guint percent, const gchar *step, gpointer user_data)
{
  VdGuard *self = VD_GUARD (user_data);

  vivarium_dbus_guard_emit_self_test_progress (self->skeleton, percent, step);
}

static void
self_test_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GDBusMethodInvocation) invocation = user_data;
  VdSelfTest *test = VD_SELF_TEST (source);
  VdGuard *self = g_object_get_data (G_OBJECT (invocation), "guard");
  GError *error = NULL;
  g_autofree gchar *json = vd_self_test_run_finish (test, res, &error);
  g_autoptr(GError) store_error = NULL;

  g_signal_handlers_disconnect_by_data (test, self);
  g_clear_object (&self->self_test);
  vd_manager_release (self->manager);
  if (json == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  publish_result (self, json, vd_self_test_get_verdict (test), vd_self_test_get_finished_at (test));
  if (!store_result (self, json, vd_self_test_get_finished_at (test), &store_error))
    g_warning ("cannot store the self-test result: %s", store_error->message);
  vivarium_dbus_guard_emit_self_test_progress (self->skeleton, 100, vd_self_test_get_verdict (test));
  vivarium_dbus_guard_complete_run_self_test (self->skeleton, invocation, json);
}

static gboolean
parse_self_test_options (VdGuard *self, GVariant *options, const gchar **image, gboolean *negative,
                         const gchar **session, GError **error)
{
  const gchar *known[] = { "image", "negative-control", "session", NULL };
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  *image = "tiny";
  *negative = FALSE;
  *session = NULL;
  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_autoptr(GVariant) v = value;
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown self-test option “%s” (known: image, negative-control, session)", key);
      return FALSE;
    }
    if (g_str_equal (key, "image") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *image = g_variant_get_string (v, NULL);
    } else if (g_str_equal (key, "negative-control") && g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN)) {
      *negative = g_variant_get_boolean (v);
    } else if (g_str_equal (key, "session") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *session = g_variant_get_string (v, NULL);
    } else {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "The self-test option “%s” has the wrong type", key);
      return FALSE;
    }
  }
  if (*session != NULL && *negative) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A live session keeps both layers; it cannot be the negative control");
    return FALSE;
  }
  /* A run with neither layer is a guest with the host's networks open:
   * only an administrator can allow it, in the configuration file. */
  if (*negative && !vd_config_get_allow_negative_control (self->config)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED,
                 "The negative control needs [Guard] AllowNegativeControl=true in the configuration");
    return FALSE;
  }
  return vivarium_name_validate ("image", *image, error);
}

static gboolean
handle_run_self_test (VivariumDBusGuard *iface, GDBusMethodInvocation *invocation, GVariant *options, gpointer user_data)
{
  VdGuard *self = VD_GUARD (user_data);
  const gchar *image = NULL;
  const gchar *session_id = NULL;
  VdSession *live = NULL;
  gboolean negative = FALSE;
  GError *error = NULL;

  if (self->self_test != NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "A self-test is already running");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!parse_self_test_options (self, options, &image, &negative, &session_id, &error) ||
      (session_id != NULL && (live = vd_manager_lookup_running_session (self->manager, session_id, &error)) == NULL) ||
      !vd_guard_check_can_start (self, &error)) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_info ("self-test started (image %s%s)", image, negative ? ", with the negative control" : "");
  self->self_test = vd_self_test_new (self->manager, self->config, image, negative);
  if (live != NULL)
    vd_self_test_set_live_session (self->self_test, live);
  vd_manager_hold (self->manager);
  g_signal_connect (self->self_test, "progress", G_CALLBACK (self_test_progress_cb), self);
  g_object_set_data (G_OBJECT (invocation), "guard", self);
  vd_self_test_run_async (self->self_test, self_test_done_cb, g_object_ref (invocation));
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

/* Called once by the manager, after vd_guard_start(): the self-test boots
 * scratch sessions through it. */
void
vd_guard_enable_self_test (VdGuard *self, VdManager *manager)
{
  self->manager = manager;
  load_last_result (self);
  g_signal_connect (self->skeleton, "handle-run-self-test", G_CALLBACK (handle_run_self_test), self);
}
