#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A worker reaches only its own task, through real tasks on a real systemd
# host with real QEMU: a process task A's worker leaves behind (it ignores
# SIGTERM) hunts for the next task's worker and tries to act as it; a
# process of the right uid outside the worker's unit tries the same; the
# next worker gets another uid, sees neither the other tasks' files nor
# their processes; nothing of A outlives A's unit. Figures: the exposure
# of a worker unit and of a session unit (systemd-analyze security).
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-isolation.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git setpriv pgrep systemd-analyze journalctl "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

git_of () { local p=$1; shift; git --git-dir="$STATE/projects/$p/repo" "$@"; }
task_id () { printf '%s' "${1##*/}"; }
worker_unit () { printf 'vivarium-worker-%s.service' "$(task_id "$1")"; }
unit_journal () { journalctl -u "$1" --no-pager -o cat 2>&1; }
worker_uid () {  # TASK: the uid its worker said it runs as (each script says it first)
  unit_journal "$(worker_unit "$1")" | sed -n 's/^worker uid: \([0-9]*\)$/\1/p' | head -n 1
}
has_worker_uid () { [ -n "$(worker_uid "$1")" ]; }
unit_is_active () { [ "$(systemctl is-active "$1")" = active ]; }
exposure () {  # UNIT: systemd-analyze security's overall figure
  systemd-analyze security --no-pager "$1" 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: *\([0-9.]*\).*/\1/p'
}

tmpd=$(mktemp -d /var/tmp/vivarium-isolation.XXXXXX)
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit
create_test_user tuser || bail_out "cannot create a test user"

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
for p in alpha beta gamma; do
  out=$(call "$OBJ" Manager.CreateProject "$p" "uint64 $((32 * MIB))" "{}" 2>&1)
  assert_contains "$out" "$(project_path "$p")" "create project $p"
done

# --- a leftover of task A hunts for task B's worker ------------------------------
# Its loop ignores SIGTERM, so it lives until systemd's SIGKILL (the unit's
# TimeoutStopSec) after A's script is gone; meanwhile it looks for any
# process with another VIVARIUM_TASK (/proc/*/environ, readable for a
# process of the same uid) and any other task's directory under
# /run/vivarium/workers/, and acts as what it finds. Bounded: 30 s at most.
cat > "$tmpd/leftover.sh" <<'EOF'
#!/bin/sh
echo "worker uid: $(id -u)"
me=$VIVARIUM_TASK
(
  trap '' TERM HUP INT
  act () {  # TASK SESSION
    echo "leftover of A found $1"
    VIVARIUM_TASK=$1 VIVARIUM_SESSION=$2 vivariumctl worker exec -- sh -c 'echo forged > /project/forged-by-a' \
      && echo "leftover of A: Exec in $1 accepted"
    VIVARIUM_TASK=$1 VIVARIUM_SESSION=$2 vivariumctl worker finish --summary 'FORGED BY A' --verify true \
      && echo "leftover of A: Finish of $1 accepted"
  }
  i=0
  while [ $i -lt 300 ]; do
    for f in /proc/[0-9]*/environ; do
      t=$(tr '\0' '\n' 2>/dev/null < "$f" | sed -n 's/^VIVARIUM_TASK=//p')
      [ -n "$t" ] && [ "$t" != "$me" ] || continue
      act "$t" "$(tr '\0' '\n' 2>/dev/null < "$f" | sed -n 's/^VIVARIUM_SESSION=//p')"
      exit 0
    done
    for d in /run/vivarium/workers/*; do
      t=/org/vivarium/Vivarium1/tasks/${d##*/}
      [ -d "$d" ] && [ "$t" != "$me" ] || continue
      act "$t" ""
      exit 0
    done
    sleep 0.1
    i=$((i + 1))
  done
  echo "leftover of A found nothing"
) </dev/null &
vivariumctl worker exec -- sh -c 'echo a > /project/a.txt'
vivariumctl worker finish --summary 'A did its own work'
EOF
# B looks around first: what its worker can see of the host is part of the
# answer. Then it does its work a few seconds later than a hunter needs.
cat > "$tmpd/next.sh" <<'EOF'
#!/bin/sh
echo "worker uid: $(id -u)"
echo "B sees workers: $(ls -A /run/vivarium/workers 2>&1 | tr '\n' ' ')"
echo "B sees sessions: $(ls -A /run/vivarium/sessions 2>&1 | tr '\n' ' ')"
echo "B sees state: $(ls -A /var/lib/vivarium 2>&1 | tr '\n' ' ')"
echo "B sees processes: $(ls -d /proc/[0-9]* | wc -l)"
sleep 6
vivariumctl worker exec -- sh -c 'echo b > /project/b.txt'
vivariumctl worker finish --summary 'B did its own work'
EOF

ta=$(submit alpha "$tmpd/leftover.sh")
assert_contains "$ta" "$OBJ/tasks/" "submit task A (leaves a SIGTERM-ignoring hunter)"
retry_until 40 0.25 has_worker_uid "$ta"
uid_a=$(worker_uid "$ta")
assert_eq "DONE" "$(wait_outcome "$ta" 120)" "task A is DONE"
tb=$(submit beta "$tmpd/next.sh")
assert_contains "$tb" "$OBJ/tasks/" "submit task B right after A is DONE"
retry_until 40 0.25 has_worker_uid "$tb"
uid_b=$(worker_uid "$tb")
assert_eq "DONE" "$(wait_outcome "$tb" 120)" "task B is DONE"
assert_ne "" "$uid_a" "A's worker uid is known ($uid_a)"
assert_ne "$uid_a" "$uid_b" "B's worker does not get A's uid: slots rotate"

get_json "$(task_prop "$tb" Report)" "$tmpd/b.json"
assert_eq "B did its own work" "$(report_field "$tmpd/b.json" "r['summary']['text']")" \
  "B's signed report carries B's own claim"
assert_eq "[]" "$(report_field "$tmpd/b.json" "[c['argv'] for c in r['commands'] if 'forged' in ' '.join(c['argv'])]")" \
  "B's report holds none of A's commands"
assert_eq "b.txt" "$(git_of beta ls-tree --name-only HEAD -- b.txt forged-by-a)" "beta's commit has B's file and nothing A forged"
ja=$(unit_journal "$(worker_unit "$ta")")
assert_not_contains "$ja" "accepted" "nothing A's leftover tried was accepted"
diag "A's leftover said: $(printf '%s' "$ja" | grep 'leftover of A' | head -n 4)"
jb=$(unit_journal "$(worker_unit "$tb")")
assert_eq "$(task_id "$tb")" "$(printf '%s' "$jb" | sed -n 's/^B sees workers: *//p' | tr -d ' ')" \
  "B's worker sees only its own directory under /run/vivarium/workers"
assert_not_contains "$(printf '%s' "$jb" | grep 'B sees sessions')" "$(task_id "$ta")" \
  "nor any session's runtime directory"
bstate=$(printf '%s' "$jb" | grep 'B sees state')
assert_contains "$bstate" "cannot" "nor the daemon's state directory"
assert_not_contains "$bstate" "projects" "(none of its entries)"
nprocs=$(printf '%s' "$jb" | sed -n 's/^B sees processes: //p')
assert_success "B's worker sees only its own processes ($nprocs)" -- test "${nprocs:-99}" -le 6
assert_success "nothing of A runs once A's unit is gone" -- retry_until 60 0.5 sh -c "! pgrep -u '$uid_a' >/dev/null"
assert_eq "inactive" "$(systemctl is-active "$(worker_unit "$ta")")" "A's unit is gone"

# --- the right uid from outside the unit --------------------------------------
cat > "$tmpd/slow.sh" <<'EOF'
#!/bin/sh
echo "worker uid: $(id -u)"
vivariumctl worker exec -- sh -c 'echo c > /project/c.txt'
sleep 25
vivariumctl worker finish --summary 'C did its own work'
EOF
tc=$(submit gamma "$tmpd/slow.sh")
assert_contains "$tc" "$OBJ/tasks/" "submit task C"
assert_success "C's worker is running" -- retry_until 80 0.25 has_worker_uid "$tc"
uid_c=$(worker_uid "$tc")
sc=$(task_prop "$tc" Session)
as_c () {  # CMD...: C's uid and C's environment, from a process outside C's unit
  setpriv --reuid="$uid_c" --regid="$uid_c" --clear-groups -- \
    env VIVARIUM_TASK="$tc" VIVARIUM_SESSION="$sc" "$@"
}
assert_dbus_error "$ERR.NotAuthorized" -- as_c vivariumctl worker exec -- sh -c 'echo forged > /project/forged'
assert_dbus_error "$ERR.NotAuthorized" -- as_c vivariumctl worker finish --summary 'FORGED FROM OUTSIDE'

# What another local user, a QEMU uid and C's files look like.
wdir=/run/vivarium/workers/$(task_id "$tc")
assert_eq "711 root:root" "$(stat -c '%a %U:%G' /run/vivarium/workers)" "/run/vivarium/workers: root's, 0711"
assert_eq "750 root:$(id -gn "$uid_c")" "$(stat -c '%a %U:%G' "$wdir")" "a task's directory: root:<its worker's group> 0750"
assert_eq "640" "$(stat -c '%a' "$wdir/instructions")" "its instructions 0640"
assert_eq "750" "$(stat -c '%a' "$wdir/worker")" "its program 0750"
assert_success "another local user cannot list the workers" -- sh -c "! runuser -u '$tuser' -- ls /run/vivarium/workers"
assert_success "nor read a task's instructions" -- sh -c "! runuser -u '$tuser' -- cat '$wdir/instructions'"
suid=$(prop "$sc" Session Uid)
assert_success "nor can a session's QEMU uid" -- sh -c "! setpriv --reuid='$suid' --regid=\$(getent group vivarium-qemu | cut -d: -f3) --clear-groups -- cat '$wdir/instructions'"

# The exposure figures (README): the units as they run.
wexp=$(exposure "$(worker_unit "$tc")")
sexp=$(exposure "vivarium-session-$(task_id "$sc").service")
diag "systemd-analyze security: worker unit $wexp, session unit $sexp"
assert_success "the worker unit's exposure is at most 1.0 ($wexp; 6.2 before its sandbox)" -- awk -v e="${wexp:-10}" 'BEGIN { exit !(e <= 1.0) }'
assert_success "the session unit's exposure is at most 2.0 ($sexp; 7.3 before its sandbox)" -- awk -v e="${sexp:-10}" 'BEGIN { exit !(e <= 2.0) }'

assert_eq "DONE" "$(wait_outcome "$tc" 120)" "task C is DONE"
get_json "$(task_prop "$tc" Report)" "$tmpd/c.json"
assert_eq "C did its own work" "$(report_field "$tmpd/c.json" "r['summary']['text']")" \
  "C's report carries C's own claim"
assert_eq "c.txt" "$(git_of gamma ls-tree --name-only HEAD -- c.txt forged)" "gamma's commit holds nothing forged"
assert_eq "active" "$(systemctl is-active vivariumd.service)" "the daemon is fine"
assert_success "no worker unit is left" -- retry_until 40 0.5 no_worker_unit

done_testing
