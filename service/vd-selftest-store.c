/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "VdSelfTestStore"

#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "vivarium-dbus-generated.h"
#include "vivarium-error.h"
#include "vivarium-names.h"
#include "vivarium-state.h"
#include "vd-fs.h"
#include "vd-selftest.h"
#include "vd-selftest-store.h"

/* Stored self-test results kept under the state dir's selftest/. */
#define SELF_TEST_HISTORY 50

struct _VdSelfTestStore {
  GObject        parent_instance;
  VdConfig      *config;
  VdSystemd     *systemd;
  VdSessionPool *pool;
  VdGuard       *guard;
  VdImageStore  *images;
  VdJobStore    *jobs;
  gchar         *dir;         /* STATE/selftest */
  VdSelfTest    *running;     /* the run in progress, if any */
};

G_DEFINE_TYPE (VdSelfTestStore, vd_self_test_store, G_TYPE_OBJECT)

static void
vd_self_test_store_dispose (GObject *object)
{
  VdSelfTestStore *self = VD_SELF_TEST_STORE (object);

  if (self->guard != NULL)
    g_signal_handlers_disconnect_by_data (vd_guard_get_skeleton (self->guard), self);
  G_OBJECT_CLASS (vd_self_test_store_parent_class)->dispose (object);
}

static void
vd_self_test_store_finalize (GObject *object)
{
  VdSelfTestStore *self = VD_SELF_TEST_STORE (object);

  g_clear_object (&self->running);
  g_clear_object (&self->config);
  g_clear_object (&self->systemd);
  g_clear_object (&self->pool);
  g_clear_object (&self->guard);
  g_clear_object (&self->images);
  g_clear_object (&self->jobs);
  g_free (self->dir);
  G_OBJECT_CLASS (vd_self_test_store_parent_class)->finalize (object);
}

static void
vd_self_test_store_class_init (VdSelfTestStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = vd_self_test_store_dispose;
  G_OBJECT_CLASS (klass)->finalize = vd_self_test_store_finalize;
}

static void
vd_self_test_store_init (VdSelfTestStore *self)
{
}

/* --- the stored results ---------------------------------------------- */

/* Oldest first by name: the names are UTC timestamps. */
static void
prune_history (const gchar *dir)
{
  g_auto(GStrv) names = vd_fs_list_dir (dir);
  g_autoptr(GPtrArray) results = g_ptr_array_new ();
  guint n;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.')
      g_ptr_array_add (results, names[i]);
  }
  g_ptr_array_sort (results, (GCompareFunc) g_strcmp0);
  n = results->len;
  for (guint i = 0; n > SELF_TEST_HISTORY && i < n - SELF_TEST_HISTORY; i++) {
    g_autofree gchar *path = g_build_filename (dir, *(gchar **) g_ptr_array_index (results, i), NULL);
    if (g_unlink (path) != 0)
      g_warning ("cannot remove old self-test result %s: %s", path, g_strerror (errno));
  }
}

/* g_file_set_contents() writes a temporary file and renames it over the
 * target: a reader never sees half a result. */
static gboolean
store_result (VdSelfTestStore *self, const gchar *json, gint64 finished_at, GError **error)
{
  g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc (finished_at / G_USEC_PER_SEC);
  g_autofree gchar *stamp = g_date_time_format (dt, "%Y%m%dT%H%M%S");
  g_autofree gchar *name = g_strdup_printf ("%s.%06" G_GINT64_FORMAT "Z.json", stamp, finished_at % G_USEC_PER_SEC);
  g_autofree gchar *path = g_build_filename (self->dir, name, NULL);

  if (g_mkdir_with_parents (self->dir, 0700) != 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "Cannot create %s: %s", self->dir,
                 g_strerror (errno));
    return FALSE;
  }
  if (!g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    return FALSE;
  prune_history (self->dir);
  return TRUE;
}

static gboolean
parse_stored (const gchar *json, VivariumVerdict *verdict, gint64 *finished_at)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *root;

  if (!json_parser_load_from_data (parser, json, -1, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return FALSE;
  root = json_node_get_object (json_parser_get_root (parser));
  if (!vivarium_verdict_from_string (json_object_get_string_member_with_default (root, "verdict", ""), verdict))
    *verdict = VIVARIUM_VERDICT_INCONCLUSIVE;
  *finished_at = json_object_get_int_member_with_default (root, "finished-at-usec", 0);
  return TRUE;
}

/* The newest stored result becomes LastResult/Verdict/LastRunAt, so a
 * restarted (or re-activated) daemon still shows the last run. */
void
vd_self_test_store_load (VdSelfTestStore *self)
{
  g_auto(GStrv) names = vd_fs_list_dir (self->dir);
  const gchar *newest = NULL;
  g_autofree gchar *path = NULL;
  g_autofree gchar *json = NULL;
  VivariumVerdict verdict = VIVARIUM_VERDICT_NEVER_RUN;
  gint64 finished_at = 0;
  g_autoptr(GError) error = NULL;

  for (guint i = 0; names[i] != NULL; i++) {
    if (g_str_has_suffix (names[i], ".json") && names[i][0] != '.' && g_strcmp0 (names[i], newest) > 0)
      newest = names[i];
  }
  if (newest == NULL)
    return;
  path = g_build_filename (self->dir, newest, NULL);
  if (!g_file_get_contents (path, &json, NULL, &error) || !parse_stored (json, &verdict, &finished_at)) {
    g_warning ("cannot load the last self-test result %s: %s", path, error != NULL ? error->message : "not JSON");
    return;
  }
  vd_guard_set_self_test_result (self->guard, json, verdict, finished_at);
}

/* --- a run ------------------------------------------------------------- */

typedef struct {
  VdSelfTestStore       *store;
  GDBusMethodInvocation *invocation;
  VdJob                 *job;
} RunData;

static void
progress_cb (VdSelfTest *test, guint percent, const gchar *step, gpointer user_data)
{
  RunData *data = user_data;
  VivariumDBusGuard *guard = VIVARIUM_DBUS_GUARD (vd_guard_get_skeleton (data->store->guard));

  vivarium_dbus_guard_emit_self_test_progress (guard, percent, step);
  vd_job_set_progress (data->job, vd_progress_get_fraction (vd_self_test_get_progress (test)), step);
}

static void
run_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree RunData *data = user_data;
  g_autoptr(GDBusMethodInvocation) invocation = data->invocation;
  g_autoptr(VdJob) job = data->job;
  VdSelfTestStore *self = data->store;
  VivariumDBusGuard *guard = VIVARIUM_DBUS_GUARD (vd_guard_get_skeleton (self->guard));
  VdSelfTest *test = VD_SELF_TEST (source);
  GError *error = NULL;
  g_autofree gchar *json = vd_self_test_run_finish (test, res, &error);
  g_autoptr(GError) store_error = NULL;
  VivariumVerdict verdict = vd_self_test_get_verdict (test);
  g_autofree gchar *verdict_line = NULL;

  g_signal_handlers_disconnect_by_data (test, data);
  g_clear_object (&self->running);
  if (json == NULL) {
    vd_job_append_log (job, error->message);
    vd_job_fail (job, error);
    g_dbus_method_invocation_take_error (invocation, error);
    return;
  }
  verdict_line = g_strdup_printf ("verdict: %s", vivarium_verdict_to_string (verdict));
  vd_job_append_log (job, verdict_line);
  vd_guard_set_self_test_result (self->guard, json, verdict, vd_self_test_get_finished_at (test));
  if (!store_result (self, json, vd_self_test_get_finished_at (test), &store_error))
    g_warning ("cannot store the self-test result: %s", store_error->message);
  vivarium_dbus_guard_emit_self_test_progress (guard, 100, vivarium_verdict_to_string (verdict));
  vd_job_succeed (job, NULL);
  vivarium_dbus_guard_complete_run_self_test (guard, invocation, json);
}

static gboolean
parse_options (VdSelfTestStore *self, GVariant *options, const gchar **image, gboolean *negative,
               const gchar **session, GError **error)
{
  const gchar *known[] = { "image", "negative-control", "session", NULL };
  GVariantIter iter;
  const gchar *key;
  GVariant *value;

  *image = "tiny";
  *negative = FALSE;
  *session = NULL;
  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value)) {
    g_autoptr(GVariant) v = value;
    if (!g_strv_contains (known, key)) {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "Unknown self-test option “%s” (known: image, negative-control, session)", key);
      return FALSE;
    }
    if (g_str_equal (key, "image") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *image = g_variant_get_string (v, NULL);
    } else if (g_str_equal (key, "negative-control") && g_variant_is_of_type (v, G_VARIANT_TYPE_BOOLEAN)) {
      *negative = g_variant_get_boolean (v);
    } else if (g_str_equal (key, "session") && g_variant_is_of_type (v, G_VARIANT_TYPE_STRING)) {
      *session = g_variant_get_string (v, NULL);
    } else {
      g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                   "The self-test option “%s” has the wrong type", key);
      return FALSE;
    }
  }
  if (*session != NULL && *negative) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_INVALID_ARGUMENT,
                 "A live session keeps both layers; it cannot be the negative control");
    return FALSE;
  }
  /* A run with neither layer is a guest with the host's networks open:
   * only an administrator can allow it, in the configuration file. */
  if (*negative && !vd_config_get_allow_negative_control (self->config)) {
    g_set_error (error, VIVARIUM_ERROR, VIVARIUM_ERROR_NOT_SUPPORTED,
                 "The negative control needs [Guard] AllowNegativeControl=true in the configuration");
    return FALSE;
  }
  return vivarium_name_validate ("image", *image, error);
}

/* Everything a caller can get wrong is refused here, before the canary
 * network exists: options, the live session, the guard, the image. */
static gboolean
prepare (VdSelfTestStore *self, GVariant *options, const gchar **image_name, VdImage **image, VdSession **live,
         gboolean *negative, GError **error)
{
  const gchar *session_id = NULL;

  *image = NULL;
  *live = NULL;
  if (!parse_options (self, options, image_name, negative, &session_id, error))
    return FALSE;
  if (session_id != NULL && (*live = vd_session_pool_lookup_running (self->pool, session_id, error)) == NULL)
    return FALSE;
  if (!vd_guard_check_can_start (self->guard, error))
    return FALSE;
  return *live != NULL || (*image = vd_image_store_lookup_bootable (self->images, *image_name, error)) != NULL;
}

static gboolean
handle_run_self_test (VivariumDBusGuard *iface, GDBusMethodInvocation *invocation, GVariant *options,
                      gpointer user_data)
{
  VdSelfTestStore *self = VD_SELF_TEST_STORE (user_data);
  const gchar *image_name = NULL;
  VdImage *image = NULL;
  VdSession *live = NULL;
  gboolean negative = FALSE;
  RunData *data;
  VdJob *job;
  GError *error = NULL;

  if (self->running != NULL) {
    g_dbus_method_invocation_return_error (invocation, VIVARIUM_ERROR, VIVARIUM_ERROR_BUSY,
                                           "A self-test is already running");
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  if (!prepare (self, options, &image_name, &image, &live, &negative, &error) ||
      (job = vd_job_store_new_job (self->jobs, "self-test", FALSE, &error)) == NULL) {
    g_dbus_method_invocation_take_error (invocation, error);
    return G_DBUS_METHOD_INVOCATION_HANDLED;
  }
  g_info ("self-test started (image %s%s, job %s)", image_name, negative ? ", with the negative control" : "",
          vd_job_get_id (job));
  vivarium_dbus_guard_set_job (iface, vd_job_get_object_path (job));
  self->running = vd_self_test_new (self->pool, self->guard, self->systemd, self->config, image_name, image, negative);
  if (live != NULL)
    vd_self_test_set_live_session (self->running, live);
  data = g_new0 (RunData, 1);
  data->store = self;
  data->invocation = g_object_ref (invocation);
  data->job = job;   /* the job store holds one reference, this the other */
  g_signal_connect (self->running, "progress", G_CALLBACK (progress_cb), data);
  vd_self_test_run_async (self->running, run_done_cb, data);
  return G_DBUS_METHOD_INVOCATION_HANDLED;
}

VdSelfTestStore *
vd_self_test_store_new (VdConfig *config, VdSystemd *systemd, VdSessionPool *pool, VdGuard *guard,
                        VdImageStore *images, VdJobStore *jobs)
{
  VdSelfTestStore *self = g_object_new (VD_TYPE_SELF_TEST_STORE, NULL);

  self->config = g_object_ref (config);
  self->systemd = g_object_ref (systemd);
  self->pool = g_object_ref (pool);
  self->guard = g_object_ref (guard);
  self->images = g_object_ref (images);
  self->jobs = g_object_ref (jobs);
  self->dir = vd_config_build_state_path (config, "selftest", NULL);
  g_signal_connect (vd_guard_get_skeleton (guard), "handle-run-self-test", G_CALLBACK (handle_run_self_test), self);
  return self;
}
