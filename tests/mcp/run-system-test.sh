#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-system-test.sh BUILDDIR VIVARIUM_TEST_HOST TEST: installs the pinned MCP
# SDK client into BUILDDIR/tests/mcp-sdk (here, outside: the test host has
# no network), then runs TEST in the test host. An SDK that cannot be
# installed fails the test; it is never skipped.
set -euo pipefail
build=$1 host=$2 test=$3
here=$(cd -- "$(dirname -- "$0")" && pwd -P)
"$here/install-sdk.sh" "$build/tests/mcp-sdk" || { echo "Bail out! the MCP SDK could not be installed"; exit 1; }
exec "$host" run --build "$build" -- "$test"
