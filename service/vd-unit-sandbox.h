/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The sandbox every transient unit of untrusted code gets — a task's worker
 * and a session's QEMU — as StartTransientUnit properties: one definition,
 * so the two cannot drift apart, with what each needs said by the caller.
 * Read back by tests/system/test-task-isolation.sh (systemd-analyze
 * security, and what a worker can see). */
typedef struct {
  /* socket(2) families allowed: AF_UNIX for a worker, + AF_INET(6) for QEMU's slirp */
  const gchar * const *address_families;
  /* the system-call allow-list (groups or names), and what is taken out of it */
  const gchar * const *syscalls;
  const gchar * const *denied_syscalls;
  /* QEMU's TCG writes code it then runs: no MemoryDenyWriteExecute= */
  gboolean             writes_code;
  /* Replaced, in the unit, by an empty read-only tmpfs, with only @binds
   * (read-write) and @ro_binds (read-only) of it showing through: the
   * other tasks' and sessions' runtime directories do not exist there. */
  const gchar         *runtime_dir;
  const gchar * const *binds;
  const gchar * const *ro_binds;
  /* more paths the unit must not see, each optional ("-" prefixed) */
  const gchar * const *inaccessible;
  /* capabilities (1 << CAP_*) it is given, bounding and ambient: none for
   * untrusted code; only what a host-side helper needs to set up */
  guint64              capabilities;
  /* namespaces (CLONE_NEW*) it may create: none but for such a helper */
  guint64              namespaces;
} VdUnitSandbox;

void vd_unit_sandbox_add (GVariantBuilder     *properties,
                          const VdUnitSandbox *sandbox);

/* What a session's units share (QEMU's and its helper's): Type=exec in
 * vivarium.slice, bound to and after vivariumd, collected when inactive or
 * failed, as @uid in group vivarium-qemu, running @argv. */
void vd_unit_sandbox_add_session_service (GVariantBuilder     *properties,
                                          const gchar         *description,
                                          guint32              uid,
                                          const gchar * const *argv);

/* IPAddressDeny= (a(iayu)) of these CIDRs; unparsable items are skipped
 * (the guard made the list). */
GVariant *vd_unit_sandbox_ip_deny     (GPtrArray *cidrs);
/* IPAddressDeny=any: no IP traffic at all. */
GVariant *vd_unit_sandbox_ip_deny_all (void);

G_END_DECLS
