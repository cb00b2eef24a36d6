/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VivariumEgress"
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "vivarium-egress-sni.h"
#include "vivarium-egress-splice.h"

typedef struct {
  int      from, to;
  guint8   buf[VIVARIUM_SPLICE_BUFFER];
  gsize    len, off;      /* bytes in buf, of which sent */
  gboolean eof;           /* from said EOF (and to was shut once buf drained) */
  gboolean shut;
  gboolean up;            /* guest → upstream */
} Direction;

typedef struct {
  VivariumSplice *splice;
  Direction       dir[2];   /* [0] up, [1] down */
  gboolean        inspecting;
  gchar          *reason;   /* why it was cut */
} State;

static gboolean
inspect (State *st, Direction *d)
{
  VivariumInspect verdict = st->splice->inspect (d->buf, d->len, &st->reason, st->splice->inspect_data);

  if (verdict == VIVARIUM_INSPECT_CUT)
    return FALSE;
  if (verdict == VIVARIUM_INSPECT_PASS)
    st->inspecting = FALSE;
  else if (d->len >= VIVARIUM_SNI_MAX_HELLO) {
    st->reason = g_strdup ("the first bytes are larger than a TLS ClientHello may be");
    return FALSE;
  }
  return TRUE;
}

/* New bytes in d's buffer: counted, then inspected while that lasts. */
static gboolean
took (State *st, Direction *d, gsize n)
{
  guint64 up = d->up ? n : 0, down = d->up ? 0 : n;

  if (d->up && st->splice->scan != NULL && !st->splice->scan (d->buf + d->len, n, &st->reason, st->splice->scan_data))
    return FALSE;
  if (!vivarium_egress_budget_charge (st->splice->budget, up, down, &st->reason))
    return FALSE;
  st->splice->bytes_up += up;
  st->splice->bytes_down += down;
  d->len += n;
  return !(d->up && st->inspecting) || inspect (st, d);
}

/* FALSE: cut. A read error or EOF ends the direction. */
static gboolean
do_read (State *st, Direction *d)
{
  gssize n = recv (d->from, d->buf + d->len, sizeof d->buf - d->len, MSG_DONTWAIT);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return TRUE;
  if (n <= 0) {
    d->eof = TRUE;
    return TRUE;
  }
  return took (st, d, (gsize) n);
}

static void
do_write (Direction *d)
{
  gssize n = send (d->to, d->buf + d->off, d->len - d->off, MSG_DONTWAIT | MSG_NOSIGNAL);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0) {
    /* The receiver is gone: nothing more goes this way. */
    d->eof = TRUE;
    d->len = d->off = 0;
    return;
  }
  d->off += (gsize) n;
  if (d->off == d->len)
    d->len = d->off = 0;
}

/* Held bytes are not sent while inspection goes on. */
static gboolean
may_send (State *st, Direction *d)
{
  return d->len > d->off && !(d->up && st->inspecting);
}

static gboolean
may_read (State *st, Direction *d)
{
  return !d->eof && d->len < sizeof d->buf && (d->len == 0 || (d->up && st->inspecting));
}

static void
pass_on_eof (Direction *d)
{
  if (d->eof && d->len == 0 && !d->shut) {
    shutdown (d->to, SHUT_WR);
    d->shut = TRUE;
  }
}

static int
poll_timeout (State *st)
{
  gint64 left;

  if (!st->inspecting)
    return VIVARIUM_SPLICE_IDLE_SEC * 1000;
  left = (st->splice->inspect_deadline - g_get_monotonic_time ()) / 1000;
  return (int) CLAMP (left, 0, VIVARIUM_SPLICE_IDLE_SEC * 1000);
}

/* One poll round; FALSE when the splice is over (st->reason set if cut). */
static gboolean
round_trip (State *st, gboolean *idle)
{
  struct pollfd fds[2] = { { st->splice->client_fd, 0, 0 }, { st->splice->upstream_fd, 0, 0 } };
  int n;

  for (guint i = 0; i < 2; i++) {
    Direction *d = &st->dir[i];
    if (may_read (st, d))
      fds[i].events |= POLLIN;
    if (may_send (st, d))
      fds[1 - i].events |= POLLOUT;
  }
  if (fds[0].events == 0 && fds[1].events == 0)
    return FALSE;
  /* A side we wait nothing from is left out: its hang-up would wake us at once. */
  for (guint i = 0; i < 2; i++)
    if (fds[i].events == 0)
      fds[i].fd = -1;
  if (st->inspecting && g_get_monotonic_time () >= st->splice->inspect_deadline) {
    st->reason = g_strdup ("the first bytes did not come within the time allowed");
    return FALSE;
  }
  n = poll (fds, 2, poll_timeout (st));
  if (n < 0)
    return errno == EINTR;
  if (n == 0) {
    if (st->inspecting)
      st->reason = g_strdup ("the first bytes did not come within the time allowed");
    else
      *idle = TRUE;
    return FALSE;
  }
  for (guint i = 0; i < 2; i++) {
    Direction *d = &st->dir[i];
    if ((fds[1 - i].revents & (POLLOUT | POLLERR | POLLHUP)) && may_send (st, d))
      do_write (d);
    if ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) && may_read (st, d) && !do_read (st, d))
      return FALSE;
    pass_on_eof (d);
  }
  return !(st->dir[0].shut && st->dir[1].shut);
}

gboolean
vivarium_egress_splice (VivariumSplice *splice, const guint8 *initial, gsize initial_len, gchar **reason)
{
  g_autofree State *st = g_new0 (State, 1);
  gboolean idle = FALSE;

  st->splice = splice;
  st->inspecting = splice->inspect != NULL;
  st->dir[0].from = st->dir[1].to = splice->client_fd;
  st->dir[0].to = st->dir[1].from = splice->upstream_fd;
  st->dir[0].up = TRUE;
  g_assert (initial_len <= sizeof st->dir[0].buf);
  memcpy (st->dir[0].buf, initial, initial_len);
  if (initial_len > 0 && !took (st, &st->dir[0], initial_len)) {
    *reason = g_steal_pointer (&st->reason);
    return FALSE;
  }
  while (round_trip (st, &idle))
    ;
  if (st->reason != NULL) {
    *reason = g_steal_pointer (&st->reason);
    return FALSE;
  }
  if (idle)
    g_debug ("a connection was idle for %u s and is closed", VIVARIUM_SPLICE_IDLE_SEC);
  return TRUE;
}
