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
