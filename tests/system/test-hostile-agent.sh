#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A hostile guest agent (issue 18, "Privilege separation"): root in a guest
# replaces its qemu-ga with a shell script that writes hostile bytes to the
# agent's virtio-serial port, on a real systemd host with real QEMU (TCG).
# Two restored `tiny` sessions, A and B. In A, a detached script swaps
# /usr/bin/qemu-ga for the hostile one and kills the real agent (the
# guest's init restarts "qemu-ga" a second later: now ours). It writes,
# unasked: 100,000 `[`, invalid UTF-8, numbers past 2^64, replies to
# requests never sent, 0xFF sync bytes inside lines; then it answers the
# daemon's requests: each guest-sync-delimited first with a sync reply for
# an id never sent, the real id past 2^64, then the right one; the first
# guest-exec with a pid past 2^64, the second with a pid whose
# guest-exec-status carries broken base64; the third with a single line of
# 100 MiB (no newline before the end).
# Then:
#   - every Exec in A fails with a typed error (org.vivarium.Vivarium1.Error.*),
#     never a client timeout, each within a bound;
#   - A ends failed, its reason naming the guest agent: the session helper
#     closes an agent that broke its protocol and the daemon ends the
#     session (before the helper, A stayed "running" with every call
#     refused and no reason: this fails there);
#   - vivariumd is the same process (MainPID) and its resident set, peak
#     included (VmHWM), stays under 48 MiB: the flood goes to the session
#     helper, never into the daemon (which parsed it itself before the
#     helper, and peaked at 64 MiB here); a 100 MiB line buffered whole
#     several times would pass it;
#   - B answers `echo ok` before and after;
#   - once A and B are stopped nothing of A is left: no unit, no runtime
#     directory, no overlay, no process of its uid.
#   - C's helper (its uid, no capability, exposure ≤ 2.0) killed -9: C ends
#     failed, its reason naming the helper and systemd's SIGKILL; D's helper
#     SIGSTOPped: an Exec fails typed after its timeout and the helper's
#     5 s, D ends failed ("did not answer"); B and the daemon carry on.
# Of the Execs' messages only the typed error name is contract.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-hostile-agent.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly FLOOD_BYTES=$((100 * MIB))   # the hostile line
readonly RSS_BOUND_KB=$((48 * 1024))  # the daemon's bound, peak included
readonly EXEC_TIMEOUT=30              # Exec's own timeout (s) for the hostile calls
readonly FLOOD_EXEC_TIMEOUT=240       # the Exec the flood answers: TCG writes 100 MiB
readonly CLIENT_SLACK=60              # the client waits this much longer than Exec may

require_systemd_host vivariumctl gdbus busctl pgrep "$PY"

tmpd=$(mktemp -d /var/tmp/vivarium-hostile-agent.XXXXXX) || bail_out "cannot create a scratch directory"
at_exit rm -rf "$tmpd"
journal_at_exit

session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
daemon_pid () { systemctl show -P MainPID "$UNIT"; }
status_kb () { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
now_ms () { date +%s%3N; }
unit_gone () { [ "$(systemctl show -P LoadState "$1" 2>/dev/null)" != loaded ]; }

# exec_typed ID TIMEOUT_S CMD...: Exec through gdbus, whose own timeout
# outlasts Exec's. Sets EXEC_RC (gdbus's exit status), EXEC_MS (how long
# it took), EXEC_OUT (its stdout and stderr) and EXEC_ERR (the
# org.vivarium.Vivarium1.Error.* name it failed with, or "").
exec_typed () {
  local id=$1 timeout=$2 argv="" a t0
  shift 2
  for a in "$@"; do argv+="${argv:+, }'$a'"; done
  t0=$(now_ms)
  EXEC_OUT=$(gdbus call --system --dest "$BUS" --object-path "$(session_path "$id")" \
    --method "$IFACE.Session.Exec" --timeout $((timeout + CLIENT_SLACK)) \
    "[$argv]" "@as []" "''" "uint32 $timeout" 2>&1)
  EXEC_RC=$?
  EXEC_MS=$(($(now_ms) - t0))
  EXEC_ERR=$(printf '%s' "$EXEC_OUT" | grep -o "$ERR\.[A-Za-z]*" | head -1)
}

# assert_typed_failure WHAT BOUND_S: the last exec_typed failed, named a
# typed error, and returned within BOUND_S seconds.
assert_typed_failure () {
  local what=$1 bound_ms=$(($2 * 1000))
  diag "$what: gdbus exit $EXEC_RC after $EXEC_MS ms: $(printf '%s' "$EXEC_OUT" | head -c 400)"
  if [ "$EXEC_RC" != 0 ] && [ -n "$EXEC_ERR" ]; then
    ok "$what fails with a typed error ($EXEC_ERR)"
  else
    not_ok "$what fails with a typed error ($ERR.*)" "gdbus exit $EXEC_RC: $EXEC_OUT"
  fi
  if [ "$EXEC_MS" -le "$bound_ms" ]; then
    ok "$what returns within $2 s ($EXEC_MS ms)"
  else
    not_ok "$what returns within $2 s" "it took $EXEC_MS ms"
  fi
}

# --- the guest side -------------------------------------------------------------

# The replacement qemu-ga. The guest's init runs it as
# `qemu-ga -m virtio-serial -p PORT`; every loop below is bounded, and once
# it has written its flood it sleeps holding the port, so that init cannot
# start anything else on it.
cat >"$tmpd/hostile-agent" <<EOF
#!/bin/sh
port=/dev/virtio-ports/org.qemu.guest_agent.0
[ -e /root/hostile.done ] && exec sleep 100000
exec 3<>"\$port" || exit 1
flood () {
  # One line of $FLOOD_BYTES bytes: a reply that never ends.
  printf '{"return": "' >&3
  head -c $((FLOOD_BYTES - 16)) /dev/zero | tr '\\000' x >&3
  printf '"}\n' >&3
  : >/root/hostile.done
  exec sleep 100000
}
# Unasked: deep nesting, invalid UTF-8, numbers past 2^64, replies to
# requests never sent, 0xFF inside lines and on its own.
printf '\\377' >&3
head -c 100000 /dev/zero | tr '\\000' '[' >&3
printf '\\n' >&3
printf '{"return": "\\377\\376\\300\\200\\355\\240\\200\\370\\210\\200\\200\\200"}\\n' >&3
printf '\\300\\257{"return": \\351}\\n' >&3
printf '{"return": 184467440737095516160}\\n' >&3
printf '{"return": -184467440737095516160e999999999}\\n' >&3
printf '{"return":{"exited":true,"exitcode":0,"out-data":"QUJD="}}\\n' >&3
printf '{"return":{}, "id": 99999}\\n' >&3
printf '{"ret\\377urn": 1}\\n\\377\\377\\377{"return": 1\\377}\\n\\377' >&3
# Asked: answer the daemon's requests badly (at most 60 lines, 90 s each).
execs=0 n=0
while [ \$n -lt 60 ] && IFS= read -r -t 90 line <&3; do
  n=\$((n + 1))
  case \$line in
    *guest-sync-delimited*)
      id=\$(printf '%s' "\$line" | sed -n 's/.*"id" *: *\\([0-9]*\\).*/\\1/p')
      printf '\\377{"return": 99999}\\n' >&3
      printf '\\377{"return": %s0000000000000000000000}\\n' "\$id" >&3
      printf '\\377{"return": %s}\\n' "\$id" >&3 ;;
    *guest-exec-status*)
      printf '{"return":{"exited":true,"exitcode":0,"out-data":"QUJD=A","err-data":"Q"}}\\n' >&3
      printf '{"return":{}, "id": 99999}\\n' >&3 ;;
    *guest-exec*)
      execs=\$((execs + 1))
      case \$execs in
        1) printf '{"return":{"pid": 184467440737095516160}}\\n{"return":{"pid": 4242}}\\n' >&3 ;;
        2) printf '{"return":{"pid": 4242}}\\n' >&3 ;;
        *) flood ;;
      esac ;;
    *) printf '{"return":{}, "id": 99999}\\n' >&3 ;;
  esac
done
flood
EOF

# Detached from the Exec that starts it: the Exec returns at once, the swap
# happens a second later, and the guest's init starts the new agent a
# second after the old one died.
cat >"$tmpd/launch" <<'EOF'
#!/bin/sh
sleep 1
cp /root/hostile-agent /usr/bin/qemu-ga.hostile && chmod 0755 /usr/bin/qemu-ga.hostile || exit 1
pids=
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = qemu-ga ] && pids="$pids ${p#/proc/}"
done
mv -f /usr/bin/qemu-ga.hostile /usr/bin/qemu-ga
kill -9 $pids
EOF

# --- two restored sessions --------------------------------------------------------

if ! ctl image list 2>/dev/null | grep -qw "$IMAGE"; then
  out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $out"
fi
if [ "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" "$IFACE.Image" Frozen 2>&1)" != "b true" ]; then
  out=$(ctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
fi

started=()
stop_started () {
  local id
  for id in "${started[@]}"; do
    [ "$(prop "$(session_path "$id")" Session State 2>/dev/null)" = running ] && ctl session stop "$id"
  done
  return 0
}
at_exit stop_started

a=$(ctl session start "$IMAGE" 2>"$tmpd/start.err") || bail_out "cannot start session A: $(head -c 300 "$tmpd/start.err")"
[ -n "$a" ] || bail_out "the start of A printed no id"
started+=("$a")
b=$(ctl session start "$IMAGE" 2>"$tmpd/start.err") || bail_out "cannot start session B: $(head -c 300 "$tmpd/start.err")"
[ -n "$b" ] || bail_out "the start of B printed no id"
started+=("$b")
pa=$(session_path "$a")
pb=$(session_path "$b")
assert_eq "restored restored" "$(prop "$pa" Session StartMode) $(prop "$pb" Session StartMode)" \
  "A ($a) and B ($b) start restored"
uid_a=$(prop "$pa" Session Uid | awk '{ print $NF }')
unit_a=$(prop "$pa" Session Unit)
assert_eq "vivarium-session-$a.service" "$unit_a" "A's unit is named after it"
assert_ne "" "$uid_a" "A's session uid is known"

assert_eq "ok" "$(ctl session exec "$a" -- echo ok 2>&1)" "A answers before (the positive control)"
assert_eq "ok" "$(ctl session exec "$b" -- echo ok 2>&1)" "B answers before"
assert_eq "0" "$(ctl session exec "$a" -- id -u 2>&1)" "Exec runs as root in the guest"

pid=$(daemon_pid)
if [ -z "$pid" ] || [ "$pid" = 0 ]; then bail_out "vivariumd has no main PID"; fi
rss_before=$(status_kb "$pid" VmRSS)
diag "vivariumd $pid before the hostile agent: VmRSS $rss_before KiB, VmHWM $(status_kb "$pid" VmHWM) KiB"

# --- A's root replaces its agent ------------------------------------------------------

assert_success "the hostile agent goes into A" -- ctl session cp "$tmpd/hostile-agent" "$a:/root/hostile-agent"
assert_success "and its launcher" -- ctl session cp "$tmpd/launch" "$a:/root/launch"
# Either outcome is allowed: the launch may race the agent's death.
exec_typed "$a" "$EXEC_TIMEOUT" sh -c 'setsid sh /root/launch </dev/null >/dev/null 2>&1 &'
diag "the launch: gdbus exit $EXEC_RC after $EXEC_MS ms${EXEC_ERR:+ ($EXEC_ERR)}"
# The swap takes a second, init's restart another; what A's daemon side
# reads meanwhile is the unasked part.
sleep 5

# 1: the pid past 2^64.
exec_typed "$a" "$EXEC_TIMEOUT" echo ok
if [ "$EXEC_RC" = 0 ]; then
  bail_out "A's exec still succeeds ($EXEC_OUT): the real qemu-ga was not replaced"
fi
assert_typed_failure "Exec 1 in A (a pid past 2^64)" $((EXEC_TIMEOUT + 15))
# 2: the broken base64 in guest-exec-status.
exec_typed "$a" "$EXEC_TIMEOUT" echo ok
assert_typed_failure "Exec 2 in A (broken base64 in guest-exec-status)" $((EXEC_TIMEOUT + 15))
# 3: the 100 MiB line.
exec_typed "$a" "$FLOOD_EXEC_TIMEOUT" echo ok
assert_typed_failure "Exec 3 in A (answered by a 100 MiB line)" $((FLOOD_EXEC_TIMEOUT + 15))
# 4: whatever is left of A's agent.
exec_typed "$a" "$EXEC_TIMEOUT" echo ok
assert_typed_failure "Exec 4 in A (after the flood)" $((EXEC_TIMEOUT + 15))

# --- the daemon ------------------------------------------------------------------------

assert_eq "$pid" "$(daemon_pid)" "vivariumd is the same process (MainPID $pid)"
assert_eq "active" "$(systemctl is-active "$UNIT")" "vivariumd is active"
rss_after=$(status_kb "$pid" VmRSS)
hwm=$(status_kb "$pid" VmHWM)
diag "vivariumd after the flood: VmRSS $rss_after KiB (before $rss_before KiB), peak VmHWM $hwm KiB"
if [ -n "$hwm" ] && [ "$hwm" -lt "$RSS_BOUND_KB" ]; then
  ok "vivariumd's peak resident set stayed under $((RSS_BOUND_KB / 1024)) MiB ($((hwm / 1024)) MiB)"
else
  not_ok "vivariumd's peak resident set stayed under $((RSS_BOUND_KB / 1024)) MiB" "VmHWM '$hwm' KiB"
fi
if [ -n "$rss_after" ] && [ "$rss_after" -lt "$RSS_BOUND_KB" ]; then
  ok "vivariumd's resident set is under $((RSS_BOUND_KB / 1024)) MiB after it ($((rss_after / 1024)) MiB)"
else
  not_ok "vivariumd's resident set is under $((RSS_BOUND_KB / 1024)) MiB after it" "VmRSS '$rss_after' KiB"
fi

# --- the state of A ------------------------------------------------------------------

# The contract: the session helper (the one process that reads the agent's
# bytes) closes an agent that broke its protocol, and the daemon ends A,
# failed, saying why. (The daemon of before the helper kept A listed
# running, every call on it refused with no word why: this fails there.)
ended () { [ "$(prop "$pa" Session State 2>/dev/null)" = failed ]; }
retry_until 30 1 ended
state_a=$(prop "$pa" Session State 2>&1)
reason_a=$(prop "$pa" Session StateReason 2>&1)
diag "A after the flood: State '$state_a', StateReason '$reason_a'"
assert_eq "failed" "$state_a" "A ended failed after its agent turned hostile"
assert_contains "$reason_a" "guest agent" "A's StateReason says it was the guest agent"
assert_dbus_error "$ERR.BadState" -- call "$pa" Session.ReadFile "'/etc/hostname'"
assert_success "A's helper unit is gone" -- retry_until 40 0.5 unit_gone "vivarium-helper-$a.service"

# --- B ----------------------------------------------------------------------------------

assert_eq "ok" "$(ctl session exec "$b" -- echo ok 2>&1)" "B still answers an Exec correctly"
assert_eq "running" "$(prop "$pb" Session State)" "B is running"

# --- a helper that dies ------------------------------------------------------------------

# C's helper runs as C's uid, in its own unit; kill -9 of it costs C alone:
# C ends failed naming the helper, B and the daemon carry on.
c=$(ctl session start "$IMAGE" 2>"$tmpd/start.err") || bail_out "cannot start session C: $(head -c 300 "$tmpd/start.err")"
at_exit ctl session stop "$c"
pc=$(session_path "$c")
helper_c="vivarium-helper-$c.service"
uid_c=$(prop "$pc" Session Uid | awk '{ print $NF }')
helper_pid=$(systemctl show -P MainPID "$helper_c")
assert_ne "0" "${helper_pid:-0}" "C has a running session helper ($helper_c)"
assert_eq "$uid_c" "$(awk '$1 == "Uid:" { print $2 }' "/proc/$helper_pid/status")" "C's helper runs as C's uid"
assert_eq "0000000000000000" "$(awk '$1 == "CapEff:" { print $2 }' "/proc/$helper_pid/status")" \
  "C's helper holds no capability"
assert_eq "ok" "$(ctl session exec "$c" -- echo ok 2>&1)" "C answers an Exec through its helper"
helper_exposure=$(systemd-analyze security --no-pager "$helper_c" 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: *\([0-9.]*\).*/\1/p')
diag "systemd-analyze security: session helper unit ${helper_exposure:-?}"
assert_success "the session helper unit's exposure is at most 2.0 (${helper_exposure:-none})" -- \
  awk -v e="${helper_exposure:-10}" 'BEGIN { exit !(e <= 2.0) }'
kill -9 "$helper_pid"
c_failed () { [ "$(prop "$pc" Session State 2>/dev/null)" = failed ]; }
assert_success "C ends failed once its helper is killed" -- retry_until 30 0.5 c_failed
reason_c=$(prop "$pc" Session StateReason 2>&1)
assert_contains "$reason_c" "session helper" "C's StateReason names the session helper ($reason_c)"
assert_contains "$reason_c" "SIGKILL" "and how it ended, in systemd's words"
assert_dbus_error "$ERR.BadState" -- call "$pc" Session.Exec "['true']" "@as []" "''" "uint32 10"
assert_success "C's QEMU unit is gone" -- retry_until 40 0.5 unit_gone "vivarium-session-$c.service"
assert_eq "ok" "$(ctl session exec "$b" -- echo ok 2>&1)" "B still answers after C's helper died"
assert_eq "$pid" "$(daemon_pid)" "vivariumd is the same process after C's helper died"

# --- a helper that hangs -------------------------------------------------------------------

# D's helper stopped (SIGSTOP) answers nothing: the daemon's deadline for a
# call (the guest's own plus 5 s) ends D, failed, saying the helper hung.
d=$(ctl session start "$IMAGE" 2>"$tmpd/start.err") || bail_out "cannot start session D: $(head -c 300 "$tmpd/start.err")"
at_exit ctl session stop "$d"
pd=$(session_path "$d")
helper_pid=$(systemctl show -P MainPID "vivarium-helper-$d.service")
assert_ne "0" "${helper_pid:-0}" "D has a running session helper"
kill -STOP "$helper_pid"
exec_typed "$d" 2 true
# Exec's 2 s, the helper's 5 s of slack, 10 s for a loaded host
assert_typed_failure "an Exec on D with a hung helper" 17
d_failed () { [ "$(prop "$pd" Session State 2>/dev/null)" = failed ]; }
assert_success "D ends failed once its helper hung" -- retry_until 30 0.5 d_failed
assert_contains "$(prop "$pd" Session StateReason 2>&1)" "did not answer" "D's StateReason says the helper did not answer"
assert_success "D's helper unit is gone" -- retry_until 40 0.5 unit_gone "vivarium-helper-$d.service"
assert_eq "ok" "$(ctl session exec "$b" -- echo ok 2>&1)" "B still answers after D's helper hung"
assert_success "stop B" -- ctl session stop "$b"

# --- nothing of A is left -----------------------------------------------------------------

assert_success "A's unit is gone" -- retry_until 40 0.5 unit_gone "$unit_a"
assert_success "B's unit is gone" -- retry_until 40 0.5 unit_gone "vivarium-session-$b.service"
assert_eq "" "$(systemctl list-units --all --plain --no-legend "vivarium-session-$a*" 2>&1)" "no unit of A is listed"
assert_eq "no" "$([ -e "$RUNTIME/sessions/$a" ] && echo yes || echo no)" "A's runtime directory is gone"
assert_eq "no" "$([ -e "$STATE/sessions/$a" ] && echo yes || echo no)" "A's overlay is gone"
no_process_of_a () { ! pgrep -u "$uid_a" >/dev/null; }
retry_until 20 0.5 no_process_of_a
assert_eq "" "$(pgrep -a -u "$uid_a" 2>&1)" "no process of A's uid $uid_a is left"
assert_eq "" "$(prop "$pa" Session Leftovers 2>&1 | sed 's/^0$//')" "A's teardown found nothing left"
# For the log: whether the daemon gave the flood's memory back once A was gone.
diag "vivariumd with A and B stopped: VmRSS $(status_kb "$pid" VmRSS) KiB (before the flood $rss_before KiB)"
assert_eq "$pid" "$(daemon_pid)" "vivariumd is still the same process at the end"

done_testing
