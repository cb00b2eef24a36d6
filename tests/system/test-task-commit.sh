#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The commit at the end of a task, through real tasks on a real systemd host
# with real QEMU and real git: it is bounded (a 64 GiB sparse file, a file
# over the per-file cap, hardlinks), and the tree is made equal to it, so
# the verification and the next task see exactly the commit (a .GIT
# directory, a fifo, 600 levels of directories).
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-commit.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git df "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

readonly QUOTA=$((32 * MIB))
readonly CONF=/etc/vivarium/conf.d/50-test-commit.conf
git_of () { local p=$1; shift; git --git-dir="$STATE/projects/$p/repo" "$@"; }

tmpd=$(mktemp -d /var/tmp/vivarium-commit.XXXXXX)
at_exit rm -rf "$tmpd"
journal_at_exit

# A per-file cap of 2 MiB, so that a file above it fits in the quota.
install -d -m 0755 /etc/vivarium/conf.d
printf '[Tasks]\nCommitFileMaxMiB=2\n' > "$CONF"
at_exit rm -f "$CONF"
systemctl stop vivariumd.service 2>/dev/null

worker () {  # NAME GUEST-SCRIPT SUMMARY: a script worker that runs GUEST-SCRIPT in /project, then finishes
  cat > "$tmpd/$1.sh" <<EOF
#!/bin/sh
vivariumctl worker exec --timeout 300 --cwd /project -- sh -c '$2' || exit 1
vivariumctl worker finish --summary '$3'
EOF
  chmod 0755 "$tmpd/$1.sh"
}
submit_cli () {  # PROJECT NAME VERIFY: through vivariumctl; prints the task's object path
  local id
  id=$(ctl task submit "$1" "$IMAGE" --script "$tmpd/$2.sh" --verify "$3" 2>&1) || { echo "$id"; return 1; }
  printf '%s/tasks/%s\n' "$OBJ" "$id"
}
used_bytes () { sync; df --output=used -B1 "$1" | tail -1 | tr -d ' '; }
not_committed () {  # JSON PATH: "kind: reason" of PATH in the report's not-committed list
  report_field "$1" "[k['kind'] + ': ' + k['reason'] for k in r.get('not-committed', []) if k['path'] == '$2'][0]"
}

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
for p in bounded reset cancel; do
  out=$(call "$OBJ" Manager.CreateProject "$p" "uint64 $QUOTA" "{}" 2>&1)
  assert_contains "$out" "$(project_path "$p")" "create project $p"
done

# --- 2. the commit is bounded ------------------------------------------------

worker bounded 'truncate -s 64G big && head -c 65536 /dev/urandom > shared && ln shared link1 && ln shared link2 && mkdir sub && ln shared sub/link3 && head -c 3145728 /dev/urandom > over-cap && echo hello > plain.txt' \
  'a sparse file, hardlinks, a file over the cap'
state_before=$(used_bytes "$STATE")
projects_before=$(used_bytes "$STATE/projects")
# The daemon answers while the task runs, its commit included.
answers=$tmpd/answers
: > "$answers"
( while [ ! -e "$tmpd/stop-polling" ]; do
    if timeout 10 vivariumctl status >/dev/null 2>&1; then echo ok; else echo FAILED; fi
    sleep 0.5
  done >> "$answers" ) &
poller=$!
at_exit touch "$tmpd/stop-polling"
started=$(date +%s)
tb=$(submit_cli bounded bounded 'test ! -e big && test ! -e over-cap && test -f shared && test -f sub/link3')
assert_contains "$tb" "$OBJ/tasks/" "submit the task that makes a 64 GiB sparse file"
assert_eq "DONE" "$(wait_outcome "$tb" 600)" "it ends DONE"
elapsed=$(($(date +%s) - started))
touch "$tmpd/stop-polling"
wait "$poller" 2>/dev/null
assert_eq "True" "$([ "$elapsed" -lt 300 ] && echo True || echo "False ($elapsed s)")" "within minutes ($elapsed s)"
assert_eq "0" "$(grep -c FAILED "$answers")" "vivariumctl status answered every time during the task ($(grep -c ok "$answers") calls)"
assert_ne "0" "$(grep -c ok "$answers")" "and was called"
state_growth=$(($(used_bytes "$STATE") - state_before))
projects_growth=$(($(used_bytes "$STATE/projects") - projects_before))
assert_eq "True" "$([ "$state_growth" -lt "$QUOTA" ] && echo True || echo "False ($state_growth bytes)")" \
  "the state disk grew by less than the quota ($state_growth bytes)"
assert_eq "True" "$([ "$projects_growth" -lt "$QUOTA" ] && echo True || echo "False ($projects_growth bytes)")" \
  "the projects' filesystem grew by less than the quota ($projects_growth bytes)"

get_json "$(task_prop "$tb" Report)" "$tmpd/bounded.json"
get_text "$(task_prop "$tb" Report)" "$tmpd/bounded.txt"
assert_contains "$(not_committed "$tmpd/bounded.json" big)" "file: a sparse file (68719476736 bytes long" \
  "the report names the sparse file, and why"
assert_contains "$(not_committed "$tmpd/bounded.json" over-cap)" \
  "file: a file of 3145728 bytes is larger than the commit's cap of 2097152 bytes per file" \
  "and the file over the per-file cap, and why"
assert_eq "" "$(git_of bounded ls-tree HEAD big over-cap)" "neither is committed"
blobs=$(for f in shared link1 link2 sub/link3; do git_of bounded rev-parse "HEAD:$f"; done | sort -u)
assert_eq "1" "$(printf '%s\n' "$blobs" | grep -c .)" "the four names of one inode are one blob"
assert_eq "65536" "$(git_of bounded cat-file -s "$blobs" 2>&1)" "of the file's content"
assert_eq "hello" "$(git_of bounded show HEAD:plain.txt 2>&1)" "the plain file is committed"
commit=$(report_field "$tmpd/bounded.json" "r['commit']")
assert_eq "$(git_of bounded rev-parse HEAD)" "$commit" "the report names HEAD"
assert_eq "pass" "$(report_field "$tmpd/bounded.json" "r['verification']['verdict']")" \
  "the fresh session saw neither the sparse file nor the one over the cap"
assert_contains "$(grep '^Verification: ' "$tmpd/bounded.txt")" "verified: commit $commit" \
  "the Verification line names the commit it verified"
assert_eq "no no" "$(for f in big over-cap; do [ -e "$STATE/projects/bounded/work/$f" ] && echo yes || echo no; done | tr '\n' ' ' | sed 's/ $//')" \
  "both are gone from the project's tree"

# --- 3. every task starts from the commit -------------------------------------

# QEMU 7.2's 9p cannot make a fifo (mkfifo in the guest ends in ENXIO and
# QEMU removes the node): the test makes it in the tree on the host while
# the worker waits on a question, as a guest on another QEMU could.
cat > "$tmpd/leaver.sh" <<'EOF'
#!/bin/sh
vivariumctl worker exec --timeout 300 --cwd /project -- sh -c 'mkdir .GIT && echo "[core]" > .GIT/config && echo kept > kept.txt && i=0 && while [ $i -lt 600 ]; do mkdir d && cd d || exit 1; i=$((i + 1)); done && echo bottom > bottom' || exit 1
vivariumctl worker ask "Is the fifo there?" >/dev/null || exit 1
vivariumctl worker finish --summary 'left a .GIT, a fifo and 600 levels'
EOF
chmod 0755 "$tmpd/leaver.sh"
ta=$(submit_cli reset leaver 'test ! -e .GIT && test ! -e pipe && test ! -e d && test -f kept.txt')
assert_contains "$ta" "$OBJ/tasks/" "submit the task that leaves .GIT/, a fifo and 600 levels of directories"
assert_eq "NEEDS_INPUT" "$(wait_outcome "$ta" 600)" "its worker made them and asks"
assert_success "a fifo in the tree" -- mkfifo "$STATE/projects/reset/work/pipe"
assert_success "answer" -- ctl task answer "${ta##*/}" yes
outcome=$(wait_outcome "$ta" 600)
get_json "$(task_prop "$ta" Report)" "$tmpd/leaver.json"
assert_eq "DONE" "$outcome" "it ends DONE"
[ "$outcome" = DONE ] ||
  diag "$(task_prop "$ta" Reason) $(report_field "$tmpd/leaver.json" "[(c['exit-status'], c.get('stderr-head')) for c in r['commands']]")"
get_text "$(task_prop "$ta" Report)" "$tmpd/leaver.txt"
assert_contains "$(not_committed "$tmpd/leaver.json" .GIT)" "git: a .git entry" "the report lists .GIT, and why"
assert_contains "$(not_committed "$tmpd/leaver.json" pipe)" "special: a fifo" "and the fifo, and why"
deep=d$(printf '/d%.0s' $(seq 256))
assert_contains "$(not_committed "$tmpd/leaver.json" "$deep")" "directory: a directory nested deeper than 256 levels" \
  "and the directory 257 levels down, and why"
assert_eq "kept.txt" "$(git_of reset ls-tree -r --name-only HEAD)" "the commit holds kept.txt alone"
assert_eq "pass" "$(report_field "$tmpd/leaver.json" "r['verification']['verdict']")" \
  "the verification ran on exactly the commit (no .GIT, fifo or d in its tree)"
assert_contains "$(grep '^Verification: ' "$tmpd/leaver.txt")" "verified: commit $(git_of reset rev-parse HEAD)" \
  "and says which commit"
assert_contains "$(grep '^Not committed: ' "$tmpd/leaver.txt")" "removed from the tree" "the text says they were removed"
assert_eq "kept.txt" "$(ls -A "$STATE/projects/reset/work")" "the project's tree holds exactly the commit"

worker lister 'ls -A /project > listing.txt' 'listed /project'
tl=$(submit_cli reset lister 'test -f listing.txt')
assert_contains "$tl" "$OBJ/tasks/" "submit the next task on the same project"
assert_eq "DONE" "$(wait_outcome "$tl" 600)" "it ends DONE: the project still works"
assert_eq "$(printf 'kept.txt\nlisting.txt')" "$(git_of reset show HEAD:listing.txt 2>&1)" \
  "its worker saw only the committed files"
assert_eq "active" "$(systemctl is-active vivariumd.service)" "the daemon is alive"

# --- Task.Cancel during the commit ---------------------------------------------

cancel_head=$(git_of cancel rev-parse HEAD)
# shellcheck disable=SC2016  # expanded in the guest
worker filler 'for i in $(seq 12); do head -c 2000000 /dev/urandom > f$i || exit 1; done' 'wrote 24 MB'
tc=$(submit_cli cancel filler 'true')
assert_contains "$tc" "$OBJ/tasks/" "submit a task to cancel during its commit"
step_is_commit () { [ "$(task_prop "$tc" Step)" = commit ]; }
assert_success "its step becomes commit" -- retry_until 1200 0.1 step_is_commit
out=$(call "$tc" Task.Cancel 2>&1)
assert_eq "0" "$?" "Task.Cancel is accepted during the commit" "$out"
assert_eq "FAILED" "$(wait_outcome "$tc" 300)" "the task ends FAILED"
assert_contains "$(task_prop "$tc" Reason)" "The commit was cancelled" "the reason says the commit was cancelled"
assert_eq "$cancel_head" "$(git_of cancel rev-parse HEAD)" "nothing was committed"
assert_eq "" "$(ls -A "$STATE/projects/cancel/work")" "the tree is back at the last commit"
get_json "$(task_prop "$tc" Report)" "$tmpd/cancel.json"
assert_eq "never-run" "$(report_field "$tmpd/cancel.json" "r['verification']['verdict']")" \
  "no verification of a commit that was not made"

for p in bounded reset cancel; do
  assert_success "delete project $p" -- retry_until 20 0.5 call "$(project_path "$p")" Project.Delete
done

done_testing
