/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdGuard"

#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/vfs.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-denylist.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-guard.h"
#include "vd-host-addresses.h"
#include "vd-guard-table.h"
#include "vd-fs.h"

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
};

G_DEFINE_TYPE (VdGuard, vd_guard, G_TYPE_OBJECT)

static void
vd_guard_finalize (GObject *object)
{
  VdGuard *self = VD_GUARD (object);

  if (self->table != NULL)
    vd_guard_table_uninstall (self->table);
  g_clear_object (&self->table);
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

/* The host's own addresses, as /32 and /128; one inside a built-in range
 * (127.0.0.1, ::1, a 10.x address) is already denied, and listing it again
 * would only be noise. */
static void
add_host_addresses (GPtrArray *list)
{
  g_autoptr(GPtrArray) addresses = vd_host_addresses_list ();

  for (guint i = 0; i < addresses->len; i++) {
    GInetAddress *addr = g_ptr_array_index (addresses, i);
    g_autofree gchar *text = NULL;

    if (vivarium_denylist_match (addr) != NULL)
      continue;
    text = g_inet_address_to_string (addr);
    g_ptr_array_add (list, g_strdup_printf ("%s/%u", text,
                                            g_inet_address_get_family (addr) == G_SOCKET_FAMILY_IPV4 ? 32 : 128));
  }
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
    vivarium_dbus_guard_set_verdict (self->skeleton, vivarium_verdict_to_string (VIVARIUM_VERDICT_NEVER_RUN));
  if (vivarium_dbus_guard_get_job (self->skeleton) == NULL)
    vivarium_dbus_guard_set_job (self->skeleton, "/");
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

static gboolean
denies_everything (GVariant *deny, gint family)
{
  GVariantIter iter;
  gint32 f;
  GVariant *bytes;
  guint32 prefix;

  g_variant_iter_init (&iter, deny);
  while (g_variant_iter_next (&iter, "(i@ayu)", &f, &bytes, &prefix)) {
    g_variant_unref (bytes);
    if (f == family && prefix == 0)
      return TRUE;
  }
  return FALSE;
}

/* Egress "none"/"allowlist": a network namespace of the unit's own, every
 * address denied and none allowed (QEMU opens no IP socket at all: its
 * guest's network, if any, is the egress proxy's, over a unix socket). */
gboolean
vd_guard_check_unit_closed (VdGuard *self, const gchar *unit, GError **error)
{
  g_autoptr(GVariant) deny = NULL;
  g_autoptr(GVariant) allow = NULL;
  g_autoptr(GVariant) private_network = NULL;

  deny = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Service", "IPAddressDeny", error);
  if (deny == NULL)
    return FALSE;
  allow = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Service", "IPAddressAllow", error);
  if (allow == NULL)
    return FALSE;
  private_network = vd_systemd_get_unit_property (self->systemd, unit, "org.freedesktop.systemd1.Service",
                                                  "PrivateNetwork", error);
  if (private_network == NULL)
    return FALSE;
  if (!denies_everything (deny, AF_INET) || !denies_everything (deny, AF_INET6) || g_variant_n_children (allow) > 0 ||
      !g_variant_get_boolean (private_network)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_GUARD_UNAVAILABLE,
                 "The unit %s has not the closed network a session without open egress must have "
                 "(a network namespace of its own, every address denied, none allowed)", unit);
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

/* The self-test runs above the guard (it boots sessions); the guard only
 * shows its last result. */
void
vd_guard_set_self_test_result (VdGuard *self, const gchar *json, VivariumVerdict verdict, gint64 finished_at)
{
  vivarium_dbus_guard_set_last_result (self->skeleton, json);
  vivarium_dbus_guard_set_verdict (self->skeleton, vivarium_verdict_to_string (verdict));
  vivarium_dbus_guard_set_last_run_at (self->skeleton, (guint64) finished_at);
}
