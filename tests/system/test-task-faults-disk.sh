#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The state disk full at the commit (issue 18, "Faults at every step"), on a
# real systemd host with real QEMU and real git: the projects' filesystem
# (the btrfs the harness binds in as /var/lib/vivarium/projects, where each
# project's dataset and repository live) is filled by a file of this test
# (fallocate, then dd up to ENOSPC) after the worker wrote 8 MiB of random
# bytes and before it calls Finish, so the daemon's commit cannot store the
# objects. The task must end FAILED with a reason that says the disk is full
# (ENOSPC: "No space left on device"), in a report that verifies; the
# repository passes git fsck with its head where it was before the task, no
# temporary object or lock file is left in it, no report file is half
# written, no session or worker unit or runtime directory is left; and once
# the space is freed the next task of the project is DONE and commits.
# (The report's own disk full is test-task-crash.sh's (c).)
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-faults-disk.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git fallocate df "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
# The fill must hit the repository and not the reports: they are apart.
[ "$(stat -c %d "$STATE/projects")" != "$(stat -c %d "$STATE/reports" 2>/dev/null || stat -c %d "$STATE")" ] ||
  bail_out "$STATE/reports is on the projects' filesystem: filling it would test the report's disk instead"

tmpd=$(mktemp -d /var/tmp/vivarium-faults-disk.XXXXXX) || bail_out "cannot create a scratch directory"
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

readonly FILLER=$STATE/projects/vivarium-test-filler
[ -e "$FILLER" ] && bail_out "$FILLER exists already: not ours, left alone"
free_space () { rm -f "$FILLER" "$FILLER.2" && sync -f "$STATE/projects"; }
at_exit free_space

git_demo () { git --git-dir="$STATE/projects/demo/repo" "$@"; }
files_of () {  # REPORT_JSON
  report_field "$1" "' '.join(sorted(f['path'] + ':' + f['change'] for f in r['files']))"
}
our_units () { systemctl list-units --all --plain --no-legend 'vivarium-session-*' 'vivarium-worker-*' 'vivarium-egress-*' 2>&1; }
no_units_left () { [ -z "$(our_units)" ]; }

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
assert_success "create a project" -- ctl project create demo --quota 64M
work=$STATE/projects/demo/work
head_before=$(git_demo rev-parse HEAD 2>&1)

# The worker writes, says so with ready.txt (written last), and sleeps
# while the test fills the disk; then it finishes.
cat >"$tmpd/worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'dd if=/dev/urandom of=big.bin bs=1M count=8 2>/dev/null && sync && echo ready > ready.txt' || exit 1
sleep 15
vivariumctl worker finish --summary "Wrote big.bin." --verify ""
EOF
chmod 0755 "$tmpd/worker.sh"
tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/worker.sh" 2>&1)
tpath=$OBJ/tasks/$tid
assert_eq "IN_PROGRESS" "$(task_prop "$tpath" Outcome 2>&1)" "submit a task that leaves 8 MiB to commit ($tid)"
if retry_until 1500 0.2 test -s "$work/ready.txt"; then
  ok "the worker wrote its files"
else
  not_ok "the worker wrote its files" "$(task_prop "$tpath" Reason 2>&1)"
fi
assert_eq "IN_PROGRESS work" "$(task_prop "$tpath" Outcome 2>&1) $(task_prop "$tpath" Step 2>&1)" \
  "the task is still at the work step (the worker sleeps before Finish)"

# --- the disk runs full ------------------------------------------------------------

avail=$(df -B1 --output=avail "$STATE/projects" | tail -n 1 | tr -d ' ')
# btrfs may refuse all of what df says is free at once: then a little less, and dd the rest.
fallocate -l "$avail" "$FILLER" 2>/dev/null || fallocate -l $((avail - 4 * MIB)) "$FILLER" 2>/dev/null
dd if=/dev/zero of="$FILLER.2" bs=64k conv=fsync 2>/dev/null
diag "filled $STATE/projects: $(df -h --output=size,used,avail "$STATE/projects" | tail -n 1)"
if dd if=/dev/urandom of="$STATE/projects/vivarium-test-probe" bs=1M count=1 conv=fsync 2>"$tmpd/probe.err"; then
  not_ok "the projects' filesystem is full: a 1 MiB write fails" "it succeeded"
else
  assert_contains "$(cat "$tmpd/probe.err")" "No space left on device" "the projects' filesystem is full: a 1 MiB write fails with ENOSPC"
fi
rm -f "$STATE/projects/vivarium-test-probe"

assert_eq "FAILED" "$(wait_outcome "$tpath" 120)" "the task whose commit meets the full disk is FAILED"
reason=$(task_prop "$tpath" Reason 2>&1)
assert_contains "$reason" "No space left on device" "its reason says the disk is full ($reason)"
assert_not_contains "$reason" "without calling Finish" "the worker is not blamed"
rpath=$(task_prop "$tpath" Report 2>&1)
assert_ne "/" "$rpath" "it has a report (the reports are on another disk)"
get_json "$rpath" "$tmpd/report.json"
assert_contains "$(report_field "$tmpd/report.json" "r['outcome-reason']")" "No space left on device" \
  "the signed report gives the reason"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/report.json"
diag "report: files $(files_of "$tmpd/report.json"), commit $(report_field "$tmpd/report.json" "r.get('commit')")"

retry_until 100 0.1 no_units_left
assert_eq "" "$(our_units)" "no session or worker unit is left"
assert_eq "" "$(find "$RUNTIME/sessions" "$RUNTIME/workers" -mindepth 1 -maxdepth 1 2>/dev/null)" \
  "no runtime directory of a session or worker is left"
assert_eq "" "$(find "$STATE/reports" -type f 2>/dev/null | grep -Ev '/[0-9a-z]+\.(json|commands\.jsonl)$')" \
  "no half-written report file"
assert_eq "$head_before" "$(git_demo rev-parse HEAD 2>&1)" "the repository's head is where it was before the task"
assert_eq "" "$(find "$STATE/projects/demo/repo" \( -name 'tmp_*' -o -name '*.lock' -o -name 'tmp_obj_*' \) 2>/dev/null)" \
  "no temporary object or lock file is left in the repository"
assert_eq "" "$(find "$STATE/projects/demo" -maxdepth 1 -name 'project.json.*' 2>/dev/null)" \
  "no half-written project record (its update met the full disk too)"

free_space
assert_success "with the space freed, the repository is consistent (git fsck)" -- git_demo fsck --no-progress
assert_success "and the working tree is readable against it (git status)" -- git_demo --work-tree="$work" status --porcelain

# --- space again: the next task works ------------------------------------------------

cat >"$tmpd/next.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo next > next.txt'
vivariumctl worker finish --summary "Wrote next.txt." --verify "test -f next.txt"
EOF
chmod 0755 "$tmpd/next.sh"
t2=$(ctl task submit demo "$IMAGE" --script "$tmpd/next.sh" 2>&1)
assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t2" 300)" "the next task of the project is DONE ($t2)" \
  "$(task_prop "$OBJ/tasks/$t2" Reason 2>&1)"
ctl task report "$t2" --json >"$tmpd/next.json" 2>&1
assert_contains "$(files_of "$tmpd/next.json")" "next.txt:added" "it commits its file"
assert_eq "$(report_field "$tmpd/next.json" "r['commit']")" "$(git_demo rev-parse HEAD 2>&1)" "its commit is the project's head"
assert_success "the repository is consistent after it (git fsck)" -- git_demo fsck --no-progress
assert_success "its report verifies" -- vivariumctl report verify "$tmpd/next.json"

done_testing
