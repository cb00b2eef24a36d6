#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Many hosts (issue 21): vivariumctl reaches the daemon of another host by
# name over SSH (ssh -xT -- USER@HOST systemd-stdio-bridge), a real sshd.
# The client sits in a network namespace of its own, joined to this host by
# a veth pair the test puts up (10.77.0.1 here, 10.77.0.2 there) and a name
# in that namespace's /etc/hosts. Over it: status with the capacity, a task
# submitted, waited for, its signed report fetched and verified against the
# remote host's key fingerprint; a user polkit refuses gets NotAuthorized
# from the remote polkit; a wrong host key is refused by ssh itself; a verb
# that passes a descriptor is refused with a sentence. `host pick` chooses
# the host with room among one that is down, one that refuses and this one,
# and says when the task would queue ([Sessions] MaxSessions=1 here). The
# real MCP SDK client drives `vivarium-mcp --host` from the namespace: the
# listings, the CLI's task's report verified against this host's key, an
# agent task handed over (the scripted model server) and DONE, and the
# refused user's NotAuthorized as a structured tool error.
#   tests/mcp/run-system-test.sh BUILDDIR tests/system/vivarium-test-host tests/system/test-remote.sh
# (with VIVARIUM_TEST_BTRFS=768M; meson test system-remote)

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"
# shellcheck source=SCRIPTDIR/mcp-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/mcp-lib.sh"

# shellcheck source=SCRIPTDIR/remote-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/remote-lib.sh"

readonly HOSTNAME_REMOTE=vivarium-remote-test
readonly PORT=2222
readonly MODEL_PORT=18435

require_systemd_host vivariumctl vivarium-mcp node ip ssh ssh-keygen /usr/sbin/sshd systemd-stdio-bridge runuser "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-remote.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service
mcp_setup_sdk
# One session slot, so that a started session leaves none for host pick.
mcp_start_model "$MODEL_PORT"
printf '[Sessions]\nMaxSessions=1\n' > /etc/vivarium/conf.d/60-test-remote.conf
at_exit rm -f /etc/vivarium/conf.d/60-test-remote.conf

# --- the other host: a namespace, a veth pair, a name; sshd here (remote-lib.sh)
remote_setup "$tmpd" "$HOSTNAME_REMOTE" "$PORT"
create_test_user ruser || bail_out "cannot create a test user"
usermod -p '*' -s /bin/sh "$ruser"   # no password, not locked (sshd refuses a locked account), a shell for the command
remote_keys root "$ruser"
remote_client
# A second name for this host, where nothing listens (host pick's host that is down).
printf '10.77.0.1 vivarium-down\n' >> "/etc/netns/$remote_ns/hosts"
printf 'Host vivarium-down\n  Port %s\n' "$((PORT + 1))" >> "$tmpd/ssh_config"
rctl () {  # USER ARGS...: vivariumctl on the other host, calling this one's daemon
  local user=$1
  shift
  there env VIVARIUM_SSH="$tmpd/ssh" LC_ALL=C vivariumctl --no-interaction --host "$user@$HOSTNAME_REMOTE" "$@"
}

start_sshd host_a

# The namespace really is another network: this host's loopback is not there.
assert_success "the client's namespace reaches this host only over the veth" -- \
  there bash -c "exec 3<>/dev/tcp/$HOSTNAME_REMOTE/$PORT"
if there bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT" 2>/dev/null; then
  not_ok "the client's loopback is its own (sshd does not answer on it)"
else
  ok "the client's loopback is its own (sshd does not answer on it)"
fi

# --- status and capacity by name -----------------------------------------
out=$(rctl root status 2>&1)
assert_eq 0 "$?" "vivariumctl --host root@$HOSTNAME_REMOTE status" "$out $(tail -5 "$sshd_dir/log")"
assert_contains "$out" "State:        running" "it shows the remote daemon's state"
assert_contains "$out" "Slots:" "and its capacity (GetCapacity)"
grep -q "Accepted publickey for root" "$sshd_dir/log" && ok "the call came through sshd, as root" ||
  not_ok "the call came through sshd, as root" "$(cat "$sshd_dir/log")"
fpr=$(rctl root status --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["KeyFingerprint"])')
assert_eq "$(prop "$OBJ" Manager KeyFingerprint)" "$fpr" \
  "the report key's fingerprint read over SSH is this host's"

# --- a task handed over by name, its report verified with that key ---------
build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
assert_success "create a project over SSH" -- rctl root project create remote --quota 64M
cat > "$tmpd/work.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo from-afar > remote.txt'
vivariumctl worker finish --summary "Wrote remote.txt." --verify "grep -q from-afar remote.txt"
EOF
task=$(rctl root task submit remote "$IMAGE" --script "$tmpd/work.sh" 2>&1)
assert_eq 0 "$?" "task submit over SSH" "$task"
task_id=${task##*/}
out=$(rctl root task wait "$task_id" --timeout 300 2>&1)
assert_eq 0 "$?" "task wait over SSH ends" "$out"
assert_eq DONE "$(task_prop "$OBJ/tasks/$task_id" Outcome)" "the task is DONE"
rctl root task report "$task_id" --json > "$tmpd/report.json" 2>"$tmpd/report.err"
assert_eq 0 "$?" "task report --json over SSH" "$(cat "$tmpd/report.err")"
out=$(there vivariumctl report verify "$tmpd/report.json" --fingerprint "$fpr" 2>&1)
assert_eq 0 "$?" "the report verifies offline against the remote host's fingerprint" "$out"
sed 's/from-afar/from-near/g; s/"DONE"/"FAILED"/' "$tmpd/report.json" > "$tmpd/forged.json"
if cmp -s "$tmpd/report.json" "$tmpd/forged.json"; then
  not_ok "a changed report is refused (test setup: nothing was changed)"
elif there vivariumctl report verify "$tmpd/forged.json" --fingerprint "$fpr" >/dev/null 2>&1; then
  not_ok "a changed report is refused"
else
  ok "a changed report is refused"
fi
assert_eq "from-afar" "$(git --git-dir="$STATE/projects/remote/repo" show HEAD:remote.txt 2>&1)" \
  "the work is committed on this host"

# --- host pick: the host with room, by name ----------------------------------
pick () { there env VIVARIUM_SSH="$tmpd/ssh" LC_ALL=C vivariumctl --no-interaction host pick "$@"; }
out=$(pick root@vivarium-down "$ruser@$HOSTNAME_REMOTE" "root@$HOSTNAME_REMOTE" 2>"$tmpd/pick.err")
assert_eq "0 root@$HOSTNAME_REMOTE" "$? $out" "host pick: of a host that is down, one that refuses and one with room, the last" \
  "$(cat "$tmpd/pick.err")"
assert_contains "$(cat "$tmpd/pick.err")" "root@vivarium-down" "the host that is down is named on stderr"
assert_contains "$(cat "$tmpd/pick.err")" "$ruser@$HOSTNAME_REMOTE: " "the host that refuses is named on stderr"
assert_contains "$(cat "$tmpd/pick.err")" "$ERR.NotAuthorized" "with the remote polkit's refusal"
pick root@vivarium-down >/dev/null 2>&1
assert_eq 1 "$?" "host pick with no host that answers: exit 1"
session=$(ctl session start "$IMAGE" --memory 256 2>&1)
assert_eq 0 "$?" "a session takes the only slot (MaxSessions=1)" "$session"
out=$(pick "root@$HOSTNAME_REMOTE" 2>"$tmpd/pick.err")
assert_eq "0 root@$HOSTNAME_REMOTE" "$? $out" "with no free slot the host is still picked: the task would queue"
assert_contains "$(cat "$tmpd/pick.err")" "no host has a free session slot" "and stderr says so"
assert_eq "root@$HOSTNAME_REMOTE True 0 1" \
  "$(pick --json "root@$HOSTNAME_REMOTE" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); h=d["Hosts"][0]["Capacity"]; print(d["Pick"], d["Queued"], h["slots-free"], h["slots"])')" \
  "host pick --json: the pick, queued, and the host's capacity read over SSH"
ctl session stop "${session##*/}" >/dev/null 2>&1

# --- vivarium-mcp --host: the real MCP SDK client, from the other host -------
rmcp () {  # OUT USER CALLS_JSON: the SDK client in the namespace, vivarium-mcp --host USER@HOST
  mcp_client "$1" "$(printf '{"command": "vivarium-mcp", "args": ["--host", "%s@%s"], "env": {"VIVARIUM_SSH": "%s"}, "calls": %s}' \
    "$2" "$HOSTNAME_REMOTE" "$tmpd/ssh" "$3")" there
}
rmcp rlist root "[{\"tool\": \"vm_images\"}, {\"tool\": \"vm_report\", \"arguments\": {\"task\": \"$task_id\"}}]"
assert_eq "" "$(q rlist "d.get('fatal') or ''")" "the SDK client reaches vivarium-mcp --host over SSH and initializes"
assert_eq "false $IMAGE $fpr" "$(q rlist "str(c(0).get('isError')).lower() + ' ' + s(0)['images'][0]['name'] + ' ' + ident(0)['key_fingerprint']")" \
  "vm_images over SSH: the remote image, the remote key's fingerprint"
assert_eq "false DONE $fpr true" \
  "$(q rlist "str(c(1).get('isError')).lower() + ' ' + s(1).get('outcome', '?') + ' ' + ident(1)['signed_by'] + ' ' + str(ident(1)['signature_verified']).lower()")" \
  "vm_report over SSH: the CLI's task, its signature checked against the remote host's key"
assert_eq "the worker's unverified claim|Wrote remote.txt." \
  "$(q rlist "s(1)['report']['worker_claim']['label'] + '|' + s(1)['report']['worker_claim']['summary']")" \
  "the worker's summary stays labelled a claim"
rmcp rtask root "[{\"tool\": \"vm_task\", \"arguments\": {\"project\": \"remote\", \"image\": \"$IMAGE\",
                  \"instructions\": \"Write hello.txt containing hello. [conversation: mcp-hello]\",
                  \"verify\": \"grep -qx hello hello.txt\", \"wait_seconds\": 600}, \"timeout_ms\": 900000}]"
assert_eq "false DONE pass $fpr true" \
  "$(q rtask "str(c(0).get('isError')).lower() + ' ' + str(s(0).get('outcome', s(0).get('error'))) + ' ' + (s(0).get('report') or {}).get('verification', {}).get('verdict', '') + ' ' + str(ident(0).get('signed_by')) + ' ' + str(ident(0).get('signature_verified')).lower()")" \
  "vm_task over SSH: an agent task handed over by name, DONE, verified, signed by the remote key"
assert_eq "hello" "$(git --git-dir="$STATE/projects/remote/repo" show "$(q rtask "(s(0).get('report') or {}).get('commit', '')"):hello.txt" 2>&1)" \
  "the agent's work is committed on the remote host"
assert_eq "" "$(cat "$tmpd/model-failures")" "the model server's assertions on the agent's requests held"
rmcp rdenied "$ruser" '[{"tool": "vm_images"}]'
assert_eq "true $ERR.NotAuthorized" "$(q rdenied "str(c(0).get('isError')).lower() + ' ' + s(0)['error']['name']")" \
  "a user the remote polkit refuses: vm_images is a structured NotAuthorized error"
assert_eq "" "$(pgrep -x vivarium-mcp)" "no vivarium-mcp is left running"

# --- refusals ------------------------------------------------------------
err=$(rctl "$ruser" task list 2>&1 >/dev/null)
assert_ne 0 "$?" "an unprivileged remote user's call fails"
assert_contains "$err" "$ERR.NotAuthorized" "with NotAuthorized from this host's polkit" "$err"
err=$(rctl root image import other /etc/hostname 2>&1)
assert_ne 0 "$?" "image import over SSH fails"
assert_contains "$err" "cannot travel over SSH" "saying a descriptor cannot travel"
err=$(there env VIVARIUM_SSH="$tmpd/ssh" vivariumctl --host '-oProxyCommand=sh' status 2>&1)
assert_eq 2 "$?" "a destination that is an ssh option is a usage error" "$err"

stop_sshd
start_sshd host_b
err=$(rctl root status 2>&1)
assert_ne 0 "$?" "another host key: the call fails"
assert_contains "$err" "Host key verification failed" "ssh itself refuses the changed host key" "$err"
assert_contains "$err" "org.freedesktop.DBus.Error.NoServer" "and vivariumctl says it could not reach the bus"
stop_sshd

done_testing
