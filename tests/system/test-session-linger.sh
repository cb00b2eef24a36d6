#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Ended sessions linger on the bus (ListSessions, their State and command
# log) for 5 minutes, so that a caller can read how its session ended; a
# busy host ends hundreds in that time (every task ends two). What lingers
# must be bounded by count, not only by time, and must not hold what the
# daemon has a limit of: 70 restored sessions started and stopped one after
# another leave the 64 most recent listed (State "stopped", the last one's
# command log readable), the first 6 forgotten, and the daemon holding no
# descriptor to an ended session's command log file, its descriptors where
# they were before them.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-session-linger.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

require_systemd_host vivariumctl gdbus busctl

readonly ROUNDS=70 KEPT=64
ctl () { vivariumctl --no-interaction "$@"; }
daemon_pid () { systemctl show -P MainPID vivariumd.service; }
fd_count () { find "/proc/$(daemon_pid)/fd" -mindepth 1 -maxdepth 1 | wc -l; }
log_fds () {  # the daemon's descriptors open on a session's command log file
  find "/proc/$(daemon_pid)/fd" -mindepth 1 -maxdepth 1 -lname "$STATE/logs/sessions/*" 2>/dev/null | wc -l
}
listed () { gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$IFACE.Manager.ListSessions" | grep -o "/sessions/[0-9a-f]*" | sort; }
state_of () { busctl get-property "$BUS" "$OBJ/sessions/$1" "$IFACE.Session" State 2>&1 | cut -d' ' -f2- | tr -d '"'; }
ids=()
stop_ours () { local id; for id in "${ids[@]}"; do ctl session stop "$id" >/dev/null 2>&1; done; return 0; }
at_exit stop_ours
journal_at_exit vivariumd.service

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it (sessions restore from its boot snapshot)" -- ctl image freeze "$IMAGE"

# One round first, so that whatever the daemon opens once (the bus, polkit, systemd) is open.
id=$(ctl session start "$IMAGE" 2>&1) && ids+=("$id") && ctl session stop "$id" >/dev/null 2>&1
fds_before=$(fd_count)
started=1 failed_rounds=0
for i in $(seq 2 "$ROUNDS"); do
  if id=$(ctl session start "$IMAGE" 2>&1); then
    ids+=("$id")
    started=$((started + 1))
    [ "$i" -eq "$ROUNDS" ] && ctl session exec "$id" -- echo the-last-one >/dev/null 2>&1
    ctl session stop "$id" >/dev/null 2>&1 || failed_rounds=$((failed_rounds + 1))
  else
    failed_rounds=$((failed_rounds + 1))
    diag "round $i: $id"
  fi
done
assert_eq "$ROUNDS 0" "$started $failed_rounds" "$ROUNDS sessions started and stopped one after another"

listed_now=$(listed)
assert_eq "$KEPT" "$(printf '%s\n' "$listed_now" | grep -c .)" "ListSessions lists the $KEPT most recent ended sessions, no more"
gone=0 kept_stopped=0
for n in "${!ids[@]}"; do
  if [ "$n" -lt $((ROUNDS - KEPT)) ]; then
    printf '%s\n' "$listed_now" | grep -qx "/sessions/${ids[$n]}" || gone=$((gone + 1))
  elif [ "$(state_of "${ids[$n]}")" = stopped ]; then
    kept_stopped=$((kept_stopped + 1))
  fi
done
assert_eq "$((ROUNDS - KEPT))" "$gone" "the $((ROUNDS - KEPT)) oldest are forgotten"
assert_eq "$KEPT" "$kept_stopped" "the $KEPT kept ones say State stopped"
assert_contains "$(ctl session log "${ids[$((ROUNDS - 1))]}" 2>&1)" "the-last-one" \
  "the last one's command log is still readable, from memory"
assert_eq "0" "$(log_fds)" "the daemon holds no descriptor to an ended session's command log"
fds_after=$(fd_count)
if [ "$fds_after" -le $((fds_before + 4)) ]; then
  ok "its descriptors are where they were ($fds_before before the rounds, $fds_after after)"
else
  not_ok "its descriptors are where they were" "$fds_before before the rounds, $fds_after after: $(ls -l "/proc/$(daemon_pid)/fd" 2>&1 | tail -n 5)"
fi

done_testing
