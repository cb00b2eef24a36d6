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

readonly BUS=org.vivarium.Vivarium1
readonly OBJ=/org/vivarium/Vivarium1
readonly IFACE=org.vivarium.Vivarium1
readonly ERR=org.vivarium.Vivarium1.Error
readonly IMAGE=tiny
readonly STATE=/var/lib/vivarium
readonly MIB=$((1024 * 1024))

[ "$(id -u)" = 0 ] || bail_out "must run as root"
[ -d /run/systemd/system ] || bail_out "systemd is not PID 1 here; run me through tests/system/vivarium-test-host"
for tool in vivariumctl gdbus busctl git; do
  command -v "$tool" >/dev/null || bail_out "$tool is not installed"
done
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

ctl () { vivariumctl --no-interaction "$@"; }
call () {  # PATH METHOD ARGS...
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
user_call () {  # PATH METHOD ARGS...: the same, as the unprivileged test user
  local path=$1 method=$2
  shift 2
  run_as_user "$tuser" gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () {  # PATH INTERFACE PROPERTY
  busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'
}
project_path () { printf '%s/projects/%s' "$OBJ" "$1"; }
unit_gone () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" != loaded ]; }

tmpd=$(mktemp -d /var/tmp/vivarium-tasks.XXXXXX)
at_exit rm -rf "$tmpd"
create_test_user tuser || bail_out "cannot create a test user"
dump_journal () {  # the daemon's own account, when something failed
  [ "${_tap_failed:-0}" = 0 ] && return 0
  diag "vivariumd's journal:"
  diag "$(journalctl -u vivariumd.service --no-pager -o cat 2>&1 | tail -n 60)"
}
at_exit dump_journal

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
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$pdemo" Project.Log 1

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
retry_until 60 0.5 test "$(stat -c %u "$work")" = 0
assert_eq "0" "$(stat -c %u "$work")" "the tree is root's again once the session ended"
assert_eq "0" "$(stat -c %u "$work/from-guest.txt")" "and so are the guest's files"

# --- deleting ----------------------------------------------------------------

assert_success "root deletes the project" -- retry_until 20 0.5 call "$pdemo" Project.Delete
assert_eq "" "$(call "$OBJ" Manager.ListProjects | grep -o "$pdemo")" "the project is gone from the list"
assert_eq "no" "$([ -e "$STATE/projects/demo" ] && echo yes || echo no)" "and from the disk"

done_testing
