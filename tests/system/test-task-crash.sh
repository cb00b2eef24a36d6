#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Faults at the late steps of a task (issue 18, "Faults at every step"):
#  (a) vivariumd is killed (SIGKILL) while the verification command runs,
#  (b) and again while the daemon commits the work,
#  (c) the state disk is full when the report is stored.
# After each: the task is FAILED with a reason that says what happened and a
# report that verifies (or, where no report could be stored, says so, and no
# half-written file is left); no session or worker unit, no runtime
# directory of its sessions and no nftables entry of their uids are left;
# the project's repository is consistent; and the next task of the project
# ends DONE.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-crash.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git nft "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-crash.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

git_demo () { git --git-dir="$STATE/projects/demo/repo" "$@"; }
some_session_runs () { systemctl list-units --plain --no-legend 'vivarium-session-*' | grep -q .; }
step_of () { task_prop "$1" Step 2>/dev/null; }
step_is () { [ "$(step_of "$1")" = "$2" ]; }
session_uid () { prop "$1" Session Uid 2>/dev/null | awk '{ print $NF }'; }
unmount_reports () { ! mountpoint -q "$STATE/reports" || umount "$STATE/reports"; }
daemon_down () { [ "$(systemctl show -P ActiveState vivariumd.service)" != active ]; }

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
assert_success "create a project" -- ctl project create demo --quota 64M
work=$STATE/projects/demo/work

cat >"$tmpd/worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo done > work.txt && dd if=/dev/urandom of=big.bin bs=1M count=24 2>/dev/null' || exit 1
vivariumctl worker finish --summary "Wrote work.txt and big.bin." --verify ""
EOF
cat >"$tmpd/next.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo next > next.txt'
vivariumctl worker finish --summary "Wrote next.txt." --verify "test -f next.txt"
EOF

# What a dead daemon must not leave: checked after its restart.
nothing_left () {  # WHAT UID...
  local what=$1 uid left
  shift
  assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' 'vivarium-worker-*' 2>&1)" \
    "$what: no session or worker unit is left"
  assert_eq "" "$(find /run/vivarium/sessions /run/vivarium/workers -mindepth 1 -maxdepth 1 2>/dev/null)" \
    "$what: no runtime directory of a session or a worker is left"
  left=
  # A session's own rules name its uid alone; the table's range rules
  # (FIRST-LAST) name the first session uid too, and are not a leftover.
  for uid in "$@"; do
    [ -n "$uid" ] || { left="$left (a uid not read)"; continue; }
    nft list table inet vivarium_guard 2>/dev/null | grep -qE "(^|[^0-9-])$uid([^0-9-]|\$)" && left="$left $uid"
  done
  assert_eq "" "$left" "$what: no nftables entry of the task's session uids ($*) is left"
  # A report is ID.json beside ID.commands.jsonl; a temporary file of
  # g_file_set_contents (NAME.XXXXXX) would be one half-written.
  assert_eq "" "$(find "$STATE/reports" -type f 2>/dev/null | grep -Ev '/[0-9a-z]+\.(json|commands\.jsonl)$')" \
    "$what: no half-written report file"
  assert_success "$what: the repository is consistent (git fsck)" -- git_demo fsck --no-progress
  assert_success "$what: the working tree is readable against it (git status)" -- \
    git_demo --work-tree="$work" status --porcelain
}

next_task_done () {  # WHAT
  local t
  t=$(ctl task submit demo "$IMAGE" --script "$tmpd/next.sh" 2>&1)
  assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t" 300)" "$1: the next task of the project is DONE ($t)"
}

# The restarted daemon's word on a task killed with it.
judge_interrupted () {  # WHAT TASK_ID
  local r=$OBJ/reports/$2
  assert_success "$1: the daemon starts again on the next call" -- retry_until 60 0.5 call "$OBJ" Manager.ListReports
  assert_eq "FAILED" "$(task_prop "$OBJ/tasks/$2" Outcome 2>&1)" "$1: the task is FAILED"
  assert_eq "the daemon stopped while it ran" "$(task_prop "$OBJ/tasks/$2" Reason 2>&1)" "$1: saying why"
  get_json "$r" "$tmpd/$2.json"
  assert_success "$1: its report verifies" -- vivariumctl report verify "$tmpd/$2.json"
}

# --- (a) killed while the verification command runs ----------------------------

ta=$(ctl task submit demo "$IMAGE" --script "$tmpd/worker.sh" --verify "sleep 120" 2>&1)
pa=$OBJ/tasks/$ta
assert_eq "IN_PROGRESS" "$(task_prop "$pa" Outcome 2>&1)" "(a) submit a task whose verification sleeps ($ta)"
retry_until 600 0.2 has_session "$pa"
uid_work=$(session_uid "$(task_prop "$pa" Session)")
assert_success "(a) the task reaches its verification" -- retry_until 1500 0.2 step_is "$pa" verify
assert_success "(a) its verification session runs" -- \
  retry_until 600 0.2 some_session_runs
vsid=$(systemctl list-units --plain --no-legend 'vivarium-session-*' | awk '{ print $1 }' | head -n 1)
vsid=${vsid#vivarium-session-}; vsid=${vsid%.service}
uid_verify=$(session_uid "$OBJ/sessions/$vsid")
sleep 3
assert_eq "IN_PROGRESS verify" "$(task_prop "$pa" Outcome) $(step_of "$pa")" "(a) the task still verifies" \
  "$(ctl task show "$ta" 2>&1)"
head_before=$(git_demo rev-parse HEAD)
assert_success "(a) kill vivariumd (SIGKILL) while it verifies" -- systemctl kill --signal=KILL vivariumd.service
retry_until 60 0.5 daemon_down
judge_interrupted "(a)" "$ta"
assert_contains "$(git_demo show --name-only --format= HEAD 2>&1)" "work.txt" \
  "(a) the work committed before the crash is the project's head"
assert_eq "$head_before" "$(git_demo rev-parse HEAD)" "(a) and the head did not move"
nothing_left "(a)" "$uid_work" "$uid_verify"
next_task_done "(a)"

# --- (b) killed while the daemon commits ---------------------------------------

ctl task submit demo "$IMAGE" --script "$tmpd/worker.sh" > "$tmpd/tb" 2>&1
tb=$(cat "$tmpd/tb")
pb=$OBJ/tasks/$tb
assert_eq "IN_PROGRESS" "$(task_prop "$pb" Outcome 2>&1)" "(b) submit a task that leaves 24 MiB to commit ($tb)"
retry_until 600 0.2 has_session "$pb"
uid_b=$(session_uid "$(task_prop "$pb" Session)")
head_before=$(git_demo rev-parse HEAD)
retry_until 3000 0.05 step_is "$pb" commit
step=$(step_of "$pb")
assert_success "(b) kill vivariumd (SIGKILL) at step $step" -- systemctl kill --signal=KILL vivariumd.service
diag "(b) killed at step: $step (commit expected; a later one if the commit was quicker than the poll)"
retry_until 60 0.5 daemon_down
judge_interrupted "(b)" "$tb"
head_after=$(git_demo rev-parse HEAD)
case $head_after in
  "$head_before") ok "(b) the head is the commit before the task: the interrupted commit left no half" ;;
  *) assert_contains "$(git_demo show --name-only --format= HEAD 2>&1)" "big.bin" \
       "(b) or the whole commit of the task (work.txt and big.bin) landed" ;;
esac
nothing_left "(b)" "$uid_b"
next_task_done "(b)"

# --- (c) the state disk is full when the report is stored ----------------------

# A full filesystem over the report directory: the daemon writes new reports
# there (temporary file, fsync, rename); the ones before are hidden, not lost.
mount -t tmpfs -o size=256k vivarium-test-full "$STATE/reports" || bail_out "cannot mount a tmpfs on $STATE/reports"
at_exit unmount_reports
dd if=/dev/zero of="$STATE/reports/filler" bs=4k 2>/dev/null
tc=$(ctl task submit demo "$IMAGE" --script "$tmpd/next.sh" 2>&1)
pc=$OBJ/tasks/$tc
assert_eq "FAILED" "$(wait_outcome "$pc" 300)" "(c) a task whose report cannot be stored is FAILED ($tc)"
reason=$(task_prop "$pc" Reason 2>&1)
assert_contains "$reason" "the report could not be signed or stored" "(c) saying so" "$reason"
assert_contains "$reason" "No space left on device" "(c) and why"
assert_eq "/" "$(task_prop "$pc" Report 2>&1)" "(c) it names no report"
assert_eq "filler" "$(ls -A "$STATE/reports")" "(c) and no part of one is on the full disk"
unmount_reports
nothing_left "(c)"
assert_success "(c) the reports from before are all there" -- test -s "$STATE/reports/$ta.json"
next_task_done "(c)"

done_testing
