/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-guard.h"
#include "vd-image-store.h"
#include "vd-job-store.h"
#include "vd-session-pool.h"
#include "vd-systemd.h"

G_BEGIN_DECLS

/* Guard.RunSelfTest: refuses what a caller can get wrong before anything
 * exists, runs one VdSelfTest at a time as a Job, keeps the results under
 * STATE/selftest/ (the newest SELF_TEST_HISTORY) and shows the newest on
 * the Guard (LastResult, Verdict, LastRunAt), also after a restart. It is
 * handed the guard, the session pool, the images and the jobs; never the
 * manager. */

#define VD_TYPE_SELF_TEST_STORE (vd_self_test_store_get_type ())
G_DECLARE_FINAL_TYPE (VdSelfTestStore, vd_self_test_store, VD, SELF_TEST_STORE, GObject)

/* Connects RunSelfTest on the guard's skeleton. */
VdSelfTestStore *vd_self_test_store_new  (VdConfig      *config,
                                          VdSystemd     *systemd,
                                          VdSessionPool *pool,
                                          VdGuard       *guard,
                                          VdImageStore  *images,
                                          VdJobStore    *jobs);
/* The newest stored result onto the Guard. */
void             vd_self_test_store_load (VdSelfTestStore *self);

G_END_DECLS
