/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <gio/gio.h>

#include "vd-check-queue.h"

static GTask *
named_task (const gchar *name)
{
  GTask *task = g_task_new (NULL, NULL, NULL, NULL);

  g_task_set_task_data (task, g_strdup (name), g_free);
  return task;
}

static gchar *
pop_name (VdCheckQueue *q)
{
  g_autoptr(GTask) task = vd_check_queue_pop (q);

  return task != NULL ? g_strdup (g_task_get_task_data (task)) : NULL;
}

/* Callers take turns: a caller with many waiting delays another's next
 * check by one turn, and each caller's own come in the order sent. */
static void
test_turns (void)
{
  g_autoptr(VdCheckQueue) q = vd_check_queue_new ();
  const gchar *pushes[][2] = { { ":1.1", "a1" }, { ":1.1", "a2" }, { ":1.1", "a3" }, { ":1.2", "b1" },
                               { ":1.3", "c1" }, { ":1.2", "b2" } };
  const gchar *expected[] = { "a1", "b1", "c1", "a2", "b2", "a3" };

  for (guint i = 0; i < G_N_ELEMENTS (pushes); i++) {
    g_autoptr(GTask) task = named_task (pushes[i][1]);
    g_assert_true (vd_check_queue_push (q, pushes[i][0], task));
  }
  g_assert_cmpuint (vd_check_queue_get_waiting (q), ==, 6);
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++) {
    g_autofree gchar *name = pop_name (q);
    g_assert_cmpstr (name, ==, expected[i]);
  }
  g_assert_null (vd_check_queue_pop (q));
  g_assert_cmpuint (vd_check_queue_get_waiting (q), ==, 0);
}

/* One caller may have VD_CHECK_QUEUE_PER_CALLER waiting; then it is told
 * no while another caller is still taken; a turn popped makes room. */
static void
test_bounds (void)
{
  g_autoptr(VdCheckQueue) q = vd_check_queue_new ();
  g_autoptr(GTask) extra = named_task ("extra");
  g_autoptr(GTask) other = named_task ("other");
  g_autofree gchar *first = NULL;

  for (guint i = 0; i < VD_CHECK_QUEUE_PER_CALLER; i++) {
    g_autoptr(GTask) task = named_task ("flood");
    g_assert_true (vd_check_queue_push (q, ":1.9", task));
  }
  g_assert_false (vd_check_queue_push (q, ":1.9", extra));
  g_assert_true (vd_check_queue_push (q, ":1.10", other));
  first = pop_name (q);
  g_assert_cmpstr (first, ==, "flood");
  g_assert_true (vd_check_queue_push (q, ":1.9", extra));
  g_assert_cmpuint (vd_check_queue_get_waiting (q), ==, VD_CHECK_QUEUE_PER_CALLER + 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/check-queue/turns", test_turns);
  g_test_add_func ("/check-queue/bounds", test_bounds);
  return g_test_run ();
}
