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
gboolean vd_fs_set_error_errno (GError     **error,
                               int          errsv,
                               const gchar *format,
                               ...) G_GNUC_PRINTF (3, 4);
gboolean vd_fs_says_no_space  (const gchar *text);
gboolean vd_fs_fsync_dir      (const gchar *dir,
                               GError     **error);
gboolean vd_fs_write_durably  (const gchar *path,
                               const gchar *text,
                               guint        mode,
                               GError     **error);
/* A regular file someone else controls, read whole: not through a link,
 * never blocking on a FIFO, by read() into at most @max bytes (TooLarge
 * past it). */
GBytes  *vd_fs_read_untrusted (const gchar *path,
                               gsize        max,
                               GError     **error);

G_END_DECLS
