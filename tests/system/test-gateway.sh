#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The model gateway on the shipped configuration and across its own faults, on
# a real systemd host with real QEMU and real git, against the scripted model
# server (tests/agent/scripted-model.py) on the endpoint /usr/share/vivarium/
# defaults.conf names (127.0.0.1:11434, a local Ollama's), serving the model it
# names, with no key:
#   1. an agent task on nothing but the installed defaults (no /etc/vivarium/
#      conf.d/) reaches DONE; what the gateway forwards is its allow-list with
#      n and max_tokens clamped; an endpoint's error text is replaced; the
#      gateway is killed (-9) while the task waits for an answer, comes back
#      by itself, and the task's counts go on (the report counts both halves);
#      killed again while a request is out, the agent asks once more;
#   2. a task's request cap holds across a kill of the gateway;
#   3. a configuration the gateway refuses leaves it failed (not retried), and
#      an agent task then ends FAILED with the gateway's own reason.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-gateway.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly DEFAULTS=/usr/share/vivarium/defaults.conf

require_systemd_host vivariumctl gdbus busctl git setpriv "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
[ -x /usr/libexec/vivarium/vivarium-gateway ] || bail_out "vivarium-gateway is not installed"

tmpd=$(mktemp -d /var/tmp/vivarium-gateway.XXXXXX)
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service "$GW" 'vivarium-worker-*'
usage_of () {  # TASK_ID KEY: the gateway's persisted count
  sed -n "s/^$2=//p" "/run/vivarium/tasks/$1/usage" 2>/dev/null
}
gateway_pid () { systemctl show -P MainPID "$GW"; }
kill_gateway () {  # prints the PID it killed (never "kill -9 0": that is this test's own group)
  local pid
  pid=$(gateway_pid)
  [ "${pid:-0}" -gt 1 ] && kill -9 "$pid"
  echo "${pid:-0}"
}
gateway_back () {  # OLD_PID: running again, another process
  local pid
  pid=$(gateway_pid)
  [ "$(systemctl is-active "$GW")" = active ] && [ "$pid" != 0 ] && [ "$pid" != "$1" ]
}
model_line () {  # REPORT_JSON
  report_field "$1" "' '.join(str(r['model'][k]) for k in ('requests', 'refused', 'prompt-tokens', 'completion-tokens'))"
}

# --- the shipped configuration ------------------------------------------------------

assert_success "defaults.conf is installed as the first layer" -- test -f "$DEFAULTS"
endpoint=$(sed -n 's/^Endpoint=//p' "$DEFAULTS")
model=$(sed -n 's/^Model=//p' "$DEFAULTS")
max_tokens=$(sed -n 's/^MaxTokens=//p' "$DEFAULTS")
assert_eq "http://127.0.0.1:11434/v1" "$endpoint" "its endpoint is a local server's"
assert_ne "" "$model" "it names a model"
assert_eq "" "$(cat /etc/vivarium/vivarium.conf /etc/vivarium/conf.d/*.conf 2>/dev/null | grep -i '^\[Agent\]')" \
  "nothing in /etc/vivarium configures the agent"

: > "$tmpd/failures"
"$PY" "$SRC/tests/agent/scripted-model.py" --port 11434 --conversations "$SRC/tests/agent/conversations.json" \
  --model "$model" --no-authorization --failures "$tmpd/failures" --log "$tmpd/requests" > "$tmpd/model.out" 2>&1 &
model_pid=$!
at_exit kill "$model_pid"
retry_until 50 0.1 grep -q ready "$tmpd/model.out" || bail_out "the scripted model server did not start: $(cat "$tmpd/model.out")"
systemctl stop vivariumd.service "$GW" 2>/dev/null
systemctl reset-failed "$GW" 2>/dev/null

out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$OBJ/projects/demo" "create the project"
build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

# --- 1. the defaults alone; the gateway killed mid-task -----------------------------------

t1=$(submit_agent restart)
assert_contains "$t1" "$OBJ/tasks/" "an agent task on the installed defaults is accepted"
outcome1=$(wait_outcome "$t1" 300)
assert_eq "NEEDS_INPUT" "$outcome1" "its agent reached the model through the gateway and asks"
[ "$outcome1" = NEEDS_INPUT ] || diag "its reason: $(task_prop "$t1" Reason)"
id1=${t1##*/}
wuid=$(systemctl show -P User "vivarium-worker-$id1.service")
sock=/run/vivarium/tasks/$id1/model.sock

probe='{"messages":[{"role":"system","content":"s"},{"role":"user","content":"[conversation: probe]"}],
 "n":5,"max_tokens":999999,"logit_bias":{"1":100},"store":true,"user":"x","logprobs":true,"temperature":0.5}'
assert_eq "200" "$(gw_request "$wuid" "$sock" POST /v1/chat/completions "$probe")" "the worker's uid is served"
line=$(grep '"conversation": "probe"' "$tmpd/requests" | tail -n 1)
assert_eq "1 $max_tokens max_tokens messages model n temperature" \
  "$("$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["n"], r["max_tokens"], " ".join(r["members"]))' "$line" 2>&1)" \
  "the endpoint got n 1, max_tokens at MaxTokens=, and the allow-listed members only"
untagged='{"messages":[{"role":"system","content":"s"},{"role":"user","content":"no tag"}]}'
answer=$(GW_BODY=1 gw_request "$wuid" "$sock" POST /v1/chat/completions "$untagged")
assert_contains "$answer" "500 " "an endpoint's error keeps its status"
assert_contains "$answer" "the model endpoint failed (status 500)" "and says the gateway's own sentence"
assert_not_contains "$answer" "scripted model" "not the endpoint's words"
assert_eq "0 0 600" "$(stat -c '%u %g %a' "/run/vivarium/tasks/$id1/usage" 2>&1)" "the task's counts are root's, 0600"
assert_eq "3" "$(usage_of "$id1" Requests)" "three requests so far (the agent's first, two probes)"

old=$(kill_gateway)
retry_until 100 0.1 gateway_back "$old"
assert_eq "active" "$(systemctl is-active "$GW")" "killed with -9, the gateway comes back by itself"
assert_eq "1" "$(systemctl show -P NRestarts "$GW")" "systemd restarted it once"
retry_until 50 0.1 test -S "$sock"
assert_eq "$wuid 0 600" "$(stat -c '%u %g %a' "$sock" 2>&1)" "the task's socket is bound again, the worker's"
assert_contains "$(journalctl -u "$GW" -o cat --no-pager | tail -n 20)" "task $id1: counts read back (3 requests made)" \
  "it read the task's counts back"
assert_success "answer the task" -- call "$t1" Task.Answer "go on"
assert_eq "DONE" "$(wait_outcome "$t1" 600)" "the task goes on through the restarted gateway and ends DONE"
get_json "$(task_prop "$t1" Report)" "$tmpd/r1.json"
assert_eq "pass" "$(report_field "$tmpd/r1.json" "r['verification']['verdict']")" "its verification passed"
assert_eq "5 0 400 40" "$(model_line "$tmpd/r1.json")" \
  "the report counts the requests from before the restart and after (5, tokens of the four 200s)"
assert_eq "0" "$(grep -c '"authorization": true' "$tmpd/requests")" \
  "no key was sent (none is configured; the server checks each POST for that too)"

# The gateway killed while a request is out: the agent asks once more
# through the restarted gateway; the lost request stays counted.
t1b=$(submit_agent slow)
retry_until 600 0.1 grep -q '"conversation": "slow", "turn": 0' "$tmpd/requests"
old=$(kill_gateway)
retry_until 100 0.1 gateway_back "$old"
assert_eq "DONE" "$(wait_outcome "$t1b" 300)" "killed while the model thinks, the gateway comes back and the task still ends DONE"
assert_eq "2" "$(grep -c '"conversation": "slow", "turn": 0' "$tmpd/requests")" "the agent asked the dropped turn once more"
get_json "$(task_prop "$t1b" Report)" "$tmpd/r1b.json"
assert_eq "3 0 200 20" "$(model_line "$tmpd/r1b.json")" \
  "the report counts the dropped request too (3 sent; tokens of the two answered)"

# --- 2. the cap across a restart ---------------------------------------------------------------

install -d -m 0755 /etc/vivarium/conf.d
printf '[Agent]\nMaxRequestsPerTask=4\n' > /etc/vivarium/conf.d/50-gateway-test.conf
at_exit rm -f /etc/vivarium/conf.d/50-gateway-test.conf
# The kills above count against the unit's start rate limit (5 in 10 s);
# this test's own restarts must not make it refuse them.
systemctl reset-failed "$GW"
systemctl restart "$GW"
t2=$(submit_agent flood)
assert_eq "NEEDS_INPUT" "$(wait_outcome "$t2" 300)" "the capped task asks (1 of its 4 requests)"
id2=${t2##*/}
wuid2=$(systemctl show -P User "vivarium-worker-$id2.service")
sock2=/run/vivarium/tasks/$id2/model.sock
statuses=""
for _ in 1 2 3 4; do statuses+="$(gw_request "$wuid2" "$sock2" GET /v1/models) "; done
assert_eq "200 200 200 429 " "$statuses" "its worker's uid spends the rest; the 5th is refused"
old=$(kill_gateway)
retry_until 100 0.1 gateway_back "$old"
retry_until 50 0.1 test -S "$sock2"
assert_eq "429" "$(gw_request "$wuid2" "$sock2" GET /v1/models)" "after a kill and restart of the gateway the cap still holds"
assert_success "answer the capped task" -- call "$t2" Task.Answer yes
assert_eq "FAILED" "$(wait_outcome "$t2" 300)" "its agent's next request is refused: FAILED"
assert_contains "$(task_prop "$t2" Reason)" "429" "with the gateway's refusal as the reason"

# --- 3. a configuration the gateway refuses -------------------------------------------------------

printf '[Agent]\nModel=\n' > /etc/vivarium/conf.d/50-gateway-test.conf
systemctl reset-failed "$GW"
systemctl restart "$GW" 2>/dev/null
retry_until 50 0.1 systemctl is-failed --quiet "$GW"
assert_eq "failed exit-code 78" \
  "$(systemctl show -P ActiveState "$GW") $(systemctl show -P Result "$GW") $(systemctl show -P ExecMainStatus "$GW")" \
  "without a model the gateway refuses to start (exit 78)"
restarts=$(systemctl show -P NRestarts "$GW")
sleep 3
assert_eq "failed $restarts" "$(systemctl is-active "$GW") $(systemctl show -P NRestarts "$GW")" \
  "and is not restarted: a configuration error stays until it is fixed"
assert_contains "$(systemctl show -P StatusText "$GW")" "[Agent] Model= is not set" "its StatusText= says why"
t3=$(submit_agent fix-script)
assert_eq "FAILED" "$(wait_outcome "$t3" 300)" "an agent task with no gateway ends FAILED"
reason3=$(task_prop "$t3" Reason)
assert_contains "$reason3" "the model gateway is not running: $GW is failed (exit-code, exit status 78)" \
  "its reason says the gateway is not running, from systemd"
assert_contains "$reason3" "[Agent] Model= is not set (1 to 256 characters) in $DEFAULTS" "and why, where the key goes"
rm -f /etc/vivarium/conf.d/50-gateway-test.conf
systemctl reset-failed "$GW"

assert_eq "1" "$(grep -c . "$tmpd/failures")" "the model server saw only the one request made to fail" \
  "$(cat "$tmpd/failures")"
assert_contains "$(cat "$tmpd/failures")" "no conversation tag" "the untagged probe"

done_testing
