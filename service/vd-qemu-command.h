/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Everything that decides QEMU's command line, so that the line itself is
 * a pure function a unit test can read. */
typedef struct {
  const gchar *session_id;
  const gchar *overlay;        /* qcow2 overlay over the frozen disk */
  const gchar *kernel;         /* NULL: boot the disk's own firmware path */
  const gchar *initrd;
  const gchar *cmdline;
  const gchar *runtime_dir;    /* holds qmp.sock and qga.sock */
  const gchar *project_dir;    /* NULL: no share */
  gboolean     project_readonly;  /* the guest may read the share, not write it */
  guint        memory_mib;
  guint        cpus;
  gboolean     kvm;
  const gchar *vmgenid;        /* the guest's generation id (a UUID), or NULL */
  gboolean     incoming;       /* wait for a saved state (-incoming defer) */
  /* the guest's network: QEMU's own user-mode stack (NULL), or the egress
   * proxy's, a `-netdev stream` to this unix socket (egress "allowlist") */
  const gchar *net_socket;
  /* QEMU's own stack reaches nothing (restrict=on; egress "none") */
  gboolean     net_restricted;
} VdQemuCommand;

/* Names the device list vd_qemu_command_build() produces when a share and
 * a vmgenid are present. A boot snapshot records it: a saved state restores
 * only into the same devices, so a change to the list must change this. */
#define VD_QEMU_COMMAND_DEVICE_SET "q35+vga+virtio-blk+virtio-serial+qga+virtio-net+9p:project+vmgenid/1"

GStrv  vd_qemu_command_build        (const VdQemuCommand *cmd);
gchar *vd_qemu_command_qmp_socket   (const gchar *runtime_dir);
gchar *vd_qemu_command_agent_socket (const gchar *runtime_dir);
const gchar *vd_qemu_command_binary (void);

G_END_DECLS
