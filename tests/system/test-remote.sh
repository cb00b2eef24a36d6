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

readonly NS=vivremote$$
readonly HOSTNAME_REMOTE=vivarium-remote-test
readonly PORT=2222

require_systemd_host vivariumctl ip ssh ssh-keygen /usr/sbin/sshd systemd-stdio-bridge runuser "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-remote.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

# --- the other host's network: a namespace, a veth pair, a name ------------
ip netns add "$NS" || bail_out "cannot create the network namespace"
at_exit ip netns delete "$NS"
ip link add vr0 type veth peer name vr1 || bail_out "cannot create the veth pair"
at_exit ip link delete vr0
ip link set vr1 netns "$NS"
ip addr add 10.77.0.1/30 dev vr0 && ip link set vr0 up || bail_out "cannot address vr0"
ip -n "$NS" addr add 10.77.0.2/30 dev vr1 && ip -n "$NS" link set vr1 up && ip -n "$NS" link set lo up ||
  bail_out "cannot address vr1"
# `ip netns exec` binds /etc/netns/NS/* over /etc/*: the name is known there only.
mkdir -p "/etc/netns/$NS"
at_exit rm -rf "/etc/netns/$NS"
printf '127.0.0.1 localhost\n10.77.0.1 %s\n' "$HOSTNAME_REMOTE" > "/etc/netns/$NS/hosts"
there () { ip netns exec "$NS" "$@"; }

# --- sshd on this host, on the veth address only ---------------------------
create_test_user ruser || bail_out "cannot create a test user"
usermod -p '*' -s /bin/sh "$ruser"   # no password, not locked (sshd refuses a locked account), a shell for the command
sshd_dir=$tmpd/sshd
mkdir -p "$sshd_dir/keys" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_a"
ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_b"
ssh-keygen -q -t ed25519 -N '' -f "$tmpd/client_key"
cp "$tmpd/client_key.pub" "$sshd_dir/keys/root"
cp "$tmpd/client_key.pub" "$sshd_dir/keys/$ruser"
chmod 0644 "$sshd_dir/keys/"*
sshd_pid=
start_sshd () {  # HOSTKEY
  cat > "$sshd_dir/config" <<EOF
Port $PORT
ListenAddress 10.77.0.1
HostKey $sshd_dir/$1
PidFile $sshd_dir/sshd.pid
AuthorizedKeysFile $sshd_dir/keys/%u
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
AllowUsers root $ruser
EOF
  /usr/sbin/sshd -D -f "$sshd_dir/config" -E "$sshd_dir/log" &
  sshd_pid=$!
  retry_until 40 0.25 there bash -c "exec 3<>/dev/tcp/$HOSTNAME_REMOTE/$PORT" 2>/dev/null
}
stop_sshd () { [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null && wait "$sshd_pid" 2>/dev/null; sshd_pid=; }
at_exit stop_sshd

# The client's ssh: its own configuration and known_hosts, strict checking
# (VIVARIUM_SSH names the program, as GIT_SSH does for git).
printf '[%s]:%s %s\n' "$HOSTNAME_REMOTE" "$PORT" "$(cut -d' ' -f1-2 "$sshd_dir/host_a.pub")" > "$tmpd/known_hosts"
cat > "$tmpd/ssh_config" <<EOF
Host $HOSTNAME_REMOTE
  Port $PORT
  IdentityFile $tmpd/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $tmpd/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
EOF
cat > "$tmpd/ssh" <<EOF
#!/bin/sh
exec ssh -F $tmpd/ssh_config "\$@"
EOF
chmod 0755 "$tmpd/ssh"
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
