#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The main job, end to end, on this machine: install what is needed, build,
# boot a real systemd host (systemd-nspawn on an overlay of this machine; it
# needs no systemd as PID 1 here), install Vivarium into it, and there: build
# and freeze the `tiny` image through the daemon, create a project, hand a
# task to a script worker, wait for DONE, print the signed report and verify
# its signature. The projects directory is a btrfs the harness loop-mounts
# outside and binds in (the container has no loop devices).
set -euo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_BUILD_DIR:-$src/build}

"$src/tools/install-deps.sh"
[ -d "$build" ] || meson setup "$build" "$src" --prefix=/usr
meson compile -C "$build"
VIVARIUM_TEST_BTRFS=${VIVARIUM_TEST_BTRFS:-768M} exec "$src/tests/system/vivarium-test-host" run --build "$build" -- "$src/tools/demo-inside.sh"
