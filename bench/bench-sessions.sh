#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Session benchmarks, printed as figures (nothing here asserts a speed):
#  - overlay creation time over a 1 GiB and a 16 GiB base (should not grow);
#  - Freeze with its boot snapshot: time, the snapshot's size and save time;
#  - start → first exec of `tiny` through the daemon, cold and restored from
#    the boot snapshot, side by side in one run, each split into the daemon's
#    start steps, and the ratio;
#  - memory per restored session (cgroup and QEMU RSS);
#  - how many restored sessions run at once before a start takes longer
#    than 2 s (bounded: at most VIVARIUM_TEST_BENCH_MAX_SESSIONS, default 40).
# Run on the systemd test host:
#   tests/system/vivarium-test-host run --build build -- bench/bench-sessions.sh
set -euo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
runs=${VIVARIUM_TEST_BENCH_RUNS:-${VIVARIUM_BENCH_RUNS:-3}}
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

BUS=org.vivarium.Vivarium1
OBJ=/org/vivarium/Vivarium1
max_sessions=${VIVARIUM_TEST_BENCH_MAX_SESSIONS:-40}
timings () { busctl get-property "$BUS" "$OBJ/sessions/$1" "$BUS.Session" StartupTimings; }
mode () { busctl get-property "$BUS" "$OBJ/sessions/$1" "$BUS.Session" StartMode | cut -d' ' -f2 | tr -d '"'; }
# Only the sessions this run started (each id is written to $work/started),
# and its conf.d file, also when it fails half-way.
started () { echo "$1" >>"$work/started"; }
stop_all () {
  local id
  [ -f "$work/started" ] || return 0
  while read -r id; do
    ctl session stop "$id" >/dev/null 2>&1 || true
  done <"$work/started"
  rm -f "$work/started"
}
trap 'stop_all; rm -f /etc/vivarium/conf.d/90-bench.conf; rm -rf "$work"' EXIT

# The concurrency loop needs more sessions than the default limit (8).
mkdir -p /etc/vivarium/conf.d
printf '[Sessions]\nMaxSessions=%s\n' "$((max_sessions + 2))" >/etc/vivarium/conf.d/90-bench.conf
systemctl stop vivariumd.service 2>/dev/null || true

echo "== Freeze with the boot snapshot (tiny)"
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
t0=$(now)
ctl image freeze tiny >/dev/null
printf 'freeze (scratch boot + save + seal): %.2f s\n' "$(echo "$(now) - $t0" | bc)"
img=/var/lib/vivarium/images/tiny
printf 'snapshot: boot.state %.1f MiB, boot.qcow2 %.1f MiB; saved in %.3f s (guest booted in %.2f s)\n' \
  "$(echo "$(stat -c %s "$img/boot.state") / 1048576" | bc -l)" "$(echo "$(stat -c %s "$img/boot.qcow2") / 1048576" | bc -l)" \
  "$(grep -o '"save-usec" *: *[0-9]*' "$img/boot.json" | grep -o '[0-9]*$' | awk '{ print $1 / 1e6 }')" \
  "$(grep -o '"boot-usec" *: *[0-9]*' "$img/boot.json" | grep -o '[0-9]*$' | awk '{ print $1 / 1e6 }')"

# Cold: 520 MiB instead of the snapshot's 512, so the daemon boots; the rest
# of the command line is the same.
first_exec () {  # OUTFILE [vivariumctl start options]: one start → first exec
  local out=$1 t0 id
  shift
  t0=$(now)
  id=$(ctl session start "$@" tiny)
  started "$id"
  t1=$(now)
  ctl session exec "$id" -- true
  t2=$(now)
  echo "$t2 - $t0" | bc >>"$out"
  echo "$t2 - $t1" | bc >>"$out.exec"
  echo "$(mode "$id") $(timings "$id")" >>"$out.timings"
  ctl session stop "$id" >/dev/null
}
echo "== start → first exec through the daemon, cold and restored, interleaved (median of $runs)"
: >"$work/cold"; : >"$work/restored"; : >"$work/cold.exec"; : >"$work/restored.exec"
for i in $(seq "$runs"); do
  first_exec "$work/cold" --memory 520
  first_exec "$work/restored"
done
cold=$(median <"$work/cold")
restored=$(median <"$work/restored")
printf 'cold:     %.2f s (runs: %s)\n' "$cold" "$(tr '\n' ' ' <"$work/cold")"
printf 'restored: %.3f s (runs: %s)\n' "$restored" "$(tr '\n' ' ' <"$work/restored")"
printf 'ratio cold / restored: %.1f\n' "$(echo "$cold / $restored" | bc -l)"
printf 'of which `session exec ID -- true` alone (a vivariumctl process, its polkit check, the guest-exec): cold %.3f s, restored %.3f s\n' \
  "$(median <"$work/cold.exec")" "$(median <"$work/restored.exec")"
echo "cold start steps, last run (µs): $(tail -1 "$work/cold.timings")"
echo "restored start steps, last run (µs): $(tail -1 "$work/restored.timings")"

echo "== restored sessions at once, until a start takes > 2 s (at most $max_sessions)"
n=0
: >"$work/mem"
while [ "$n" -lt "$max_sessions" ]; do
  t0=$(now)
  if ! id=$(ctl session start tiny 2>"$work/err"); then
    echo "start $((n + 1)) failed: $(head -c 300 "$work/err")"
    break
  fi
  started "$id"
  ctl session exec "$id" -- true
  took=$(echo "$(now) - $t0" | bc)
  n=$((n + 1))
  unit=vivarium-session-$id.service
  pid=$(systemctl show -P MainPID "$unit")
  # RSS and PSS in KiB (the unit may have no memory accounting to ask).
  printf '%s %s %s\n' "$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")" \
    "$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup")" "$(mode "$id")" >>"$work/mem"
  printf 'session %2d: start → first exec %.3f s\n' "$n" "$took"
  if [ "$(echo "$took > 2" | bc)" = 1 ]; then
    echo "session $n took longer than 2 s: $((n - 1)) restored sessions ran at once below 2 s"
    break
  fi
done
[ "$n" -lt "$max_sessions" ] || echo "all $max_sessions restored sessions started below 2 s (the loop's bound)"
printf 'memory per restored session (median of %d): QEMU RSS %.0f MiB, PSS %.0f MiB; modes: %s\n' "$n" \
  "$(awk '{ print $1 / 1024 }' "$work/mem" | median)" "$(awk '{ print $2 / 1024 }' "$work/mem" | median)" \
  "$(awk '{ print $3 }' "$work/mem" | sort | uniq -c | tr -s ' \n' ' ')"
stop_all
rm -f /etc/vivarium/conf.d/90-bench.conf
