#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The D-Bus boundary on a real system bus (with the installed bus policy) and
# a real session: while root runs a command carrying a secret in a session,
# an unprivileged user who subscribes to everything the daemon sends (gdbus
# monitor; dbus-monitor, which also tries to eavesdrop) never sees it, nor a
# CommandFinished at all; root's own subscriber, allowed by polkit, does see
# the CommandFinished with the secret (the positive control: without it,
# "nothing arrived" could mean nothing was sent). The user is also refused
# the session's methods and properties and does not see it in the tree.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-boundary.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly SECRET="vivarium-secret-$RANDOM$RANDOM$RANDOM"

require_systemd_host vivariumctl gdbus busctl dbus-monitor setpriv "$PY"
"$PY" -c 'from gi.repository import Gio' 2>/dev/null || bail_out "python3-gi is not installed"

WORK=$(mktemp -d /var/tmp/test-boundary.XXXXXX) || bail_out "cannot create a scratch directory"
readonly WORK
chmod 755 "$WORK"
at_exit rm -rf "$WORK"

ctl () { vivariumctl --no-interaction "$@"; }

# as_user USER CMD...: CMD as that user, in the foreground.
as_user () {
  local user=$1
  shift
  setpriv --reuid "$user" --regid "$user" --init-groups \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$@"
}

listeners=()
# listen_as_user OUT USER CMD...: in the background, output to OUT. The job is
# setpriv itself (exec'ing env, exec'ing CMD), so its PID is CMD's: a
# function run with & would put a subshell in between, and the kill would
# miss the command.
listen_as_user () {
  local out=$1 luser=$2
  shift 2
  setpriv --reuid "$luser" --regid "$luser" --init-groups \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$@" >"$out" 2>&1 &
  listeners+=($!)
}
stop_listeners () {
  local pid
  for pid in "${listeners[@]}"; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  listeners=()
}

# --- a frozen image and a running session -------------------------------------

if ! ctl image list 2>/dev/null | grep -qw "$IMAGE"; then
  out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $out"
fi
if [ "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" "$IFACE.Image" Frozen 2>&1)" != "b true" ]; then
  out=$(ctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
fi
id=$(ctl session start "$IMAGE" --memory 256 2>"$WORK/start.err") ||
  bail_out "cannot start a session: $(head -c 300 "$WORK/start.err")"
[ -n "$id" ] || bail_out "the session start printed no id"
at_exit vivariumctl --no-interaction session stop "$id"
spath=$OBJ/sessions/$id
ok "a session $id runs"

create_test_user user || bail_out "cannot create a test user"
# Registered after the user, so it runs before userdel (cleanups run last
# registered first): a user with running processes cannot be deleted.
at_exit stop_listeners

# --- listeners --------------------------------------------------------------

# Root's subscriber: subscribes, then makes one call polkit allows
# (GetCommandLog, read-reports), which is what the daemon sends signals
# after; prints every signal it receives.
cat >"$WORK/root-listener.py" <<'EOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
path = sys.argv[1]
def on_signal(conn, sender, obj, iface, name, params):
    print(obj, iface, name, params.print_(False), flush=True)
bus.signal_subscribe("org.vivarium.Vivarium1", None, None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
bus.call_sync("org.vivarium.Vivarium1", path, "org.vivarium.Vivarium1.Session", "GetCommandLog",
              GLib.Variant("(tu)", (0, 10)), None, Gio.DBusCallFlags.NONE, 30000, None)
print("READY", flush=True)
GLib.MainLoop().run()
EOF

"$PY" "$WORK/root-listener.py" "$spath" >"$WORK/root.txt" 2>&1 &
listeners+=($!)
listen_as_user "$WORK/user-gdbus.txt" "$user" gdbus monitor --system --dest "$BUS"
# dbus-monitor tries, in this order, to become a monitor and to eavesdrop
# (each match rule with eavesdrop=true), and settles for what the bus lets
# a user have. The probe rule is its readiness check and a control: a
# broadcast that is not ours reaches it.
listen_as_user "$WORK/user-dbus-monitor.txt" "$user" dbus-monitor --system "sender='$BUS'" \
  "type='signal',interface='org.vivarium.TestProbe'"

retry_until 100 0.1 grep -q READY "$WORK/root.txt" || bail_out "root's listener did not start: $(cat "$WORK/root.txt")"
retry_until 100 0.1 grep -q "is owned by" "$WORK/user-gdbus.txt" ||
  bail_out "the user's gdbus monitor did not start: $(cat "$WORK/user-gdbus.txt")"
probe_seen () {
  gdbus emit --system --object-path /org/vivarium/TestProbe --signal org.vivarium.TestProbe.Ready >/dev/null 2>&1
  grep -q "org.vivarium.TestProbe" "$WORK/user-dbus-monitor.txt"
}
retry_until 100 0.1 probe_seen ||
  bail_out "the user's dbus-monitor receives no broadcast at all: $(cat "$WORK/user-dbus-monitor.txt")"
ok "the user's dbus-monitor receives broadcasts (a probe signal that is not ours)"

# --- root works --------------------------------------------------------------

out=$(ctl session exec "$id" -- echo "$SECRET" 2>&1)
assert_contains "$out" "$SECRET" "root's command ran and printed the secret"
retry_until 100 0.1 grep -q "CommandFinished.*$SECRET" "$WORK/root.txt"
sleep 1   # whatever was sent to the user too has long arrived
stop_listeners

assert_contains "$(cat "$WORK/root.txt")" "CommandFinished" \
  "root's subscriber, allowed by polkit, received CommandFinished (positive control)"
assert_contains "$(grep CommandFinished "$WORK/root.txt")" "$SECRET" "root's CommandFinished carries the command line"
assert_not_contains "$(cat "$WORK/user-gdbus.txt")" "$SECRET" "the user's gdbus monitor never saw the secret"
assert_not_contains "$(cat "$WORK/user-gdbus.txt")" "CommandFinished" "the user's gdbus monitor saw no CommandFinished"
assert_not_contains "$(cat "$WORK/user-dbus-monitor.txt")" "$SECRET" "the user's dbus-monitor (eavesdropping) never saw the secret"
assert_not_contains "$(cat "$WORK/user-dbus-monitor.txt")" "CommandFinished" "the user's dbus-monitor saw no CommandFinished"

# --- the user is refused everything about the session --------------------------

ucall () {  # PATH IFACE.METHOD ARGS...: as the user
  local path=$1 method=$2
  shift 2
  as_user "$user" gdbus call --system --dest "$BUS" --object-path "$path" --method "$method" "$@"
}
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$spath" "$IFACE.Session.GetCommandLog" "uint64 0" "uint32 10"
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$spath" "$IFACE.Session.Exec" "['true']" "@as []" "''" "uint32 10"
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$spath" "$IFACE.Session.Stop"
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$spath" org.freedesktop.DBus.Properties.Get "$IFACE.Session" Unit
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$spath" org.freedesktop.DBus.Properties.GetAll "$IFACE.Session"
assert_dbus_error "$ERR.NotAuthorized" -- ucall "$OBJ" "$IFACE.Manager.ListSessions"
tree=$(as_user "$user" gdbus introspect --system --dest "$BUS" --object-path "$OBJ/sessions" 2>&1)
assert_not_contains "$tree" "$id" "the user does not see the session in the tree"
node=$(as_user "$user" gdbus introspect --system --dest "$BUS" --object-path "$spath" 2>&1)
assert_not_contains "$node" "$IFACE.Session" "the user's Introspect of the session shows no interface"
assert_contains "$(gdbus introspect --system --dest "$BUS" --object-path "$OBJ/sessions" 2>&1)" "$id" \
  "root sees the session in the tree"
assert_eq "running" "$(busctl get-property "$BUS" "$spath" "$IFACE.Session" State | cut -d'"' -f2)" \
  "the session still runs after all that"

# Nothing of the user may outlive the test (or userdel fails at exit).
stop_listeners
left=$(pgrep -a -u "$user" 2>/dev/null)
assert_eq "" "$left" "no process of the test user is left"

done_testing
