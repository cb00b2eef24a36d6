#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Images and sessions on a real systemd host with real QEMU (TCG unless the
# host hands the container /dev/kvm): build and freeze `tiny` through the
# daemon, boot sessions, run commands, copy files, take a screenshot, stop
# them and check nothing is left; two sessions are isolated from each other;
# a killed daemon takes its sessions with it and the next one sweeps; every
# bad input is refused with a typed error and changes nothing.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-sessions.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

require_systemd_host vivariumctl gdbus busctl qemu-img "$PY"
"$PY" -c 'from gi.repository import Gio' 2>/dev/null || bail_out "python3-gi is not installed"

ctl () { vivariumctl --no-interaction "$@"; }
call () {  # PATH METHOD ARGS...: a raw call, bypassing the client's own checks
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () {  # PATH INTERFACE PROPERTY
  busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'
}
session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
image_path () { printf '%s/images/%s' "$OBJ" "$1"; }
count_sessions () { call "$OBJ" Manager.ListSessions | grep -o "/sessions/" | wc -l; }
unit_loaded () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" = loaded ]; }
unit_gone () { ! unit_loaded "$1"; }
main_pid_uid () { awk '/^Uid:/ { print $2 }' "/proc/$(systemctl show -P MainPID "$1")/status"; }

# Scratch files live in the container's own /var/tmp, not in the source tree.
tmpd=$(mktemp -d /var/tmp/vivarium-sessions.XXXXXX)
at_exit rm -rf "$tmpd"

stop_all_sessions () {
  local id
  for id in $(ctl session list --json 2>/dev/null | grep -o '"id" *: *"[0-9a-f]*"' | grep -o '[0-9a-f]\{12\}'); do
    ctl session stop "$id" >/dev/null 2>&1
  done
}
at_exit stop_all_sessions

# --- images ---------------------------------------------------------------

assert_contains "$(ctl image recipes)" "$IMAGE" "the tiny recipe is offered"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.BuildImage "../tiny" "x"
assert_dbus_error "$ERR.NotFound" -- call "$OBJ" Manager.BuildImage "no-such-recipe" "x"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.BuildImage "$IMAGE" "a/b"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.BuildImage "$IMAGE" ".."
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.BuildImage "$IMAGE" "$(printf 'bad\033name')"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.BuildImage "$IMAGE" "$(printf 'x%.0s' {1..65})"
assert_eq "0" "$(ls "$STATE/images" | wc -l)" "refused builds left nothing under images/"

out=$(ctl image build ubuntu ubuntu-here 2>&1)
assert_ne "0" "$?" "a build that cannot work here fails"
assert_contains "$out" "archive.ubuntu.com" "the failed build says why (from the builder's log)"
assert_eq "no" "$([ -e "$STATE/images/ubuntu-here" ] && echo yes || echo no)" "a failed build leaves no image"
assert_eq "0" "$(ls -A "$STATE/images/.staging" 2>/dev/null | wc -l)" "a failed build leaves no staging directory"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-build-*' | head -1)" "a failed build leaves no unit"

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image through the daemon"
assert_contains "$build_out" "Converting the disk to qcow2" "the build reports its steps as progress"
assert_success "the build log is kept with the image" -- test -s "$STATE/images/$IMAGE/build.log"
assert_eq "false" "$(prop "$(image_path $IMAGE)" Image Frozen)" "a new image is not frozen"
assert_dbus_error "$ERR.Exists" -- call "$OBJ" Manager.BuildImage "$IMAGE" "$IMAGE"
assert_dbus_error "$ERR.NotFrozen" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{}"
assert_eq "0" "$(count_sessions)" "a refused start left no session"

assert_success "freeze the image" -- ctl image freeze "$IMAGE"
assert_dbus_error "$ERR.BadState" -- call "$(image_path $IMAGE)" Image.Freeze
digest=$(prop "$(image_path $IMAGE)" Image Digest)
assert_contains "$digest" "sha256:" "the frozen image has a digest"
assert_success "the frozen image verifies" -- ctl image verify "$IMAGE"
disk=$STATE/images/$IMAGE/disk.qcow2
assert_eq "444 0" "$(stat -c '%a %u' "$disk")" "the frozen disk is read-only and owned by root"
if grep -q '"immutable" *: *true' "$STATE/images/$IMAGE/manifest.json"; then
  if (echo x >>"$disk") 2>/dev/null; then not_ok "root cannot write the immutable base image"; else ok "root cannot write the immutable base image"; fi
else
  diag "this filesystem has no immutable flag; checking the permission barrier only"
  ok "the manifest records that the filesystem has no immutable flag"
fi
if runuser -u vivarium-s5 -- sh -c "echo x >> '$disk'" 2>/dev/null; then
  not_ok "a session uid cannot write the base image"
else
  ok "a session uid cannot write the base image"
fi

# Issue 7, defect 11: the start-time image check, shown to refuse. Root
# lifts the immutable flag, appends one byte, and puts everything back
# (also if the script dies here: the restore is registered first).
disk_size=$(stat -c %s "$disk")
disk_immutable=no
lsattr "$disk" 2>/dev/null | cut -d' ' -f1 | grep -q i && disk_immutable=yes
restore_disk () {
  chattr -i "$disk" 2>/dev/null
  truncate -s "$disk_size" "$disk"
  if [ "$disk_immutable" = yes ]; then chattr +i "$disk"; fi
}
at_exit restore_disk
chattr -i "$disk" 2>/dev/null
printf 'x' >>"$disk"
assert_eq "$((disk_size + 1))" "$(stat -c %s "$disk")" "root appended a byte to the frozen disk (test setup)"
assert_dbus_error "$ERR.DigestMismatch" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{}"
# The daemon keeps an ended session listed for a while, with its final state.
refused=$(call "$OBJ" Manager.ListSessions | grep -o "$OBJ/sessions/[0-9a-f]*" | head -1)
assert_eq "failed" "$(prop "$refused" Session State)" "the refused session is failed, never running"
assert_contains "$(prop "$refused" Session StateReason)" "no longer matches its frozen digest" "its StateReason says why"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' | head -1)" "it started no unit"
assert_eq "0" "$(ls -A "$STATE/sessions" 2>/dev/null | wc -l)" "and left no overlay"
restore_disk
assert_success "the restored image verifies again" -- ctl image verify "$IMAGE"

# --- import ---------------------------------------------------------------

qemu-img create -q -f qcow2 "$tmpd/plain.qcow2" 64M
qemu-img create -q -f qcow2 -F qcow2 -b "$disk" "$tmpd/backed.qcow2"
assert_success "a self-contained qcow2 is imported through a file descriptor" -- ctl image import imported "$tmpd/plain.qcow2"
assert_eq "import" "$(prop "$(image_path imported)" Image Recipe)" "the imported image records where it came from"
assert_eq "67108864" "$(prop "$(image_path imported)" Image VirtualSize)" "qemu-img's virtual size is recorded"
assert_dbus_error "$ERR.InvalidArgument" -- ctl image import backed "$tmpd/backed.qcow2"
assert_dbus_error "$ERR.Exists" -- ctl image import imported "$tmpd/plain.qcow2"
assert_eq "no" "$([ -e "$STATE/images/backed" ] && echo yes || echo no)" "a refused import leaves nothing"
assert_eq "0" "$(ls -A "$STATE/images/.staging" 2>/dev/null | wc -l)" "no staging leftovers"
assert_success "an unfrozen image can be deleted" -- ctl image delete imported
assert_eq "no" "$([ -e "$STATE/images/imported" ] && echo yes || echo no)" "the deleted image's files are gone"

# --- bad session input ----------------------------------------------------

before=$(count_sessions)
assert_dbus_error "$ERR.NotFound" -- call "$OBJ" Manager.StartSession "''" "no-such-image" "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "../$IMAGE" "{}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'memory': <uint32 1>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'memory': <uint32 4000000>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'cpus': <uint32 999>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'cpus': <'two'>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'bogus': <1>}"
assert_dbus_error "$ERR.InvalidArgument" -- call "$OBJ" Manager.StartSession "''" "$IMAGE" "{'egress': <'closed-world'>}"
assert_dbus_error "$ERR.NotFound" -- call "$OBJ" Manager.StartSession "'no-such-project'" "$IMAGE" "{}"
assert_eq "$before" "$(count_sessions)" "refused starts created no session"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-session-*' | head -1)" "refused starts started no unit"

# --- one session ----------------------------------------------------------

a=$(ctl session start "$IMAGE" --memory 384)
# The id is all that is printed, and it names a session the daemon knows.
if [[ $a =~ ^[0-9a-f]{12}$ ]] && [ "$(prop "$(session_path "$a")" Session Id 2>/dev/null)" = "$a" ]; then
  ok "a session started"
else
  not_ok "a session started" "vivariumctl printed: '$a'"
fi
[ -n "$a" ] || bail_out "no session to test with"
pa=$(session_path "$a")
unit_a=vivarium-session-$a.service
assert_eq "running" "$(prop "$pa" Session State)" "the session is running"
assert_eq "$digest" "$(prop "$pa" Session ImageDigest)" "the session records the verified digest"
assert_eq "active" "$(systemctl is-active "$unit_a")" "its transient unit is active"
assert_eq "vivarium.slice" "$(systemctl show -P Slice "$unit_a")" "the unit is in vivarium.slice"
assert_contains "$(systemctl show -P BindsTo "$unit_a")" "vivariumd.service" "the unit is bound to the daemon"
assert_eq "closed" "$(systemctl show -P DevicePolicy "$unit_a")" "the unit allows no devices but /dev/kvm"
uid_a=$(prop "$pa" Session Uid)
assert_eq "$uid_a" "$(main_pid_uid "$unit_a")" "QEMU runs as the session uid"
assert_ne "0" "$uid_a" "the session uid is not root"
assert_contains "$(cat "/proc/$(systemctl show -P MainPID "$unit_a")/status")" "Seccomp:	2" "QEMU runs under a seccomp filter"
assert_contains "$(busctl get-property "$BUS" "$pa" "$IFACE.Session" StartupTimings)" "agent-ready" "start-up steps are timed"

kernel=$(ctl session exec "$a" -- uname -r)
assert_eq "$(basename "$(ls /boot/vmlinuz-* | sort -V | tail -1)" | sed 's/^vmlinuz-//')" "$kernel" "uname -r in the guest names the image's kernel"
assert_success "a command writes a file in the guest" -- ctl session exec "$a" -- sh -c 'echo hello-from-a > /root/mark'
ctl session cp "$a:/root/mark" "$tmpd/mark-a" 2>/dev/null
assert_eq "hello-from-a" "$(cat "$tmpd/mark-a" 2>/dev/null)" "the file reads back through ReadFile"
rm -f "$tmpd/mark-a"
printf 'written-by-host\n' >"$tmpd/in-a"
assert_success "a file goes in through WriteFile" -- ctl session cp "$tmpd/in-a" "$a:/root/in"
rm -f "$tmpd/in-a"
assert_eq "written-by-host" "$(ctl session exec "$a" -- cat /root/in)" "the guest sees the written file"
ctl session exec "$a" -- sh -c 'exit 7' >/dev/null 2>&1
assert_eq "7" "$?" "the guest's exit status comes back"

assert_success "a screenshot is taken" -- ctl session screenshot "$a" "$tmpd/shot.png"
assert_eq "89504e470d0a1a0a" "$(head -c 8 "$tmpd/shot.png" | od -An -tx1 | tr -d ' \n')" "the screenshot is a PNG"
rm -f "$tmpd/shot.png"
log=$(ctl session log "$a")
assert_contains "$log" "uname" "the command log records uname"
assert_contains "$log" "screenshot" "the command log records the screenshot"
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.GetCommandLog 0 0
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.GetCommandLog 0 201
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.GetCommandLog 100000 10
page=$(call "$pa" Session.GetCommandLog 0 2)
assert_contains "$page" "'seq': <uint64 1>" "a page of two holds the first two entries"
assert_not_contains "$page" "'seq': <uint64 2>" "and no more"
assert_contains "$(ctl session log "$a" --json)" '"screenshot"' "session log --json pages through to the end"

# Issue 7, defect 11: the 1 MiB output cap, where the session applies it.
capped=$("$PY" - "$pa" <<'EOF' 2>&1
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
cmd = "dd if=/dev/zero bs=1000 count=2000 2>/dev/null | tr '\\0' x"
r = bus.call_sync("org.vivarium.Vivarium1", sys.argv[1], "org.vivarium.Vivarium1.Session", "Exec",
                  GLib.Variant("(asassu)", (["sh", "-c", cmd], [], "", 120)), None, 0, 180000)
status, out, err, out_trunc, err_trunc = r.unpack()
print(status, len(out), out_trunc, set(bytes(out)) == {ord("x")})
EOF
)
assert_eq "0 1048576 True True" "$capped" "a 2,000,000-byte stdout comes back cut at 1 MiB, marked truncated"

# Issue 7, defect 1: the limit is on what the caller sent, not on the
# daemon's own cwd wrapper (256 items and a cwd were refused as "261").
full=$("$PY" - "$pa" <<'EOF' 2>&1
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync("org.vivarium.Vivarium1", sys.argv[1], "org.vivarium.Vivarium1.Session", "Exec",
                  GLib.Variant("(asassu)", (["echo"] + ["y"] * 255, [], "/root", 60)), None, 0, 120000)
print(r.unpack()[0], bytes(r.unpack()[1]).count(b"y"))
EOF
)
assert_eq "0 255" "$full" "256 items with a cwd run"

big=$("$PY" - "$pa" <<'EOF' 2>&1
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
try:
    bus.call_sync("org.vivarium.Vivarium1", sys.argv[1], "org.vivarium.Vivarium1.Session", "WriteFile",
                  GLib.Variant("(say)", ("/root/big", b"x" * (16 * 1024 * 1024 + 1))), None, 0, 60000)
    print("accepted")
except GLib.Error as e:
    print(Gio.DBusError.get_remote_error(e))
EOF
)
assert_eq "$ERR.TooLarge" "$big" "a file over 16 MiB is refused"
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.Exec "[]" "[]" "''" 10
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.Exec "['true']" "['NOEQUALS']" "''" 10
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.Exec "['true']" "[]" "'relative'" 10
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.Exec "['true']" "[]" "''" 0
assert_dbus_error "$ERR.InvalidArgument" -- call "$pa" Session.ReadFile "'etc/passwd'"

# --- two sessions ---------------------------------------------------------

b=$(ctl session start "$IMAGE" --memory 384)
[ -n "$b" ] || bail_out "no second session"
pb=$(session_path "$b")
uid_b=$(prop "$pb" Session Uid)
assert_ne "$uid_a" "$uid_b" "two sessions run as different uids"
assert_eq "$uid_b" "$(main_pid_uid "vivarium-session-$b.service")" "the second QEMU runs as its own uid"
if ctl session exec "$b" -- cat /root/mark >/dev/null 2>&1; then
  not_ok "the second session does not see the first one's file"
else
  ok "the second session does not see the first one's file"
fi
assert_eq "2" "$(ls "$STATE/sessions" | wc -l)" "each session has its own overlay directory"

# --- stop -----------------------------------------------------------------

assert_success "stop the first session" -- ctl session stop "$a"
assert_eq "stopped" "$(prop "$pa" Session State)" "it is stopped"
assert_eq "0" "$(prop "$pa" Session Leftovers)" "teardown found nothing left"
assert_success "its unit is gone" -- retry_until 20 0.5 unit_gone "$unit_a"
assert_eq "no" "$([ -e "$STATE/sessions/$a" ] && echo yes || echo no)" "its overlay is gone"
assert_eq "no" "$([ -e "$RUNTIME/sessions/$a" ] && echo yes || echo no)" "its sockets are gone"
assert_dbus_error "$ERR.BadState" -- call "$pa" Session.Exec "['true']" "[]" "''" 10
assert_dbus_error "$ERR.BadState" -- call "$pa" Session.Stop
assert_eq "$digest" "$(prop "$(image_path $IMAGE)" Image Digest)" "the image digest is unchanged"
assert_eq "(true,)" "$(call "$(image_path $IMAGE)" Image.Verify)" "the image still verifies after a session wrote to its overlay"
assert_dbus_error "$ERR.Busy" -- call "$(image_path $IMAGE)" Image.Delete

# --- the runtime limit ----------------------------------------------------

c=$(ctl session start "$IMAGE" --memory 256 --timeout 15)
[ -n "$c" ] || bail_out "no session with a timeout"
unit_c=vivarium-session-$c.service
assert_eq "15s" "$(systemctl show -P RuntimeMaxUSec "$unit_c")" "the timeout becomes the unit's RuntimeMaxSec="
assert_success "the session ends by itself when its time is up" -- retry_until 60 1 unit_gone "$unit_c"
assert_success "its files go with it" -- retry_until 10 0.5 test ! -e "$STATE/sessions/$c"
assert_eq "stopped" "$(prop "$(session_path "$c")" Session State)" "a session that reached its limit is stopped, not failed"

# --- a killed daemon ------------------------------------------------------

unit_b=vivarium-session-$b.service
assert_eq "active" "$(systemctl is-active "$unit_b")" "the second session is still running"
systemctl kill --signal=KILL vivariumd.service
assert_success "killing vivariumd stops the session's QEMU (BindsTo)" -- retry_until 60 0.5 unit_gone "$unit_b"
# The unit restarts the daemon on failure, and the new instance sweeps at
# once: its log line is the evidence that something was left behind.
assert_success "the next call activates the daemon again" -- retry_until 20 0.5 ctl status
assert_eq "no" "$([ -e "$STATE/sessions/$b" ] && echo yes || echo no)" "the start-up sweep removed the overlay"
assert_eq "no" "$([ -e "$RUNTIME/sessions/$b" ] && echo yes || echo no)" "the start-up sweep removed the runtime directory"
assert_contains "$(journalctl -u vivariumd --no-pager)" "sweep: removing leftover $STATE/sessions/$b" "the sweep logged what it removed"
# Issue 7, defect 7: the history outlives the daemon and the session.
blog=$STATE/logs/sessions/$b.jsonl
assert_success "the killed daemon's session left its command log on disk" -- test -s "$blog"
assert_contains "$(cat "$blog" 2>/dev/null)" '"kind":"exec"' "it holds the commands run in it"
assert_eq "600 0" "$(stat -c '%a %u' "$blog" 2>/dev/null)" "and only root may read it"
after=$(ctl session log "$b" 2>&1)
assert_contains "$after" "the daemon does not know this session any more" "session log of a session from before the crash reads the daemon's file"
assert_contains "$after" "/root/mark" "and shows what was run in it"
assert_success "the first session's log is kept after its teardown" -- grep -q '"uname"' "$STATE/logs/sessions/$a.jsonl"
assert_success "the image is back and still verifies" -- ctl image verify "$IMAGE"

done_testing
