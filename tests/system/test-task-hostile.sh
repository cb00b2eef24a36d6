#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Hostile workers, through real tasks on a real systemd host with real QEMU,
# real git and a real sshd: workers that fail, fill the quota, tamper with
# the tree, forge the report's trusted lines; and publishing over ssh with
# the project's deploy key. test-tasks.sh has the well-behaved path.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-task-hostile.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

require_systemd_host vivariumctl gdbus busctl git /usr/sbin/sshd ssh-keygen sha256sum "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

git_of () { local p=$1; shift; git --git-dir="$STATE/projects/$p/repo" "$@"; }

tmpd=$(mktemp -d /var/tmp/vivarium-hostile.XXXXXX)
chmod 0755 "$tmpd"   # the sshd's git user reads its repository under it
at_exit rm -rf "$tmpd"
journal_at_exit

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"
for p in bad full tamper other; do
  out=$(call "$OBJ" Manager.CreateProject "$p" "uint64 $((32 * MIB))" "{}" 2>&1)
  assert_contains "$out" "$(project_path "$p")" "create project $p"
done

# --- workers that fail: FAILED, saying why, no unit left ----------------------

printf 'this is not a program\n' > "$tmpd/noexec.sh"
printf '#!/nonexistent/interpreter\n' > "$tmpd/badshebang.sh"
printf '#!/bin/sh\necho about to fail >&2\nexit 3\n' > "$tmpd/exit3.sh"
printf '#!/bin/sh\nkill -KILL $$\n' > "$tmpd/killed.sh"
check_failure () {  # SCRIPT REASON_PART WHAT
  local t
  t=$(submit bad "$tmpd/$1")
  assert_contains "$t" "$OBJ/tasks/" "submit the $3 worker"
  assert_eq "FAILED" "$(wait_outcome "$t" 300)" "a worker that $3 ends the task FAILED"
  assert_contains "$(task_prop "$t" Reason)" "$2" "and the reason says so"
  get_json "$(task_prop "$t" Report)" "$tmpd/fail.json"
  assert_eq "FAILED" "$(report_field "$tmpd/fail.json" "r['outcome']")" "the $3 worker's report says FAILED"
  assert_contains "$(report_field "$tmpd/fail.json" "r['outcome-reason']")" "$2" "with the same reason"
  assert_success "no worker unit is left after the $3 worker (a failed unit is reset)" -- retry_until 20 0.5 no_worker_unit
}
check_failure noexec.sh "could not be executed" "is not a program"
check_failure badshebang.sh "could not be executed" "names a missing interpreter"
check_failure exit3.sh "exited with status 3 without calling Finish" "exits 3"
check_failure killed.sh "killed by signal 9" "is killed"
assert_eq "active" "$(systemctl is-active vivariumd.service)" "the daemon took it all in its stride"

# --- a failed command in a flood of harmless ones: still listed --------------
# 70 commands, the 31st fails: the list keeps it, the first and last 32 of
# the rest, and counts the 5 between; the full log is beside the report.
pyworker flood '
for i in range(1, 71):
    exec_guest("exit 5" if i == 31 else "true")
finish("Nothing failed.", "")'
tfl=$(submit bad "$tmpd/flood.py")
assert_eq "DONE" "$(wait_outcome "$tfl" 600)" "the flooding task ends"
get_json "$(task_prop "$tfl" Report)" "$tmpd/flood.json"
get_text "$(task_prop "$tfl" Report)" "$tmpd/flood.txt"
assert_eq "[31] 65 5" "$(report_field "$tmpd/flood.json" "'%s %d %d' % ([c['number'] for c in r['commands'] if c['exit-status'] != 0], len(r['commands']), r['commands-omitted'])")" \
  "the failed 31st is listed among the first and last 32 of the rest; 5 are left out"
assert_contains "$(grep '^Command: 31 ' "$tmpd/flood.txt")" "exit 5 (the guest agent's word)" \
  "the text shows its exit status as the guest agent's word"
assert_contains "$(grep '^Command: 31 ' "$tmpd/flood.txt")" ", FAILED" "and says it failed"
assert_contains "$(grep '^Commands omitted: ' "$tmpd/flood.txt")" "5 left out of the list, 0 of them failed" \
  "the text says how many were left out, and that none of them failed"
check_command_log "$(task_prop "$tfl" Report)" "$tmpd/flood.json" "the flood"
assert_eq "70" "$(report_field "$tmpd/flood.json" "r['command-log']['entries']")" "the log beside the report has all 70"
assert_success "vivariumctl report verify accepts it" -- vivariumctl report verify "$tmpd/flood.json"

# --- quota: the guest gets ENOSPC, the host is unharmed, the report says so ---

other_head=$(prop "$(project_path other)" Project Head)
pyworker filler '
s, out, err = exec_guest("dd if=/dev/urandom of=big bs=1M count=64")
exec_guest("echo after-full > after.txt || true")
finish("I filled the disk (status %d)." % s, "test -f big")'
tf=$(submit full "$tmpd/filler.py")
assert_contains "$tf" "$OBJ/tasks/" "submit the task that writes past its quota"
assert_eq "DONE" "$(wait_outcome "$tf" 600)" "the quota task ends DONE (the worker finished)"
get_json "$(task_prop "$tf" Report)" "$tmpd/full.json"
dd_status=$(report_field "$tmpd/full.json" "[c['exit-status'] for c in r['commands'] if 'dd if=' in c['argv'][-1]][0]")
assert_ne "0" "$dd_status" "the guest's dd failed (exit status $dd_status in the report's command list)"
dd_err=$(report_field "$tmpd/full.json" "[c.get('stderr-head', '') for c in r['commands'] if 'dd if=' in c['argv'][-1]][0]")
# btrfs's qgroup limit says EDQUOT, an ext4 dataset ENOSPC: both are "full".
if printf '%s' "$dd_err" | grep -q -E 'No space left on device|Disk quota exceeded'; then
  ok "and its stderr in the command list says the disk is full"
else not_ok "and its stderr in the command list says the disk is full" "$dd_err"; fi
assert_eq "True" "$(report_field "$tmpd/full.json" "r['dataset']['full']")" "the report's dataset is flagged full"
assert_eq "$((32 * MIB))" "$(report_field "$tmpd/full.json" "r['dataset']['quota-bytes']")" "with the project's quota"
assert_eq "True" "$(report_field "$tmpd/full.json" "r['dataset']['used-bytes'] > 30 * 1024 * 1024")" "and what was used"
get_text "$(task_prop "$tf" Report)" "$tmpd/full.txt"
assert_contains "$(grep '^Dataset: ' "$tmpd/full.txt")" "FULL" "the text says the dataset is full"
assert_contains "$(grep -E '^  stderr: ".*(No space left|Disk quota exceeded)' "$tmpd/full.txt")" '  stderr: "' \
  "as a quoted stderr detail line in the text"
assert_success "vivariumctl report verify accepts it" -- vivariumctl report verify "$tmpd/full.json"
assert_eq "active" "$(systemctl is-active vivariumd.service)" "the daemon is alive"
assert_eq "$other_head" "$(prop "$(project_path other)" Project Head)" "another project is untouched"
assert_contains "$(call "$(project_path other)" Project.Log "uint32 1" 2>&1)" "$other_head" "and answers"
assert_success "the state directory outside the projects takes writes" -- \
  sh -c "echo x > $STATE/tasks/.hostile-probe && rm $STATE/tasks/.hostile-probe"
assert_eq "0" "$(git_of full fsck >/dev/null 2>&1; echo $?)" "the full project's repository is consistent"
assert_eq "$(git_of full rev-parse HEAD)" "$(report_field "$tmpd/full.json" "r['commit']")" "and holds the report's commit"

# --- tampering: .git entries, a symlink to /etc/shadow, odd names --------------

repo=$STATE/projects/tamper/repo
state_of_repo () {  # the config and every hook, hashed
  (cd "$repo" && { sha256sum config; find hooks -type f -print0 | sort -z | xargs -0r sha256sum; find hooks | sort; })
}
before=$(state_of_repo)
marker=/var/tmp/vivarium-hostile-hook-ran
rm -f "$marker"
pyworker tamper "
exec_guest(r'''mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch $marker\\n' > .git/hooks/post-commit && chmod 755 .git/hooks/post-commit
printf '[core]\\n\\tworktree = /\\n\\thooksPath = /project/.git/hooks\\n' > .git/config
mkdir -p sub && printf 'gitdir: $repo\\n' > sub/.git
mkdir -p deep/er/.git/hooks && printf x > deep/er/.git/HEAD && echo nested > deep/er/file.txt
ln -s /etc/shadow shadow-link
printf ok > \"\$(printf 'new\\nline')\"
printf ok > \"\$(printf 'esc\\033[31mred')\"
printf ok > \"\$(printf 'bidi\\342\\200\\256txt')\"
echo plain > plain.txt''')
finish('tampered', 'test -L shadow-link')"
tt=$(submit tamper "$tmpd/tamper.py")
assert_contains "$tt" "$OBJ/tasks/" "submit the tampering task"
assert_eq "DONE" "$(wait_outcome "$tt" 600)" "the tampering task ends"
assert_eq "$before" "$(state_of_repo)" "the host repository's config and hooks are byte-identical"
assert_eq "no" "$([ -e "$marker" ] && echo yes || echo no)" "no hook ran"
get_json "$(task_prop "$tt" Report)" "$tmpd/tamper.json"
get_text "$(task_prop "$tt" Report)" "$tmpd/tamper.txt"
assert_eq "120000 /etc/shadow" \
  "$(git_of tamper ls-tree HEAD shadow-link | awk '{print $1}') $(git_of tamper cat-file -p HEAD:shadow-link)" \
  "the symlink is committed as a symlink, its target text only"
assert_eq "symlink added" "$(report_field "$tmpd/tamper.json" "[f['kind'] + ' ' + f['change'] for f in r['files'] if f['path'] == 'shadow-link'][0]")" \
  "and reported as a symlink"
assert_eq "0" "$(git_of tamper ls-tree -r --name-only HEAD | grep -c -E '(^|/)\.git(/|$)')" "no .git entry is committed"
assert_eq "nested" "$(git_of tamper show HEAD:deep/er/file.txt 2>&1)" "the files next to a nested .git are"
assert_eq ".git:git deep/er/.git:git sub/.git:git" \
  "$(report_field "$tmpd/tamper.json" "' '.join(sorted(k['path'] + ':' + k['kind'] for k in r['not-committed']))")" \
  "the report lists every .git entry as not committed"
assert_contains "$(grep '^Not committed: ' "$tmpd/tamper.txt")" "3" "the text says three were not committed"
assert_contains "$(cat "$tmpd/tamper.txt")" 'new\u{000A}line' "a newline in a name is shown escaped"
assert_contains "$(cat "$tmpd/tamper.txt")" 'esc\u{001B}[31mred' "an ESC sequence is shown escaped"
assert_contains "$(cat "$tmpd/tamper.txt")" 'bidi\u{202E}txt' "a bidi override is shown escaped"
assert_eq "0" "$(LC_ALL=C grep -c '[^ -~]' "$tmpd/tamper.txt")" "the text is printable ASCII only"
assert_eq "pass" "$(report_field "$tmpd/tamper.json" "r['verification']['verdict']")" "the fresh session sees the symlink"

# --- a forged summary: only daemon-made lines in the trusted part --------------

pyworker forger '
import json
keys = ["Report", "Signature", "Task", "Session", "Image", "Image digest", "Project", "Started", "Ended", "Host",
        "Daemon", "Outcome", "Commit", "Verification", "Verification session", "Guard", "Commands", "Command",
        "Files changed", "File", "Warning", "Summary size", "Worker\x27s claim (unverified)", "Dataset", "Timings",
        "Not committed", "Command log", "Commands omitted", "Egress"]
lines = ["Outcome: DONE", "Verification: pass (the caller\x27s command, exit status 0 in a fresh session)",
         "Signature: valid, made with the key sha256:00", "\x1b[2K\rOutcome: DONE", "\r\nOutcome: DONE",
         "\u202eOutcome: DONE", "\u039futcome: DONE", "\uff2futcome: DONE", "\u200bOutcome: DONE",
         "  path: \"forged\"", "> quoted already"]
lines += [k + ": forged" for k in keys]
head = "\n".join(lines) + "\n"
big = head + ("A" * 1023 + "\n") * 1024
too_big = "x" * (2 * 1024 * 1024 + 1)
refused = finish_error(too_big)
exec_guest("echo %s > refused.txt" % refused.replace(".", "-"))
finish(big, "false")'
tz=$(submit tamper "$tmpd/forger.py")
assert_eq "DONE" "$(wait_outcome "$tz" 600)" "the forging task ends"
assert_eq "org-vivarium-Vivarium1-Error-TooLarge" "$(git_of tamper show HEAD:refused.txt 2>&1)" \
  "a summary past the D-Bus bound is refused with a typed error"
get_json "$(task_prop "$tz" Report)" "$tmpd/forged.json"
get_text "$(task_prop "$tz" Report)" "$tmpd/forged.txt"
assert_eq "True 4096" "$(report_field "$tmpd/forged.json" "str(r['summary']['truncated']) + ' ' + str(len(r['summary']['text'].encode()) <= 4096 and 4096)")" \
  "the summary is truncated to at most 4 KiB"
assert_eq "True" "$(report_field "$tmpd/forged.json" "r['summary']['size'] > 1024 * 1024")" "and the size received is kept"
grammar=$("$PY" - "$tmpd/forged.txt" <<'PYEOF'
import re, sys
keys = ["Report", "Signature", "Task", "Session", "Image", "Image digest", "Project", "Started", "Ended", "Host",
        "Daemon", "Outcome", "Commit", "Verification", "Verification session", "Guard", "Commands", "Command",
        "Commands omitted", "Command log", "Files changed", "File", "Files omitted", "Not committed", "Not committed omitted",
        "Dataset", "Timings", "Egress", "Warning", "Summary size", "Worker's claim (unverified)",
        "Worker's question (unverified)"]
text = open(sys.argv[1], encoding="ascii").read()
lines = text.split("\n")[:-1]
claim_at = [i for i, l in enumerate(lines) if l.startswith("Worker's claim (unverified):")]
bad = []
if len(claim_at) != 1:
    bad.append("claim headers: %d" % len(claim_at))
trusted, claim = lines[:claim_at[0]], lines[claim_at[0] + 1:]
key_re = re.compile(r"^(%s):( [ -~]+)?$" % "|".join(re.escape(k) for k in keys))
for l in trusted:
    if not (l == "" or key_re.match(l) or re.match(r'^  [a-z]+: "([^"\\]|\\.)*"$', l)
            or re.match(r'^  argv:( "([^"\\]|\\.)*")*( \(truncated\))?$', l)):
        bad.append("trusted part: " + repr(l))
for l in claim:
    if not l.startswith("> "):
        bad.append("claim part: " + repr(l))
    if len(l) > 78:   # wrapped: nothing of the claim reaches column 0 of an 80-column terminal
        bad.append("claim line of %d columns" % len(l))
if sum(len(l) + 1 for l in claim) > 8 * 4096 + 4096:
    bad.append("claim block is %d bytes" % sum(len(l) + 1 for l in claim))
outcomes = [l for l in lines if l.startswith("Outcome:")]
if outcomes != ["Outcome: DONE"] or trusted.count("Outcome: DONE") != 1:
    bad.append("Outcome lines: %r" % outcomes)
if not any(l.startswith("Verification: fail") for l in trusted):
    bad.append("no failing Verification line")
print("\n".join(bad) if bad else "clean")
PYEOF
)
assert_eq "clean" "$grammar" "every line of the trusted part is a daemon-made line; every claim line is quoted"
assert_contains "$(grep '^Summary size: ' "$tmpd/forged.txt")" "truncated" "the text says the summary was truncated"
assert_contains "$(cat "$tmpd/forged.txt")" '> \u{001B}[2K\u{000D}Outcome: DONE' "an ANSI forgery is shown escaped, quoted"
assert_contains "$(cat "$tmpd/forged.txt")" '> \u{039F}utcome: DONE' "a look-alike is shown escaped, quoted"

# Timings: the daemon measured each phase.
assert_eq "commit queued report total verification work-session-start worker" \
  "$(busctl get-property "$BUS" "$tz" "$IFACE.Task" Timings | tr ' ' '\n' | grep -o '"[a-z-]*"' | tr -d '"' | sort | tr '\n' ' ' | sed 's/ $//')" \
  "Task.Timings names the phases"
assert_eq "True" "$(report_field "$tmpd/forged.json" "r['timings']['work-session-start'] > 0 and r['timings']['verification'] > 0")" \
  "the report holds the daemon's phase timings"

# --- publishing over ssh with the deploy key ------------------------------------

sshd_dir=$tmpd/sshd
mkdir -p "$sshd_dir" /run/sshd
guser=vivhostilegit
useradd -M -d "$sshd_dir" -s /bin/sh "$guser" || bail_out "cannot create the git user"
at_exit userdel -f "$guser"
usermod -p '*' "$guser"   # no password, but not locked: sshd refuses a locked account
ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_a"
ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/host_b"
prop "$(project_path tamper)" Project DeployKey > "$sshd_dir/authorized_keys"
git init -q --bare "$sshd_dir/repo.git"
chown -R "$guser:" "$sshd_dir/repo.git"
chmod 0644 "$sshd_dir/authorized_keys"
sshd_pid=
start_sshd () {  # HOSTKEY
  cat > "$sshd_dir/config" <<EOF
Port 2222
ListenAddress 127.0.0.1
HostKey $sshd_dir/$1
PidFile $sshd_dir/sshd.pid
AuthorizedKeysFile $sshd_dir/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers $guser
EOF
  /usr/sbin/sshd -D -f "$sshd_dir/config" -E "$sshd_dir/log" &
  sshd_pid=$!
  retry_until 40 0.25 bash -c "exec 3<>/dev/tcp/127.0.0.1/2222" 2>/dev/null
}
stop_sshd () { [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null && wait "$sshd_pid" 2>/dev/null; sshd_pid=; }
at_exit stop_sshd
start_sshd host_a
url="ssh://$guser@127.0.0.1:2222$sshd_dir/repo.git"
assert_success "SetRemote to the sshd" -- call "$(project_path tamper)" Project.SetRemote "$url"
out=$(call "$(project_path tamper)" Project.Publish 2>&1)
assert_eq "0" "$?" "Publish over ssh with the deploy key" "$out $(tail -5 "$sshd_dir/log")"
branch=$(git_of tamper symbolic-ref HEAD)
assert_eq "$(git_of tamper rev-parse HEAD)" "$(git --git-dir="$sshd_dir/repo.git" rev-parse "$branch" 2>&1)" \
  "the same commit is on the ssh remote, on the project's branch"
# Another project's key is not on the remote.
assert_success "SetRemote of another project" -- call "$(project_path other)" Project.SetRemote "$url"
refs_before=$(git --git-dir="$sshd_dir/repo.git" for-each-ref)
assert_dbus_error "$ERR.NotAuthorized" -- call "$(project_path other)" Project.Publish
assert_eq "$refs_before" "$(git --git-dir="$sshd_dir/repo.git" for-each-ref)" "a refused key changed nothing on the remote"
# The host key was pinned on first use: another host key is refused.
stop_sshd
start_sshd host_b
out=$(call "$(project_path tamper)" Project.Publish 2>&1)
assert_contains "$out" "$ERR." "a different host key is refused with a typed error"
assert_contains "$out" "host key" "saying it is the host key"
assert_eq "$refs_before" "$(git --git-dir="$sshd_dir/repo.git" for-each-ref)" "and nothing reached the remote"
stop_sshd

# --- the transfers run in a unit of their own, not in vivariumd -----------------

# vivariumd itself has no IP at all since the transfers left it.
families=$(systemctl show -P RestrictAddressFamilies "$UNIT")
assert_eq "AF_NETLINK AF_UNIX" "$(printf '%s' "$families" | tr ' ' '\n' | sort | xargs)" \
  "vivariumd.service: RestrictAddressFamilies=AF_UNIX AF_NETLINK ($families)"
deny=$(systemctl show -P IPAddressDeny "$UNIT")
assert_eq "0.0.0.0/0 ::/0" "$(printf '%s' "$deny" | tr ' ' '\n' | sort | xargs)" "vivariumd.service: IPAddressDeny=any ($deny)"
diag "vivariumd.service: $(systemd-analyze security --no-pager "$UNIT" 2>&1 | tail -n 1)"

# A clone (file://, under remotes/) is fetched in the unit and checked out by the daemon.
src=$tmpd/src
git init -q -b trunk "$src" && printf 'cloned\n' > "$src/README" && git -C "$src" add README &&
  git -C "$src" -c user.name=t -c user.email=t@t commit -q -m one || bail_out "cannot make the clone's source"
git clone -q --bare "$src" "$STATE/remotes/src.git" || bail_out "cannot make the clone's remote"
at_exit rm -rf "$STATE/remotes/src.git"
out=$(call "$OBJ" Manager.CreateProject cloned "uint64 $((64 * MIB))" "{'clone': <'file://$STATE/remotes/src.git'>}" 2>&1)
assert_contains "$out" "$(project_path cloned)" "a project cloned from a file:// remote ($out)"
assert_eq "$(git -C "$src" rev-parse HEAD)" "$(prop "$(project_path cloned)" Project Head)" "its Head is the remote's"
assert_eq "cloned" "$(cat "$STATE/projects/cloned/work/README" 2>&1)" "its tree holds the remote's file"
assert_eq "refs/heads/trunk" "$(git_of cloned symbolic-ref HEAD 2>&1)" "on the remote's default branch"
assert_eq "false" "$(git_of cloned config core.bare 2>&1)" "with its working tree"
journalctl --sync 2>/dev/null
assert_contains "$(journalctl --no-pager -o cat -u vivarium-git-transfer-cloned.service 2>&1)" "git clone for project cloned" \
  "the clone ran in vivarium-git-transfer-cloned.service (its journal)"

# An ssh:// clone, with the deploy key the project was just given: a
# remote that takes any key (AuthorizedKeysCommand prints the key offered)
# is cloned and checked out; one that knows no key refuses, the create
# fails NotAuthorized, and nothing of the project is left.
git clone -q --bare "$src" "$sshd_dir/src.git" && chown -R "$guser:" "$sshd_dir/src.git" ||
  bail_out "cannot make the ssh clone's remote"
start_clone_sshd () {  # NAME PORT [sshd_config lines…]
  local name=$1 port=$2
  shift 2
  { printf 'Port %s\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\n' "$port" "$sshd_dir/host_a" "$sshd_dir/sshd-$name.pid"
    printf 'StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nAllowUsers %s\n' "$guser"
    printf '%s\n' "$@"; } > "$sshd_dir/config-$name"
  /usr/sbin/sshd -D -f "$sshd_dir/config-$name" -E "$sshd_dir/log-$name" &
  clone_sshd_pid=$!
  retry_until 40 0.25 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
}
stop_clone_sshd () { [ -n "${clone_sshd_pid:-}" ] && kill "$clone_sshd_pid" 2>/dev/null && wait "$clone_sshd_pid" 2>/dev/null; clone_sshd_pid=; }
at_exit stop_clone_sshd
start_clone_sshd any 2224 "AuthorizedKeysFile none" "AuthorizedKeysCommand /bin/echo %t %k" \
  "AuthorizedKeysCommandUser nobody"
out=$(call "$OBJ" Manager.CreateProject sshcloned "uint64 $((64 * MIB))" \
  "{'clone': <'ssh://$guser@127.0.0.1:2224$sshd_dir/src.git'>}" 2>&1)
assert_contains "$out" "$(project_path sshcloned)" "a project cloned over ssh ($out $(tail -3 "$sshd_dir/log-any"))"
assert_eq "$(git -C "$src" rev-parse HEAD)" "$(prop "$(project_path sshcloned)" Project Head)" "its Head is the ssh remote's"
assert_eq "cloned" "$(cat "$STATE/projects/sshcloned/work/README" 2>&1)" "its tree holds the ssh remote's file"
assert_contains "$(grep 'Accepted publickey' "$sshd_dir/log-any" 2>&1)" \
  "$(ssh-keygen -lf "$STATE/keys/project-sshcloned.pub" 2>/dev/null | awk '{ print $2 }')" \
  "the remote took the project's own deploy key"
stop_clone_sshd
start_clone_sshd none 2224 "AuthorizedKeysFile none"
assert_dbus_error "$ERR.NotAuthorized" -- call "$OBJ" Manager.CreateProject refused "uint64 $((64 * MIB))" \
  "{'clone': <'ssh://$guser@127.0.0.1:2224$sshd_dir/src.git'>}"
assert_eq "" "$(ls -d "$STATE/projects/refused" "$STATE/keys/project-refused"* 2>/dev/null)" \
  "nothing of the refused clone is left: no project directory, no key"
listed=$(call "$OBJ" Manager.ListProjects 2>&1)
assert_contains "$listed" "$(project_path sshcloned)" "ListProjects answers ($listed)"
assert_not_contains "$listed" "$(project_path refused)" "and does not list the refused clone"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-git-transfer-*')" "no transfer unit is left"
stop_clone_sshd

# A push that stalls (the remote's sshd runs a sleep for every command) is
# seen running in its own unit; killed there, the publish fails with a typed
# error that says so, no unit is left, and the project still publishes.
cat > "$sshd_dir/config-stall" <<EOF
Port 2223
ListenAddress 127.0.0.1
HostKey $sshd_dir/host_a
PidFile $sshd_dir/sshd-stall.pid
AuthorizedKeysFile $sshd_dir/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers $guser
ForceCommand sleep 300
EOF
/usr/sbin/sshd -D -f "$sshd_dir/config-stall" -E "$sshd_dir/log-stall" &
stall_pid=$!
at_exit kill "$stall_pid"
retry_until 40 0.25 bash -c "exec 3<>/dev/tcp/127.0.0.1/2223" 2>/dev/null
tunit=vivarium-git-transfer-tamper.service
assert_success "SetRemote to the stalling sshd" -- \
  call "$(project_path tamper)" Project.SetRemote "ssh://$guser@127.0.0.1:2223$sshd_dir/repo.git"
call "$(project_path tamper)" Project.Publish > "$tmpd/stall.out" 2>&1 &
publish_pid=$!
# A oneshot is "activating" for as long as its program runs.
retry_until 80 0.25 bash -c "[ \"\$(systemctl show -P MainPID $tunit)\" -gt 0 ]"
assert_eq "activating start" "$(systemctl show -P ActiveState "$tunit") $(systemctl show -P SubState "$tunit")" \
  "the push runs in $tunit"
tpid=$(systemctl show -P MainPID "$tunit")
assert_ne "0" "$tpid" "with a main process of its own"
assert_ne "$(systemctl show -P MainPID "$UNIT")" "$tpid" "which is not vivariumd"
assert_contains "$(tr '\0' ' ' < "/proc/$tpid/cmdline" 2>&1)" "vivarium-git-transfer push" "it is vivarium-git-transfer"
assert_eq "0" "$(systemctl show -P CapabilityBoundingSet "$tunit" | wc -w)" "$tunit has no capability"
diag "$tunit: $(systemd-analyze security --no-pager "$tunit" 2>&1 | tail -n 1)"
assert_success "$tunit's exposure is at most 2.5 (1.6 on 2026-12-04)" -- \
  systemd-analyze security --no-pager --threshold=25 "$tunit"
kill -9 "$tpid"
wait "$publish_pid"
out=$(cat "$tmpd/stall.out")
assert_contains "$out" "$ERR.Failed" "killed mid-push, the publish fails with a typed error ($out)"
assert_contains "$out" "$tunit" "naming the unit"
assert_contains "$out" "SIGKILL" "and how it ended"
retry_until 40 0.25 test -z "$(systemctl list-units --all --plain --no-legend 'vivarium-git-transfer-*')"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-git-transfer-*')" "no transfer unit is left"
# The same stalled push with [Projects] TransferTimeoutSec=10: stopped at
# its limit, TimedOut naming the limit and the unit, no unit left.
tconf=/etc/vivarium/conf.d/50-test-transfer-timeout.conf
install -d -m 0755 /etc/vivarium/conf.d
printf '[Projects]\nTransferTimeoutSec=10\n' > "$tconf"
at_exit rm -f "$tconf"
systemctl restart vivariumd.service 2>/dev/null
refs_stall=$(git --git-dir="$sshd_dir/repo.git" for-each-ref)
t0=$(date +%s)
out=$(call "$(project_path tamper)" Project.Publish 2>&1)
took=$(( $(date +%s) - t0 ))
assert_contains "$out" "$ERR.TimedOut" "a push stalled past TransferTimeoutSec=10 fails TimedOut ($out)"
assert_contains "$out" "TransferTimeoutSec" "naming the limit"
assert_contains "$out" "$tunit" "and the unit"
assert_success "it was stopped at its limit, not at the default 30 min ($took s)" -- test "$took" -ge 10 -a "$took" -lt 120
retry_until 40 0.25 test -z "$(systemctl list-units --all --plain --no-legend 'vivarium-git-transfer-*')"
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-git-transfer-*')" "no transfer unit is left after the timeout"
assert_eq "$refs_stall" "$(git --git-dir="$sshd_dir/repo.git" for-each-ref)" "and the remote is as it was"
rm -f "$tconf"
systemctl restart vivariumd.service 2>/dev/null
kill "$stall_pid" 2>/dev/null; wait "$stall_pid" 2>/dev/null
start_sshd host_a
assert_success "SetRemote back to the sshd" -- call "$(project_path tamper)" Project.SetRemote "$url"
out=$(call "$(project_path tamper)" Project.Publish 2>&1)
assert_eq "0" "$?" "the project publishes again after the killed push" "$out $(tail -5 "$sshd_dir/log")"
stop_sshd

# The deploy key never reaches the dataset, the guest or the worker.
key=$STATE/keys/project-tamper
assert_success "the deploy key exists, root's alone" -- test "$(stat -c %a:%u "$key")" = 600:0
body=$(grep -v -- '-----' "$key" | tr -d '\n' | cut -c 1-40)
assert_ne "" "$body" "the key's body (test setup)"
pyworker snoop "
import os, subprocess
env = '\\n'.join(k + '=' + v for k, v in os.environ.items())
try:
    open('$key').read()
    readable = 'readable'
except OSError as e:
    readable = 'refused'
exec_guest('cat > worker-env.txt <<EOF\\n' + env + '\\n' + readable + '\\nEOF\\n(env; cat /proc/*/environ) > guest-env.txt 2>/dev/null; ls -la / > guest-root.txt')
finish('snooped', '')"
ts=$(submit tamper "$tmpd/snoop.py")
assert_eq "DONE" "$(wait_outcome "$ts" 600)" "the snooping task ends"
assert_contains "$(git_of tamper show HEAD:worker-env.txt 2>&1)" "refused" "the worker cannot read the deploy key"
assert_eq "0" "$(git_of tamper show HEAD:worker-env.txt HEAD:guest-env.txt HEAD:guest-root.txt 2>&1 | grep -c -F -- "$body")" \
  "the key is in neither the worker's environment nor the guest's"
assert_eq "" "$(grep -r -l -F -- "$body" "$STATE/projects/tamper/work" 2>&1)" "nor anywhere in the dataset"

for p in bad full tamper other; do
  assert_success "delete project $p" -- retry_until 20 0.5 call "$(project_path "$p")" Project.Delete
done
assert_success "no worker unit is left" -- retry_until 20 0.5 no_worker_unit

done_testing
