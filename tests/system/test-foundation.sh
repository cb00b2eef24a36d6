#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The foundation on a real systemd host: D-Bus activation through the unit, the
# Manager interface, the unit's sandbox as systemd applies it and as the
# process really has it, polkit deciding, vivariumctl, and exit on idle.
# Runs inside the host booted by vivarium-test-host (see meson.build here):
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-foundation.sh

# Functions here are called through retry_until and assert_*; user/other are
# set by create_test_user.
# shellcheck disable=SC2317,SC2154
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly NOT_AUTHORIZED=org.vivarium.Vivarium1.Error.NotAuthorized
readonly READ_STATUS=org.vivarium.vivarium1.read-status
readonly DAEMON=/usr/libexec/vivariumd
readonly TEST_CONF=/etc/vivarium/conf.d/50-test.conf

require_systemd_host busctl gdbus runuser useradd
[ -x "$DAEMON" ] || bail_out "$DAEMON is not installed"

# busctl prints only an error's message; gdbus prints its name, which is what
# the refusal tests assert.
list_sessions () { busctl call "$BUS" "$OBJ" "$MGR" ListSessions; }
gdbus_list_sessions () {
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions" "$@"
}
unit_prop () { systemctl show -P "$1" "$UNIT"; }
unit_is_inactive () { [ "$(systemctl is-active "$UNIT")" = inactive ]; }

refused_as () {  # USER: the call fails with NotAuthorized
  local err
  err=$(run_as_user "$1" gdbus call --system --dest "$BUS" --object-path "$OBJ" \
          --method "$MGR.ListSessions" 2>&1 >/dev/null) && return 1
  case $err in *"$NOT_AUTHORIZED"*) return 0 ;; *) return 1 ;; esac
}

# --- 1. activation through systemd -------------------------------------------

mkdir -p "$(dirname "$TEST_CONF")" || bail_out "cannot create $(dirname "$TEST_CONF")"
[ -e "$TEST_CONF" ] && bail_out "$TEST_CONF already exists"
printf '[Daemon]\nIdleTimeoutSec=3\n' > "$TEST_CONF" || bail_out "cannot write $TEST_CONF"
at_exit rm -f "$TEST_CONF"

assert_ne active "$(systemctl is-active "$UNIT")" "vivariumd is not running before the first call"

out=$(list_sessions 2>&1)
rc=$?
assert_eq 0 "$rc" "ListSessions as root succeeds (output: $out)"
assert_eq "ao 0" "$out" "a fresh host has no sessions"
assert_eq active "$(systemctl is-active "$UNIT")" "the call started vivariumd.service (D-Bus activation through systemd)"
pid=$(unit_prop MainPID)
assert_ne 0 "${pid:-0}" "vivariumd.service has a main process (MainPID=$pid)"
assert_eq "$DAEMON" "$(readlink "/proc/$pid/exe" 2>&1)" "the unit's main process is $DAEMON"

# --- 2. the Manager interface ------------------------------------------------

introspection=$(busctl introspect "$BUS" "$OBJ" "$MGR" 2>&1)
for member in ListSessions ListImages ListProjects; do
  if grep -Eq "^\.$member +method " <<<"$introspection"; then
    ok "introspection shows method $MGR.$member"
  else
    not_ok "introspection shows method $MGR.$member" "$introspection"
  fi
done
if grep -Eq '^\.Version +property +s ' <<<"$introspection"; then
  ok "introspection shows property $MGR.Version of type s"
else
  not_ok "introspection shows property $MGR.Version of type s" "$introspection"
fi

if [ -n "${VIVARIUM_TEST_VERSION:-}" ]; then
  version=$VIVARIUM_TEST_VERSION
  diag "expected version from VIVARIUM_TEST_VERSION (the meson project version)"
else
  version=$("$DAEMON" --version)
  diag "expected version from $DAEMON --version (VIVARIUM_TEST_VERSION is not set)"
fi
assert_eq "s \"$version\"" "$(busctl get-property "$BUS" "$OBJ" "$MGR" Version 2>&1)" \
  "Version property is the project version $version"

# --- 3. the sandbox ----------------------------------------------------------

assert_eq strict "$(unit_prop ProtectSystem)" "ProtectSystem=strict"
assert_eq yes "$(unit_prop ProtectHome)" "ProtectHome=yes"
assert_eq yes "$(unit_prop PrivateTmp)" "PrivateTmp=yes"
assert_eq yes "$(unit_prop NoNewPrivileges)" "NoNewPrivileges=yes"
caps=$(unit_prop CapabilityBoundingSet)
assert_ne "" "$caps" "CapabilityBoundingSet is not empty"
assert_not_contains "$caps" cap_sys_module "CapabilityBoundingSet has no cap_sys_module"
families=$(unit_prop RestrictAddressFamilies)
assert_ne "" "$families" "RestrictAddressFamilies is set"
assert_not_contains "$families" "~" "RestrictAddressFamilies is an allow list"
filter=$(unit_prop SystemCallFilter)
assert_ne "" "$filter" "SystemCallFilter is set"
# An allow list built from @system-service leaves these out.
for call in init_module finit_module kexec_load reboot swapon pivot_root; do
  assert_not_contains " $filter " " $call " "SystemCallFilter does not allow $call"
done

normalize () {  # KEY VALUE: how systemctl show spells what the unit file says
  local key=$1 value=$2
  case $key in
    CapabilityBoundingSet|AmbientCapabilities|RestrictAddressFamilies|RestrictNamespaces|ReadWritePaths)
      tr ' ' '\n' <<<"${value,,}" | sed '/^$/d' | sort -u | tr '\n' ' ' ;;
    SystemCallErrorNumber)
      case $value in EPERM) echo 1 ;; EACCES) echo 13 ;; ENOSYS) echo 38 ;; *) echo "$value" ;; esac ;;
    *)
      case ${value,,} in
        yes|true|on|1) echo yes ;;
        no|false|off|0) echo no ;;
        *) echo "$value" ;;
      esac ;;
  esac
}

# Every hardening option the installed unit sets must be in effect as written.
unit_text=$(systemctl cat "$UNIT" 2>&1)
declare -A unit_sets=()
while IFS='=' read -r key value; do
  case $key in
    ProtectSystem|ProtectHome|PrivateTmp|PrivateMounts|PrivateDevices|PrivateNetwork|PrivateUsers|\
    NoNewPrivileges|ProtectKernelModules|ProtectKernelLogs|ProtectKernelTunables|ProtectClock|\
    ProtectHostname|ProtectControlGroups|ProtectProc|ProcSubset|RestrictRealtime|RestrictSUIDSGID|\
    LockPersonality|MemoryDenyWriteExecute|UMask|DevicePolicy|KeyringMode|SystemCallArchitectures|\
    SystemCallErrorNumber|RemoveIPC|CapabilityBoundingSet|AmbientCapabilities|\
    RestrictAddressFamilies|RestrictNamespaces|ReadWritePaths)
      unit_sets[$key]="${unit_sets[$key]:+${unit_sets[$key]} }$value" ;;
  esac
done < <(grep -E '^[A-Za-z]+=' <<<"$unit_text")
if [ "${#unit_sets[@]}" -lt 10 ]; then
  not_ok "the installed unit sets the hardening options" "$unit_text"
fi
for key in $(printf '%s\n' "${!unit_sets[@]}" | sort); do
  assert_eq "$(normalize "$key" "${unit_sets[$key]}")" "$(normalize "$key" "$(unit_prop "$key")")" \
    "in effect as the unit says: $key=${unit_sets[$key]}"
done

# Read the sandbox back from the running process, not from the configuration.
# A call first: the daemon then stays for at least one idle period (3 s).
list_sessions >/dev/null 2>&1
pid=$(unit_prop MainPID)
status=$(cat "/proc/$pid/status" 2>&1)
usr_options=$(nsenter -t "$pid" -m -- findmnt -n -o OPTIONS -T /usr 2>&1)
state_options=$(nsenter -t "$pid" -m -- findmnt -n -o OPTIONS -T /var/lib/vivarium 2>&1)
[ "$(unit_prop MainPID)" = "$pid" ] || diag "the daemon changed while it was inspected; expect failures below"
assert_eq 1 "$(awk '/^NoNewPrivs:/ { print $2 }' <<<"$status")" "the daemon process has no_new_privs"
assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' <<<"$status")" "the daemon process runs under a seccomp filter"
capbnd=$(awk '/^CapBnd:/ { print $2 }' <<<"$status")
cap_sys_module=16
if [ -n "$capbnd" ] && (( (16#$capbnd >> cap_sys_module & 1) == 0 )); then
  ok "the daemon process cannot regain CAP_SYS_MODULE (CapBnd $capbnd)"
else
  not_ok "the daemon process cannot regain CAP_SYS_MODULE" "CapBnd: '$capbnd'"
fi
assert_eq ro "${usr_options%%,*}" "/usr is read-only in the daemon's mount namespace"
assert_eq rw "${state_options%%,*}" "/var/lib/vivarium is writable in the daemon's mount namespace"

# --- 4. polkit decides ---------------------------------------------------------

assert_success "root may ListSessions (gdbus)" -- gdbus_list_sessions
create_test_user user || bail_out "cannot create a test user"
create_test_user other || bail_out "cannot create a second test user"
assert_dbus_error "$NOT_AUTHORIZED" -- run_as_user "$user" \
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions"
# With no authentication agent, allowing interactive authorization changes nothing.
assert_dbus_error "$NOT_AUTHORIZED" -- run_as_user "$user" \
  gdbus call --system --interactive --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions"

rule=50-vivarium-test-$user
write_polkit_rule "$rule" "polkit.addRule(function(action, subject) {
  if (action.id == \"$READ_STATUS\" && subject.user == \"$user\")
    return polkit.Result.YES;
});" || bail_out "cannot write the polkit rule"
# polkitd reloads its rules when the directory changes; give it a moment.
if retry_until 40 0.5 run_as_user "$user" \
     gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions"; then
  ok "after a rule grants $READ_STATUS to $user, $user may ListSessions"
else
  not_ok "after a rule grants $READ_STATUS to $user, $user may ListSessions" \
    "$(run_as_user "$user" gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions" 2>&1)"
fi
assert_dbus_error "$NOT_AUTHORIZED" -- run_as_user "$other" \
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.ListSessions"

remove_polkit_rule "$rule"
if retry_until 40 0.5 refused_as "$user"; then
  ok "after the rule is removed, $user is refused again"
else
  not_ok "after the rule is removed, $user is refused again"
fi

# --- 5. vivariumctl -------------------------------------------------------------

if command -v vivariumctl >/dev/null; then
  out=$(vivariumctl status 2>&1)
  rc=$?
  assert_eq 0 "$rc" "vivariumctl status exits 0 as root"
  assert_contains "$out" "$version" "vivariumctl status shows the version"
  assert_contains "$out" running "vivariumctl status shows the state"
  for noun in session image project; do
    if grep -Eiq "${noun}s?\b.*[0-9]|[0-9].*${noun}" <<<"$out"; then
      ok "vivariumctl status shows a count of ${noun}s"
    else
      not_ok "vivariumctl status shows a count of ${noun}s" "$out"
    fi
  done
  err=$(run_as_user "$user" vivariumctl status 2>&1 >/dev/null)
  rc=$?
  assert_ne 0 "$rc" "vivariumctl status exits non-zero as an unprivileged user"
  if [ -n "$err" ] && [ "$(wc -l <<<"$err")" = 1 ]; then
    ok "... with one line on stderr"
  else
    not_ok "... with one line on stderr" "stderr: '$err'"
  fi
  assert_contains "$err" "$NOT_AUTHORIZED" "... naming the D-Bus error"
else
  not_ok "vivariumctl is installed"
fi

# --- 6. exit when idle, come back when called ----------------------------------

list_sessions >/dev/null 2>&1
first_pid=$(unit_prop MainPID)
# The exit comes IdleTimeoutSec (3 s) after the last call (VdIdle re-arms its
# timer on every call and reply; tests/unit/test-idle.c bounds it); allow 20.
if retry_until 40 0.5 unit_is_inactive; then
  ok "vivariumd exits after being idle (was $first_pid)"
else
  not_ok "vivariumd exits after being idle" "still $(systemctl is-active "$UNIT")"
fi
assert_eq success "$(unit_prop Result)" "... and it exited cleanly, not by a failure"
assert_eq 0 "$(unit_prop ExecMainStatus)" "... with exit status 0"
assert_success "a new call is answered" -- list_sessions
assert_eq active "$(systemctl is-active "$UNIT")" "the new call activated vivariumd again"
assert_ne 0 "$(unit_prop MainPID)" "the reactivated unit has a main process"

# --- 7. a Job outlives the daemon that ran it (defect 7) ----------------------

readonly JOBS_DIR=/var/lib/vivarium/jobs
job_prop () {  # PATH PROPERTY: the value alone (busctl's JSON "data")
  busctl --json=short get-property "$BUS" "$1" "$JOB_IFACE" "$2" 2>/dev/null | jq -r .data
}
job_finished () { [ "$(job_prop "$1" State)" != running ] && [ -n "$(job_prop "$1" State)" ]; }
job_step_moved () { local s; s=$(job_prop "$1" Step); [ -n "$s" ] && [ "$s" != Starting ]; }
build_job () {  # RECIPE NAME: prints the job's object path
  busctl --json=short call "$BUS" "$OBJ" "$MGR" BuildImage ss "$1" "$2" | jq -r '.data[0]'
}
# Only the daemon's own process, by its PID; systemd (Restart=on-failure) or
# the next call brings it back.
kill_daemon () {
  local pid
  pid=$(unit_prop MainPID)
  [ "${pid:-0}" != 0 ] || return 1
  kill -9 "$pid" && retry_until 40 0.25 sh -c "! kill -0 $pid 2>/dev/null"
}

command -v jq >/dev/null || bail_out "jq is not installed"
# A build that fails (no network here), then the daemon killed after it.
failed_job=$(build_job ubuntu job-fails)
assert_contains "$failed_job" /org/vivarium/Vivarium1/jobs/ "BuildImage returns a Job path ($failed_job)"
assert_eq build-image "$(job_prop "$failed_job" Operation)" "the Job's Operation is build-image"
if retry_until 240 0.5 job_finished "$failed_job"; then
  ok "the failing build's Job finished"
else
  not_ok "the failing build's Job finished" "State: $(job_prop "$failed_job" State)"
fi
failed_message=$(job_prop "$failed_job" ErrorMessage)
failed_log_len=$(job_prop "$failed_job" Log | wc -c)
assert_eq failed "$(job_prop "$failed_job" State)" "the failing build's Job is failed"
failed_id=${failed_job##*/}
assert_success "the Job's record is on disk" -- test -s "$JOBS_DIR/$failed_id.json"

# A build killed while it runs.
running_job=$(build_job tiny job-killed)
if retry_until 120 0.5 job_step_moved "$running_job"; then
  ok "the tiny build's Job is running ($(job_prop "$running_job" Step))"
else
  not_ok "the tiny build's Job is running" "Step: $(job_prop "$running_job" Step)"
fi
assert_eq running "$(job_prop "$running_job" State)" "the Job says running before the daemon dies"
killed_pid=$(unit_prop MainPID)
assert_success "kill -9 the daemon (PID $killed_pid) while the build runs" -- kill_daemon

# Read back by a call (activation, or the daemon systemd restarted).
assert_success "the daemon answers again after kill -9" -- retry_until 40 0.5 list_sessions
assert_ne "$killed_pid" "$(unit_prop MainPID)" "it is a new daemon process"
assert_eq failed "$(job_prop "$failed_job" State)" "after the crash, the finished Job is shown again, still failed"
assert_eq "$failed_message" "$(job_prop "$failed_job" ErrorMessage)" "... with the same error message"
assert_eq "$failed_log_len" "$(job_prop "$failed_job" Log | wc -c)" "... and its whole log ($failed_log_len bytes)"
assert_eq failed "$(job_prop "$running_job" State)" "the Job that was running when the daemon died is failed"
assert_eq "the daemon stopped while it ran" "$(job_prop "$running_job" ErrorMessage)" "... with the reason"
assert_ne 0 "$(job_prop "$running_job" Log | wc -c)" "... and the log it had written"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-build-*' | head -1)" \
  "the dead daemon's build unit was swept"
assert_eq "no" "$([ -e /var/lib/vivarium/images/job-killed ] && echo yes || echo no)" "the killed build left no image"

done_testing
