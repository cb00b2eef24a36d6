/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gio/gunixfdlist.h>

#include "vivarium-error.h"
#include "vd-fd-argument.h"

/* @what is lower case; a sentence starts with a capital. */
static void
set_sentence (GError **error, gint code, const gchar *format, ...) G_GNUC_PRINTF (3, 4);

static void
set_sentence (GError **error, gint code, const gchar *format, ...)
{
  g_autofree gchar *text = NULL;
  va_list args;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  text[0] = g_ascii_toupper (text[0]);
  g_set_error_literal (error, VIVARIUM_ERROR, code, text);
}

int
vd_fd_argument_take (GDBusMethodInvocation *invocation, GVariant *handle, const gchar *method, const gchar *what,
                     GError **error)
{
  GUnixFDList *fds = g_dbus_message_get_unix_fd_list (g_dbus_method_invocation_get_message (invocation));
  gint32 index = g_variant_get_handle (handle);
  struct stat st;
  int fd;

  if (fds == NULL || index < 0 || index >= g_unix_fd_list_get_length (fds)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "%s needs %s as a descriptor passed with the call", method, what);
    return -1;
  }
  fd = g_unix_fd_list_get (fds, index, NULL);
  if (fd < 0 || fstat (fd, &st) != 0 || !(S_ISFIFO (st.st_mode) || S_ISSOCK (st.st_mode) || S_ISREG (st.st_mode)) ||
      (fcntl (fd, F_GETFL) & O_ACCMODE) == O_WRONLY) {
    if (fd >= 0)
      close (fd);
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "The descriptor of %s is not a readable pipe, socket or regular file", what);
    return -1;
  }
  return fd;
}

GBytes *
vd_fd_argument_read (int fd, gsize max, guint timeout_ms, const gchar *what, GError **error)
{
  g_autoptr(GByteArray) buf = g_byte_array_new ();
  guint8 chunk[4096];
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  for (;;) {
    GPollFD pfd = { fd, G_IO_IN | G_IO_HUP | G_IO_ERR, 0 };
    gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
    gssize n;

    if (left <= 0 || g_poll (&pfd, 1, (gint) left) == 0) {
      set_sentence (error, VIVARIUM_ERROR_INVALID_ARGUMENT,
                    "%s did not end within %u seconds (close the descriptor after writing it)", what,
                    timeout_ms / 1000);
      break;
    }
    n = read (fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n < 0) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT, "Cannot read %s: %s", what,
                   g_strerror (errno));
      break;
    }
    if (n == 0)
      return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
    if (buf->len + (gsize) n > max + 1) {
      set_sentence (error, VIVARIUM_ERROR_TOO_LARGE, "%s is at most %" G_GSIZE_FORMAT " bytes", what, max);
      break;
    }
    g_byte_array_append (buf, chunk, (guint) n);
  }
  memset (buf->data, 0, buf->len);
  memset (chunk, 0, sizeof chunk);
  return NULL;
}

void
vd_fd_argument_wipe (GBytes *bytes)
{
  gsize len = 0;
  gpointer data = (gpointer) g_bytes_get_data (bytes, &len);

  if (data != NULL)
    memset (data, 0, len);
  g_bytes_unref (bytes);
}
