/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include "invocation-watch.h"

typedef struct {
  guint signal_id;
  gulong hook_id;
} Hook;

static void
invocation_gone_cb (gpointer user_data, GObject *where_the_object_was)
{
  InvocationWatch *watch = user_data;

  g_assert_cmpuint (watch->alive, >, 0);
  watch->alive--;
}

/* Runs before the handlers of a handle-* signal, in the thread that
 * dispatches the call: (instance, invocation, arguments...). */
static gboolean
handle_hook (GSignalInvocationHint *hint, guint n_values, const GValue *values, gpointer user_data)
{
  InvocationWatch *watch = user_data;
  GObject *invocation;

  if (n_values < 2 || g_value_get_object (&values[0]) != watch->skeleton)
    return TRUE;
  invocation = g_value_get_object (&values[1]);
  g_assert_true (G_IS_DBUS_METHOD_INVOCATION (invocation));
  watch->received++;
  watch->alive++;
  g_object_weak_ref (invocation, invocation_gone_cb, watch);
  return TRUE;
}

void
invocation_watch_attach (InvocationWatch *watch, GDBusInterfaceSkeleton *skeleton, GType interface_type)
{
  g_autofree guint *ids = NULL;
  guint n_ids = 0;

  watch->skeleton = skeleton;
  watch->hooks = g_array_new (FALSE, FALSE, sizeof (Hook));
  ids = g_signal_list_ids (interface_type, &n_ids);
  for (guint i = 0; i < n_ids; i++) {
    GSignalQuery query;
    Hook hook;

    g_signal_query (ids[i], &query);
    if (!g_str_has_prefix (query.signal_name, "handle-"))
      continue;
    hook.signal_id = ids[i];
    hook.hook_id = g_signal_add_emission_hook (ids[i], 0, handle_hook, watch, NULL);
    g_array_append_val (watch->hooks, hook);
  }
  g_assert_cmpuint (watch->hooks->len, >, 0);
}

/* Every call seen was answered and let go of: the replies are sent from
 * idle callbacks, so the context runs a bounded while first. */
void
invocation_watch_assert_freed (InvocationWatch *watch)
{
  for (guint i = 0; i < 200 && watch->alive > 0; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_cmpuint (watch->received, >, 0);
  g_assert_cmpuint (watch->alive, ==, 0);
}

void
invocation_watch_detach (InvocationWatch *watch)
{
  for (guint i = 0; watch->hooks != NULL && i < watch->hooks->len; i++) {
    Hook *hook = &g_array_index (watch->hooks, Hook, i);
    g_signal_remove_emission_hook (hook->signal_id, hook->hook_id);
  }
  g_clear_pointer (&watch->hooks, g_array_unref);
  watch->skeleton = NULL;
}
