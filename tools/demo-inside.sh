#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Runs inside the systemd host booted by tools/demo.sh: everything here goes
# through vivariumctl and the D-Bus API, as a script or an agent would.
set -euo pipefail

ctl () { vivariumctl --no-interaction "$@"; }
out=${VIVARIUM_TEST_BUILD_DIR:?run me through tools/demo.sh}
step () { printf '\n== %s\n' "$*"; }

step "Daemon (activated by this call)"
ctl status
step "Building the tiny image from host packages"
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny
ctl image freeze tiny 2>/dev/null || true
ctl image verify tiny
ctl image list

step "Starting a session"
id=$(ctl session start tiny)
trap 'ctl session stop "$id" >/dev/null 2>&1 || true' EXIT
ctl session list

step "Working in the guest"
ctl session exec "$id" -- uname -a
ctl session exec "$id" -- sh -c 'echo "built in a throwaway machine" > /root/result.txt && wc -c /root/result.txt'
ctl session cp "$id:/root/result.txt" "$out/demo-result.txt"
printf 'copied back: %s\n' "$(cat "$out/demo-result.txt")"
ctl session screenshot "$id" "$out/demo-screen.png"
printf 'screenshot: %s\n' "$(file -b "$out/demo-screen.png")"

step "Report: what the daemon recorded (exit statuses as the guest reported them)"
busctl get-property org.vivarium.Vivarium1 "/org/vivarium/Vivarium1/sessions/$id" \
  org.vivarium.Vivarium1.Session ImageDigest StartupTimings
ctl session log "$id"

step "Stopping: the overlay, the unit and the sockets go"
ctl session stop "$id"
trap - EXIT
ls -A /var/lib/vivarium/sessions /run/vivarium/sessions
ctl guard status
