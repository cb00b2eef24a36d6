/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdUnitSandbox"

#include "config.h"

#include <errno.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "vivarium-denylist.h"
#include "vivarium-names.h"
#include "vd-unit-sandbox.h"

static void
add_bool (GVariantBuilder *b, const gchar *name)
{
  g_variant_builder_add (b, "(sv)", name, g_variant_new_boolean (TRUE));
}

static void
add_strv (GVariantBuilder *b, const gchar *name, const gchar * const *values)
{
  const gchar *none[] = { NULL };

  g_variant_builder_add (b, "(sv)", name, g_variant_new_strv (values != NULL ? values : none, -1));
}

/* (bas): an allow-list (TRUE) or names taken out of it (FALSE). */
static void
add_list (GVariantBuilder *b, const gchar *name, gboolean allow, const gchar * const *values)
{
  const gchar *none[] = { NULL };

  g_variant_builder_add (b, "(sv)", name,
                         g_variant_new ("(b^as)", allow, values != NULL ? values : (const gchar * const *) none));
}

/* a(ssbt): each path bound onto itself, recursively, required to exist.
 * Nothing for an empty list: systemd keeps BindPaths= and
 * BindReadOnlyPaths= in one list, and an empty assignment of either
 * empties both. */
static void
add_self_binds (GVariantBuilder *b, const gchar *name, const gchar * const *paths)
{
  GVariantBuilder binds;

  if (paths == NULL || paths[0] == NULL)
    return;
  g_variant_builder_init (&binds, G_VARIANT_TYPE ("a(ssbt)"));
  for (gsize i = 0; paths[i] != NULL; i++)
    g_variant_builder_add (&binds, "(ssbt)", paths[i], paths[i], FALSE, (guint64) MS_REC);
  g_variant_builder_add (b, "(sv)", name, g_variant_builder_end (&binds));
}

static void
add_filesystem_view (GVariantBuilder *b, const VdUnitSandbox *sandbox)
{
  g_variant_builder_add (b, "(sv)", "ProtectSystem", g_variant_new_string ("strict"));
  g_variant_builder_add (b, "(sv)", "ProtectHome", g_variant_new_string ("yes"));
  add_bool (b, "PrivateTmp");
  /* Only its own processes in /proc, and nothing of the kernel's there. */
  g_variant_builder_add (b, "(sv)", "ProtectProc", g_variant_new_string ("invisible"));
  g_variant_builder_add (b, "(sv)", "ProcSubset", g_variant_new_string ("pid"));
  if (sandbox->runtime_dir != NULL) {
    g_variant_builder_add (b, "(sv)", "TemporaryFileSystem",
                           g_variant_new_parsed ("[(%s, 'ro,mode=0755')]", sandbox->runtime_dir));
    add_self_binds (b, "BindPaths", sandbox->binds);
    add_self_binds (b, "BindReadOnlyPaths", sandbox->ro_binds);
  }
  if (sandbox->inaccessible != NULL)
    add_strv (b, "InaccessiblePaths", sandbox->inaccessible);
}

static void
add_kernel_view (GVariantBuilder *b, const VdUnitSandbox *sandbox)
{
  add_bool (b, "ProtectKernelTunables");
  add_bool (b, "ProtectKernelModules");
  add_bool (b, "ProtectKernelLogs");
  add_bool (b, "ProtectControlGroups");
  add_bool (b, "ProtectClock");
  add_bool (b, "ProtectHostname");
  add_bool (b, "PrivateIPC");
  add_bool (b, "RemoveIPC");
  /* The namespaces it may create itself. */
  g_variant_builder_add (b, "(sv)", "RestrictNamespaces", g_variant_new_uint64 (sandbox->namespaces));
}

static void
add_privileges (GVariantBuilder *b, const VdUnitSandbox *sandbox)
{
  add_bool (b, "NoNewPrivileges");
  add_bool (b, "RestrictSUIDSGID");
  add_bool (b, "RestrictRealtime");
  add_bool (b, "LockPersonality");
  g_variant_builder_add (b, "(sv)", "CapabilityBoundingSet", g_variant_new_uint64 (sandbox->capabilities));
  g_variant_builder_add (b, "(sv)", "AmbientCapabilities", g_variant_new_uint64 (sandbox->capabilities));
  g_variant_builder_add (b, "(sv)", "UMask", g_variant_new_uint32 (0077));
}

static void
add_system_calls (GVariantBuilder *b, const VdUnitSandbox *sandbox)
{
  const gchar *native[] = { "native", NULL };

  add_strv (b, "SystemCallArchitectures", native);
  add_list (b, "SystemCallFilter", TRUE, sandbox->syscalls);
  if (sandbox->denied_syscalls != NULL)
    add_list (b, "SystemCallFilter", FALSE, sandbox->denied_syscalls);
  /* A call outside the list fails (EPERM) rather than killing the process:
   * the program can say what it was refused. */
  g_variant_builder_add (b, "(sv)", "SystemCallErrorNumber", g_variant_new_int32 (EPERM));
  add_list (b, "RestrictAddressFamilies", TRUE, sandbox->address_families);
  if (!sandbox->writes_code)
    add_bool (b, "MemoryDenyWriteExecute");
}

void
vd_unit_sandbox_add_session_service (GVariantBuilder *b, const gchar *description, guint32 uid,
                                     const gchar * const *argv)
{
  g_autofree gchar *user = g_strdup_printf ("%u", uid);
  const gchar *bind_to[] = { VIVARIUM_DAEMON_UNIT, NULL };

  g_variant_builder_add (b, "(sv)", "Description", g_variant_new_string (description));
  g_variant_builder_add (b, "(sv)", "Type", g_variant_new_string ("exec"));
  g_variant_builder_add (b, "(sv)", "Slice", g_variant_new_string (VIVARIUM_SLICE));
  g_variant_builder_add (b, "(sv)", "BindsTo", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (b, "(sv)", "After", g_variant_new_strv (bind_to, -1));
  g_variant_builder_add (b, "(sv)", "CollectMode", g_variant_new_string ("inactive-or-failed"));
  g_variant_builder_add (b, "(sv)", "User", g_variant_new_string (user));
  g_variant_builder_add (b, "(sv)", "Group", g_variant_new_string (VIVARIUM_QEMU_GROUP));
  g_variant_builder_add (b, "(sv)", "ExecStart", g_variant_new_parsed ("[(%s, %^as, false)]", argv[0], argv));
}

void
vd_unit_sandbox_add (GVariantBuilder *properties, const VdUnitSandbox *sandbox)
{
  add_filesystem_view (properties, sandbox);
  add_kernel_view (properties, sandbox);
  add_privileges (properties, sandbox);
  add_system_calls (properties, sandbox);
}

static void
add_cidr (GVariantBuilder *b, GInetAddress *addr, guint prefix)
{
  g_variant_builder_add (b, "(i@ayu)", g_inet_address_get_family (addr) == G_SOCKET_FAMILY_IPV4 ? AF_INET : AF_INET6,
                         g_variant_new_fixed_array (G_VARIANT_TYPE_BYTE, g_inet_address_to_bytes (addr),
                                                    g_inet_address_get_native_size (addr), 1),
                         prefix);
}

GVariant *
vd_unit_sandbox_ip_deny (GPtrArray *cidrs)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(iayu)"));
  for (guint i = 0; i < cidrs->len; i++) {
    g_autoptr(GInetAddress) addr = NULL;
    guint prefix;
    if (vivarium_cidr_parse (g_ptr_array_index (cidrs, i), &addr, &prefix, NULL))
      add_cidr (&b, addr, prefix);
  }
  return g_variant_builder_end (&b);
}

GVariant *
vd_unit_sandbox_ip_deny_all (void)
{
  g_autoptr(GInetAddress) any4 = g_inet_address_new_any (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GInetAddress) any6 = g_inet_address_new_any (G_SOCKET_FAMILY_IPV6);
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a(iayu)"));
  add_cidr (&b, any4, 0);
  add_cidr (&b, any6, 0);
  return g_variant_builder_end (&b);
}
