// SPDX-License-Identifier: LGPL-2.1-or-later
//
// node mcp-client.mjs SDKDIR PLAN.json
//
// Drives an MCP server over stdio with the real MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, installed into SDKDIR by install-sdk.sh): the
// SDK spawns the server, negotiates the protocol, lists the tools (and
// compiles their output schemas) and calls them, checking every result's
// structuredContent against its tool's outputSchema as it does for any
// server. PLAN is {"command": ..., "args": [...], "env": {...}, "calls":
// [{"tool", "arguments", "timeout_ms"}]}; env (optional) is added to the
// SDK's own short default environment of the server. Prints one JSON object: the server's info,
// the tools, and for each call its result or the error the SDK threw.
// The test asserts on that; this script judges nothing itself.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, planFile] = process.argv.slice(2);
if (!sdkDir || !planFile) {
  console.error('usage: node mcp-client.mjs SDKDIR PLAN.json');
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(sdkDir, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const sdkVersion = JSON.parse(readFileSync(join(sdkDir, 'node_modules/@modelcontextprotocol/sdk/package.json'))).version;

const plan = JSON.parse(readFileSync(planFile, 'utf8'));
const transport = new StdioClientTransport({ command: plan.command, args: plan.args ?? [], env: plan.env, stderr: 'inherit' });
const client = new Client({ name: 'vivarium-system-test', version: '1' });
const out = { sdk: sdkVersion, calls: [] };

try {
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions?.() ?? null;
  out.tools = (await client.listTools()).tools;
  for (const call of plan.calls ?? []) {
    try {
      const result = await client.callTool({ name: call.tool, arguments: call.arguments ?? {} }, undefined,
                                           { timeout: call.timeout_ms ?? 60000 });
      out.calls.push({ tool: call.tool, result });
    } catch (e) {
      out.calls.push({ tool: call.tool, thrown: { name: e.name, code: e.code ?? null, message: String(e.message) } });
    }
  }
  out.ping = await client.ping();
} catch (e) {
  out.fatal = String(e && e.stack || e);
} finally {
  await client.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
