#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The main job, end to end, on this machine: install what is needed, build,
# boot a real systemd host (systemd-nspawn on an overlay of this machine; it
# needs no systemd as PID 1 here), install Vivarium into it, and there: build
# and freeze the `tiny` image through the daemon, boot a throwaway session,
# run commands in it, and print the session's report.
set -euo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_BUILD_DIR:-$src/build}

"$src/tools/install-deps.sh"
[ -d "$build" ] || meson setup "$build" "$src" --prefix=/usr
meson compile -C "$build"
exec "$src/tests/system/vivarium-test-host" run --build "$build" -- "$src/tools/demo-inside.sh"
