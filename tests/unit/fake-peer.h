/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A scripted protocol peer for unit tests: it replays a transcript from
 * tests/unit/transcripts/ on one end of a socketpair, in its own thread,
 * with blocking I/O, and checks what the client sends. See
 * transcripts/README for the format. */
typedef struct _FakePeer FakePeer;

FakePeer  *fake_peer_new          (const gchar *transcript, GIOStream **client_stream);
/* Listens on @socket_path only after @delay_ms, accepts one client, then plays. */
FakePeer  *fake_peer_new_listen   (const gchar *transcript, const gchar *socket_path, guint delay_ms);
void       fake_peer_resume       (FakePeer *peer);
gboolean   fake_peer_is_done      (FakePeer *peer);
/* Joins the thread (iterate the main loop until fake_peer_is_done() first);
 * asserts the transcript ran without a mismatch and, if @complete, to its end. */
void       fake_peer_finish       (FakePeer *peer, gboolean complete);

/* Iterates the default main context until *@flag is set; a 60 s watchdog
 * turns a hang into a loud failure rather than a stuck test. */
/* One pending async call: test_wait_cb() stores its result and sets done. */
typedef struct {
  gboolean      done;
  GAsyncResult *result;
} TestWait;

void       test_wait_cb           (GObject *source, GAsyncResult *result, gpointer user_data);
void       test_run_until         (const gboolean *flag);
void       test_run_until_peer    (FakePeer *peer);

G_END_DECLS
