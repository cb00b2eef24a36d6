#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Inside the systemd test host (run by run-app-system.sh with this script):
# the app, as root, with another host added by name and reached over a real
# sshd (tests/system/remote-lib.sh: a network namespace on a veth pair that
# knows this host as vivarium-remote-test; only the app's ssh runs in it,
# through $VIVARIUM_SSH). The daemon "there" is this host's own, reached a
# second way: what tells them apart is the link (ssh, sshd's log, the
# window's name, a reconnect), not the data. test-app-remote.py drives it:
# Add Host… adds it, it shows the session vivariumctl started over SSH
# beforehand and the report of a task handed over so, verified, a host ssh cannot reach shows its status page while this
# computer still works, and a killed ssh comes back by itself.
set -u
src=$(dirname -- "$(readlink -f -- "$0")")/../..
# shellcheck source=SCRIPTDIR/../system/lib.sh
source "$src/tests/system/lib.sh"
# shellcheck source=SCRIPTDIR/../system/remote-lib.sh
source "$src/tests/system/remote-lib.sh"

readonly REMOTE=vivarium-remote-test
readonly DOWN=vivarium-down-test

require_systemd_host vivariumctl ip ssh ssh-keygen /usr/sbin/sshd systemd-stdio-bridge Xvfb "$PY"
build=${VIVARIUM_UI_BUILD:-$src/build}
export VIVARIUM_UI_APP=/usr/bin/vivarium
[ -x "$VIVARIUM_UI_APP" ] || VIVARIUM_UI_APP=$(command -v vivarium)

tmpd=$(mktemp -d /var/tmp/vivarium-app-remote.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

remote_setup "$tmpd" "$REMOTE" 2222
# A second name, on the namespace's own end of the veth where nothing
# listens: ssh's "Connection refused" at once, nothing leaves the veth.
printf '10.77.0.2 %s\n' "$DOWN" >> "/etc/netns/$remote_ns/hosts"
remote_keys root
remote_client
start_sshd host_a || bail_out "sshd did not start: $(cat "$sshd_dir/log" 2>/dev/null)"

# A session started over SSH before the app opens: the other host's data.
ctl () { vivariumctl --no-interaction "$@"; }
rctl () { there env VIVARIUM_SSH="$remote_dir/ssh" LC_ALL=C vivariumctl --no-interaction --host "root@$REMOTE" "$@"; }
out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $out"
out=$(ctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
session=$(rctl session start "$IMAGE" --memory 256 2>&1) || bail_out "session start over SSH: $session"
session=${session##*/}
at_exit ctl session stop "$session"
echo "# session $session started over SSH"
# And a task's signed report, over SSH too; the app verifies it against
# the key fingerprint the other host's daemon gives (over SSH: the same).
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
out=$(rctl project create remote --quota 64M 2>&1) || bail_out "project create over SSH: $out"
printf '#!/bin/sh\nvivariumctl worker finish --summary "Nothing to do." --verify true\n' > "$tmpd/work.sh"
task=$(rctl task submit remote "$IMAGE" --script "$tmpd/work.sh" 2>&1) || bail_out "task submit over SSH: $task"
out=$(rctl task wait "${task##*/}" --timeout 300 2>&1) || bail_out "task wait over SSH: $out"
fpr=$(rctl status --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["KeyFingerprint"])') ||
  bail_out "no key fingerprint over SSH"
echo "# task ${task##*/} done over SSH; the key's fingerprint there: $fpr"

# The test stops this sshd (by its PID) and starts its own on the same configuration.
export VIVARIUM_SSH=$remote_dir/ssh-there
export VIVARIUM_UI_REMOTE=$REMOTE VIVARIUM_UI_DOWN=$DOWN VIVARIUM_UI_SESSION=$session VIVARIUM_UI_FINGERPRINT=$fpr
export VIVARIUM_UI_SSHD_CONFIG=$sshd_dir/config VIVARIUM_UI_SSHD_LOG=$sshd_dir/log VIVARIUM_UI_SSHD_PID=$sshd_pid
export VIVARIUM_UI_EMIT_PNG=1
mkdir -m 0777 "$tmpd/logs"
VIVARIUM_UI_REAL_SYSTEM_BUS=1 VIVARIUM_UI_SCRIPT=$src/tests/ui/test-app-remote.py \
  "$src/tests/ui/run-ui-test.sh" "$build" "$src" "$tmpd/logs"
