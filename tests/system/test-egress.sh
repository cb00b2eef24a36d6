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
# reaches a resolver, the proxy killed leaves no way out, a byte limit cuts a
# download.
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-egress.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly MGR=$IFACE.Manager
readonly UNIT=vivariumd.service
readonly CONF=/etc/vivarium/conf.d/50-test-egress.conf
readonly PROXY=10.0.2.100

[ "$(id -u)" = 0 ] || bail_out "must run as root"
[ -d /run/systemd/system ] || bail_out "systemd is not PID 1 here; run me through tests/system/vivarium-test-host"
for tool in vivariumctl gdbus busctl jq systemctl "$PY"; do
  command -v "$tool" >/dev/null || bail_out "$tool is not installed"
done
# Only inside the test host, whose network is private: nothing may leave it.
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"

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
  for id in $(ctl session list --json 2>/dev/null | grep -o '"id" *: *"[0-9a-f]*"' | grep -o '[0-9a-f]\{12\}'); do
    stop_quietly "$id"
  done
}
# The daemon reads the host's addresses (the guard's deny list) and the
# resolv.conf (its DNS relay) at start: start it on the pretend internet.
at_exit systemctl stop "$UNIT"
at_exit stop_all_sessions
restart_daemon || bail_out "vivariumd does not start"

start_session () {  # VAR ARGS...: a session of tiny, stopped at exit
  local var=$1 id
  shift
  id=$(ctl session start "$IMAGE" "$@" 2>"$tmpd/start.err") ||
    bail_out "a session ($*) does not start: $(head -c 800 "$tmpd/start.err")"
  at_exit stop_quietly "$id"
  printf -v "$var" '%s' "$id"
}
# guest ID SCRIPT: `sh -c SCRIPT` in the guest, with the helpers below; its
# stdout and stderr together.
guest () { ctl session exec "$1" --timeout 60 -- sh -c "$GUEST_LIB
$2" 2>&1; }
# The same without any proxy variables: what a tool that ignores them does.
guest_noproxy () { guest "$1" "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy; $2"; }

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
  VT_HOST=$1 VT_SNI=$2 VT_PATH=$3 timeout 20 nc '"$PROXY"' 3128 -e /tmp/vt-tunnel
  cat /tmp/vt-tunnel.out /tmp/vt-tunnel.err 2>/dev/null
}
raw_http () {  # ADDR PORT REQUEST_HOST PATH: a GET sent with nc, the reply
  printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$4" "$3" | timeout 15 nc -w 5 "$1" "$2"
}
fetch () {  # URL: wget, the body on stdout, errors on stderr
  timeout 30 wget -q -O - "$1"
}
'

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
start_session open_id
diag "the open session started in $(( $(date +%s%3N) - t0 )) ms ($(sprop "$open_id" StartMode))"
before=$(connections)
out=$(guest "$open_id" "raw_http $PI_ADDR 80 $PI_ADDR /token")
assert_eq "$PI_TOKEN scheme=http host=$PI_ADDR sni=- addr=$PI_ADDR" "$(token_line "$out")" \
  "an open session's guest reaches $PI_ADDR:80 by address (raw nc)" "$out"
assert_ne "$before" "$(connections)" "(the server saw that connection)"
out=$(guest "$open_id" "nslookup open-control.test 10.0.2.3")
assert_success "an open session's DNS query (nslookup through 10.0.2.3) reaches the DNS logger" -- \
  pi_dns_asked open-control.test
out=$(guest "$open_id" "fetch http://allowed.test/token")
assert_eq "$PI_TOKEN scheme=http host=allowed.test sni=- addr=$PI_ADDR" "$(token_line "$out")" \
  "an open session's guest fetches http://allowed.test/token by name" "$out"
out=$(guest "$open_id" "fetch https://allowed.test/token")
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "and https://allowed.test/token (busybox's TLS)" "$out"

# --- the pretend internet goes as it came -------------------------------------

stop_all_sessions
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
