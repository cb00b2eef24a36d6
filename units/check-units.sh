#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# check-units.sh GENERATED_SERVICE SLICE STAND_IN_EXECUTABLE MAX_EXPOSURE
#
# systemd-analyze verify on the generated vivariumd.service (with ExecStart=
# pointed at a stand-in executable: the installed path does not exist yet)
# and on vivarium.slice, then systemd-analyze security --offline, failing if
# the exposure score rises above MAX_EXPOSURE (0-100, i.e. 36 = 3.6).
# Works on copies in a temporary directory, removed on exit.
set -eu

if [ $# -ne 4 ]; then
    echo "usage: $0 SERVICE SLICE EXECUTABLE MAX_EXPOSURE" >&2
    exit 2
fi
[ -x "$3" ] || { echo "FAIL: $3 is not an executable" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#^ExecStart=.*#ExecStart=$3#" "$1" > "$tmp/vivariumd.service"
cp "$2" "$tmp/vivarium.slice"

# verify exits 0 on settings it ignores, so any output at all is a failure.
if ! systemd-analyze verify "$tmp/vivariumd.service" "$tmp/vivarium.slice" > "$tmp/verify.log" 2>&1 \
   || [ -s "$tmp/verify.log" ]; then
    echo "FAIL: systemd-analyze verify:" >&2
    cat "$tmp/verify.log" >&2
    exit 1
fi
if ! systemd-analyze security --offline=true --threshold="$4" --no-pager \
        "$tmp/vivariumd.service" > "$tmp/security.log" 2>&1; then
    cat "$tmp/security.log" >&2
    echo "FAIL: exposure above $4 (see the table above)" >&2
    exit 1
fi
tail -n 1 "$tmp/security.log"
echo "PASS: units verify, exposure within $4"
