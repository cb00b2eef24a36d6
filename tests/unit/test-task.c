/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <string.h>

#include "vivarium-error.h"
#include "vd-task.h"
#include "vivarium-dbus-generated.h"
#include "invocation-watch.h"
#include "private-bus.h"

/* The Task object on a real private bus: Ask makes it NEEDS_INPUT and
 * releases waiters, Answer resumes the asker, waits are bounded, the end
 * releases everyone and refuses the worker's further calls; and every
 * call, answered at once or held (a Wait, an Ask), is let go of once
 * answered. */

typedef struct {
  PrivateBus       pb;
  VdTask          *task;
  InvocationWatch  calls;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  private_bus_up (&f->pb);
  f->task = vd_task_new ("t1", "demo", "tiny", "script");
  g_assert_true (g_dbus_interface_skeleton_export (vd_task_get_skeleton (f->task), f->pb.service,
                                                   vd_task_get_object_path (f->task), &error));
  invocation_watch_attach (&f->calls, G_DBUS_INTERFACE_SKELETON (vd_task_get_skeleton (f->task)),
                           VIVARIUM_DBUS_TYPE_TASK);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  invocation_watch_assert_freed (&f->calls);
  invocation_watch_detach (&f->calls);
  g_clear_object (&f->task);
  private_bus_down (&f->pb);
}

typedef struct {
  gboolean  done;
  GVariant *reply;
  GError   *error;
} Call;

static void
call_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Call *call = user_data;

  call->reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &call->error);
  call->done = TRUE;
}

static void
start_call_on (Fixture *f, GDBusConnection *client, const gchar *method, GVariant *args, Call *call)
{
  g_dbus_connection_call (client, g_dbus_connection_get_unique_name (f->pb.service), vd_task_get_object_path (f->task),
                          "org.vivarium.Vivarium1.Task", method, args, NULL, G_DBUS_CALL_FLAGS_NONE, 10000, NULL,
                          call_done_cb, call);
}

static void
start_call (Fixture *f, const gchar *method, GVariant *args, Call *call)
{
  start_call_on (f, f->pb.client, method, args, call);
}

static void
finish_call (Call *call)
{
  while (!call->done)
    g_main_context_iteration (NULL, TRUE);
}

/* Returns when the service has handled every call this client sent
 * before: the bus keeps one sender's messages in order, and the service
 * handles them in order, so a reply to GetAll comes after them. Calls
 * from different clients have no order between them without this. */
static void
sync_with_service (Fixture *f, GDBusConnection *client)
{
  Call call = { 0 };

  g_dbus_connection_call (client, g_dbus_connection_get_unique_name (f->pb.service), vd_task_get_object_path (f->task),
                          "org.freedesktop.DBus.Properties", "GetAll",
                          g_variant_new ("(s)", "org.vivarium.Vivarium1.Task"), NULL, G_DBUS_CALL_FLAGS_NONE, 10000,
                          NULL, call_done_cb, &call);
  finish_call (&call);
  g_assert_no_error (call.error);
  g_variant_unref (call.reply);
}

static gchar *
outcome_of (Call *call)
{
  gchar *s = NULL;

  g_assert_no_error (call->error);
  g_variant_get (call->reply, "(s)", &s);
  g_clear_pointer (&call->reply, g_variant_unref);
  return s;
}

static void
spin (void)
{
  for (guint i = 0; i < 50; i++)
    g_main_context_iteration (NULL, FALSE);
}

static void
test_ask_answer (Fixture *f, gconstpointer data)
{
  Call wait = { 0 }, ask = { 0 }, answer = { 0 }, bad = { 0 };
  g_autofree gchar *outcome = NULL;
  g_autofree gchar *reply = NULL;

  start_call (f, "Wait", g_variant_new ("(u)", 60), &wait);
  spin ();
  g_assert_false (wait.done);
  start_call (f, "Answer", g_variant_new ("(s)", "too early"), &bad);
  finish_call (&bad);
  g_assert_error (bad.error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  start_call (f, "Ask", g_variant_new ("(s)", "Which colour?\x1b[2J"), &ask);
  finish_call (&wait);
  outcome = outcome_of (&wait);
  g_assert_cmpstr (outcome, ==, "NEEDS_INPUT");
  g_assert_cmpint (vd_task_get_outcome (f->task), ==, VIVARIUM_OUTCOME_NEEDS_INPUT);
  g_assert_false (ask.done);
  start_call (f, "Answer", g_variant_new ("(s)", "blue"), &answer);
  finish_call (&answer);
  g_assert_no_error (answer.error);
  finish_call (&ask);
  g_assert_no_error (ask.error);
  g_variant_get (ask.reply, "(s)", &reply);
  g_assert_cmpstr (reply, ==, "blue");
  g_variant_unref (ask.reply);
  g_variant_unref (answer.reply);
  g_assert_cmpint (vd_task_get_outcome (f->task), ==, VIVARIUM_OUTCOME_IN_PROGRESS);
}

/* A question the task's end takes back is answered with an error, and
 * let go of like any other (the tear-down counts). */
static void
test_ask_then_end (Fixture *f, gconstpointer data)
{
  Call ask = { 0 };

  start_call (f, "Ask", g_variant_new ("(s)", "Still there?"), &ask);
  while (vd_task_get_outcome (f->task) != VIVARIUM_OUTCOME_NEEDS_INPUT)
    g_main_context_iteration (NULL, TRUE);
  vd_task_finish (f->task, VIVARIUM_OUTCOME_FAILED, "ended");
  finish_call (&ask);
  g_assert_error (ask.error, VIVARIUM_ERROR, VIVARIUM_ERROR_CANCELLED);
  g_clear_error (&ask.error);
}

#define N_CALLERS (VD_TASK_WAITS_MAX / VD_TASK_WAITS_PER_CALLER)

/* The task's wait slots are bounded, and so is each caller's share: one
 * caller past its share is refused while another still gets a slot. */
static void
test_waits_bounded_and_released (Fixture *f, gconstpointer data)
{
  Call waits[VD_TASK_WAITS_MAX + 1] = { 0 };
  Call greedy = { 0 };
  Call ask = { 0 };
  GDBusConnection *clients[N_CALLERS + 1];

  for (guint c = 0; c <= N_CALLERS; c++)
    clients[c] = private_bus_connect (&f->pb);
  for (guint i = 0; i < VD_TASK_WAITS_PER_CALLER; i++)
    start_call_on (f, clients[0], "Wait", g_variant_new ("(u)", 60), &waits[i]);
  start_call_on (f, clients[0], "Wait", g_variant_new ("(u)", 60), &greedy);
  finish_call (&greedy);
  g_assert_error (greedy.error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY);
  g_assert_nonnull (strstr (greedy.error->message, "already waiting for this task"));
  g_clear_error (&greedy.error);
  for (guint i = VD_TASK_WAITS_PER_CALLER; i <= VD_TASK_WAITS_MAX; i++) {
    GDBusConnection *client = clients[i / VD_TASK_WAITS_PER_CALLER];
    /* The last call must reach the service after all the others. */
    if (i == VD_TASK_WAITS_MAX)
      for (guint c = 1; c < N_CALLERS; c++)
        sync_with_service (f, clients[c]);
    start_call_on (f, client, "Wait", g_variant_new ("(u)", 60), &waits[i]);
  }
  finish_call (&waits[VD_TASK_WAITS_MAX]);
  g_assert_error (waits[VD_TASK_WAITS_MAX].error, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY);
  g_clear_error (&waits[VD_TASK_WAITS_MAX].error);
  vd_task_finish (f->task, VIVARIUM_OUTCOME_DONE, NULL);
  for (guint i = 0; i < VD_TASK_WAITS_MAX; i++) {
    g_autofree gchar *outcome = NULL;
    finish_call (&waits[i]);
    outcome = outcome_of (&waits[i]);
    g_assert_cmpstr (outcome, ==, "DONE");
  }
  start_call (f, "Ask", g_variant_new ("(s)", "late?"), &ask);
  finish_call (&ask);
  g_assert_error (ask.error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&ask.error);
  for (guint c = 0; c <= N_CALLERS; c++)
    g_object_unref (clients[c]);
}

static void
test_short_wait (Fixture *f, gconstpointer data)
{
  Call wait = { 0 };
  g_autofree gchar *outcome = NULL;
  gint64 t0 = g_get_monotonic_time ();

  start_call (f, "Wait", g_variant_new ("(u)", 1), &wait);
  finish_call (&wait);
  outcome = outcome_of (&wait);
  g_assert_cmpstr (outcome, ==, "IN_PROGRESS");
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, G_USEC_PER_SEC / 2);
}

static gchar *
step_of (Fixture *f)
{
  gchar *step = NULL;

  g_object_get (vd_task_get_skeleton (f->task), "step", &step, NULL);
  return step;
}

static void
count_cb (VdTask *task, gpointer user_data)
{
  (*(guint *) user_data)++;
}

/* Task.Step speaks the XML's names, from the typed step; a Cancel that
 * comes while the daemon commits (the worker closed) still reaches the
 * runner, one after the commit is refused. */
static void
test_steps (Fixture *f, gconstpointer data)
{
  const gchar *names[] = { "queued", "work", "commit", "verify", "report", "done" };
  Call during = { 0 }, after = { 0 };
  guint cancels = 0;

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    g_assert_cmpstr (vd_task_step_to_string (i), ==, names[i]);
  g_assert_cmpint (vd_task_get_step (f->task), ==, VD_TASK_STEP_WORK);
  {
    g_autofree gchar *step = step_of (f);
    g_assert_cmpstr (step, ==, "work");
  }
  g_signal_connect (f->task, "cancel-requested", G_CALLBACK (count_cb), &cancels);
  vd_task_close_worker (f->task);
  vd_task_set_step (f->task, VD_TASK_STEP_COMMIT);
  {
    g_autofree gchar *step = step_of (f);
    g_assert_cmpstr (step, ==, "commit");
  }
  start_call (f, "Cancel", NULL, &during);
  finish_call (&during);
  g_assert_no_error (during.error);
  g_variant_unref (during.reply);
  g_assert_cmpuint (cancels, ==, 1);
  vd_task_set_step (f->task, VD_TASK_STEP_REPORT);
  start_call (f, "Cancel", NULL, &after);
  finish_call (&after);
  g_assert_error (after.error, VIVARIUM_ERROR, VIVARIUM_ERROR_BAD_STATE);
  g_clear_error (&after.error);
  g_assert_cmpuint (cancels, ==, 1);
  vd_task_finish (f->task, VIVARIUM_OUTCOME_DONE, NULL);
  {
    g_autofree gchar *step = step_of (f);
    g_assert_cmpstr (step, ==, "done");
  }
  g_assert_cmpint (vd_task_get_step (f->task), ==, VD_TASK_STEP_DONE);
}

/* A finished task's record reads back as the same finished task; a
 * record that is not one is refused, not half-loaded. */
static void
test_record_round_trip (void)
{
  g_autoptr(VdTask) task = vd_task_new ("abcd1234", "demo", "tiny", "script");
  g_autoptr(VdTask) back = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(GError) error = NULL;
  GVariantBuilder b;
  GVariant *timings;
  guint64 commit = 0;
  JsonObject *o;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{st}"));
  g_variant_builder_add (&b, "{st}", "commit", (guint64) 1234);
  vd_task_set_timings (task, g_variant_builder_end (&b));
  vd_task_set_report (task, "/org/vivarium/Vivarium1/reports/abcd1234");
  vd_task_finish (task, VIVARIUM_OUTCOME_FAILED, "the worker exited with status 3 without calling Finish");
  node = vd_task_to_record (task);
  o = json_node_get_object (node);
  back = vd_task_new_from_record ("abcd1234", o, &error);
  g_assert_no_error (error);
  g_assert_true (vd_task_is_finished (back));
  g_assert_cmpint (vd_task_get_outcome (back), ==, VIVARIUM_OUTCOME_FAILED);
  g_assert_cmpstr (vd_task_get_object_path (back), ==, vd_task_get_object_path (task));
  g_assert_cmpint (vd_task_get_submitted_at (back), ==, vd_task_get_submitted_at (task));
  g_object_get (vd_task_get_skeleton (back), "timings", &timings, NULL);
  g_assert_true (g_variant_lookup (timings, "commit", "t", &commit));
  g_assert_cmpuint (commit, ==, 1234);
  g_variant_unref (timings);
  {
    g_autofree gchar *reason = NULL, *report = NULL;
    g_object_get (vd_task_get_skeleton (back), "reason", &reason, "report", &report, NULL);
    g_assert_cmpstr (reason, ==, "the worker exited with status 3 without calling Finish");
    g_assert_cmpstr (report, ==, "/org/vivarium/Vivarium1/reports/abcd1234");
  }

  /* Another file's name, a report that is no object path, a bad outcome. */
  g_assert_null (vd_task_new_from_record ("ffff0000", o, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  json_object_set_string_member (o, "report", "not a path");
  g_assert_null (vd_task_new_from_record ("abcd1234", o, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  json_object_set_string_member (o, "report", "/");
  json_object_set_string_member (o, "outcome", "WON");
  g_assert_null (vd_task_new_from_record ("abcd1234", o, &error));
  g_assert_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/task/ask-answer", Fixture, NULL, fixture_set_up, test_ask_answer, fixture_tear_down);
  g_test_add ("/task/ask-then-end", Fixture, NULL, fixture_set_up, test_ask_then_end, fixture_tear_down);
  g_test_add ("/task/waits-bounded-and-released", Fixture, NULL, fixture_set_up, test_waits_bounded_and_released,
              fixture_tear_down);
  g_test_add ("/task/short-wait", Fixture, NULL, fixture_set_up, test_short_wait, fixture_tear_down);
  g_test_add ("/task/steps", Fixture, NULL, fixture_set_up, test_steps, fixture_tear_down);
  g_test_add_func ("/task/record-round-trip", test_record_round_trip);
  return g_test_run ();
}
