/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "vivarium-egress-entry.h"

G_BEGIN_DECLS

/* The newest decisions of an egress log as a GListModel of
 * VivariumEgressEntry, newest first. Read from a Session or a Task proxy
 * (both have GetEgressLog(t offset, u limit) → (aa{sv}, t next, t total)),
 * page by page, only when asked (vivarium_egress_model_refresh): the daemon
 * sends no signal per decision. At most MAX_KEPT entries are held; the
 * older ones are counted ("hidden"), not shown. */

#define VIVARIUM_EGRESS_MODEL_MAX_KEPT 1000
#define VIVARIUM_EGRESS_MODEL_PAGE     200

#define VIVARIUM_TYPE_EGRESS_MODEL (vivarium_egress_model_get_type ())
G_DECLARE_FINAL_TYPE (VivariumEgressModel, vivarium_egress_model, VIVARIUM, EGRESS_MODEL, GObject)

VivariumEgressModel *vivarium_egress_model_new          (GDBusProxy          *source);
GDBusProxy          *vivarium_egress_model_get_source   (VivariumEgressModel *self);
void                 vivarium_egress_model_refresh      (VivariumEgressModel *self);
gboolean             vivarium_egress_model_get_loading  (VivariumEgressModel *self);
/* Whether a refresh has finished at least once. */
gboolean             vivarium_egress_model_get_loaded   (VivariumEgressModel *self);
guint64              vivarium_egress_model_get_total    (VivariumEgressModel *self);
guint64              vivarium_egress_model_get_hidden   (VivariumEgressModel *self);
gboolean             vivarium_egress_model_get_log_full (VivariumEgressModel *self);
/* The last refresh's error, or NULL. */
const GError        *vivarium_egress_model_get_error    (VivariumEgressModel *self);

G_END_DECLS
