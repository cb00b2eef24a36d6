#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivariumctl's project, task, report and worker verbs, where they hold
# without a daemon: every refusal that needs no bus happens before the bus
# (a usage error exits 2, a bad local file or environment exits 1, each with
# one line on stderr and nothing on stdout), a well-formed call with no bus
# fails with one line naming org.freedesktop.DBus.Error.NoServer, and each
# verb's --help ends with its exit statuses. The system bus address points
# at a path that does not exist, so nothing here can reach a real bus.
set -u

ctl=${1:-${VIVARIUMCTL:-}}
if [ -z "$ctl" ] || [ ! -x "$ctl" ]; then
  echo "FAIL: vivariumctl binary not given or not executable: '${ctl}'" >&2
  echo "usage: $0 PATH/TO/vivariumctl" >&2
  exit 1
fi

export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/vivarium-test-bus
export LC_ALL=C.UTF-8
unset DBUS_SESSION_BUS_ADDRESS VIVARIUM_TASK VIVARIUM_SESSION

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failures=0
checks=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

task_path=/org/vivarium/Vivarium1/tasks/t1
session_path=/org/vivarium/Vivarium1/sessions/s1

# run_in EXPECTED_STATUS STDIN ARGS... : runs vivariumctl with STDIN as its
# standard input, checks the status, that stderr is exactly one line
# starting with "vivariumctl: " and that stdout is empty.
run_in() {
  local want=$1 input=$2 got lines
  shift 2
  checks=$((checks + 1))
  "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" <"$input"
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
  grep -q '^vivariumctl: ' "$tmp/err" ||
    fail "vivariumctl $*: stderr does not start with 'vivariumctl: ': $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "vivariumctl $*: unexpected output on stdout: $(cat "$tmp/out")"
}

run() { local want=$1; shift; run_in "$want" /dev/null "$@"; }

# usage ARGS... : a usage error (exit 2), before the bus.
usage() { run 2 "$@"; }

# names NAME : the last run's one line ends in [NAME] (a typed error).
names() {
  checks=$((checks + 1))
  grep -q "\[$1\]\$" "$tmp/err" || fail "expected [$1] at the end of: $(cat "$tmp/err")"
}

# says TEXT : the last run's stderr contains TEXT (the sentence is clear).
says() {
  checks=$((checks + 1))
  grep -qF -- "$1" "$tmp/err" || fail "expected '$1' in: $(cat "$tmp/err")"
}

# nobus ARGS... : well-formed, fails only because no bus is reachable.
nobus() {
  run 1 "$@"
  names org.freedesktop.DBus.Error.NoServer
  says "system bus"
}

printf '#!/bin/sh\nvivariumctl worker finish --summary done\n' >"$tmp/script.sh"
head -c $((1024 * 1024)) /dev/zero >"$tmp/script-at-cap.sh"
head -c $((1024 * 1024 + 1)) /dev/zero >"$tmp/script-over-cap.sh"
: >"$tmp/empty.sh"
cp "$tmp/script.sh" "$tmp/unreadable.sh"
chmod 000 "$tmp/unreadable.sh"
echo "Add a README." >"$tmp/instructions.txt"
head -c $((64 * 1024 + 1)) /dev/zero | tr '\0' a >"$tmp/instructions-over-cap.txt"
printf 'bad \xff utf-8\n' >"$tmp/not-utf8.txt"
echo "All tests pass." >"$tmp/summary.txt"

# --- project create: SIZE is parsed strictly, before the bus ---
for size in 12Q -1 1e9 18446744073709551616 0 "" " 64M" "64M " 64MB 64Mi 1.5G 0x10 +64M \
            64K 1048576 16777215 17179869184T; do
  usage project create demo --quota "$size"
  says "“$size”"
done
usage project create demo --quota "６４M"
usage project create demo --quota=-1
usage project create demo
says "--quota"
usage project create Demo --quota 64M
usage project create .demo --quota 64M
usage project create "$(printf 'a%.0s' {1..64})" --quota 64M
usage project create demo extra --quota 64M
usage project create --quota 64M
usage project create demo --quota 64M --clone "$(printf 'http://x/\xff')"
# What is a valid SIZE reaches the bus, also at the quota floor exactly.
for size in 16M 16777216 64M 64m 2G 2GiB 1T 16384K; do
  nobus project create demo --quota "$size"
done
nobus project create demo --quota 64M --clone https://example.org/repo.git

# --- the other project verbs ---
usage project list extra
usage project show
usage project show Bad_Name
usage project log
usage project log demo -n 0
usage project log demo -n 10001
usage project log demo -n x
usage project delete
usage project delete a b
usage project remote demo
usage project remote demo "$(printf 'ssh://h/\xfe')"
usage project publish
usage project frobnicate
nobus project list
nobus project list --json
nobus project show demo
nobus project show --json demo
nobus project log demo -n 5
nobus project delete demo
nobus project remote demo ssh://git@example.org/demo.git
nobus project publish demo

# --- task submit: the script, the instructions, the options ---
usage task submit demo tiny
says "--script"
usage task submit demo --script "$tmp/script.sh"
usage task submit demo tiny extra --script "$tmp/script.sh"
usage task submit Demo tiny --script "$tmp/script.sh"
usage task submit demo 'ti/ny' --script "$tmp/script.sh"
usage task submit demo tiny --script "$tmp/script.sh" --timeout 0
usage task submit demo tiny --script "$tmp/script.sh" --timeout abc
usage task submit demo tiny --script "$tmp/script.sh" --memory 5
usage task submit demo tiny --script "$tmp/script.sh" --cpus 0
usage task submit demo tiny --script "$tmp/script.sh" --tool exec --tool frobnicate
says "frobnicate"
usage task submit demo tiny --script "$tmp/script.sh" --instructions x \
  --instructions-file "$tmp/instructions.txt"
usage task submit demo tiny --script "$tmp/script.sh" --instructions-file "$tmp/not-utf8.txt"
usage task submit demo tiny --script "$tmp/script.sh" --instructions "$(printf 'x\xff')"
usage task submit demo tiny --script "$tmp/script.sh" --verify "$(printf 'true \xff')"
usage task submit demo tiny --script "$tmp/script.sh" --verify ""
usage task submit demo tiny --script "$tmp/script.sh" --verify "$(head -c 4097 /dev/zero | tr '\0' t)"
# A script that cannot be read, or is too large, is refused (1) and named.
run 1 task submit demo tiny --script /nonexistent/script.sh
says "/nonexistent/script.sh"
run 1 task submit demo tiny --script "$tmp/script.sh/not-a-directory"
says "not-a-directory"
# Mode 000 stops everyone but root, whom the two cases above stand for.
if [ "$(id -u)" -ne 0 ]; then
  run 1 task submit demo tiny --script "$tmp/unreadable.sh"
  says "unreadable.sh"
else
  echo "note: running as root, so the mode-000 script is readable; not-a-directory stands for it"
fi
run 1 task submit demo tiny --script "$tmp"
says "$tmp"
run 1 task submit demo tiny --script "$tmp/script-over-cap.sh"
names org.vivarium.Vivarium1.Error.TooLarge
says "script-over-cap.sh"
run 1 task submit demo tiny --script "$tmp/empty.sh"
says "empty"
run 1 task submit demo tiny --script "$tmp/script.sh" \
  --instructions-file "$tmp/instructions-over-cap.txt"
names org.vivarium.Vivarium1.Error.TooLarge
run 1 task submit demo tiny --script "$tmp/script.sh" --instructions-file /nonexistent/i.txt
says "/nonexistent/i.txt"
nobus task submit demo tiny --script "$tmp/script.sh"
nobus task submit demo tiny --script "$tmp/script-at-cap.sh"
nobus task submit demo tiny --script "$tmp/script.sh" --verify 'test -f README' --timeout 60 \
  --instructions-file "$tmp/instructions.txt" --memory 512 --cpus 2 --tool exec --tool ask
nobus task submit demo tiny --script "$tmp/script.sh" --instructions 'Add a README.'

# --- task submit --agent: one worker, and an agent needs instructions ---
usage task submit demo tiny --instructions 'Add a README.'
says "--agent"
usage task submit demo tiny --agent --script "$tmp/script.sh" --instructions x
says "not both"
usage task submit demo tiny --agent
says "--instructions"
usage task submit demo tiny --agent --instructions '  '
says "empty"
usage task submit demo tiny --agent --instructions-file "$tmp/empty.sh"
says "empty"
usage task submit demo tiny --agent --instructions x --instructions-file "$tmp/instructions.txt"
usage task submit demo tiny --agent --instructions "$(head -c $((64 * 1024 + 1)) /dev/zero | tr '\0' a)"
says "65537 bytes long; the limit is 65536"
usage task submit demo tiny --agent --instructions-file "$tmp/not-utf8.txt"
usage task submit demo tiny --agent --instructions x --verify ""
usage task submit demo tiny --agent --instructions x --egress sometimes
run 1 task submit demo tiny --agent --instructions-file "$tmp/instructions-over-cap.txt"
names org.vivarium.Vivarium1.Error.TooLarge
run 1 task submit demo tiny --agent --instructions-file /nonexistent/i.txt
says "/nonexistent/i.txt"
if [ "$(id -u)" -ne 0 ]; then
  cp "$tmp/instructions.txt" "$tmp/instructions.txt.unreadable"
  chmod 000 "$tmp/instructions.txt.unreadable"
  run 1 task submit demo tiny --agent --instructions-file "$tmp/instructions.txt.unreadable"
  says "instructions.txt.unreadable"
fi
nobus task submit demo tiny --agent --instructions 'Add a README.'
nobus task submit demo tiny --agent --instructions "$(head -c $((64 * 1024)) /dev/zero | tr '\0' a)"
nobus task submit demo tiny --agent --instructions-file "$tmp/instructions.txt" --verify 'test -f README' \
  --timeout 600 --egress none

# --- task transcript ---
usage task transcript
usage task transcript t1 extra --follow
usage task transcript t1 --frobnicate
nobus task transcript t1
nobus task transcript t1 --follow

# --- the other task verbs ---
usage task wait
usage task wait t1 --timeout 3601
usage task wait t1 --timeout -1
usage task wait t1 extra
usage task list extra
usage task show
usage task answer t1
usage task answer t1 "$(printf 'yes\xff')"
usage task answer t1 "$(head -c $((64 * 1024 + 1)) /dev/zero | tr '\0' a)"
usage task cancel
usage task report
usage task frobnicate
nobus task wait t1
nobus task wait t1 --timeout 0
nobus task wait t1 --timeout 3600
nobus task list
nobus task list --json
nobus task show t1
nobus task answer t1 'Use the second option.'
nobus task cancel t1
nobus task report t1
nobus task report t1 --json

# --- reports ---
usage report list extra
usage report show
usage report show a b
nobus report list
nobus report list --json
nobus report show r1
nobus report show r1 --json

# --- worker verbs: their objects come from the environment, checked first ---
for verb in "exec -- true" "read /etc/hostname" "write /tmp/x" "ask Which" "finish"; do
  # shellcheck disable=SC2086
  run 1 worker $verb
  names org.vivarium.Vivarium1.Error.BadState
  says "VIVARIUM_"
done
for bad in /org/vivarium/Vivarium1 /org/vivarium/Vivarium1/tasks /org/vivarium/Vivarium1/tasks/ \
           /org/vivarium/Vivarium1/tasks/a/b /org/vivarium/Vivarium1/sessions/s1 \
           /org/vivarium/Vivarium1/tasksX/t1 "/org/vivarium/Vivarium1/tasks/t 1" \
           org/vivarium/Vivarium1/tasks/t1 /org/vivarium/Vivarium1/tasks/t1/ ../tasks/t1; do
  for verb in "ask Which" "finish --summary x"; do
    # shellcheck disable=SC2086
    VIVARIUM_TASK=$bad run 1 worker $verb
    names org.vivarium.Vivarium1.Error.InvalidArgument
    says "VIVARIUM_TASK"
  done
done
for bad in /org/vivarium/Vivarium1/sessions /org/vivarium/Vivarium1/sessions/a/b \
           /org/vivarium/Vivarium1/tasks/t1 /org/vivarium/Vivarium1/images/tiny "not a path"; do
  for verb in "exec -- true" "read /etc/hostname" "write /tmp/x"; do
    # shellcheck disable=SC2086
    VIVARIUM_SESSION=$bad VIVARIUM_TASK=$task_path run 1 worker $verb
    names org.vivarium.Vivarium1.Error.InvalidArgument
    says "VIVARIUM_SESSION"
  done
done
# A task alone is enough for the session verbs: they ask the task for it.
VIVARIUM_TASK=/org/vivarium/Vivarium1/tasks/a/b run 1 worker exec -- true
says "VIVARIUM_TASK"

export VIVARIUM_TASK=$task_path VIVARIUM_SESSION=$session_path
usage worker exec
usage worker exec --
usage worker exec --timeout 0 -- true
usage worker exec --timeout 86401 -- true
usage worker exec --cwd relative -- true
usage worker exec --frobnicate -- true
usage worker read
usage worker read relative/path
usage worker read /a /b
usage worker write
usage worker write relative
usage worker ask
usage worker ask "$(head -c 4097 /dev/zero | tr '\0' q)"
usage worker ask "$(printf 'why\xff')"
usage worker ask ""
usage worker finish --verify "$(head -c 4097 /dev/zero | tr '\0' t)"
head -c $((2 * 1024 * 1024 + 1)) /dev/zero | tr '\0' s >"$tmp/summary-over-cap.txt"
run 1 worker finish --summary-file "$tmp/summary-over-cap.txt"
names org.vivarium.Vivarium1.Error.TooLarge
usage worker finish extra
usage worker finish --summary a --summary-file "$tmp/summary.txt"
usage worker finish --summary-file "$tmp/not-utf8.txt"
usage worker finish --verify "$(printf 'true\xff')"
run 1 worker finish --summary-file /nonexistent/summary.txt
says "/nonexistent/summary.txt"
# `worker write` takes at most 16 MiB from stdin, and says so before the bus.
head -c $((16 * 1024 * 1024 + 1)) /dev/zero >"$tmp/over.bin"
run_in 1 "$tmp/over.bin" worker write /tmp/x
names org.vivarium.Vivarium1.Error.TooLarge
says "16 MiB"
head -c $((16 * 1024 * 1024)) /dev/zero >"$tmp/at-cap.bin"
run_in 1 "$tmp/at-cap.bin" worker write /tmp/x
names org.freedesktop.DBus.Error.NoServer
rm -f "$tmp/over.bin" "$tmp/at-cap.bin"
# An endless stdin is refused too, having read only a little past the cap.
checks=$((checks + 1))
if ! timeout 20 "$ctl" worker write /tmp/x </dev/zero >"$tmp/out" 2>"$tmp/err"; then
  grep -q 'Error\.TooLarge\]$' "$tmp/err" || fail "worker write </dev/zero: $(cat "$tmp/err")"
else
  fail "worker write </dev/zero succeeded"
fi
# The command's own options are its own: they follow the command.
nobus worker exec ls -la /project
nobus worker exec -- ls --timeout 5
nobus worker exec --timeout 5 --cwd /project -- sh -c 'exit 3'
nobus worker read /project/README
run_in 1 "$tmp/summary.txt" worker write /project/README
names org.freedesktop.DBus.Error.NoServer
nobus worker ask "Which licence?"
nobus worker finish
nobus worker finish --summary "Added a README." --verify 'test -f README'
nobus worker finish --summary-file "$tmp/summary.txt"
unset VIVARIUM_SESSION
nobus worker exec -- true
unset VIVARIUM_TASK

# --- help: every verb is listed, and each ends with its exit statuses ---
checks=$((checks + 1))
"$ctl" --help >"$tmp/help" 2>"$tmp/err" || fail "vivariumctl --help: $(cat "$tmp/err")"
verbs=("project create" "project list" "project show" "project log" "project delete"
       "project remote" "project publish" "task submit" "task wait" "task list" "task show"
       "task answer" "task cancel" "task report" "worker exec" "worker read" "worker write"
       "worker ask" "worker finish" "report list" "report show" "report verify" "report render")
for verb in "${verbs[@]}"; do
  checks=$((checks + 1))
  grep -q "^  $verb\b" "$tmp/help" || fail "vivariumctl --help does not list '$verb'"
done
for verb in "${verbs[@]}"; do
  [ "$verb" = "report verify" ] || [ "$verb" = "report render" ] && continue
  checks=$((checks + 1))
  # shellcheck disable=SC2086
  if ! "$ctl" $verb --help >"$tmp/help" 2>"$tmp/err"; then
    fail "vivariumctl $verb --help exited non-zero: $(cat "$tmp/err")"
    continue
  fi
  grep -q "^Exit status" "$tmp/help" || fail "vivariumctl $verb --help lists no exit status"
done
checks=$((checks + 1))
"$ctl" task wait --help >"$tmp/help" 2>&1
for line in "0  DONE" "1  FAILED" "2  NEEDS_INPUT" "3  IN_PROGRESS"; do
  grep -qF "$line" "$tmp/help" || fail "task wait --help does not explain '$line'"
done
"$ctl" task submit --help >"$tmp/help" 2>&1
for option in --script --agent --verify --timeout --instructions --instructions-file --memory --cpus --tool; do
  checks=$((checks + 1))
  grep -q -- "$option" "$tmp/help" || fail "task submit --help does not mention $option"
done
"$ctl" task transcript --help >"$tmp/help" 2>&1
for text in --follow "130"; do
  checks=$((checks + 1))
  grep -q -- "$text" "$tmp/help" || fail "task transcript --help does not mention $text"
done
"$ctl" worker exec --help >"$tmp/help" 2>&1
checks=$((checks + 1))
grep -q "the command's own" "$tmp/help" || fail "worker exec --help does not say it exits with the command's status"
checks=$((checks + 1))
"$ctl" task --help >"$tmp/help" 2>&1 || fail "vivariumctl task --help exited non-zero"
grep -q "^  task wait" "$tmp/help" || fail "vivariumctl task --help does not list task wait"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures in $checks checks" >&2
  exit 1
fi
echo "all $checks checks passed"
