/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "vivarium-egress-io.h"

gssize
vivarium_egress_io_read (GSocket *socket, guint8 *buf, gsize max, gint64 deadline, gboolean *timed_out)
{
  g_autoptr(GError) error = NULL;
  gint64 left = deadline - g_get_monotonic_time ();
  gssize n;

  *timed_out = FALSE;
  if (left <= 0 || !g_socket_condition_timed_wait (socket, G_IO_IN, left, NULL, &error)) {
    *timed_out = TRUE;
    return -1;
  }
  n = g_socket_receive_with_blocking (socket, (gchar *) buf, max, FALSE, NULL, &error);
  if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
    return vivarium_egress_io_read (socket, buf, max, deadline, timed_out);
  return n;
}

gboolean
vivarium_egress_io_read_exact (GSocket *socket, guint8 *buf, gsize len, gint64 deadline)
{
  gsize got = 0;
  gboolean timed_out;

  while (got < len) {
    gssize n = vivarium_egress_io_read (socket, buf + got, len - got, deadline, &timed_out);
    if (n <= 0)
      return FALSE;
    got += (gsize) n;
  }
  return TRUE;
}

gboolean
vivarium_egress_io_send_all (GSocket *socket, const guint8 *data, gsize len)
{
  gsize sent = 0;

  while (sent < len) {
    gssize n = g_socket_send_with_blocking (socket, (const gchar *) data + sent, len - sent, TRUE, NULL, NULL);
    if (n <= 0)
      return FALSE;
    sent += (gsize) n;
  }
  return TRUE;
}
