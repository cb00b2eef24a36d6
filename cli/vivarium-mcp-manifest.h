/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A client's manifest: the [Client NAME] group of the MCP configuration
 * (default VIVARIUM_SYSCONFDIR/mcp.conf) narrows which tools, projects and
 * images that client may use. It only narrows: polkit still decides every
 * call, as for any other client of the daemon. */
#define VMCP_CONFIG_FILE "mcp.conf"
#define VMCP_CLIENT_GROUP_PREFIX "Client "

typedef struct _VmcpManifest VmcpManifest;
/* @client NULL: no narrowing (the file is not read). Otherwise the file and
 * the group must exist and hold only known tool names and valid project and
 * image names: a manifest that does not say what was meant fails loudly. */
VmcpManifest *vmcp_manifest_load          (const gchar          *path,
                                           const gchar          *client,
                                           const gchar * const  *known_tools,
                                           GError              **error);
void          vmcp_manifest_free          (VmcpManifest         *self);
const gchar  *vmcp_manifest_client        (VmcpManifest         *self);
gboolean      vmcp_manifest_allows_tool   (VmcpManifest         *self,
                                           const gchar          *tool);
gboolean      vmcp_manifest_allows_project (VmcpManifest        *self,
                                           const gchar          *project);
gboolean      vmcp_manifest_allows_image  (VmcpManifest         *self,
                                           const gchar          *image);
/* WorkerVerify=true: this client's vm_task may leave `verify` out, and the
 * worker's own command then decides the verdict (verification.by "worker").
 * Without it (and without --client) `verify` is required: a verdict is the
 * caller's finding only when the caller chose the command. */
gboolean      vmcp_manifest_allows_worker_verify (VmcpManifest  *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpManifest, vmcp_manifest_free)

G_END_DECLS
