#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# check-gateway-unit.sh GATEWAY_SERVICE DAEMON_SERVICE STAND_IN_EXECUTABLE MAX_EXPOSURE
#
# systemd-analyze verify on the generated vivarium-gateway.service next to
# vivariumd.service (its PartOf=/After= target), ExecStart= pointed at a
# stand-in, then its exposure score, which must not rise above MAX_EXPOSURE
# (22 = 2.2 with systemd 252). Works on copies in a temporary directory.
set -eu

[ $# -eq 4 ] || { echo "usage: $0 GATEWAY DAEMON EXECUTABLE MAX_EXPOSURE" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#^ExecStart=.*#ExecStart=$3#" "$1" > "$tmp/vivarium-gateway.service"
sed "s#^ExecStart=.*#ExecStart=$3#" "$2" > "$tmp/vivariumd.service"
if ! systemd-analyze verify "$tmp/vivarium-gateway.service" "$tmp/vivariumd.service" > "$tmp/verify.log" 2>&1 \
   || [ -s "$tmp/verify.log" ]; then
    echo "FAIL: systemd-analyze verify:" >&2
    cat "$tmp/verify.log" >&2
    exit 1
fi
# The unit denies everything and allows nothing: the gateway sets its
# IPAddressAllow= at runtime to the endpoint's checked addresses (and refuses
# to run without IPAddressDeny=any).
grep -qx 'IPAddressDeny=any' "$tmp/vivarium-gateway.service" || { echo "FAIL: no IPAddressDeny=any" >&2; exit 1; }
[ "$(grep -c '^IPAddressAllow=' "$tmp/vivarium-gateway.service")" = 0 ] || { echo "FAIL: an IPAddressAllow= in the file" >&2; exit 1; }
if ! systemd-analyze security --offline=true --threshold="$4" --no-pager \
        "$tmp/vivarium-gateway.service" > "$tmp/security.log" 2>&1; then
    cat "$tmp/security.log" >&2
    echo "FAIL: exposure above $4" >&2
    exit 1
fi
tail -n 1 "$tmp/security.log"
echo "PASS: the gateway unit verifies, exposure within $4"
