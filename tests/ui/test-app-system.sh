#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Inside the systemd test host (run by run-app-system.sh through
# tests/system/vivarium-test-host): the app against the real vivariumd on
# the real system bus, under Xvfb, driven through AT-SPI. Builds and freezes
# `tiny` as test-sessions.sh does, then test-app-system.py starts a session
# with vivariumctl, sees it appear in the Sessions page, stops it and sees it
# vanish. Screenshots leave the container as "# png NAME BASE64" lines.
set -u
[ "$(id -u)" = 0 ] || { echo "Bail out! must run as root"; exit 1; }
[ -d /run/systemd/system ] || { echo "Bail out! systemd is not PID 1 here"; exit 1; }

ctl () { vivariumctl --no-interaction "$@"; }
ctl image build tiny tiny >/dev/null 2>&1 || { echo "Bail out! could not build tiny"; exit 1; }
ctl image freeze tiny >/dev/null 2>&1 || { echo "Bail out! could not freeze tiny"; exit 1; }
echo "# tiny built and frozen"

src=$(dirname -- "$(readlink -f -- "$0")")/../..
export VIVARIUM_UI_APP=/usr/bin/vivarium
[ -x "$VIVARIUM_UI_APP" ] || VIVARIUM_UI_APP=$(command -v vivarium)
logdir=$(mktemp -d)
# run-ui-test.sh provides Xvfb and a session bus; here the system bus is the
# real one, so it must not replace it.
VIVARIUM_UI_REAL_SYSTEM_BUS=1 VIVARIUM_UI_SCRIPT=$src/tests/ui/test-app-system.py \
  "$src/tests/ui/run-ui-test.sh" "${VIVARIUM_UI_BUILD:-$src/build}" "$src" "$logdir"
rc=$?
for f in "$logdir"/*.png; do
  [ -f "$f" ] && echo "# png $(basename "$f") $(base64 -w0 "$f")"
done
exit $rc
