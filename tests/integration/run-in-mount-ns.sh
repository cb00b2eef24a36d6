#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-in-mount-ns.sh CMD [ARGS...]
#
# Runs CMD as root in a private mount namespace, with VIVARIUM_TEST_SCRATCH
# set to a fresh directory under /tmp. Every mount CMD makes lives in that
# namespace, so it goes away with CMD even if CMD dies mid-test; a loop
# device whose mount went that way is detached here, by its backing file
# (only files under the scratch directory); then the directory is removed.
#
# Exit status: CMD's, or 1 when a prerequisite is missing (said in one line).

set -u
PROG=$(basename "$0")

die () {
	echo "$PROG: FAIL: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (loop mounts, chown, btrfs)"
[ $# -ge 1 ] || die "usage: $PROG CMD [ARGS...]"
for tool in unshare losetup mount umount mkfs.ext4 mkfs.btrfs btrfs git ssh-keygen /usr/sbin/sshd setpriv findmnt mkfifo; do
	command -v "$tool" >/dev/null || die "missing $tool (tools/install-deps.sh installs it)"
done
[ -e /dev/loop-control ] || die "no /dev/loop-control: this test needs loop devices (run it outside the nspawn host)"

scratch=$(mktemp -d /tmp/vivarium-project-test.XXXXXXXX) || die "mktemp failed"

cleanup () {
	local img dev
	while IFS= read -r -d '' img; do
		for dev in $(losetup --noheadings --output NAME --associated "$img" 2>/dev/null); do
			losetup --detach "$dev" || echo "$PROG: could not detach $dev" >&2
		done
	done < <(find "$scratch" -xdev -name '*.img' -print0 2>/dev/null)
	rm -rf --one-file-system "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Other uids (the session uid the tests grant) must reach the projects dir.
chmod 755 "$scratch"
VIVARIUM_TEST_SCRATCH=$scratch unshare --mount --propagation private --fork "$@"
