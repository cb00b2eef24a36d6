# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# "Another host" for the many-hosts tests (issue 21), sourced after lib.sh:
# a real sshd on this host, listening on 10.77.0.1 only, and a network
# namespace on the far end of a veth pair (10.77.0.2) that knows this host
# by name (its /etc/netns/NS/hosts). A client in the namespace reaches the
# daemon here as "another host": over the veth, through sshd, by name, with
# its own key and known_hosts and strict host key checking.
#
#   remote_setup DIR NAME PORT   # namespace, veth, the name; undone at exit
#   remote_keys USER...          # host keys host_a, host_b; a client key for each USER
#   start_sshd host_a            # sshd with that host key (stop_sshd at exit)
#   remote_client                # DIR/ssh: ssh -F DIR/ssh_config (known_hosts: host_a)
#                                # DIR/ssh-there: the same, run in the namespace
#   there CMD...                 # CMD in the namespace

remote_setup () {  # DIR NAME PORT
  remote_dir=$1 remote_name=$2 remote_port=$3
  remote_ns=vivremote$$
  ip netns add "$remote_ns" || bail_out "cannot create the network namespace"
  at_exit ip netns delete "$remote_ns"
  ip link add vr0 type veth peer name vr1 || bail_out "cannot create the veth pair"
  at_exit ip link delete vr0
  ip link set vr1 netns "$remote_ns"
  ip addr add 10.77.0.1/30 dev vr0 && ip link set vr0 up || bail_out "cannot address vr0"
  ip -n "$remote_ns" addr add 10.77.0.2/30 dev vr1 && ip -n "$remote_ns" link set vr1 up &&
    ip -n "$remote_ns" link set lo up || bail_out "cannot address vr1"
  # `ip netns exec` binds /etc/netns/NS/* over /etc/*: the name is known there only.
  mkdir -p "/etc/netns/$remote_ns"
  at_exit rm -rf "/etc/netns/$remote_ns"
  printf '127.0.0.1 localhost\n10.77.0.1 %s\n' "$remote_name" > "/etc/netns/$remote_ns/hosts"
  at_exit stop_sshd
}

there () { ip netns exec "$remote_ns" "$@"; }

remote_keys () {  # USER...
  local user
  sshd_dir=$remote_dir/sshd
  mkdir -p "$sshd_dir/keys" /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_a" || bail_out "ssh-keygen"
  ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_b" || bail_out "ssh-keygen"
  ssh-keygen -q -t ed25519 -N '' -f "$remote_dir/client_key" || bail_out "ssh-keygen"
  for user in "$@"; do
    cp "$remote_dir/client_key.pub" "$sshd_dir/keys/$user"
  done
  chmod 0644 "$sshd_dir/keys/"*
  remote_users=("$@")
}

sshd_pid=
start_sshd () {  # HOSTKEY
  cat > "$sshd_dir/config" <<SSHEOF
Port $remote_port
ListenAddress 10.77.0.1
HostKey $sshd_dir/$1
PidFile $sshd_dir/sshd.pid
AuthorizedKeysFile $sshd_dir/keys/%u
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
AllowUsers ${remote_users[*]}
SSHEOF
  /usr/sbin/sshd -D -f "$sshd_dir/config" -E "$sshd_dir/log" &
  sshd_pid=$!
  retry_until 40 0.25 there bash -c "exec 3<>/dev/tcp/$remote_name/$remote_port" 2>/dev/null
}
stop_sshd () { [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null && wait "$sshd_pid" 2>/dev/null; sshd_pid=; }

# The client's ssh: its own configuration and known_hosts, strict checking
# (VIVARIUM_SSH names the program, as GIT_SSH does for git).
remote_client () {
  printf '[%s]:%s %s\n' "$remote_name" "$remote_port" "$(cut -d' ' -f1-2 "$sshd_dir/host_a.pub")" \
    > "$remote_dir/known_hosts"
  cat > "$remote_dir/ssh_config" <<SSHEOF
Host $remote_name
  Port $remote_port
  IdentityFile $remote_dir/client_key
  IdentitiesOnly yes
  UserKnownHostsFile $remote_dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
SSHEOF
  printf '#!/bin/sh\nexec ssh -F %s/ssh_config "$@"\n' "$remote_dir" > "$remote_dir/ssh"
  # For a program that itself runs here (the app): only its ssh is "there".
  printf '#!/bin/sh\nexec ip netns exec %s ssh -F %s/ssh_config "$@"\n' "$remote_ns" "$remote_dir" \
    > "$remote_dir/ssh-there"
  chmod 0755 "$remote_dir/ssh" "$remote_dir/ssh-there"
}
