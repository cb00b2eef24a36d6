/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The tool definitions (cli/vivarium-mcp-tools.json, compiled in): the
 * input and output schemas tools/list shows, and the check of a call's
 * arguments against the same input schema. */
typedef struct _VmcpSchema VmcpSchema;
VmcpSchema          *vmcp_schema_load            (GError      **error);
void                 vmcp_schema_free            (VmcpSchema   *self);
/* Every tool's name, in the file's order. */
const gchar * const *vmcp_schema_tool_names      (VmcpSchema   *self);
/* The tool as tools/list shows it (a new node), or NULL if none. */
JsonNode            *vmcp_schema_tool_definition (VmcpSchema   *self,
                                                  const gchar  *name);
/* The arguments against the input schema: no unknown member, the
 * required ones present, types, lengths (in bytes: the daemon's limits are
 * bytes) and ranges. VIVARIUM_ERROR_INVALID_ARGUMENT with a sentence. */
/* @optional: members the file requires that this client may leave out
 * (NULL: none). */
gboolean             vmcp_schema_check_arguments (VmcpSchema   *self,
                                                  const gchar  *name,
                                                  JsonObject   *arguments,
                                                  const gchar * const *optional,
                                                  GError      **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpSchema, vmcp_schema_free)

G_END_DECLS
