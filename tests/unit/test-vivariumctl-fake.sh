#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-vivariumctl-fake.sh VIVARIUMCTL MAKE_SIGNED_REPORT XML
#
# The client's side of the project, task, report and worker verbs against a
# stand-in daemon (test-vivariumctl-fake-daemon.py) on a private bus: what
# each verb sends (the fake records every call), the exit status of each
# outcome of `task wait`, that reports come out byte for byte (a saved
# `task report --json` verifies), that the worker's bytes are raw and
# everything else from the daemon is escaped, that typed errors keep their
# names, and that with no daemon on the bus a verb says so in one line.
# Needs dbus-daemon and /usr/bin/python3 with GObject introspection;
# without them it fails, it does not skip.
set -u

ctl=${1:-}
maker=${2:-}
xml=${3:-}
here=$(dirname "$(realpath "$0")")
for f in "$ctl" "$maker"; do
  [ -x "$f" ] || { echo "FAIL: usage: $0 VIVARIUMCTL MAKE_SIGNED_REPORT XML (got '$f')" >&2; exit 1; }
done
[ -f "$xml" ] || { echo "FAIL: no introspection XML at '$xml'" >&2; exit 1; }
for prog in dbus-daemon /usr/bin/python3; do
  command -v "$prog" >/dev/null || { echo "FAIL: $prog is needed and missing" >&2; exit 1; }
done
/usr/bin/python3 -c 'import gi; gi.require_version("Gio", "2.0")' ||
  { echo "FAIL: /usr/bin/python3 has no GObject introspection (python3-gi)" >&2; exit 1; }

export LC_ALL=C.UTF-8
unset DBUS_SESSION_BUS_ADDRESS VIVARIUM_TASK VIVARIUM_SESSION

tmp=$(mktemp -d)
bus_pid=
fake_pid=
cleanup() {
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null
  [ -n "$bus_pid" ] && kill "$bus_pid" 2>/dev/null
  # KEEP=1 leaves the call log and outputs behind, to read after a failure.
  if [ -n "${KEEP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

failures=0
checks=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# --- a private bus and the fake on it ---
cat >"$tmp/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$tmp/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_type="method_call"/>
    <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
dbus-daemon --config-file="$tmp/bus.conf" --nofork 2>"$tmp/bus.err" &
bus_pid=$!
for _ in $(seq 50); do [ -S "$tmp/bus" ] && break; sleep 0.1; done
[ -S "$tmp/bus" ] || { echo "FAIL: the private bus did not start: $(cat "$tmp/bus.err")" >&2; exit 1; }
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$tmp/bus"

# A bus without the daemon: one line naming the D-Bus error, status 1.
for verb in "task list" "project show demo" "report show r1"; do
  checks=$((checks + 1))
  # shellcheck disable=SC2086
  "$ctl" $verb >"$tmp/out" 2>"$tmp/err" </dev/null
  status=$?
  if [ "$status" -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ] ||
     ! grep -q '^vivariumctl: .*\[org\.freedesktop\.DBus\.Error\.ServiceUnknown\]$' "$tmp/err"; then
    fail "vivariumctl $verb with no daemon on the bus: status $status, $(cat "$tmp/err" "$tmp/out")"
  fi
done
VIVARIUM_TASK=/org/vivarium/Vivarium1/tasks/t1 "$ctl" worker ask "Which?" >"$tmp/out" 2>"$tmp/err" </dev/null
checks=$((checks + 1))
grep -q 'ServiceUnknown\]$' "$tmp/err" || fail "worker ask with no daemon: $(cat "$tmp/err")"

"$maker" "$tmp/keys" "$tmp/good.json" >"$tmp/fingerprint" ||
  { echo "FAIL: make-signed-report failed" >&2; exit 1; }
/usr/bin/python3 "$here/test-vivariumctl-fake-daemon.py" "$xml" "$tmp/good.json" "$tmp/calls" \
  >"$tmp/fake.out" 2>"$tmp/fake.err" &
fake_pid=$!
for _ in $(seq 100); do grep -q ready "$tmp/fake.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$tmp/fake.out" ||
  { echo "FAIL: the fake daemon did not start: $(cat "$tmp/fake.err")" >&2; exit 1; }

# expect STATUS ARGS... : runs vivariumctl (stdin from $input, default
# /dev/null) and checks its exit status.
input=/dev/null
expect() {
  local want=$1 got
  shift
  checks=$((checks + 1))
  "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" <"$input"
  got=$?
  [ "$got" -eq "$want" ] || fail "vivariumctl $* exited $got, expected $want: $(cat "$tmp/err")"
}
# out_is TEXT / out_has TEXT / err_has TEXT / out_lacks BYTES_REGEX
out_is() { checks=$((checks + 1)); [ "$(cat "$tmp/out")" = "$1" ] || fail "stdout is '$(cat "$tmp/out")', expected '$1'"; }
out_has() { checks=$((checks + 1)); grep -qF -- "$1" "$tmp/out" || fail "stdout lacks '$1': $(cat "$tmp/out")"; }
err_has() { checks=$((checks + 1)); grep -qF -- "$1" "$tmp/err" || fail "stderr lacks '$1': $(cat "$tmp/err")"; }
no_escape_bytes() {
  checks=$((checks + 1))
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$tmp/$1"; then
    fail "control bytes reached $1: $(od -c "$tmp/$1" | head -5)"
  fi
}
# last_call METHOD : the fake's record of the last call of METHOD, as JSON.
last_call() { grep "\"method\": \"$1\"" "$tmp/calls" | tail -1; }
# call_is METHOD PYTHON_EXPR : the expression holds for that record's "args" (as a).
call_is() {
  checks=$((checks + 1))
  last_call "$1" | /usr/bin/python3 -c "import json,sys; a=json.load(sys.stdin)['args']; sys.exit(0 if ($2) else 1)" ||
    fail "$1 was sent as $(last_call "$1"), expected: $2"
}

# --- projects ---
expect 0 project create demo --quota 64M --clone file:///srv/demo.git
out_has "Created project “demo”."
out_has "ssh-ed25519 AAAAfake"
call_is CreateProject 'a == ["demo", 64 << 20, {"clone": "file:///srv/demo.git"}]'
expect 0 project create demo --quota 2GiB
call_is CreateProject 'a == ["demo", 2 << 30, {}]'
expect 0 project list
out_has "demo"
expect 0 project list --json
out_has '"QuotaBytes" : 67108864'
expect 0 project show demo
out_has "ssh-ed25519 AAAAfake vivarium-project-demo"
expect 0 project log demo -n 3
call_is Log 'a == [3]'
out_has 'task t-done: \x1b[31mred\x1b[0m subject'
no_escape_bytes out
expect 0 project remote demo ssh://git@example.org/demo.git
call_is SetRemote 'a == ["ssh://git@example.org/demo.git"]'
expect 0 project publish demo
expect 0 project delete demo
expect 1 project show other
err_has "[org.vivarium.Vivarium1.Error.NotFound]"

# --- task submit sends the script's bytes and only the options given ---
printf '#!/bin/sh\n\001\377 bytes, not text\n' >"$tmp/script.sh"
expect 0 task submit demo tiny --script "$tmp/script.sh"
out_is "t-new"
call_is SubmitTask "a[:3] == ['demo', 'tiny', ''] and a[3] == {'worker': 'script', 'script': '$(od -An -tx1 "$tmp/script.sh" | tr -d ' \n')'} and a[4] == {'worker': 's', 'script': 'ay'}"
echo "Add a README." >"$tmp/instructions.txt"
expect 0 task submit demo tiny --script "$tmp/script.sh" --instructions-file "$tmp/instructions.txt" \
  --verify 'test -f README' --timeout 60 --memory 512 --cpus 2 --tool exec --tool ask
call_is SubmitTask "a[2] == 'Add a README.\n' and a[3]['verify'] == 'test -f README' and a[3]['timeout'] == 60 and a[3]['memory'] == 512 and a[3]['cpus'] == 2 and a[3]['tools'] == ['exec', 'ask'] and a[4] == {'worker': 's', 'script': 'ay', 'verify': 's', 'timeout': 'u', 'memory': 'u', 'cpus': 'u', 'tools': 'as'}"

# --- task submit --agent: the worker is the model loop, no script is sent ---
expect 0 task submit demo tiny --agent --instructions 'Fix the failing test.' --verify 'make check' \
  --timeout 900 --egress allowlist --group debian --allow 'pypi.org'
out_is "t-new"
call_is SubmitTask "a[:3] == ['demo', 'tiny', 'Fix the failing test.'] and a[3] == {'worker': 'agent', 'verify': 'make check', 'timeout': 900, 'egress': 'allowlist', 'egress_groups': ['debian'], 'egress_allow': ['pypi.org']} and a[4]['worker'] == 's' and 'script' not in a[4]"
expect 0 task submit demo tiny --agent --instructions-file "$tmp/instructions.txt"
call_is SubmitTask "a[2] == 'Add a README.\n' and a[3] == {'worker': 'agent'}"

# --- task transcript --follow: each new entry once, escaped, to the end ---
expect 0 task transcript t-agent --follow
checks=$((checks + 1))
[ "$(grep -c '"method": "GetTranscript"' "$tmp/calls")" -ge 3 ] ||
  fail "transcript --follow did not poll until the end: $(grep -c GetTranscript "$tmp/calls") calls"
for entry in '] model' '] tool-call (cut at the cap)' '] note'; do
  checks=$((checks + 1))
  [ "$(grep -cF -- "$entry" "$tmp/out")" -eq 1 ] || fail "'$entry' is not printed exactly once: $(cat "$tmp/out")"
done
out_has "    I will add a README."
out_has 'Task “t-agent” ended: DONE'
checks=$((checks + 1))
[ "$(grep -c 'reached its cap' "$tmp/out")" -eq 1 ] || fail "the cap is not noted exactly once: $(cat "$tmp/out")"
checks=$((checks + 1))
grep -q '^\[00:00:00\] forged' "$tmp/out" && fail "a transcript entry forged a line of its own: $(cat "$tmp/out")"
no_escape_bytes out
# A task that never ends is followed until Ctrl-C, which ends it cleanly.
checks=$((checks + 1))
"$ctl" task transcript t-stuck --follow >"$tmp/out" 2>"$tmp/err" </dev/null &
follow_pid=$!
for _ in $(seq 50); do grep -q '] model' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
sleep 1.5
kill -INT "$follow_pid"
wait "$follow_pid"
status=$?
[ "$status" -eq 130 ] || fail "transcript --follow after Ctrl-C exited $status, expected 130: $(cat "$tmp/err")"
checks=$((checks + 1))
[ "$(grep -c '] model' "$tmp/out")" -eq 1 ] || fail "an unchanged transcript was printed again: $(cat "$tmp/out")"
err_has "stopped following task “t-stuck”; it goes on"
checks=$((checks + 1))
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "transcript --follow after Ctrl-C: $(cat "$tmp/err")"
expect 1 task transcript nosuch --follow
err_has "[org.vivarium.Vivarium1.Error.NotFound]"

# --- task wait: one exit status per outcome ---
expect 0 task wait t-done --timeout 5
out_is "DONE"
call_is Wait 'a == [5]'
expect 2 task wait t-input
call_is Wait 'a == [3600]'
out_has "NEEDS_INPUT"
out_has "The worker asks (its own words, unchecked):"
out_has '  > Which licence?'
out_has '  > \x1b[31mOutcome: DONE\x1b[0m \xe2\x80\xaeevil'
no_escape_bytes out
checks=$((checks + 1))
grep -q '^Outcome: DONE' "$tmp/out" && fail "the worker's question produced a line of its own: $(cat "$tmp/out")"
expect 3 task wait t-run --timeout 0
out_is "IN_PROGRESS"
checks=$((checks + 1))
[ ! -s "$tmp/err" ] || fail "task wait of a running task wrote to stderr: $(cat "$tmp/err")"
expect 3 task wait t-limit
out_is "IN_PROGRESS"
err_has "hard limit of 60 s"
expect 1 task wait t-fail
out_is "FAILED"
err_has "the worker exited with status 3"
err_has "[org.vivarium.Vivarium1.Error.Failed]"
expect 1 task wait nosuch
err_has "[org.vivarium.Vivarium1.Error.NotFound]"

# --- the other task verbs ---
expect 0 task list
out_has "t-input"
expect 0 task list --json
out_has '"Outcome" : "NEEDS_INPUT"'
expect 0 task show t-input
out_has "NEEDS_INPUT"
out_has '  > Which licence?'
no_escape_bytes out
expect 0 task answer t-input "GPL-2.0-or-later"
call_is Answer 'a == ["GPL-2.0-or-later"]'
expect 1 task answer t-busy "too late"
err_has "[org.vivarium.Vivarium1.Error.BadState]"
err_has "not waiting for an answer"
expect 0 task cancel t-run
expect 1 task cancel t-busy
err_has "[org.vivarium.Vivarium1.Error.BadState]"
expect 1 task report t-run
err_has "[org.vivarium.Vivarium1.Error.BadState]"

# --- reports come out exactly as the daemon has them ---
expect 0 task report t-done --json
checks=$((checks + 1))
cmp -s "$tmp/out" "$tmp/good.json" || fail "task report --json changed the signed file"
cp "$tmp/out" "$tmp/saved.json"
expect 0 report verify "$tmp/saved.json"
out_has "$(cat "$tmp/fingerprint")"
expect 0 report show r1 --json
checks=$((checks + 1))
cmp -s "$tmp/out" "$tmp/good.json" || fail "report show --json changed the signed file"
expect 0 report show r1
checks=$((checks + 1))
[ "$(cat "$tmp/out")" = "$(printf 'Vivarium report r1 \u2014 DONE \u2713\n  worker claim: \x1b[2Jhi')" ] ||
  fail "report show to a pipe is not the daemon's text byte for byte: $(od -c "$tmp/out" | head)"
expect 0 task report t-done
checks=$((checks + 1))
cmp -s "$tmp/out" <(printf 'Vivarium report r1 \u2014 DONE \u2713\n  worker claim: \x1b[2Jhi\n') ||
  fail "task report to a pipe is not the daemon's text byte for byte"
expect 0 report list
out_has "r1"
out_has "t-done"
expect 1 report show r2
err_has "[org.vivarium.Vivarium1.Error.NotFound]"

# --- worker verbs: the guest's bytes, raw; the status, the guest's ---
export VIVARIUM_TASK=/org/vivarium/Vivarium1/tasks/t1 VIVARIUM_SESSION=/org/vivarium/Vivarium1/sessions/s1
expect 0 worker exec --cwd /project -- ls -la
call_is Exec 'a == [["ls", "-la"], [], "/project", 600]'
checks=$((checks + 1))
cmp -s "$tmp/out" <(printf '\000\001raw \377\033[2J\n') || fail "worker exec changed the guest's stdout: $(od -c "$tmp/out")"
checks=$((checks + 1))
cmp -s "$tmp/err" <(printf 'warning: \376\n') || fail "worker exec changed the guest's stderr (not a terminal): $(od -c "$tmp/err")"
expect 7 worker exec --timeout 5 fail --timeout 9
call_is Exec 'a == [["fail", "--timeout", "9"], [], "", 5]'
expect 0 worker read /project/README
checks=$((checks + 1))
cmp -s "$tmp/out" <(printf '\000\377file\r\n\033]0;title\007') || fail "worker read changed the file's bytes"
call_is ReadFile 'a == ["/project/README"]'
printf '\000\377 all of stdin\n' >"$tmp/stdin.bin"
input=$tmp/stdin.bin
expect 0 worker write /project/NEW
input=/dev/null
call_is WriteFile "a == ['/project/NEW', '$(od -An -tx1 "$tmp/stdin.bin" | tr -d ' \n')']"
input=/dev/null
expect 0 worker write /project/EMPTY
call_is WriteFile 'a == ["/project/EMPTY", ""]'
expect 0 worker ask "Which licence?"
out_is "MIT, as in the other projects"
call_is Ask 'a == ["Which licence?"]'
echo "Added a README; all tests pass." >"$tmp/summary.txt"
expect 0 worker finish --summary-file "$tmp/summary.txt" --verify 'test -f README'
call_is Finish 'a == ["Added a README; all tests pass.\n", "test -f README"]'
expect 0 worker finish
call_is Finish 'a == ["", ""]'
# With only the task known, the session is the task's.
unset VIVARIUM_SESSION
expect 0 worker exec -- true
checks=$((checks + 1))
[ "$(grep -c '"method": "Exec"' "$tmp/calls")" -eq 3 ] || fail "worker exec via the task's Session did not reach Exec"
unset VIVARIUM_TASK

# --- egress: the options sent, the dry run's exit status, the logs ---
expect 0 session start tiny --egress allowlist --group debian --group pypi --allow 'Example.org:8443' --allow '*.cdn.example'
out_is "s1"
call_is StartSession "a[:2] == ['', 'tiny'] and a[2] == {'egress': 'allowlist', 'egress_groups': ['debian', 'pypi'], 'egress_allow': ['Example.org:8443', '*.cdn.example']} and a[3] == {'egress': 's', 'egress_groups': 'as', 'egress_allow': 'as'}"
expect 0 session start tiny --memory 256
call_is StartSession "a[2] == {'memory': 256}"
calls_before=$(wc -l <"$tmp/calls")
# Refused before the bus: a bad rule, a bad mode, rules for a mode without
# them, too many rules, a bad group name.
expect 2 session start tiny --allow 'a..b'
err_has "Bad egress rule “a..b”"
expect 2 session start tiny --egress wide
err_has "Unknown egress mode “wide”"
expect 2 session start tiny --egress open --allow deb.debian.org
err_has "apply only to --egress allowlist"
expect 2 task submit demo tiny --script "$tmp/script.sh" --group 'no/such'
many=()
for i in $(seq 257); do many+=(--allow "h$i.example"); done
expect 2 session start tiny "${many[@]}"
err_has "At most 256 --allow rules"
expect 2 egress check '*.debian.org'
expect 2 egress check deb.debian.org:0
expect 2 egress check --session s1 --group debian deb.debian.org
checks=$((checks + 1))
[ "$(wc -l <"$tmp/calls")" -eq "$calls_before" ] || fail "a refused egress option still reached the bus: $(tail -n +$((calls_before + 1)) "$tmp/calls")"
expect 0 session start tiny "${many[@]:2}"
call_is StartSession "len(a[2]['egress_allow']) == 256"
expect 0 task submit demo tiny --script "$tmp/script.sh" --egress none
call_is SubmitTask "a[3]['egress'] == 'none' and a[4]['egress'] == 's'"
expect 0 task submit demo tiny --script "$tmp/script.sh" --group github --allow 'registry.example:5000'
call_is SubmitTask "a[3]['egress_groups'] == ['github'] and a[3]['egress_allow'] == ['registry.example:5000'] and 'egress' not in a[3] and a[4]['egress_groups'] == 'as'"

expect 0 egress check deb.debian.org
out_is "allowed: allowed by deb.debian.org (group debian)"
call_is CheckEgress "a[:2] == ['deb.debian.org', {}] and a[2] == {}"
expect 1 egress check evil.example:443
out_is 'denied: no rule allows evil.example:443\x1b[2J'
no_escape_bytes out
expect 0 egress check --group debian --allow mine.example mine.example:8080
call_is CheckEgress "a[1] == {'egress_groups': ['debian'], 'egress_allow': ['mine.example']} and a[2] == {'egress_groups': 'as', 'egress_allow': 'as'}"
expect 0 egress check --session s1 deb.debian.org
call_is CheckEgress "a[1] == {'session': '/org/vivarium/Vivarium1/sessions/s1'} and a[2] == {'session': 'o'}"
expect 1 egress check --session nosuch deb.debian.org
err_has "[org.vivarium.Vivarium1.Error.NotFound]"
expect 1 egress check missing.example
out_is ""
err_has "[org.vivarium.Vivarium1.Error.NotFound]"

expect 0 session show s1
out_has "Egress mode:         allowlist"
out_has "Egress state:        failed"
out_has 'Egress state reason: the proxy exited\x1b[2J with status 1'
out_has "Egress rules:        allow deb.debian.org (group debian)"
out_has "                     deny *.evil.example (session)"
no_escape_bytes out
expect 0 session show s2
checks=$((checks + 1))
grep -q Egress "$tmp/out" && fail "session show printed egress lines the daemon does not have: $(cat "$tmp/out")"
expect 0 session show s1 --json
out_has '"EgressState" : "failed"'

# The session's log is 2500 entries: three pages of at most 1000, in order.
expect 0 session egress-log s1 --json
checks=$((checks + 1))
[ "$(grep -c '"method": "GetEgressLog"' "$tmp/calls")" -eq 3 ] || fail "egress-log did not page: $(grep GetEgressLog "$tmp/calls")"
call_is GetEgressLog 'a == [2000, 1000]'
checks=$((checks + 1))
/usr/bin/python3 - "$tmp/out" <<'PY' || fail "session egress-log --json is not the log: $(head -c 600 "$tmp/out")"
import json, sys
log = json.load(open(sys.argv[1]))
assert len(log) == 2500, len(log)
assert [e['host'] for e in log] == ['h%d.example' % i for i in range(2500)]
assert log[0] == {'time': '2025-12-02T00:21:00.123Z', 'host': 'h0.example', 'port': 443, 'via': 'proxy',
                  'verdict': 'denied', 'reason': 'reason 0', 'bytes_up': 517, 'bytes_down': 40960,
                  'duration_ms': 812}, log[0]
assert log[2499]['time'] == '2025-12-02T01:02:39.123Z', log[2499]['time']
PY
expect 0 session egress-log s1
checks=$((checks + 1))
[ "$(wc -l <"$tmp/out")" -eq 2501 ] || fail "the egress-log table is not a header and 2500 rows: $(wc -l <"$tmp/out")"
out_has "h2499.example:443"
expect 1 session egress-log s2
err_has "did not advance"
err_has "[org.vivarium.Vivarium1.Error.Protocol]"
expect 0 task egress-log t1
out_has 'evil.example\x1b[2J allowed: forged:443'
out_has "(invalid):443"
no_escape_bytes out
checks=$((checks + 1))
grep -q '^allowed: forged' "$tmp/out" && fail "a guest's host name drew a line of its own: $(cat "$tmp/out")"
expect 0 task egress-log t1 --json
checks=$((checks + 1))
/usr/bin/python3 -c "import json,sys; log=json.load(open(sys.argv[1])); assert log[1]['host'] == 'evil.example\x1b[2J\nallowed: forged', log" "$tmp/out" ||
  fail "task egress-log --json changed the host: $(cat "$tmp/out")"

# --- secrets: the value only in the descriptor, the options sent, the listing escaped ---
printf 'the value\n' >"$tmp/value"
expect 0 secret add TOKEN --host api.example.org --value-file "$tmp/value"
out_is "Stored the secret “TOKEN”."
call_is AddSecret "a[:3] == ['TOKEN', ['api.example.org'], {}] and a[4] == 'the value\n'"
checks=$((checks + 1))
last_call AddSecret | grep -q 'the value' && [ "$(last_call AddSecret | grep -o 'the value' | wc -l)" -eq 1 ] ||
  fail "the value is not (only) in what the descriptor carried: $(last_call AddSecret)"
printf 'from stdin' >"$tmp/value2"
input=$tmp/value2
expect 0 secret add GH_TOKEN --host api.github.com --host '*.githubusercontent.com' --header X-Key --format 'token {}' --replace
input=/dev/null
call_is AddSecret "a[:3] == ['GH_TOKEN', ['api.github.com', '*.githubusercontent.com'], {'header': 'X-Key', 'format': 'token {}', 'replace': True}] and a[4] == 'from stdin'"
checks=$((checks + 1))
printf 'piped value' | "$ctl" secret add PIPED --host api.example.org >"$tmp/out" 2>"$tmp/err" ||
  fail "secret add from a pipe: $(cat "$tmp/err")"
call_is AddSecret "a[0] == 'PIPED' and a[4] == 'piped value'"
# From a terminal: asked for, not echoed, handed over through a pipe.
checks=$((checks + 1))
/usr/bin/python3 - "$ctl" >"$tmp/tty.out" 2>&1 <<'PYEOF' || fail "secret add from a terminal: $(cat "$tmp/tty.out")"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], 'secret', 'add', 'TYPED', '--host', 'api.example.org'])
seen = b''
def read_for(seconds, until=None):
    global seen
    end = time.time() + seconds
    while time.time() < end and (until is None or until not in seen):
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                return
read_for(10, b'not shown')
os.write(fd, b'typed value\n')
read_for(10, b'Stored')
for _ in range(100):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
else:
    os.kill(pid, 9)
    sys.exit('vivariumctl did not finish: %r' % seen)
assert os.WEXITSTATUS(status) == 0, seen
assert b'Value of the secret TYPED' in seen, seen
assert b'typed value' not in seen, 'the value was echoed: %r' % seen
PYEOF
call_is AddSecret "a[0] == 'TYPED' and a[4] == 'typed value\n'"
expect 1 secret add TAKEN --host api.example.org --value-file "$tmp/value"
err_has "[org.vivarium.Vivarium1.Error.Exists]"
calls_before=$(wc -l <"$tmp/calls")
expect 2 secret add 1BAD --host api.example.org --value-file "$tmp/value"
err_has "environment variable"
expect 2 secret add NOHOST --value-file "$tmp/value"
err_has "--host HOST is required"
expect 2 secret add T --host 203.0.113.7 --value-file "$tmp/value"
err_has "no IP address"
expect 2 secret add T --host api.example.org:443 --value-file "$tmp/value"
expect 2 secret add T --host api.example.org --format 'Bearer' --value-file "$tmp/value"
err_has "exactly one {}"
expect 2 secret add T --host api.example.org --header 'X Key' --value-file "$tmp/value"
expect 2 secret add T --host api.example.org "the value"
expect 1 secret add T --host api.example.org --value-file "$tmp"
err_has "is not a file or a pipe"
expect 2 secret remove 'not a name'
expect 2 session start tiny --secret 'bad-name'
err_has "is not a secret's name"
expect 2 session start tiny --egress open --secret TOKEN
err_has "apply only to --egress allowlist"
many=()
for i in $(seq 33); do many+=(--secret "S$i"); done
expect 2 task submit demo tiny --script "$tmp/script.sh" "${many[@]}"
err_has "At most 32 --secret names"
checks=$((checks + 1))
[ "$(wc -l <"$tmp/calls")" -eq "$calls_before" ] || fail "a refused secret verb still reached the bus: $(tail -n +$((calls_before + 1)) "$tmp/calls")"
expect 0 secret list
out_has "TOKEN"
out_has "api.example.org,*.example.net"
out_has "Bearer {}"
no_escape_bytes out
checks=$((checks + 1))
grep -q '^TOKEN forged' "$tmp/out" && fail "a host drew a line of its own: $(cat "$tmp/out")"
expect 0 secret list --json
checks=$((checks + 1))
/usr/bin/python3 -c "import json,sys; l=json.load(open(sys.argv[1])); assert l[0] == {'name': 'TOKEN', 'hosts': ['api.example.org', '*.example.net'], 'header': 'Authorization', 'format': 'Bearer {}', 'added_at': 1764634860}, l; assert l[1]['hosts'] == ['x.example\x1b[2J\nTOKEN forged'], l" "$tmp/out" ||
  fail "secret list --json is not the list: $(cat "$tmp/out")"
expect 0 secret remove TOKEN
call_is RemoveSecret "a == ['TOKEN']"
expect 1 secret remove GONE
err_has "[org.vivarium.Vivarium1.Error.NotFound]"
expect 0 session start tiny --egress allowlist --allow api.example.org --secret TOKEN --secret GH_TOKEN
call_is StartSession "a[2]['secrets'] == ['TOKEN', 'GH_TOKEN'] and a[3]['secrets'] == 'as'"
expect 0 task submit demo tiny --script "$tmp/script.sh" --secret TOKEN
call_is SubmitTask "a[3]['secrets'] == ['TOKEN'] and a[4]['secrets'] == 'as'"
expect 0 session show s1
out_has "TOKEN, GH_TOKEN"
out_has "DEPLOY, MIRROR"
expect 0 project set demo secrets=GH_TOKEN,PYPI
call_is SetSecrets "a == [['GH_TOKEN', 'PYPI']]"
out_is "Project “demo”: secrets GH_TOKEN,PYPI."
expect 0 project set demo secrets=
call_is SetSecrets "a == [[]]"
out_is "Project “demo”: secrets none."
set_egress_before=$(grep -c '"method": "SetEgress"' "$tmp/calls")
expect 0 project set demo secrets=GH_TOKEN
checks=$((checks + 1))
[ "$(grep -c '"method": "SetEgress"' "$tmp/calls")" -eq "$set_egress_before" ] ||
  fail "project set NAME secrets=… also called SetEgress"
expect 0 project set demo egress=allowlist secrets=GH_TOKEN
call_is SetEgress "a == ['allowlist', ['debian']]"
# One key keeps the other's value, read from the daemon (a NULL list crashed).
expect 0 project set demo egress=none
call_is SetEgress "a == ['none', ['debian']]"
expect 0 project set demo groups=pypi
call_is SetEgress "a == ['allowlist', ['pypi']]"
expect 2 project set demo secrets=bad-name
err_has "is not a secret's name"
expect 0 project set demo ssh_keys=DEPLOY,MIRROR
call_is SetSshKeys "a == [['DEPLOY', 'MIRROR']]"
out_is "Project “demo”: SSH keys DEPLOY,MIRROR."
expect 0 project set demo ssh_keys=
call_is SetSshKeys "a == [[]]"
out_is "Project “demo”: SSH keys none."
set_secrets_before=$(grep -c '"method": "SetSecrets"' "$tmp/calls")
expect 0 project set demo ssh_keys=DEPLOY
checks=$((checks + 1))
[ "$(grep -c '"method": "SetSecrets"' "$tmp/calls")" -eq "$set_secrets_before" ] ||
  fail "project set NAME ssh_keys=… also called SetSecrets"
expect 2 project set demo ssh_keys=A,B,C,D,E,F,G,H,I
err_has "At most 8 names; 9 were given"
expect 2 project set demo ssh_keys=bad-name
err_has "is not a secret's name"
expect 0 project show demo
out_has "GH_TOKEN,PYPI\x1b[2J"
out_has "DEPLOY\x1b[2J"
no_escape_bytes out

if [ "$failures" -ne 0 ]; then
  echo "$failures failures in $checks checks" >&2
  exit 1
fi
echo "all $checks checks passed"
