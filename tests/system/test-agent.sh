#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The agent worker (vivarium-agent) and its gateway (vivarium-gateway) on a
# real systemd host, real QEMU, real git, against a scripted model server
# (tests/agent/scripted-model.py) on 127.0.0.1 inside the host: it speaks the
# chat-completions wire protocol, replays tests/agent/conversations.json and
# asserts on every request it gets (the tool results it expects, the model the
# gateway forced, the key the gateway added). The model is the one part that
# cannot be real here (no weights on these machines).
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-agent.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly KEY=vivarium-test-key-7d1f3c9a

require_systemd_host vivariumctl gdbus busctl git setpriv nsenter "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
[ -x /usr/libexec/vivarium/vivarium-agent ] || bail_out "vivarium-agent is not installed"
[ -x /usr/libexec/vivarium/vivarium-gateway ] || bail_out "vivarium-gateway is not installed"

call () {
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
user_call () {
  local path=$1 method=$2
  shift 2
  run_as_user "$tuser" gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () { busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'; }
wait_outcome () {
  gdbus call --system --dest "$BUS" --object-path "$1" --method "$IFACE.Task.Wait" --timeout $(($2 + 30)) \
    "uint32 $2" 2>&1 | grep -o "'[A-Z_]*'" | tr -d "'"
}
submit_agent () {  # CONVERSATION [VERIFY]: prints the task's path, or the error
  "$PY" - "$@" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'worker': GLib.Variant('s', 'agent'), 'timeout': GLib.Variant('u', 900)}
if len(sys.argv) > 2 and sys.argv[2]:
    opts['verify'] = GLib.Variant('s', sys.argv[2])
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'SubmitTask', GLib.Variant('(sssa{sv})', ('demo', 'tiny',
                      'Do the task. [conversation: %s]' % sys.argv[1], opts)), None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
PYEOF
}
transcript () {  # TASK: the transcript as JSON lines [time, kind, text, truncated]
  "$PY" - "$1" <<'PYEOF'
import json, sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Task', 'GetTranscript',
                  None, None, 0, 30000, None).unpack()
for e in r[0]:
    print(json.dumps(e))
print(json.dumps({'truncated': r[1]}))
PYEOF
}
get_json () {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Report', 'GetJson',
                  None, None, 0, 30000, None)
open(sys.argv[2], 'w').write(r.unpack()[0])
PYEOF
}
report_field () { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1]))['report']; print($2)" "$1" 2>&1; }
# gw_request UID SOCKET METHOD PATH [BODY]: one HTTP request on a unix socket as UID; prints the status or the error.
gw_request () {
  setpriv --reuid="$1" --regid="$1" --clear-groups "$PY" - "$2" "$3" "$4" "${5:-}" <<'PYEOF' 2>&1
import socket, sys
sock, method, path, body = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
except OSError as e:
    print('connect: %s' % e.strerror); sys.exit(0)
# "@big:N": N bytes, made here (an argument that large would pass the exec limit)
b = b'x' * int(body[5:]) if body.startswith('@big:') else body.encode()
try:
    s.sendall(('%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n' % (method, path, len(b))).encode() + b)
except OSError:
    pass  # refused before the body was read: the answer is still there
print(s.recv(100).decode().split('\r\n')[0].split(' ')[1])
PYEOF
}

tmpd=$(mktemp -d /var/tmp/vivarium-agent.XXXXXX)
at_exit rm -rf "$tmpd"
create_test_user tuser || bail_out "cannot create a test user"
journal_at_exit vivariumd.service vivarium-gateway.service 'vivarium-worker-*'

# --- the model server and the configuration -------------------------------------

port=$((20000 + RANDOM % 20000))
: > "$tmpd/failures"
"$PY" "$SRC/tests/agent/scripted-model.py" --port "$port" --conversations "$SRC/tests/agent/conversations.json" \
  --failures "$tmpd/failures" --log "$tmpd/requests" > "$tmpd/model.out" 2>&1 &
model_pid=$!
at_exit kill "$model_pid"
retry_until 50 0.1 grep -q ready "$tmpd/model.out" || bail_out "the scripted model server did not start: $(cat "$tmpd/model.out")"

install -d -m 0755 /etc/vivarium/conf.d
install -m 0600 /dev/null /etc/vivarium/agent-test.key
printf '%s\n' "$KEY" > /etc/vivarium/agent-test.key
at_exit rm -f /etc/vivarium/agent-test.key
cat > /etc/vivarium/conf.d/50-agent-test.conf <<EOF
[Agent]
Endpoint=http://127.0.0.1:$port/v1
Model=$MODEL
KeyFile=/etc/vivarium/agent-test.key
MaxRequestsPerTask=30
MaxRequestBytes=1048576
EOF
at_exit rm -f /etc/vivarium/conf.d/50-agent-test.conf
# The administrator's copy of agent.conf replaces the shipped one.
install -d -m 0755 /etc/vivarium/agent
printf '[Agent]\nMaxTurns=25\nTakesImages=true\n' > /etc/vivarium/agent/agent.conf
at_exit rm -rf /etc/vivarium/agent
systemctl stop vivariumd.service vivarium-gateway.service 2>/dev/null

out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$OBJ/projects/demo" "create the project"
build_out=$(vivariumctl --no-interaction image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- vivariumctl --no-interaction image freeze "$IMAGE"
git_demo () { git --git-dir="$STATE/projects/demo/repo" "$@"; }

# --- refusals --------------------------------------------------------------------------

assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" "x" \
  "{'worker': <'agent'>, 'script': <b'echo'>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.SubmitTask demo "$IMAGE" "x" "{'worker': <'robot'>}"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$OBJ" Manager.SubmitTask demo "$IMAGE" "x" "{'worker': <'agent'>}"

# --- write → run → fail → fix → run → finish → DONE ---------------------------------------

t1=$(submit_agent fix-script)
assert_contains "$t1" "$OBJ/tasks/" "root submits an agent task"
assert_eq "agent" "$(prop "$t1" Task Worker)" "the task's worker is the agent"
assert_eq "DONE" "$(wait_outcome "$t1" 600)" "the fix-script conversation ends DONE"
r1=$(prop "$t1" Task Report)
get_json "$r1" "$tmpd/r1.json"
assert_eq "pass worker" "$(report_field "$tmpd/r1.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the agent's verification re-run passed in a fresh session"
commit=$(report_field "$tmpd/r1.json" "r['commit']")
assert_eq "$(printf '#!/bin/sh\necho hello')" "$(git_demo show "$commit:greet.sh" 2>&1)" "the fix is committed"
assert_contains "$(report_field "$tmpd/r1.json" "' | '.join(' '.join(c['argv']) for c in r['commands'])")" "sh greet.sh" \
  "the report lists the agent's runs"
transcript "$t1" > "$tmpd/t1"
assert_contains "$(cat "$tmpd/t1")" '"tool-call", "write_file' "the transcript has the tool calls"
assert_contains "$(cat "$tmpd/t1")" "not found" "and the failing run's guest output"
assert_contains "$(cat "$tmpd/t1")" "A typo: ech" "and the model's turns"
assert_contains "$(cat "$tmpd/t1")" "The gateway forwarded 5 model requests" "and the gateway's count"
assert_not_contains "$(call "$r1" Report.GetJson)" "A typo: ech" "the report (the caller's result) holds no transcript"
assert_eq "5 0 500 50" "$(report_field "$tmpd/r1.json" "' '.join(str(r['model'][k]) for k in ('requests', 'refused', 'prompt-tokens', 'completion-tokens'))")" \
  "the report counts the model requests and the tokens the server reported"
assert_contains "$(call "$r1" Report.GetText)" "5 requests through the gateway" "and its text says so"
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.GetTranscript
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$t1" Task.Record note hi
assert_contains "$(vivariumctl --no-interaction task transcript "${t1##*/}" 2>&1)" "tool-call" \
  "vivariumctl task transcript shows it"
assert_eq "0" "$(grep -c . "$tmpd/failures")" "the model server's assertions held so far" "$(cat "$tmpd/failures")"

# --- ask → NEEDS_INPUT → answer → DONE; the gateway checked meanwhile ---------------------

t2=$(submit_agent ask)
assert_eq "NEEDS_INPUT" "$(wait_outcome "$t2" 300)" "the agent's ask makes the task NEEDS_INPUT"
assert_contains "$(prop "$t2" Task Question)" "Which greeting" "the question is the model's"
id2=${t2##*/}
unit="vivarium-worker-$id2.service"
wpid=$(systemctl show -P MainPID "$unit")
wuid=$(systemctl show -P User "$unit")
sock=/run/vivarium/tasks/$id2/model.sock
assert_ne "0" "$wpid" "the agent's worker runs meanwhile"
assert_eq "$wuid 0 600" "$(stat -c '%u %g %a' "$sock" 2>&1)" "the model socket is the worker uid's, mode 0600"
assert_eq "200" "$(gw_request "$wuid" "$sock" GET /v1/models)" "the worker's uid reaches the model through the gateway"
assert_contains "$(gw_request "$(id -u "$tuser")" "$sock" GET /v1/models)" "Permission denied" \
  "another uid cannot connect to the task's model socket"
assert_eq "404" "$(gw_request "$wuid" "$sock" POST /v1/embeddings '{}')" "another path is refused"
assert_eq "404" "$(gw_request "$wuid" "$sock" GET /api/tags)" "an Ollama-native path is refused"
assert_eq "403" "$(gw_request "$wuid" "$sock" POST /v1/chat/completions '{"model":"other","messages":[]}')" \
  "another model is refused"
assert_eq "403" "$(gw_request "$wuid" "$sock" POST /v1/chat/completions '{"messages":[],"stream":true}')" \
  "streaming is refused"
probe='import socket,sys
s=socket.socket(); s.settimeout(3)
try: s.connect(("127.0.0.1", int(sys.argv[1]))); print("connected")
except OSError as e: print("refused:", e)'
assert_eq "connected" "$("$PY" -c "$probe" "$port")" "positive control: the host reaches the model server"
assert_contains "$(nsenter -t "$wpid" -n setpriv --reuid="$wuid" --regid="$wuid" --clear-groups "$PY" -c "$probe" "$port" 2>&1)" \
  "refused" "the worker's own network cannot reach the model server directly"
assert_eq "yes" "$(systemctl show -P PrivateNetwork "$unit")" "the worker unit still has PrivateNetwork="
assert_contains "$(systemctl show -P IPAddressDeny "$unit")" "0.0.0.0/0" "and IPAddressDeny=any"
assert_eq "127.0.0.1/32" "$(systemctl show -P IPAddressAllow vivarium-gateway.service)" \
  "the gateway's unit allows the endpoint's one address"
assert_contains "$(systemctl show -P IPAddressDeny vivarium-gateway.service)" "0.0.0.0/0" "and denies the rest"
assert_not_contains "$(tr '\0' '\n' < "/proc/$wpid/environ")" "$KEY" "the key is not in the worker's environment"
assert_eq "" "$(grep -rl "$KEY" "/run/vivarium/tasks/$id2" "/run/vivarium/workers/$id2" 2>/dev/null)" \
  "nor in the worker's files"
assert_success "answer the question" -- call "$t2" Task.Answer bonjour
assert_eq "DONE" "$(wait_outcome "$t2" 600)" "the answered task ends DONE"
get_json "$(prop "$t2" Task Report)" "$tmpd/r2.json"
assert_eq "pass" "$(report_field "$tmpd/r2.json" "r['verification']['verdict']")" "its verification passed"
assert_contains "$(transcript "$t2")" "screenshot taken" "the screenshot went to the model as an image (checked by the server) and is in the transcript"
assert_not_contains "$(transcript "$t2")" "$KEY" "the key is not in the transcript"
assert_eq "" "$(ls -A "/run/vivarium/tasks/" 2>&1)" "the task's socket directory is gone"
assert_ne "0" "$(grep -c '"authorization": true' "$tmpd/requests")" "the gateway added the key upstream (each POST is checked by the server)"

# --- hostile models -------------------------------------------------------------------------

dpid=$(systemctl show -P MainPID vivariumd.service)
t3=$(submit_agent hostile)
assert_eq "FAILED" "$(wait_outcome "$t3" 900)" "a hostile model's task ends FAILED"
assert_contains "$(prop "$t3" Task Reason)" "25 turns" "with the reason: its turns ran out (MaxTurns from /etc)"
transcript "$t3" > "$tmpd/t3"
assert_contains "$(cat "$tmpd/t3")" "there is no tool format_disk" "the unknown tool got an error result"
assert_contains "$(cat "$tmpd/t3")" "not a JSON object" "the malformed JSON got an error result"
assert_contains "$(cat "$tmpd/t3")" "are 10485" "the 10 MiB argument got an error result"
assert_eq "25" "$(grep -c '"conversation": "hostile"' "$tmpd/requests")" "the agent stopped after 25 of 10 000 turns"
t4=$(submit_agent errors)
assert_eq "FAILED" "$(wait_outcome "$t4" 600)" "a model that only errs ends FAILED"
assert_contains "$(prop "$t4" Task Reason)" "in a row failed" "with the reason"

# The agent's wall clock bounds a request that is out too: a model that
# thinks for 90 s is given up on when the agent's 20 s are over, not awaited.
printf '[Agent]\nMaxTurns=25\nTakesImages=true\nWallClockSec=20\n' > /etc/vivarium/agent/agent.conf
t6=$(submit_agent stall)
retry_until 600 0.1 grep -q '"conversation": "stall"' "$tmpd/requests"
asked=$(date +%s)
unit6="vivarium-worker-${t6##*/}.service"
# A oneshot unit: "activating" while the agent runs; its MainPID says it.
assert_ne "0" "$(systemctl show -P MainPID "$unit6")" "the agent runs while its request is out"
retry_until 1200 0.1 eval '[ "$(systemctl show -P MainPID "$unit6" 2>/dev/null || echo 0)" = 0 ]'
took=$(($(date +%s) - asked))
printf '[Agent]\nMaxTurns=25\nTakesImages=true\n' > /etc/vivarium/agent/agent.conf
assert_eq "yes" "$([ "$took" -lt 45 ] && echo yes || echo "no, after $took s")" \
  "the agent stopped waiting for the model at its wall clock (the model answers after 90 s)"
assert_eq "FAILED" "$(wait_outcome "$t6" 300)" "a model slower than the agent's wall clock: the task ends FAILED"
assert_contains "$(prop "$t6" Task Reason)" "wall clock of 20 s ran out" "with the wall clock as the reason"

# The gateway's per-task cap: the worker's uid spends it while the task waits
# for an answer, then the agent's next request is refused and the task ends.
t5=$(submit_agent flood)
assert_eq "NEEDS_INPUT" "$(wait_outcome "$t5" 300)" "the flood task asks"
id5=${t5##*/}
wuid5=$(systemctl show -P User "vivarium-worker-$id5.service")
sock5=/run/vivarium/tasks/$id5/model.sock
statuses=""
for _ in $(seq 30); do statuses+=" $(gw_request "$wuid5" "$sock5" GET /v1/models)"; done
assert_contains "$statuses" "429" "the gateway refuses a task's requests past MaxRequestsPerTask" "$statuses"
assert_eq "413" "$(gw_request "$wuid5" "$sock5" POST /v1/chat/completions @big:2000000)" \
  "a request over MaxRequestBytes is refused"
assert_success "answer the flood task" -- call "$t5" Task.Answer yes
assert_eq "FAILED" "$(wait_outcome "$t5" 300)" "its agent's next request is refused: FAILED"
assert_contains "$(prop "$t5" Task Reason)" "429" "with the gateway's refusal as the reason"

# The gateway's firewall follows its endpoint: it sets its unit's
# IPAddressAllow= itself, to exactly the configured address.
sed -i "s|^Endpoint=.*|Endpoint=http://127.0.0.2:$port/v1|" /etc/vivarium/conf.d/50-agent-test.conf
systemctl restart vivarium-gateway.service 2>/dev/null
assert_eq "active 127.0.0.2/32" \
  "$(systemctl is-active vivarium-gateway.service) $(systemctl show -P IPAddressAllow vivarium-gateway.service)" \
  "another endpoint's address: the gateway's unit allows that one address, set by the gateway"
# It refuses to run in a unit that does not deny the rest.
install -d -m 0755 /run/systemd/system/vivarium-gateway.service.d
printf '[Service]\nIPAddressDeny=\n' > /run/systemd/system/vivarium-gateway.service.d/50-agent-test.conf
at_exit rm -f /run/systemd/system/vivarium-gateway.service.d/50-agent-test.conf
systemctl daemon-reload
systemctl restart vivarium-gateway.service 2>/dev/null
assert_ne "active" "$(systemctl is-active vivarium-gateway.service)" "a unit without IPAddressDeny=any: the gateway stops"
assert_contains "$(journalctl -u vivarium-gateway.service -o cat --no-pager | tail -n 5)" \
  "the unit must have IPAddressDeny=any" "and says why"
rm -f /run/systemd/system/vivarium-gateway.service.d/50-agent-test.conf
systemctl daemon-reload

assert_eq "$dpid" "$(systemctl show -P MainPID vivariumd.service)" "the daemon is unharmed (same process)"
assert_contains "$(call "$OBJ" Manager.ListTasks)" "$t4" "and answers"
assert_eq "0" "$(grep -c . "$tmpd/failures")" "every request the model server got was the one it expected" \
  "$(cat "$tmpd/failures")"

done_testing
