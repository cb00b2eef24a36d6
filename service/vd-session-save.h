/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vd-config.h"
#include "vd-image-store.h"
#include "vd-job.h"
#include "vd-job-store.h"
#include "vd-session.h"

G_BEGIN_DECLS

/* Session.SaveAsImage is answered here: connects it on @session's object.
 * The new image is reserved in @images, made as a Job of @jobs, added and
 * frozen (with its boot snapshot when it has none), or dropped again:
 * SaveAsImage makes a frozen image or none. The session outlives its
 * handler, and the stores outlive the session's calls. */
void   vd_session_save_connect         (VdSession          *session,
                                        VdConfig           *config,
                                        VdImageStore       *images,
                                        VdJobStore         *jobs);

/* Session.SaveAsImage's files: stages the new image under
 * images/.staging/save-<job> (the parent's kernel, initrd and cmdline, the
 * session's disk flattened, the memory of a paused guest as a boot
 * snapshot, lineage.json and image.json), then moves it to images/@name.
 * Returns that directory; the caller loads and freezes it. */
void   vd_session_save_as_image_async  (VdSession          *session,
                                        VdConfig           *config,
                                        VdJob              *job,
                                        const gchar        *name,
                                        GAsyncReadyCallback callback,
                                        gpointer            user_data);
gchar *vd_session_save_as_image_finish (GAsyncResult  *result,
                                        GError       **error);

G_END_DECLS
