/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A VivariumClient for another host that ssh cannot reach: the real ssh,
 * to a user that does not exist on 127.0.0.1 (refused at once whether an
 * sshd listens there or not; nothing leaves the loopback). The client says
 * ssh's own last line, tries again after 1 s, then 2 s, and Try Again
 * starts the count afresh. Every wait is a bounded loop on a condition. */
#include "config.h"

#include <gio/gio.h>
#include <string.h>

#include "vivarium-client.h"

#define DESTINATION "vivarium-no-such-user@127.0.0.1"
#define WAIT_S      60

static guint changes;

static void
changed_cb (VivariumClient *client, gpointer user_data)
{
  changes++;
}

/* Until the client is UNREACHABLE after @after state changes, or 60 s. */
static void
wait_unreachable (VivariumClient *client, guint after)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

  while ((changes <= after || vivarium_client_get_state (client) != VIVARIUM_CLIENT_UNREACHABLE) &&
         g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpint (vivarium_client_get_state (client), ==, VIVARIUM_CLIENT_UNREACHABLE);
}

static void
test_unreachable (void)
{
  g_autoptr(VivariumClient) client = vivarium_client_new_remote (DESTINATION);
  const char *reason;
  guint seen;

  g_signal_connect (client, "state-changed", G_CALLBACK (changed_cb), NULL);
  g_assert_false (vivarium_client_is_started (client));
  vivarium_client_ensure_started (client);
  g_assert_true (vivarium_client_is_started (client));
  g_assert_cmpint (vivarium_client_get_state (client), ==, VIVARIUM_CLIENT_CONNECTING);

  wait_unreachable (client, 0);
  reason = vivarium_client_get_state_reason (client);
  g_test_message ("reason: %s", reason);
  /* ssh's own line after ours, not "status 255" alone. */
  g_assert_true (g_str_has_prefix (reason, "Cannot reach " DESTINATION " over SSH: "));
  g_assert_null (strstr (reason, "ended with status"));
  g_assert_cmpuint (vivarium_client_get_retry_delay (client), ==, 1);
  g_assert_null (vivarium_client_get_manager (client));

  seen = changes;
  wait_unreachable (client, seen + 1);   /* CONNECTING, then UNREACHABLE again */
  g_assert_cmpuint (vivarium_client_get_retry_delay (client), ==, 2);

  vivarium_client_retry (client);
  g_assert_cmpint (vivarium_client_get_state (client), ==, VIVARIUM_CLIENT_CONNECTING);
  g_assert_cmpuint (vivarium_client_get_retry_delay (client), ==, 0);
  seen = changes;
  wait_unreachable (client, seen);
  g_assert_cmpuint (vivarium_client_get_retry_delay (client), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* The ssh on PATH, not another one named by the environment. */
  g_unsetenv ("VIVARIUM_SSH");
  g_test_add_func ("/app/remote-client/unreachable", test_unreachable);
  return g_test_run ();
}
