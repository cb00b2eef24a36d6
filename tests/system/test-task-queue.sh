#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Tasks past [Sessions] MaxSessions wait (issue 18, "queued by MaxSessions"):
# with MaxSessions=1 and MaxQueuedTasks=1, a second task waits (Step
# "queued", no session), a third is Busy and says why, StartSession is Busy
# while the first task holds its slot (also between its two sessions), a
# waiting task cancelled ends FAILED with a signed report, and a waiting task
# starts by itself when the slot is free and ends DONE. No moment has more
# session units than MaxSessions.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-queue.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly CONF=/etc/vivarium/conf.d/50-test-queue.conf

require_systemd_host vivariumctl gdbus busctl git "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-queue.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

install -d -m 0755 /etc/vivarium/conf.d
printf '[Sessions]\nMaxSessions=1\n\n[Tasks]\nMaxQueuedTasks=1\n' > "$CONF"
at_exit rm -f "$CONF"
systemctl restart vivariumd.service 2>/dev/null

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
for p in first second third; do
  assert_success "create project $p" -- ctl project create "$p" --quota 64M
done

# The first task's worker holds its session until the test lets it go: it
# waits (bounded) for /project/go, which the test writes from the host.
cat >"$tmpd/hold.sh" <<'EOF'
#!/bin/sh
i=0
while ! vivariumctl worker exec -- test -e /project/go; do
  i=$((i + 1)); [ $i -lt 600 ] || exit 1
  sleep 0.5
done
vivariumctl worker exec -- rm -f /project/go
vivariumctl worker exec --cwd /project -- sh -c 'echo held > held.txt'
vivariumctl worker finish --summary "Held the slot until told." --verify "test -e held.txt"
EOF
cat >"$tmpd/quick.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo waited > waited.txt'
vivariumctl worker finish --summary "Waited its turn." --verify "test -e waited.txt"
EOF


# Samples the number of session units while the test runs (bounded: at most
# 3000 samples); the largest count seen is the file's last line.
sample_units () {
  local most=0 n
  for _ in $(seq 3000); do
    n=$(systemctl list-units --plain --no-legend 'vivarium-session-*' 2>/dev/null | grep -c .)
    [ "$n" -gt "$most" ] && { most=$n; echo "$most" >> "$tmpd/most"; }
    sleep 0.2
  done
}
echo 0 > "$tmpd/most"
sample_units &
sampler=$!
stop_sampler () { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; return 0; }
at_exit stop_sampler

t1=$(ctl task submit first "$IMAGE" --script "$tmpd/hold.sh" 2>&1)
p1=$OBJ/tasks/$t1
assert_eq "IN_PROGRESS" "$(task_prop "$p1" Outcome 2>&1)" "the first task is submitted ($t1)"
retry_until 600 0.1 has_session "$p1"
assert_eq "work" "$(task_prop "$p1" Step 2>&1)" "it has the one session slot: Step work"

t2=$(ctl task submit second "$IMAGE" --script "$tmpd/quick.sh" 2>&1)
p2=$OBJ/tasks/$t2
assert_eq "IN_PROGRESS" "$(task_prop "$p2" Outcome 2>&1)" "a second task is accepted ($t2)"
assert_eq "queued" "$(task_prop "$p2" Step 2>&1)" "and waits: Step queued"
assert_eq "/" "$(task_prop "$p2" Session 2>&1)" "with no session"

out=$(ctl task submit third "$IMAGE" --script "$tmpd/quick.sh" 2>&1)
assert_ne "0" "$?" "a third task, past MaxQueuedTasks=1, is refused" "$out"
assert_contains "$out" "MaxQueuedTasks" "and the refusal names the bound" "$out"
assert_dbus_error "$ERR.Busy" -- call "$OBJ" Manager.SubmitTask third "$IMAGE" "instructions" "{'script': <b'#!/bin/sh\n'>}"
assert_dbus_error "$ERR.Busy" -- call "$OBJ" Manager.StartSession "" "$IMAGE" "{}"

assert_success "cancel the waiting task" -- call "$p2" Task.Cancel
assert_eq "FAILED" "$(wait_outcome "$p2" 60)" "it ends FAILED"
assert_contains "$(task_prop "$p2" Reason 2>&1)" "cancelled while it waited for a session" "and says it never got a session"
ctl task report "$t2" --json > "$tmpd/cancelled.json" 2>&1
assert_success "its signed report verifies" -- vivariumctl report verify "$tmpd/cancelled.json"
assert_eq "0" "$(report_field "$tmpd/cancelled.json" "len(r['commands'])")" "and lists no command: no machine ran for it"

t3=$(ctl task submit third "$IMAGE" --script "$tmpd/quick.sh" 2>&1)
p3=$OBJ/tasks/$t3
assert_eq "queued" "$(task_prop "$p3" Step 2>&1)" "the queue has room again: the third task waits ($t3)"

# Let the first go: it commits, verifies in a fresh session (its slot is
# its own between the two), and only then does the third start.
touch "$STATE/projects/first/work/go"
assert_eq "DONE" "$(wait_outcome "$p1" 300)" "the first task is DONE"
assert_eq "DONE" "$(wait_outcome "$p3" 300)" "the waiting task started by itself and is DONE"
assert_eq "pass" "$(ctl task report "$t3" --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["report"]["verification"]["verdict"])' 2>&1)" \
  "its verification passed"
queued_us=$(busctl get-property "$BUS" "$p3" "$IFACE.Task" Timings | grep -o '"queued" [0-9]*' | awk '{ print $2 }')
assert_eq "yes" "$([ "${queued_us:-0}" -gt 0 ] && echo yes)" "its Timings say how long it waited (${queued_us:-none} µs)"
queued_us1=$(busctl get-property "$BUS" "$p1" "$IFACE.Task" Timings | grep -o '"queued" [0-9]*' | awk '{ print $2 }')
assert_eq "0" "${queued_us1:-none}" "the first task waited 0 µs"

stop_sampler
assert_eq "1" "$(tail -n 1 "$tmpd/most")" "never more than MaxSessions=1 session unit at once"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' 'vivarium-worker-*')" \
  "no session or worker unit is left"

done_testing
