#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Task benchmark, printed as figures (nothing here asserts a speed): a
# trivial task (one exec, then finish) from SubmitTask to DONE, its five
# phases as the daemon measured them (Task.Timings: work session start,
# worker, commit, verification session, report), and the ratio of the whole
# to two session starts measured side by side in the same run (a task needs
# two sessions: the work and the fresh verification), both cold (options that
# do not match the boot snapshot: --memory 520) and restored (the default,
# which is what a task's sessions use).
# Run on the systemd test host, with a btrfs for the projects:
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build build -- bench/bench-task.sh
set -euo pipefail

runs=${VIVARIUM_BENCH_RUNS:-3}
work=$(mktemp -d /var/tmp/vivarium-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

ctl () { vivariumctl --no-interaction "$@"; }
now () { date +%s.%N; }
median () { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
prop () {  # PATH IFACE PROPERTY: the value alone
  busctl get-property org.vivarium.Vivarium1 "$1" "org.vivarium.Vivarium1.$2" "$3" | cut -d' ' -f2- | tr -d '"'
}

ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
ctl image freeze tiny >/dev/null 2>&1 || true
ctl project show bench >/dev/null 2>&1 || ctl project create bench --quota 64M >/dev/null
cat > "$work/worker.sh" <<'WORKER'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'date > stamp.txt' >/dev/null
vivariumctl worker finish --summary "Wrote stamp.txt." --verify "test -f stamp.txt"
WORKER

: >"$work/cold"; : >"$work/restored"; : >"$work/task"; : >"$work/phases"
session_start () {  # FILE [OPTIONS]: one start → ready, timed, then stopped
  local file=$1 t0 id
  shift
  t0=$(now)
  id=$(ctl session start tiny "$@")
  echo "$(now) - $t0" | bc >>"$file"
  ctl session stop "$id" >/dev/null
}
for i in $(seq "$runs"); do
  session_start "$work/cold" --memory 520
  session_start "$work/restored"

  t0=$(now)
  tid=$(ctl task submit bench tiny --script "$work/worker.sh" --instructions "Write stamp.txt.")
  ctl task wait "$tid" --timeout 900 >/dev/null
  echo "$(now) - $t0" | bc >>"$work/task"
  # The daemon's own measure of each phase (µs), then its whole.
  busctl get-property org.vivarium.Vivarium1 "/org/vivarium/Vivarium1/tasks/$tid" \
    org.vivarium.Vivarium1.Task Timings --json=short | python3 -c '
import json, sys
t = {k: v / 1e6 for k, v in json.load(sys.stdin)["data"].items()}
print(" ".join("%.3f" % t[k] for k in ("work-session-start", "worker", "commit", "verification", "report", "total")))
' >>"$work/phases"
done

cold=$(median <"$work/cold"); restored=$(median <"$work/restored"); task=$(median <"$work/task")
echo "== a trivial task, median of $runs (session starts measured in the same run)"
printf 'cold session start (start → ready):     %.2f s\n' "$cold"
printf 'restored session start (start → ready): %.2f s\n' "$restored"
printf 'task submit → DONE (wall, client side): %.2f s\n' "$task"
col () { awk -v c="$1" '{ print $c }' "$work/phases" | median; }
printf '  work session start (submit → guest agent ready): %.2f s\n' "$(col 1)"
printf '  worker (ready → Finish):                          %.2f s\n' "$(col 2)"
printf '  commit (work session stop, chown, libgit2):       %.3f s\n' "$(col 3)"
printf '  verification session (start, re-run, stop):       %.2f s\n' "$(col 4)"
printf '  report (assemble, sign, store):                   %.3f s\n' "$(col 5)"
printf '  whole, daemon-measured:                           %.2f s\n' "$(col 6)"
echo "$task $cold $restored" | awk '{ printf "ratio, whole task / two cold starts: %.2f; / two restored starts: %.2f\n", $1 / (2 * $2), $1 / (2 * $3) }'
# Each session's own start steps, from the daemon's journal (a task's
# sessions are gone from the bus when it ends): the last task's work and
# verification sessions, after the plain restored starts above.
echo "last task's session starts (the daemon's journal):"
journalctl -u vivariumd.service -o cat --no-pager --since "-10min" | grep -E "^session [0-9a-f]+ started \\(" | tail -n 2 |
  sed 's/^/  /'
