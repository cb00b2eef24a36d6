/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdQemuCommand"

#include "config.h"

#include "vd-qemu-command.h"

const gchar *
vd_qemu_command_binary (void)
{
  const gchar *override = g_getenv ("VIVARIUM_QEMU");
  return override != NULL && override[0] == '/' ? override : "/usr/bin/qemu-system-x86_64";
}

gchar *
vd_qemu_command_qmp_socket (const gchar *runtime_dir)
{
  return g_build_filename (runtime_dir, "qmp.sock", NULL);
}

gchar *
vd_qemu_command_agent_socket (const gchar *runtime_dir)
{
  return g_build_filename (runtime_dir, "qga.sock", NULL);
}

static void
add (GStrvBuilder *b, const gchar *option, const gchar *value)
{
  g_strv_builder_add (b, option);
  if (value != NULL)
    g_strv_builder_add (b, value);
}

static void
take (GStrvBuilder *b, const gchar *option, gchar *value)
{
  add (b, option, value);
  g_free (value);
}

/* The guest's network device and what is behind it. A boot snapshot is
 * saved from a QEMU whose own user-mode stack carries a "slirp" section in
 * the state, which a QEMU without one refuses ("Unknown savevm section"):
 * beside the proxy's stream, a user-mode stack that reaches nothing and
 * has no device takes that section in, so every saved state restores
 * (docs/egress.md, FIELD-NOTES). */
static void
add_network (GStrvBuilder *b, const VdQemuCommand *cmd)
{
  if (cmd->net_socket != NULL) {
    take (b, "-netdev", g_strdup_printf ("stream,id=net0,server=off,addr.type=unix,addr.path=%s", cmd->net_socket));
    add (b, "-netdev", "user,id=vmstate0,restrict=on");
  } else {
    add (b, "-netdev", cmd->net_restricted ? "user,id=net0,restrict=on" : "user,id=net0");
  }
  add (b, "-device", "virtio-net-pci,netdev=net0");
}

/* No defaults, no user config, no host devices but the ones named here,
 * and a seccomp sandbox that forbids the calls a compromised QEMU would
 * reach for first. QEMU never gets a path it could be talked into
 * reinterpreting: formats are explicit everywhere. */
GStrv
vd_qemu_command_build (const VdQemuCommand *cmd)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_autofree gchar *qmp = vd_qemu_command_qmp_socket (cmd->runtime_dir);
  g_autofree gchar *qga = vd_qemu_command_agent_socket (cmd->runtime_dir);

  g_strv_builder_add (b, vd_qemu_command_binary ());
  take (b, "-name", g_strdup_printf ("vivarium-%s,debug-threads=on", cmd->session_id));
  add (b, "-nodefaults", NULL);
  add (b, "-no-user-config", NULL);
  add (b, "-machine", "q35");
  /* KVM first when asked for, TCG as the fallback if KVM cannot start
   * (no permission, no module); "max" is valid under both. */
  if (cmd->kvm)
    add (b, "-accel", "kvm");
  add (b, "-accel", "tcg");
  add (b, "-cpu", "max");
  take (b, "-m", g_strdup_printf ("%u", cmd->memory_mib));
  take (b, "-smp", g_strdup_printf ("%u", cmd->cpus));
  add (b, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
  add (b, "-display", "none");
  add (b, "-device", "VGA");
  if (cmd->kernel != NULL) {
    add (b, "-kernel", cmd->kernel);
    if (cmd->initrd != NULL)
      add (b, "-initrd", cmd->initrd);
    add (b, "-append", cmd->cmdline != NULL ? cmd->cmdline : "");
  }
  /* werror/rerror=stop: on any write or read error (a full sessions disk
   * first of all) QEMU pauses the guest and tells us (BLOCK_IO_ERROR, STOP)
   * instead of handing the error to the guest. A guest that sees EIO on its
   * root disk remounts read-only or loses writes it thought were done, and
   * nobody would learn why; paused, nothing is lost, the daemon reports the
   * reason (State "paused", StateReason), and the caller frees space and
   * resumes, or stops. QEMU's default (werror=enospc, rerror=report) would
   * pause on ENOSPC only and pass read errors through silently. */
  take (b, "-drive", g_strdup_printf ("file=%s,if=none,id=disk0,format=qcow2,discard=unmap,werror=stop,rerror=stop",
                                      cmd->overlay));
  add (b, "-device", "virtio-blk-pci,drive=disk0");
  add (b, "-device", "virtio-serial-pci,id=vser0");
  take (b, "-chardev", g_strdup_printf ("socket,id=qga0,path=%s,server=on,wait=off", qga));
  add (b, "-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0");
  add_network (b, cmd);
  if (cmd->project_dir != NULL)
    take (b, "-virtfs", g_strdup_printf ("local,path=%s,mount_tag=project,security_model=none,id=project0%s",
                                         cmd->project_dir, cmd->project_readonly ? ",readonly=on" : ""));
  /* A fresh generation id per session: Linux reseeds its random pool when
   * it changes, which is what makes two guests restored from one saved
   * state differ. */
  if (cmd->vmgenid != NULL)
    take (b, "-device", g_strdup_printf ("vmgenid,guid=%s", cmd->vmgenid));
  take (b, "-qmp", g_strdup_printf ("unix:%s,server=on,wait=off", qmp));
  /* The state comes later over QMP (migrate-incoming with a descriptor the
   * daemon passes): QEMU never opens the saved state by name, and never
   * needs to spawn anything for it. */
  if (cmd->incoming)
    add (b, "-incoming", "defer");
  return g_strv_builder_end (b);
}
