# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The real MCP SDK client for system tests (sourced after lib.sh, with
# $tmpd set): the SDK installed outside the host by tests/mcp/run-system-test.sh
# is copied into $tmpd with tests/mcp/mcp-client.mjs, readable by every user.
#   mcp_setup_sdk          copy them; bails out when the SDK is missing
#   mcp_client OUT PLAN [PREFIX...]
#                          the SDK client on PLAN (JSON), run under PREFIX
#                          (run_as_user USER, there, … or nothing), its output
#                          in $tmpd/OUT.json; a client that failed is diagnosed
#   q OUT PYEXPR           evaluate PYEXPR over d, the client's output $tmpd/OUT.json:
#                          c(i) is call i's result, s(i) its structuredContent,
#                          ident(i) its identity block, text(i) its text content

mcp_setup_sdk () {
  local sdk_src=${VIVARIUM_TEST_BUILD_DIR:?}/tests/mcp-sdk
  [ -f "$sdk_src/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
    bail_out "the MCP SDK is not installed in $sdk_src: run through tests/mcp/run-system-test.sh"
  cp -r "$sdk_src" "$tmpd/sdk"
  cp "$VIVARIUM_TEST_SOURCE_DIR/tests/mcp/mcp-client.mjs" "$tmpd/"
  chmod -R a+rX "$tmpd"
  sdk_version=$(node -p "require('$tmpd/sdk/node_modules/@modelcontextprotocol/sdk/package.json').version")
  diag "MCP SDK $sdk_version"
}

mcp_client () {
  local out=$1 plan=$2 fatal
  shift 2
  printf '%s\n' "$plan" > "$tmpd/plan-$out.json"
  chmod a+r "$tmpd/plan-$out.json"
  "$@" node "$tmpd/mcp-client.mjs" "$tmpd/sdk" "$tmpd/plan-$out.json" > "$tmpd/$out.json" 2> "$tmpd/$out.err"
  fatal=$(q "$out" "d.get('fatal') or ''")
  [ -z "$fatal" ] || diag "SDK client failed: $fatal" "$(tail -n 20 "$tmpd/$out.err")"
}

q () {
  "$PY" - "$tmpd/$1.json" "$2" <<'PYEOF' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
def c(i):
    x = d['calls'][i]
    return x.get('result') or {'thrown': x.get('thrown')}
def s(i):
    return c(i).get('structuredContent', {})
def ident(i):
    return s(i).get('identity', {})
def text(i):
    return ''.join(b.get('text', '') for b in c(i).get('content', []))
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v))
PYEOF
}

# mcp_start_model PORT: the agent's scripted model server (tests/agent/) on
# 127.0.0.1:PORT replaying tests/mcp/conversations.json, and the daemon
# pointed at it. The configuration is written before the daemon's next
# start (it reads it then), so the daemon and its gateway are stopped here.
# The server's requests go to $tmpd/model-requests, its failed assertions
# on them to $tmpd/model-failures.
mcp_start_model () {
  local port=$1 server=$VIVARIUM_TEST_SOURCE_DIR/tests/agent/scripted-model.py
  [ -f "$server" ] || bail_out "the agent's scripted model server is missing: $server"
  mkdir -p /etc/vivarium/conf.d
  printf '[Agent]\nEndpoint=http://127.0.0.1:%s/v1\nModel=vivarium-test-model\n' "$port" \
    > /etc/vivarium/conf.d/60-test-mcp.conf
  at_exit rm -f /etc/vivarium/conf.d/60-test-mcp.conf
  systemctl stop vivariumd.service vivarium-gateway.service 2>/dev/null
  : > "$tmpd/model-failures"
  "$PY" "$server" --port "$port" --conversations "$VIVARIUM_TEST_SOURCE_DIR/tests/mcp/conversations.json" \
    --failures "$tmpd/model-failures" --log "$tmpd/model-requests" > "$tmpd/model.out" 2>&1 &
  model_pid=$!
  at_exit kill "$model_pid"
  retry_until 50 0.1 grep -q ready "$tmpd/model.out" ||
    bail_out "the scripted model server did not start: $(cat "$tmpd/model.out")"
}
