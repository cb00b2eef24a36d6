/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

#include "vivarium-mcp-daemon.h"
#include "vivarium-mcp-manifest.h"
#include "vivarium-mcp-schema.h"

G_BEGIN_DECLS

/* Seconds vm_task, vm_answer, vm_wait and vm_cancel wait when not told:
 * under the 60 s a typical MCP client waits for any answer. */
#define VMCP_WAIT_DEFAULT_SEC 30

/* The tools: arguments checked, the manifest applied, the daemon called,
 * the result built (structuredContent + a text block, identity always). */
typedef struct _VmcpTools VmcpTools;
VmcpTools *vmcp_tools_new   (VmcpSchema   *schema,
                             VmcpManifest *manifest,
                             VmcpDaemon   *daemon);
void       vmcp_tools_free  (VmcpTools    *self);
/* tools/list's result: the tools the manifest allows. */
JsonNode  *vmcp_tools_list  (VmcpTools    *self);
/* tools/call's result, success or isError. NULL (and @protocol_error)
 * only for a tool that does not exist: that is a JSON-RPC error. */
JsonNode  *vmcp_tools_call  (VmcpTools    *self,
                             const gchar  *name,
                             JsonObject   *arguments,
                             gchar       **protocol_error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpTools, vmcp_tools_free)

G_END_DECLS
