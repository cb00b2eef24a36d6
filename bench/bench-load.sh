#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Load benchmark (issue 18, "Load"), printed as figures (nothing here
# asserts a speed):
#  - N concurrent D-Bus clients (default 200: each its own connection to the
#    system bus, as root, spread over a few processes) calling ListSessions
#    and Properties.Get of a session's State back to back, while K restored
#    `tiny` sessions (default 8) each run an Exec loop; p50/p99 latency of
#    ListSessions, Get and Exec, and the number of calls;
#  - vivariumd's RSS before, during (peak of one sample a second) and after;
#  - a refused flood: 10 000 ListSessions from an unprivileged user (64 in
#    flight), each refused by polkit, and ListSessions latency for root
#    meanwhile against idle (the ratio);
#  - RSS after three Execs at the guest agent's 16 MiB output cap (what
#    system-memory asserts, here as a figure).
# Run on the systemd test host:
#   tests/system/vivarium-test-host run --build build -- bench/bench-load.sh
# Knobs: VIVARIUM_TEST_BENCH_CLIENTS (200), VIVARIUM_TEST_BENCH_SESSIONS (8),
# VIVARIUM_TEST_BENCH_SECONDS (30, the loaded phase), VIVARIUM_TEST_BENCH_FLOOD
# (10000). On a 2-core machine under TCG, 4 sessions is what runs; the
# figures say what was used.
set -euo pipefail

clients=${VIVARIUM_TEST_BENCH_CLIENTS:-200}
sessions=${VIVARIUM_TEST_BENCH_SESSIONS:-8}
seconds=${VIVARIUM_TEST_BENCH_SECONDS:-30}
flood=${VIVARIUM_TEST_BENCH_FLOOD:-10000}
readonly PY=/usr/bin/python3
work=$(mktemp -d /var/tmp/vivarium-bench.XXXXXX)
chmod 0755 "$work"
user=

ctl () { vivariumctl --no-interaction "$@"; }
daemon_pid () { systemctl show -P MainPID vivariumd.service; }
rss_mib () { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$(daemon_pid)/status"; }
ids=()
cleanup () {
  local id
  for id in "${ids[@]}"; do ctl session stop "$id" >/dev/null 2>&1 || true; done
  [ -z "$user" ] || userdel "$user" 2>/dev/null || true
  rm -f /etc/vivarium/conf.d/90-bench-load.conf
  rm -rf "$work"
}
trap cleanup EXIT

# One program for every role, its latencies (seconds, one a line, prefixed
# by the call's name) written to OUT.
cat >"$work/load.py" <<'EOF'
import random, sys, time
from gi.repository import Gio, GLib

BUS, OBJ, IFACE = "org.vivarium.Vivarium1", "/org/vivarium/Vivarium1", "org.vivarium.Vivarium1"
ADDRESS = Gio.dbus_address_get_for_bus_sync(Gio.BusType.SYSTEM, None)
FLAGS = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION

def connect():
    return Gio.DBusConnection.new_for_address_sync(ADDRESS, FLAGS, None, None)

class Loop:
    """Calls back to back on one connection until the deadline."""
    def __init__(self, conn, calls, out, deadline, done):
        self.conn, self.calls, self.out, self.deadline, self.done = conn, calls, out, deadline, done
        self.next()
    def next(self):
        if time.monotonic() >= self.deadline:
            self.done()
            return
        name, path, iface, method, args, timeout = random.choice(self.calls)
        t0 = time.monotonic()
        def reply(conn, res):
            try:
                conn.call_finish(res)
                self.out.append("%s %.6f" % (name, time.monotonic() - t0))
            except GLib.Error as e:
                self.out.append("%s-error %s" % (name, Gio.DBusError.get_remote_error(e) or e.message))
            self.next()
        self.conn.call(BUS, path, iface, method, args, None, 0, timeout, None, reply)

def run_loops(conns, calls, seconds, out_path):
    loop, out, left = GLib.MainLoop(), [], [len(conns)]
    def done():
        left[0] -= 1
        if left[0] == 0:
            loop.quit()
    deadline = time.monotonic() + seconds
    for c in conns:
        Loop(c, calls, out, deadline, done)
    loop.run()
    open(out_path, "w").write("\n".join(out) + "\n")

def reads(sessions):
    """ListSessions half the time, a Get of some session's State the other half."""
    calls = [("ListSessions", OBJ, IFACE + ".Manager", "ListSessions", None, 60000)] * max(len(sessions), 1)
    for s in sessions:
        calls.append(("Get", s, "org.freedesktop.DBus.Properties", "Get",
                      GLib.Variant("(ss)", (IFACE + ".Session", "State")), 60000))
    return calls

def flood(count, inflight):
    conn, loop, out, sent = connect(), GLib.MainLoop(), [], [0]
    def one():
        if sent[0] >= count:
            return
        sent[0] += 1
        def reply(c, res):
            try:
                c.call_finish(res)
                out.append("accepted")
            except GLib.Error as e:
                out.append(Gio.DBusError.get_remote_error(e) or e.message)
            if len(out) == count:
                loop.quit()
            one()
        conn.call(BUS, OBJ, IFACE + ".Manager", "ListSessions", None, None, 0, 120000, None, reply)
    t0 = time.monotonic()
    for _ in range(inflight):
        one()
    loop.run()
    took = time.monotonic() - t0
    # To stdout: the flood runs as a user who cannot write the work directory.
    print("took %.3f s" % took)
    for name in sorted(set(out)):
        print("%d %s" % (out.count(name), name))

role = sys.argv[1]
if role == "readers":      # N SECONDS OUT SESSION_PATH...
    n, seconds, out = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    run_loops([connect() for _ in range(n)], reads(sys.argv[5:]), seconds, out)
elif role == "probe":      # SECONDS OUT: one client, ListSessions only
    run_loops([connect()], reads([]), float(sys.argv[2]), sys.argv[3])
elif role == "exec":       # SECONDS OUT SESSION_PATH...: one Exec loop a session
    seconds, out, paths = float(sys.argv[2]), sys.argv[3], sys.argv[4:]
    loop, lines, left = GLib.MainLoop(), [], [len(paths)]
    def done():
        left[0] -= 1
        if left[0] == 0:
            loop.quit()
    deadline = time.monotonic() + seconds
    for p in paths:
        Loop(connect(), [("Exec", p, IFACE + ".Session", "Exec",
                          GLib.Variant("(asassu)", (["true"], [], "", 60)), 120000)], lines, deadline, done)
    loop.run()
    open(out, "w").write("\n".join(lines) + "\n")
elif role == "flood":      # COUNT INFLIGHT: the tally on stdout
    flood(int(sys.argv[2]), int(sys.argv[3]))
EOF

# stats FILE NAME: "p50 … ms, p99 … ms (n calls)" of NAME's latencies; errors counted apart
stats () {
  awk -v n="$2" '$1 == n { print $2 }' "$1" | sort -g | awk -v e="$(grep -c "^$2-error" "$1" || true)" '
    { a[NR] = $1 }
    END { if (NR == 0) { printf "no calls (%d errors)", e; exit }
          p50 = a[int((NR - 1) * 0.50) + 1]; p99 = a[int((NR - 1) * 0.99) + 1]
          printf "p50 %.1f ms, p99 %.1f ms (%d calls, %d errors)", p50 * 1000, p99 * 1000, NR, e }'
}
# errors FILE NAME: how many of NAME's calls failed, by error name
errors () {
  awk -v n="$2-error" '$1 == n { c[$2]++ } END { for (e in c) printf "%d × %s; ", c[e], e }' "$1"
}
p50_of () { awk -v n="$2" '$1 == n { print $2 }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR - 1) * 0.5) + 1] }'; }

echo "== set-up: $sessions restored tiny sessions, $clients clients, $seconds s loaded, a flood of $flood refused calls"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
mkdir -p /etc/vivarium/conf.d
printf '[Sessions]\nMaxSessions=%s\n' "$((sessions + 2))" >/etc/vivarium/conf.d/90-bench-load.conf
systemctl stop vivariumd.service 2>/dev/null || true
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
ctl image freeze tiny >/dev/null 2>&1 || true
paths=()
for _ in $(seq "$sessions"); do
  id=$(ctl session start tiny)
  ids+=("$id")
  paths+=("/org/vivarium/Vivarium1/sessions/$id")
  ctl session exec "$id" -- true >/dev/null
done
sleep 2
before=$(rss_mib)
echo "vivariumd RSS before (idle, $sessions sessions): $before MiB"

echo "== idle: one client, ListSessions only, 10 s"
"$PY" "$work/load.py" probe 10 "$work/idle"
echo "ListSessions idle: $(stats "$work/idle" ListSessions)"

echo "== loaded: $clients clients reading, $sessions Exec loops, $seconds s"
per=$(( (clients + 3) / 4 ))
pids=()
left=$clients
for i in 1 2 3 4; do
  take=$(( left < per ? left : per ))
  [ "$take" -gt 0 ] || break
  "$PY" "$work/load.py" readers "$take" "$seconds" "$work/readers.$i" "${paths[@]}" &
  pids+=($!)
  left=$((left - take))
done
"$PY" "$work/load.py" exec "$seconds" "$work/exec" "${paths[@]}" &
pids+=($!)
peak=0
for _ in $(seq "$((seconds + 5))"); do
  r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$(daemon_pid)/status")
  [ "$r" -gt "$peak" ] && peak=$r
  sleep 1
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$work"/readers.* >"$work/readers"
echo "ListSessions under load: $(stats "$work/readers" ListSessions)"
echo "Get (Session.State) under load: $(stats "$work/readers" Get)"
echo "Exec (true) under load: $(stats "$work/exec" Exec)"
echo "errors under load: ListSessions: $(errors "$work/readers" ListSessions) Get: $(errors "$work/readers" Get) Exec: $(errors "$work/exec" Exec)"
# Why the daemon refused: its own log line for each polkit check that failed.
echo "polkit checks that failed under load, by reason (vivariumd's journal):"
journalctl -u vivariumd.service --no-pager -o cat | grep -o 'polkit check of .* failed, refusing: .*' |
  sed 's/^polkit check of [^ ]* failed, refusing: //' | sort | uniq -c | sort -rn | head -5 || true
printf 'vivariumd RSS during (peak of 1 s samples): %.1f MiB\n' "$(echo "$peak / 1024" | bc -l)"
sleep 5
echo "vivariumd RSS after (5 s later): $(rss_mib) MiB"

echo "== a refused flood: $flood ListSessions from an unprivileged user, 64 in flight"
user=vbench$$
useradd --no-create-home --shell /usr/sbin/nologin --user-group "$user"
"$PY" "$work/load.py" probe 10 "$work/idle2"
runuser -u "$user" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 \
  "$PY" "$work/load.py" flood "$flood" 64 >"$work/flood" &
fpid=$!
sleep 1
"$PY" "$work/load.py" probe 10 "$work/during"
wait "$fpid"
echo "flood: $(tr '\n' ';' <"$work/flood")"
echo "ListSessions for root, idle: $(stats "$work/idle2" ListSessions)"
echo "ListSessions for root, during the flood: $(stats "$work/during" ListSessions)"
printf 'ratio during / idle (p50): %.2f\n' "$(echo "$(p50_of "$work/during" ListSessions) / $(p50_of "$work/idle2" ListSessions)" | bc -l)"
echo "vivariumd RSS after the flood: $(rss_mib) MiB"

echo "== three Execs at the guest agent's 16 MiB output cap, one session"
for _ in 1 2 3; do
  ctl session exec "${ids[0]}" -- head -c 16777216 /dev/zero >/dev/null || true
done
sleep 2
echo "vivariumd RSS after them (2 s later): $(rss_mib) MiB (before the load: $before MiB)"
