#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Egress by name (docs/egress.md), from inside real guests on a real systemd
# host, against a pretend internet on the host's private network (lib.sh:
# HTTP and HTTPS servers for allowed.test, other.test, big.test, a DNS server
# that logs every name it is asked for). An `open` session reaches it by
# address (the positive controls); an `allowlist` session reaches only
# allowed.test, through the explicit proxy (http_proxy, CONNECT) and without
# the proxy variables (the proxy's DNS and transparent ports); everything
# else is refused the same way and logged, no query for a refused name
# reaches a resolver, the proxy killed leaves no way out, a task's report
# carries its egress line, a byte limit cuts a download.
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-egress.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly CONF=/etc/vivarium/conf.d/50-test-egress.conf
readonly PROXY=10.0.2.100

require_systemd_host vivariumctl gdbus busctl jq systemctl "$PY"
# Only inside the test host, whose network is private: nothing may leave it.
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

open_id='' aid='' lid='' nid=''
tmpd=$(mktemp -d /var/tmp/test-egress.XXXXXX) || bail_out "cannot create a scratch directory"
at_exit rm -rf "$tmpd"
journal_at_exit

pretend_internet_up "$tmpd"

session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
sprop () { prop "$(session_path "$1")" Session "$2"; }
restart_daemon () {
  systemctl stop "$UNIT" >/dev/null 2>&1
  retry_until 40 0.5 busctl call "$BUS" "$OBJ" "$MGR" ListSessions
}
stop_quietly () { ctl session stop "$1" >/dev/null 2>&1 || true; }
stop_all_sessions () {
  local id
  for id in $(ctl session list --json 2>/dev/null | jq -r '.[].Id // empty' 2>/dev/null); do
    stop_quietly "$id"
  done
}
# The daemon reads the host's addresses (the guard's deny list) and the
# resolv.conf (its DNS relay) at start: start it on the pretend internet.
at_exit systemctl stop "$UNIT"
at_exit stop_all_sessions
restart_daemon || bail_out "vivariumd does not start"

# start_session VAR MODE [RULE...]: a session of tiny through StartSession
# (options egress, egress_allow), its id in VAR, stopped at exit.
start_session () {
  local var=$1 out
  shift
  out=$("$PY" - "$@" 2>&1 <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'egress': GLib.Variant('s', sys.argv[1])}
if len(sys.argv) > 2:
    opts['egress_allow'] = GLib.Variant('as', sys.argv[2:])
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'StartSession', GLib.Variant('(ssa{sv})', ('', 'tiny', opts)), None, 0, 120000, None)
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
print(r.unpack()[0])
PYEOF
  ) || bail_out "a session ($*) does not start: $out"
  at_exit stop_quietly "${out##*/}"
  printf -v "$var" '%s' "${out##*/}"
}
# egress_log ID OUT [PATH INTERFACE]: Session.GetEgressLog(0, 1000) (or that
# of the object given) as a JSON array in OUT (the D-Bus keys: time, host,
# port, via, verdict, reason, bytes-up, …); prints "total T next N".
egress_log () {
  "$PY" - "${3:-$(session_path "$1")}" "$2" "${4:-Session}" 2>&1 <<'PYEOF'
import json, sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.' + sys.argv[3], 'GetEgressLog',
                  GLib.Variant('(tu)', (0, 1000)), None, 0, 30000, None)
entries, nxt, total = r.unpack()
json.dump(entries, open(sys.argv[2], 'w'))
print('total %d next %d' % (total, nxt))
PYEOF
}
# guest_plain ID SCRIPT: `sh -c SCRIPT` in the guest as the daemon runs it
# (it sets no proxy variables), with the helpers below; stdout and stderr
# together.
guest_plain () { ctl session exec "$1" --timeout 60 -- sh -c "$GUEST_LIB
$2" 2>&1; }
# guest ID SCRIPT: a client told to use the explicit proxy (http_proxy).
guest () { guest_plain "$1" "export http_proxy=http://$PROXY:3128 HTTP_PROXY=http://$PROXY:3128; $2"; }
# Without any proxy variables: what a tool that ignores them does.
guest_noproxy () { guest_plain "$1" "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy; $2"; }

# busybox in the guest: its wget (plain or HTTPS through ssl_client) sends
# an absolute-form GET to a proxy even for https:// (it has no CONNECT), so
# the CONNECT path is driven by hand: nc runs a script with the connection on
# fds 0/1, which sends CONNECT, reads the answer and hands the tunnel to
# ssl_client with the server name given.
# shellcheck disable=SC2016  # expanded in the guest
GUEST_LIB='
connect_tls () {  # HOST SNI PATH: prints "connect: STATUS" then the page
  cat > /tmp/vt-tunnel <<"EOF"
#!/bin/sh
exec 3<&0 4>&1 </dev/null >/tmp/vt-tunnel.out 2>/tmp/vt-tunnel.err
printf "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" "$VT_HOST" "$VT_HOST" >&4
IFS= read -r status <&3
echo "connect: $status"
cr=$(printf "\r")
while IFS= read -r line <&3; do [ "$line" = "$cr" ] || [ -z "$line" ] && break; done
case $status in *" 200 "*) ;; *) exit 1;; esac
printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$VT_PATH" "$VT_HOST" | ssl_client -s 4 -r 3 -n "$VT_SNI"
EOF
  chmod +x /tmp/vt-tunnel
  rm -f /tmp/vt-tunnel.out /tmp/vt-tunnel.err
  VT_HOST=$1 VT_SNI=$2 VT_PATH=$3 timeout 20 nc "${VT_PROXY:-'"$PROXY"'}" 3128 -e /tmp/vt-tunnel
  cat /tmp/vt-tunnel.out /tmp/vt-tunnel.err 2>/dev/null
}
tls_direct () {  # ADDR HOST SNI PATH: TLS to ADDR:443 naming SNI, GET PATH for HOST
  cat > /tmp/vt-tls <<"EOF"
#!/bin/sh
exec 3<&0 4>&1 </dev/null >/tmp/vt-tls.out 2>/tmp/vt-tls.err
printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$VT_PATH" "$VT_HOST" | ssl_client -s 4 -r 3 -n "$VT_SNI"
EOF
  chmod +x /tmp/vt-tls
  rm -f /tmp/vt-tls.out /tmp/vt-tls.err
  VT_HOST=$2 VT_SNI=$3 VT_PATH=$4 timeout 20 nc "$1" 443 -e /tmp/vt-tls
  cat /tmp/vt-tls.out /tmp/vt-tls.err 2>/dev/null
}
raw_http () {  # ADDR PORT REQUEST_HOST PATH: a GET sent with nc, the reply
  printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$4" "$3" | timeout 15 nc -w 5 "$1" "$2"
}
dns_tcp () {  # QUERY [ADDR]: a length-prefixed DNS query (printf escapes) over TCP to ADDR (the proxy); the reply in decimal
  { printf "$1"; sleep 1; } | timeout 5 nc "${2:-'"$PROXY"'}" 53 | od -An -tu1 | tr -s " \n" "  "; echo
}
fetch () {  # URL: wget, the body on stdout, errors on stderr
  timeout 30 wget -q -O - "$1"
}
'

# An A query for NAME over TCP, as printf escapes for dns_tcp in the guest.
dns_query () {
  "$PY" -c 'import struct, sys
q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for label in sys.argv[1].split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack("!HH", 1, 1)
print("".join("\\%03o" % b for b in struct.pack("!H", len(q)) + q))' "$1"
}
# dns_rcode REPLY: "rcode=N ADDR..." of dns_tcp's decimal bytes (guest text: parsed defensively).
dns_rcode () {
  "$PY" -c 'import socket, struct, sys
try:
    b = bytes(int(x) for x in sys.argv[1].split())
    msg = b[2:2 + struct.unpack("!H", b[:2])[0]]
    an, i, addrs = struct.unpack("!H", msg[6:8])[0], 12, []
    while msg[i] != 0:
        i += 1 + msg[i]
    i += 5
    for _ in range(an):
        i += 2 if msg[i] & 0xc0 else msg.index(0, i) + 1 - i
        t, _c, _ttl, n = struct.unpack("!HHIH", msg[i:i + 10])
        i += 10
        if t == 1:
            addrs.append(socket.inet_ntoa(msg[i:i + 4]))
        i += n
    print(" ".join(["rcode=%d" % (msg[3] & 15)] + addrs))
except (ValueError, IndexError, struct.error):
    print("no answer")' "$1"
}
token_line () { tr -d '\r' <<<"$1" | grep -o "${PI_TOKEN}.*" | head -n 1; }
connections () { pi_log connections | wc -l; }

# --- 0. the pretend internet, seen from this host ----------------------------

out=$("$PY" - "$PI_CA" <<'PYEOF' 2>&1
import socket, ssl, sys, urllib.request
print(urllib.request.urlopen('http://allowed.test/token', timeout=10).read().decode().strip())
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(('allowed.test', 443), timeout=10), server_hostname='allowed.test')
s.sendall(b'GET /token HTTP/1.0\r\nHost: allowed.test\r\n\r\n')
reply = b''
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    reply += chunk
print(reply.decode().split('\r\n\r\n', 1)[1].strip())
PYEOF
)
assert_eq "$PI_TOKEN scheme=http host=allowed.test sni=- addr=$PI_ADDR" "$(sed -n 1p <<<"$out")" \
  "this host reaches http://allowed.test/token on the pretend internet"
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(sed -n 2p <<<"$out")" \
  "and https://allowed.test/token, its certificate verified against the test's CA"
getent hosts container-control.test >/dev/null 2>&1
assert_success "the DNS logger saw this host's query for a name not in /etc/hosts (container-control.test)" -- \
  pi_dns_asked container-control.test
assert_eq "$PI_DENIED_ADDR" "$(getent hosts rebind.test | awk '{ print $1 }')" "rebind.test resolves to $PI_DENIED_ADDR here"

# --- 1. a frozen tiny image, an open session: the positive controls ----------

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

t0=$(date +%s%3N)
start_session open_id open
diag "the open session started in $(( $(date +%s%3N) - t0 )) ms ($(sprop "$open_id" StartMode))"
assert_eq "open off" "$(sprop "$open_id" EgressMode) $(sprop "$open_id" EgressState)" \
  "an --egress open session says EgressMode open, EgressState off"
before=$(connections)
out=$(guest_plain "$open_id" "raw_http $PI_ADDR 80 $PI_ADDR /token")
assert_eq "$PI_TOKEN scheme=http host=$PI_ADDR sni=- addr=$PI_ADDR" "$(token_line "$out")" \
  "an open session's guest reaches $PI_ADDR:80 by address (raw nc)" "$out"
assert_ne "$before" "$(connections)" "(the server saw that connection)"
out=$(guest_plain "$open_id" "nslookup open-control.test 10.0.2.3")
assert_success "an open session's DNS query (nslookup through 10.0.2.3) reaches the DNS logger" -- \
  pi_dns_asked open-control.test
out=$(guest_plain "$open_id" "fetch http://allowed.test/token")
assert_eq "$PI_TOKEN scheme=http host=allowed.test sni=- addr=$PI_ADDR" "$(token_line "$out")" \
  "an open session's guest fetches http://allowed.test/token by name" "$out"
out=$(guest_plain "$open_id" "fetch https://allowed.test/token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "and https://allowed.test/token (busybox's TLS)" "$out"
out=$(guest_plain "$open_id" "dns_tcp '$(dns_query allowed.test)' $PI_ADDR; dns_tcp '$(dns_query open-tcp-control.test)' $PI_ADDR")
assert_eq "rcode=0 $PI_ADDR" "$(dns_rcode "$(sed -n 1p <<<"$out")")" "the test's DNS-over-TCP client gets an answer from the logger" "$out"
assert_eq "rcode=3" "$(dns_rcode "$(sed -n 2p <<<"$out")")" "and its NXDOMAIN" "$out"
# The test's own CONNECT and TLS clients, proven against the pretend
# internet's plain CONNECT proxy: a refusal later is the product's doing.
out=$(guest_plain "$open_id" "VT_PROXY=$PI_ADDR2 connect_tls allowed.test allowed.test /token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "the test's CONNECT client gets the page through a plain CONNECT proxy ($PI_ADDR2:3128)" "$out"
out=$(guest_plain "$open_id" "VT_PROXY=$PI_ADDR2 connect_tls allowed.test other.test /token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=other.test addr=$PI_ADDR" "$(token_line "$out")" \
  "and its ClientHello names the server it is told to (other.test, in a CONNECT to allowed.test)" "$out"
out=$(guest_plain "$open_id" "tls_direct $PI_ADDR allowed.test other.test /token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=other.test addr=$PI_ADDR" "$(token_line "$out")" \
  "so does its direct TLS client" "$out"

# --- 2. an allowlist session: allowed.test, by every path ----------------------

t0=$(date +%s%3N)
start_session aid allowlist allowed.test big.test rebind.test
diag "the allowlist session started in $(( $(date +%s%3N) - t0 )) ms ($(sprop "$aid" StartMode))"
proxy_unit=vivarium-egress-$aid.service
qemu_unit=vivarium-session-$aid.service
assert_eq "allowlist running" "$(sprop "$aid" EgressMode) $(sprop "$aid" EgressState)" \
  "an --egress allowlist session says EgressMode allowlist, EgressState running"
assert_eq "" "$(sprop "$aid" EgressStateReason)" "with no EgressStateReason"
rules=$(busctl get-property "$BUS" "$(session_path "$aid")" "$IFACE.Session" EgressRules 2>&1)
assert_contains "$rules" "allow allowed.test" "EgressRules lists allowed.test ($rules)"
assert_not_contains "$rules" "other.test" "and not other.test"
assert_eq active "$(systemctl is-active "$proxy_unit")" "its proxy runs in $proxy_unit"
qemu_pid=$(systemctl show -P MainPID "$qemu_unit")
assert_eq yes "$(systemctl show -P PrivateNetwork "$qemu_unit")" "the session's QEMU has a network namespace of its own (PrivateNetwork=yes)"
assert_ne "$(readlink /proc/1/ns/net)" "$(readlink "/proc/$qemu_pid/ns/net" 2>&1)" "(read back from /proc: not the host's)"
assert_contains "$(systemctl show -P IPAddressDeny "$qemu_unit")" "0.0.0.0/0" \
  "and IPAddressDeny=any ($(systemctl show -P IPAddressDeny "$qemu_unit"))"
assert_eq "" "$(systemctl show -P IPAddressAllow "$qemu_unit")" "and no IPAddressAllow= (not even a loopback)"
assert_eq AF_UNIX "$(systemctl show -P RestrictAddressFamilies "$qemu_unit")" "QEMU may open AF_UNIX sockets only"
qemu_cmd=$(tr '\0' ' ' <"/proc/$qemu_pid/cmdline" 2>/dev/null)
assert_contains "$qemu_cmd" "-netdev stream,id=net0,server=off,addr.type=unix,addr.path=/run/vivarium/egress/$aid/net.sock" \
  "its network device is the proxy's network, over net.sock"
assert_not_contains "$qemu_cmd" "guestfwd" "QEMU forwards nothing itself"
assert_contains "$qemu_cmd" "spawn=deny" "and may not spawn anything (-sandbox …,spawn=deny)"
assert_ne "0" "$(systemctl show -P UID "$proxy_unit")" "the proxy does not run as root (uid $(systemctl show -P UID "$proxy_unit"))"
assert_contains "$(systemctl show -P IPAddressDeny "$proxy_unit")" "10.0.0.0/8" \
  "the guard's deny list is on the proxy too (IPAddressDeny=)"

cli_id=$(ctl session start "$IMAGE" --egress allowlist --allow allowed.test 2>&1)
if [[ $cli_id =~ ^[0-9a-f]+$ ]]; then
  at_exit stop_quietly "$cli_id"
  ok "vivariumctl session start --egress allowlist --allow allowed.test starts a session"
  assert_eq allowlist "$(sprop "$cli_id" EgressMode)" "in allowlist mode"
  assert_contains "$(busctl get-property "$BUS" "$(session_path "$cli_id")" "$IFACE.Session" EgressRules 2>&1)" \
    "allow allowed.test" "with the rule given"
  stop_quietly "$cli_id"
else
  not_ok "vivariumctl session start --egress allowlist --allow allowed.test starts a session" "$cli_id"
fi

# shellcheck disable=SC2016  # expanded in the guest
assert_eq "- -" "$(guest_plain "$aid" 'echo "${http_proxy:--} ${https_proxy:--}"')" \
  "an Exec in the guest has no proxy variables (every client goes by the proxy's DNS and transparent ports)"
resolv=$(guest "$aid" 'cat /etc/resolv.conf')
assert_contains "$resolv" "nameserver $PROXY" "the guest's resolv.conf names the proxy's DNS"
assert_contains "$resolv" "use-vc" "over TCP (options use-vc)"

# The page and the Host: header it was asked with, apart: the proxy may
# rewrite the request line, but the server must see the Host the target
# named (RFC 9112 3.2.2, RFC 9110 7.2), "allowed.test", which busybox sent.
host_of () { grep -o ' host=[^ ]*' <<<"$1" | cut -d= -f2; }
out=$(guest "$aid" "fetch http://allowed.test/token")
page=$(token_line "$out")
assert_eq "$PI_TOKEN scheme=http sni=- addr=$PI_ADDR" "${page/ host=$(host_of "$page")/}" \
  "http://allowed.test/token through the proxy (http_proxy)" "$out"
assert_eq "allowed.test" "$(host_of "$page")" "the server sees Host: allowed.test, as the URL said (through the proxy)"
out=$(guest "$aid" "connect_tls allowed.test allowed.test /token")
assert_contains "$out" "connect: HTTP/1.1 200" "CONNECT allowed.test:443 is answered 200" "$out"
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "https://allowed.test/token through the CONNECT tunnel" "$out"
out=$(guest_noproxy "$aid" "fetch http://allowed.test/token")
page=$(token_line "$out")
assert_eq "$PI_TOKEN scheme=http sni=- addr=$PI_ADDR" "${page/ host=$(host_of "$page")/}" \
  "without proxy variables: http://allowed.test/token (the proxy's DNS, then its port 80)" "$out"
assert_eq "allowed.test" "$(host_of "$page")" "the server sees Host: allowed.test, as the guest sent it (transparent)"
out=$(guest_noproxy "$aid" "fetch https://allowed.test/token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "without proxy variables: https://allowed.test/token (its port 443, by the SNI)" "$out"
# With the guest's own environment, wget https:// goes by transparent TLS.
out=$(guest_plain "$aid" "fetch https://allowed.test/token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "https://allowed.test/token with the Exec's own environment (transparent TLS)" "$out"
# A client that does send "GET https://" to the proxy is refused, and logged
# under the host it named.
out=$(guest "$aid" "export https_proxy=http://$PROXY:3128; fetch https://allowed.test/token")
assert_contains "$out" "403 Forbidden" "GET https:// sent to the proxy is refused with 403 (it does not terminate TLS)" "$out"

# --- 3. everything else: refused the same way, seen by no one ----------------

req_before=$(pi_log requests | wc -l)
out=$(guest "$aid" "fetch http://other.test/token")
assert_contains "$out" "403 Forbidden" "http://other.test/ through the proxy: 403" "$out"
out=$(guest "$aid" "raw_http $PROXY 3128 other.test http://other.test/token")
assert_contains "$out" "vivarium egress:" "with a one-line body saying why" "$out"
diag "the proxy's refusal: $(tr -d '\r' <<<"$out" | tail -n 1)"
out=$(guest "$aid" "connect_tls other.test other.test /token")
assert_contains "$out" "connect: HTTP/1.1 403" "CONNECT other.test:443: 403" "$out"
out=$(guest_noproxy "$aid" "fetch http://other.test/token")
assert_contains "$out" "bad address" "without proxy variables other.test does not resolve" "$out"
out=$(guest_noproxy "$aid" "tls_direct $PROXY other.test other.test /token")
assert_eq "" "$(token_line "$out")" "TLS to the proxy's port 443 naming other.test: closed, no page" "$out"
out=$(guest_noproxy "$aid" "fetch http://nowhere.test/; fetch http://exfil-4a6f.nowhere.test/; timeout 8 nslookup nowhere.test 10.0.2.3")
assert_contains "$out" "bad address" "nowhere.test (in no hosts file) does not resolve either" "$out"
out=$(guest "$aid" "fetch http://nowhere.test/")
assert_contains "$out" "403 Forbidden" "nor pass the proxy" "$out"
out=$(guest "$aid" "dns_tcp '$(dns_query allowed.test)'; dns_tcp '$(dns_query nowhere.test)'; dns_tcp '$(dns_query other.test)'")
assert_eq "rcode=0 $PROXY" "$(dns_rcode "$(sed -n 1p <<<"$out")")" "the proxy's DNS answers allowed.test with $PROXY" "$out"
assert_eq "rcode=5" "$(dns_rcode "$(sed -n 2p <<<"$out")")" "and nowhere.test with REFUSED" "$out"
assert_eq "rcode=5" "$(dns_rcode "$(sed -n 3p <<<"$out")")" "and other.test with REFUSED" "$out"
assert_eq "$req_before" "$(pi_log requests | wc -l)" "the pretend internet's servers saw none of those requests"
assert_success "the DNS logger was asked for no refused name (other.test, nowhere.test)" -- \
  sh -c "! grep -E -i '(^|[.])(other|nowhere)[.]test ' '$PI_DIR/dns.log'"
getent hosts nowhere.test >/dev/null 2>&1
assert_success "(positive control: this host's query for nowhere.test reaches the logger)" -- pi_dns_asked nowhere.test

conn_before=$(connections)
out=$(guest "$aid" "raw_http $PI_ADDR 80 allowed.test /token; raw_http $PI_ADDR2 80 allowed.test /token")
assert_eq "" "$(token_line "$out")" "raw nc from the allowlist guest to $PI_ADDR:80 gets nothing (the open guest got the page)" "$out"
out=$(guest_noproxy "$aid" "tls_direct $PI_ADDR allowed.test allowed.test /token")
assert_eq "" "$(token_line "$out")" "nor does TLS straight to $PI_ADDR:443" "$out"
assert_eq "$conn_before" "$(connections)" "the servers saw no connection from it"

out=$(guest "$aid" "fetch http://$PI_ADDR/token")
assert_contains "$out" "403 Forbidden" "an IP literal through the proxy (http://$PI_ADDR/): 403" "$out"
out=$(guest "$aid" "connect_tls $PI_ADDR allowed.test /token")
assert_contains "$out" "connect: HTTP/1.1 403" "CONNECT $PI_ADDR:443: 403" "$out"
out=$(guest "$aid" "fetch http://rebind.test/token")
assert_contains "$out" "403 Forbidden" "rebind.test (allowed, but it resolves to $PI_DENIED_ADDR): 403" "$out"
out=$(guest_noproxy "$aid" "fetch http://rebind.test/token")
assert_eq "" "$(token_line "$out")" "and no page without the proxy variables either" "$out"

sni_other () { awk '$1 == "https" && $3 == "other.test"' "$PI_DIR/requests.log" | wc -l; }
before=$(sni_other)
out=$(guest "$aid" "connect_tls allowed.test other.test /token")
assert_eq "" "$(token_line "$out")" "CONNECT allowed.test:443, then a ClientHello naming other.test: cut, no page" "$out"
assert_eq "$before" "$(sni_other)" "the server saw no request over TLS naming other.test (the open guest's did: $before)"
out=$(guest "$aid" "connect_tls allowed.test allowed.test /token")
assert_ne "" "$(token_line "$out")" "(positive control: the same tunnel naming allowed.test gets the page)" "$out"

# --- 4. the decision log, through the CLI and D-Bus ----------------------------

# A connection is logged when it ends: give the last ones a moment.
sleep 1
head=$(egress_log "$aid" "$tmpd/log.json")
n=$(jq length "$tmpd/log.json" 2>&1)
assert_eq "total $n next $n" "$head" "Session.GetEgressLog(0, 1000) returns the whole log ($n entries)"
verdicts=$(jq -r '.[] | "\(.host):\(.port) \(.verdict)"' "$tmpd/log.json" 2>&1 | sort -u | tr '\n' ' ')
diag "decisions: $verdicts"
diag "the log (via host port verdict reason):
$(jq -r '.[] | "\(.via) \(.host) \(.port) \(.verdict): \(.reason)"' "$tmpd/log.json" 2>&1)"
assert_contains "$verdicts" "allowed.test:80 allowed" "the log has allowed.test:80 allowed"
assert_contains "$verdicts" "allowed.test:443 allowed" "and allowed.test:443 allowed"
assert_contains "$verdicts" "other.test:80 denied" "other.test:80 denied"
assert_contains "$verdicts" "other.test:443 denied" "other.test:443 denied"
assert_contains "$verdicts" "$PI_ADDR:80 denied" "the IP literal denied"
assert_contains "$verdicts" "rebind.test:80 denied" "rebind.test denied"
assert_contains "$verdicts" "nowhere.test" "the DNS refusals of nowhere.test"
assert_eq "dns http proxy tls" "$(jq -r '[.[].via] | unique | join(" ")' "$tmpd/log.json" 2>&1)" \
  "decisions of all four ways in (via dns, http, proxy, tls)"
assert_eq 0 "$(jq '[.[] | select((has("time") and has("host") and has("port") and has("via") and has("verdict")
                                 and has("reason") and has("bytes-up") and has("bytes-down") and has("duration-ms")) | not)]
                  | length' "$tmpd/log.json" 2>&1)" \
  "every entry has time, host, port, via, verdict, reason, bytes-up, bytes-down, duration-ms"
assert_ne 0 "$(jq '[.[] | select(.host == "allowed.test" and .verdict == "allowed" and ."bytes-down" > 0)] | length' "$tmpd/log.json" 2>&1)" \
  "an allowed entry counts the bytes that came down"
https_get=$(jq -r '[.[] | select(.via == "proxy" and (.reason | test("only http://")))][0].host' "$tmpd/log.json" 2>&1)
assert_eq "allowed.test" "$https_get" "the refused GET https://allowed.test/ is logged as what the guest asked for (allowed.test)"
sni_reason=$(jq -r '[.[] | select(.verdict == "denied" and (.reason | test("server name")))][0].reason' "$tmpd/log.json" 2>&1)
assert_contains "$sni_reason" "not the CONNECT host" "the SNI mismatch is logged with its reason ($sni_reason)"
rebind_reason=$(jq -r '[.[] | select(.host == "rebind.test" and .verdict == "denied")][0].reason' "$tmpd/log.json" 2>&1)
assert_contains "$rebind_reason" "denied range" "rebind.test is refused for where it resolves to, before any connection ($rebind_reason)"
assert_not_contains "$(cat "$tmpd/log.json")" "$PI_TOKEN" "no payload in the log (the token page's text is not in it)"
assert_dbus_error "$ERR.InvalidArgument" -- call "$(session_path "$aid")" Session.GetEgressLog "uint64 0" "uint32 0"

ctl session egress-log "$aid" --json > "$tmpd/cli-log.json" 2> "$tmpd/cli-log.err"
assert_eq 0 "$?" "vivariumctl session egress-log ID --json ($(head -c 300 "$tmpd/cli-log.err"))"
assert_eq "$(jq -r '.[] | "\(.host):\(.port) \(.verdict)"' "$tmpd/log.json" 2>&1)" \
  "$(jq -r '.[] | "\(.host):\(.port) \(.verdict)"' "$tmpd/cli-log.json" 2>&1)" \
  "it lists the same decisions as D-Bus, in the same order"
assert_eq 0 "$(jq '[.[] | select((has("time") and has("host") and has("port") and has("verdict") and has("reason")
                                 and has("bytes_up") and has("bytes_down")) | not)] | length' "$tmpd/cli-log.json" 2>&1)" \
  "each with time, host, port, verdict, reason, bytes_up, bytes_down"

out=$(call "$OBJ" Manager.CheckEgress "other.test:443" "{'session': <objectpath '$(session_path "$aid")'>}" 2>&1)
assert_contains "$out" "(false," "Manager.CheckEgress says false for other.test by the session's policy ($out)"
out=$(call "$OBJ" Manager.CheckEgress "allowed.test:443" "{'session': <objectpath '$(session_path "$aid")'>}" 2>&1)
assert_contains "$out" "(true," "and true for allowed.test ($out)"
out=$(ctl egress check --session "$aid" other.test 2>&1)
assert_contains "$out" "denied" "vivariumctl egress check --session ID other.test: denied ($out)"
out=$(ctl egress check --session "$aid" allowed.test 2>&1)
assert_contains "$out" "allowed" "and allowed.test: allowed ($out)"
before=$(wc -l < "$PI_DIR/dns.log")
call "$OBJ" Manager.CheckEgress "dryrun.test" "{'session': <objectpath '$(session_path "$aid")'>}" >/dev/null 2>&1
assert_eq "$before" "$(wc -l < "$PI_DIR/dns.log")" "the dry run resolves nothing"

# --- 5. the proxy killed: no way out, nothing falls back ---------------------

egress_state_is () { [ "$(busctl get-property "$BUS" "$(session_path "$aid")" "$IFACE.Session" EgressState 2>&1)" = "s \"$1\"" ]; }
assert_success "systemctl kill -s KILL $proxy_unit" -- systemctl kill -s KILL "$proxy_unit"
assert_success "EgressState becomes failed" -- retry_until 40 0.25 egress_state_is failed
diag "EgressState $(sprop "$aid" EgressState), EgressStateReason '$(sprop "$aid" EgressStateReason)', State $(sprop "$aid" State)"
assert_ne "" "$(sprop "$aid" EgressStateReason)" "EgressStateReason says why"
assert_eq allowlist "$(sprop "$aid" EgressMode)" "EgressMode is still allowlist (not open)"
conn_before=$(connections)
out=$(guest "$aid" "fetch http://allowed.test/token; raw_http $PI_ADDR 80 allowed.test /token")
assert_eq "" "$(token_line "$out")" "allowed.test is not reachable any more" "$out"
out=$(guest_noproxy "$aid" "fetch http://allowed.test/token")
assert_eq "" "$(token_line "$out")" "not without the proxy variables either" "$out"
assert_eq "$conn_before" "$(connections)" "the servers saw nothing"
assert_ne active "$(systemctl is-active "$proxy_unit")" "the proxy was not started again behind the session's back"

# --- 5b. egress none: nothing at all -----------------------------------------

start_session nid none
assert_eq "none off" "$(sprop "$nid" EgressMode) $(sprop "$nid" EgressState)" "an egress none session says EgressMode none, EgressState off"
assert_eq inactive "$(systemctl is-active "vivarium-egress-$nid.service")" "it has no proxy"
conn_before=$(connections)
out=$(guest "$nid" "fetch http://allowed.test/token; raw_http $PI_ADDR 80 allowed.test /token; timeout 8 nslookup allowed.test 10.0.2.3")
assert_eq "" "$(token_line "$out")" "its guest reaches nothing: not by name, not by address" "$out"
out=$(guest "$nid" "dns_tcp '$(dns_query allowed.test)' 2>/dev/null")
assert_eq "no answer" "$(dns_rcode "$(tail -n 1 <<<"$out")")" "no DNS answers it at $PROXY:53 either" "$out"
assert_eq "$conn_before" "$(connections)" "the servers saw nothing"
stop_quietly "$nid"

# --- 6. a task: its work session's log and its report's egress line ----------

assert_contains "$(call "$OBJ" Manager.CreateProject egress "uint64 $((32 * MIB))" "{}" 2>&1)" \
  "$(project_path egress)" "create the project egress"
pyworker egress '
s, out, err = exec_guest("wget -q -O - http://allowed.test/token; wget -q -O - http://other.test/token; true")
finish("Fetched allowed.test; other.test was refused.", "")'
task=$(submit_allowlist egress "$tmpd/egress.py" "Fetch the token." allowed.test)
assert_contains "$task" "$OBJ/tasks/" "submit a task with egress allowlist, egress_allow allowed.test"
assert_eq DONE "$(wait_outcome "$task" 300)" "the task ends DONE"
head=$(egress_log "" "$tmpd/task-log.json" "$task" Task)
diag "Task.GetEgressLog: $head: $(jq -r '[.[] | "\(.via) \(.host):\(.port) \(.verdict)"] | join(", ")' "$tmpd/task-log.json" 2>&1)"
assert_ne 0 "$(jq '[.[] | select(.host == "allowed.test" and .verdict == "allowed")] | length' "$tmpd/task-log.json" 2>&1)" \
  "Task.GetEgressLog has the work session's allowed.test, allowed"
assert_ne 0 "$(jq '[.[] | select(.host == "other.test" and .verdict == "denied")] | length' "$tmpd/task-log.json" 2>&1)" \
  "and other.test, denied"
get_json "$(task_prop "$task" Report)" "$tmpd/task-report.json"
get_text "$(task_prop "$task" Report)" "$tmpd/task-report.txt"
assert_eq allowlist "$(report_field "$tmpd/task-report.json" "r['egress']['mode']")" "the signed report's egress mode is allowlist"
assert_contains "$(report_field "$tmpd/task-report.json" "r['egress']['policy']")" "allowed.test" "its policy names allowed.test"
summary=$(report_field "$tmpd/task-report.json" "r['egress']['summary']")
assert_contains "$summary" "allowed.test:80" "its summary counts allowed.test:80 ($summary)"
assert_contains "$summary" "other.test (DNS)" "and other.test, refused by the proxy's DNS (the worker's wget has no proxy variables)"
assert_contains "$(grep '^Egress: ' "$tmpd/task-report.txt")" "allowlist" "the text has a trusted Egress: line ($(grep '^Egress: ' "$tmpd/task-report.txt"))"
assert_contains "$(grep -A1 '^Egress: ' "$tmpd/task-report.txt" | tail -n 1)" "decisions: " "followed by the decisions"
assert_success "vivariumctl report verify accepts it" -- vivariumctl report verify "$tmpd/task-report.json"

# --- 7. a byte limit cuts a download -------------------------------------------

stop_all_sessions
mkdir -p "$(dirname "$CONF")"
at_exit rm -f "$CONF"
printf '[Egress]\nLimitDownMiB=1\n' > "$CONF"
restart_daemon || bail_out "vivariumd does not start with $CONF"
start_session lid allowlist big.test
out=$(guest "$lid" 'fetch http://big.test/big > /tmp/big; echo "size=$(wc -c < /tmp/big)"')
size=$(grep -o 'size=[0-9]*' <<<"$out" | cut -d= -f2)
diag "with LimitDownMiB=1 the 4 MiB download stopped at ${size:-?} bytes: $(grep -v size= <<<"$out" | head -c 300)"
assert_eq yes "$([ -n "$size" ] && [ "$size" -lt $((4 * MIB)) ] && echo yes || echo no)" \
  "with [Egress] LimitDownMiB=1, big.test's 4 MiB file is cut (${size:-?} bytes came)"
assert_eq yes "$([ -n "$size" ] && [ "$size" -le $((MIB + 256 * 1024)) ] && echo yes || echo no)" \
  "near the limit (at most 1.25 MiB)"
out=$(guest "$lid" "fetch http://big.test/token")
assert_eq "" "$(token_line "$out")" "a later request is refused" "$out"
sleep 1
egress_log "$lid" "$tmpd/limit.json" >/dev/null
limit_reason=$(jq -r '[.[] | select(.host == "big.test" and (.reason | test("limit"; "i")))][0].reason // "none"' "$tmpd/limit.json" 2>&1)
assert_ne "none" "$limit_reason" "the cut is logged ($limit_reason)"
diag "limit log: $(jq -c '[.[] | {host, verdict, reason, "bytes-down"}]' "$tmpd/limit.json" 2>&1 | head -c 600)"
rm -f "$CONF"

# --- the pretend internet goes as it came -------------------------------------

stop_all_sessions
no_egress_left () {
  [ -z "$(systemctl list-units --all --plain --no-legend 'vivarium-egress-*' | head -n 1)" ] &&
    [ -z "$(ls -A /run/vivarium/egress 2>/dev/null)" ]
}
retry_until 40 0.25 no_egress_left
assert_eq "" "$(systemctl list-units --all --plain --no-legend 'vivarium-egress-*'; ls -A /run/vivarium/egress 2>/dev/null)" \
  "with the sessions stopped no proxy unit and no proxy directory is left"
server_pid=$_pi_pid
cp /etc/hosts "$tmpd/hosts.during"
pretend_internet_down
assert_eq "" "$(ip netns list | awk -v n="$PI_NS" '$1 == n')" "pretend_internet_down removes its network namespace"
assert_success "and its veth" -- sh -c "! ip link show dev $PI_LINK 2>/dev/null | grep -q ."
assert_success "its server has stopped" -- sh -c "! kill -0 $server_pid 2>/dev/null"
assert_eq "$(cat "$PI_DIR/hosts.saved")" "$(cat /etc/hosts)" "/etc/hosts is as it was"
assert_eq "$(cat "$PI_DIR/resolv.conf.saved")" "$(cat /etc/resolv.conf)" "and /etc/resolv.conf"
assert_contains "$(cat "$tmpd/hosts.during")" "rebind.test" "(which held the pretend names meanwhile)"

done_testing
