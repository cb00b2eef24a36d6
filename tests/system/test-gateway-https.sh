#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The model gateway to a model over HTTPS by name, its key a secret of the
# daemon's store, on a real systemd host with real QEMU: the scripted model
# server (tests/agent/scripted-model.py) serves TLS inside lib.sh's pretend
# internet (a network namespace on TEST-NET-3, private to the test host), on
# model.test (/etc/hosts), with a certificate from the test's own CA:
#   1. an agent task reaches it through the gateway by name and ends DONE; the
#      server saw the secret's value in the secret's header on every request;
#      the gateway's unit's firewall allows the resolver and the name's
#      address only, and follows the name when it moves (resolved again at
#      each connection); the value is in no log, report, transcript or file
#      of the task;
#   2. the wrong CA: the task ends FAILED with the gateway's sentence, and
#      the server saw nothing;
#   3. a name that resolves into a denied range (rebind.test → 10.0.0.5): the
#      task ends FAILED with the gateway's sentence, the firewall never
#      allowed the address;
#   4. refusals at start: KeyFile= and KeySecret= both set; a secret for
#      another host than the endpoint's.
#   VIVARIUM_TEST_BTRFS=768M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-gateway-https.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly CONF=/etc/vivarium/conf.d/50-gateway-https.conf
readonly SECRET_DIR=$STATE/secrets
readonly NAME_ADDR=203.0.113.11     # model.test, then
readonly MOVED_ADDR=203.0.113.12    # model.test, after it moved
readonly PORT=8443

require_systemd_host vivariumctl gdbus busctl git setpriv openssl nsenter "$PY"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"
[ -x /usr/libexec/vivarium/vivarium-gateway ] || bail_out "vivarium-gateway is not installed"

tmpd=$(mktemp -d /var/tmp/vivarium-gateway-https.XXXXXX)
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service "$GW" 'vivarium-worker-*'
systemctl stop vivariumd.service "$GW" 2>/dev/null
systemctl reset-failed "$GW" 2>/dev/null
# Before vivariumd starts: its guard reads the host's addresses at start.
pretend_internet_up "$tmpd"
ip -n "$PI_NS" addr add "$MOVED_ADDR/24" dev "$PI_PEER" || bail_out "cannot add $MOVED_ADDR to the pretend internet"

# model.test: a certificate from the pretend internet's CA; another CA that
# signed nothing of the server's. The gateway's unit has PrivateTmp=: its
# files live in /etc/vivarium.
openssl req -newkey rsa:2048 -nodes -subj "/CN=model.test" -keyout "$tmpd/model.key" -out "$tmpd/model.csr" \
  >/dev/null 2>&1 &&
printf 'subjectAltName=DNS:model.test,DNS:rebind.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
  > "$tmpd/model.ext" &&
openssl x509 -req -in "$tmpd/model.csr" -CA "$PI_DIR/ca.crt" -CAkey "$PI_DIR/ca.key" -CAcreateserial -days 2 \
  -extfile "$tmpd/model.ext" -out "$tmpd/model.crt" >/dev/null 2>&1 &&
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=Some other CA" \
  -addext basicConstraints=critical,CA:TRUE -keyout "$tmpd/wrong.key" -out "$tmpd/wrong.crt" >/dev/null 2>&1 ||
  bail_out "openssl could not make model.test's certificate"
install -d -m 0755 /etc/vivarium/conf.d
install -m 0644 "$PI_CA" /etc/vivarium/test-model-ca.pem
install -m 0644 "$tmpd/wrong.crt" /etc/vivarium/test-wrong-ca.pem
at_exit rm -f /etc/vivarium/test-model-ca.pem /etc/vivarium/test-wrong-ca.pem
printf '%s\n' "$(cat "$PI_DIR/hosts.saved")" "$PI_ADDR allowed.test other.test big.test" "$PI_DENIED_ADDR rebind.test" \
  "$NAME_ADDR model.test" > /etc/hosts

# The key: random, known to the server and to the store only.
real_key=vivarium-real-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
: > "$tmpd/failures"
nsenter --net="/run/netns/$PI_NS" "$PY" "$SRC/tests/agent/scripted-model.py" --port "$PORT" --bind 0.0.0.0 \
  --tls-cert "$tmpd/model.crt" --tls-key "$tmpd/model.key" --authorization "Token $real_key" \
  --conversations "$SRC/tests/agent/conversations.json" --model "$MODEL" \
  --failures "$tmpd/failures" --log "$tmpd/requests" > "$tmpd/model.out" 2>&1 &
model_pid=$!
at_exit kill "$model_pid"
retry_until 50 0.1 grep -q ready "$tmpd/model.out" || bail_out "the scripted model server did not start: $(cat "$tmpd/model.out")"

# A secret in the store's format (common/vivarium-secret.h, docs/secrets.md),
# with its own header format: the gateway sends what the secret says.
install -d -m 0700 "$SECRET_DIR"
write_secret () {  # NAME HOST VALUE
  "$PY" - "$SECRET_DIR/$1.secret" "$1" "$2" "$3" <<'PYEOF'
import base64, os, sys, time
path, name, host, value = sys.argv[1:5]
text = ('[Secret 0]\nName=%s\nHosts=%s;\nHeader=Authorization\nFormat=Token {}\nAddedAt=%d\nValue=%s\n\n'
        '[End]\nSecrets=1\n' % (name, host, int(time.time()), base64.b64encode(value.encode()).decode()))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, text.encode())
os.close(fd)
PYEOF
}
write_secret MODEL_KEY model.test "$real_key"
at_exit rm -f "$SECRET_DIR/MODEL_KEY.secret"
assert_eq "0 600" "$(stat -c '%u %a' "$SECRET_DIR/MODEL_KEY.secret" 2>&1)" "the secret is root's, 0600"

configure () {  # ENDPOINT CAFILE [EXTRA LINE]
  printf '[Agent]\nEndpoint=%s\nModel=%s\nEndpointCAFile=%s\n%s\n' "$1" "$MODEL" "$2" "${3:-}" > "$CONF"
  systemctl reset-failed "$GW" 2>/dev/null
  systemctl restart "$GW" 2>/dev/null
}
at_exit rm -f "$CONF"
allowed () { systemctl show -P IPAddressAllow "$GW" | tr ' ' '\n' | sort | tr '\n' ' '; }
requests () { grep -c . "$tmpd/requests" 2>/dev/null || echo 0; }

out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$OBJ/projects/demo" "create the project"
build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

# --- 1. https by name, the key a secret -------------------------------------------------------

configure "https://model.test:$PORT/v1" /etc/vivarium/test-model-ca.pem "KeySecret=MODEL_KEY"
assert_eq "active" "$(systemctl is-active "$GW")" "the gateway runs for an https endpoint by name" \
  "$(systemctl show -P StatusText "$GW")"
assert_eq "$PI_ADDR/32 " "$(allowed)" "before any lookup its unit allows the resolver only (/etc/resolv.conf)"
t1=$(submit_agent restart)
assert_contains "$t1" "$OBJ/tasks/" "an agent task is accepted"
assert_eq "NEEDS_INPUT" "$(wait_outcome "$t1" 300)" "its agent reached the model over HTTPS by name and asks" \
  "$(task_prop "$t1" Reason)"
assert_eq "$NAME_ADDR" "$(sed -n 's/.*"local": "\([0-9.]*\)".*/\1/p' "$tmpd/requests" | sort -u)" \
  "the server was reached on model.test's address"
assert_eq "$PI_ADDR/32 $NAME_ADDR/32 " "$(allowed)" \
  "the gateway's unit now allows the resolver and model.test's address, nothing else"
assert_contains "$(systemctl show -P IPAddressDeny "$GW")" "0.0.0.0/0" "and denies the rest"

# The name moves: the next connection resolves it again.
id1=${t1##*/}
wuid=$(systemctl show -P User "vivarium-worker-$id1.service")
sock=/run/vivarium/tasks/$id1/model.sock
sed -i "s/^$NAME_ADDR model.test\$/$MOVED_ADDR model.test/" /etc/hosts
assert_eq "$MOVED_ADDR" "$(nsenter -t "$(systemctl show -P MainPID "$GW")" -m getent ahostsv4 model.test | awk 'NR == 1 { print $1 }')" \
  "model.test moved (as the gateway's mount namespace sees it)"
assert_eq "200" "$(gw_request "$wuid" "$sock" GET /v1/models)" "a request after model.test moved is answered"
assert_contains "$(tail -n 1 "$tmpd/requests")" "\"local\": \"$MOVED_ADDR\"" "at its new address: resolved at each connection"
assert_contains "$(allowed)" "$MOVED_ADDR/32" "and the firewall followed it"
assert_success "answer the task" -- call "$t1" Task.Answer "go on"
assert_eq "DONE" "$(wait_outcome "$t1" 600)" "the task ends DONE"
get_json "$(task_prop "$t1" Report)" "$tmpd/r1.json"
assert_eq "pass" "$(report_field "$tmpd/r1.json" "r['verification']['verdict']")" "its verification passed"
assert_eq "0" "$(grep -c . "$tmpd/failures")" \
  "the server saw the secret's value in its format on every request (it checks each POST)" "$(cat "$tmpd/failures")"
assert_ne "0" "$(grep -c '"conversation": "restart"' "$tmpd/requests")" "and it answered the task's requests"

# The value is nowhere but in the store and the gateway's memory.
transcript_of () {
  "$PY" - "$1" <<'PYEOF'
import sys
from gi.repository import Gio
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
print(bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Task', 'GetTranscript',
                    None, None, 0, 30000, None).unpack())
PYEOF
}
assert_not_contains "$(transcript_of "$t1")" "$real_key" "the key is not in the transcript"
assert_not_contains "$(cat "$tmpd/r1.json")" "$real_key" "nor in the report"
assert_eq "" "$(grep -rl --exclude-dir=secrets --exclude-dir=images "$real_key" "$STATE" /run/vivarium 2>/dev/null)" \
  "nor in any file of the daemon's state or runtime directories"
assert_eq "0" "$(journalctl -b --no-pager -o cat | grep -c "$real_key")" "nor in the journal"
assert_contains "$(journalctl -u "$GW" -o cat --no-pager)" "with the key of KeySecret=MODEL_KEY" \
  "the gateway's log names the secret, not its value"

# --- 2. the wrong CA -------------------------------------------------------------------------

configure "https://model.test:$PORT/v1" /etc/vivarium/test-wrong-ca.pem "KeySecret=MODEL_KEY"
before=$(requests)
t2=$(submit_agent restart)
assert_eq "FAILED" "$(wait_outcome "$t2" 300)" "with a CA that did not sign the server's certificate the task ends FAILED"
assert_contains "$(task_prop "$t2" Reason)" \
  "the model endpoint https://model.test:$PORT/v1 presented a certificate signed by an authority the gateway does not trust" \
  "its reason is the gateway's sentence"
assert_eq "$before" "$(requests)" "the server answered no request (none was sent over the untrusted connection)"

# --- 3. a name in a denied range ----------------------------------------------------------------

configure "https://rebind.test:$PORT/v1" /etc/vivarium/test-model-ca.pem
t3=$(submit_agent restart)
assert_eq "FAILED" "$(wait_outcome "$t3" 300)" "an endpoint whose name resolves into a denied range: the task ends FAILED"
assert_contains "$(task_prop "$t3" Reason)" \
  "rebind.test resolves only into denied ranges ($PI_DENIED_ADDR is in 10.0.0.0/8" \
  "its reason is the gateway's sentence, naming the range"
assert_not_contains "$(allowed)" "$PI_DENIED_ADDR" "the firewall never allowed the denied address"

# A name that resolves to one of the host's own addresses (the veth's host
# end, outside every built-in range, which both guard layers deny as the
# host's own): the daemon hands the guard's list to the gateway, which
# refuses the name. A listener there would tell if anything got through.
"$PY" - "$PI_HOST_ADDR" "$PORT" "$tmpd/self-hits" > "$tmpd/self.out" 2>&1 <<'PYEOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(8)
print("ready", flush=True)
while True:
    c, peer = s.accept()
    with open(sys.argv[3], "a") as f:
        f.write("%s\n" % (peer,))
    c.close()
PYEOF
self_pid=$!
at_exit kill "$self_pid"
: > "$tmpd/self-hits"
retry_until 50 0.1 grep -q ready "$tmpd/self.out" || bail_out "the listener on $PI_HOST_ADDR did not start: $(cat "$tmpd/self.out")"
printf '%s\n' "$(cat /etc/hosts)" "$PI_HOST_ADDR self.test" > "$tmpd/hosts" && cat "$tmpd/hosts" > /etc/hosts
configure "https://self.test:$PORT/v1" /etc/vivarium/test-model-ca.pem
assert_eq "active" "$(systemctl is-active "$GW")" "the gateway runs for self.test (a name is checked when it is resolved)" \
  "$(systemctl show -P StatusText "$GW")"
t3b=$(submit_agent restart)
assert_eq "FAILED" "$(wait_outcome "$t3b" 300)" "an endpoint whose name resolves to the host's own address: FAILED"
# (busctl shows the apostrophe of "host's" escaped)
reason3b=$(task_prop "$t3b" Reason)
assert_contains "$reason3b" "self.test resolves only into denied ranges ($PI_HOST_ADDR is in $PI_HOST_ADDR/32, one of the host" \
  "its reason is the gateway's sentence, naming the host's address"
assert_contains "$reason3b" "s own addresses)" "as one of the host's own addresses"
assert_not_contains "$(allowed)" "$PI_HOST_ADDR/32" "the firewall never allowed the host's address"
assert_eq "0" "$(grep -c . "$tmpd/self-hits")" "nothing connected to the host's own address" "$(cat "$tmpd/self-hits")"

# --- 4. refused at start ------------------------------------------------------------------------

install -m 0600 /dev/null /etc/vivarium/test-model.key
printf 'some-key\n' > /etc/vivarium/test-model.key
at_exit rm -f /etc/vivarium/test-model.key
configure "https://model.test:$PORT/v1" /etc/vivarium/test-model-ca.pem \
  "$(printf 'KeySecret=MODEL_KEY\nKeyFile=/etc/vivarium/test-model.key')"
retry_until 50 0.1 systemctl is-failed --quiet "$GW"
assert_eq "failed 78" "$(systemctl is-active "$GW") $(systemctl show -P ExecMainStatus "$GW")" \
  "KeyFile= and KeySecret= both set: the gateway refuses to start"
assert_contains "$(systemctl show -P StatusText "$GW")" "[Agent] KeyFile= and KeySecret= are both set" "and says so"
configure "https://rebind.test:$PORT/v1" /etc/vivarium/test-model-ca.pem "KeySecret=MODEL_KEY"
retry_until 50 0.1 systemctl is-failed --quiet "$GW"
assert_contains "$(systemctl show -P StatusText "$GW")" \
  "the secret MODEL_KEY is for model.test, not for the endpoint https://rebind.test:$PORT/v1" \
  "a secret is sent only to a host it names: the gateway refuses another"
assert_not_contains "$(systemctl show -P StatusText "$GW")" "$real_key" "without its value"

done_testing
