#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Faults of the services around a running task (issue 18, "Faults at every
# step"), on a real systemd host with real QEMU, real git and the pretend
# internet (lib.sh):
#   1. the egress proxy of an allowlist task's work session is killed
#      (kill -9 of its unit's MainPID) while the worker sleeps: the way out
#      is gone and nothing falls back, so the daemon ends the task FAILED at
#      once, in systemd's words ("the work session's egress proxy died: …
#      (signal, SIGKILL)"), after committing what the worker did; the worker
#      is not blamed and not left to run on a machine cut off;
#   2. polkit is restarted (systemctl restart polkit) while a task waits in
#      Task.Ask: the worker's calls after it still work (they need no polkit),
#      the caller's Answer is authorized by the new polkitd, an unprivileged
#      user is still refused with NotAuthorized, and the task ends DONE;
#   3. vivariumd is killed (-9) the moment it creates the first file of a
#      task's report (an inotify watcher on the report directory): the
#      restarted daemon reports the task FAILED ("the daemon stopped while it
#      ran") in a report that verifies, and no half-written report or
#      command log file is left;
#   4. the work session's helper (vivarium-session-helper, the one process
#      that reads the guest's bytes) is killed (-9) while the worker sleeps:
#      the session ends failed naming the helper, the task FAILED with that
#      reason, after committing what the worker did;
#   5. the verification session's helper is killed (-9) while the
#      verification runs: the task ends, its verification inconclusive
#      (never a pass) and the signed report saying why (verification.reason
#      names the helper), its report signed, nothing left.
# After each: no session, worker or egress unit, no runtime directory of
# them, no nftables table or rule of the session uids, no process of those
# uids; the repository passes git fsck; the next task of the project is DONE.
# (The gateway killed under an agent task is test-gateway.sh's; vivariumd
# killed is test-task-crash.sh's; the bus restarted test-reconnect.sh's;
# QEMU killed test-task-faults.sh's; the state disk full test-task-faults-disk.sh's.)
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-faults-services.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git nft setpriv "$PY"
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
systemctl cat polkit.service >/dev/null 2>&1 || bail_out "polkit.service is not installed"

tmpd=$(mktemp -d /var/tmp/vivarium-faults-services.XXXXXX) || bail_out "cannot create a scratch directory"
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service 'vivarium-egress-*'

pretend_internet_up "$tmpd"
# The daemon reads the host's addresses and resolv.conf at start: start it
# on the pretend internet.
systemctl stop "$UNIT" >/dev/null 2>&1
at_exit systemctl stop "$UNIT"
retry_until 40 0.5 busctl call "$BUS" "$OBJ" "$MGR" ListSessions || bail_out "vivariumd does not start"

git_demo () { git --git-dir="$STATE/projects/demo/repo" "$@"; }
session_uid () { prop "$1" Session Uid 2>/dev/null | awk '{ print $NF }'; }
files_of () {  # REPORT_JSON
  report_field "$1" "' '.join(sorted(f['path'] + ':' + f['change'] for f in r['files']))"
}
our_units () { systemctl list-units --all --plain --no-legend 'vivarium-session-*' 'vivarium-helper-*' 'vivarium-worker-*' 'vivarium-egress-*' 2>&1; }
no_units_left () { [ -z "$(our_units)" ]; }
runtime_left () {
  find "$RUNTIME/sessions" "$RUNTIME/workers" "$RUNTIME/egress" "$RUNTIME/tasks" -mindepth 1 -maxdepth 1 2>/dev/null
}

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
assert_success "create a project" -- ctl project create demo --quota 64M
work=$STATE/projects/demo/work
tables_before=$(nft list tables 2>&1)

# What a fault must not leave behind.
nothing_left () {  # WHAT UID...
  local what=$1 uid left=
  shift
  retry_until 100 0.1 no_units_left
  assert_eq "" "$(our_units)" "$what: no session, worker or egress unit is left"
  assert_eq "" "$(runtime_left)" "$what: no runtime directory of a session, worker, proxy or task is left"
  assert_eq "$tables_before" "$(nft list tables 2>&1)" "$what: the nftables tables are the ones from before"
  # A session's own rules name its uid alone; the table's range rules
  # (FIRST-LAST) name the first session uid too, and are not a leftover.
  for uid in "$@"; do
    [ -n "$uid" ] || { left="$left (a uid not read)"; continue; }
    nft list table inet vivarium_guard 2>/dev/null | grep -qE "(^|[^0-9-])$uid([^0-9-]|\$)" && left="$left nft:$uid"
    pgrep -u "$uid" >/dev/null && left="$left process:$uid"
  done
  assert_eq "" "$left" "$what: no nftables rule and no process of the task's uids ($*) is left"
  assert_success "$what: the repository is consistent (git fsck)" -- git_demo fsck --no-progress
}

kill_main () {  # WHAT UNIT PID: kill -9 a unit's main process, or say why not
  if [ "${3:-0}" -gt 1 ]; then
    assert_success "kill -9 $1 ($2, PID $3)" -- kill -9 "$3"
  else
    not_ok "kill -9 $1" "MainPID of '$2': '$3'"
  fi
}

cat >"$tmpd/next.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo next > next.txt'
vivariumctl worker finish --summary "Wrote next.txt." --verify "test -f next.txt"
EOF
chmod 0755 "$tmpd/next.sh"
next_task_done () {  # WHAT
  local t
  t=$(ctl task submit demo "$IMAGE" --script "$tmpd/next.sh" 2>&1)
  assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t" 300)" "$1: the next task of the project is DONE ($t)" \
    "$(task_prop "$OBJ/tasks/$t" Reason 2>&1)"
}

# --- 1. the egress proxy killed under an allowlist task ---------------------------

pyworker egress '
import time
s, out, err = exec_guest("wget -q -O - http://allowed.test/token > before.txt 2>&1; echo $? > before.status")
time.sleep(120)
exec_guest("wget -q -O - http://allowed.test/token > after.txt 2>&1; true")
finish("Fetched the token twice.", "")'
task=$(submit_allowlist demo "$tmpd/egress.py" "Fetch the token." allowed.test)
assert_contains "$task" "$OBJ/tasks/" "submit an allowlist task (egress_allow allowed.test)"
if retry_until 1500 0.2 test -s "$work/before.status"; then
  ok "the worker's first call went through"
else
  not_ok "the worker's first call went through" "$(task_prop "$task" Reason 2>&1)"
fi
assert_contains "$(cat "$work/before.txt" 2>&1)" "$PI_TOKEN" "the guest fetched allowed.test through its proxy (the positive control)"
spath=$(task_prop "$task" Session)
sid=${spath##*/}
uid_work=$(session_uid "$spath")
proxy_unit=vivarium-egress-$sid.service
uid_proxy=$(systemctl show -P UID "$proxy_unit")
proxy_pid=$(systemctl show -P MainPID "$proxy_unit")
wunit=vivarium-worker-${task##*/}.service
assert_eq "active" "$(systemctl is-active "$proxy_unit")" "the work session's proxy runs ($proxy_unit, PID $proxy_pid, uid $uid_proxy)"
assert_eq "activating" "$(systemctl show -P ActiveState "$wunit")" "the worker sleeps for 120 s (a oneshot unit: activating)"
t_kill=$(date +%s%N)
kill_main "the proxy's process" "$proxy_unit" "$proxy_pid"
# Only the daemon reacting to the proxy's death can end the task within
# this Wait: the worker sleeps on for two minutes.
assert_eq "FAILED" "$(wait_outcome "$task" 30)" "the task ends FAILED within 30 s of the kill"
diag "kill → FAILED in $((($(date +%s%N) - ${t_kill:-0}) / 1000000)) ms"
reason=$(task_prop "$task" Reason 2>&1)
assert_contains "$reason" "egress proxy" "the reason names the egress proxy ($reason)"
assert_contains "$reason" "SIGKILL" "and how it ended, in systemd's words"
assert_not_contains "$reason" "without calling Finish" "the worker is not blamed"
ctl task report "${task##*/}" --json >"$tmpd/egress-report.json" 2>&1
assert_eq "before.status:added before.txt:added" "$(files_of "$tmpd/egress-report.json")" \
  "what the worker did before the kill is committed"
assert_contains "$(report_field "$tmpd/egress-report.json" "r['outcome-reason']")" "egress proxy" "the signed report gives the reason"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/egress-report.json"
assert_eq "" "$(pgrep -f "workers/${task##*/}/")" "no worker process is left"
nothing_left "(1) proxy killed" "$uid_work" "$uid_proxy"
next_task_done "(1) proxy killed"

# --- 2. polkit restarted while a task asks ------------------------------------------

create_test_user user || bail_out "cannot create a test user"
pyworker asker '
exec_guest("echo one > one.txt")
answer = _call(os.environ["VIVARIUM_TASK"], "Task", "Ask", ("Go on?",), "(s)").unpack()[0]
exec_guest("echo %s > two.txt" % "".join(c for c in answer if c.isalnum()))
finish("Wrote one.txt, asked, wrote the answer to two.txt.", "")'
tp=$(submit demo "$tmpd/asker.py" "test -f one.txt && test -f two.txt")
assert_contains "$tp" "$OBJ/tasks/" "submit a task whose worker asks"
assert_eq "NEEDS_INPUT" "$(wait_outcome "$tp" 300)" "it asks (NEEDS_INPUT)"
spath=$(task_prop "$tp" Session)
uid_p=$(session_uid "$spath")
# polkitd is activated on demand: root's Wait above went through it.
pk_pid=$(systemctl show -P MainPID polkit.service)
assert_ne "0" "$pk_pid" "polkitd runs (PID $pk_pid)"
assert_success "systemctl restart polkit" -- systemctl restart polkit.service
retry_until 100 0.1 systemctl is-active -q polkit.service
assert_ne "$pk_pid" "$(systemctl show -P MainPID polkit.service)" "polkitd is another process now"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" gdbus call --system --dest "$BUS" \
  --object-path "$tp" --method "$IFACE.Task.Answer" "nope"
assert_eq "NEEDS_INPUT" "$(task_prop "$tp" Outcome 2>&1)" "the refused Answer changed nothing"
assert_success "root's Answer is authorized by the new polkitd" -- call "$tp" Task.Answer "yes42"
assert_eq "DONE" "$(wait_outcome "$tp" 300)" "the task ends DONE" "$(task_prop "$tp" Reason 2>&1)"
assert_eq "yes42" "$(git_demo show HEAD:two.txt 2>&1)" "the worker's call after the restart went through: two.txt holds the answer"
get_json "$(task_prop "$tp" Report)" "$tmpd/polkit-report.json"
assert_eq "pass caller" \
  "$(report_field "$tmpd/polkit-report.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "its verification passed"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/polkit-report.json"
nothing_left "(2) polkit restarted" "$uid_p"
next_task_done "(2) polkit restarted"

# --- 3. vivariumd killed as it stores the report --------------------------------------
# The report and its command log are written temp+fsync+rename on the main
# loop, in one go with the rest of the task's end: no Step can be seen from
# outside there. A watcher on the report directory (inotify, IN_CREATE)
# kills the daemon (-9, its MainPID) the moment the first file of this
# task's report is created: the command log's temporary file, ~4 MiB (1000
# commands with 4 KiB of argv each, the in-memory cap) still being written.

cat >"$tmpd/watch.py" <<'PYEOF'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x100) < 0:  # IN_CREATE
    print('inotify: %s' % os.strerror(ctypes.get_errno()), flush=True); sys.exit(1)
print('ready', flush=True)
while True:
    buf, off = os.read(fd, 65536), 0
    while off < len(buf):
        _, _, _, ln = struct.unpack_from('iIII', buf, off)
        name = buf[off + 16:off + 16 + ln].rstrip(b'\0').decode()
        off += 16 + ln
        if name.startswith(sys.argv[2] + '.'):
            os.kill(int(sys.argv[3]), 9)
            print('killed at ' + name, flush=True)
            sys.exit(0)
PYEOF
pyworker chatty '
pad = "x" * 4000
for i in range(1000):
    exec_guest("true %d %s" % (i, pad))
exec_guest("echo chatty > chatty.txt")
finish("Ran a thousand commands.", "")'
tc=$(submit demo "$tmpd/chatty.py")
assert_contains "$tc" "$OBJ/tasks/" "submit a task whose worker runs 1000 commands"
cid=${tc##*/}
uid_c=
retry_until 600 0.2 has_session "$tc" && uid_c=$(session_uid "$(task_prop "$tc" Session)")
dpid=$(systemctl show -P MainPID "$UNIT")
"$PY" "$tmpd/watch.py" "$STATE/reports" "$cid" "$dpid" >"$tmpd/watch.out" 2>&1 &
watcher=$!
stop_watcher () { kill -0 "$watcher" 2>/dev/null && kill "$watcher"; return 0; }
at_exit stop_watcher
retry_until 50 0.1 grep -q ready "$tmpd/watch.out" || not_ok "the watcher on $STATE/reports is ready" "$(cat "$tmpd/watch.out")"
daemon_gone () { [ "$(systemctl show -P MainPID "$UNIT")" != "$dpid" ]; }
if retry_until 2400 0.1 daemon_gone; then
  assert_contains "$(cat "$tmpd/watch.out")" "killed at $cid." "vivariumd (PID $dpid) is killed as it writes the report ($(tail -n 1 "$tmpd/watch.out"))"
else
  not_ok "vivariumd (PID $dpid) is killed as it writes the report" "$(cat "$tmpd/watch.out")" "$(task_prop "$tc" Outcome 2>&1) $(task_prop "$tc" Step 2>&1)"
fi
wait "$watcher" 2>/dev/null
diag "the report directory after the kill: $(find "$STATE/reports" -name "$cid.*" -printf '%f ')"
assert_success "the daemon starts again on the next call" -- retry_until 60 0.5 call "$OBJ" Manager.ListReports
assert_eq "FAILED" "$(task_prop "$tc" Outcome 2>&1)" "the task is FAILED"
assert_eq "the daemon stopped while it ran" "$(task_prop "$tc" Reason 2>&1)" "saying why"
get_json "$OBJ/reports/$cid" "$tmpd/chatty.json"
assert_success "its report verifies" -- vivariumctl report verify "$tmpd/chatty.json"
# A report is ID.json beside ID.commands.jsonl; a temporary file of
# g_file_set_contents (NAME.XXXXXX) is one half-written.
assert_eq "" "$(find "$STATE/reports" -type f | grep -Ev '/[0-9a-z]+\.(json|commands\.jsonl)$')" \
  "no half-written report or command log is left"
orphans=
for f in "$STATE"/reports/*.commands.jsonl; do
  [ -e "$f" ] && [ ! -e "${f%.commands.jsonl}.json" ] && orphans="$orphans ${f##*/}"
done
assert_eq "" "$orphans" "every command log has its report"
nothing_left "(3) vivariumd killed at the report" "$uid_c"
next_task_done "(3) vivariumd killed at the report"

# --- 4. the session helper killed under a task ---------------------------------------

pyworker helper '
import time
exec_guest("echo before > before-helper.txt")
time.sleep(120)
finish("Wrote before-helper.txt.", "")'
tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/helper.py" 2>&1)
assert_success "submit a task whose worker sleeps ($tid)" -- test -n "$tid"
th=$OBJ/tasks/$tid
if retry_until 1500 0.2 test -s "$work/before-helper.txt"; then
  ok "the worker's first call went through"
else
  not_ok "the worker's first call went through" "$(task_prop "$th" Reason 2>&1)"
fi
spath=$(task_prop "$th" Session)
sid=${spath##*/}
uid_h=$(session_uid "$spath")
helper_unit=vivarium-helper-$sid.service
helper_pid=$(systemctl show -P MainPID "$helper_unit")
assert_eq "$uid_h" "$(systemctl show -P UID "$helper_unit")" "the work session's helper runs as the session's uid ($helper_unit)"
kill_main "the session helper" "$helper_unit" "$helper_pid"
assert_eq "FAILED" "$(wait_outcome "$th" 30)" "the task ends FAILED within 30 s of the kill"
reason=$(task_prop "$th" Reason 2>&1)
assert_contains "$reason" "session helper" "the reason names the session helper ($reason)"
assert_contains "$reason" "SIGKILL" "and how it ended, in systemd's words"
assert_not_contains "$reason" "without calling Finish" "the worker is not blamed"
ctl task report "${th##*/}" --json >"$tmpd/helper-report.json" 2>&1
assert_contains "$(files_of "$tmpd/helper-report.json")" "before-helper.txt:added" \
  "what the worker did before the kill is committed"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/helper-report.json"
nothing_left "(4) session helper killed" "$uid_h"
next_task_done "(4) session helper killed"

# --- 5. the verification session's helper killed ----------------------------------------

# The verification sleeps in the fresh session; its helper is killed there:
# the task still ends, its verification inconclusive (never "pass"), its
# report signed and verifying, nothing left.
cat >"$tmpd/verify.sh" <<'EOF2'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo v > verify-me.txt'
vivariumctl worker finish --summary "Wrote verify-me.txt." --verify "sleep 60; test -f verify-me.txt"
EOF2
chmod 0755 "$tmpd/verify.sh"
tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/verify.sh" 2>&1)
assert_success "submit a task whose verification sleeps ($tid)" -- test -n "$tid"
tv=$OBJ/tasks/$tid
verifying () { [ "$(task_prop "$tv" Step 2>/dev/null)" = verify ]; }
if retry_until 1500 0.2 verifying; then
  ok "the task reaches its verification"
else
  not_ok "the task reaches its verification" "Step '$(task_prop "$tv" Step 2>&1)'"
fi
# The verification session is running (its command sleeping) once its
# helper's session says so; the work session and its helper are gone by then.
vhelper_running () {
  local vsid
  vhelper=$(systemctl list-units --plain --no-legend 'vivarium-helper-*' | awk 'NR == 1 { print $1 }')
  [ -n "$vhelper" ] || return 1
  vsid=${vhelper#vivarium-helper-}
  [ "$(prop "$OBJ/sessions/${vsid%.service}" Session State 2>/dev/null)" = running ]
}
vhelper=
retry_until 600 0.2 vhelper_running || diag "no running verification session seen (helper unit '$vhelper')"
vpid=$(systemctl show -P MainPID "$vhelper" 2>/dev/null)
uid_v=$(systemctl show -P UID "$vhelper" 2>/dev/null)
kill_main "the verification session's helper" "$vhelper" "$vpid"
outcome=$(wait_outcome "$tv" 60)
assert_ne "IN_PROGRESS" "$outcome" "the task ends within 60 s of the kill ($outcome)"
ctl task report "$tid" --json >"$tmpd/verify-report.json" 2>&1
assert_eq "inconclusive" "$(report_field "$tmpd/verify-report.json" "r['verification']['verdict']")" \
  "its verification is inconclusive, not a pass"
vreason=$(report_field "$tmpd/verify-report.json" "r['verification'].get('reason', '')")
assert_contains "$vreason" "session helper" "the signed report says why: the session helper ($vreason)"
ctl task report "$tid" >"$tmpd/verify-report.txt" 2>&1
assert_contains "$(cat "$tmpd/verify-report.txt")" '  reason: "' "and its text shows the reason as an untrusted detail line"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/verify-report.json"
nothing_left "(5) verification helper killed" "$uid_v"
next_task_done "(5) verification helper killed"

done_testing
