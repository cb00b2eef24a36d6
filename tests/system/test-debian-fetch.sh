#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-debian-fetch.sh BUILDDIR VIVARIUM_TEST_HOST TEST: downloads the `debian`
# recipe's packages from the Debian mirror into BUILDDIR/debian-packages
# (here, outside: the test host has no network; the builder's --make-tarball,
# which talks to that mirror and nothing else), then runs TEST in the test
# host, where the daemon builds the image from that tarball. A download that
# fails fails the test; it is never skipped.
set -euo pipefail
build=$1 host=$2 test=$3
src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/../.." && pwd -P)
pkgdir=$build/debian-packages
mkdir -p -- "$pkgdir"
t0=$EPOCHREALTIME
"$src/images/vivarium-image-builder.sh" --recipe "$src/images/debian.recipe" --make-tarball "$pkgdir" >"$pkgdir/fetch.log" 2>&1 || {
  tail -n 20 "$pkgdir/fetch.log"
  echo "Bail out! the debian recipe's packages could not be downloaded"
  exit 1; }
printf '# debian packages: %s (%s KiB) in %.1f s\n' "$(tail -n 1 "$pkgdir/fetch.log")" \
  "$(du -k -- "$(tail -n 1 "$pkgdir/fetch.log")" | cut -f1)" "$(echo "$EPOCHREALTIME - $t0" | bc)"
VIVARIUM_TEST_DEBIAN_PACKAGES=$pkgdir exec "$host" run --build "$build" -- "$test"
