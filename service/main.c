/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vivariumd"

#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <glib/gi18n.h>
#include <systemd/sd-daemon.h>

#include "vivarium-error.h"
#include "vd-config.h"
#include "vd-daemon.h"
#include "vd-dataset.h"
#include "vd-memory.h"

int
main (int argc, char **argv)
{
  gboolean verbose = FALSE;
  gboolean replace = FALSE;
  gboolean version = FALSE;
  g_autoptr(GOptionContext) context = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(VdConfig) config = NULL;
  g_autoptr(VdDaemon) daemon = NULL;
  const GOptionEntry entries[] = {
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Log debug messages", NULL },
    { "replace", 'r', 0, G_OPTION_ARG_NONE, &replace, "Replace a running instance", NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL },
    { NULL }
  };

  /* Before any thread, any arena and any big buffer exists. */
  vd_memory_hold_thresholds ();
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  context = g_option_context_new ("- the Vivarium system service");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    g_printerr ("vivariumd: %s\n", error->message);
    return 2;
  }
  if (version) {
    g_print ("%s\n", PACKAGE_VERSION);
    return 0;
  }
  if (verbose)
    g_log_set_debug_enabled (TRUE);
  /* libgit2 1.5 reads $HOME/.ssh/known_hosts before its host-key callback
   * (the project's pin, vd-repo.c) runs, and fails every ssh:// push or
   * clone outright ("error loading known_hosts") when HOME is unset, as it
   * is for a system service. Root's own home (unreadable under
   * ProtectHome=, which libgit2 takes as "no known hosts"), set before any
   * thread exists. */
  if (g_getenv ("HOME") == NULL)
    g_setenv ("HOME", g_get_home_dir (), FALSE);
  /* Register the error domain before anything can fail over the bus. */
  (void) VIVARIUM_ERROR;

  /* Where the machine runs systemd, the sessions are its units, in its
   * mount namespace, and ours is private (PrivateMounts=): a project's
   * dataset is mounted in theirs, by systemd (vd-dataset.c). */
  vd_dataset_mount_through_systemd (sd_booted () > 0);

  config = vd_config_new ();
  if (!vd_config_load (config, &error)) {
    g_printerr ("vivariumd: %s\n", error->message);
    return 1;
  }
  daemon = vd_daemon_new (config, replace);
  return vd_daemon_run (daemon);
}
