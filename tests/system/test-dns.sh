#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# DNS for guests when the host's resolver is on loopback (issue 4): the
# daemon's DNS relay (198.51.100.53, in a netns of its own behind the veth
# vv-dns) forwards the guests' queries to the host's nameserver, here a tiny
# DNS server this test runs on 127.0.0.53. A guest resolves through QEMU's
# 10.0.2.3; with [Guard] DnsRelay=never the same lookup fails (the guard
# drops the direct path); a guest still cannot reach the veth's host end.
# Runs inside the host booted by vivarium-test-host (its own private network):
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-dns.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly NAME=vivarium-test.invalid
readonly ANSWER=192.0.2.7
readonly RELAY=198.51.100.53
readonly RELAY_HOST=198.51.100.54
readonly LINK=vv-dns
readonly RELAY_UNIT=vivarium-dns-relay.service
readonly CONF=/etc/vivarium/conf.d/50-test-dns.conf

require_systemd_host vivariumctl busctl nsenter ip ss jq systemctl "$PY"
# Only inside the test host, whose network is private: nothing may leave it.
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"

WORK=$(mktemp -d /var/tmp/test-dns.XXXXXX) || bail_out "cannot create a scratch directory"
readonly WORK
at_exit rm -rf "$WORK"

daemon_pid () { systemctl show -P MainPID "$UNIT"; }
start_daemon () { retry_until 40 0.5 busctl call "$BUS" "$OBJ" "$MGR" ListSessions; }
restart_daemon () { systemctl stop "$UNIT" >/dev/null 2>&1; start_daemon; }
link_exists () { ip link show dev "$LINK" >/dev/null 2>&1; }

# --- a nameserver on host loopback -------------------------------------------

# A tiny authoritative server: NAME A → ANSWER, wrong-id.invalid answered with
# a wrong id (the relay must drop that), anything else NXDOMAIN. It counts
# the queries it saw in $WORK/queries.
cat > "$WORK/dns-server.py" <<'PYEOF'
import socket, socketserver, struct, sys, threading
ADDR, NAME, ANSWER, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
lock = threading.Lock()
seen = 0
def answer(q):
    global seen
    with lock:
        seen += 1
        open(COUNT, "w").write("%d\n" % seen)
    if len(q) < 12:
        return None
    qid, flags = struct.unpack("!HH", q[:4])
    i, labels = 12, []
    while i < len(q) and q[i] != 0:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace")); i += 1 + q[i]
    question = q[12:i + 5]
    name = ".".join(labels).lower()
    qtype = struct.unpack("!H", q[i + 1:i + 3])[0] if i + 3 <= len(q) else 0
    if name == "wrong-id.invalid":
        qid ^= 0xffff
    if name == NAME and qtype == 1:
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(ANSWER)
        return struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr
    rcode = 0 if name == NAME else 3
    return struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 0, 0, 0) + question
class Udp(socketserver.BaseRequestHandler):
    def handle(self):
        a = answer(self.request[0])
        if a: self.request[1].sendto(a, self.client_address)
class Tcp(socketserver.StreamRequestHandler):
    def handle(self):
        n = struct.unpack("!H", self.rfile.read(2))[0]
        a = answer(self.rfile.read(n))
        if a: self.wfile.write(struct.pack("!H", len(a)) + a)
socketserver.ThreadingUDPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.allow_reuse_address = True
u = socketserver.ThreadingUDPServer((ADDR, 53), Udp)
t = socketserver.ThreadingTCPServer((ADDR, 53), Tcp)
threading.Thread(target=t.serve_forever, daemon=True).start()
print("ready", flush=True)
u.serve_forever()
PYEOF

"$PY" "$WORK/dns-server.py" 127.0.0.53 "$NAME" "$ANSWER" "$WORK/queries" > "$WORK/dns-server.out" 2>&1 &
dns_pid=$!
at_exit kill "$dns_pid"
retry_until 40 0.25 grep -q ready "$WORK/dns-server.out" || bail_out "the test DNS server did not start: $(cat "$WORK/dns-server.out")"
queries () { cat "$WORK/queries" 2>/dev/null || echo 0; }

# The container's resolv.conf names only that server; restored at exit.
cp -a /etc/resolv.conf "$WORK/resolv.conf.saved" 2>/dev/null || : > "$WORK/resolv.conf.saved"
restore_resolv_conf () { rm -f /etc/resolv.conf; cp -a "$WORK/resolv.conf.saved" /etc/resolv.conf; }
at_exit restore_resolv_conf
rm -f /etc/resolv.conf
echo "nameserver 127.0.0.53" > /etc/resolv.conf
at_exit rm -f "$CONF"
at_exit systemctl stop "$UNIT"
restart_daemon || bail_out "vivariumd does not start"

# --- the relay while the daemon runs -----------------------------------------

assert_success "the relay's veth $LINK exists" -- link_exists
assert_contains "$(ip -4 -o addr show dev "$LINK")" "$RELAY_HOST/32" "its host end has $RELAY_HOST/32"
assert_contains "$(ip -4 route get "$RELAY")" "dev $LINK src $RELAY_HOST" "$RELAY is routed through $LINK from $RELAY_HOST"
# Out of the daemon (issue 18): its own unit, a dynamic user, and once its
# port is bound no capability at all, in any of its threads.
assert_eq active "$(systemctl is-active "$RELAY_UNIT" 2>&1)" "the relay runs in $RELAY_UNIT"
relay_pid=$(systemctl show -P MainPID "$RELAY_UNIT")
assert_ne 0 "$(stat -c %u "/proc/$relay_pid" 2>&1)" "as a user other than root (DynamicUser=)"
assert_eq "" "$(grep -h -E '^Cap(Eff|Prm|Amb):' /proc/"$relay_pid"/task/*/status | grep -v -E ':\s+0+$')" \
  "with no capability left in any thread (CapEff, CapPrm, CapAmb all 0)"
# The relay's netns has no pin and no process: only its sockets hold it.
# This takes a copy of each (pidfd_getfd), asks each its netns (SIOCGSKNS)
# and runs the command given in the one that is not the host's.
cat > "$WORK/socket-netns.py" <<'PYEOF'
import ctypes, fcntl, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, host = int(sys.argv[1]), os.readlink("/proc/self/ns/net")
pidfd = os.pidfd_open(pid)
for name in os.listdir("/proc/%d/fd" % pid):
    try:
        if not os.readlink("/proc/%d/fd/%s" % (pid, name)).startswith("socket:"): continue
    except OSError:
        continue
    fd = libc.syscall(438, pidfd, int(name), 0)          # pidfd_getfd
    if fd < 0: continue
    try:
        ns = fcntl.ioctl(fd, 0x894C)                       # SIOCGSKNS
    except OSError:
        continue
    if os.readlink("/proc/self/fd/%d" % ns) != host:
        os.set_inheritable(ns, True)
        os.execvp(sys.argv[2], [a.replace("NSFD", "/proc/self/fd/%d" % ns) for a in sys.argv[2:]])
sys.exit("no socket of %d is outside this netns" % pid)
PYEOF
in_relay_netns () { "$PY" "$WORK/socket-netns.py" "$relay_pid" nsenter --net=NSFD -- "$@"; }
relay_ns=$(in_relay_netns readlink /proc/self/ns/net 2>&1)
assert_contains "$relay_ns" "net:[" "the relay's sockets are in a netns of their own"
assert_ne "$(readlink "/proc/$(daemon_pid)/ns/net")" "$relay_ns" "not the daemon's"
assert_eq "$(readlink "/proc/$(daemon_pid)/ns/net")" "$(readlink "/proc/$relay_pid/ns/net")" \
  "(the relay's process itself is back in the host's, for the nameservers)"
listeners=$(in_relay_netns ss -H -lntu | awk '{ print $1, $5 }' | sort | tr '\n' ' ')
assert_eq "tcp $RELAY:53 udp $RELAY:53 " "$listeners" "only the relay listens in its netns (UDP and TCP on $RELAY:53)"
diag "$RELAY_UNIT: $(systemd-analyze security --no-pager "$RELAY_UNIT" 2>&1 | tail -n 1)"
diag "$UNIT as it runs: $(systemd-analyze security --no-pager "$UNIT" 2>&1 | tail -n 1)"
assert_eq "nameserver $RELAY" "$(cat "$RUNTIME/dns/resolv.conf" 2>&1)" "the sessions' resolv.conf names the relay"
assert_contains "$(busctl get-property "$BUS" "$OBJ" "$GUARD" DenyList)" "\"$RELAY_HOST/32\"" \
  "the veth's host end is in the guard's deny list"
assert_not_contains "$(busctl get-property "$BUS" "$OBJ" "$GUARD" DenyList)" "\"$RELAY/" "the relay itself is not"
assert_contains "$(journalctl -u "$UNIT" --no-pager -o cat | tail -n 200)" "DNS relay on $RELAY:53" "the daemon logs that the relay is on"

# --- the relay, asked directly from this (private) host -----------------------

cat > "$WORK/client.py" <<'PYEOF'
import os, socket, statistics, struct, sys, time
relay, name = sys.argv[1], sys.argv[2]
def query(qname, qid):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for part in qname.split("."):
        q += bytes([len(part)]) + part.encode()
    return q + b"\0" + struct.pack("!HH", 1, 1)
def a_record(r):
    return socket.inet_ntoa(r[-4:]) if len(r) >= 16 and struct.unpack("!H", r[6:8])[0] > 0 else "none"
def udp(q, timeout=3.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(timeout)
    s.sendto(q, (relay, 53))
    try:
        return s.recv(65535)
    except socket.timeout:
        return None
def tcp(q):
    s = socket.create_connection((relay, 53), timeout=3)
    s.sendall(struct.pack("!H", len(q)) + q)
    buf = b""
    while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
        chunk = s.recv(65535)
        if not chunk: break
        buf += chunk
    return buf[2:]
what = sys.argv[3]
if what == "udp":
    r = udp(query(name, 0x1234)); print(a_record(r) if r and r[:2] == b"\x12\x34" else "none")
elif what == "tcp":
    r = tcp(query(name, 0x4321)); print(a_record(r) if r[:2] == b"\x43\x21" else "none")
elif what == "wrong-id":
    print("answered" if udp(query("wrong-id.invalid", 0x7777)) else "dropped")
elif what == "garbage":
    for g in (b"", b"\x01\x02\x03", os.urandom(11), os.urandom(5000), os.urandom(300)):
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(g, (relay, 53))
    for g in (b"\x00\x05abcde", b"\xff\xff" + os.urandom(100), b"\x00"):
        try:
            s = socket.create_connection((relay, 53), timeout=3); s.sendall(g); s.close()
        except OSError:
            pass
    print("sent")
elif what == "latency":
    times = []
    for i in range(20):
        t = time.monotonic(); r = udp(query(name, i + 1)); times.append((time.monotonic() - t) * 1000)
        assert r is not None and a_record(r) == "192.0.2.7"
    print("median %.2f ms, max %.2f ms over 20 UDP queries" % (statistics.median(times), max(times)))
PYEOF
client () { timeout 30 "$PY" "$WORK/client.py" "$RELAY" "$NAME" "$@" 2>&1; }

assert_eq "$ANSWER" "$(client udp)" "the relay answers a UDP query with the upstream's answer"
assert_eq "$ANSWER" "$(client tcp)" "the relay answers a TCP query with the upstream's answer"
before=$(queries)
assert_eq dropped "$(client wrong-id)" "an upstream answer with the wrong id is not relayed"
assert_ne "$before" "$(queries)" "(the upstream did see that query)"
assert_eq sent "$(client garbage)" "garbage is sent to the relay (UDP and TCP)"
assert_eq "$ANSWER" "$(client udp)" "the relay still answers after the garbage"
assert_success "the daemon survived" -- busctl call "$BUS" "$OBJ" "$MGR" ListSessions
latency=$(client latency)
assert_contains "$latency" "median" "20 UDP queries through the relay all answer"
diag "relay latency (client on the host side of the veth -> relay -> 127.0.0.53): $latency"

# A relay that dies comes back by itself (Restart=on-failure), with a new
# netns and veth: the old ones went with its sockets.
kill -9 "$relay_pid"
assert_success "killed -9, the relay comes back" -- \
  retry_until 40 0.25 sh -c "[ \"\$(systemctl show -P MainPID $RELAY_UNIT)\" != $relay_pid ] && [ \"\$(systemctl is-active $RELAY_UNIT)\" = active ]"
assert_success "and answers again" -- retry_until 20 0.5 sh -c "[ \"\$(timeout 30 $PY $WORK/client.py $RELAY $NAME udp 2>&1)\" = $ANSWER ]"
relay_pid=$(systemctl show -P MainPID "$RELAY_UNIT")

# --- a frozen tiny image -------------------------------------------------------

if ! vivariumctl image list 2>/dev/null | grep -qw "$IMAGE"; then
  out=$(vivariumctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $out"
fi
if [ "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" org.vivarium.Vivarium1.Image Frozen 2>&1)" != "b true" ]; then
  out=$(vivariumctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
fi

stop_quietly () { vivariumctl session stop "$1" >/dev/null 2>&1 || true; }
start_session () {  # VAR
  local id
  id=$(vivariumctl session start "$IMAGE" --memory 256 2>"$WORK/start.err") ||
    bail_out "a session does not start: $(head -c 500 "$WORK/start.err")"
  at_exit stop_quietly "$id"
  printf -v "$1" '%s' "$id"
}
guest () { local id=$1; shift; vivariumctl session exec "$id" -- "$@" 2>&1; }

# --- a guest resolves through the relay ----------------------------------------

start_session sid
unit=vivarium-session-$sid.service
assert_contains "$(systemctl show -P BindReadOnlyPaths "$unit")" "$RUNTIME/dns/resolv.conf:/etc/resolv.conf" \
  "the session unit sees the relay's resolv.conf as /etc/resolv.conf"
before=$(queries)
t0=$EPOCHREALTIME
out=$(guest "$sid" nslookup "$NAME" 10.0.2.3)
t1=$EPOCHREALTIME
assert_contains "$out" "$ANSWER" "the guest resolves $NAME to $ANSWER through 10.0.2.3"
diag "nslookup in the guest (through the daemon's exec): $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f ms", (b - a) * 1000 }')"
assert_ne "$before" "$(queries)" "the query reached the nameserver on host loopback"

# The veth's host end is a host address: denied, like the others. The
# listener's positive control is a connection from this host.
cat > "$WORK/listen.py" <<'PYEOF'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 8080)); s.listen(8)
print("ready", flush=True)
n = 0
while True:
    c, peer = s.accept(); c.close(); n += 1
    open(sys.argv[2], "w").write("%d %s\n" % (n, peer[0]))
PYEOF
"$PY" "$WORK/listen.py" "$RELAY_HOST" "$WORK/accepted" > "$WORK/listen.out" 2>&1 &
listen_pid=$!
at_exit kill "$listen_pid"
retry_until 40 0.25 grep -q ready "$WORK/listen.out" || bail_out "the listener on $RELAY_HOST:8080 did not start"
"$PY" -c "import socket; socket.create_connection(('$RELAY_HOST', 8080), timeout=3).close()"
retry_until 20 0.25 test -s "$WORK/accepted"
assert_eq 1 "$(cut -d' ' -f1 "$WORK/accepted" 2>/dev/null)" "the listener on $RELAY_HOST:8080 accepts a local connection"
guest "$sid" timeout 8 nc -w 3 "$RELAY_HOST" 8080 </dev/null >/dev/null
assert_eq 1 "$(cut -d' ' -f1 "$WORK/accepted" 2>/dev/null)" "a guest does not reach the veth's host end $RELAY_HOST:8080"
guest "$sid" timeout 8 nc -w 3 "$RELAY" 8080 </dev/null >/dev/null
assert_success "the session stops" -- vivariumctl session stop "$sid"

# --- gone with the daemon ----------------------------------------------------------

pid=$(daemon_pid)
systemctl stop "$UNIT"
assert_success "the daemon has stopped" -- retry_until 40 0.25 test ! -d "/proc/$pid"
assert_success "after systemctl stop, the veth $LINK is gone" -- retry_until 20 0.25 sh -c "! ip link show dev $LINK"
assert_eq no "$([ -e "$RUNTIME/dns" ] && echo yes || echo no)" "and so is $RUNTIME/dns"
assert_eq inactive "$(systemctl is-active "$RELAY_UNIT" 2>&1)" "and the relay's unit"
assert_success "and its process" -- retry_until 20 0.25 test ! -d "/proc/$relay_pid"
assert_eq "" "$(ip -4 route show "$RELAY")" "and the route to $RELAY"

# --- with DnsRelay=never, the guard blocks the direct path ----------------------

mkdir -p "$(dirname "$CONF")"
printf '[Guard]\nDnsRelay=never\n' > "$CONF"
start_daemon || bail_out "vivariumd does not start with DnsRelay=never"
assert_eq "" "$(ip -o link show dev "$LINK" 2>/dev/null)" "with DnsRelay=never there is no relay veth"
start_session sid2
assert_eq "" "$(systemctl show -P BindReadOnlyPaths "vivarium-session-$sid2.service")" "and no resolv.conf bound into the unit"
before=$(queries)
out=$(guest "$sid2" nslookup "$NAME" 10.0.2.3)
assert_not_contains "$out" "$ANSWER" "without the relay the guest's lookup fails (the guard drops QEMU's query to 127.0.0.53)"
assert_eq "$before" "$(queries)" "the nameserver on host loopback saw nothing from the guest"
vivariumctl session stop "$sid2" >/dev/null 2>&1
rm -f "$CONF"

# --- the isolation self-test with the relay up -----------------------------------

restart_daemon || bail_out "vivariumd does not come back"
assert_success "the relay is back with the default DnsRelay=auto" -- link_exists
vivariumctl guard selftest --json > "$WORK/selftest.json" 2> "$WORK/selftest.err"
assert_eq 0 "$?" "the guard self-test runs with the relay up ($(tail -n 3 "$WORK/selftest.err" | tr '\n' ' '))"
assert_eq pass "$(jq -r .verdict "$WORK/selftest.json" 2>&1)" "its verdict is pass"
assert_success "the relay is still there after the self-test removed its canary" -- link_exists
assert_eq "$ANSWER" "$(client udp)" "and still answers"

done_testing
