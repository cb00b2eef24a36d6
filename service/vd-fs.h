/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

gboolean vd_fs_rm_rf          (const gchar *path,
                               GError     **error);
gboolean vd_fs_mkdir          (const gchar *path,
                               guint        mode,
                               uid_t        uid,
                               gid_t        gid,
                               GError     **error);
GStrv    vd_fs_list_dir       (const gchar *path);

G_END_DECLS
