# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Helpers for the system test scripts, which run as root inside the throwaway
# host that tests/system/vivarium-test-host boots.  Output is TAP.
#
#   source "$(dirname "$0")/lib.sh"
#   plan 3                       # optional; done_testing prints it otherwise
#   assert_eq "0.1.0" "$v" "Version is the project version"
#   assert_dbus_error org.vivarium.Vivarium1.Error.NotAuthorized -- runuser ...
#   done_testing                 # last line: exits 1 if anything failed
#
# Everything a helper creates (users, polkit rules, files) is undone when the
# script exits, whatever the reason; register your own with `at_exit CMD...`.

set -u
set -o pipefail

# --- the daemon, its bus and its files ----------------------------------------
# One definition of what the tests talk to (a test's own constants stay in it).
# shellcheck disable=SC2034  # the constants are the sourcing tests'
{
  readonly BUS=org.vivarium.Vivarium1
  readonly OBJ=/org/vivarium/Vivarium1
  readonly IFACE=org.vivarium.Vivarium1
  readonly ERR=$IFACE.Error
  readonly MGR=$IFACE.Manager
  readonly GUARD=$IFACE.Guard
  readonly JOB_IFACE=$IFACE.Job
  readonly UNIT=vivariumd.service
  readonly GW=vivarium-gateway.service
  readonly STATE=/var/lib/vivarium
  readonly RUNTIME=/run/vivarium
  readonly IMAGE=tiny
  readonly MODEL=vivarium-test-model
  readonly MIB=$((1024 * 1024))
  readonly PY=/usr/bin/python3
  # The source tree (this file is its tests/system/lib.sh).
  SRC=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")/../.." && pwd -P)
  readonly SRC
}

_tap_count=0
_tap_failed=0
_tap_planned=
_cleanups=()

at_exit () {  # CMD...: run at exit, last registered first
  local quoted
  printf -v quoted '%q ' "$@"
  _cleanups+=("$quoted")
}

_run_cleanups () {
  local rc=$? i
  for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do
    eval "${_cleanups[$i]}" >/dev/null 2>&1 || diag "cleanup failed: ${_cleanups[$i]}"
  done
  exit "$rc"
}
trap _run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

diag () { printf '# %s\n' "$*" | sed '2,$s/^/# /'; }

plan () { _tap_planned=$1; echo "1..$1"; }

ok () { _tap_count=$((_tap_count + 1)); echo "ok $_tap_count - $*"; }

not_ok () {  # DESCRIPTION [DIAGNOSTIC...]
  local desc=$1
  shift
  _tap_count=$((_tap_count + 1))
  _tap_failed=$((_tap_failed + 1))
  echo "not ok $_tap_count - $desc"
  local line
  for line in "$@"; do diag "$line"; done
}

# Stop here: a step the rest depends on failed.
bail_out () { echo "Bail out! $*"; exit 1; }

# require_systemd_host TOOL...: the preamble of every system test: root, in
# the host vivarium-test-host booted (systemd PID 1), each TOOL on PATH (or
# an absolute path that exists); bails out with a sentence otherwise.
require_systemd_host () {
  local tool
  [ "$(id -u)" = 0 ] || bail_out "must run as root"
  [ -d /run/systemd/system ] || bail_out "systemd is not PID 1 here; run me through tests/system/vivarium-test-host"
  for tool in "$@"; do
    command -v "$tool" >/dev/null || bail_out "$tool is not installed"
  done
}

# For retry_until: each try reads afresh (an argument in "$(…)" is read
# once, before the first try, and the wait would wait for nothing).
unit_unloaded () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" != loaded ]; }
owned_by_root () { [ "$(stat -c %u "$1" 2>/dev/null)" = 0 ]; }

done_testing () {
  if [ -z "$_tap_planned" ]; then
    echo "1..$_tap_count"
  elif [ "$_tap_planned" != "$_tap_count" ]; then
    diag "planned $_tap_planned tests but ran $_tap_count"
    exit 1
  fi
  [ "$_tap_failed" = 0 ] || { diag "$_tap_failed of $_tap_count failed"; exit 1; }
  exit 0
}

assert_eq () {  # EXPECTED ACTUAL DESCRIPTION
  if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3" "expected: '$1'" "actual:   '$2'"; fi
}

assert_ne () {  # UNEXPECTED ACTUAL DESCRIPTION
  if [ "$1" != "$2" ]; then ok "$3"; else not_ok "$3" "must not be: '$1'"; fi
}

assert_contains () {  # HAYSTACK NEEDLE DESCRIPTION
  case $1 in
    *"$2"*) ok "$3" ;;
    *) not_ok "$3" "'$2' not found in:" "$1" ;;
  esac
}

assert_not_contains () {  # HAYSTACK NEEDLE DESCRIPTION
  case $1 in
    *"$2"*) not_ok "$3" "'$2' found in:" "$1" ;;
    *) ok "$3" ;;
  esac
}

# assert_success DESCRIPTION -- CMD...: CMD exits 0 (its output is shown on failure)
assert_success () {
  local desc=$1 out rc
  shift
  [ "${1:-}" = -- ] && shift
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" = 0 ]; then ok "$desc"; else not_ok "$desc" "exit status $rc: $*" "$out"; fi
}

# assert_dbus_error NAME -- CMD...: CMD fails and its stderr names the D-Bus error.
# Use a client that prints the error name (gdbus, dbus-send, vivariumctl);
# busctl prints only the message.
assert_dbus_error () {
  local name=$1 err rc
  shift
  [ "${1:-}" = -- ] && shift
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" = 0 ]; then
    not_ok "refused with $name: $*" "the call succeeded"
  else
    assert_contains "$err" "$name" "refused with $name: $*"
  fi
}

# retry_until TRIES DELAY CMD...: for state that changes asynchronously (polkitd
# reloading its rules, a unit stopping); bounded, and the caller still asserts.
retry_until () {
  local tries=$1 delay=$2 i
  shift 2
  for ((i = 0; i < tries; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep "$delay"
  done
  return 1
}

run_as_user () {  # USER CMD...: as that user, with a clean login environment
  local user=$1
  shift
  runuser -u "$user" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$@"
}

# create_test_user VAR: create a new unprivileged user (no home, no login
# shell, no groups beyond its own), store its name in VAR; deleted at exit.
# (Not a command substitution: the cleanup must be registered in this shell.)
create_test_user () {
  local name
  name=vt$$x$((_tap_count + RANDOM))
  useradd --no-create-home --shell /usr/sbin/nologin --user-group "$name" >&2 || return 1
  at_exit userdel "$name"
  printf -v "$1" '%s' "$name"
}

# write_polkit_rule NAME JS: install /etc/polkit-1/rules.d/NAME.rules, removed at exit.
write_polkit_rule () {
  local path=/etc/polkit-1/rules.d/$1.rules
  [ -e "$path" ] && { diag "$path already exists"; return 1; }
  mkdir -p /etc/polkit-1/rules.d || return 1
  printf '%s\n' "$2" > "$path" || return 1
  at_exit rm -f "$path"
}

remove_polkit_rule () { rm -f "/etc/polkit-1/rules.d/$1.rules"; }

# journal_at_exit [UNIT...]: when anything failed, the end of these units'
# journal (vivariumd.service unless named) is in the TAP output at exit.
# Cleanups run with stdout on /dev/null: the output is kept apart now.
journal_at_exit () {
  exec {_journal_fd}>&1
  _journal_units=("${@:-vivariumd.service}")
  at_exit _dump_journal
}
_dump_journal () {
  local args=() unit
  [ "${_tap_failed:-0}" = 0 ] && return 0
  for unit in "${_journal_units[@]}"; do args+=(-u "$unit"); done
  diag "journal (${_journal_units[*]}):" >&"$_journal_fd"
  diag "$(journalctl --no-pager -o cat "${args[@]}" 2>&1 | grep -v '^DNS relay' | tail -n 80)" >&"$_journal_fd"
}

# --- a pretend internet ------------------------------------------------------
# pretend_internet_up DIR: a network namespace (PI_NS) joined to this host by
# the veth pair vt-inet0 (here, 203.0.113.1/24) / vt-inet1 (there,
# 203.0.113.10 and .11): TEST-NET-3, outside the guard's deny list, and
# private to the test host. Inside it pretend-internet.py serves HTTP (80)
# and HTTPS (443, a certificate from a CA made here for allowed.test,
# other.test and big.test: PI_CA) with a token page (/token answers
# "$PI_TOKEN scheme=… host=… sni=… addr=…") and a 4 MiB /big, and a DNS
# server on 203.0.113.10:53 that logs every name it is asked for
# ($PI_DIR/dns.log; connections.log and requests.log say what the web
# servers saw, auth.log the Authorization header of each request). This
# host's /etc/hosts gets allowed.test, other.test, big.test → 203.0.113.10
# and rebind.test → 10.0.0.5 (a denied range), its
# /etc/resolv.conf names only the logger; both are restored by
# pretend_internet_down, which the EXIT trap runs too. Start vivariumd after
# this (its guard reads the host's addresses, its DNS relay resolv.conf, at
# start). Nothing leaves the test host: every address lives on its veth.
readonly PI_NS=vt-inet
readonly PI_LINK=vt-inet0
readonly PI_PEER=vt-inet1
readonly PI_HOST_ADDR=203.0.113.1
readonly PI_ADDR=203.0.113.10
readonly PI_ADDR2=203.0.113.11
readonly PI_DENIED_ADDR=10.0.0.5
PI_DIR=
PI_CA=
PI_TOKEN=
_pi_pid=
_pi_start=
_pi_netns=0
_pi_link=0
_pi_files=0

_pi_require () {
  local tool
  for tool in ip nsenter openssl getent "$PY"; do
    command -v "$tool" >/dev/null || bail_out "the pretend internet needs $tool, which is not installed"
  done
  "$PY" -c 'import ssl, http.server, socketserver' 2>/dev/null ||
    bail_out "the pretend internet needs $PY with its ssl module"
  ip netns list >/dev/null 2>&1 || bail_out "ip netns does not work here"
  [ -e "/run/netns/$PI_NS" ] && bail_out "a network namespace $PI_NS exists already: not ours, left alone"
  ip link show dev "$PI_LINK" >/dev/null 2>&1 && bail_out "a link $PI_LINK exists already: not ours, left alone"
  return 0
}

# A throwaway CA and a server certificate it signs, with the openssl CLI.
_pi_certificates () {
  local d=$1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Vivarium pretend internet CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1 &&
  openssl req -newkey rsa:2048 -nodes -subj "/CN=allowed.test" \
    -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1 &&
  printf 'subjectAltName=DNS:allowed.test,DNS:other.test,DNS:big.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    > "$d/server.ext" &&
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/server.ext" -out "$d/server.crt" >/dev/null 2>&1
}

# Each file is saved as it is (a symlink stays one) and replaced by a new file.
_pi_replace_file () {  # PATH CONTENT
  rm -f -- "$1" && printf '%s' "$2" > "$1"
}

pretend_internet_up () {  # DIR
  local pihosts
  _pi_require
  PI_DIR=$1/pretend-internet
  mkdir -p "$PI_DIR" || bail_out "cannot create $PI_DIR"
  PI_CA=$PI_DIR/ca.crt
  PI_TOKEN=vivarium-pretend-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  _pi_certificates "$PI_DIR" || bail_out "openssl could not make the pretend internet's certificates"
  at_exit pretend_internet_down

  ip netns add "$PI_NS" || bail_out "cannot create the network namespace $PI_NS"
  _pi_netns=1
  ip link add "$PI_LINK" type veth peer name "$PI_PEER" netns "$PI_NS" || bail_out "cannot create the veth $PI_LINK"
  _pi_link=1
  ip addr add "$PI_HOST_ADDR/24" dev "$PI_LINK" &&
  ip link set "$PI_LINK" up &&
  ip -n "$PI_NS" link set lo up &&
  ip -n "$PI_NS" addr add "$PI_ADDR/24" dev "$PI_PEER" &&
  ip -n "$PI_NS" addr add "$PI_ADDR2/24" dev "$PI_PEER" &&
  ip -n "$PI_NS" link set "$PI_PEER" up || bail_out "cannot configure the veth pair $PI_LINK/$PI_PEER"

  # nsenter execs the server itself: $! is its PID.
  nsenter --net="/run/netns/$PI_NS" "$PY" "$(dirname -- "${BASH_SOURCE[0]}")/pretend-internet.py" \
    "$PI_DIR" "$PI_TOKEN" "$PI_DIR/server.crt" "$PI_DIR/server.key" "$PI_ADDR" \
    allowed.test="$PI_ADDR" other.test="$PI_ADDR" big.test="$PI_ADDR" rebind.test="$PI_DENIED_ADDR" \
    > "$PI_DIR/server.out" 2>&1 &
  _pi_pid=$!
  _pi_start=$(awk '{ print $22 }' "/proc/$_pi_pid/stat" 2>/dev/null)
  retry_until 80 0.25 grep -qx ready "$PI_DIR/server.out" ||
    bail_out "the pretend internet's servers did not start: $(head -c 1000 "$PI_DIR/server.out")"

  cp -a /etc/hosts "$PI_DIR/hosts.saved" && cp -a /etc/resolv.conf "$PI_DIR/resolv.conf.saved" ||
    bail_out "cannot save /etc/hosts and /etc/resolv.conf"
  _pi_files=1
  pihosts=$(cat "$PI_DIR/hosts.saved")
  pihosts+=$'\n'"$PI_ADDR allowed.test other.test big.test"$'\n'"$PI_DENIED_ADDR rebind.test"$'\n'
  _pi_replace_file /etc/hosts "$pihosts" &&
  _pi_replace_file /etc/resolv.conf "nameserver $PI_ADDR"$'\n' || bail_out "cannot write /etc/hosts and /etc/resolv.conf"
}

# The pretend internet's own logs: pi_log NAME prints $PI_DIR/NAME.log.
pi_log () { cat "$PI_DIR/$1.log" 2>/dev/null; }
# pi_dns_asked NAME: whether the DNS logger was asked for NAME (any type).
pi_dns_asked () { grep -q -i "^$1 " "$PI_DIR/dns.log" 2>/dev/null; }

pretend_internet_down () {
  local i
  if [ -n "$_pi_pid" ]; then
    # Only the process started above (same PID, same start time).
    if [ "$(awk '{ print $22 }' "/proc/$_pi_pid/stat" 2>/dev/null)" = "$_pi_start" ]; then
      kill -TERM "$_pi_pid" 2>/dev/null
      for ((i = 0; i < 50; i++)); do
        kill -0 "$_pi_pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$_pi_pid" 2>/dev/null
    fi
    wait "$_pi_pid" 2>/dev/null
    _pi_pid=
  fi
  if [ "$_pi_files" = 1 ]; then
    rm -f /etc/hosts /etc/resolv.conf
    cp -a "$PI_DIR/hosts.saved" /etc/hosts
    cp -a "$PI_DIR/resolv.conf.saved" /etc/resolv.conf
    _pi_files=0
  fi
  if [ "$_pi_link" = 1 ]; then
    ip link del dev "$PI_LINK" 2>/dev/null
    _pi_link=0
  fi
  if [ "$_pi_netns" = 1 ]; then
    ip netns del "$PI_NS"
    _pi_netns=0
  fi
  return 0
}
