/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

#include "vivarium-mcp-daemon.h"

G_BEGIN_DECLS

/* The identity block every result carries: which task, session and image,
 * which report and signature, and the daemon's key. What the signed report
 * says wins over what the task's properties said while it ran. */
typedef struct _VmcpIdentity VmcpIdentity;
/* Reads the daemon's key fingerprint now (null in the block if refused). */
VmcpIdentity *vmcp_identity_new              (VmcpDaemon    *daemon);
/* With the daemon's key fingerprint as read elsewhere (NULL or "": none). */
VmcpIdentity *vmcp_identity_new_for_key      (const gchar   *key_fingerprint);
void          vmcp_identity_free             (VmcpIdentity  *self);
void          vmcp_identity_set_task         (VmcpIdentity  *self,
                                              const gchar   *task,
                                              const gchar   *image);
void          vmcp_identity_set_session      (VmcpIdentity  *self,
                                              const gchar   *session,
                                              const gchar   *image_digest);
gboolean      vmcp_identity_has_image_digest (VmcpIdentity  *self);
const gchar  *vmcp_identity_key_fingerprint  (VmcpIdentity  *self);
/* Checks the signed report file (Report.GetJson) against the daemon's key
 * and that it is about @task of @project, takes its identity, and returns
 * the report's structured fields, with its text rendered from that same
 * verified report. DigestMismatch when it does not verify against the
 * daemon's key, the key is unknown, or it is another task's or project's;
 * then signature_verified stays false. */
JsonNode     *vmcp_identity_take_report      (VmcpIdentity  *self,
                                              const gchar   *signed_file,
                                              gsize          len,
                                              const gchar   *task,
                                              const gchar   *project,
                                              GError       **error);
JsonNode     *vmcp_identity_to_json          (VmcpIdentity  *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpIdentity, vmcp_identity_free)

G_END_DECLS
