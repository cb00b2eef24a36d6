#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Task load benchmark (issue 18, "Load": the task half; bench-load.sh has the
# clients and the floods), printed as figures (nothing here asserts a speed):
#  - a burst: B tasks (default 16) submitted at once, each on a project of
#    its own, queued by [Sessions] MaxSessions (the installed default, 8;
#    each task needs a work and a verification session in turn): how many
#    end DONE, the burst's total time (first submit → last DONE) and each
#    task's submit → DONE (p50, max), and the most that waited at once
#    (Task.Step "queued");
#  - a run: N tasks (default 500) one after another on one project, every
#    session restored from the boot snapshot: each task's submit → DONE
#    (p50, p99, max, per hundred), and every 50 tasks vivariumd's RSS and
#    open descriptors, the vivarium-* units loaded, the state directory's
#    size outside the repositories, its report files, and the repository's
#    own size apart (a commit a task is history, and grows by design):
#    what must stay flat stays flat, or the figures say where it grows.
# Run on the systemd test host, with a btrfs for the projects:
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build build -- bench/bench-task-load.sh
# Knobs: VIVARIUM_TEST_BENCH_BURST (16), VIVARIUM_TEST_BENCH_TASKS (500),
# VIVARIUM_TEST_BENCH_SAMPLE (50). Set VIVARIUM_TEST_HOST_TIMEOUT to fit:
# 500 tasks take 8–12 minutes here.
# Removes what it made (its projects, their tasks' sessions are gone with
# them) on any exit; leaves the image.
set -euo pipefail

burst=${VIVARIUM_TEST_BENCH_BURST:-16}
tasks=${VIVARIUM_TEST_BENCH_TASKS:-500}
sample=${VIVARIUM_TEST_BENCH_SAMPLE:-50}
readonly STATE=/var/lib/vivarium
work=$(mktemp -d /var/tmp/vivarium-bench.XXXXXX)
chmod 0755 "$work"
projects=()

ctl () { vivariumctl --no-interaction "$@"; }
now () { date +%s.%N; }
die () { echo "bench-task-load: $*" >&2; exit 1; }
cleanup () {
  local p
  for p in "${projects[@]}"; do ctl project delete "$p" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# p50 / p99 / max of the numbers on standard input, "p50 p99 max" in seconds.
quantiles () {
  sort -g | awk '{ a[NR] = $1 } END {
    if (NR == 0) { print "- - -"; exit }
    i50 = int((NR + 1) / 2); i99 = int(NR * 0.99 + 0.999); if (i99 < 1) i99 = 1; if (i99 > NR) i99 = NR
    printf "%.2f %.2f %.2f\n", a[i50], a[i99], a[NR] }'
}
daemon_pid () { systemctl show -P MainPID vivariumd.service; }
rss_mib () { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$(daemon_pid)/status"; }
fds () { find "/proc/$(daemon_pid)/fd" -mindepth 1 -maxdepth 1 | wc -l; }
units () { systemctl list-units --all --plain --no-legend 'vivarium-*' | wc -l; }
# The state outside the images (they do not change here) and the repositories (history).
state_kib () {
  du -sk --exclude="$STATE/images" --exclude='repo' "$STATE" | awk '{ print $1 }'
}
repo_kib () { du -sk "$STATE/projects/$1/repo" | awk '{ print $1 }'; }
report_files () { find "$STATE/reports" -type f | wc -l; }

command -v vivariumctl >/dev/null || die "vivariumctl is not installed: run this on the test host"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] || die "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
ctl image freeze tiny >/dev/null 2>&1 || true

cat >"$work/worker.sh" <<'WORKER'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'date > stamp.txt' >/dev/null
vivariumctl worker finish --summary "Wrote stamp.txt." --verify "test -f stamp.txt"
WORKER
chmod 0755 "$work/worker.sh"

# Submits, then waits: prints "SECONDS OUTCOME" (client side, submit → end).
one_task () {  # PROJECT
  local t0 tid outcome
  t0=$(now)
  tid=$(ctl task submit "$1" tiny --script "$work/worker.sh" --instructions "Write stamp.txt.") || { echo "- SUBMIT-REFUSED"; return; }
  outcome=$(ctl task wait "$tid" --timeout 900 2>&1 | grep -oE 'DONE|NEEDS_INPUT|IN_PROGRESS|FAILED' | head -n 1)
  echo "$(echo "$(now) - $t0" | bc) ${outcome:-NONE}"
}

# --- the burst -----------------------------------------------------------------------

for i in $(seq 0 $((burst - 1))); do
  ctl project create "load-$i" --quota 16M >/dev/null || die "cannot create project load-$i"
  projects+=("load-$i")
done
# The last MaxSessions= of the defaults and the administrator's files, as the daemon reads them.
max_sessions=$({ cat /usr/share/vivarium/defaults.conf /etc/vivarium/vivarium.conf /etc/vivarium/conf.d/*.conf 2>/dev/null || true; } |
  sed -n 's/^MaxSessions=//p' | tail -n 1)
echo "== a burst of $burst tasks submitted at once, one project each (MaxSessions=${max_sessions:-?})"
: >"$work/queued"
(  # the most tasks queued at once, sampled every 0.2 s while the burst runs
  while [ ! -e "$work/burst-done" ]; do
    ctl task list 2>/dev/null | awk '$3 == "queued"' | wc -l >>"$work/queued"
    sleep 0.2
  done
) &
sampler=$!
t0=$(now)
for i in $(seq 0 $((burst - 1))); do
  one_task "load-$i" >"$work/burst-$i" &
done
wait $(jobs -p | grep -vx "$sampler")
total=$(echo "$(now) - $t0" | bc)
touch "$work/burst-done"
wait "$sampler" || true
cat "$work"/burst-* >"$work/burst"
printf 'DONE: %d of %d; burst total (first submit → last end): %.2f s\n' \
  "$(grep -c ' DONE$' "$work/burst" || true)" "$burst" "$total"
read -r p50 _ max < <(awk '{ print $1 }' "$work/burst" | quantiles)
printf 'each task, submit → end: p50 %s s, max %s s; the most queued at once: %s\n' "$p50" "$max" \
  "$(sort -n "$work/queued" | tail -n 1)"
grep -v ' DONE$' "$work/burst" | sed 's/^/  not DONE: /' || true

# --- the run ---------------------------------------------------------------------------

project=load-0
echo "== $tasks tasks one after another on project $project (sessions restored)"
printf '%6s %8s %6s %6s %10s %8s %9s\n' tasks "RSS MiB" fds units "state KiB" reports "repo KiB"
sample_row () { printf '%6s %8s %6s %6s %10s %8s %9s\n' "$1" "$(rss_mib)" "$(fds)" "$(units)" "$(state_kib)" "$(report_files)" "$(repo_kib "$project")"; }
sample_row 0
: >"$work/run"
t0=$(now)
for i in $(seq 1 "$tasks"); do
  one_task "$project" >>"$work/run"
  if [ $((i % sample)) -eq 0 ] || [ "$i" -eq "$tasks" ]; then sample_row "$i"; fi
done
run_total=$(echo "$(now) - $t0" | bc)
printf 'DONE: %d of %d in %.0f s\n' "$(grep -c ' DONE$' "$work/run" || true)" "$tasks" "$run_total"
read -r p50 p99 max < <(awk '{ print $1 }' "$work/run" | quantiles)
printf 'submit → DONE: p50 %s s, p99 %s s, max %s s\n' "$p50" "$p99" "$max"
echo "per hundred (p50 s): $(awk '{ print int((NR - 1) / 100), $1 }' "$work/run" | sort -k1,1n -k2,2g |
  awk '{ v[$1] = v[$1] " " $2; n[$1]++ } END { for (k = 0; k in n; k++) { split(substr(v[k], 2), a, " "); printf "%s%.2f", (k ? " · " : ""), a[int((n[k] + 1) / 2)] } print "" }')"
grep -v ' DONE$' "$work/run" | head -n 5 | sed 's/^/  not DONE: /' || true
