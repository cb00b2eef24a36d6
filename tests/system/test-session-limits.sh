#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Sessions at their limits, on a real systemd host with real QEMU (issue 7):
# a caller flooding the command log cannot take the daemon off the bus
# (defect 1); a command that outlives its timeout is recorded as what it
# did (defect 5); a full sessions disk pauses the guest visibly, with a
# reason, refuses Exec with BadState, and Resume() or Stop() end the pause
# (defect 4). The sessions directory lives on a small tmpfs this test
# mounts, and unmounts, itself.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-session-limits.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

# The sessions disk: 48 MiB, of which the ballast takes 24 before the
# session starts; the guest then writes 32 MiB, which cannot fit until the
# ballast goes.
readonly DISK_MIB=48
readonly BALLAST_MIB=24

require_systemd_host vivariumctl gdbus busctl "$PY"
"$PY" -c 'from gi.repository import Gio' 2>/dev/null || bail_out "python3-gi is not installed"

ctl () { vivariumctl --no-interaction "$@"; }
call () {  # PATH METHOD ARGS...
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () {  # PATH INTERFACE PROPERTY
  busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | sed 's/^"//; s/"$//'
}
session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
state_is () { [ "$(prop "$2" Session State)" = "$1" ]; }
unit_gone () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" != loaded ]; }
daemon_pid () { systemctl show -P MainPID vivariumd.service; }

# entry_field PATH NEEDLE KEY: KEY of the newest log entry whose argv holds NEEDLE
entry_field () {
  "$PY" - "$@" <<'EOF'
import sys
from gi.repository import Gio, GLib
path, needle, key = sys.argv[1:4]
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
offset, total, found = 0, 1, None
while offset < total:
    r = bus.call_sync("org.vivarium.Vivarium1", path, "org.vivarium.Vivarium1.Session", "GetCommandLog",
                      GLib.Variant("(tu)", (offset, 200)), None, 0, 30000)
    entries, offset, total, dropped = r.unpack()
    for e in entries:
        if any(needle in a for a in e["argv"]):
            found = e
print(found[key] if found is not None else "")
EOF
}
entry_is () { [ "$(entry_field "$1" "$2" "$3")" = "$4" ]; }

tmpd=$(mktemp -d /var/tmp/vivarium-limits.XXXXXX)
at_exit rm -rf "$tmpd"

# --- an image ---------------------------------------------------------------

assert_success "build the tiny image" -- ctl image build "$IMAGE" "$IMAGE"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

# --- a small sessions disk ----------------------------------------------------
# Mounted before any session exists, unmounted at exit after every session
# is stopped (at_exit runs the last registered first).

mkdir -p "$STATE/sessions"
mount -t tmpfs -o "size=${DISK_MIB}m,mode=0711" vivarium-test-sessions "$STATE/sessions" || bail_out "cannot mount a tmpfs"
at_exit umount "$STATE/sessions"
dd if=/dev/zero of="$STATE/sessions/.ballast" bs=1M count="$BALLAST_MIB" status=none || bail_out "no room for the ballast"

stop_all_sessions () {
  local id
  for id in $(ctl session list --json 2>/dev/null | grep -o '"id" *: *"[0-9a-f]*"' | grep -o '[0-9a-f]\{12\}'); do
    ctl session stop "$id" >/dev/null 2>&1
  done
}
at_exit stop_all_sessions

s=$(ctl session start "$IMAGE" --memory 256)
[[ $s =~ ^[0-9a-f]{12}$ ]] || bail_out "no session to test with: '$s'"
ps=$(session_path "$s")
assert_eq "running" "$(prop "$ps" Session State)" "the session runs on the small disk"
assert_eq "" "$(prop "$ps" Session StateReason)" "a running session gives no reason"
assert_dbus_error "$ERR.BadState" -- call "$ps" Session.Resume

create_test_user nobody_user || bail_out "cannot create a test user"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$nobody_user" gdbus call --system --dest "$BUS" \
  --object-path "$ps" --method "$IFACE.Session.Resume"

# --- defect 1: a flood of huge command lines -----------------------------------
# Before the fix, the GetCommandLog() reply after this passed the bus's
# 32 MiB limit: dbus-daemon dropped vivariumd, and BindsTo= took the other
# caller's session down with it.

other=$(ctl session start "$IMAGE" --memory 256)
[[ $other =~ ^[0-9a-f]{12}$ ]] || bail_out "no second session: '$other'"
pid_before=$(daemon_pid)
flood=$("$PY" - "$ps" <<'EOF' 2>&1
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
path = sys.argv[1]
argv = ["echo"] + ["C" * 65536] * 255
for i in range(3):
    try:
        bus.call_sync("org.vivarium.Vivarium1", path, "org.vivarium.Vivarium1.Session", "Exec",
                      GLib.Variant("(asassu)", (argv, [], "", 300)), None, 0, 400000)
    except GLib.Error as e:
        pass  # what the guest made of it does not matter here; the log does
msg = Gio.DBusMessage.new_method_call("org.vivarium.Vivarium1", path, "org.vivarium.Vivarium1.Session", "GetCommandLog")
msg.set_body(GLib.Variant("(tu)", (0, 200)))
reply, serial = bus.send_message_with_reply_sync(msg, 0, 60000, None)
if reply.get_message_type() == Gio.DBusMessageType.ERROR:
    print("error", reply.get_error_name())
    sys.exit(0)
entries, nxt, total, dropped = reply.get_body().unpack()
huge = [e for e in entries if e["argv-items"] == 256]
print(len(huge), all(e["argv-truncated"] for e in huge), reply.get_body().get_size() < 2 * 1024 * 1024)
EOF
)
assert_eq "3 True True" "$flood" "three 16 MiB command lines are logged capped, marked truncated, in a reply under 2 MiB"
assert_eq "$pid_before" "$(daemon_pid)" "the daemon is still the same process, still on the bus"
assert_eq "running" "$(prop "$ps" Session State)" "and the session still runs"
assert_eq "active" "$(systemctl is-active "vivarium-session-$other.service")" "and so does the other caller's session"
# Its overlay shares the small disk: it goes before the disk is filled.
assert_success "the other session stops" -- ctl session stop "$other"

# --- defect 5: a command that outlives its timeout ------------------------------

assert_dbus_error "$ERR.TimedOut" -- call "$ps" Session.Exec "['sh', '-c', 'sleep 12; exit 5 # late']" "[]" "''" 3
assert_eq "timed-out-running" "$(entry_field "$ps" "# late" state)" "the log says it timed out and still runs"
assert_success "the log follows it to its end" -- retry_until 60 1 entry_is "$ps" "# late" state finished-late
assert_eq "5" "$(entry_field "$ps" "# late" exit-status)" "with the exit status the guest reported"

# --- defect 4: the sessions disk runs full --------------------------------------

ctl session exec "$s" --timeout 20 -- dd if=/dev/zero of=/root/fill bs=1M count=32 conv=fsync \
  >"$tmpd/fill.out" 2>"$tmpd/fill.err" &
fill_pid=$!
assert_success "the guest is paused when the disk is full" -- retry_until 120 1 state_is paused "$ps"
assert_contains "$(prop "$ps" Session StateReason)" "ran out of space" "and StateReason says why"
assert_dbus_error "$ERR.BadState" -- call "$ps" Session.Exec "['true']" "[]" "''" 10
err=$(call "$ps" Session.Exec "['true']" "[]" "''" 10 2>&1)
assert_contains "$err" "ran out of space" "the refusal names the reason"
wait "$fill_pid"
assert_contains "$(cat "$tmpd/fill.err")" "$ERR.BadState" "the command caught by the pause ends with BadState, not TimedOut"
assert_contains "$(cat "$tmpd/fill.err")" "paused" "and says the session was paused"

rm -f "$STATE/sessions/.ballast"
assert_success "once space is freed, resume the session" -- ctl session resume "$s"
assert_success "it runs again" -- retry_until 30 1 state_is running "$ps"
assert_success "the write that was caught finishes" -- retry_until 120 1 entry_is "$ps" "of=/root/fill" state finished-late
assert_eq "0" "$(entry_field "$ps" "of=/root/fill" exit-status)" "and succeeds: nothing was lost"
assert_eq "hi" "$(ctl session exec "$s" -- echo hi)" "Exec works again"

# Paused again, and stopped while paused.
ctl session exec "$s" --timeout 20 -- dd if=/dev/zero of=/root/fill2 bs=1M count=40 conv=fsync \
  >/dev/null 2>&1 &
fill_pid=$!
assert_success "a second fill pauses it again" -- retry_until 120 1 state_is paused "$ps"
assert_success "a paused session stops" -- ctl session stop "$s"
wait "$fill_pid"
assert_eq "stopped" "$(prop "$ps" Session State)" "it is stopped"
assert_eq "0" "$(prop "$ps" Session Leftovers)" "teardown found nothing left"
assert_success "its unit is gone" -- retry_until 20 0.5 unit_gone "vivarium-session-$s.service"
assert_eq "no" "$([ -e "$STATE/sessions/$s" ] && echo yes || echo no)" "its overlay is gone from the small disk"
assert_success "its command log stays, outside the sessions disk" -- grep -q '"finished-late"' "$STATE/logs/sessions/$s.jsonl"

done_testing
