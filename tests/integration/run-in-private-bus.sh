#!/bin/bash
# shellcheck disable=SC2317  # the teardown functions run from traps
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-in-private-bus.sh BUILDDIR -- CMD [ARGS...]
#
# Runs CMD against a private system bus with a real polkitd, without
# changing anything on the host:
#
#   - a test user is created with useradd and deleted at the end;
#   - everything else happens in a private mount + PID namespace, so the
#     bind mounts over polkit's fixed directories are invisible outside and
#     every process left in the namespace dies with it;
#   - dbus-daemon runs with a generated config (system bus type, no service
#     helper, allow-all policy) and activates vivariumd and polkitd from
#     service files written here; both inherit DBUS_SYSTEM_BUS_ADDRESS and so
#     connect to this bus, not the host's;
#   - polkitd sees only our policy file and the rules files the test writes.
#
# CMD gets these variables (see tests/integration/README.md):
#   DBUS_SYSTEM_BUS_ADDRESS, VIVARIUM_{STATE,RUNTIME,CONFIG,DATA}_DIR,
#   VIVARIUM_TEST_USER, VIVARIUM_TEST_RUN_DIR, VIVARIUM_TEST_RULES_DIR,
#   VIVARIUM_TEST_ACTIONS_DIR, VIVARIUM_TEST_SERVICES_DIR,
#   VIVARIUM_TEST_DAEMON, VIVARIUM_TEST_BUS_PID.
#
# Exit status: CMD's, or 1 if the host could not be set up.

set -u

SRCDIR=$(dirname "$(realpath "$0")")/../..

POLKITD=/usr/lib/polkit-1/polkitd
POLICY_NAME=org.vivarium.Vivarium1.policy
PROG=$(basename "$0")

die () {
	echo "$PROG: FAIL: $*" >&2
	exit 1
}

usage () {
	echo "usage: $PROG BUILDDIR -- CMD [ARGS...]" >&2
	exit 1
}

# ---------------------------------------------------------------------------
# Inner part: PID 1 of a new PID namespace, in a private mount namespace.
# ---------------------------------------------------------------------------

bus_pid=

# The name owners are children of dbus-daemon, not of this shell: ask the bus
# for their PIDs and stop exactly those, then the bus itself.
stop_name_owner () {
	local name=$1 reply pid
	reply=$(gdbus call --system --timeout 5 --dest org.freedesktop.DBus \
		--object-path /org/freedesktop/DBus \
		--method org.freedesktop.DBus.GetConnectionUnixProcessID "$name" 2>/dev/null) || return 0
	pid=${reply//[^0-9]/}
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
	fi
}

inner_teardown () {
	if [ -n "$bus_pid" ]; then
		stop_name_owner org.vivarium.Vivarium1
		stop_name_owner org.freedesktop.PolicyKit1
		kill -TERM "$bus_pid" 2>/dev/null
		wait "$bus_pid" 2>/dev/null
		bus_pid=
	fi
	# The bind mounts belong to this namespace and go away with it; unmounting
	# here too keeps a long-lived namespace (e.g. a debugging shell) tidy.
	umount /etc/polkit-1/rules.d /usr/share/polkit-1/rules.d /usr/share/polkit-1/actions 2>/dev/null
	if mountpoint -q /run/dbus 2>/dev/null; then
		umount /run/dbus 2>/dev/null
	fi
}

write_bus_config () {
	local run=$1
	cat > "$run/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- A system bus in all but its address. There is no <servicehelper>, so
     dbus-daemon starts activated services itself, as root, with its own
     environment; there is no <user>, so the bus stays root. -->
<busconfig>
  <type>system</type>
  <listen>unix:path=$run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$run/services</servicedir>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
EOF
}

write_service_files () {
	local run=$1 daemon=$2
	mkdir -p "$run/services"
	cat > "$run/services/org.vivarium.Vivarium1.service" <<EOF
[D-BUS Service]
Name=org.vivarium.Vivarium1
Exec=$daemon --verbose
User=root
EOF
	# polkitd starts as root and switches to the polkitd user by itself, as it
	# does under systemd.
	cat > "$run/services/org.freedesktop.PolicyKit1.service" <<EOF
[D-BUS Service]
Name=org.freedesktop.PolicyKit1
Exec=$POLKITD --no-debug
User=root
EOF
	chmod 644 "$run"/services/*.service
}

# polkitd reads fixed directories; cover each with one of ours.
setup_polkit_dirs () {
	local run=$1 policy=$2
	mkdir -p "$run/polkit/actions" "$run/polkit/usr-rules.d" "$run/polkit/etc-rules.d"
	cp "$policy" "$run/polkit/actions/$POLICY_NAME" || return 1
	chmod 755 "$run/polkit" "$run/polkit"/*
	chmod 644 "$run/polkit/actions/$POLICY_NAME"
	mount --bind "$run/polkit/actions" /usr/share/polkit-1/actions || return 1
	mount --bind "$run/polkit/usr-rules.d" /usr/share/polkit-1/rules.d || return 1
	mount --bind "$run/polkit/etc-rules.d" /etc/polkit-1/rules.d || return 1
}

start_bus () {
	local run=$1 _
	"$DBUS_DAEMON" --config-file="$run/bus.conf" --nofork --print-address=3 \
		3>"$run/bus.address" >"$run/bus.log" 2>&1 &
	bus_pid=$!
	# dbus-daemon prints its address once it listens.
	for _ in $(seq 1 100); do
		if [ -s "$run/bus.address" ]; then
			return 0
		fi
		if ! kill -0 "$bus_pid" 2>/dev/null; then
			cat "$run/bus.log" >&2
			bus_pid=
			return 1
		fi
		sleep 0.1
	done
	return 1
}

inner () {
	local builddir=$1 run=$2 policy=$3 rc
	shift 3
	[ "${1-}" = "--" ] || usage
	shift

	trap 'inner_teardown' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	# Also hide the host's system bus socket, so that a client that ignores
	# DBUS_SYSTEM_BUS_ADDRESS finds our bus (or nothing), never the host's.
	mkdir -p "$run/dbus"
	chmod 755 "$run/dbus"
	if [ -d /run/dbus ]; then
		mount --bind "$run/dbus" /run/dbus || die "cannot bind-mount over /run/dbus"
	fi
	setup_polkit_dirs "$run" "$policy" || die "cannot set up polkit's directories"

	mkdir -p "$run/state" "$run/runtime" "$run/config" "$run/data"
	# The package's defaults, as installed; the daemon has built-in ones too.
	if [ -r "$SRCDIR/service/defaults.conf" ]; then
		cp "$SRCDIR/service/defaults.conf" "$run/data/defaults.conf"
	fi
	# Keep the daemon on the bus for the whole test: the tests compare its PID
	# before and after, and an idle exit would make that depend on timing.
	printf '[Daemon]\nIdleTimeoutSec=0\n' > "$run/config/vivarium.conf"
	# No systemd here to boot a guest in: Freeze only seals.
	printf '[Sessions]\nBootSnapshots=false\n' >> "$run/config/vivarium.conf"

	write_bus_config "$run"
	write_service_files "$run" "$builddir/service/vivariumd"

	unset DBUS_SESSION_BUS_ADDRESS DBUS_STARTER_ADDRESS DBUS_STARTER_BUS_TYPE
	# Exported before dbus-daemon starts: activated services inherit them.
	export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$run/dbus/system_bus_socket"
	export VIVARIUM_STATE_DIR="$run/state"
	export VIVARIUM_RUNTIME_DIR="$run/runtime"
	export VIVARIUM_CONFIG_DIR="$run/config"
	export VIVARIUM_DATA_DIR="$run/data"
	export VIVARIUM_TEST_RUN_DIR="$run"
	export VIVARIUM_TEST_RULES_DIR="$run/polkit/etc-rules.d"
	export VIVARIUM_TEST_ACTIONS_DIR="$run/polkit/actions"
	export VIVARIUM_TEST_SERVICES_DIR="$run/services"
	export VIVARIUM_TEST_DAEMON="$builddir/service/vivariumd"

	start_bus "$run" || die "dbus-daemon did not start"
	export VIVARIUM_TEST_BUS_PID="$bus_pid"

	"$@"
	rc=$?
	if [ $rc -ne 0 ] && [ -s "$run/bus.log" ]; then
		echo "--- $PROG: dbus-daemon and activated services' output ---" >&2
		cat "$run/bus.log" >&2
	fi
	exit $rc
}

# ---------------------------------------------------------------------------
# Outer part: on the host. Owns the temp dir and the test user.
# ---------------------------------------------------------------------------

run_dir=
test_user=

outer_teardown () {
	if [ -n "$test_user" ]; then
		userdel "$test_user" >/dev/null 2>&1 || echo "$PROG: could not delete user $test_user" >&2
		test_user=
	fi
	if [ -n "$run_dir" ] && [ -d "$run_dir" ]; then
		rm -rf --one-file-system "$run_dir"
		run_dir=
	fi
}

outer () {
	local builddir policy rc

	[ "$(id -u)" = 0 ] || die "must run as root (it uses unshare, bind mounts and useradd); run it with sudo"
	[ $# -ge 3 ] || usage
	builddir=$(realpath -e "$1") || die "no build directory $1"
	shift

	for tool in unshare useradd userdel setpriv gdbus mountpoint "$POLKITD"; do
		command -v "$tool" >/dev/null || die "missing $tool"
	done
	DBUS_DAEMON=$(command -v dbus-daemon) || die "missing dbus-daemon"
	[ -x "$builddir/service/vivariumd" ] || die "no daemon at $builddir/service/vivariumd (build first)"
	policy=$builddir/polkit/$POLICY_NAME
	[ -r "$policy" ] || die "no polkit policy at $policy (build first)"

	trap 'outer_teardown' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	run_dir=$(mktemp -d /tmp/vivarium-integ.XXXXXXXX) || die "mktemp failed"
	# polkitd (as user polkitd) and the test user must reach files inside.
	chmod 755 "$run_dir"

	test_user="vivt-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	useradd --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--user-group --comment "vivarium integration test" "$test_user" \
		|| { test_user=; die "useradd failed"; }
	export VIVARIUM_TEST_USER="$test_user"
	export DBUS_DAEMON

	# --kill-child: if we are killed, the namespace's PID 1 goes too, and with
	# it every process in the namespace. --net: the daemon programs its
	# nftables guard table, which must land in a namespace of our own.
	unshare --mount --propagation private --pid --net --fork --mount-proc --kill-child \
		"$(realpath "$0")" --inner "$builddir" "$run_dir" "$policy" "$@"
	rc=$?
	exit $rc
}

if [ "${1-}" = "--inner" ]; then
	shift
	inner "$@"
else
	outer "$@"
fi
