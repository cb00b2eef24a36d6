#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Boot snapshots on a real systemd host with real QEMU: Freeze boots `tiny`
# once and seals the saved guest with the image; sessions whose options
# match start from it ("restored"), others boot ("cold"). Two guests
# restored from one snapshot are made unique (vmgenid reseed, urandom, boot
# id, clock); a project is mounted after the restore; a tampered boot.qcow2
# or boot.state is refused with DigestMismatch; Pause, and SaveAsImage with
# and without the memory, lineage shown; a freeze whose snapshot fails
# leaves the image exactly as it was.
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-snapshots.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly BROKEN=broken

require_systemd_host vivariumctl gdbus busctl qemu-img qemu-io chattr lsattr dd od jq "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

ctl () { vivariumctl --no-interaction "$@"; }
call () {  # PATH METHOD ARGS...
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () {  # PATH INTERFACE PROPERTY
  busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'
}
session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
image_path () { printf '%s/images/%s' "$OBJ" "$1"; }
gexec () {  # ID CMD: the command's stdout in the guest
  ctl session exec "$1" -- sh -c "$2"
}
timings () { busctl get-property "$BUS" "$(session_path "$1")" "$IFACE.Session" StartupTimings; }
now_ms () { date +%s%3N; }
unit_of () { printf 'vivarium-session-%s.service' "$1"; }
qemu_cmdline () { tr '\0' ' ' <"/proc/$(systemctl show -P MainPID "$(unit_of "$1")")/cmdline"; }

stop_all_sessions () {
  local id
  for id in $(ctl session list --json 2>/dev/null | grep -o '"id" *: *"[0-9a-f]*"' | grep -o '[0-9a-f]\{12\}'); do
    ctl session stop "$id" >/dev/null 2>&1
  done
}
at_exit stop_all_sessions
create_test_user tuser || bail_out "cannot create a test user"
user_call () {  # PATH METHOD ARGS...: the same, as the unprivileged test user
  local path=$1 method=$2
  shift 2
  run_as_user "$tuser" gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}

dir=$STATE/images/$IMAGE

# --- 1. Freeze takes the boot snapshot and seals it with the image ----------

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
t0=$(now_ms)
assert_success "freeze it (boots it once and saves the guest)" -- ctl image freeze "$IMAGE"
diag "Freeze with the boot snapshot took $(( $(now_ms) - t0 )) ms"
for f in boot.json boot.qcow2 boot.state; do
  assert_success "the image has $f" -- test -s "$dir/$f"
  assert_eq "444 0" "$(stat -c '%a %u' "$dir/$f")" "$f is sealed: read-only, root's"
  assert_contains "$(cat "$dir/manifest.json")" "\"$f\"" "the manifest (and so the digest) covers $f"
done
if grep -q '"immutable" *: *true' "$dir/manifest.json"; then
  assert_contains "$(lsattr "$dir/boot.state" | cut -d' ' -f1)" "i" "boot.state is immutable"
  if (echo x >>"$dir/boot.qcow2") 2>/dev/null; then not_ok "root cannot write boot.qcow2"; else ok "root cannot write boot.qcow2"; fi
else
  diag "this filesystem has no immutable flag; mode and owner only"
fi
assert_eq "555" "$(stat -c %a "$dir")" "the image directory is sealed"
backing=$(qemu-img info -U --output=json "$dir/boot.qcow2" | grep -o '"backing-filename": *"[^"]*"' | head -1)
assert_contains "$backing" "$dir/disk.qcow2" "boot.qcow2 is an overlay over disk.qcow2"
assert_contains "$(cat "$dir/boot.json")" '"device-set"' "boot.json records the device set"
diag "boot snapshot: state $(stat -c %s "$dir/boot.state") bytes, disk $(stat -c %s "$dir/boot.qcow2") bytes"
diag "$(grep -E '"(save-usec|boot-usec|state-size|memory-mib|cpus)"' "$dir/boot.json" | tr -d ' \n')"
assert_success "the frozen image verifies in full" -- ctl image verify "$IMAGE"
assert_eq "0" "$(ctl session list --json | grep -c '"state" *: *"running"')" "the scratch guest is gone"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' | head -1)" \
  "the scratch guest's unit is gone"

# --- 2. two restored guests are made unique --------------------------------

# The snapshot is older than this: a restored clock not set from the host
# would be at least this far behind.
sleep 3
t0=$(now_ms)
a=$(ctl session start "$IMAGE")
assert_eq "0" "$?" "start session a"
first_exec_ms=$(( $(now_ms) - t0 ))
b=$(ctl session start "$IMAGE")
assert_eq "0" "$?" "start session b"
diag "a: start returned after ${first_exec_ms} ms; timings $(timings "$a")"
assert_eq "restored" "$(prop "$(session_path "$a")" Session StartMode)" "a default session starts restored"
assert_eq "restored" "$(prop "$(session_path "$b")" Session StartMode)" "so does a second one"
assert_contains "$(timings "$a")" '"restore"' "StartupTimings has the restore step"
assert_contains "$(timings "$a")" '"reseed"' "StartupTimings has the reseed step"

rand_a=$(gexec "$a" 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"')
rand_b=$(gexec "$b" 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"')
assert_eq "64" "${#rand_a}" "a read 32 bytes of /dev/urandom"
assert_ne "$rand_a" "$rand_b" "the two restored guests' /dev/urandom differ"
boot_a=$(gexec "$a" 'cat /proc/sys/kernel/random/boot_id')
boot_b=$(gexec "$b" 'cat /proc/sys/kernel/random/boot_id')
assert_ne "" "$boot_a" "a has a boot id"
assert_ne "$boot_a" "$boot_b" "the two restored guests' boot ids differ"
guid_a=$(qemu_cmdline "$a" | grep -o 'vmgenid,guid=[0-9a-f-]*')
guid_b=$(qemu_cmdline "$b" | grep -o 'vmgenid,guid=[0-9a-f-]*')
assert_contains "$guid_a" "vmgenid,guid=" "a's QEMU has a vmgenid device"
assert_ne "$guid_a" "$guid_b" "each restored guest has its own generation id"
assert_contains "$(gexec "$a" 'ls /sys/bus/acpi/drivers/vmgenid/ 2>&1')" "QEMUVGID" \
  "the guest kernel's vmgenid driver is bound to the device"
assert_contains "$(gexec "$a" 'dmesg | grep -i "virtual machine fork"')" "reseeded" \
  "the guest kernel reseeded its random pool on the generation change"
for s in "$a" "$b"; do
  guest=$(gexec "$s" 'date +%s')
  host=$(date +%s)
  diff=$(( host - guest ))
  assert_eq "yes" "$([ "${diff#-}" -le 2 ] && echo yes || echo no)" "the restored guest's clock is the host's (off by ${diff} s)"
done
if gexec "$a" 'test -e /etc/machine-id' >/dev/null 2>&1; then
  assert_ne "$(gexec "$a" 'cat /etc/machine-id')" "$(gexec "$b" 'cat /etc/machine-id')" "fresh machine ids"
else
  diag "the tiny image has no /etc/machine-id: nothing to renew"
fi
assert_success "a restored guest writes its disk" -- gexec "$a" 'echo mark-a > /root/mark && sync'
assert_eq "" "$(gexec "$b" 'cat /root/mark 2>/dev/null')" "and the other restored guest does not see it"
assert_contains "$(gexec "$a" 'ip -4 addr show eth0')" "10.0.2.15" "the restored guest keeps its network address"
assert_success "stop a" -- ctl session stop "$a"
assert_success "stop b" -- ctl session stop "$b"

# --- 2b. the isolation self-test runs in restored guests, and passes -------

st=$(vivariumctl guard selftest --json 2>/dev/null)
assert_eq "0" "$?" "the self-test passes with restored guests"
assert_eq "both:restored layer1-only:restored layer2-only:restored allowlist:restored" \
  "$(printf '%s' "$st" | jq -r '[.phases[] | "\(.configuration):\(."start-mode")"] | join(" ")')" \
  "each configuration's guest was restored, the allowlist one too (the guard holds per QEMU process)"
assert_eq "0" "$(printf '%s' "$st" | jq '[.probes[] | select(.pass != true)] | length')" "no probe failed"
assert_contains "$(printf '%s' "$st" | jq -r '.probes[0]."start-mode"')" "restored" "each matrix row says so"

# --- 3. options that do not match boot cold --------------------------------

out=$(call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'memory': <uint32 640>}" 2>&1)
cpath=$(printf '%s' "$out" | grep -o "$OBJ/sessions/[0-9a-f]*")
assert_ne "" "$cpath" "start a session with 640 MiB" "$out"
assert_eq "cold" "$(prop "$cpath" Session StartMode)" "other memory than the snapshot's boots cold"
assert_eq "no" "$(busctl get-property "$BUS" "$cpath" "$IFACE.Session" StartupTimings | grep -q '"restore"' && echo yes || echo no)" \
  "a cold start has no restore step"
assert_success "stop it" -- call "$cpath" Session.Stop

# --- 4. a project is mounted after the restore -----------------------------

out=$(call "$OBJ" Manager.CreateProject snapdemo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "/projects/" "create a project" "$out"
out=$(call "$OBJ" Manager.StartSession snapdemo "$IMAGE" "{}" 2>&1)
ppath=$(printf '%s' "$out" | grep -o "$OBJ/sessions/[0-9a-f]*")
assert_ne "" "$ppath" "start a session of the project" "$out"
pid=${ppath##*/}
assert_eq "restored" "$(prop "$ppath" Session StartMode)" "a project session starts restored too"
assert_contains "$(gexec "$pid" 'grep " /project " /proc/mounts')" "9p" "the project share is mounted after the restore"
assert_success "the guest writes into /project" -- gexec "$pid" 'echo from-restored > /project/snap.txt'
assert_eq "from-restored" "$(cat "$STATE/projects/snapdemo/work/snap.txt" 2>&1)" "the file is in the dataset on the host"
assert_success "stop it" -- call "$ppath" Session.Stop

# --- 5. a tampered boot file is refused ------------------------------------

# Root flips one byte of a sealed file and puts it back afterwards (also if
# the script dies here: the restore is registered first).
tamper () {  # FILE OFFSET
  local f=$1 off=$2
  chattr -i "$f" 2>/dev/null
  chmod u+w "$f"
  orig=$(dd if="$f" bs=1 skip="$off" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  printf "\\$(printf '%03o' $(( (orig + 1) % 256 )))" | dd of="$f" bs=1 seek="$off" conv=notrunc 2>/dev/null
  printf '%s' "$orig"
}
untamper () {  # FILE OFFSET BYTE
  local f=$1 off=$2 byte=$3
  printf "\\$(printf '%03o' "$byte")" | dd of="$f" bs=1 seek="$off" conv=notrunc 2>/dev/null
  chmod 0444 "$f"
  if grep -q '"immutable" *: *true' "$dir/manifest.json"; then chattr +i "$f"; fi
}
for f in boot.state boot.qcow2; do
  off=$(( $(stat -c %s "$dir/$f") / 2 ))
  byte=$(tamper "$dir/$f" "$off")
  at_exit untamper "$dir/$f" "$off" "$byte"
  assert_dbus_error "$ERR.DigestMismatch" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{}"
  untamper "$dir/$f" "$off" "$byte"
  assert_success "with $f put back, the image verifies again" -- ctl image verify "$IMAGE"
done
out=$(ctl session start "$IMAGE" 2>&1)
assert_eq "0" "$?" "a session starts again" "$out"
assert_eq "restored" "$(prop "$(session_path "$out")" Session StartMode)" "restored"
ctl session stop "$out" >/dev/null 2>&1

# --- 6. Pause, and SaveAsImage with the memory -------------------------------

s=$(ctl session start "$IMAGE")
sp=$(session_path "$s")
assert_success "the guest leaves a mark on its disk and in memory" -- \
  gexec "$s" 'echo saved-disk > /root/saved && echo saved-mem > /dev/shm/saved && sync'
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$sp" Session.Pause
assert_dbus_error "$ERR.NotAuthorized" -- user_call "$sp" Session.SaveAsImage child
assert_dbus_error "$ERR.BadState" -- call "$sp" Session.Resume
assert_success "root pauses it" -- ctl session pause "$s"
assert_eq "paused" "$(prop "$sp" Session State)" "State is paused"
assert_eq "paused by Pause()" "$(prop "$sp" Session StateReason)" "and says why"
assert_dbus_error "$ERR.BadState" -- call "$sp" Session.Exec "['true']" "[]" "''" 10
assert_dbus_error "$ERR.BadState" -- call "$sp" Session.Pause
assert_dbus_error "$ERR.InvalidArgument" -- call "$sp" Session.SaveAsImage "../x"
assert_dbus_error "$ERR.Exists" -- call "$sp" Session.SaveAsImage "$IMAGE"
out=$(ctl session save-as-image "$s" child 2>&1)
assert_eq "0" "$?" "save the paused session as the image child"
diag "save-as-image said: $out"
cdir=$STATE/images/child
assert_eq "true" "$(prop "$(image_path child)" Image Frozen)" "the saved image is frozen"
assert_success "it verifies" -- ctl image verify child
assert_success "it carries the paused guest as its boot snapshot" -- test -s "$cdir/boot.state"
assert_eq "444 0" "$(stat -c '%a %u' "$cdir/lineage.json")" "lineage.json is sealed"
assert_contains "$(cat "$cdir/manifest.json")" '"parent-digest"' "the manifest records the lineage"
show=$(ctl image show child)
assert_contains "$show" "$IMAGE ($(prop "$(image_path $IMAGE)" Image Digest))" "image show names the parent and its digest"
assert_contains "$show" "$s" "and the session it was saved from"
assert_contains "$show" "/root/saved" "and the commands run in it"
assert_contains "$show" "Memory saved:   yes" "and that the memory was saved"
assert_contains "$(ctl image show "$IMAGE")" "none (built or imported)" "a built image has no lineage"
assert_success "resume the original session" -- ctl session resume "$s"
assert_eq "running" "$(prop "$sp" Session State)" "it runs again after the save"
assert_eq "saved-disk" "$(gexec "$s" 'cat /root/saved')" "and still has its files"
c=$(ctl session start child)
assert_eq "0" "$?" "start a session of the saved image"
assert_eq "restored" "$(prop "$(session_path "$c")" Session StartMode)" "it starts from the saved memory"
assert_eq "saved-mem" "$(gexec "$c" 'cat /dev/shm/saved')" "the guest's memory (a tmpfs file) came along"
assert_eq "saved-disk" "$(gexec "$c" 'cat /root/saved')" "and its disk"
ctl session stop "$c" >/dev/null 2>&1
ctl session stop "$s" >/dev/null 2>&1

# A running session is saved with its disk only; the freeze of the new image
# then takes a boot snapshot of its own.
r=$(ctl session start "$IMAGE")
gexec "$r" 'echo running-disk > /root/r && sync' >/dev/null
out=$(ctl session save-as-image "$r" child2 2>&1)
assert_eq "0" "$?" "save a running session as child2"
diag "save-as-image said: $out"
assert_eq "running" "$(prop "$(session_path "$r")" Session State)" "the running session runs on"
assert_contains "$(ctl image show child2)" "Memory saved:   no" "without its memory"
c2=$(ctl session start child2)
assert_eq "restored" "$(prop "$(session_path "$c2")" Session StartMode)" "child2 has a boot snapshot of its own"
assert_eq "running-disk" "$(gexec "$c2" 'cat /root/r')" "and the saved disk"
ctl session stop "$c2" >/dev/null 2>&1
ctl session stop "$r" >/dev/null 2>&1
assert_eq "0" "$(ls -A "$STATE/images/.staging" 2>/dev/null | wc -l)" "the saves left nothing in staging"

# --- 6b. SaveAsImage reads no further than QEMU could -------------------------
# The overlay is the session uid's, and QEMU writes its header. Root plays
# a compromised QEMU here: the running session's overlay is made to name a
# root-only disk as its backing file. qemu-img run as root copied that
# disk's bytes into the saved image (issue 15 §5); run as the session's uid
# it cannot open it, and the save fails.
# Root-only and outside the daemon's ProtectHome=: /etc/vivarium is read by it.
secret=/etc/vivarium/test-secret.qcow2
mkdir -p /etc/vivarium
# Past where the guest's file system has anything at boot: a copy that reads
# it still boots and freezes, and the secret would sit in a frozen image.
qemu-img create -q -f qcow2 "$secret" 64M && qemu-io -f qcow2 -c 'write -q -P 0x53 48M 8M' "$secret" >/dev/null &&
  chmod 0600 "$secret" || bail_out "cannot make $secret"
at_exit rm -f "$secret"
h=$(ctl session start "$IMAGE")
gexec "$h" 'sync' >/dev/null
overlay=$STATE/sessions/$h/overlay.qcow2
"$PY" - "$overlay" "$secret" <<'PYEOF' || bail_out "cannot rewrite the overlay's header"
import struct, sys
path, name = sys.argv[1], sys.argv[2].encode()
with open(path, 'r+b') as f:
    header = f.read(20)
    offset, = struct.unpack('>Q', header[8:16])
    size, = struct.unpack('>I', header[16:20])
    assert 0 < len(name) <= size, (name, size)
    f.seek(offset); f.write(name)
    f.seek(16); f.write(struct.pack('>I', len(name)))
PYEOF
assert_contains "$(qemu-img info -U "$overlay" 2>&1)" "backing file: $secret" "the overlay now names the secret (test setup)"
out=$(ctl session save-as-image "$h" leaky 2>&1)
rc=$?
if [ -f "$STATE/images/leaky/disk.qcow2" ]; then
  qemu-img convert -f qcow2 -O raw "$STATE/images/leaky/disk.qcow2" /var/tmp/leaky.raw
  leaked=$("$PY" -c 'import sys; print(b"S" * 65536 in open(sys.argv[1], "rb").read())' /var/tmp/leaky.raw)
  rm -f /var/tmp/leaky.raw
else
  leaked=False
fi
assert_eq "False" "$leaked" "the saved image holds none of the root-only disk's bytes"
assert_ne "0" "$rc" "saving a session whose overlay names another backing file fails"
assert_contains "$out" "Cannot copy the session's disk" "at the copy, which cannot open what the header names"
assert_eq "false" "$(prop "$(image_path leaky)" Image Frozen 2>/dev/null || echo false)" "no image leaky"
assert_eq "running" "$(prop "$(session_path "$h")" Session State)" "the session runs on"
ctl session stop "$h" >/dev/null 2>&1
assert_eq "0" "$(ls -A "$STATE/images/.staging" 2>/dev/null | wc -l)" "the failed save left nothing in staging"

# --- 6. a freeze whose snapshot fails changes nothing ----------------------

# An image whose kernel is not one: QEMU refuses it at once.
bdir=$STATE/images/$BROKEN
mkdir -m 0755 "$bdir" && cp "$dir/disk.qcow2" "$dir/cmdline" "$dir/initrd.img" "$bdir/" &&
  head -c 65536 /dev/urandom >"$bdir/vmlinuz" && chmod 0644 "$bdir"/* &&
  printf '{"recipe": "test", "created-at": 1}\n' >"$bdir/image.json" || bail_out "cannot make $bdir"
at_exit rm -rf "$bdir"
before=$(stat -c '%n %a %u' "$bdir" "$bdir"/*)
systemctl stop vivariumd.service
assert_eq "false" "$(prop "$(image_path $BROKEN)" Image Frozen)" "the restarted daemon knows the broken image"
out=$(ctl image freeze "$BROKEN" 2>&1)
assert_ne "0" "$?" "freezing an image that cannot boot fails"
assert_contains "$out" "boot snapshot" "and says it was the boot snapshot" 
assert_eq "false" "$(prop "$(image_path $BROKEN)" Image Frozen)" "the image is not frozen"
assert_eq "$before" "$(stat -c '%n %a %u' "$bdir" "$bdir"/*)" "every file as it was, and no boot.* file left"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' | head -1)" \
  "the failed scratch guest left no unit"

done_testing
