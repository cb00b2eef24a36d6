/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* VdSession's instance, for the files that are parts of it (vd-session.c
 * and vd-session-save.c, which saves its disk and memory as an image):
 * one object split in two files by concern, not a second object. Nothing
 * else includes this, and it comes after vd-session.h (which it does not
 * include: the two are one object's, not a layer above it). */

#include "vd-command-log.h"
#include "vd-egress.h"
#include "vd-session-helper.h"

/* How long a QMP command may take before the session calls it lost. */
#define QMP_TIMEOUT_MS        10000

struct _VdSession {
  GObject               parent_instance;
  VdConfig             *config;
  VdSystemd            *systemd;
  VdImage              *image;
  VivariumDBusSession  *skeleton;
  VdSessionOptions      options;
  GPtrArray            *deny_list;
  gchar                *id;
  gchar                *object_path;
  gchar                *unit;
  gchar                *state_dir;
  gchar                *runtime_dir;
  gchar                *overlay;
  gchar                *project_dir;
  gchar                *resolv_conf;   /* the DNS relay's, or NULL */
  gchar                *share_dir;     /* the empty share a snapshot's device set needs, or NULL */
  gchar                *vmgenid;       /* this guest's generation id */
  gboolean              restored;      /* started from the image's boot snapshot */
  gboolean              kvm;
  gboolean              pause_requested; /* the STOP that follows is the caller's Pause() */
  guint32               uid;
  VdSessionHelper      *helper;        /* QMP and the guest agent, parsed unprivileged */
  VdCommandLog         *log;
  VivariumSessionState  state;         /* the skeleton's State mirrors it */
  gchar                *io_error;      /* QEMU's last BLOCK_IO_ERROR, until RESUME */
  GCancellable         *reapers;       /* timed-out commands still watched */
  GHashTable           *timings;       /* step → µs */
  gint64                step_started;
  gboolean              stop_requested;
  gboolean              torn_down;
  guint                 screenshot_seq;
  guint                 save_seq;      /* names each save's qemu-img unit */
  guint                 unit_watch;    /* what systemd says of the unit's end */
  gboolean              died;          /* QEMU or the helper went away without being asked to */
  gchar                *helper_death;  /* the helper's end, when it was the helper */
  gchar                *end_detail;    /* how, in systemd's words ("signal, SIGKILL"), or NULL */
  GStrv                 egress_groups; /* the options' copies */
  GStrv                 egress_allow;
  GPtrArray            *secrets;       /* VivariumSecret* with placeholders, or NULL */
  GPtrArray            *ssh_keys;      /* VivariumSshKey*, or NULL: the proxy's agent has them */
  guint32               egress_uid;
  VdEgress             *egress;        /* allowlist mode, once started */
};
