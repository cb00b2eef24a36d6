#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Task benchmark, printed as figures (nothing here asserts a speed): a
# trivial task (one exec, then finish) from SubmitTask to DONE, its phases as
# the daemon's own records show them, and the ratio of the whole to two cold
# session starts measured side by side in the same run (a task needs two
# sessions: the work and the fresh verification).
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

: >"$work/cold"; : >"$work/task"; : >"$work/phases"
for i in $(seq "$runs"); do
  t0=$(now)
  id=$(ctl session start tiny)
  echo "$(now) - $t0" | bc >>"$work/cold"
  ctl session stop "$id" >/dev/null

  t0=$(now)
  tid=$(ctl task submit bench tiny --script "$work/worker.sh" --instructions "Write stamp.txt.")
  ctl task wait "$tid" --timeout 900 >/dev/null
  echo "$(now) - $t0" | bc >>"$work/task"
  ctl task report "$tid" --json >"$work/r$i.json"
  # The report's own times: started (work session asked for) → ended (signed).
  python3 - "$work/r$i.json" >>"$work/phases" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["report"]
cmds = r.get("commands", [])
work = (cmds[-1]["started-at"] + cmds[-1]["duration"] - r["started-at"]) / 1e6 if cmds else 0
total = (r["ended-at"] - r["started-at"]) / 1e6
print(f"{work:.2f} {total - work:.2f} {total:.2f}")
PY
done

cold=$(median <"$work/cold"); task=$(median <"$work/task")
echo "== a trivial task, median of $runs (cold session starts measured in the same run)"
printf 'cold session start (start → ready): %.2f s\n' "$cold"
printf 'task submit → DONE (wall, client side): %.2f s\n' "$task"
awk '{ print $1 }' "$work/phases" | median | awk '{ printf "  work: start of the task → last worker command done: %.2f s\n", $1 }'
awk '{ print $2 }' "$work/phases" | median | awk '{ printf "  wind-down: commit, fresh verification session, report: %.2f s\n", $1 }'
echo "$task $cold" | awk '{ printf "ratio, whole task / two cold starts: %.2f\n", $1 / (2 * $2) }'
