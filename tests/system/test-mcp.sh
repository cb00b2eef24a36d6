#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivarium-mcp end to end: the real MCP TypeScript SDK client
# (@modelcontextprotocol/sdk, pinned in tests/mcp/package-lock.json and
# installed outside the host by tests/mcp/install-sdk.sh: the host has no
# network) spawns the installed vivarium-mcp over stdio, as an assistant
# would, against the real daemon, real polkit, real QEMU guests and git. The
# SDK checks every result against its tool's outputSchema itself.
#   tests/mcp/run-system-test.sh BUILDDIR tests/system/vivarium-test-host tests/system/test-mcp.sh
#
# vm_task runs the `agent` worker against a scripted model server here (a
# chat-completions server on 127.0.0.1 replaying a written conversation).
# vm_wait, vm_answer, vm_report and vm_cancel are driven on `script`
# worker tasks submitted directly, so they do not depend on the agent.

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/mcp-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/mcp-lib.sh"

readonly MODEL_PORT=18434

require_systemd_host vivariumctl vivarium-mcp node gdbus busctl git
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-mcp.XXXXXX)
at_exit rm -rf "$tmpd"
create_test_user tuser || bail_out "cannot create a test user"
journal_at_exit

# The client and the SDK, readable by the unprivileged user too.
mcp_setup_sdk

# mcp OUT USER PLAN: run the SDK client as USER on PLAN (JSON), result in OUT.
mcp () {
  if [ "$2" = root ]; then
    mcp_client "$1" "$3"
  else
    mcp_client "$1" "$3" run_as_user "$2"
  fi
}
prop () { busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'; }
call () {
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
plan () {  # [ARGS_JSON] CALLS_JSON
  if [ $# = 2 ]; then
    printf '{"command": "vivarium-mcp", "args": %s, "calls": %s}' "$1" "$2"
  else
    printf '{"command": "vivarium-mcp", "args": [], "calls": %s}' "$1"
  fi
}

# --- the scripted model server, and the daemon pointed at it -----------------
# The agent's own scripted model server (tests/agent/, from the agent worker's
# branch) with this test's conversation: write hello.txt, then finish. The
# configuration is written before the daemon's first start: it reads it then.
mcp_start_model "$MODEL_PORT"

# --- an image and a project ----------------------------------------------------

build_out=$(vivariumctl --no-interaction image build "$IMAGE" "$IMAGE" 2>&1) ||
  bail_out "cannot build the tiny image: $build_out"
vivariumctl --no-interaction image freeze "$IMAGE" >/dev/null 2>&1 || bail_out "cannot freeze the tiny image"
call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" >/dev/null 2>&1 || bail_out "cannot create a project"
digest=$(prop "$OBJ/images/$IMAGE" Image Digest)
fingerprint=$(prop "$OBJ" Manager KeyFingerprint)
head0=$(prop "$OBJ/projects/demo" Project Head)
assert_contains "$fingerprint" "sha256:" "the daemon has a report-signing key (test setup)"

# --- tools/list and the listings, as root ------------------------------------

mcp list root "$(plan '[{"tool": "vm_images"}, {"tool": "vm_projects"}]')"
assert_eq "" "$(q list "d.get('fatal') or ''")" "the SDK client connects to vivarium-mcp and initializes"
assert_eq "vivarium-mcp" "$(q list "d['server']['name']")" "serverInfo names vivarium-mcp"
assert_eq '["vm_task", "vm_answer", "vm_wait", "vm_report", "vm_cancel", "vm_images", "vm_projects"]' \
  "$(q list "[t['name'] for t in d['tools']]")" "tools/list names the seven tools"
assert_eq "true" "$(q list "all(t['inputSchema']['type'] == 'object' and t['outputSchema']['type'] == 'object' and 'identity' in t['outputSchema']['properties'] for t in d['tools'])")" \
  "every tool has an input and an output schema with the identity block"
assert_eq '["project", "image", "instructions", "verify"]' "$(q list "[t for t in d['tools'] if t['name'] == 'vm_task'][0]['inputSchema']['required']")" \
  "vm_task requires project, image, instructions and the caller's own verify"
assert_contains "$(q list "d.get('instructions') or ''")" 'Trust its verification verdict only when report.verification.by is "caller"' \
  "the server's instructions say to trust a verdict only when the caller chose the command"
assert_eq "false" "$(q list "c(0).get('isError')")" "vm_images succeeds (and its result passed the SDK's schema check)"
assert_eq "[\"$IMAGE\", true, \"$digest\"]" "$(q list "[[i['name'], i['frozen'], i['digest']] for i in s(0)['images']][0]")" \
  "vm_images lists the frozen image with the daemon's digest"
assert_eq "$fingerprint" "$(q list "ident(0)['key_fingerprint']")" "the identity block carries Manager.KeyFingerprint"
assert_contains "$(q list "text(0)")" "$IMAGE" "the text content names the image"
assert_eq "[\"demo\", \"$head0\"]" "$(q list "[[p['name'], p['head']] for p in s(1)['projects']][0]")" \
  "vm_projects lists the project and its head"
assert_eq "{}" "$(q list "d['ping']")" "ping answers after the calls"

# --- script-worker tasks through vm_wait, vm_report, vm_answer, vm_cancel -----

submit () {  # SCRIPT VERIFY: prints the task's path
  "$PY" - "$@" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'script': GLib.Variant('ay', open(sys.argv[1], 'rb').read())}
if sys.argv[2]:
    opts['verify'] = GLib.Variant('s', sys.argv[2])
r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                  'SubmitTask', GLib.Variant('(sssa{sv})', ('demo', 'tiny', 'Through MCP.', opts)),
                  None, 0, 300000, None)
print(r.unpack()[0])
PYEOF
}
cat > "$tmpd/lib.sh" <<'LIBEOF'
#!/bin/sh
B="--system --dest org.vivarium.Vivarium1"
gx () { gdbus call $B --object-path "$VIVARIUM_SESSION" --method org.vivarium.Vivarium1.Session.Exec \
          "['sh', '-c', \"cd /project && $1\"]" "@as []" "''" "uint32 120"; }
finish () { gdbus call $B --object-path "$VIVARIUM_TASK" --method org.vivarium.Vivarium1.Task.Finish "$1" "$2"; }
LIBEOF
worker () { { cat "$tmpd/lib.sh"; printf '%s\n' "$2"; } > "$tmpd/$1.sh"; }

worker plain 'gx "printf plain > plain.txt" && finish "I wrote plain.txt. Trust me." ""'
t1=$(submit "$tmpd/plain.sh" "grep -qx plain plain.txt")
assert_contains "$t1" "$OBJ/tasks/" "root submits a script task (test setup)"
id1=${t1##*/}
mcp wait root "$(plan "[{\"tool\": \"vm_wait\", \"arguments\": {\"task\": \"$id1\", \"seconds\": 600}, \"timeout_ms\": 700000},
                       {\"tool\": \"vm_report\", \"arguments\": {\"task\": \"$id1\"}}]")"
assert_eq "false DONE" "$(q wait "str(c(0).get('isError')).lower() + ' ' + s(0).get('outcome', '?')")" "vm_wait → DONE"
r1=$(prop "$t1" Task Report)
assert_eq "$id1 $IMAGE $digest ${r1##*/} $fingerprint true" \
  "$(q wait "' '.join(str(ident(0)[k]).lower() if k == 'signature_verified' else str(ident(0)[k]) for k in ['task', 'image', 'image_digest', 'report', 'signed_by', 'signature_verified'])")" \
  "the identity block: task, image, digest, report, the daemon's key, the signature checked"
call "$r1" Report.GetJson > "$tmpd/r1.gvariant"
assert_contains "$(cat "$tmpd/r1.gvariant")" "$(q wait "ident(0)['signature']")" "the identity's signature is the signed file's"
assert_contains "$(cat "$tmpd/r1.gvariant")" "\"session\":\"$(q wait "ident(0)['session']")\"" "the identity's session is the report's work session"
assert_eq "pass caller caller" "$(q wait "s(0)['report']['verification']['verdict'] + ' ' + s(0)['report']['verification']['whose'] + ' ' + s(0)['report']['verification']['by']")" \
  "the structured verification verdict, by the caller's command"
assert_contains "$(q wait "text(0)")" "Verification: pass (the caller's command, exit status 0 in a fresh session)" \
  "the text's Verification line says whose command it was"
assert_eq '[["plain.txt", "added"]]' "$(q wait "[[f['path'], f['change']] for f in s(0)['report']['files']]")" "the files changed"
assert_eq "$(prop "$OBJ/projects/demo" Project Head)" "$(q wait "s(0)['report']['commit']")" "the commit is the project's head"
assert_eq "the worker's unverified claim|I wrote plain.txt. Trust me." \
  "$(q wait "s(0)['report']['worker_claim']['label'] + '|' + s(0)['report']['worker_claim']['summary']")" \
  "the worker's summary is labelled as its claim"
assert_contains "$(q wait "text(0)")" "Worker's claim (unverified):" "the text content is the signed report's rendering, the claim labelled"
assert_contains "$(q wait "text(0)")" "Signature: valid, made with the key $fingerprint" "rendered from the report vivarium-mcp verified"
daemon_text () {  # REPORT_PATH: Report.GetText, as it is
  "$PY" -c "
import sys
from gi.repository import Gio
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
print(bus.call_sync('$BUS', sys.argv[1], '$IFACE.Report', 'GetText', None, None, 0, 30000, None).unpack()[0])" "$1"
}
assert_eq "$(daemon_text "$r1" | sha256sum)" "$(q wait "s(0)['report']['text']" | sha256sum)" \
  "the same text the daemon renders of that report"
assert_contains "$(q wait "text(0)")" "checked the report's signature against the daemon's key $fingerprint" \
  "the text says the signature was checked and against which key"
assert_eq "false ${r1##*/} true" "$(q wait "str(c(1).get('isError')).lower() + ' ' + ident(1)['report'] + ' ' + str(ident(1)['signature_verified']).lower()")" \
  "vm_report returns the same signed report"

worker asker '
a=$(gdbus call $B --timeout 600 --object-path "$VIVARIUM_TASK" --method org.vivarium.Vivarium1.Task.Ask "Which animal?" | tr -dc a-z)
gx "echo $a > animal.txt" && finish "asked" ""'
t2=$(submit "$tmpd/asker.sh" "grep -qx zebra animal.txt")
id2=${t2##*/}
mcp ask root "$(plan "[{\"tool\": \"vm_wait\", \"arguments\": {\"task\": \"$id2\", \"seconds\": 300}, \"timeout_ms\": 400000},
                      {\"tool\": \"vm_answer\", \"arguments\": {\"task\": \"$id2\", \"text\": \"zebra\", \"wait_seconds\": 600}, \"timeout_ms\": 700000}]")"
assert_eq "NEEDS_INPUT" "$(q ask "s(0).get('outcome')")" "vm_wait → NEEDS_INPUT"
assert_eq "the worker's question (its own words, unchecked)|Which animal?" \
  "$(q ask "s(0)['question']['label'] + '|' + s(0)['question']['text']")" "the question, labelled as the worker's words"
assert_eq "$id2 null" "$(q ask "ident(0)['task'] + ' ' + json.dumps(ident(0)['report'])")" "a task without a report yet: identity names the task, report null"
assert_ne "null" "$(q ask "json.dumps(ident(0)['session'])")" "and its running work session"
assert_eq "DONE pass" "$(q ask "s(1).get('outcome', '?') + ' ' + s(1)['report']['verification']['verdict']")" "vm_answer → the worker resumes → DONE, verified"

# The worker's own verify and none of the caller's: the worker's verdict, said so.
worker selfcheck 'gx "printf self > self.txt" && finish "I checked it myself." "test -f self.txt"'
t4=$(submit "$tmpd/selfcheck.sh" "")
id4=${t4##*/}
mcp self root "$(plan "[{\"tool\": \"vm_wait\", \"arguments\": {\"task\": \"$id4\", \"seconds\": 600}, \"timeout_ms\": 700000}]")"
assert_eq "DONE pass worker worker" "$(q self "s(0).get('outcome', '?') + ' ' + s(0)['report']['verification']['verdict'] + ' ' + s(0)['report']['verification']['whose'] + ' ' + s(0)['report']['verification']['by']")" \
  "a pass of the worker's own command: verification.by is worker"
assert_contains "$(q self "text(0)")" "Verification: pass (the worker's own command, exit status 0 in a fresh session)" \
  "the text's Verification line says it was the worker's own command"
assert_contains "$(q self "text(0)")" "Warning: the verification that passed was the worker's own command" \
  "and warns that it is no finding"

worker slow 'gx "printf partial > partial.txt"; sleep 600'
t3=$(submit "$tmpd/slow.sh" "")
id3=${t3##*/}
retry_until 120 0.5 sh -c "[ -e '$STATE/projects/demo/work/partial.txt' ]"
mcp cancel root "$(plan "[{\"tool\": \"vm_cancel\", \"arguments\": {\"task\": \"$id3\"}, \"timeout_ms\": 300000},
                         {\"tool\": \"vm_cancel\", \"arguments\": {\"task\": \"$id3\"}}]")"
assert_eq "FAILED cancelled" "$(q cancel "s(0).get('outcome', '?') + ' ' + str(s(0).get('reason'))")" "vm_cancel → FAILED, cancelled"
assert_eq '["partial.txt"]' "$(q cancel "[f['path'] for f in (s(0).get('report') or {}).get('files', [])]")" \
  "the cancelled task's work so far is committed and reported"
assert_eq "true $ERR.BadState $id3" "$(q cancel "str(c(1).get('isError')).lower() + ' ' + s(1)['error']['name'] + ' ' + str(ident(1)['task'])")" \
  "cancelling again: a structured BadState error, the identity names the task"

# --- refusals: an unauthorized user, bad input, a narrowing manifest --------

mcp denied "$tuser" "$(plan "[{\"tool\": \"vm_images\"},
                               {\"tool\": \"vm_task\", \"arguments\": {\"project\": \"demo\", \"image\": \"$IMAGE\", \"instructions\": \"x\", \"verify\": \"true\"}},
                               {\"tool\": \"vm_report\", \"arguments\": {\"task\": \"$id1\"}}]")"
assert_eq "" "$(q denied "d.get('fatal') or ''")" "the unauthorized user's session stays up"
for i in 0 1 2; do
  assert_eq "true $ERR.NotAuthorized" "$(q denied "str(c($i).get('isError')).lower() + ' ' + s($i)['error']['name']")" \
    "unauthorized: $(q denied "d['calls'][$i]['tool']") → a structured NotAuthorized error"
done
assert_eq "null null null false" "$(q denied "' '.join(json.dumps(ident(2)[k]) for k in ['task', 'report', 'key_fingerprint', 'signature_verified'])")" \
  "the identity block is there, and a refused caller learns nothing (no task, report or key)"
assert_contains "$(q denied "text(1)")" "NotAuthorized" "the text content says NotAuthorized"

mcp bad root "$(plan "[{\"tool\": \"vm_task\", \"arguments\": {\"project\": \"../etc\", \"image\": \"$IMAGE\", \"instructions\": \"x\", \"verify\": \"true\"}},
                      {\"tool\": \"vm_wait\", \"arguments\": {\"task\": \"nosuchtask\", \"seconds\": 1}},
                      {\"tool\": \"vm_wait\", \"arguments\": {\"task\": \"$id1\", \"seconds\": 3601}},
                      {\"tool\": \"vm_task\", \"arguments\": {\"project\": \"demo\", \"image\": \"$IMAGE\", \"instructions\": \"x\"}},
                      {\"tool\": \"vm_shell\", \"arguments\": {}}]")"
bad_names=$(q bad "' '.join(s(i)['error']['name'] for i in range(4))")
assert_eq "$ERR.InvalidArgument $ERR.NotFound $ERR.InvalidArgument $ERR.InvalidArgument" "$bad_names" \
  "bad names, an unknown task, an unbounded wait, a vm_task without the caller's verify: typed errors"
[ "$bad_names" = "$ERR.InvalidArgument $ERR.NotFound $ERR.InvalidArgument $ERR.InvalidArgument" ] ||
  diag "$(q bad "' | '.join(s(i)['error']['message'] for i in range(4))")"
assert_contains "$(q bad "s(3)['error']['message']")" "the worker's own command would decide the verdict" \
  "vm_task without verify says why it is needed"
assert_eq "-32602" "$(q bad "c(4)['thrown']['code']")" "an unknown tool is a JSON-RPC error (-32602)"

cat > /etc/vivarium/mcp.conf <<EOF
[Client narrow]
Tools=vm_task;vm_images
Images=debian
[Client lenient]
Tools=vm_task
WorkerVerify=true
EOF
at_exit rm -f /etc/vivarium/mcp.conf
mcp narrow root "$(plan '["--client", "narrow"]' "[{\"tool\": \"vm_images\"},
                      {\"tool\": \"vm_task\", \"arguments\": {\"project\": \"demo\", \"image\": \"$IMAGE\", \"instructions\": \"x\", \"verify\": \"true\"}},
                      {\"tool\": \"vm_projects\"}]")"
assert_eq '["vm_task", "vm_images"]' "$(q narrow "[t['name'] for t in d['tools']]")" "the manifest narrows tools/list"
assert_eq "[]" "$(q narrow "s(0)['images']")" "and vm_images to the images it allows"
assert_eq "$ERR.NotAuthorized $ERR.NotAuthorized" "$(q narrow "s(1)['error']['name'] + ' ' + s(2)['error']['name']")" \
  "an image or a tool outside the manifest: NotAuthorized"
mcp lenient root "$(plan '["--client", "lenient"]' '[]')"
assert_eq '["project", "image", "instructions"]' "$(q lenient "d['tools'][0]['inputSchema']['required']")" \
  "a manifest with WorkerVerify=true lets vm_task leave verify out"
assert_eq "4" "$(call "$OBJ" Manager.ListTasks | grep -o "$OBJ/tasks/" | wc -l | tr -d ' ')" \
  "no refused call submitted a task (the four script tasks only)"

# --- vm_task: the agent worker against the scripted model server -------------

mcp task root "$(plan "[{\"tool\": \"vm_task\", \"arguments\": {\"project\": \"demo\", \"image\": \"$IMAGE\",
                         \"instructions\": \"Write hello.txt containing hello. [conversation: mcp-hello]\",
                         \"verify\": \"grep -qx hello hello.txt\", \"wait_seconds\": 600}, \"timeout_ms\": 900000}]")"
assert_eq "false DONE" "$(q task "str(c(0).get('isError')).lower() + ' ' + str(s(0).get('outcome', s(0).get('error')))")" \
  "vm_task (agent worker, scripted model) → DONE"
assert_eq "$IMAGE $digest $fingerprint true" \
  "$(q task "' '.join(str(ident(0).get(k)).lower() if k == 'signature_verified' else str(ident(0).get(k)) for k in ['image', 'image_digest', 'signed_by', 'signature_verified'])")" \
  "vm_task's identity: image, digest, the daemon's key, signature checked"
tid=$(q task "str(ident(0).get('task'))")
assert_eq "agent" "$(prop "$OBJ/tasks/$tid" Task Worker 2>&1)" "vm_task ran the agent worker"
assert_ne "None" "$(q task "str(ident(0).get('session'))")" "the identity names the work session"
assert_eq "pass caller" "$(q task "(s(0).get('report') or {}).get('verification', {}).get('verdict', '') + ' ' + (s(0).get('report') or {}).get('verification', {}).get('whose', '')")" \
  "the caller's verification passed in a fresh machine"
assert_eq '[["hello.txt", "added"]]' "$(q task "[[f['path'], f['change']] for f in (s(0).get('report') or {}).get('files', [])]")" \
  "the agent's file is committed"
assert_eq "the worker's unverified claim|I wrote hello.txt; it says hello." \
  "$(q task "(s(0).get('report') or {}).get('worker_claim', {}).get('label', '') + '|' + (s(0).get('report') or {}).get('worker_claim', {}).get('summary', '')")" \
  "the model's summary stays labelled as a claim"
assert_eq "hello" "$(git --git-dir="$STATE/projects/demo/repo" show "$(q task "(s(0).get('report') or {}).get('commit', '')"):hello.txt" 2>&1)" \
  "the report's commit holds the file"
assert_eq "2" "$(grep -c '"conversation": "mcp-hello"' "$tmpd/model-requests" 2>/dev/null || echo 0)" \
  "the model server served both turns"
assert_eq "" "$(cat "$tmpd/model-failures")" "the model server's assertions on the agent's requests held"
assert_not_contains "$(q task "json.dumps(c(0))")" "I will write the file." "the transcript never reaches the caller's result"

assert_eq "" "$(pgrep -x vivarium-mcp)" "no vivarium-mcp is left running"

done_testing
