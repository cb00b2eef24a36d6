#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-ui-test.sh BUILDDIR SRCDIR LOGDIR
#
# Runs the app under Xvfb with a session bus of its own (where the app
# starts the AT-SPI bus) and a private "system" bus on which vivariumd is
# absent (no activation files), then drives it through AT-SPI with
# test-ui.py (Debian's /usr/bin/python3: pyatspi and dogtail). Screenshots
# go to LOGDIR. With VIVARIUM_UI_REAL_SYSTEM_BUS=1 the real system bus is
# kept (inside the systemd test host); VIVARIUM_UI_SCRIPT picks the driver. Everything started here is stopped by its PID.
set -u

build=$1 src=$2 logdir=$3
mkdir -p "$logdir"
pids=()
# What the app remembers across runs (its window's size and page, its
# list of other hosts) is kept apart from the user's own, and starts empty
# each run.
state=$(mktemp -d)

cleanup () {
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	rm -rf "$state"
}
trap cleanup EXIT

for tool in Xvfb dbus-daemon import xdotool /usr/bin/python3; do
	command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (tools/install-deps.sh)"; exit 1; }
done
/usr/bin/python3 -c 'import pyatspi, dogtail' || { echo "FAIL: python3-pyatspi / python3-dogtail are missing"; exit 1; }

# Xvfb picks a free display and tells us which.
exec {dfd}<> <(:)
Xvfb -displayfd "$dfd" -screen 0 1280x800x24 -nolisten tcp >"$logdir/xvfb.log" 2>&1 &
pids+=($!)
display=
for _ in $(seq 100); do
	read -r -t 1 display <&"$dfd" && break
done
[ -n "$display" ] || { echo "FAIL: Xvfb did not start"; exit 1; }
export DISPLAY=:$display

start_bus () {
	local out
	out=$(dbus-daemon --session --fork --print-address=1 --print-pid=1) || return 1
	bus_address=$(sed -n 1p <<<"$out")
	pids+=("$(sed -n 2p <<<"$out")")
}
start_bus || { echo "FAIL: no session bus"; exit 1; }
export DBUS_SESSION_BUS_ADDRESS=$bus_address
if [ -z "${VIVARIUM_UI_REAL_SYSTEM_BUS:-}" ]; then
	start_bus || { echo "FAIL: no private system bus"; exit 1; }
	export DBUS_SYSTEM_BUS_ADDRESS=$bus_address
fi

export GDK_BACKEND=x11 GSK_RENDERER=cairo GTK_A11Y=atspi
unset NO_AT_BRIDGE
export LANGUAGE=C LC_ALL=C.UTF-8
export VIVARIUM_UI_APP=${VIVARIUM_UI_APP:-$build/app/vivarium}
export VIVARIUM_UI_LOGDIR=$logdir
export XDG_STATE_HOME=$state XDG_CONFIG_HOME=$state/config
/usr/bin/python3 "${VIVARIUM_UI_SCRIPT:-$src/tests/ui/test-ui.py}"
