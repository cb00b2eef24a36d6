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
# that passes a descriptor is refused with a sentence.
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-remote.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

# shellcheck source=SCRIPTDIR/remote-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/remote-lib.sh"

readonly HOSTNAME_REMOTE=vivarium-remote-test
readonly PORT=2222

require_systemd_host vivariumctl ip ssh ssh-keygen /usr/sbin/sshd systemd-stdio-bridge runuser "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-remote.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

# --- the other host: a namespace, a veth pair, a name; sshd here (remote-lib.sh)
remote_setup "$tmpd" "$HOSTNAME_REMOTE" "$PORT"
create_test_user ruser || bail_out "cannot create a test user"
usermod -p '*' -s /bin/sh "$ruser"   # no password, not locked (sshd refuses a locked account), a shell for the command
remote_keys root "$ruser"
remote_client
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
