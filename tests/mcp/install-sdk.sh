#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# install-sdk.sh DESTDIR: installs the MCP TypeScript SDK client that
# tests/system/test-mcp.sh drives vivarium-mcp with, from the npm registry,
# at the version and with the integrity hashes package-lock.json pins
# (`npm ci`), into DESTDIR/node_modules. Runs outside the test host (which
# has no network). Skips the install when DESTDIR already holds exactly
# this lock's packages. Fails loudly when npm or the registry is missing.
set -euo pipefail

here=$(cd -- "$(dirname -- "$0")" && pwd -P)
dest=${1:?usage: install-sdk.sh DESTDIR}

command -v node >/dev/null || { echo "install-sdk: node is not installed (tools/install-deps.sh)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install-sdk: npm is not installed (tools/install-deps.sh)" >&2; exit 1; }

mkdir -p -- "$dest"
dest=$(cd -- "$dest" && pwd -P)   # node resolves a relative path against its own cwd
if cmp -s "$here/package-lock.json" "$dest/package-lock.json" &&
   [ -f "$dest/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  exit 0
fi
cp -- "$here/package.json" "$here/package-lock.json" "$dest/"
rm -rf -- "$dest/node_modules"
if ! (cd -- "$dest" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2; then
  echo "install-sdk: npm ci failed: is the npm registry reachable?" >&2
  rm -f -- "$dest/package-lock.json"
  exit 1
fi
node -e 'const v = require(process.argv[1] + "/node_modules/@modelcontextprotocol/sdk/package.json").version;
         const want = require(process.argv[1] + "/package.json").dependencies["@modelcontextprotocol/sdk"];
         if (v !== want) { console.error(`install-sdk: got SDK ${v}, want ${want}`); process.exit(1); }' "$dest"
