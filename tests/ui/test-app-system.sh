#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Inside the systemd test host (run by run-app-system.sh through
# tests/system/vivarium-test-host, with VIVARIUM_TEST_BTRFS so projects have
# a real btrfs): the app against the real vivariumd on the real system bus,
# under Xvfb, driven through AT-SPI. Two runs of run-ui-test.sh:
#   1. as root (polkit allows root everything): test-app-system.py — the
#      daemon masked then started, every page, an image built and frozen, a
#      project, a task whose question is answered in the app, its report
#      (deleted under the open detail by a second task's, [Tasks]
#      MaxReports=1), an agent task handed over in New Task… (against the
#      scripted model server) ending DONE with its report verified, the
#      self-test, every page at 360 px;
#   2. as an unprivileged user whose only polkit rule lets it read:
#      test-app-refused.py — an admin action refused, shown as a toast with
#      the reason.
# Screenshots leave the container as "# png NAME BASE64" lines.
set -u
[ "$(id -u)" = 0 ] || { echo "Bail out! must run as root"; exit 1; }
[ -d /run/systemd/system ] || { echo "Bail out! systemd is not PID 1 here"; exit 1; }
[ "$(stat -f -c %T /var/lib/vivarium/projects 2>/dev/null)" = btrfs ] ||
  { echo "Bail out! /var/lib/vivarium/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"; exit 1; }

src=$(dirname -- "$(readlink -f -- "$0")")/../..
build=${VIVARIUM_UI_BUILD:-$src/build}
export VIVARIUM_UI_APP=/usr/bin/vivarium
[ -x "$VIVARIUM_UI_APP" ] || VIVARIUM_UI_APP=$(command -v vivarium)
work=$(mktemp -d /var/tmp/vivarium-ui.XXXXXX)
chmod 0755 "$work"
mkdir -m 0777 "$work/logs" "$work/logs-user" "$work/home"
user=vu$$
rule=/etc/polkit-1/rules.d/49-vivarium-ui-test.rules
agent_conf=/etc/vivarium/conf.d/50-ui-test-agent.conf
agent_key=/etc/vivarium/ui-test-agent.key
model_pid=
retention=/etc/vivarium/conf.d/50-vivarium-ui-retention.conf
cleanup () {
  [ -n "$model_pid" ] && kill "$model_pid" 2>/dev/null
  systemctl unmask vivariumd.service >/dev/null 2>&1
  rm -f "$rule" "$agent_conf" "$agent_key" "$retention"
  userdel "$user" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# The task's worker (a script worker, as in tests/system/test-tasks.sh): it
# asks, writes the answer into the project, and claims it did.
cat > "$work/worker.sh" <<'WEOF'
#!/bin/sh
answer=$(vivariumctl worker ask "Which colour should colour.txt say?") || exit 1
vivariumctl worker exec --cwd /project -- sh -c "printf '%s\n' \"\$1\" > colour.txt" sh "$answer" || exit 1
vivariumctl worker finish --summary "I wrote colour.txt with the colour you chose." --verify "grep -qx blue colour.txt"
WEOF
chmod 0755 "$work/worker.sh"
export VIVARIUM_UI_WORKER=$work/worker.sh
# A second task, submitted with vivariumctl while the first one's report is
# open: with the bounds of 1 below, its report deletes the first report and
# its end forgets the first task (ReportRemoved, TaskRemoved).
cat > "$work/quick.sh" <<'WEOF'
#!/bin/sh
vivariumctl worker finish --summary "Nothing to do." --verify "true"
WEOF
chmod 0755 "$work/quick.sh"
export VIVARIUM_UI_QUICK_WORKER=$work/quick.sh
install -d -m 0755 /etc/vivarium/conf.d
printf '[Tasks]\nMaxReports=1\nMaxFinishedTasks=1\n' > "$retention"
export VIVARIUM_UI_EMIT_PNG=1

# The agent task handed over in the dialog: vivarium-agent against the
# scripted model server (tests/agent/scripted-model.py, as in
# tests/system/test-agent.sh) on 127.0.0.1: it writes agent.txt and
# finishes with a verification command of its own.
key=vivarium-ui-test-key-$RANDOM$RANDOM
model=vivarium-ui-test-model
port=$((20000 + RANDOM % 20000))
/usr/bin/python3 - "$work/conversations.json" "$model" "$key" <<'PYEOF'
import json, sys
path, model, key = sys.argv[1:4]
conv = [
    {"expect": ["[conversation: ui-agent]"],
     "reply": {"content": "Writing agent.txt.", "tool_calls": [{"function": {"name": "write_file", "arguments": {
         "path": "/project/agent.txt", "content": "written by the agent\n"}}}]}},
    {"expect": ["\"written\""],
     "reply": {"tool_calls": [{"function": {"name": "finish", "arguments": {
         "summary": "I wrote agent.txt.", "verify_command": "grep -qx 'written by the agent' agent.txt"}}}]}},
]
json.dump({"model": model, "authorization": "Bearer " + key, "conversations": {"ui-agent": conv}}, open(path, 'w'))
PYEOF
: > "$work/model-failures"
/usr/bin/python3 "$src/tests/agent/scripted-model.py" --port "$port" --conversations "$work/conversations.json" \
  --failures "$work/model-failures" --log "$work/model-requests" > "$work/model.out" 2>&1 &
model_pid=$!
for _ in $(seq 50); do grep -q ready "$work/model.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$work/model.out" || { echo "Bail out! the scripted model server did not start: $(cat "$work/model.out")"; exit 1; }
install -d -m 0755 /etc/vivarium/conf.d
install -m 0600 /dev/null "$agent_key"
printf '%s\n' "$key" > "$agent_key"
printf '[Agent]\nEndpoint=http://127.0.0.1:%s/v1\nModel=%s\nKeyFile=%s\n' "$port" "$model" "$agent_key" > "$agent_conf"
# Both read the configuration when they start: the test starts the daemon.
systemctl stop vivariumd.service vivarium-gateway.service 2>/dev/null
export VIVARIUM_UI_AGENT_INSTRUCTIONS="Write agent.txt. [conversation: ui-agent]"
export VIVARIUM_UI_MODEL_FAILURES=$work/model-failures

# 1. as root. run-ui-test.sh provides Xvfb and a session bus; the system
# bus is the real one, so it must not replace it.
VIVARIUM_UI_REAL_SYSTEM_BUS=1 VIVARIUM_UI_SCRIPT=$src/tests/ui/test-app-system.py \
  "$src/tests/ui/run-ui-test.sh" "$build" "$src" "$work/logs"
rc=$?

# 2. as a user polkit lets read and nothing else.
useradd --no-create-home --shell /usr/sbin/nologin --user-group "$user" || { echo "Bail out! useradd"; exit 1; }
cat > "$rule" <<REOF
polkit.addRule(function(action, subject) {
  if (subject.user == "$user" &&
      (action.id == "org.vivarium.vivarium1.read-status" || action.id == "org.vivarium.vivarium1.read-reports"))
    return polkit.Result.YES;
});
REOF
runuser -u "$user" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$work/home" LANG=C.UTF-8 \
  VIVARIUM_UI_APP="$VIVARIUM_UI_APP" VIVARIUM_UI_REAL_SYSTEM_BUS=1 VIVARIUM_UI_EMIT_PNG=1 \
  VIVARIUM_UI_SCRIPT="$src/tests/ui/test-app-refused.py" \
  "$src/tests/ui/run-ui-test.sh" "$build" "$src" "$work/logs-user" || rc=1

exit $rc
