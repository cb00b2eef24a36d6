#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Faults under a running task (issue 22 §2): the work session's QEMU is
# killed (`systemctl kill -s KILL` on its unit) while the worker sleeps.
# The daemon must notice at once — not when the worker's next call fails
# half a minute later — stop the worker, commit what there is, and say that
# the machine died and how (systemd's Result for the unit), not blame the
# worker. Nothing may be left running.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-faults.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-faults.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$(project_path demo)" "create a project"
work=$STATE/projects/demo/work

# --- the work session's machine dies under a sleeping worker ------------------

cat >"$tmpd/worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo before > before.txt' || exit 1
sleep 120
vivariumctl worker finish --summary "Slept." --verify "true"
EOF
chmod 0755 "$tmpd/worker.sh"
tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/worker.sh" 2>&1)
tpath=$OBJ/tasks/$tid
assert_eq "IN_PROGRESS" "$(task_prop "$tpath" Outcome 2>&1)" "submit a script task ($tid)"
if retry_until 1200 0.1 test -f "$work/before.txt"; then
  ok "the worker's first call went through"
else
  not_ok "the worker's first call went through" "$(task_prop "$tpath" Reason 2>&1)"
fi
wunit=vivarium-worker-$tid.service
spath=$(task_prop "$tpath" Session)
sunit=$(prop "$spath" Session Unit)
assert_contains "$sunit" "vivarium-session-" "the task names its work session ($sunit)"
assert_eq "activating" "$(systemctl show -P ActiveState "$wunit")" "the worker runs and sleeps 120 s (a oneshot unit: activating)"

t_kill=$(date +%s%N)
assert_success "kill the work session's QEMU" -- systemctl kill -s KILL "$sunit"
# The worker still sleeps for two minutes: only the daemon noticing the
# death can end the task within this Wait.
assert_eq "FAILED" "$(wait_outcome "$tpath" 20)" "the task ends FAILED within 20 s of the kill"
diag "kill → FAILED in $((($(date +%s%N) - t_kill) / 1000000)) ms (commit and report included)"
reason=$(task_prop "$tpath" Reason 2>&1)
assert_contains "$reason" "machine died (systemd: signal, SIGKILL)" "the reason says the work session's machine died, and how ($reason)"
assert_not_contains "$reason" "without calling Finish" "the worker is not blamed"
retry_until 150 0.1 unit_unloaded "$wunit"
assert_ne "loaded" "$(systemctl show -P LoadState "$wunit")" "the worker's unit is gone"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' 'vivarium-worker-*')" \
  "no session or worker unit is left"
assert_eq "" "$(pgrep -f "workers/$tid/")" "no worker process is left"

ctl task report "$tid" --json >"$tmpd/report.json" 2>&1
assert_eq "before.txt:added" \
  "$(report_field "$tmpd/report.json" "' '.join(sorted(f['path'] + ':' + f['change'] for f in r['files']))")" \
  "what the worker did before the death is committed"
assert_eq "$(report_field "$tmpd/report.json" "r['commit']")" "$(prop "$(project_path demo)" Project Head)" \
  "the report's commit is the project's head"
assert_contains "$(report_field "$tmpd/report.json" "r['outcome-reason']")" "machine died" "the signed report gives the reason"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/report.json"

# The project is free again: the next task runs.
cat >"$tmpd/next.sh" <<'EOF'
#!/bin/sh
vivariumctl worker finish --summary "Nothing." --verify ""
EOF
chmod 0755 "$tmpd/next.sh"
tid2=$(ctl task submit demo "$IMAGE" --script "$tmpd/next.sh" 2>&1)
assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$tid2" 300)" "the next task of the project is DONE"

done_testing
