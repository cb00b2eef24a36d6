#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivariumctl's promises that hold without a daemon: usage errors exit 2 with
# one line, an unreachable bus exits 1 with one line naming a D-Bus error,
# and --help lists every verb. The system bus address points at a path that
# does not exist, so nothing here can reach a real bus.
set -u

ctl=${1:-${VIVARIUMCTL:-}}
if [ -z "$ctl" ] || [ ! -x "$ctl" ]; then
  echo "FAIL: vivariumctl binary not given or not executable: '${ctl}'" >&2
  echo "usage: $0 PATH/TO/vivariumctl" >&2
  exit 1
fi

export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/vivarium-test-bus
export LC_ALL=C.UTF-8
unset DBUS_SESSION_BUS_ADDRESS

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
checks=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run EXPECTED_STATUS ARGS... : runs vivariumctl, checks the status, that
# stderr is exactly one line starting with "vivariumctl: " and that stdout
# is empty.
run() {
  local want=$1 got lines
  shift
  checks=$((checks + 1))
  "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  got=$?
  lines=$(wc -l <"$tmp/err")
  if [ "$got" -ne "$want" ]; then
    fail "vivariumctl $* exited $got, expected $want; stderr: $(cat "$tmp/err")"
    return
  fi
  if [ "$lines" -ne 1 ]; then
    fail "vivariumctl $* wrote $lines lines on stderr, expected 1:"$'\n'"$(cat "$tmp/err")"
    return
  fi
  if ! grep -q '^vivariumctl: ' "$tmp/err"; then
    fail "vivariumctl $*: stderr does not start with 'vivariumctl: ': $(cat "$tmp/err")"
  fi
  if [ -s "$tmp/out" ]; then
    fail "vivariumctl $*: unexpected output on stdout: $(cat "$tmp/out")"
  fi
}

# usage ARGS... : a usage error (exit 2).
usage() { run 2 "$@"; }

# nobus ARGS... : well-formed, fails because no bus is reachable (exit 1),
# and says so with the D-Bus error name scripts can match.
nobus() {
  run 1 "$@"
  if ! grep -q '\[org\.freedesktop\.DBus\.Error\.NoServer\]$' "$tmp/err"; then
    fail "vivariumctl $*: no [org.freedesktop.DBus.Error.NoServer] at the end: $(cat "$tmp/err")"
  fi
}

echo data >"$tmp/disk.img"

# --- usage errors: caught before the bus is touched ---
usage
usage --frobnicate
usage frobnicate
usage image
usage image frobnicate
usage status extra
usage host pick
usage --host a host pick b
usage host pick good -oProxyCommand=sh
usage host pick "a b"
usage image list extra
usage image build tiny
usage image build tiny name extra
usage image import onlyname
usage image freeze
usage image delete a b
usage image list --frobnicate
usage session start
usage session start tiny --memory abc
usage session start tiny --memory 5
usage session start tiny --memory 99999999
usage session start tiny --cpus 0
usage session start tiny --cpus -1
usage session start tiny --timeout x
usage session exec abc
usage session exec abc ls
usage session exec abc --
usage session exec abc --timeout 0 -- true
usage session exec abc --env NOEQUALS -- true
usage session exec abc --cwd relative/dir -- true
usage session exec -- true
usage session cp a b
usage session cp abc:/x def:/y
usage session cp abc:relative local
usage session screenshot abc
usage session log
usage session resume
usage session stop
usage guard status extra
usage guard selftest extra
usage guard frobnicate

# --- no bus reachable ---
nobus status
nobus --json status
nobus image list
nobus image recipes
nobus image build tiny mine
nobus image import mine "$tmp/disk.img"
nobus image freeze mine
nobus image verify mine
nobus image delete mine
nobus session list --json
nobus session start tiny --memory 512 --cpus 2 --timeout 60
nobus session exec abc --env A=B --cwd /tmp -- sh -c 'exit 3'
nobus session cp abc:/etc/hostname "$tmp/hostname"
nobus session cp "$tmp/disk.img" abc:/tmp/
nobus session screenshot abc "$tmp/shot.png"
nobus session log abc
nobus session resume abc
nobus session stop abc
nobus guard status
nobus --no-interaction guard selftest --image tiny --junit "$tmp/junit.xml"
if [ -e "$tmp/junit.xml" ]; then
  fail "guard selftest wrote a JUnit file although it never ran"
fi

# A local file that cannot be opened is an error (1), found before the bus.
run 1 image import mine /nonexistent/disk.qcow2
if ! grep -q '/nonexistent/disk.qcow2' "$tmp/err"; then
  fail "image import of a missing file does not name the file: $(cat "$tmp/err")"
fi

# --- help and version ---
checks=$((checks + 1))
if ! "$ctl" --help >"$tmp/help" 2>"$tmp/err"; then
  fail "vivariumctl --help exited non-zero: $(cat "$tmp/err")"
fi
for verb in "status" \
            "image list" "image build" "image import" "image freeze" "image verify" \
            "image delete" "image recipes" \
            "session list" "session start" "session exec" "session cp" \
            "session screenshot" "session log" "session resume" "session stop" \
            "guard status" "guard selftest"; do
  checks=$((checks + 1))
  if ! grep -q "^  $verb\b" "$tmp/help"; then
    fail "vivariumctl --help does not list '$verb'"
  fi
done
for option in --no-interaction --json --version; do
  checks=$((checks + 1))
  grep -q -- "$option" "$tmp/help" || fail "vivariumctl --help does not mention $option"
done

checks=$((checks + 1))
if ! "$ctl" session exec --help >"$tmp/help" 2>"$tmp/err"; then
  fail "vivariumctl session exec --help exited non-zero: $(cat "$tmp/err")"
fi
for option in --env --cwd --timeout --no-interaction; do
  grep -q -- "$option" "$tmp/help" || fail "session exec --help does not mention $option"
done

checks=$((checks + 1))
"$ctl" --version >"$tmp/out" 2>"$tmp/err"
if [ $? -ne 0 ] || ! grep -Eq '^vivariumctl [0-9]+\.[0-9]+' "$tmp/out"; then
  fail "vivariumctl --version: $(cat "$tmp/out" "$tmp/err")"
fi

# config show: every value with the layer it comes from; a drop-in wins
# key by key, an egress group is replaced whole (its old Deny= is gone).
mkdir -p "$tmp/data" "$tmp/etc/conf.d"
printf '[Daemon]\nIdleTimeoutSec=60\nReadGrantSec=300\n[EgressGroup g]\nAllow=a.example\nDeny=b.example\n' >"$tmp/data/defaults.conf"
printf '[Daemon]\nIdleTimeoutSec=5\n' >"$tmp/etc/vivarium.conf"
printf '[EgressGroup g]\nAllow=c.example\n[Daemon]\nReadGrantSec=9\n' >"$tmp/etc/conf.d/50-x.conf"
checks=$((checks + 1))
if ! VIVARIUM_DATA_DIR=$tmp/data VIVARIUM_CONFIG_DIR=$tmp/etc "$ctl" config show >"$tmp/out" 2>"$tmp/err"; then
  fail "config show exited non-zero: $(cat "$tmp/err")"
fi
for want in "[Daemon] IdleTimeoutSec=5	# $tmp/etc/vivarium.conf" \
            "[Daemon] ReadGrantSec=9	# $tmp/etc/conf.d/50-x.conf" \
            "[EgressGroup g] Allow=c.example	# $tmp/etc/conf.d/50-x.conf"; do
  grep -qxF -- "$want" "$tmp/out" || fail "config show lacks the line: $want (got: $(cat "$tmp/out"))"
done
grep -q 'Deny=b.example' "$tmp/out" && fail "config show kept a replaced group's Deny=: $(cat "$tmp/out")"
# A layer that cannot be parsed is named, not skipped.
printf 'not a key file\n' >"$tmp/etc/conf.d/60-bad.conf"
VIVARIUM_DATA_DIR=$tmp/data VIVARIUM_CONFIG_DIR=$tmp/etc run 1 config show
grep -q "60-bad.conf" "$tmp/err" || fail "config show does not name the bad layer: $(cat "$tmp/err")"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures in $checks checks" >&2
  exit 1
fi
echo "all $checks checks passed"
