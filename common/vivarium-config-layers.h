/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The configuration layers, read the same way by every program that reads
 * them (vivariumd, vivarium-gateway, vivarium-agent):
 *   DATA_DIR/defaults.conf          the package's, installed, never edited
 *   < CONFIG_DIR/vivarium.conf      the administrator's
 *   < CONFIG_DIR/conf.d/ *.conf     drop-ins, in name order
 * Later layers win key by key, so a drop-in holds only what it changes,
 * except in the groups vivarium_config_group_is_whole() names (the egress
 * rule groups, "[EgressGroup NAME]"): a later layer's definition replaces
 * the earlier one whole. A
 * missing file is no error; one that cannot be read or parsed is, naming it.
 * Hidden drop-ins (".name.conf", an editor's or a package manager's) are
 * skipped. */

/* DATA_DIR and CONFIG_DIR as installed, or VIVARIUM_DATA_DIR /
 * VIVARIUM_CONFIG_DIR when set to an absolute path (the test hosts). */
const gchar *vivarium_config_data_dir   (void);
const gchar *vivarium_config_config_dir (void);

/* The layers' paths, in order: what exists now of conf.d/ included. */
GStrv     vivarium_config_layer_paths (const gchar *data_dir,
                                       const gchar *config_dir);
/* "DATA/defaults.conf, CONFIG/vivarium.conf or CONFIG/conf.d/ *.conf": where
 * a person looks for (or puts) a key, for messages. */
gchar    *vivarium_config_layers_describe (const gchar *data_dir,
                                           const gchar *config_dir);
#define VIVARIUM_CONFIG_EGRESS_GROUP_PREFIX "EgressGroup "

/* TRUE for a group that a later layer replaces whole instead of key by key. */
gboolean  vivarium_config_group_is_whole (const gchar *group);

/* Merges @paths in order (missing ones skipped). */
GKeyFile *vivarium_config_load_files  (const gchar *const *paths,
                                       GError            **error);
/* The layers above, merged. */
GKeyFile *vivarium_config_load_layers (const gchar *data_dir,
                                       const gchar *config_dir,
                                       GError     **error);

G_END_DECLS
