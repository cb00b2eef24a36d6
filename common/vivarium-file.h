/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The one durable write of the tree (the daemon's vd_fs_write_durably(),
 * the egress policy, the secret store): PATH.tmp created with exactly
 * @mode (O_NOFOLLOW), written, flushed, renamed over PATH, the directory
 * flushed; on failure PATH is untouched and PATH.tmp removed. G_IO_ERROR
 * naming the path. */
gboolean  vivarium_file_write_durably (const gchar  *path,
                                       const void   *data,
                                       gsize         len,
                                       gint          mode,
                                       GError      **error);

/* All of @data to @fd, again after EINTR and short writes; FALSE with
 * errno set (EIO when the descriptor took nothing). */
gboolean  vivarium_file_write_all     (int           fd,
                                       const void   *data,
                                       gsize         len);

/* A regular file read whole, not through a symbolic link, at most @max
 * bytes (G_IO_ERROR_INVALID_DATA past it, or for a FIFO or a directory).
 * The text is NUL-terminated; *len (when not NULL) has its length. */
gchar    *vivarium_file_read_bounded  (const gchar  *path,
                                       gsize         max,
                                       gsize        *len,
                                       GError      **error);

G_END_DECLS
