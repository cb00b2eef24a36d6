#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Image builds on a real systemd host that run out of space: the error says
# why, in the builder's own words, not just "build failed (status 1)".
# images/.staging (where the builder writes the image) is a small tmpfs,
# mounted here and unmounted at exit, whatever happens.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-images.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly STAGING=$STATE/images/.staging
readonly NAME=tiny-on-full-disk

require_systemd_host vivariumctl mountpoint findmnt

ctl () { vivariumctl --no-interaction "$@"; }
vivariumd_active () { [ "$(systemctl is-active vivariumd.service)" = active ]; }

# The daemon's mount namespace is made when it starts: mount first.
vivariumd_active && bail_out "vivariumd is already running; its namespace would not see the mount"
mountpoint -q "$STAGING" && bail_out "$STAGING is already a mount point"
mkdir -p "$STAGING" || bail_out "cannot create $STAGING"
# Big enough for the build log and the progress FIFO, far too small for the
# initrd and the kernel.
mount -t tmpfs -o size=512k,mode=0700 vivarium-test-full "$STAGING" || bail_out "cannot mount a tmpfs on $STAGING"
at_exit umount "$STAGING"
diag "$STAGING: $(findmnt -n -o FSTYPE,SIZE "$STAGING")"

out=$(ctl image build tiny "$NAME" 2>&1)
rc=$?
diag "vivariumctl said: $(tail -n 3 <<<"$out")"
assert_ne 0 "$rc" "a build whose output does not fit fails"
assert_contains "$out" "No space left on device" "the error gives the cause, not only the log"
# shellcheck disable=SC1111  # the quotation mark is what the message uses
assert_contains "$out" "The builder's last words: “" "... quoted and labelled as the builder's words"
assert_not_contains "$out" "build failed (status" "... and not the builder's closing line"
assert_eq "no" "$([ -e "$STATE/images/$NAME" ] && echo yes || echo no)" "a failed build leaves no image"
assert_eq "0" "$(find "$STAGING" -mindepth 1 | wc -l)" "... and nothing in the staging directory"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-build-*' | head -1)" "... and no unit"

done_testing
