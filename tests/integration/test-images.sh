#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Images on a real filesystem that runs out of space: Freeze is all or
# nothing. The daemon's images/ directory is a small ext4 filesystem (ext4
# for its immutable flag), loop-mounted in the harness's private mount
# namespace and unmounted at exit, whatever happens. Output is TAP.
#   run-in-private-bus.sh BUILDDIR -- tests/integration/test-images.sh

# shellcheck disable=SC2317  # functions called from at_exit and retry helpers
# shellcheck source=SCRIPTDIR/../system/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/../system/lib.sh"

readonly BUS=org.vivarium.Vivarium1
readonly OBJ=/org/vivarium/Vivarium1
readonly IFACE=org.vivarium.Vivarium1
readonly ERR=org.vivarium.Vivarium1.Error
readonly IMAGE=full
readonly CRASHED=crashed
readonly COMMITTED=committed

[ "$(id -u)" = 0 ] || bail_out "must run as root"
if [ -z "${VIVARIUM_STATE_DIR:-}" ] || [ -z "${VIVARIUM_TEST_RUN_DIR:-}" ]; then
  bail_out "run me through tests/integration/run-in-private-bus.sh"
fi
for tool in gdbus qemu-img mkfs.ext4 losetup mount umount chattr lsattr dd; do
  command -v "$tool" >/dev/null || bail_out "$tool is not installed"
done

vivariumctl=$(dirname -- "$(dirname -- "$VIVARIUM_TEST_DAEMON")")/cli/vivariumctl
[ -x "$vivariumctl" ] || bail_out "no vivariumctl at $vivariumctl (build first)"
images=$VIVARIUM_STATE_DIR/images
backing=$VIVARIUM_TEST_RUN_DIR/images.ext4
dir=$images/$IMAGE
files=(disk.qcow2 cmdline vmlinuz image.json build.log)

call () {  # PATH METHOD ARGS...
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
frozen () {  # NAME: the Frozen property, "true" or "false"
  gdbus call --system --dest "$BUS" --object-path "$OBJ/images/$1" \
    --method org.freedesktop.DBus.Properties.Get "$IFACE.Image" Frozen | grep -o 'true\|false'
}
# Mode, owner and the immutable flag of every file, one line each.
file_states () {
  local f attrs
  for f in "$@"; do
    attrs=$(lsattr -d -- "$f" 2>/dev/null | cut -d' ' -f1)
    printf '%s %s %s\n' "${f##*/}" "$(stat -c '%a %u:%g' -- "$f")" "${attrs//[^i]/}"
  done
}
image_states () { file_states "${files[@]/#/$1/}" "$1"; }

# --- a small ext4 filesystem for images/ ------------------------------------------

truncate -s 24M "$backing" || bail_out "cannot create $backing"
# -m 0: the daemon runs as root, and root may use the reserved blocks.
mkfs.ext4 -q -m 0 -b 4096 -F "$backing" || bail_out "mkfs.ext4 failed"
mkdir -p "$images" || bail_out "cannot create $images"
loopdev=$(losetup --find --show -- "$backing") || bail_out "no free loop device"
at_exit losetup -d "$loopdev"
mount -t ext4 "$loopdev" "$images" || bail_out "cannot mount $loopdev on $images"
at_exit umount "$images"
diag "images/ is $loopdev ($(findmnt -n -o FSTYPE,SIZE "$images"))"

make_image () {  # DIR: an unfrozen image whose files have different modes
  mkdir -m 0755 "$1" &&
    qemu-img create -q -f qcow2 "$1/disk.qcow2" 16M &&
    printf 'console=ttyS0\n' >"$1/cmdline" &&
    head -c 65536 /dev/urandom >"$1/vmlinuz" &&
    printf '{"recipe": "test", "created-at": 1}\n' >"$1/image.json" &&
    printf 'built by %s\n' "$0" >"$1/build.log" &&
    chmod 0644 "$1/disk.qcow2" "$1/image.json" && chmod 0640 "$1/cmdline" &&
    chmod 0600 "$1/build.log" && chmod 0755 "$1/vmlinuz"
}
make_image "$dir" || bail_out "cannot make the test image"

# --- 1. a freeze that a crash interrupted is rolled back at start ----------------

# What the daemon leaves when it dies after sealing the files and before the
# commit: the files 0444 and immutable, manifest.json.pending, no manifest.json.
make_image "$images/$CRASHED" || bail_out "cannot make the second test image"
crashed_before=$(image_states "$images/$CRASHED")
journal_before=
for f in "${files[@]}"; do
  journal_before+="${journal_before:+,}{\"name\":\"$f\",\"mode\":$(stat -c '0%a' "$images/$CRASHED/$f" | xargs printf '%d'),\"uid\":0,\"gid\":0,\"immutable\":false}"
done
printf '{"manifest":{},"before":[%s],"dir-before":{"name":".","mode":493,"uid":0,"gid":0,"immutable":false}}\n' \
  "$journal_before" >"$images/$CRASHED/manifest.json.pending"
for f in "${files[@]}"; do
  { chmod 0444 "$images/$CRASHED/$f" && chattr +i "$images/$CRASHED/$f"; } || bail_out "cannot seal $f"
done
unseal () { [ ! -e "$1" ] || chattr -R -i "$1"; }
at_exit unseal "$images/$CRASHED"

# What it leaves when it dies after the commit: the files sealed and
# manifest.json in place, but the manifest, the directory and the pending
# file not yet dealt with. The digest is the daemon's: sha256 over
# "<name> <sha256> <size>" lines of the boot files, in name order.
make_image "$images/$COMMITTED" || bail_out "cannot make the third test image"
lines='' entries=''
for f in cmdline disk.qcow2 vmlinuz; do
  sum=$(sha256sum "$images/$COMMITTED/$f" | cut -d' ' -f1)
  size=$(stat -c %s "$images/$COMMITTED/$f")
  lines+="$f $sum $size"$'\n'
  entries+="${entries:+,}{\"name\":\"$f\",\"size\":$size,\"sha256\":\"$sum\"}"
done
digest=sha256:$(printf '%s' "$lines" | sha256sum | cut -d' ' -f1)
printf '{"schema":1,"name":"%s","digest":"%s","frozen-at":1,"immutable":true,"files":[%s]}\n' \
  "$COMMITTED" "$digest" "$entries" >"$images/$COMMITTED/manifest.json"
printf '{"manifest":{},"before":[],"dir-before":{"name":".","mode":493,"uid":0,"gid":0,"immutable":false}}\n' \
  >"$images/$COMMITTED/manifest.json.pending"
for f in "${files[@]}"; do
  { chmod 0444 "$images/$COMMITTED/$f" && chattr +i "$images/$COMMITTED/$f"; } || bail_out "cannot seal $f"
done
at_exit unseal "$images/$COMMITTED"

# --- 2. a full disk: NoSpace, and nothing changed --------------------------------

# One big file, then one-block files up to the last block, so that single
# blocks can be handed back below.
dd if=/dev/zero of="$images/.filler" bs=1M status=none 2>/dev/null
mkdir "$images/.blocks" || bail_out "cannot create $images/.blocks"
for ((n = 0; n < 100000; n++)); do
  dd if=/dev/zero of="$images/.blocks/$n" bs=4k count=1 status=none 2>/dev/null || break
done
rm -f "$images/.blocks/$n"
sync
diag "free space on images/: $(df --output=avail -B1 "$images" | tail -1) bytes"
before=$(image_states "$dir")

# An import copies into images/.staging, on the same full filesystem; it
# was an unmapped GIOError.
qemu-img create -q -f qcow2 "$VIVARIUM_TEST_RUN_DIR/import.qcow2" 16M || bail_out "qemu-img create failed"
assert_dbus_error "$ERR.NoSpace" -- "$vivariumctl" --no-interaction image import imported "$VIVARIUM_TEST_RUN_DIR/import.qcow2"
assert_eq "0 no" "$(find "$images/.staging" -mindepth 1 2>/dev/null | wc -l) \
$([ -e "$images/imported" ] && echo yes || echo no)" "a failed import leaves nothing behind"

err=$(call "$OBJ/images/$IMAGE" Image.Freeze 2>&1 >/dev/null)
rc=$?
assert_ne 0 "$rc" "Freeze on a full filesystem fails"
assert_contains "$err" "$ERR.NoSpace" "... with $ERR.NoSpace"
assert_contains "$err" "$dir/" "... naming the file it could not write"
assert_contains "$err" "Nothing was changed" "... and saying that nothing changed"
assert_eq false "$(frozen "$IMAGE")" "the image is still not frozen"
assert_eq "$before" "$(image_states "$dir")" "every file keeps its mode, owner and flags"
assert_eq "no no" "$([ -e "$dir/manifest.json" ] && echo yes || echo no) \
$([ -e "$dir/manifest.json.pending" ] && echo yes || echo no)" "no manifest is left behind"

# --- 3. space for the pending manifest, none for the final one: undone -----------

# One block (4 KiB) free: the pending manifest fits, manifest.json does not,
# so the files are sealed and then have to be put back. Freeing a file may
# free more than its block; take the rest back one block at a time.
free_bytes () { sync; df --output=avail -B1 "$images" | tail -1 | tr -d ' '; }
for ((k = 0; k < n && $(free_bytes) < 4096; k++)); do rm -f "$images/.blocks/$k"; done
for ((m = 0; m < 100 && $(free_bytes) > 4096; m++)); do
  dd if=/dev/zero of="$images/.blocks/again-$m" bs=4k count=1 status=none 2>/dev/null || break
done
[ "$(free_bytes)" = 4096 ] || diag "expected 4096 bytes free; expect failures below"
diag "free space on images/: $(df --output=avail -B1 "$images" | tail -1) bytes"
err=$(call "$OBJ/images/$IMAGE" Image.Freeze 2>&1 >/dev/null)
rc=$?
assert_ne 0 "$rc" "Freeze with room for one block fails"
assert_contains "$err" "$ERR.NoSpace" "... with $ERR.NoSpace"
assert_contains "$err" "$dir/manifest.json:" "... naming manifest.json"
assert_contains "$err" "Nothing was changed" "... and saying that nothing changed"
assert_eq false "$(frozen "$IMAGE")" "the image is still not frozen"
assert_eq "$before" "$(image_states "$dir")" "every file is back to its mode, owner and flags"
assert_eq "no no" "$([ -e "$dir/manifest.json" ] && echo yes || echo no) \
$([ -e "$dir/manifest.json.pending" ] && echo yes || echo no)" "no manifest is left behind"

# --- 4. with space again, the same image freezes ---------------------------------

rm -rf "$images/.filler" "$images/.blocks"
sync
assert_success "after freeing space, Freeze succeeds" -- call "$OBJ/images/$IMAGE" Image.Freeze
assert_eq true "$(frozen "$IMAGE")" "the image is frozen"
assert_eq "disk.qcow2 444 0:0 i" "$(file_states "$dir/disk.qcow2")" "disk.qcow2 is 0444, root's and immutable"
assert_eq "manifest.json 444 0:0 i" "$(file_states "$dir/manifest.json")" "manifest.json is sealed too"
assert_eq "no" "$([ -e "$dir/manifest.json.pending" ] && echo yes || echo no)" "the pending manifest is gone"
assert_success "the frozen image verifies" -- call "$OBJ/images/$IMAGE" Image.Verify

# --- 1, checked: the interrupted freeze was rolled back ---------------------------

assert_eq false "$(frozen "$CRASHED")" "the image whose freeze was interrupted is not frozen"
assert_eq "$crashed_before" "$(image_states "$images/$CRASHED")" "... and its files are as they were"
assert_eq "no" "$([ -e "$images/$CRASHED/manifest.json.pending" ] && echo yes || echo no)" \
  "... and its pending manifest is gone"
assert_success "... and it can be frozen" -- call "$OBJ/images/$CRASHED" Image.Freeze

# --- 1, checked: the freeze interrupted after its commit was finished --------------

assert_eq true "$(frozen "$COMMITTED")" "the image whose freeze was interrupted after the commit is frozen"
assert_eq "$(printf 'manifest.json 444 0:0 i\ncommitted 555 0:0 ')" \
  "$(file_states "$images/$COMMITTED/manifest.json" "$images/$COMMITTED")" "... its manifest and directory are sealed"
assert_eq "no" "$([ -e "$images/$COMMITTED/manifest.json.pending" ] && echo yes || echo no)" \
  "... and its pending manifest is gone"
assert_eq "(true,)" "$(call "$OBJ/images/$COMMITTED" Image.Verify 2>&1)" "... and it verifies"

# Deleting lifts the immutable flags, so that nothing sticks to the filesystem.
assert_success "a frozen image can be deleted" -- call "$OBJ/images/$IMAGE" Image.Delete
assert_success "the other ones too" -- call "$OBJ/images/$CRASHED" Image.Delete
assert_success "... all of them" -- call "$OBJ/images/$COMMITTED" Image.Delete

done_testing
