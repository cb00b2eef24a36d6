#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Projects, sessions of a project, reports (and, as they land, tasks) on a
# real systemd host with real QEMU and real git. The harness binds a fresh
# btrfs in as /var/lib/vivarium/projects (VIVARIUM_TEST_BTRFS): there are no
# loop devices in here for the ext4 backend.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-tasks.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"


require_systemd_host vivariumctl gdbus busctl git
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

user_call () {  # PATH METHOD ARGS...: the same, as the unprivileged test user
  local path=$1 method=$2
  shift 2
  run_as_user "$tuser" gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
unit_gone () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" != loaded ]; }

tmpd=$(mktemp -d /var/tmp/vivarium-tasks.XXXXXX)
at_exit rm -rf "$tmpd"
create_test_user tuser || bail_out "cannot create a test user"
journal_at_exit

# --- projects: refusals first, as an ordinary user and with bad input -----

pdemo=$(project_path demo)
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}"
assert_eq "" "$(ls -A "$STATE/projects")" "a refused CreateProject left nothing"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject "Demo" "uint64 $((64 * MIB))" "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject "../x" "uint64 $((64 * MIB))" "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject demo "uint64 1024" "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{'bogus': <1>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" \
  "{'clone': <'http://example.com/x.git'>}"
# file:// is read by the daemon as root: only under STATE/remotes/.
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" \
  "{'clone': <'file:///etc'>}"
mkdir -p "$tmpd/outside.git" && git init -q --bare "$tmpd/outside.git"
ln -s "$tmpd/outside.git" "$STATE/remotes/escape.git"
at_exit rm -f "$STATE/remotes/escape.git"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" \
  "{'clone': <'file://$STATE/remotes/escape.git'>}"
assert_eq "" "$(ls -A "$STATE/projects")" "refused creations left nothing under projects/"

# --- projects: success as root ---------------------------------------------

out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$pdemo" "root creates a project"
assert_contains "$(call "$OBJ" Manager.ListProjects)" "$pdemo" "ListProjects names it"
assert_dbus_error "$ERR.Exists" -- call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}"
assert_eq "demo" "$(prop "$pdemo" Project Name)" "Name"
assert_eq "$((64 * MIB))" "$(prop "$pdemo" Project QuotaBytes)" "QuotaBytes"
head=$(prop "$pdemo" Project Head)
assert_eq "40" "${#head}" "Head is a commit id"
assert_eq "$head" "$(git --git-dir="$STATE/projects/demo/repo" rev-parse HEAD)" "Head is the repository's HEAD"
assert_contains "$(prop "$pdemo" Project DeployKey)" "ssh-ed25519 " "DeployKey is an ssh public key"
assert_eq "/" "$(prop "$pdemo" Project LastTask)" "no task yet"
assert_contains "$(call "$pdemo" Project.Log 5)" "$head" "Log lists the first commit"
assert_dbus_error "$ERR.InvalidArgument" -- call "$pdemo" Project.Log 0
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$pdemo" Project.Log "uint32 1"

assert_dbus_error "$ERR.NotAuthorized" -- user_call "$pdemo" Project.SetRemote "file://$STATE/remotes/demo.git"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$pdemo" Project.Publish
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$pdemo" Project.Delete
assert_dbus_error "$ERR.BadState" -- call "$pdemo" Project.Publish
assert_dbus_error "$ERR.InvalidArgument" -- call "$pdemo" Project.SetRemote "https://user:pw@example.com/x.git"
assert_dbus_error "$ERR.InvalidArgument" -- call "$pdemo" Project.SetRemote "file://$tmpd/outside.git"
assert_dbus_error "$ERR.InvalidArgument" -- call "$pdemo" Project.SetRemote "file://$STATE/remotes/escape.git"
git init -q --bare "$STATE/remotes/demo.git"
at_exit rm -rf "$STATE/remotes/demo.git"
assert_success "root sets a file:// remote under remotes/" -- call "$pdemo" Project.SetRemote "file://$STATE/remotes/demo.git"
assert_eq "file://$STATE/remotes/demo.git" "$(prop "$pdemo" Project Remote)" "Remote"
assert_success "root publishes" -- call "$pdemo" Project.Publish
assert_contains "$(git --git-dir="$STATE/remotes/demo.git" for-each-ref --format='%(objectname)' 2>&1)" "$head" \
  "the remote has the project's commit"

# --- a session of the project: the tree is shared, and only while it runs --

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

work=$STATE/projects/demo/work
out=$(call "$OBJ" Manager.StartSession demo "$IMAGE" "{}" 2>&1)
spath=$(printf '%s' "$out" | grep -o "$OBJ/sessions/[0-9a-f]*")
assert_ne "" "$spath" "start a session of the project"
[ -n "$spath" ] || diag "$out"
suid=$(prop "$spath" Session Uid)
assert_eq "demo" "$(prop "$spath" Session Project)" "the session names its project"
assert_eq "$suid" "$(stat -c %u "$work")" "the tree is the session uid's while it runs"
assert_dbus_error "$ERR.Busy" -- call "$OBJ" Manager.StartSession demo "$IMAGE" "{}"
assert_dbus_error "$ERR.Busy" -- call "$pdemo" Project.Delete
out=$(call "$spath" Session.Exec "['sh', '-c', 'echo hello > /project/from-guest.txt && cat /project/from-guest.txt']" "[]" "''" 60 2>&1)
assert_contains "$out" "(0," "the guest writes into /project" 
assert_eq "hello" "$(cat "$work/from-guest.txt" 2>&1)" "the file is in the dataset on the host"
assert_success "stop the session" -- call "$spath" Session.Stop
retry_until 60 0.5 owned_by_root "$work"
assert_eq "0" "$(stat -c %u "$work")" "the tree is root's again once the session ended"
assert_eq "0" "$(stat -c %u "$work/from-guest.txt")" "and so are the guest's files"

# --- tasks -------------------------------------------------------------------
# Script workers drive their task with gdbus (a real client; the CLI's
# `vivariumctl worker` verbs are being written meanwhile). Each finds its
# task and session in VIVARIUM_TASK and VIVARIUM_SESSION.

submit () {  # SCRIPT VERIFY [TIMEOUT]: prints the task's path, or the error
  "$PY" - "$@" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'script': GLib.Variant('ay', open(sys.argv[1], 'rb').read())}
if sys.argv[2]:
    opts['verify'] = GLib.Variant('s', sys.argv[2])
if len(sys.argv) > 3 and sys.argv[3]:
    opts['timeout'] = GLib.Variant('u', int(sys.argv[3]))
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'SubmitTask', GLib.Variant('(sssa{sv})', ('demo', 'tiny', 'Change the files.', opts)),
                      None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
PYEOF
}
# The workers' own helpers, put in front of each script.
cat > "$tmpd/lib.sh" <<'LIBEOF'
#!/bin/sh
B="--system --dest org.vivarium.Vivarium1"
gx () { gdbus call $B --object-path "$VIVARIUM_SESSION" --method org.vivarium.Vivarium1.Session.Exec \
          "['sh', '-c', \"cd /project && $1\"]" "@as []" "''" "uint32 120"; }
finish () { gdbus call $B --object-path "$VIVARIUM_TASK" --method org.vivarium.Vivarium1.Task.Finish "$1" "$2"; }
LIBEOF
worker () {  # NAME BODY: a worker script
  { cat "$tmpd/lib.sh"; printf '%s\n' "$2"; } > "$tmpd/$1.sh"
}
git_demo () { git --git-dir="$STATE/projects/demo/repo" "$@"; }

worker setup 'gx "printf one > a.txt; printf two > b.txt; printf three > c.txt" && finish "set up" ""'
t0=$(submit "$tmpd/setup.sh" "test -f a.txt")
assert_contains "$t0" "$OBJ/tasks/" "root submits a task"
assert_eq "DONE" "$(wait_outcome "$t0" 600)" "the setup task is DONE"
assert_dbus_error "$ERR.BadState" -- call "$t0" Task.Cancel

worker edit '
gx "printf one-changed > a.txt; printf two-changed > b.txt; printf four > d.txt; rm c.txt" || exit 1
finish "I changed two files, added one and deleted one." "test -f d.txt"'
t1=$(submit "$tmpd/edit.sh" "grep -q one-changed a.txt && grep -q two-changed b.txt && test -f d.txt && ! test -e c.txt")
assert_contains "$t1" "$OBJ/tasks/" "submit the editing task"
assert_dbus_error "$ERR.Busy" -- call "$pdemo" Project.Delete
busy=$(submit "$tmpd/edit.sh" "")
assert_contains "$busy" "in use" "a second task of the project is refused (Busy)"
assert_eq "DONE" "$(wait_outcome "$t1" 600)" "the editing task is DONE"
r1=$(task_prop "$t1" Report)
assert_contains "$r1" "$OBJ/reports/" "the task names its report"
get_json "$r1" "$tmpd/r1.json"
assert_eq "a.txt:modified b.txt:modified c.txt:deleted d.txt:added" \
  "$(report_field "$tmpd/r1.json" "' '.join(f['path'] + ':' + f['change'] for f in r['files'])")" \
  "the report lists exactly the files changed"
commit=$(report_field "$tmpd/r1.json" "r['commit']")
assert_eq "$commit" "$(prop "$pdemo" Project Head)" "the report's commit is the project's head"
assert_eq "a.txt b.txt c.txt d.txt" \
  "$(git_demo show --format= --name-only "$commit" | sort | tr '\n' ' ' | sed 's/ $//')" \
  "the commit holds exactly those files"
assert_contains "$(git_demo log -1 --format=%B "$commit")" "${t1##*/}" "the commit message names the task"
assert_eq "pass caller" "$(report_field "$tmpd/r1.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the fresh re-run of the caller's command passed"
assert_ne "$(report_field "$tmpd/r1.json" "r['session']")" "$(report_field "$tmpd/r1.json" "r['verification']['session']")" \
  "the re-run ran in another session"
assert_contains "$(report_field "$tmpd/r1.json" "' '.join(c['argv'][-1] for c in r['commands'])")" "rm c.txt" \
  "the report lists the worker's command"
assert_success "vivariumctl report verify accepts GetJson's file" -- vivariumctl report verify "$tmpd/r1.json"
"$PY" -c "import sys; d=open(sys.argv[1],'rb').read(); i=d.index(b'\"DONE\"'); open(sys.argv[2],'wb').write(d[:i+1]+b'E'+d[i+2:])" \
  "$tmpd/r1.json" "$tmpd/r1-bad.json"
assert_eq "1" "$(cmp -l "$tmpd/r1.json" "$tmpd/r1-bad.json" | wc -l)" "the copy differs in one byte (test setup)"
if vivariumctl report verify "$tmpd/r1-bad.json" >/dev/null 2>&1; then
  not_ok "a one-byte change fails verification"
else ok "a one-byte change fails verification"; fi
assert_contains "$(call "$r1" Report.GetText)" "claim" "the text shows the summary as the worker's claim"
get_text "$r1" "$tmpd/r1.txt"
assert_eq "Verification: pass (the caller's command, exit status 0 in a fresh session), verified: commit $(report_field "$tmpd/r1.json" "r['commit']")" \
  "$(grep '^Verification: ' "$tmpd/r1.txt")" "the Verification line says it was the caller's command, and which commit it ran on"
assert_eq "" "$(grep '^Warning: ' "$tmpd/r1.txt")" "and a pass of the caller's command needs no warning"
assert_contains "$(grep '^Command: 1 ' "$tmpd/r1.txt")" "exec, exit 0 (the guest agent's word)" \
  "a command's exit status is shown as the guest agent's word"
check_command_log "$r1" "$tmpd/r1.json" "the editing task"
assert_contains "$(cat "$STATE/reports/${r1##*/}.commands.jsonl")" "rm c.txt" "the log beside the report holds the worker's command"
assert_contains "$(call "$OBJ" Manager.ListReports)" "$r1" "ListReports names the report"
assert_contains "$(call "$OBJ" Manager.ListTasks)" "$t1" "ListTasks names the task"
assert_eq "$t1" "$(prop "$pdemo" Project LastTask)" "the project's LastTask"
assert_eq "0" "$(stat -c %u "$work")" "the tree is root's after the task"

# A lying worker: claims success, leaves the verification failing.
worker liar 'finish "All tests pass, everything is done." "test -f never-made.txt"'
t2=$(submit "$tmpd/liar.sh" "")
assert_eq "DONE" "$(wait_outcome "$t2" 600)" "the lying task ends"
get_json "$(task_prop "$t2" Report)" "$tmpd/r2.json"
assert_eq "fail worker" "$(report_field "$tmpd/r2.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the worker's own verification fails in the fresh session"
assert_contains "$(call "$(task_prop "$t2" Report)" Report.GetText)" "is a claim, not a finding" "and the summary is shown as a claim"
get_text "$(task_prop "$t2" Report)" "$tmpd/r2.txt"
assert_contains "$(grep '^Verification: ' "$tmpd/r2.txt")" "fail (the worker's own command," "the Verification line says it was the worker's own command"

# One that passes only inside its own session (a file in the guest's /tmp).
worker local 'gx "touch /tmp/works-here" && gx "test -f /tmp/works-here" && finish "Verified: it works." "test -f /tmp/works-here"'
t3=$(submit "$tmpd/local.sh" "")
assert_eq "DONE" "$(wait_outcome "$t3" 600)" "the guest-local task ends"
get_json "$(task_prop "$t3" Report)" "$tmpd/r3.json"
assert_eq "fail" "$(report_field "$tmpd/r3.json" "r['verification']['verdict']")" \
  "what passed only in the work session fails in the fresh one"

# NEEDS_INPUT round trip.
worker asker '
a=$(gdbus call $B --timeout 600 --object-path "$VIVARIUM_TASK" --method org.vivarium.Vivarium1.Task.Ask "Which colour?" | tr -dc a-z)
gx "echo $a > colour.txt" && finish "asked" ""'
t4=$(submit "$tmpd/asker.sh" "grep -q blue colour.txt")
assert_eq "NEEDS_INPUT" "$(wait_outcome "$t4" 300)" "a worker's question makes the task NEEDS_INPUT"
assert_contains "$(task_prop "$t4" Question)" "Which colour?" "the Question property holds it"
assert_dbus_error "$ERR.NotAuthorized" -- call "$t4" Task.Ask "root is not the worker"
assert_success "the caller answers" -- call "$t4" Task.Answer "blue"
assert_eq "DONE" "$(wait_outcome "$t4" 600)" "the task resumes and is DONE"
get_json "$(task_prop "$t4" Report)" "$tmpd/r4.json"
assert_eq "pass" "$(report_field "$tmpd/r4.json" "r['verification']['verdict']")" "the answer reached the worker"

# The CLI end to end: submitted with vivariumctl, the worker using
# `vivariumctl worker`, waited for and reported with vivariumctl.
cat > "$tmpd/cli-worker.sh" <<'CLIEOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo via-cli > cli.txt' || exit 1
printf 'written by the worker\n' | vivariumctl worker write /project/written.txt || exit 1
vivariumctl worker read /project/cli.txt | grep -q via-cli || exit 1
answer=$(vivariumctl worker ask "Go on?") || exit 1
vivariumctl worker exec --cwd /project -- sh -c "echo $answer > answer.txt" || exit 1
vivariumctl worker finish --summary "Wrote cli.txt." --verify "test -f cli.txt"
CLIEOF
chmod 0755 "$tmpd/cli-worker.sh"
tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/cli-worker.sh" --verify "grep -q yes answer.txt && test -f written.txt" 2>&1)
assert_eq "$OBJ/tasks/$tid" "$(call "$OBJ" Manager.ListTasks | grep -o "$OBJ/tasks/$tid")" "vivariumctl task submit prints the task's id"
ctl task wait "$tid" --timeout 300 >/dev/null 2>&1
assert_eq "NEEDS_INPUT" "$(task_prop "$OBJ/tasks/$tid" Outcome)" "the CLI worker's question reaches the caller"
assert_success "vivariumctl task answer" -- ctl task answer "$tid" yes
out=$(ctl task wait "$tid" --timeout 600 2>&1)
assert_eq "0" "$?" "vivariumctl task wait exits 0 for DONE" "$out"
ctl task report "$tid" --json > "$tmpd/rcli.json" 2>&1
assert_eq "pass" "$(report_field "$tmpd/rcli.json" "r['verification']['verdict']")" "the CLI worker's work passes the fresh re-run"
assert_success "vivariumctl report verify accepts vivariumctl task report --json" -- vivariumctl report verify "$tmpd/rcli.json"

# The signing key on the Manager is the one the reports are signed with.
fp=$(prop "$OBJ" Manager KeyFingerprint)
assert_contains "$fp" "sha256:" "Manager.KeyFingerprint"
assert_ne "" "$(prop "$OBJ" Manager PublicKey)" "Manager.PublicKey"
assert_contains "$(vivariumctl report verify "$tmpd/r1.json" 2>&1)" "$fp" "the report verifies with the Manager's key"
assert_eq "$fp" "$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['signature']['key-fingerprint'])" "$tmpd/r1.json")" \
  "the signed file names the Manager's key"

# "tools" narrows the worker: with exec alone, WriteFile is refused.
worker narrow '
gdbus call $B --object-path "$VIVARIUM_SESSION" --method org.vivarium.Vivarium1.Session.WriteFile /project/x.txt "[byte 0x41]" > /tmp/o 2>&1
w=$(tr -dc "A-Za-z. " < /tmp/o)
gx "echo write: $w > narrow.txt" && finish narrowed ""'
tn=$("$PY" - "$tmpd/narrow.sh" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'script': GLib.Variant('ay', open(sys.argv[1], 'rb').read()), 'tools': GLib.Variant('as', ['exec'])}
r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                  'SubmitTask', GLib.Variant('(sssa{sv})', ('demo', 'tiny', 'narrow', opts)), None, 0, 120000, None)
print(r.unpack()[0])
PYEOF
)
assert_eq "DONE" "$(wait_outcome "$tn" 600)" "the narrowed task ends"
assert_contains "$(git_demo show HEAD:narrow.txt 2>&1)" "NotAuthorized" "a tool left out of \"tools\" is refused to the worker"
assert_eq "no" "$(git_demo show HEAD:x.txt >/dev/null 2>&1 && echo yes || echo no)" "and wrote nothing"

# IN_PROGRESS on a short wait; the worker uid is refused anything else.
victim=$(call "$OBJ" Manager.StartSession "''" "$IMAGE" "{}" 2>&1 | grep -o "$OBJ/sessions/[0-9a-f]*")
assert_ne "" "$victim" "another session runs (the worker's target)"
# It finishes with its own verify "true" (quoted for gdbus, which cannot
# introspect as the worker: a bare true would be a boolean).
worker prober "
gdbus call \$B --object-path $victim --method org.vivarium.Vivarium1.Session.Exec \"['true']\" '@as []' \"''\" 'uint32 10' > /tmp/o 2>&1
r1=\$(tr -dc 'A-Za-z. ' < /tmp/o)
gdbus call \$B --object-path /org/vivarium/Vivarium1 --method org.vivarium.Vivarium1.Manager.ListSessions > /tmp/o 2>&1
r2=\$(tr -dc 'A-Za-z. ' < /tmp/o)
gdbus call \$B --object-path /org/vivarium/Vivarium1 --method org.vivarium.Vivarium1.Manager.SubmitTask demo tiny x '@a{sv} {}' > /tmp/o 2>&1
r3=\$(tr -dc 'A-Za-z. ' < /tmp/o)
gx \"echo 'other-session: \$r1' > probe.txt; echo 'manager: \$r2' >> probe.txt; echo 'submit: \$r3' >> probe.txt\"
sleep 20
finish done \"'true'\""
t5=$(submit "$tmpd/prober.sh" "")
assert_eq "IN_PROGRESS" "$(wait_outcome "$t5" 2)" "a short Wait returns IN_PROGRESS"
assert_eq "DONE" "$(wait_outcome "$t5" 600)" "the probing task ends"
probe=$(git_demo show HEAD:probe.txt 2>&1)
assert_contains "$(printf '%s' "$probe" | grep other-session)" "NotAuthorized" "the worker uid may not use another session"
assert_contains "$(printf '%s' "$probe" | grep manager)" "NotAuthorized" "nor a Manager verb"
assert_contains "$(printf '%s' "$probe" | grep submit)" "NotAuthorized" "nor submit a task"
# Finish(…, "true") with no verify of the caller's: a pass, said to be the worker's own.
get_json "$(task_prop "$t5" Report)" "$tmpd/r5.json"
get_text "$(task_prop "$t5" Report)" "$tmpd/r5.txt"
assert_eq "pass worker" "$(report_field "$tmpd/r5.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the worker's own \"true\" passes, and the JSON says whose it was"
assert_eq "Verification: pass (the worker's own command, exit status 0 in a fresh session), verified: commit $(report_field "$tmpd/r5.json" "r['commit']")" \
  "$(grep '^Verification: ' "$tmpd/r5.txt")" "the Verification line says it was the worker's own command, and which commit it ran on"
assert_contains "$(grep '^Warning: ' "$tmpd/r5.txt")" "the worker's own command, not the caller's" \
  "and warns that its pass is no finding"
[ -n "$victim" ] && call "$victim" Session.Stop >/dev/null 2>&1

# Refusals as an ordinary user, and bad input as root.
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'script': <b'true'>}"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$OBJ" Manager.ListTasks
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$OBJ" Manager.ListReports
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.Wait "uint32 0"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.Answer x
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.Cancel
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.Finish x "''"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$r1" Report.GetJson
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$r1" Report.GetText
assert_dbus_error "$ERR.NotAuthorized" -- call "$t1" Task.Finish x "''"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'script': <b'true'>, 'bogus': <1>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'script': <b'true'>, 'timeout': <uint32 0>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'script': <b'true'>, 'tools': <['rm-rf']>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'worker': <'robot'>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" x "{'worker': <'agent'>, 'script': <b'true'>}"
assert_dbus_error "$ERR.NotFound" -- call "$OBJ" Manager.SubmitTask nope "$IMAGE" x "{'script': <b'true'>}"
assert_dbus_error "$ERR.NotFound" -- call "$OBJ" Manager.SubmitTask demo nope x "{'script': <b'true'>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$t1" Task.Wait 4000
assert_dbus_error "$ERR.BadState" -- call "$t1" Task.Answer x
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-worker-*' | head -1)" "no worker unit is left"

# The hard limit: the worker is stopped, its work so far committed, IN_PROGRESS.
worker slow 'gx "echo partial > partial.txt" && sleep 600'
t6=$(submit "$tmpd/slow.sh" "" 20)
assert_eq "IN_PROGRESS" "$(wait_outcome "$t6" 2)" "a slow task is IN_PROGRESS on a short wait"
# A long Wait returns when the task ends, IN_PROGRESS at the hard limit too.
assert_eq "IN_PROGRESS" "$(wait_outcome "$t6" 300)" "the hard limit ends it IN_PROGRESS"
assert_eq "done" "$(task_prop "$t6" Step)" "and it is over"
assert_contains "$(task_prop "$t6" Reason)" "hard limit" "and says why"
assert_eq "partial" "$(git_demo show HEAD:partial.txt 2>&1)" "the work so far is committed"
get_json "$(task_prop "$t6" Report)" "$tmpd/r6.json"
assert_eq "IN_PROGRESS" "$(report_field "$tmpd/r6.json" "r['outcome']")" "the report says IN_PROGRESS"

# Cancel.
worker sleeper 'sleep 600'
t7=$(submit "$tmpd/sleeper.sh" "")
retry_until 120 1 has_session "$t7"
assert_success "the caller cancels" -- call "$t7" Task.Cancel
assert_eq "FAILED" "$(wait_outcome "$t7" 300)" "a cancelled task is FAILED"
assert_eq "cancelled" "$(task_prop "$t7" Reason)" "with the reason cancelled"

# The daemon killed during a task: FAILED at its next start, the project usable.
t8=$(submit "$tmpd/sleeper.sh" "")
worker_running () { [ "$(systemctl show -P MainPID "vivarium-worker-${t8##*/}.service" 2>/dev/null)" -gt 0 ] 2>/dev/null; }
assert_success "the worker of the task to interrupt runs" -- retry_until 120 1 worker_running
systemctl kill --signal=KILL vivariumd.service
daemon_down () { [ "$(systemctl show -P ActiveState vivariumd.service)" != active ]; }
retry_until 60 0.5 daemon_down
r8="$OBJ/reports/${t8##*/}"
assert_contains "$(call "$OBJ" Manager.ListReports 2>&1)" "$r8" "the restarted daemon reports the interrupted task"
get_json "$r8" "$tmpd/r8.json"
assert_eq "FAILED: the daemon stopped while it ran" \
  "$(report_field "$tmpd/r8.json" "r['outcome'] + ': ' + r['outcome-reason']")" "as FAILED, saying why"
assert_success "the restarted daemon's report verifies" -- vivariumctl report verify "$tmpd/r8.json"
# Finished tasks survive the restart: listed again, with outcome and report.
assert_contains "$(call "$OBJ" Manager.ListTasks 2>&1)" "$t1" "the restarted daemon lists a task finished before"
assert_eq "DONE $r1" "$(task_prop "$t1" Outcome) $(task_prop "$t1" Report)" "with its outcome and its report"
assert_eq "FAILED $r8" "$(task_prop "$t8" Outcome) $(task_prop "$t8" Report)" "and the interrupted one, FAILED, with its report"
assert_eq "DONE" "$(wait_outcome "$t1" 0)" "Wait on a restored task answers at once"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-worker-*' | head -1)" "the worker went with the daemon"
assert_eq "clean" "$(git_demo --work-tree="$work" status --porcelain >/dev/null 2>&1 && git_demo fsck >/dev/null 2>&1 && echo clean)" \
  "the repository is consistent"

# --- deleting ----------------------------------------------------------------

assert_success "root deletes the project" -- retry_until 20 0.5 call "$pdemo" Project.Delete
assert_eq "" "$(call "$OBJ" Manager.ListProjects | grep -o "$pdemo")" "the project is gone from the list"
assert_eq "no" "$([ -e "$STATE/projects/demo" ] && echo yes || echo no)" "and from the disk"
assert_dbus_error "$ERR.NotFound" -- call "$pdemo" Project.Log "uint32 1"

done_testing
