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
#
#   tools/demo.sh [--image tiny|debian]
#
# --image debian does the same job on a full Debian guest: its packages are
# downloaded here first from the Debian mirror (the container has no
# network), and the daemon builds the image from them inside (minutes).
set -euo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_BUILD_DIR:-$src/build}
image=tiny
while [ $# -gt 0 ]; do
  case $1 in
    --image) image=${2:?--image needs tiny or debian}; shift 2 ;;
    --image=*) image=${1#--image=}; shift ;;
    *) echo "usage: $0 [--image tiny|debian]" >&2; exit 2 ;;
  esac
done
case $image in
  tiny | debian) ;;
  *) echo "demo: --image is tiny or debian, not $image" >&2; exit 2 ;;
esac

"$src/tools/install-deps.sh"
[ -d "$build" ] || meson setup "$build" "$src" --prefix=/usr
meson compile -C "$build"
export VIVARIUM_TEST_DEMO_IMAGE=$image
if [ "$image" = debian ]; then
  mkdir -p -- "$build/debian-packages"
  "$src/images/vivarium-image-builder.sh" --recipe "$src/images/debian.recipe" --make-tarball "$build/debian-packages"
  export VIVARIUM_TEST_DEBIAN_PACKAGES=$build/debian-packages
  export VIVARIUM_TEST_HOST_TIMEOUT=${VIVARIUM_TEST_HOST_TIMEOUT:-1200}
fi
VIVARIUM_TEST_BTRFS=${VIVARIUM_TEST_BTRFS:-768M} exec "$src/tests/system/vivarium-test-host" run --build "$build" -- "$src/tools/demo-inside.sh"
