/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* vivarium-egress-relay SOCKET: what QEMU's cmd: guestfwd runs for each guest
 * connection (fds 0 and 1: the connection). It connects to one of the
 * session's egress proxy sockets and copies bytes both ways until both
 * directions have ended, passing each half-close on. One fixed buffer per
 * direction, nothing allocated per byte; no policy here, the proxy has it. */

#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Per direction. */
#define RELAY_BUFFER (64 * 1024)

typedef struct {
  int     from, to;
  char    buf[RELAY_BUFFER];
  size_t  len, off;
  int     eof;      /* nothing more to read */
  int     done;     /* eof, drained, and the half-close passed on */
} Direction;

static int
connect_to (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;

  if (strlen (path) >= sizeof sun.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect (fd, (struct sockaddr *) &sun, sizeof sun) != 0) {
    int saved = errno;
    close (fd);
    errno = saved;
    return -1;
  }
  return fd;
}

/* fd 1 may be a socket (QEMU's case) or a pipe (a test's): shutdown() for
 * the one, close() for the other. */
static void
half_close (int fd)
{
  if (shutdown (fd, SHUT_WR) != 0)
    close (fd);
}

static void
step_read (Direction *d)
{
  ssize_t n = read (d->from, d->buf, sizeof d->buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    d->eof = 1;
  else
    d->len = (size_t) n;
}

static void
step_write (Direction *d)
{
  ssize_t n = send (d->to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);

  if (n < 0 && errno == ENOTSOCK)
    n = write (d->to, d->buf + d->off, d->len - d->off);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n < 0) {
    /* The reader is gone: this direction is over. */
    d->eof = 1;
    d->len = d->off = 0;
    return;
  }
  d->off += (size_t) n;
  if (d->off == d->len)
    d->len = d->off = 0;
}

static void
finish (Direction *d)
{
  if (d->eof && d->len == 0 && !d->done) {
    half_close (d->to);
    d->done = 1;
  }
}

static void
relay (Direction *up, Direction *down)
{
  while (!up->done || !down->done) {
    struct pollfd fds[4] = {
      { up->from, !up->eof && up->len == 0 ? POLLIN : 0, 0 },
      { up->to, up->len > 0 ? POLLOUT : 0, 0 },
      { down->from, !down->eof && down->len == 0 ? POLLIN : 0, 0 },
      { down->to, down->len > 0 ? POLLOUT : 0, 0 },
    };
    for (int i = 0; i < 4; i++)
      if (fds[i].events == 0)
        fds[i].fd = -1;
    if (poll (fds, 4, -1) < 0 && errno != EINTR)
      return;
    if (fds[0].revents != 0)
      step_read (up);
    if (fds[1].revents != 0)
      step_write (up);
    if (fds[2].revents != 0)
      step_read (down);
    if (fds[3].revents != 0)
      step_write (down);
    finish (up);
    finish (down);
  }
}

int
main (int argc, char **argv)
{
  static Direction up, down;
  int fd;

  if (argc != 2) {
    fprintf (stderr, "usage: vivarium-egress-relay SOCKET\n");
    return 2;
  }
  fd = connect_to (argv[1]);
  if (fd < 0) {
    fprintf (stderr, "vivarium-egress-relay: cannot connect to %s: %s\n", argv[1], strerror (errno));
    return 1;
  }
  up.from = 0;
  up.to = fd;
  down.from = fd;
  down.to = 1;
  relay (&up, &down);
  return 0;
}
