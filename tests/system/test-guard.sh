#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The network guard on a real systemd host, proven from inside real guests:
# the isolation self-test passes with both layers, with each layer alone and
# in egress allowlist mode (nothing direct, only the proxy's one allowed
# destination, nothing once the proxy is killed), it can fail (the negative
# control), a normal session's drops are counted, the canary network is
# vivarium-canary-net's (its own unit; vivariumd runs a self-test with
# RestrictNamespaces=yes, and with a drop-in taking AF_INET/AF_INET6 and every
# IP address from it),
# and an IPAddressAllow= on vivarium.slice stops sessions from starting.
# Runs inside the host booted by vivarium-test-host (see meson.build here):
#   tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-guard.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"

readonly NEG_CONF=/etc/vivarium/conf.d/50-test-negative-control.conf
readonly SLICE_DROPIN_DIR=/etc/systemd/system/vivarium.slice.d
readonly SLICE_DROPIN=$SLICE_DROPIN_DIR/50-test.conf
readonly SELFTEST_DIR=/var/lib/vivarium/selftest
WORK=$(mktemp -d /var/tmp/test-guard.XXXXXX) || bail_out "cannot create a scratch directory"
readonly WORK
at_exit rm -rf "$WORK"

require_systemd_host vivariumctl busctl gdbus jq nft systemctl

jqf () { jq -r "$@"; }

restart_daemon () {
  systemctl stop "$UNIT" >/dev/null 2>&1
  retry_until 40 0.5 busctl call "$BUS" "$OBJ" "$MGR" ListSessions
}

# --- 0. a frozen tiny image ---------------------------------------------------

if ! vivariumctl image list 2>/dev/null | grep -qw "$IMAGE"; then
  out=$(vivariumctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $out"
fi
frozen=$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" org.vivarium.Vivarium1.Image Frozen 2>&1)
if [ "$frozen" != "b true" ]; then
  out=$(vivariumctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
fi
assert_eq "b true" "$(busctl get-property "$BUS" "$OBJ/images/$IMAGE" org.vivarium.Vivarium1.Image Frozen 2>&1)" \
  "the $IMAGE image is frozen"

# --- 1. the self-test passes, each layer alone -------------------------------

result=$WORK/selftest.json
t0=$SECONDS
vivariumctl guard selftest --json --junit "$WORK/selftest.xml" > "$result" 2> "$WORK/selftest.err"
rc=$?
diag "self-test took $((SECONDS - t0)) s"
assert_eq 0 "$rc" "vivariumctl guard selftest succeeds ($(tail -n 3 "$WORK/selftest.err" | tr '\n' ' '))"
jq -e . "$result" >/dev/null 2>&1 || bail_out "the self-test printed no JSON: $(head -c 2000 "$result")"
assert_eq pass "$(jqf .verdict "$result")" "the verdict is pass"
assert_success "the JUnit export is well-formed XML" -- xmllint --noout "$WORK/selftest.xml"
assert_eq "$(($(jqf '.probes | length' "$result") + 1))" "$(grep -c '<testcase' "$WORK/selftest.xml")" \
  "the JUnit export has one test case per probe, plus the verdict"
assert_eq 0 "$(grep -c '<failure' "$WORK/selftest.xml")" "the JUnit export records no failure"
assert_eq "both layer1-only layer2-only allowlist" "$(jqf '[.configurations[]] | join(" ")' "$result")" \
  "four configurations ran: both layers, layer 1 alone, layer 2 alone, egress allowlist"
for c in both layer1-only layer2-only; do
  n=$(jqf --arg c "$c" '[.probes[] | select(.configuration == $c)] | length' "$result")
  bad=$(jqf --arg c "$c" '[.probes[] | select(.configuration == $c and (.outcome != "pass" or .pass != true))
                          | "\(.probe)/\(.transport): \(.observed)"] | join(", ")' "$result")
  assert_eq 20 "$n" "configuration $c has 20 probes (10 canaries x tcp, udp)"
  assert_eq "" "$bad" "every probe of configuration $c passes"
  assert_eq 0 "$(jqf --arg c "$c" '[.probes[] | select(.configuration == $c and .expected == "blocked"
                                    and .evidence."canary-seen" != 0)] | length' "$result")" \
    "no canary of a denied range saw anything under $c"
done
bad_checks=$(jqf '[.["host-checks"][] | select(.pass != true) | "\(.configuration)/\(.check): \(.observed)"] | join(", ")' "$result")
assert_eq "" "$bad_checks" "every host-side check passes"
for check in qemu-uid qemu-seccomp qemu-devices unit-ip-address-allow-empty nft-table-verify canary-removed; do
  assert_ne 0 "$(jqf --arg k "$check" '[.["host-checks"][] | select(.check == $k)] | length' "$result")" \
    "the result carries the host check $check"
done
assert_contains "$(jqf '.["image-digest"]' "$result")" "sha256:" "the result names the image digest"
# The canary network was vivarium-canary-net's, in a unit of its own that
# is gone with it.
assert_eq "" "$(systemctl list-units 'vivarium-canary-*' --all --no-legend --plain)" \
  "after the self-test, no vivarium-canary-* unit is loaded"
assert_eq "" "$(ip -o link show dev vv-canary 2>/dev/null)" "after the self-test, no canary veth is there"

# Egress allowlist: the guest dials nothing directly, the positive controls
# included; through its proxy it reaches only the one destination the
# policy names; the proxy killed, not even that.
al () { jqf --arg p "$1" --arg t "${2:-tcp}" \
          ".probes[] | select(.configuration == \"allowlist\" and .probe == \$p and .transport == \$t) | $3" "$result"; }
assert_eq 29 "$(jqf '[.probes[] | select(.configuration == "allowlist")] | length' "$result")" \
  "configuration allowlist has 29 probes (10 canaries x tcp, udp dialled directly; 7 through the proxy, 2 of its DNS)"
bad=$(jqf '[.probes[] | select(.configuration == "allowlist" and (.outcome != "pass" or .pass != true))
           | "\(.probe)/\(.transport): \(.observed)"] | join(", ")' "$result")
assert_eq "" "$bad" "every probe of configuration allowlist passes"
assert_eq allowlist "$(jqf '.phases[] | select(.configuration == "allowlist") | .egress' "$result")" \
  "the allowlist phase ran in egress mode allowlist"
for p in positive-control positive-control-v6; do
  for t in tcp udp; do
    assert_eq "blocked blocked 0" "$(al "$p" "$t" '"\(.expected) \(.observed) \(.evidence."canary-seen")"')" \
      "allowlist: the direct $p ($t) is expected blocked and is blocked, its canary saw nothing"
  done
done
assert_eq 0 "$(jqf '[.probes[] | select(.configuration == "allowlist" and (.probe | test("^(proxy|dns)-") | not)
                     and (.expected != "blocked" or .evidence."canary-seen" != 0))] | length' "$result")" \
  "allowlist: no direct probe is expected to reach anything, and no canary saw one"
assert_eq "reached 200 allowed" "$(al proxy-allowed tcp '"\(.observed) \(.evidence."http-status") \(.evidence."egress-verdict")"')" \
  "allowlist: CONNECT to the allowed canary through the proxy reaches it (200, logged allowed)"
assert_ne 0 "$(al proxy-allowed tcp '.evidence."canary-seen"')" "allowlist: the allowed canary saw the proxy's connection"
assert_eq "169.254.255.253" "$(al proxy-allowed tcp '.evidence."canary-first-peer"' | sed 's/:[0-9]*$//')" \
  "allowlist: it came from the host's end of the canary veth (the proxy re-originates it)"
for p in proxy-unlisted proxy-unlisted-name proxy-denied-range proxy-resolves-denied; do
  assert_eq "refused refused 403 denied 0" \
    "$(al "$p" tcp '"\(.expected) \(.observed) \(.evidence."http-status") \(.evidence."egress-verdict") \(.evidence."canary-seen")"')" \
    "allowlist: $p ($(al "$p" tcp .address)) is answered 403, logged denied, and reaches no canary"
done
assert_contains "$(al proxy-resolves-denied tcp '.evidence."egress-reason"')" "localhost resolves only into denied ranges" \
  "allowlist: the allowed name localhost is refused for its address (the deny list's loopback), not by the policy"
assert_eq "127.0.0.1" "$(al proxy-resolves-denied tcp '.evidence."canary-address"')" \
  "allowlist: the loopback canary stood ready for a proxy that connected anyway"
assert_eq "refused refused 200 denied" \
  "$(al proxy-sni-mismatch tcp '"\(.expected) \(.observed) \(.evidence."http-status") \(.evidence."egress-verdict")"')" \
  "allowlist: CONNECT to the allowed canary is answered 200, then its ClientHello naming another host is cut, logged denied"
assert_contains "$(al proxy-sni-mismatch tcp '.evidence."egress-reason"')" \
  "the TLS server name other.selftest.vivarium.invalid is not the CONNECT host 198.51.100.1" \
  "allowlist: the cut's reason names both hosts"
# The canary closes each connection at once: the tunnel must end then, not
# when the guest's nc gives up (5 s); the proxy logs it when it ends.
tunnel_ms=$(al proxy-allowed tcp '.evidence."egress-duration-ms"')
if [ -n "$tunnel_ms" ] && [ "$tunnel_ms" -lt 5000 ] 2>/dev/null; then
  ok "allowlist: the allowed tunnel ended when the canary closed it ($tunnel_ms ms, before the guest's 5 s)"
else
  not_ok "allowlist: the allowed tunnel ended when the canary closed it" "it lasted '$tunnel_ms' ms"
fi
diag "phases: $(jqf '[.phases[] | "\(.configuration) \(.["started-at"][11:19])-\(.["finished-at"][11:19])"] | join(", ")' "$result")"
assert_eq "answered answered 0 allowed" \
  "$(al dns-allowed dns '"\(.expected) \(.observed) \(.evidence."dns-rcode") \(.evidence."egress-verdict")"')" \
  "allowlist: the proxy's DNS answers the allowed name (NOERROR, logged allowed): the DNS probes' positive control"
assert_eq "refused refused 5 denied" \
  "$(al dns-unlisted dns '"\(.expected) \(.observed) \(.evidence."dns-rcode") \(.evidence."egress-verdict")"')" \
  "allowlist: a DNS question for an unlisted name is answered REFUSED, logged denied"
assert_eq "0 0" "$(al dns-unlisted dns '"\(.evidence."dns-stage-lookups") \(.evidence."dns-stage-ip-egress-packets")"')" \
  "allowlist: while only its DNS was asked, the proxy looked up nothing and its unit sent no packet (seen by no resolver)"
connect_lookups=$(al dns-unlisted dns '.evidence."connect-stage-lookups"')
connect_packets=$(al dns-unlisted dns '.evidence."connect-stage-ip-egress-packets"')
if [ "${connect_lookups:-0}" -gt 0 ] 2>/dev/null && [ "${connect_packets:-0}" -gt 0 ] 2>/dev/null; then
  ok "allowlist: both counts move when the proxy does look up and connect ($connect_lookups lookups, $connect_packets packets)"
else
  not_ok "allowlist: both counts move when the proxy does look up and connect" \
    "lookups '$connect_lookups', packets '$connect_packets'"
fi
assert_eq "blocked blocked 0" "$(al proxy-killed tcp '"\(.expected) \(.observed) \(.evidence."canary-seen")"')" \
  "allowlist: with the proxy killed, the allowed CONNECT reaches nothing"
for check in unit-closed-network egress-proxy-ip-address-deny egress-proxy-uid-covered-by-nft egress-state \
             egress-state-after-kill session-uid-covered-by-nft qemu-uid qemu-seccomp qemu-devices; do
  assert_eq true "$(jqf --arg k "$check" '[.["host-checks"][] | select(.configuration == "allowlist" and .check == $k)
                                          | .pass] | (length > 0 and all)' "$result")" \
    "allowlist: the host check $check is there and passes"
done
assert_contains "$(jqf '.["host-checks"][] | select(.configuration == "allowlist" and .check == "egress-state-after-kill")
                        | .observed' "$result")" "failed" "allowlist: the session's EgressState is failed once its proxy is killed"
assert_eq 0 "$(jqf '[.["host-checks"][] | select(.configuration == "allowlist" and .check == "unit-ip-address-deny")] | length' \
                 "$result")" "allowlist: the deny-list count is not asked of a closed unit"

# The positive control from a guest with both layers: it is reached, so a
# "blocked" elsewhere is not a dead network; and the session's drops counted.
assert_eq reached "$(jqf '.probes[] | select(.configuration == "both" and .probe == "positive-control"
                           and .transport == "tcp") | .observed' "$result")" \
  "a guest with both layers reaches the positive control (tcp)"
assert_eq reached "$(jqf '.probes[] | select(.configuration == "both" and .probe == "positive-control-v6"
                           and .transport == "tcp") | .observed' "$result")" \
  "a guest with both layers reaches the IPv6 positive control (tcp)"
drops=$(jqf '[.probes[] | select(.configuration == "both")][0].evidence."nft-dropped-packets-delta"' "$result")
if [ -n "$drops" ] && [ "$drops" != null ] && [ "$drops" -gt 0 ]; then
  ok "the nft drop counters rose for the both-layers session's uid ($drops packets)"
else
  not_ok "the nft drop counters rose for the both-layers session's uid" "delta: '$drops'"
fi

# The run was a Job (Operation self-test), named by Guard.Job.
job_prop () { busctl --json=short get-property "$BUS" "$1" "$JOB_IFACE" "$2" 2>/dev/null | jq -r .data; }
self_test_job=$(busctl --json=short get-property "$BUS" "$OBJ" "$GUARD" Job 2>/dev/null | jq -r .data)
assert_contains "$self_test_job" "$OBJ/jobs/" "Guard.Job names the self-test's Job ($self_test_job)"
assert_eq self-test "$(job_prop "$self_test_job" Operation)" "the Job's Operation is self-test"
assert_eq succeeded "$(job_prop "$self_test_job" State)" "the self-test's Job succeeded"
assert_eq 1 "$(job_prop "$self_test_job" Progress)" "the self-test's Job Progress is 1.0"
assert_eq false "$(job_prop "$self_test_job" Cancelable)" "the self-test's Job is not cancelable"

# Stored, and shown on the Guard interface, also after a restart.
stored=$(find "$SELFTEST_DIR" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)
assert_ne 0 "$stored" "the result is stored under $SELFTEST_DIR"
restart_daemon || bail_out "vivariumd does not come back after a restart"
assert_eq succeeded "$(job_prop "$self_test_job" State)" "after a restart, the self-test's Job is shown again"
assert_eq 's "pass"' "$(busctl get-property "$BUS" "$OBJ" "$GUARD" Verdict 2>&1)" \
  "after a restart, the Guard's Verdict is the stored pass"
last=$(busctl --json=short get-property "$BUS" "$OBJ" "$GUARD" LastResult 2>/dev/null | jq -r .data | jq -r .verdict)
assert_eq pass "$last" "after a restart, LastResult holds the stored result"
assert_ne "t 0" "$(busctl get-property "$BUS" "$OBJ" "$GUARD" LastRunAt 2>&1)" "LastRunAt is set"

# --- 2. a normal session's drops are counted ---------------------------------

session_id=$(vivariumctl session start "$IMAGE" 2>"$WORK/start.err")
rc=$?
assert_eq 0 "$rc" "a normal session starts ($(head -c 300 "$WORK/start.err"))"
if [ "$rc" = 0 ] && [ -n "$session_id" ]; then
  stop_quietly () { vivariumctl session stop "$1" >/dev/null 2>&1 || true; }
  at_exit stop_quietly "$session_id"
  unit=$(systemctl list-units 'vivarium-session-*' --state=active --no-legend --plain | awk 'NR == 1 { print $1 }')
  pid=$(systemctl show -P MainPID "$unit")
  uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
  session_drops () {
    nft -j list table inet vivarium_guard | jq --argjson u "$uid" \
      '[.nftables[] | select(.rule) | .rule | select(any(.expr[]; .match.left.meta.key? == "skuid" and .match.right == $u))
        | .expr[] | select(.counter) | .counter.packets] | add // 0'
  }
  before=$(session_drops)
  # The slirp gateway is the host's loopback: denied, so dropped and counted.
  vivariumctl session exec "$session_id" -- timeout 8 nc -w 3 10.0.2.2 22 </dev/null >/dev/null 2>&1
  after=$(session_drops)
  diag "session $session_id (uid $uid): $before -> $after dropped packets"
  if [ -n "$after" ] && [ -n "$before" ] && [ "$after" -gt "$before" ]; then
    ok "the drop counters rose for the normal session's uid"
  else
    not_ok "the drop counters rose for the normal session's uid" "before '$before', after '$after'"
  fi

  # The same session, probed as it is (both layers, the uid StartSession gave
  # it): it reaches the positive controls and none of the canaries.
  live=$WORK/live.json
  vivariumctl guard selftest --session "$session_id" --json > "$live" 2> "$WORK/live.err"
  assert_eq 0 "$?" "a self-test of the running session succeeds ($(tail -n 2 "$WORK/live.err" | tr '\n' ' '))"
  assert_eq pass "$(jqf .verdict "$live")" "the live session's verdict is pass"
  assert_eq "live-session" "$(jqf '[.probes[].configuration] | unique | join(" ")' "$live")" \
    "only the live session was probed (no scratch guest)"
  assert_eq "reached" "$(jqf '.probes[] | select(.probe == "positive-control" and .transport == "tcp") | .observed' "$live")" \
    "the normal session reaches the positive control"
  assert_eq 0 "$(jqf '[.probes[] | select(.expected == "blocked" and .evidence."canary-seen" != 0)] | length' "$live")" \
    "the normal session reaches no canary"
  assert_eq "running" "$(busctl get-property "$BUS" "$OBJ/sessions/$session_id" org.vivarium.Vivarium1.Session State | cut -d' ' -f2 | tr -d '"')" \
    "the probed session is still running"
  after_live=$(session_drops)
  if [ -n "$after_live" ] && [ "$after_live" -gt "$after" ]; then
    ok "the probes of the denied canaries were dropped and counted for that session ($after -> $after_live)"
  else
    not_ok "the probes of the denied canaries were dropped and counted for that session" "before '$after', after '$after_live'"
  fi
  vivariumctl session stop "$session_id" >/dev/null 2>&1
else
  not_ok "the drop counters rose for the normal session's uid" "no session"
fi

# --- 2b. a live allowlist session is judged by its mode ------------------------

stop_quietly () { vivariumctl session stop "$1" >/dev/null 2>&1 || true; }
al_id=$(vivariumctl session start "$IMAGE" --egress allowlist 2>"$WORK/al-start.err")
rc=$?
assert_eq 0 "$rc" "an allowlist session starts ($(head -c 300 "$WORK/al-start.err"))"
if [ "$rc" = 0 ] && [ -n "$al_id" ]; then
  at_exit stop_quietly "$al_id"
  live_al=$WORK/live-allowlist.json
  vivariumctl guard selftest --session "$al_id" --json > "$live_al" 2> "$WORK/live-al.err"
  assert_eq 0 "$?" "a self-test of the running allowlist session succeeds ($(tail -n 2 "$WORK/live-al.err" | tr '\n' ' '))"
  assert_eq pass "$(jqf .verdict "$live_al")" "the live allowlist session's verdict is pass, judged by its mode"
  assert_eq "blocked blocked" "$(jqf '.probes[] | select(.probe == "positive-control" and .transport == "tcp")
                                     | "\(.expected) \(.observed)"' "$live_al")" \
    "the live allowlist session's direct positive control is expected blocked, and is"
  assert_eq "refused refused pass" "$(jqf '.probes[] | select(.probe == "dns-unlisted")
                                        | "\(.expected) \(.observed) \(.outcome)"' "$live_al")" \
    "its proxy's DNS refuses the unlisted name (the positive control: the proxy answers)"
  assert_eq true "$(jqf '[.["host-checks"][] | select(.check == "unit-closed-network" or .check == "egress-state") | .pass]
                         | (length == 2 and all)' "$live_al")" "its host checks expect the closed network and a running proxy"
  assert_eq "running" "$(busctl get-property "$BUS" "$OBJ/sessions/$al_id" org.vivarium.Vivarium1.Session EgressState \
                          | cut -d' ' -f2 | tr -d '"')" "its proxy was not killed"
  vivariumctl session stop "$al_id" >/dev/null 2>&1
fi

# --- 3. it can fail: the negative control ------------------------------------

call_self_test () {  # JSON-OPTIONS-ARGS...: busctl prints {"type":"s","data":["…"]}
  busctl --json=short --timeout=900 call "$BUS" "$OBJ" "$GUARD" RunSelfTest 'a{sv}' "$@"
}
assert_dbus_error org.vivarium.Vivarium1.Error.NotSupported -- \
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$GUARD.RunSelfTest" "{'negative-control': <true>}"
assert_dbus_error org.vivarium.Vivarium1.Error.InvalidArgument -- \
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$GUARD.RunSelfTest" "{'no-such-option': <1>}"

mkdir -p "$(dirname "$NEG_CONF")" || bail_out "cannot create $(dirname "$NEG_CONF")"
printf '[Guard]\nAllowNegativeControl=true\n' > "$NEG_CONF" || bail_out "cannot write $NEG_CONF"
at_exit rm -f "$NEG_CONF"
restart_daemon || bail_out "vivariumd does not come back after a restart"

call_self_test 1 negative-control b true > "$WORK/negative.out" 2> "$WORK/negative.err" &
neg_pid=$!
# While it runs (its canary veth is up), a second run is refused. The
# second call names no real image, so even if it were let through it would
# boot nothing.
if retry_until 120 0.5 ip link show dev vv-canary; then
  assert_dbus_error org.vivarium.Vivarium1.Error.Busy -- gdbus call --system --dest "$BUS" --object-path "$OBJ" \
    --method "$GUARD.RunSelfTest" "{'image': <'no-such-image'>}"
  # The daemon holds the loopback canaries but did not make them: a socket
  # stays in the cgroup of the process that created it.
  daemon_pid=$(systemctl show -P MainPID "$UNIT")
  # The canary unit is gone by now, its cgroup with it (ss: "unreachable",
  # by its id); the sockets keep it.
  held=$(ss -Htlnup --cgroup src 127.0.0.1 or src '[::1]' 2>/dev/null | grep -F "pid=$daemon_pid,")
  diag "loopback sockets vivariumd holds: $(echo "$held" | awk '{ print $1, $5, $NF }' | tr '\n' ';')"
  assert_eq 4 "$(echo "$held" | grep -c .)" "vivariumd holds the four loopback canaries (127.0.0.1, ::1; tcp, udp)"
  assert_eq 4 "$(echo "$held" | grep -cE 'cgroup:(unreachable:[0-9a-f]+|/system\.slice/vivarium-canary-[^ ]+)[[:space:]]*$')" \
    "all four were created in the canary unit's cgroup, none in $UNIT's (vivarium-canary-net made them)"
  assert_eq 1 "$(echo "$held" | awk '{ print $NF }' | sort -u | wc -l)" "all four in one cgroup"
else
  not_ok "a second self-test is refused with Busy" "the first run's canary never came up"
fi
wait "$neg_pid"
rc=$?
assert_eq 0 "$rc" "RunSelfTest with the negative control returns a result ($(head -c 300 "$WORK/negative.err"))"
jq -r '.data[0]' "$WORK/negative.out" > "$WORK/negative.json" 2>/dev/null
assert_eq fail "$(jqf .verdict "$WORK/negative.json")" "with the negative control the verdict is fail"
assert_eq "both layer1-only layer2-only allowlist neither" "$(jqf '[.configurations[]] | join(" ")' "$WORK/negative.json")" \
  "the negative control adds the configuration neither"
for probe in host-loopback private-10 private-172 private-192 shared-100 link-local; do
  outcomes=$(jqf --arg p "$probe" '[.probes[] | select(.configuration == "neither" and .probe == $p) | .outcome] | join(" ")' \
               "$WORK/negative.json")
  assert_eq "fail fail" "$outcomes" "with neither layer, $probe (tcp, udp) reports fail, never pass"
done
assert_eq 0 "$(jqf '[.probes[] | select(.configuration == "neither" and .expected == "blocked" and .pass)] | length' \
                 "$WORK/negative.json")" "with neither layer, no blocked-expected probe passes"
bad=$(jqf '[.probes[] | select(.configuration != "neither" and .outcome != "pass") | "\(.configuration)/\(.probe)"] | join(", ")' \
        "$WORK/negative.json")
assert_eq "" "$bad" "in the same run, the other configurations still pass"
assert_eq 's "fail"' "$(busctl get-property "$BUS" "$OBJ" "$GUARD" Verdict 2>&1)" "the Guard's Verdict is now fail"
rm -f "$NEG_CONF"

# --- 4. the daemon runs the self-test with no AF_INET/AF_INET6, no namespace --

# vivarium-canary-net makes the canary network in a unit of its own, and
# vivarium-dns-relay the relay's, so the daemon needs neither
# socket(AF_INET/AF_INET6) nor unshare()/setns() for them. Since the git
# transfers moved to vivarium-git-transfer-<project>.service the installed
# unit says the same as this drop-in; the drop-in stays, so that this part
# holds whatever the unit says. The relay stays on (DnsRelay=auto): its unit,
# not the daemon, forwards.
readonly DAEMON_DROPIN_DIR=/run/systemd/system/$UNIT.d
readonly DAEMON_DROPIN=$DAEMON_DROPIN_DIR/50-test.conf
assert_eq yes "$(systemctl show -P RestrictNamespaces "$UNIT")" "the installed vivariumd.service has RestrictNamespaces=yes"
mkdir -p "$DAEMON_DROPIN_DIR" || bail_out "cannot create $DAEMON_DROPIN_DIR"
at_exit restart_daemon
at_exit systemctl daemon-reload
at_exit rm -f "$DAEMON_DROPIN"
printf '[Service]\nRestrictAddressFamilies=\nRestrictAddressFamilies=AF_UNIX AF_NETLINK\nIPAddressDeny=any\n' \
  > "$DAEMON_DROPIN" || bail_out "cannot write $DAEMON_DROPIN"
systemctl daemon-reload
restart_daemon || bail_out "vivariumd does not come back with RestrictAddressFamilies=AF_UNIX AF_NETLINK"
diag "vivariumd now: $(systemctl show -p RestrictNamespaces -p RestrictAddressFamilies "$UNIT" | tr '\n' ' ')"
assert_eq "AF_NETLINK AF_UNIX" "$(systemctl show -P RestrictAddressFamilies "$UNIT" | tr ' ' '\n' | sort | xargs)" \
  "vivariumd runs with RestrictAddressFamilies=AF_UNIX AF_NETLINK"
r_id=$(vivariumctl session start "$IMAGE" 2>"$WORK/r-start.err")
rc=$?
assert_eq 0 "$rc" "so restricted, a session starts ($(head -c 300 "$WORK/r-start.err"))"
if [ "$rc" = 0 ] && [ -n "$r_id" ]; then
  at_exit stop_quietly "$r_id"
  restricted=$WORK/restricted.json
  vivariumctl guard selftest --session "$r_id" --json > "$restricted" 2> "$WORK/restricted.err"
  assert_eq 0 "$?" "so restricted, a self-test of the session succeeds ($(tail -n 2 "$WORK/restricted.err" | tr '\n' ' '))"
  assert_eq pass "$(jqf .verdict "$restricted")" "so restricted, its verdict is pass"
  assert_eq reached "$(jqf '.probes[] | select(.probe == "positive-control" and .transport == "tcp") | .observed' \
                         "$restricted")" "so restricted, the positive control is reached (the canaries listen)"
  vivariumctl session stop "$r_id" >/dev/null 2>&1
fi
rm -f "$DAEMON_DROPIN"
systemctl daemon-reload
restart_daemon || bail_out "vivariumd does not come back without the drop-in"

# --- 5. an allow list on the slice refuses sessions --------------------------

mkdir -p "$SLICE_DROPIN_DIR" || bail_out "cannot create $SLICE_DROPIN_DIR"
printf '[Slice]\nIPAddressAllow=any\n' > "$SLICE_DROPIN" || bail_out "cannot write $SLICE_DROPIN"
at_exit systemctl daemon-reload
at_exit rm -f "$SLICE_DROPIN"
systemctl daemon-reload
assert_dbus_error org.vivarium.Vivarium1.Error.GuardUnavailable -- vivariumctl session start "$IMAGE"
assert_dbus_error org.vivarium.Vivarium1.Error.GuardUnavailable -- \
  gdbus call --system --dest "$BUS" --object-path "$OBJ" --method "$MGR.StartSession" "" "$IMAGE" "{}"
rm -f "$SLICE_DROPIN"
systemctl daemon-reload
assert_eq "" "$(systemctl list-units 'vivarium-session-*' 'vivarium-selftest-*' 'vivarium-egress-*' 'vivarium-canary-*' --state=active --no-legend --plain)" \
  "no session, self-test, egress proxy or canary unit is left running"
assert_eq "" "$(ip -o link show dev vv-canary 2>/dev/null)" "no canary veth is left over"

done_testing
