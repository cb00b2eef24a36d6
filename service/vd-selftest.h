/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-state.h"
#include "vd-config.h"
#include "vd-guard.h"
#include "vd-image.h"
#include "vd-progress.h"
#include "vd-session.h"
#include "vd-session-pool.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

#define VD_SELF_TEST_SCHEMA "https://vivarium.org/schemas/selftest-result-1.json"

/* One run of the isolation self-test: scratch guests probe canary listeners
 * under each configuration of the guard; the result is a JSON document.
 * Its steps are declared up front in a VdProgress (setup, one per
 * configuration, teardown), below 100 % until the caller has the result.
 * signal "progress" (guint percent, const gchar *step) */

#define VD_TYPE_SELF_TEST (vd_self_test_get_type ())
G_DECLARE_FINAL_TYPE (VdSelfTest, vd_self_test, VD, SELF_TEST, GObject)

/* @image is what the scratch guests boot (NULL with a live session);
 * @image_name is what the result names. */
VdSelfTest  *vd_self_test_new          (VdSessionPool      *pool,
                                        VdGuard            *guard,
                                        VdSystemd          *systemd,
                                        VdConfig           *config,
                                        const gchar        *image_name,
                                        VdImage            *image,
                                        gboolean            negative_control);
void         vd_self_test_run_async    (VdSelfTest         *self,
                                        GAsyncReadyCallback callback,
                                        gpointer            user_data);
gchar       *vd_self_test_run_finish   (VdSelfTest         *self,
                                        GAsyncResult       *result,
                                        GError            **error);
void         vd_self_test_set_live_session (VdSelfTest *self,
                                           VdSession  *session);
VivariumVerdict vd_self_test_get_verdict (VdSelfTest *self);
gint64       vd_self_test_get_finished_at (VdSelfTest *self);
VdProgress  *vd_self_test_get_progress (VdSelfTest *self);

G_END_DECLS
