#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Session benchmarks, printed as figures (nothing here asserts a speed):
#  - overlay creation time over a 1 GiB and a 16 GiB base (should not grow);
#  - start-to-first-exec latency of `tiny` through the daemon, split into the
#    daemon's own start steps (image check, overlay, guard, unit start, agent);
#  - the same for QEMU started by hand with the same arguments, and the ratio.
# Run on the systemd test host:
#   tests/system/vivarium-test-host run --build build -- bench/bench-sessions.sh
set -euo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
runs=${VIVARIUM_BENCH_RUNS:-3}
work=$(mktemp -d /var/tmp/vivarium-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

ctl () { vivariumctl --no-interaction "$@"; }
now () { date +%s.%N; }
median () { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "== overlay creation (qemu-img create -b, median of 10)"
for size in 1G 16G; do
  qemu-img create -q -f qcow2 "$work/base-$size.qcow2" "$size"
  # Give the base real data in its first 64 MiB so it is not only a header.
  qemu-io -f qcow2 -c "write 0 64M" "$work/base-$size.qcow2" >/dev/null
  for i in $(seq 10); do
    t0=$(now)
    qemu-img create -q -f qcow2 -F qcow2 -b "$work/base-$size.qcow2" "$work/overlay-$i.qcow2"
    echo "$(now) - $t0" | bc
    rm -f "$work/overlay-$i.qcow2"
  done | median | awk -v s="$size" '{ printf "overlay over %s base: %.1f ms\n", s, $1 * 1000 }'
done

echo "== start to first exec through the daemon (tiny, median of $runs)"
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
ctl image freeze tiny >/dev/null 2>&1 || true
: >"$work/daemon"
for i in $(seq "$runs"); do
  t0=$(now)
  id=$(ctl session start tiny)
  ctl session exec "$id" -- true
  echo "$(now) - $t0" | bc >>"$work/daemon"
  busctl get-property org.vivarium.Vivarium1 "/org/vivarium/Vivarium1/sessions/$id" \
    org.vivarium.Vivarium1.Session StartupTimings >>"$work/timings"
  ctl session stop "$id" >/dev/null
done
daemon=$(median <"$work/daemon")
printf 'daemon: %.2f s (runs: %s)\n' "$daemon" "$(tr '\n' ' ' <"$work/daemon")"
echo "start steps of the last run (µs): $(tail -1 "$work/timings")"
guard_us=$(tail -1 "$work/timings" | grep -o '"guard" [0-9]*' | awk '{ print $2 }')
printf 'guard share of start-to-first-exec: %.3f %%\n' "$(echo "${guard_us:-0} / 10000 / $daemon" | bc -l)"

echo "== the same by hand (boot-tiny-by-hand.sh, same QEMU arguments, median of $runs)"
: >"$work/hand"
for i in $(seq "$runs"); do
  t0=$(now)
  "$src/tests/system/boot-tiny-by-hand.sh" /var/lib/vivarium/images/tiny >/dev/null
  echo "$(now) - $t0" | bc >>"$work/hand"
done
hand=$(median <"$work/hand")
printf 'by hand: %.2f s (runs: %s)\n' "$hand" "$(tr '\n' ' ' <"$work/hand")"
printf 'ratio daemon / by hand: %.2f\n' "$(echo "$daemon / $hand" | bc -l)"
