#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# SSH keys never enter the machine (docs/secrets.md, "SSH keys"), from inside
# a real guest on a real systemd host: two ed25519 keys made here, one (A)
# stored with AddSshKey; an allowlist session that names A speaks the agent
# protocol over TCP to 10.0.2.100:7022 with busybox nc (the bytes built here
# from the .pub blobs, the answers read back with od). Its identities are
# exactly A; a sign request with A is answered SIGN_RESPONSE and the
# signature verifies with openssl against A's public key; one with B, and
# an add request, are FAILURE and the agent still holds only A; the
# decision log has the signature with A's fingerprint; the private key is
# nowhere in the guest; SSH_AUTH_SOCK is in every Exec's environment; no
# ssh-agent outlives the session.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-ssh-agent.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly AGENT=10.0.2.100
session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
readonly DATA='vivarium ssh-agent test: a session id and a userauth request'

require_systemd_host vivariumctl busctl jq ssh-keygen ssh-agent ssh-add openssl "$PY"
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"

tmpd=$(mktemp -d /var/tmp/test-ssh-agent.XXXXXX) || bail_out "cannot create a scratch directory"
at_exit rm -rf "$tmpd"
journal_at_exit

stop_quietly () { ctl session stop "$1" >/dev/null 2>&1 || true; }

# --- 1. two keys; A stored ----------------------------------------------------

for k in A B; do
  ssh-keygen -q -t ed25519 -N '' -C "test key $k" -f "$tmpd/$k" || bail_out "ssh-keygen $k"
done
fp_a=$(ssh-keygen -l -E sha256 -f "$tmpd/A.pub" | awk '{ print $2 }')
# The private key's first line of base64: what must appear nowhere.
needle=$(sed -n 2p "$tmpd/A" | cut -c 1-40)

out=$(ctl ssh-key add A --key-file "$tmpd/A" 2>&1)
assert_eq 0 "$?" "ssh-key add A" "$out"
at_exit ctl ssh-key remove A
listed=$(ctl ssh-key list --json 2>&1)
assert_eq "$fp_a" "$(jq -r '.[] | select(.name == "A") | .fingerprint' <<<"$listed" 2>&1)" \
  "ssh-key list shows A's fingerprint as ssh-keygen -l prints it" "$listed"
assert_not_contains "$listed" "$needle" "and never its private key"

create_test_user user || bail_out "cannot create a test user"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction ssh-key list
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction ssh-key remove A
out=$(ctl ssh-key add A --key-file "$tmpd/B" 2>&1)
assert_contains "$out" "$ERR.Exists" "a second key named A is Exists"

# --- 2. a frozen tiny image, an allowlist session with A ----------------------

build_out=$(ctl image build tiny tiny 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze tiny

# The project's default keys (Project.SetSshKeys): checked against the
# store, admin only, and what a session of the project gets without
# --ssh-key.
out=$(call "$OBJ" Manager.CreateProject keys "uint64 $((32 * 1024 * 1024))" "{}" 2>&1)
assert_contains "$out" "objectpath '$OBJ/projects/keys'" "create the project keys"
out=$(ctl project set keys ssh_keys=C 2>&1)
assert_contains "$out" "$ERR.NotFound" "a project's default key that is not stored is NotFound" "$out"
out=$(ctl project set keys ssh_keys=A,A 2>&1)
assert_contains "$out" "$ERR.InvalidArgument" "a key named twice is InvalidArgument" "$out"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction project set keys ssh_keys=A
out=$(ctl project set keys ssh_keys=A 2>&1)
assert_eq "Project “keys”: SSH keys A." "$out" "project set keys ssh_keys=A"
assert_contains "$(ctl project show keys 2>&1)" "A" "project show lists the default key"
assert_contains "$(busctl get-property "$BUS" "$OBJ/projects/keys" "$IFACE.Project" SshKeys 2>&1)" '"A"' \
  "Project.SshKeys is [A]"
assert_contains "$(jq -c .ssh_keys "$STATE/projects/keys/project.json" 2>&1)" '"A"' \
  "and it is kept in the project's record"

out=$(ctl session start tiny --project keys --egress open 2>&1)
assert_eq 0 "$?" "an open session of the project starts: the default applies to allowlist only" "$out"
osid=$(tail -n 1 <<<"$out")
assert_contains "$(busctl get-property "$BUS" "$(session_path "$osid")" "$IFACE.Session" SshKeys 2>&1)" 'as 0' \
  "and its Session.SshKeys is empty"
assert_success "stop it" -- ctl session stop "$osid"

out=$(ctl session start tiny --project keys --egress allowlist --allow example.test:443 2>&1)
assert_eq 0 "$?" "start an allowlist session of the project, no --ssh-key" "$out"
sid=$(tail -n 1 <<<"$out")
[ -n "$sid" ] || bail_out "no session id in: $out"
at_exit stop_quietly "$sid"
assert_contains "$(busctl get-property "$BUS" "$(session_path "$sid")" "$IFACE.Session" SshKeys 2>&1)" '1 "A"' \
  "Session.SshKeys names A, the project's default"
assert_contains "$(ctl session show "$sid" 2>&1 | grep '^SSH keys:')" "A" "session show prints SSH keys: A"
edir=/run/vivarium/egress/$sid
unit=vivarium-egress-$sid.service

guest () { ctl session exec "$sid" --timeout 60 -- sh -c "$1" 2>&1; }
# agent BYTES: BYTES (printf escapes) to the agent's door, the answer in hex.
agent () { guest "{ printf '$1'; sleep 3; } | timeout 8 nc $AGENT 7022 | od -An -tx1 | tr -s ' \n' '  '"; }

# The agent's messages, built from the .pub files: escapes for printf in
# the guest; and the answers judged.
msg () {  # identities | sign PUB | add PRIVATE
  "$PY" - "$@" "$DATA" <<'PYEOF'
import base64, struct, sys
def s(b): return struct.pack('!I', len(b)) + b
def esc(b): return ''.join('\\%03o' % c for c in struct.pack('!I', len(b)) + b)
kind = sys.argv[1]
if kind == 'identities':
    print(esc(b'\x0b'))
elif kind == 'sign':
    blob = base64.b64decode(open(sys.argv[2]).read().split()[1])
    print(esc(b'\x0d' + s(blob) + s(sys.argv[3].encode()) + struct.pack('!I', 0)))
elif kind == 'add':
    # SSH2_AGENTC_ADD_IDENTITY with key B itself, taken from its openssh-key-v1
    # file (unencrypted): a request a real agent would accept.
    lines = open(sys.argv[2]).read().strip().split('\n')
    raw = base64.b64decode(''.join(lines[1:-1]))
    assert raw.startswith(b'openssh-key-v1\0')
    i = len(b'openssh-key-v1\0')
    def take():
        global i
        n = struct.unpack('!I', raw[i:i + 4])[0]
        i += 4 + n
        return raw[i - n:i]
    take(); take(); take()            # cipher "none", kdf "none", kdf options
    i += 4                            # one key
    take()                            # its public blob
    priv = take()
    j = 8                             # two check words
    def ptake():
        global j
        n = struct.unpack('!I', priv[j:j + 4])[0]
        j += 4 + n
        return priv[j - n:j]
    ktype, pub, sk, comment = ptake(), ptake(), ptake(), ptake()
    print(esc(b'\x11' + s(ktype) + s(pub) + s(sk) + s(comment)))
PYEOF
}
judge () {  # identities PUB HEX | sign-ok PUB HEX | failure HEX(answers…)
  "$PY" - "$@" "$DATA" "$tmpd" <<'PYEOF'
import base64, os, struct, subprocess, sys
kind, args = sys.argv[1], sys.argv[2:]
def answers(hexs):
    b = bytes(int(x, 16) for x in hexs.split())
    out = []
    while len(b) >= 4:
        n = struct.unpack('!I', b[:4])[0]
        out.append(b[4:4 + n])
        b = b[4 + n:]
    return out
try:
    if kind == 'identities':
        blob = base64.b64decode(open(args[0]).read().split()[1])
        a = answers(args[1])[-1]
        assert a[0] == 12, 'type %d' % a[0]
        count = struct.unpack('!I', a[1:5])[0]
        n = struct.unpack('!I', a[5:9])[0]
        print('count=%d match=%s' % (count, a[9:9 + n] == blob))
    elif kind == 'sign-ok':
        blob = base64.b64decode(open(args[0]).read().split()[1])
        a = answers(args[1])[0]
        assert a[0] == 14, 'type %d' % a[0]
        sig = a[5:]
        t = struct.unpack('!I', sig[:4])[0]
        assert sig[4:4 + t] == b'ssh-ed25519'
        raw = sig[4 + t + 4:4 + t + 4 + 64]
        pub = blob[-32:]
        d = args[3]
        open(d + '/pub.pem', 'w').write('-----BEGIN PUBLIC KEY-----\n' +
            base64.b64encode(bytes.fromhex('302a300506032b6570032100') + pub).decode() + '\n-----END PUBLIC KEY-----\n')
        open(d + '/data', 'wb').write(args[2].encode())
        open(d + '/sig', 'wb').write(raw)
        r = subprocess.run(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey', d + '/pub.pem', '-rawin',
                            '-in', d + '/data', '-sigfile', d + '/sig'], capture_output=True, text=True)
        print('verified' if r.returncode == 0 else 'not verified: ' + r.stdout + r.stderr)
    elif kind == 'failure':
        print(' '.join(a.hex() for a in answers(args[0])))
except (AssertionError, IndexError, ValueError, struct.error) as e:
    print('no answer: %s' % e)
PYEOF
}

# --- 3. the guest's side --------------------------------------------------------

out=$(guest 'echo "$SSH_AUTH_SOCK"')
assert_eq "/run/vivarium-ssh-agent.sock" "$out" "every Exec has SSH_AUTH_SOCK"
assert_eq "no" "$(test -e "$edir/ssh-keys" && echo yes || echo no)" "the proxy removed DIR/ssh-keys once read"

hex=$(agent "$(msg identities)")
assert_eq "count=1 match=True" "$(judge identities "$tmpd/A.pub" "$hex")" "the agent lists exactly key A" "$hex"

hex=$(agent "$(msg sign "$tmpd/A.pub")")
assert_eq "verified" "$(judge sign-ok "$tmpd/A.pub" "$hex")" \
  "a sign request with A is a SIGN_RESPONSE whose signature openssl verifies with A's public key" "$hex"

hex=$(agent "$(msg sign "$tmpd/B.pub")")
assert_eq "05" "$(judge failure "$hex")" "a sign request with B is SSH_AGENT_FAILURE" "$hex"

# An add request, then the identities, on one connection.
hex=$(agent "$(msg add "$tmpd/B")$(msg identities)")
assert_eq "05" "$(judge failure "$hex" | awk '{ print $1 }')" "an add-identity request with key B is SSH_AGENT_FAILURE" "$hex"
assert_eq "count=1 match=True" "$(judge identities "$tmpd/A.pub" "$hex")" "and the agent still holds only A" "$hex"

# --- 4. the decision log, the private key, the agent process ---------------------

log=$(jq -c '.[] | select(.host == "ssh-agent")' "$edir/decisions.jsonl" 2>&1 || cat "$edir/decisions.jsonl" 2>&1)
log=$(grep '"host":"ssh-agent"' "$edir/decisions.jsonl" 2>&1)
assert_contains "$log" "\"port\":7022,\"via\":\"ssh-agent\",\"verdict\":\"allowed\",\"reason\":\"signed with ssh key A ($fp_a)\"" \
  "the decision log has the signature with A's fingerprint"
assert_contains "$log" "\"verdict\":\"denied\",\"reason\":\"ssh-agent refused a sign request for a key the session does not name\"" \
  "and B's request denied"
assert_contains "$log" "\"verdict\":\"denied\",\"reason\":\"ssh-agent refused a request to add a key" "and the add denied"

# The needle goes in as two halves joined in the guest, so that no command
# line of the check holds it whole: the processes' environments and command
# lines are copied first (by a cat whose own argv does not hold it), then
# searched, then the files.
find_key='n="'"${needle:0:20}"'""'"${needle:20}"'"
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline > /tmp/vt-procs 2>/dev/null
grep -c "$n" /tmp/vt-procs
for d in /bin /etc /home /mnt /opt /root /run /sbin /srv /tmp /usr /var; do
  [ -d $d ] && grep -rlsF "$n" $d; done'
# The positive control: the same search finds the key where it is.
out=$(guest "printf '%s%s\n' '${needle:0:20}' '${needle:20}' > /root/vt-control
$find_key")
assert_contains "$out" "/root/vt-control" "the search finds the key in a file where it is put (the control)"
guest 'rm -f /root/vt-control' >/dev/null
out=$(guest "$find_key")
assert_eq "0" "$out" "the private key is nowhere in the guest (files, environments, command lines)"

apid=$(systemctl show -P MainPID "$unit")
agent_pids=$(pgrep -f "^ssh-agent -D -a $edir/.agent/agent.sock")
assert_ne "" "$agent_pids" "a real ssh-agent serves the session"
in_unit=yes
for p in $agent_pids; do
  grep -q "$unit" "/proc/$p/cgroup" || in_unit=no
done
assert_eq "yes" "$in_unit" "in the proxy's unit (proxy pid $apid)"
assert_eq "$(stat -c %u "/proc/$apid")" "$(stat -c %u "/proc/${agent_pids%% *}")" "as the proxy's uid"
assert_eq "700" "$(stat -c %a "$edir/.agent")" "its directory is the proxy's alone"

assert_success "stop the session" -- ctl session stop "$sid"
retry_until 20 0.5 sh -c "! pgrep -f '^ssh-agent -D -a $edir/' >/dev/null"
assert_eq "" "$(pgrep -f "^ssh-agent -D -a $edir/")" "no ssh-agent outlives the session"

done_testing
