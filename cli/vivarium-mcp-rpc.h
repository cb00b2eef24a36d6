/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-glib/json-glib.h>

#include "vivarium-mcp-tools.h"

G_BEGIN_DECLS

/* The MCP stdio transport: one JSON-RPC 2.0 message per line, UTF-8, no
 * embedded newline. Protocol revision 2025-06-18 (the first with output
 * schemas and structured tool results). */
#define VMCP_PROTOCOL_VERSION "2025-06-18"

/* Bounds on what the client can make this process hold. A line is the
 * largest argument (64 KiB of instructions, each byte at most six when
 * escaped as \uXXXX) with room for the envelope; nesting is bounded because
 * json-glib's parser recurses. */
#define VMCP_LINE_MAX       (1024 * 1024)
#define VMCP_JSON_DEPTH_MAX 32

/* JSON-RPC 2.0's codes. */
#define VMCP_RPC_PARSE_ERROR      (-32700)
#define VMCP_RPC_INVALID_REQUEST  (-32600)
#define VMCP_RPC_METHOD_NOT_FOUND (-32601)
#define VMCP_RPC_INVALID_PARAMS   (-32602)

typedef enum {
  VMCP_LINE_OK,
  VMCP_LINE_TOO_LONG,  /* a line past VMCP_LINE_MAX: read to its end and dropped */
  VMCP_LINE_EOF,
} VmcpLineStatus;

/* Reads lines from a descriptor, never holding more than VMCP_LINE_MAX
 * bytes of a line plus one read's worth. */
typedef struct _VmcpLineReader VmcpLineReader;
VmcpLineReader *vmcp_line_reader_new  (gint             fd,
                                       gsize            line_max);
void            vmcp_line_reader_free (VmcpLineReader  *self);
/* @line: the line without its "\n" (nor a "\r" before it), on VMCP_LINE_OK. */
VmcpLineStatus  vmcp_line_reader_next (VmcpLineReader  *self,
                                       gchar          **line,
                                       gsize           *len,
                                       GError         **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpLineReader, vmcp_line_reader_free)

typedef struct _VmcpServer VmcpServer;
VmcpServer *vmcp_server_new            (VmcpTools   *tools);
void        vmcp_server_free           (VmcpServer  *self);
/* One message in, the reply line out (no "\n"), or NULL when none is due
 * (a notification, a response). Never fails: whatever the line holds, the
 * answer is a JSON-RPC error or a result. */
gchar      *vmcp_server_handle_line    (VmcpServer  *self,
                                        const gchar *line,
                                        gsize        len);
/* The answer to a line VMCP_LINE_TOO_LONG dropped (its id is unknown). */
gchar      *vmcp_server_reply_too_long (VmcpServer  *self);
/* Reads @in_fd until end of input, writes replies to @out_fd. */
gboolean    vmcp_server_run            (VmcpServer  *self,
                                        gint         in_fd,
                                        gint         out_fd,
                                        GError     **error);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmcpServer, vmcp_server_free)

G_END_DECLS
