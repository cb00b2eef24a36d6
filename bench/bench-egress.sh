#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Egress benchmark (issue 16's "Speed"), printed as figures (nothing here
# asserts a speed): the same guest command, side by side in one run, in
#  - an `open` session (the guest reaches the pretend internet by address,
#    through QEMU's unrestricted user-mode network), and
#  - an `allowlist` session allowing bench.test, through its egress proxy:
#    explicit (http_proxy=http://10.0.2.100:3128), transparent (the proxy's
#    DNS over TCP, then port 80), and transparent with the name in the
#    guest's /etc/hosts (port 80 alone, no DNS).
# Measured in the guest (busybox; `ts %.s` reads the clock in µs, busybox's
# date has no %N): connection set-up, N sequential GETs of a tiny page
# (per request: median, p90) and the throughput of a 64 MiB download
# (median of RUNS), with the ratios allowlist / open. Then, on the host and
# without a guest, where the added time goes: GETs direct and into the
# proxy's socket (the allowlist guest's network itself runs in the proxy:
# docs/egress.md, "How allowlist is wired").
#
# The pretend internet (FIELD-NOTES): a network namespace behind a veth on
# TEST-NET-3 (here 203.0.113.1, there 203.0.113.10) with a python3 HTTP
# server, and bench.test → 203.0.113.10 in this host's /etc/hosts (the
# proxy resolves names itself). All of it is undone at exit; only what this
# script started is stopped, by PID. Nothing leaves the test host.
# Run on the systemd test host:
#   flock /tmp/vivarium-system.lock tests/system/vivarium-test-host run --build build -- bench/bench-egress.sh
# VIVARIUM_TEST_BENCH_PERF=1 adds a perf profile of the proxy and QEMU.
# VIVARIUM_TEST_BENCH_RUNS (3): rounds; each round, every variant makes
# VIVARIUM_TEST_BENCH_GETS (20) sequential GETs and one download.
set -euo pipefail

readonly BUS=org.vivarium.Vivarium1
readonly OBJ=/org/vivarium/Vivarium1
readonly MGR=org.vivarium.Vivarium1.Manager
readonly SES=org.vivarium.Vivarium1.Session
readonly IMAGE=tiny
readonly PY=/usr/bin/python3
readonly NS=vb-inet LINK=vb-inet0 PEER=vb-inet1
readonly HOST_ADDR=203.0.113.1 FAR_ADDR=203.0.113.10
readonly NAME=bench.test
readonly PROXY_URL=http://10.0.2.100:3128
readonly BIG_MIB=64
runs=${VIVARIUM_TEST_BENCH_RUNS:-3}
gets=${VIVARIUM_TEST_BENCH_GETS:-20}

die () { echo "bench-egress: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
[ -d /run/systemd/system ] || die "systemd is not PID 1; run me through tests/system/vivarium-test-host"
for tool in vivariumctl busctl jq ip nsenter awk bc setpriv "$PY"; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done
[[ $runs =~ ^[1-9]$ ]] || die "VIVARIUM_TEST_BENCH_RUNS must be 1-9"
[[ $gets =~ ^[1-9][0-9]?$ ]] || die "VIVARIUM_TEST_BENCH_GETS must be 1-99"
# Only inside the test host, whose network is private: nothing may leave it.
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^v[vbt]-' || true)
[ -z "$others" ] || die "this host has network links ($others); run me through tests/system/vivarium-test-host"
[ -e "/run/netns/$NS" ] && die "a network namespace $NS exists already: not ours, left alone"
ip link show dev "$LINK" >/dev/null 2>&1 && die "a link $LINK exists already: not ours, left alone"

work=$(mktemp -d /var/tmp/vivarium-bench-egress.XXXXXX)
# The host-side GETs run as the session's uid and read their script here.
chmod 0755 "$work"
server_pid='' server_start='' made_ns=0 made_link=0 saved_hosts=0
sessions=()

cleanup () {
  local s i
  for s in "${sessions[@]}"; do
    vivariumctl --no-interaction session stop "${s##*/}" >/dev/null 2>&1 || true
  done
  if [ -n "$server_pid" ]; then
    # Only the server started below (same PID, same start time).
    if [ "$(awk '{ print $22 }' "/proc/$server_pid/stat" 2>/dev/null)" = "$server_start" ]; then
      kill -TERM "$server_pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$saved_hosts" = 1 ]; then
    rm -f /etc/hosts && cp -a "$work/hosts.saved" /etc/hosts
  fi
  [ "$made_link" = 0 ] || ip link del dev "$LINK" 2>/dev/null || true
  [ "$made_ns" = 0 ] || ip netns del "$NS" || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- the pretend internet ------------------------------------------------------

ip netns add "$NS" || die "cannot create the network namespace $NS"
made_ns=1
ip link add "$LINK" type veth peer name "$PEER" netns "$NS" || die "cannot create the veth $LINK"
made_link=1
ip addr add "$HOST_ADDR/24" dev "$LINK"
ip link set "$LINK" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$FAR_ADDR/24" dev "$PEER"
ip -n "$NS" link set "$PEER" up

mkdir "$work/www"
echo "vivarium bench page" >"$work/www/index.html"
truncate -s "${BIG_MIB}M" "$work/www/big"
cat >"$work/server.py" <<'EOF'
import http.server, sys, functools
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=sys.argv[2])
server = http.server.ThreadingHTTPServer((sys.argv[1], 80), handler)
print("ready", flush=True)
server.serve_forever()
EOF
# nsenter execs the server itself: $! is its PID.
nsenter --net="/run/netns/$NS" "$PY" "$work/server.py" "$FAR_ADDR" "$work/www" >"$work/server.out" 2>&1 &
server_pid=$!
server_start=$(awk '{ print $22 }' "/proc/$server_pid/stat")
for ((i = 0; i < 80; i++)); do
  grep -qx ready "$work/server.out" 2>/dev/null && break
  sleep 0.25
done
grep -qx ready "$work/server.out" || die "the HTTP server did not start: $(head -c 500 "$work/server.out")"

cp -a /etc/hosts "$work/hosts.saved"
saved_hosts=1
{ cat "$work/hosts.saved"; echo "$FAR_ADDR $NAME"; } >"$work/hosts.new"
rm -f /etc/hosts && cp "$work/hosts.new" /etc/hosts
# The guard learns the host's own addresses (203.0.113.1 now) at start.
systemctl stop vivariumd.service 2>/dev/null || true

# --- the image and the sessions ----------------------------------------------------

ctl () { vivariumctl --no-interaction "$@"; }
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build "$IMAGE" "$IMAGE" >/dev/null
if [ "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" org.vivarium.Vivarium1.Image Frozen)" != "b true" ]; then
  ctl image freeze "$IMAGE" >/dev/null
fi

start () {  # OPTIONS-COUNT OPTIONS...: prints the session's object path
  busctl --json=short --timeout=120 -- call "$BUS" "$OBJ" "$MGR" StartSession 'ssa{sv}' "" "$IMAGE" "$@" | jq -r '.data[0]'
}
open_s=$(start 1 egress s open)
sessions+=("$open_s")
allow_s=$(start 2 egress s allowlist egress_allow as 1 "$NAME")
sessions+=("$allow_s")
for s in "$open_s" "$allow_s"; do
  echo "session ${s##*/}: egress $(busctl get-property "$BUS" "$s" "$SES" EgressMode 2>/dev/null | cut -d' ' -f2) ($(busctl get-property "$BUS" "$s" "$SES" StartMode | cut -d' ' -f2))"
done

# The one guest command, for every variant: ACTION URL PROXY PIN N.
# PROXY: http_proxy for wget, or empty (no proxy variable at all); PIN=1
# puts NAME → the proxy's address in the guest's /etc/hosts for the run.
# shellcheck disable=SC2016
guest='
action=$1 url=$2 proxy=$3 pin=$4 n=$5
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy
[ -z "$proxy" ] || export http_proxy="$proxy"
if [ "$pin" = 1 ]; then
  cp /etc/hosts /tmp/hosts.bench && echo "10.0.2.100 '"$NAME"'" >>/etc/hosts
fi
now () { echo | ts %.s; }
fetch () { timeout 120 wget -q -O /dev/null "$url" || echo "wget failed: $url" >&2; }
case $action in
  gets) fetch
        i=0; while [ $i -lt $n ]; do a=$(now); fetch; b=$(now); echo "$a $b"; i=$((i + 1)); done ;;
  connect) h=${url#http://}; h=${h%/}
        i=0; while [ $i -lt $n ]; do a=$(now); echo | timeout 10 nc "$h" 80 >/dev/null; b=$(now); echo "$a $b"; i=$((i + 1)); done ;;
  clock) i=0; while [ $i -lt $n ]; do a=$(now); b=$(now); echo "$a $b"; i=$((i + 1)); done ;;
  size) timeout 300 wget -q -O - "$url" | wc -c ;;
  get) a=$(now); fetch; b=$(now); echo "$a $b" ;;
esac
[ "$pin" != 1 ] || cp /tmp/hosts.bench /etc/hosts
'
gexec () {  # SESSION ACTION URL PROXY PIN N: the guest's stdout (its stderr: ours)
  local out
  out=$(busctl --json=short --timeout="$(( ${exec_timeout:-600} + 30 ))" -- call "$BUS" "$1" "$SES" Exec asassu 9 sh -c "$guest" bench "$2" "$3" "$4" "$5" "$6" \
        0 / "${exec_timeout:-600}") || die "Exec in ${1##*/} failed"
  jq -r '.data[2] | implode' <<<"$out" | sed -n 's/^./guest: &/p' >&2
  [ "$(jq -r '.data[0]' <<<"$out")" = 0 ] || die "the guest command exited with $(jq -r '.data[0]' <<<"$out")"
  jq -r '.data[1] | implode' <<<"$out"
}

# Variants: name session url proxy pin
variants=(
  "open|$open_s|http://$FAR_ADDR/|-|0"
  "proxy|$allow_s|http://$NAME/|$PROXY_URL|0"
  "transparent|$allow_s|http://$NAME/|-|0"
  "transparent-hosts|$allow_s|http://$NAME/|-|1"
)
each () {  # FUNCTION: FUNCTION NAME SESSION URL PROXY PIN per variant
  local v name s url proxy pin
  for v in "${variants[@]}"; do
    IFS='|' read -r name s url proxy pin <<<"$v"
    [ "$proxy" = - ] && proxy=
    "$1" "$name" "$s" "$url" "$proxy" "$pin"
  done
}
ms () { awk 'NF == 2 { printf "%.3f\n", ($2 - $1) * 1000 }'; }
median () { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
p90 () { sort -g | awk '{ a[NR] = $1 } END { i = int(NR * 0.9); if (i < NR * 0.9) i++; print a[i] }'; }

echo "== positive controls: each variant downloads the whole ${BIG_MIB} MiB file (not timed)"
check_size () {
  local size
  size=$(gexec "$2" size "$3big" "$4" "$5" 1 | tr -d ' ')
  [ "$size" = $((BIG_MIB * 1048576)) ] || die "$1: the guest received $size bytes instead of $((BIG_MIB * 1048576))"
  echo "$1: $size bytes"
}
each check_size

echo "== connection set-up: $gets sequential GETs of a tiny page per variant (one warm-up first), variants interleaved ($runs rounds)"
conn () { gexec "$2" gets "$3" "$4" "$5" "$gets" | ms >>"$work/gets-$1"; }
for ((r = 1; r <= runs; r++)); do
  gexec "$open_s" clock - - 0 "$gets" | ms >>"$work/clock"
  each conn
done

echo "== bare connections (open: to $FAR_ADDR:80; allowlist: to the proxy's port 80, which refuses an empty head): $gets each"
gexec "$open_s" connect "http://$FAR_ADDR/" - 0 "$gets" | ms >"$work/connect-open"
gexec "$allow_s" connect "http://10.0.2.100/" - 0 "$gets" | ms >"$work/connect-allowlist"

echo "== throughput: ${BIG_MIB} MiB downloads, variants interleaved ($runs rounds)"
download () { gexec "$2" get "$3big" "$4" "$5" 1 | awk -v m="$BIG_MIB" 'NF == 2 { printf "%.2f\n", m / ($2 - $1) }' >>"$work/mib-$1"; }
for ((r = 1; r <= runs; r++)); do
  each download
done

if [ -n "${VIVARIUM_TEST_BENCH_PERF:-}" ]; then
  # A profile of one batch of GETs without DNS (transparent-hosts): the
  # proxy (its network's thread included), and QEMU's system calls.
  command -v perf >/dev/null || die "VIVARIUM_TEST_BENCH_PERF is set but perf is not installed"
  proxy_pid=$(systemctl show -P MainPID "vivarium-egress-${allow_s##*/}.service")
  qemu_pid=$(systemctl show -P MainPID "vivarium-session-${allow_s##*/}.service")
  # Bounded: a profiled batch once hung past the test host's limit.
  timeout 300 perf record -q -g -o "$work/proxy.perf" -p "$proxy_pid" 2>/dev/null &
  perf_proxy=$!
  timeout 300 perf trace -s -p "$qemu_pid" -o "$work/qemu.trace" 2>/dev/null &
  perf_qemu=$!
  sleep 1
  if ! exec_timeout=240 gexec "$allow_s" gets "http://$NAME/" "" 1 "$gets" | ms >"$work/gets-profiled"; then
    echo "the profiled batch did not finish; the proxy's threads (tid state utime stime):"
    for t in /proc/"$proxy_pid"/task/*/stat; do awk '{ print "  " $1, $3, $14, $15 }' "$t"; done
  fi
  kill -INT "$perf_proxy" "$perf_qemu" 2>/dev/null || true
  wait "$perf_proxy" "$perf_qemu" || true
  printf 'profiled batch (transparent-hosts): GET median %.2f ms\n' "$(median <"$work/gets-profiled")"
  # Before the guest's network moved into the proxy, libslirp's cmd:
  # forward forked QEMU per connection (clone, then wait4 of glib's
  # intermediate child); these lines show whether any such call is left.
  echo "--- perf trace: QEMU's system calls during the batch (per thread; calls, errors, total, min, avg, max ms, stddev)"
  awk '/^ .*\(.*\), [0-9]+ events/ { print } / (clone|clone3|vfork|execve|socketpair|accept4|connect|wait4) / { print }' \
    "$work/qemu.trace"
  echo "--- perf: the proxy, samples by command, then by command and symbol (self, top 30)"
  perf report -i "$work/proxy.perf" --stdio --no-children -g none --sort comm 2>/dev/null | awk '/%/ && n++ < 10'
  perf report -i "$work/proxy.perf" --stdio --no-children -g none --sort comm,dso,sym 2>/dev/null | awk '/%/ && n++ < 30'
fi
echo "== where the time goes, on the host (no guest): GETs of the tiny page as the session's uid"
# Direct to the server, and into the proxy's http.sock.
cat >"$work/host-gets.py" <<'PYEOF'
import socket, sys, time
mode, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
req = b"GET / HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n"
def once():
    if mode == "direct":
        s = socket.create_connection((target, 80))
    else:
        s = socket.socket(socket.AF_UNIX)
        s.connect(target)
    s.sendall(req)
    while s.recv(65536):
        pass
    s.close()
once()
for _ in range(n):
    t0 = time.perf_counter()
    once()
    print("%.3f" % ((time.perf_counter() - t0) * 1000))
PYEOF
egress_dir=/run/vivarium/egress/${allow_s##*/}
qemu_uid=$(stat -c %u "/proc/$(systemctl show -P MainPID "vivarium-session-${allow_s##*/}.service")")
for m in direct proxy; do
  case $m in direct) t=$FAR_ADDR ;; *) t=$egress_dir/http.sock ;; esac
  setpriv --reuid "$qemu_uid" --regid "$qemu_uid" --clear-groups "$PY" "$work/host-gets.py" "$m" "$t" "$((gets * runs))" \
    >"$work/host-$m" || die "the host-side GETs ($m) failed"
done
echo
echo "# image $IMAGE, accelerator $(busctl get-property "$BUS" "$OBJ" "$MGR" Accelerator | cut -d' ' -f2 | tr -d '"'), $(nproc) CPUs"
printf 'reading the clock in the guest (two reads in a row, median of %d): %.2f ms, included in every GET below\n' \
  "$((gets * runs))" "$(median <"$work/clock")"
open_med=$(median <"$work/gets-open")
open_mib=$(median <"$work/mib-open")
printf '%-18s %11s %9s %13s %12s %14s %s\n' variant "GET median" "GET p90" "+ vs open" "MiB/s med" "% of open" "MiB/s runs"
row () {
  local med p m
  med=$(median <"$work/gets-$1")
  p=$(p90 <"$work/gets-$1")
  m=$(median <"$work/mib-$1")
  printf '%-18s %8.2f ms %6.2f ms %+10.2f ms %12.1f %13.0f %% %s\n' "$1" "$med" "$p" "$(echo "$med - $open_med" | bc -l)" \
    "$m" "$(echo "100 * $m / $open_mib" | bc -l)" "$(tr '\n' ' ' <"$work/mib-$1")"
}
each row
printf 'bare connection (nc, connect → close), median of %d: open %.2f ms, allowlist (to the proxy) %.2f ms\n' "$gets" \
  "$(median <"$work/connect-open")" "$(median <"$work/connect-allowlist")"
printf 'on the host, median of %d GETs: direct %.2f ms, into the proxy %.2f ms\n' \
  "$((gets * runs))" "$(median <"$work/host-direct")" "$(median <"$work/host-proxy")"
echo "ratios allowlist / open (per GET, median): $(for n in proxy transparent transparent-hosts; do
  printf '%s %.2f  ' "$n" "$(echo "$(median <"$work/gets-$n") / $open_med" | bc -l)"; done)"
echo "the proxy's decision log for the allowlist session, by way in:"
busctl --json=short -- call "$BUS" "$allow_s" "$SES" GetEgressLog tu 0 1000 |
  jq -r '.data[0] | map({via: .via.data, verdict: .verdict.data, down: .["bytes-down"].data, ms: .["duration-ms"].data})
         | group_by(.via)[] | "  \(.[0].via): \(length) decisions (\(map(select(.verdict == "allowed")) | length) allowed), \(map(.down) | add) bytes down, duration median \(map(.ms) | sort | .[length / 2 | floor]) ms"' ||
  echo "  (GetEgressLog did not answer)"
# Benchmarks print figures; they never assert a speed.
