#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Time of one full isolation self-test (three configurations, each a fresh
# scratch guest), as the caller sees it. Runs inside the systemd test host:
#   tests/system/vivarium-test-host run --build BUILDDIR -- bench/bench-selftest.sh [RUNS]
# Builds and freezes the tiny image first when it is missing (not timed).

set -u
set -o pipefail

readonly BUS=org.vivarium.Vivarium1
readonly OBJ=/org/vivarium/Vivarium1
readonly IMAGE=${VIVARIUM_BENCH_IMAGE:-tiny}
runs=${1:-1}

die () { echo "bench-selftest: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
[ -d /run/systemd/system ] || die "systemd is not PID 1; run me through tests/system/vivarium-test-host"
command -v vivariumctl >/dev/null || die "vivariumctl is not installed"
command -v jq >/dev/null || die "jq is not installed"
[[ $runs =~ ^[1-9][0-9]?$ ]] || die "RUNS must be 1-99"

if ! vivariumctl image list 2>/dev/null | grep -qw "$IMAGE"; then
  vivariumctl image build "$IMAGE" "$IMAGE" >/dev/null || die "cannot build $IMAGE"
fi
if [ "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" org.vivarium.Vivarium1.Image Frozen)" != "b true" ]; then
  vivariumctl image freeze "$IMAGE" >/dev/null || die "cannot freeze $IMAGE"
fi

accel=$(busctl get-property "$BUS" "$OBJ" org.vivarium.Vivarium1.Manager Accelerator | tr -d '"' | cut -d' ' -f2)
out=$(mktemp /var/tmp/bench-selftest.XXXXXX) || die "mktemp failed"
trap 'rm -f "$out"' EXIT
echo "# image $IMAGE, accelerator $accel, $(nproc) CPUs"
echo "# run  wall_s  daemon_s  verdict  per-configuration seconds"
for ((i = 1; i <= runs; i++)); do
  t0=$EPOCHREALTIME
  vivariumctl guard selftest --image "$IMAGE" --json > "$out" 2>/dev/null
  t1=$EPOCHREALTIME
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  daemon=$(jq -r '."duration-sec" | . * 10 | round / 10' "$out" 2>/dev/null)
  verdict=$(jq -r .verdict "$out" 2>/dev/null)
  phases=$(jq -r '[.phases[] | "\(.configuration)=\(((.["finished-at"] | sub("\\.[0-9]+"; "") | fromdateiso8601)
                   - (.["started-at"] | sub("\\.[0-9]+"; "") | fromdateiso8601)))"] | join(" ")' "$out" 2>/dev/null)
  printf '%5d  %6s  %8s  %-7s  %s\n' "$i" "$wall" "${daemon:-?}" "${verdict:-error}" "$phases"
done
