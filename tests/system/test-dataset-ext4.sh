#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The ext4 dataset backend, the one a project gets wherever the state
# directory is not on btrfs (a default Debian install), on a real systemd
# host with real QEMU, real git and real loop devices (VIVARIUM_TEST_LOOP=1
# binds this machine's in). vivariumd runs with PrivateMounts=yes: a mount
# it made in its own namespace would be seen by nobody else, and a session's
# QEMU (a unit of its own, in the host's namespace) would share the empty
# directory under it instead: the guest's writes would land on the host's
# disk past the quota, and the commit (made in the daemon's namespace) would
# not see them. So the dataset must be mounted where the sessions are:
# mounted in the host's namespace, the guest's files committed, the quota
# met by the guest; kept across a restart of the daemon; unmounted, with no
# loop device and no mount unit left, when the daemon stops and when the
# project is deleted; and a clone checked out into such a dataset.
#   VIVARIUM_TEST_LOOP=1 tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-dataset-ext4.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus git losetup mountpoint findmnt "$PY"
[ -c /dev/loop-control ] || bail_out "no /dev/loop-control here: run with VIVARIUM_TEST_LOOP=1"
mkdir -p "$STATE/projects"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" != btrfs ] ||
  bail_out "$STATE/projects is btrfs: run without VIVARIUM_TEST_BTRFS, so that projects get the ext4 backend"

tmpd=$(mktemp -d /var/tmp/vivarium-ext4.XXXXXX) || bail_out "cannot create a scratch directory"
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

readonly PROJECT=ext4demo
readonly DIR=$STATE/projects/$PROJECT
readonly WORK=$DIR/work IMG=$DIR/dataset.img
git_demo () { git --git-dir="$DIR/repo" "$@"; }
files_of () { report_field "$1" "' '.join(sorted(f['path'] + ':' + f['change'] for f in r['files']))"; }
# Mounted in this, the host's, namespace: where a session's QEMU looks.
host_mounted () { mountpoint -q "$1"; }
loops_of () { losetup -n -O NAME -j "$1" 2>/dev/null; }
# A mount unit left for a path under the state directory.
our_mount_units () { systemctl list-units --all --plain --no-legend --type=mount 2>/dev/null | awk '{print $1}' | grep '^var-lib-vivarium' ; }
# Stop and delete what a failure left, ours only: the project NAME (through
# the daemon), its mount and its loop device.
cleanup_project () {  # NAME
  local dir=$STATE/projects/$1 l
  ctl project delete "$1" >/dev/null 2>&1
  mountpoint -q "$dir/work" && umount "$dir/work"
  for l in $(loops_of "$dir/dataset.img"); do losetup -d "$l"; done
  return 0
}
at_exit cleanup_project "$PROJECT"

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
assert_success "create a project with a 24 MiB quota" -- ctl project create "$PROJECT" --quota 24M
assert_eq "ext4" "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["backend"])' "$DIR/project.json" 2>&1)" \
  "its dataset is an ext4 image (the state is not on btrfs)"
if host_mounted "$WORK"; then
  ok "the dataset is mounted in the host's namespace, where sessions look"
else
  not_ok "the dataset is mounted in the host's namespace, where sessions look" \
    "not a mount point here; the daemon's own namespace: $(nsenter -t "$(systemctl show -P MainPID vivariumd.service)" -m findmnt -n "$WORK" 2>&1)"
fi
diag "mounts of the dataset here: $(findmnt -n -o SOURCE,FSTYPE,OPTIONS "$WORK" 2>&1)"

# The worker writes a file, then tries to write twice the quota; what dd
# said is committed with it.
cat >"$tmpd/worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'echo hello > hello.txt; dd if=/dev/zero of=fill bs=1M count=48 2>/dev/null; echo $? > dd.rc; df -k . | tail -n 1 > df.txt; rm -f fill; sync' || exit 1
vivariumctl worker finish --summary "Wrote hello.txt." --verify "test -f hello.txt"
EOF
chmod 0755 "$tmpd/worker.sh"
t1=$(ctl task submit "$PROJECT" "$IMAGE" --script "$tmpd/worker.sh" 2>&1)
assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t1" 300)" "a task writing into the dataset is DONE ($t1)" \
  "$(task_prop "$OBJ/tasks/$t1" Reason 2>&1)"
ctl task report "$t1" --json >"$tmpd/t1.json" 2>&1
files=$(files_of "$tmpd/t1.json" 2>&1)
assert_contains "$files" "hello.txt:added" "the guest's file is in the commit ($files)"
assert_success "the report verifies" -- vivariumctl report verify "$tmpd/t1.json"
rc=$(git_demo show HEAD:dd.rc 2>&1)
diag "the guest's df of /project: $(git_demo show HEAD:df.txt 2>&1)"
if [ -n "$rc" ] && [ "$rc" != 0 ]; then
  ok "a 48 MiB write meets the 24 MiB quota in the guest (dd exit $rc)"
else
  not_ok "a 48 MiB write meets the 24 MiB quota in the guest" "dd exit status: '$rc'"
fi
assert_eq "" "$(find "$DIR" -maxdepth 1 -name 'fill' 2>/dev/null)" "nothing of the guest's is left beside the dataset"

# --- the daemon restarted: the dataset stays, the next task sees the tree -----------

assert_success "restart vivariumd" -- systemctl restart vivariumd.service
retry_until 100 0.1 busctl --system status "$BUS" >/dev/null 2>&1
ctl status >/dev/null 2>&1
cat >"$tmpd/next.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'cat hello.txt > seen.txt && echo again >> hello.txt' || exit 1
vivariumctl worker finish --summary "Read hello.txt." --verify "grep -q hello seen.txt"
EOF
chmod 0755 "$tmpd/next.sh"
t2=$(ctl task submit "$PROJECT" "$IMAGE" --script "$tmpd/next.sh" 2>&1)
assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t2" 300)" "after the restart, the next task is DONE ($t2)" \
  "$(task_prop "$OBJ/tasks/$t2" Reason 2>&1)"
ctl task report "$t2" --json >"$tmpd/t2.json" 2>&1
assert_contains "$(files_of "$tmpd/t2.json" 2>&1)" "seen.txt:added" "the guest saw the tree the first task left"
assert_contains "$(files_of "$tmpd/t2.json" 2>&1)" "hello.txt:modified" "and changed it"
assert_eq "1" "$(loops_of "$IMG" | wc -l)" "one loop device backs the image, not one a start"

# --- the daemon stopped: unmounted, no loop device ------------------------------------

assert_success "stop vivariumd" -- systemctl stop vivariumd.service
if host_mounted "$WORK"; then
  not_ok "with the daemon stopped, the dataset is unmounted" "$(findmnt -n "$WORK" 2>&1)"
else
  ok "with the daemon stopped, the dataset is unmounted"
fi
assert_eq "" "$(loops_of "$IMG")" "no loop device is left for its image"
assert_eq "" "$(our_mount_units)" "no mount unit is left"

# --- the project deleted: nothing left -------------------------------------------------

assert_success "the project lists again with the daemon back (activation)" -- ctl project list
assert_success "delete the project" -- ctl project delete "$PROJECT"
assert_eq "no" "$(host_mounted "$WORK" && echo yes || echo no)" "its dataset is not mounted"
assert_eq "" "$(loops_of "$IMG")" "no loop device is left"
assert_eq "" "$(our_mount_units)" "no mount unit is left"
assert_eq "no" "$([ -e "$DIR" ] && echo yes || echo no)" "its directory is gone"

# --- a clone on ext4: checked out by the daemon into the mounted dataset ------------------

# The transfer fetches in a unit of its own; the checkout is the daemon's,
# in its own namespace, into a dataset systemd mounted in the host's: the
# files must be in the mount the sessions see, not in the directory under it.
readonly CLONED=ext4clone CDIR=$STATE/projects/ext4clone
src=$tmpd/src
git init -q -b main "$src" && printf 'from the remote\n' > "$src/README" && git -C "$src" add README &&
  git -C "$src" -c user.name=t -c user.email=t@t commit -q -m one || bail_out "cannot make the clone's source"
mkdir -p "$STATE/remotes" && git clone -q --bare "$src" "$STATE/remotes/ext4src.git" ||
  bail_out "cannot make the clone's remote"
at_exit rm -rf "$STATE/remotes/ext4src.git"
at_exit cleanup_project "$CLONED"
assert_success "create a project cloned from a file:// remote, on ext4" -- \
  ctl project create "$CLONED" --quota 24M --clone "file://$STATE/remotes/ext4src.git"
assert_success "its dataset is mounted in the host's namespace" -- host_mounted "$CDIR/work"
assert_eq "from the remote" "$(cat "$CDIR/work/README" 2>&1)" "the checkout is in the mounted dataset"
assert_eq "$(git -C "$src" rev-parse HEAD)" "$(git --git-dir="$CDIR/repo" rev-parse HEAD 2>&1)" "its head is the remote's"
cat > "$tmpd/clone-worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --cwd /project -- sh -c 'cat README > seen.txt && echo changed >> README' >/dev/null
vivariumctl worker finish --summary "Read the cloned README." --verify "grep -q 'from the remote' seen.txt"
EOF
chmod 0755 "$tmpd/clone-worker.sh"
t3=$(ctl task submit "$CLONED" "$IMAGE" --script "$tmpd/clone-worker.sh" 2>&1)
assert_eq "DONE" "$(wait_outcome "$OBJ/tasks/$t3" 300)" "a task on the cloned project is DONE ($t3)" \
  "$(task_prop "$OBJ/tasks/$t3" Reason 2>&1)"
assert_eq "from the remote" "$(git --git-dir="$CDIR/repo" show HEAD:seen.txt 2>&1)" \
  "the guest read the cloned file (its copy is committed)"
ctl task report "$t3" --json > "$tmpd/t3.json" 2>&1
assert_eq "pass" "$(report_field "$tmpd/t3.json" "r['verification']['verdict']" 2>&1)" "the verification saw it too"
assert_success "delete the cloned project" -- ctl project delete "$CLONED"
assert_eq "" "$(loops_of "$CDIR/dataset.img")" "no loop device is left for it"
assert_eq "" "$(our_mount_units)" "no mount unit is left"

done_testing
