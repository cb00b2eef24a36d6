/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

/* One decision of a session's egress proxy (an item of GetEgressLog's
 * aa{sv}), with each column as the app shows it. The host and the reason
 * come from what the guest asked: every text here is plain (never markup),
 * capped, control characters made visible. */

#define VIVARIUM_EGRESS_HOST_MAX_CHARS   255  /* a DNS name is at most 253 */
#define VIVARIUM_EGRESS_REASON_MAX_CHARS 300

typedef enum {
  VIVARIUM_EGRESS_VERDICT_UNKNOWN,
  VIVARIUM_EGRESS_VERDICT_ALLOWED,
  VIVARIUM_EGRESS_VERDICT_DENIED,
  VIVARIUM_EGRESS_VERDICT_LOG_FULL,  /* the last entry of a full log */
} VivariumEgressVerdict;

#define VIVARIUM_TYPE_EGRESS_ENTRY (vivarium_egress_entry_get_type ())
G_DECLARE_FINAL_TYPE (VivariumEgressEntry, vivarium_egress_entry, VIVARIUM, EGRESS_ENTRY, GObject)

VivariumEgressEntry   *vivarium_egress_entry_new             (GVariant            *entry,
                                                              guint64              offset);
guint64                vivarium_egress_entry_get_offset      (VivariumEgressEntry *self);
VivariumEgressVerdict  vivarium_egress_entry_get_verdict     (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_verdict_label (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_verdict_class (VivariumEgressEntry *self);
gint64                 vivarium_egress_entry_get_time_usec   (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_time        (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_destination (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_via         (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_reason      (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_bytes       (VivariumEgressEntry *self);
const char            *vivarium_egress_entry_get_duration    (VivariumEgressEntry *self);

G_END_DECLS
