#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The `debian` image for real work, on a real systemd host with real QEMU
# (TCG): the daemon builds it with debootstrap from the packages
# test-debian-fetch.sh downloaded outside (the host has no network), freezes
# it with its boot snapshot, and then a script task runs a small Python
# project's tests in it, and an agent task (vivarium-agent against the scripted
# model server, tests/agent/scripted-model.py) finds a failing test, fixes
# the code and ends DONE with the caller's verification passing in a fresh
# machine; the signed report verifies offline. Prints the figures
# (build, freeze, cold and restored start, the guest's PSS) as diagnostics.
#   tests/system/test-debian-fetch.sh BUILDDIR tests/system/vivarium-test-host tests/system/test-debian.sh
#   (with VIVARIUM_TEST_BTRFS=768M)

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly DEB=debian
readonly CACHE=/var/cache/vivarium/debootstrap
readonly KEY=vivarium-test-key-5b0e21c4
pkgdir=${VIVARIUM_TEST_DEBIAN_PACKAGES:-}

require_systemd_host vivariumctl gdbus busctl git bc ssh-keygen "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
{ [ -n "$pkgdir" ] && compgen -G "$pkgdir/$DEB-*.tgz" >/dev/null; } ||
  bail_out "no debian package tarball: run me through tests/system/test-debian-fetch.sh"

now () { printf '%s' "$EPOCHREALTIME"; }
since () { echo "$(now) - $1" | bc; }
git_of () { local p=$1; shift; git --git-dir="$STATE/projects/$p/repo" "$@"; }
session_mode () { busctl get-property "$BUS" "$OBJ/sessions/$1" "$IFACE.Session" StartMode | cut -d' ' -f2 | tr -d '"'; }

tmpd=$(mktemp -d /var/tmp/vivarium-debian.XXXXXX)
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service vivarium-gateway.service 'vivarium-worker-*' 'vivarium-build-*' 'vivarium-session-*'

# --- build, from the tarball: the builder downloads nothing ---------------------------

install -d -m 0755 "$CACHE"
at_exit rm -rf "$CACHE"
for f in "$pkgdir/$DEB"-*.tgz; do ln -s "$f" "$CACHE/${f##*/}"; done
t0=$(now)
build_out=$(ctl image build "$DEB" "$DEB" 2>&1)
rc=$?
assert_eq "0" "$rc" "the daemon builds the debian image"
[ "$rc" = 0 ] || { diag "$(printf '%s\n' "$build_out" | tail -n 20)"; bail_out "no debian image, nothing else can run"; }
build_s=$(since "$t0")
blog=$(cat "$STATE/images/$DEB/build.log" 2>&1)
assert_contains "$blog" "(made by --make-tarball); no download" "the builder took its packages from the tarball"
assert_not_contains "$blog" "Retrieving " "and retrieved nothing from a mirror"
diag "$(printf 'build (debootstrap from the tarball, configure, ext4, qcow2): %.1f s; disk.qcow2 %d MiB' "$build_s" \
  "$(($(stat -c %s "$STATE/images/$DEB/disk.qcow2") / MIB))")"

t0=$(now)
freeze_out=$(ctl image freeze "$DEB" 2>&1)
rc=$?
assert_eq "0" "$rc" "freeze it: one cold boot of a full systemd, then the boot snapshot"
if [ "$rc" != 0 ]; then
  diag "$freeze_out"
  # Sessions have no serial console: boot the image by hand, with one, to say why.
  diag "$("$SRC/tests/system/boot-tiny-by-hand.sh" "$STATE/images/$DEB" 2>&1 | tail -n 45)"
  bail_out "the debian image did not freeze"
fi
freeze_s=$(since "$t0")
img=$STATE/images/$DEB
assert_success "the frozen image verifies" -- ctl image verify "$DEB"
diag "$(printf 'freeze: %.1f s (guest booted in %.1f s, boot.state %d MiB saved in %.2f s)' "$freeze_s" \
  "$(grep -o '"boot-usec" *: *[0-9]*' "$img/boot.json" | grep -o '[0-9]*$' | awk '{ print $1 / 1e6 }')" \
  "$(($(stat -c %s "$img/boot.state" 2>/dev/null || echo 0) / MIB))" \
  "$(grep -o '"save-usec" *: *[0-9]*' "$img/boot.json" | grep -o '[0-9]*$' | awk '{ print $1 / 1e6 }')")"

# --- a session: restored from the snapshot, the tools of the recipe --------------------

t0=$(now)
sid=$(ctl session start "$DEB" 2>&1)
first=$(ctl session exec "$sid" -- true 2>&1)
restored_s=$(since "$t0")
assert_eq "restored" "$(session_mode "$sid")" "a session starts from the boot snapshot" "$sid $first"
qpid=$(systemctl show -P MainPID "vivarium-session-$sid.service")
pss=$(awk '/^Pss:/ { print int($2 / 1024) }' "/proc/$qpid/smaps_rollup" 2>/dev/null)
tools=$(ctl session exec "$sid" -- sh -c 'python3 --version; git --version; gcc --version | head -n 1; make --version | head -n 1; ls /etc/ssl/certs/ca-certificates.crt; systemctl is-system-running' 2>&1)
assert_contains "$tools" "Python 3.11" "the guest has python3"
assert_contains "$tools" "git version" "and git"
assert_contains "$tools" "gcc (Debian" "and a compiler (build-essential)"
assert_contains "$tools" "GNU Make" "and make"
assert_contains "$tools" "ca-certificates.crt" "and the CA certificates"
diag "guest's systemd: $(printf '%s\n' "$tools" | tail -n 1)"
ctl session stop "$sid" >/dev/null 2>&1
# Cold: another memory size than the snapshot's, so the daemon boots it.
t0=$(now)
cid=$(ctl session start --memory 520 "$DEB" 2>&1)
cfirst=$(ctl session exec "$cid" -- true 2>&1)
cold_s=$(since "$t0")
assert_eq "cold" "$(session_mode "$cid")" "a session of another memory size boots cold" "$cid $cfirst"
ctl session stop "$cid" >/dev/null 2>&1
diag "$(printf 'start → first exec: cold %.1f s, restored %.2f s; restored QEMU PSS %s MiB (512 MiB guest)' \
  "$cold_s" "$restored_s" "$pss")"

# --- SSH keys: $SSH_AUTH_SOCK in a guest with socat and OpenSSH's own client ------------
# (system-ssh-agent speaks the agent protocol by hand in tiny; here ssh-add,
# unchanged, through the unix socket the egress set-up makes with socat.)

ssh-keygen -q -t ed25519 -N '' -C "debian test key" -f "$tmpd/deb_key" || bail_out "ssh-keygen"
fp=$(ssh-keygen -l -E sha256 -f "$tmpd/deb_key.pub" | awk '{ print $2 }')
assert_success "ssh-key add deb_key" -- ctl ssh-key add deb_key --key-file "$tmpd/deb_key"
at_exit ctl ssh-key remove deb_key
out=$(ctl session start "$DEB" --egress allowlist --allow example.test:443 --ssh-key deb_key 2>&1)
kid=$(tail -n 1 <<<"$out")
assert_eq "yes" "$([[ $kid =~ ^[0-9a-f]+$ ]] && echo yes)" "an allowlist session with --ssh-key deb_key starts" "$out"
at_exit ctl session stop "$kid"
keys=$(ctl session exec "$kid" --timeout 60 -- sh -c 'echo "sock=$SSH_AUTH_SOCK"; test -S "$SSH_AUTH_SOCK" && echo is-socket; ssh-add -l -E sha256; echo "rc=$?"' 2>&1)
assert_contains "$keys" "sock=/run/vivarium-ssh-agent.sock" "Exec's environment names the agent's socket"
assert_contains "$keys" "is-socket" "and socat made it a unix socket in the guest" "$keys"
assert_contains "$keys" "$fp" "ssh-add -l in the guest lists the key by the fingerprint ssh-keygen prints on the host" "$keys"
assert_contains "$keys" "rc=0" "and succeeds"
assert_eq "no" "$(ctl session exec "$kid" -- sh -c 'grep -rl "OPENSSH PRIVATE KEY" /root /home /tmp /run 2>/dev/null | head -n 1 | grep -q . && echo yes || echo no' 2>&1)" \
  "no private key is anywhere in the guest"
removed=$(ctl session exec "$kid" --timeout 60 -- sh -c 'ssh-add -D; echo "rc=$?"; ssh-add -l -E sha256' 2>&1)
assert_contains "$removed" "rc=1" "ssh-add -D (remove every key) is refused by the agent" "$removed"
assert_contains "$removed" "$fp" "and the key is still listed after it"
ctl session stop "$kid" >/dev/null 2>&1

# --- a Python project in a remote the daemon clones -------------------------------------

make_python_project () {  # NAME BUG(0|1): a remote under STATE/remotes with calc.py and its tests
  local w=$tmpd/$1.work op='+'
  [ "$2" = 1 ] && op='-'
  mkdir -p "$w/tests"
  printf 'def add(a, b):\n    return a %s b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n' "$op" > "$w/calc.py"
  cat > "$w/tests/test_calc.py" <<'PYEOF'
import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(calc.mean([1, 2, 3, 6]), 3)


if __name__ == '__main__':
    unittest.main()
PYEOF
  git init -q -b main "$w" && git -C "$w" add -A &&
    git -C "$w" -c user.name=test -c user.email=test@invalid commit -q -m "calc and its tests" &&
    git clone -q --bare "$w" "$STATE/remotes/$1.git" || return 1
  at_exit rm -rf "$STATE/remotes/$1.git"
}
readonly UNITTEST="python3 -B -m unittest discover -s tests -v"
assert_success "a Python project with passing tests" -- make_python_project pycalc 0
assert_success "and one with a failing test" -- make_python_project pyfix 1
assert_success "the daemon clones the first" -- ctl project create pycalc --quota 64M --clone "file://$STATE/remotes/pycalc.git"
assert_success "and the second" -- ctl project create pyfix --quota 64M --clone "file://$STATE/remotes/pyfix.git"

# --- (a) a script task runs the project's tests in the guest --------------------------------

cat > "$tmpd/run-tests.sh" <<EOF
#!/bin/sh
set -e
vivariumctl worker exec --cwd /project -- sh -c '$UNITTEST > unittest.log 2>&1'
vivariumctl worker exec --cwd /project -- sh -c 'git --version > toolchain.txt && gcc --version | head -n 1 >> toolchain.txt'
vivariumctl worker finish --summary "The tests pass; their output is in unittest.log." --verify "grep -q '^OK' unittest.log"
EOF
t0=$(now)
ta=$(ctl task submit pycalc "$DEB" --script "$tmpd/run-tests.sh" --instructions "Run the tests." --verify "$UNITTEST" 2>&1)
assert_eq "yes" "$([[ $ta =~ ^[0-9a-z]+$ ]] && echo yes)" "submit the script task" "$ta"
assert_success "the script task ends DONE" -- ctl task wait "$ta" --timeout 600
ta_s=$(since "$t0")
ctl task report "$ta" --json > "$tmpd/a.json" 2>&1
assert_eq "pass caller" "$(report_field "$tmpd/a.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the caller's unittest run passed in a fresh machine"
commit=$(report_field "$tmpd/a.json" "r['commit']")
log=$(git_of pycalc show "$commit:unittest.log" 2>&1)
assert_contains "$log" "Ran 2 tests" "the guest ran the project's two tests (committed unittest.log)" "$log"
assert_contains "$log" "OK" "and they passed"
assert_contains "$(git_of pycalc show "$commit:toolchain.txt" 2>&1)" "gcc (Debian" "the guest's toolchain is Debian's"
assert_eq "" "$(git_of pycalc show --name-only --format= "$commit" | grep __pycache__)" "no byte code was committed"
assert_success "its signed report verifies" -- ctl report verify "$tmpd/a.json"

# --- (b) an agent task fixes the failing test -----------------------------------------------

port=$((20000 + RANDOM % 20000))
"$PY" - "$tmpd/conversations.json" "$MODEL" "$KEY" "$UNITTEST" <<'PYEOF'
import json, sys
path, model, key, unittest = sys.argv[1:5]
argv = unittest.split()
fixed = 'def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n'
conv = [
    {"expect": ["[conversation: fix-python]"],
     "reply": {"content": "First, the tests.", "tool_calls": [{"function": {"name": "exec", "arguments": {"argv": argv}}}]}},
    {"expect_fields": {"exit_status": 1}, "expect": ["FAIL: test_add", "AssertionError: -1 != 5"],
     "reply": {"tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "/project/calc.py"}}}]}},
    {"expect": ["return a - b"],
     "reply": {"content": "add subtracts. Fixing it.",
               "tool_calls": [{"function": {"name": "write_file", "arguments": {"path": "/project/calc.py", "content": fixed}}}]}},
    {"expect": ["\"written\""],
     "reply": {"tool_calls": [{"function": {"name": "exec", "arguments": {"argv": argv}}}]}},
    {"expect_fields": {"exit_status": 0}, "expect": ["Ran 2 tests", "OK"],
     "reply": {"tool_calls": [{"function": {"name": "finish", "arguments": {
         "summary": "calc.add subtracted; it adds now and both tests pass.", "verify_command": unittest}}}]}},
]
json.dump({"model": model, "authorization": "Bearer " + key, "conversations": {"fix-python": conv}}, open(path, 'w'))
PYEOF
: > "$tmpd/failures"
"$PY" "$SRC/tests/agent/scripted-model.py" --port "$port" --conversations "$tmpd/conversations.json" \
  --failures "$tmpd/failures" --log "$tmpd/requests" > "$tmpd/model.out" 2>&1 &
model_pid=$!
at_exit kill "$model_pid"
retry_until 50 0.1 grep -q ready "$tmpd/model.out" || bail_out "the scripted model server did not start: $(cat "$tmpd/model.out")"
install -d -m 0755 /etc/vivarium/conf.d
install -m 0600 /dev/null /etc/vivarium/debian-test.key
printf '%s\n' "$KEY" > /etc/vivarium/debian-test.key
at_exit rm -f /etc/vivarium/debian-test.key
printf '[Agent]\nEndpoint=http://127.0.0.1:%s/v1\nModel=%s\nKeyFile=/etc/vivarium/debian-test.key\n' "$port" "$MODEL" \
  > /etc/vivarium/conf.d/50-debian-test.conf
at_exit rm -f /etc/vivarium/conf.d/50-debian-test.conf
systemctl restart vivariumd.service 2>/dev/null
systemctl stop vivarium-gateway.service 2>/dev/null

t0=$(now)
tb=$(ctl task submit pyfix "$DEB" --agent --instructions "Make the tests pass. [conversation: fix-python]" \
       --verify "$UNITTEST" 2>&1)
assert_eq "yes" "$([[ $tb =~ ^[0-9a-z]+$ ]] && echo yes)" "submit the agent task" "$tb"
assert_success "the agent task ends DONE" -- ctl task wait "$tb" --timeout 900
tb_s=$(since "$t0")
ctl task report "$tb" --json > "$tmpd/b.json" 2>&1
assert_eq "pass caller" "$(report_field "$tmpd/b.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the caller's unittest run passed in a fresh machine on the agent's commit"
commit=$(report_field "$tmpd/b.json" "r['commit']")
assert_contains "$(git_of pyfix show "$commit:calc.py" 2>&1)" "return a + b" "the fix is committed"
assert_eq "calc.py" "$(git_of pyfix show --name-only --format= "$commit" 2>&1)" "and it is the only file changed"
assert_contains "$(report_field "$tmpd/b.json" "' | '.join('%s=%s' % (' '.join(c['argv']), c['exit-status']) for c in r['commands'])")" \
  "unittest discover -s tests -v=1" "the report lists the agent's failing run"
assert_eq "0" "$(grep -c . "$tmpd/failures")" "every request the model server got was the one it expected (the guest's real test output)" \
  "$(cat "$tmpd/failures")"
assert_success "its signed report verifies" -- ctl report verify "$tmpd/b.json"
sed -i 's/calc.add subtracted/calc.add was fine/' "$tmpd/b.json"
assert_ne "0" "$(ctl report verify "$tmpd/b.json" >/dev/null 2>&1; echo $?)" "a report changed by one word does not"
diag "$(printf 'tasks, submit → DONE: script (unittest) %.1f s, agent (fix a failing test) %.1f s' "$ta_s" "$tb_s")"

done_testing
