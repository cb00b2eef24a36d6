#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Density benchmark (issue 18), printed as figures (nothing here asserts a
# speed or a size):
#  - N restored `tiny` sessions (VIVARIUM_TEST_BENCH_SESSIONS, default 48)
#    started at once, then each answers one `session exec ID -- true`, all at
#    once and then one after another: latency p50/p99/max and how many
#    answered within 2 s;
#  - memory: each QEMU's PSS (smaps_rollup, split anon/file/shmem) and RSS,
#    the host's used memory (MemTotal - MemAvailable) before and after;
#  - what shares pages between guests restored from one image: (a) as is,
#    (b) with KSM on (pages_sharing/pages_shared after a bounded settle, PSS
#    again), (c) how guest RAM is backed (read off each QEMU's mappings).
# Every session it started is stopped by id, and MaxSessions and KSM are put
# back, on any exit (trap).
# Run on the systemd test host (≈ 90 s with 48 sessions on 2 cores):
#   VIVARIUM_TEST_BTRFS=768M flock /tmp/vivarium-system.lock \
#     tests/system/vivarium-test-host run --build build -- bench/bench-density.sh
# KSM is host-wide: switching it here switches it for the machine outside too
# (for the ≈ 40 s of (b)); ksmd is not visible from inside (its CPU time is
# in /proc/<ksmd>/stat outside).
# Knobs: VIVARIUM_TEST_BENCH_SESSIONS (48), VIVARIUM_TEST_BENCH_KSM_SETTLE_SEC
# (60), VIVARIUM_TEST_BENCH_KSM_PAGES (ksmd's pages_to_scan meanwhile, 5000).
set -euo pipefail

sessions=${VIVARIUM_TEST_BENCH_SESSIONS:-48}
settle=${VIVARIUM_TEST_BENCH_KSM_SETTLE_SEC:-60}
ksm_pages=${VIVARIUM_TEST_BENCH_KSM_PAGES:-5000}
work=$(mktemp -d /var/tmp/vivarium-bench-density.XXXXXX)
conf=/etc/vivarium/conf.d/90-bench-density.conf
BUS=org.vivarium.Vivarium1
OBJ=/org/vivarium/Vivarium1

# ctl, now, median: the same one-liners as bench-sessions.sh.
ctl () { vivariumctl --no-interaction "$@"; }
now () { date +%s.%N; }
median () { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# Nearest rank: with 48 values p99 is the largest.
pct () { sort -g | awk -v p="$1" '{ a[NR] = $1 } END { i = int((NR * p + 99) / 100); if (i < 1) i = 1; print a[i] }'; }
mode () { busctl get-property "$BUS" "$OBJ/sessions/$1" "$BUS.Session" StartMode | cut -d' ' -f2 | tr -d '"'; }
list_ids () { { ctl session list --json 2>/dev/null | grep -o '"id" *: *"[0-9a-f]*"' | grep -o '[0-9a-f]\{12\}' || true; } | sort -u; }
used_kib () { awk '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 } END { print t - a }' /proc/meminfo; }
qemu_pid () { systemctl show -P MainPID "vivarium-session-$1.service"; }
mib () { awk '{ printf "%.1f", $1 / 1024 }'; }

# --- cleanup: only what this script started or changed -----------------------
ksm=          # the writable ksm directory, once found
ksm_saved=    # "run pages_to_scan sleep_millisecs" before we touched them
sysfs_mnt=    # our own sysfs mount, if we needed one
cleanup () {
  set +e
  # KSM first: it is the machine's, not this host's, and quick to put back
  # (a shutdown of the test host gives us little time).
  if [ -n "$ksm_saved" ]; then
    read -r run pages sleep_ms <<<"$ksm_saved"
    echo "$pages" >"$ksm/pages_to_scan"
    echo "$sleep_ms" >"$ksm/sleep_millisecs"
    echo "$run" >"$ksm/run" && echo "KSM put back: run=$(cat "$ksm/run") pages_to_scan=$(cat "$ksm/pages_to_scan")"
  fi
  if [ -n "$sysfs_mnt" ]; then
    mount -o remount,ro "$sysfs_mnt"
    umount "$sysfs_mnt"
  fi
  # Starts still in flight are bounded by their own timeout.
  wait
  # Ours: the ids our starts printed, and any session that appeared since we
  # listed them before starting (a start killed before it printed its id).
  { cat "$work"/id-* 2>/dev/null; list_ids | comm -13 "$work/ids-before" -; } | sort -u >"$work/to-stop"
  if [ -s "$work/to-stop" ]; then
    echo "stopping $(wc -l <"$work/to-stop") sessions"
    xargs -P 8 -I{} timeout 120 vivariumctl --no-interaction session stop {} <"$work/to-stop" >/dev/null 2>&1
  fi
  rm -f "$conf"
  systemctl stop vivariumd.service 2>/dev/null
  mountpoint -q "$work/sysfs" || rm -rf "$work"
}
: >"$work/ids-before"
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

mkdir -p /etc/vivarium/conf.d
printf '[Sessions]\nMaxSessions=%s\n' "$((sessions + 2))" >"$conf"
systemctl stop vivariumd.service 2>/dev/null || true

echo "== tiny with its boot snapshot"
ctl image list --json | grep -q '"name" *: *"tiny"' || ctl image build tiny tiny >/dev/null
ctl image freeze tiny >/dev/null
list_ids >"$work/ids-before"
sleep 2
used0=$(used_kib)
printf 'host: %d cpus, MemTotal %.0f MiB, used before %.0f MiB (MemTotal - MemAvailable), load %s\n' "$(nproc)" \
  "$(awk '/^MemTotal:/ { print $2 / 1024 }' /proc/meminfo)" "$(echo "$used0" | mib)" "$(cut -d' ' -f1-3 /proc/loadavg)"

# --- 1. N restored sessions at once -------------------------------------------
echo "== $sessions restored sessions started at once"
t0=$(now)
for i in $(seq "$sessions"); do
  (
    s=$(now)
    if id=$(timeout 300 vivariumctl --no-interaction session start tiny 2>"$work/start-err-$i" </dev/null); then
      echo "$id" >"$work/id-$i"
      echo "$(now) $s" | awk '{ print $1 - $2 }' >"$work/start-$i"
    fi
  ) &
done
wait
all_started=$(echo "$(now) $t0" | awk '{ print $1 - $2 }')
cat "$work"/id-* 2>/dev/null | sort -u >"$work/ids" || true
n=$(wc -l <"$work/ids")
failed=$((sessions - n))
printf 'started %d of %d in %.1f s (the last start returned then); StartSession each: p50 %.2f s, max %.2f s\n' \
  "$n" "$sessions" "$all_started" "$(cat "$work"/start-* | median)" "$(cat "$work"/start-* | pct 100)"
if [ "$failed" -gt 0 ]; then
  echo "$failed starts failed:"
  cat "$work"/start-err-* | grep . | cut -c1-300 | sort | uniq -c
fi
[ "$n" -gt 0 ] || exit 1
printf 'start modes: %s\n' "$(while read -r id; do mode "$id"; done <"$work/ids" | sort | uniq -c | tr -s ' \n' ' ')"

exec_round () {  # NAME PARALLEL(0|1): one `session exec ID -- true` per session
  local name=$1 id
  : >"$work/$name"
  while read -r id; do
    if [ "$2" = 1 ]; then
      ( s=$(now); rc=0; timeout 60 vivariumctl --no-interaction session exec "$id" -- true >/dev/null 2>&1 </dev/null || rc=$?
        echo "$(now) $s $rc" | awk '{ print $1 - $2, $3 }' >>"$work/$name" ) &
    else
      s=$(now); rc=0; timeout 60 vivariumctl --no-interaction session exec "$id" -- true >/dev/null 2>&1 </dev/null || rc=$?
      echo "$(now) $s $rc" | awk '{ print $1 - $2, $3 }' >>"$work/$name"
    fi
  done <"$work/ids"
  wait
  printf '%s: p50 %.3f s, p99 %.3f s, max %.3f s; answered within 2 s: %d of %d (failed: %d); load %s\n' "$name" \
    "$(awk '{ print $1 }' "$work/$name" | median)" "$(awk '{ print $1 }' "$work/$name" | pct 99)" \
    "$(awk '{ print $1 }' "$work/$name" | pct 100)" "$(awk '$2 == 0 && $1 <= 2' "$work/$name" | wc -l)" \
    "$(wc -l <"$work/$name")" "$(awk '$2 != 0' "$work/$name" | wc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
echo "== one exec each, with $n sessions running (each a vivariumctl process: bus connection, polkit, guest-exec)"
exec_round "all at once" 1
exec_round "one after another" 0

# --- 2. memory per session ----------------------------------------------------
memory () {  # LABEL: PSS, its anon/file/shmem parts, RSS, unit memory, host used
  local label=$1 id pid
  : >"$work/mem"
  while read -r id; do
    pid=$(qemu_pid "$id")
    [ "$pid" -gt 0 ] 2>/dev/null || continue
    printf '%s %s\n' "$(awk '/^(Pss|Pss_Anon|Pss_File|Pss_Shmem|Rss):/ { v[$1] = $2 }
                              END { print v["Pss:"] + 0, v["Pss_Anon:"] + 0, v["Pss_File:"] + 0, v["Pss_Shmem:"] + 0, v["Rss:"] + 0 }' \
                              "/proc/$pid/smaps_rollup")" \
      "$(cat "/proc/$pid/ksm_merging_pages" 2>/dev/null || echo 0)" >>"$work/mem"
  done <"$work/ids"
  local used
  used=$(used_kib)
  printf '%s, median of %d QEMUs: PSS %s MiB (anon %s, file %s, shmem %s), RSS %s MiB; sum of PSS %.0f MiB\n' \
    "$label" "$(wc -l <"$work/mem")" "$(awk '{ print $1 }' "$work/mem" | median | mib)" \
    "$(awk '{ print $2 }' "$work/mem" | median | mib)" "$(awk '{ print $3 }' "$work/mem" | median | mib)" \
    "$(awk '{ print $4 }' "$work/mem" | median | mib)" "$(awk '{ print $5 }' "$work/mem" | median | mib)" \
    "$(awk '{ s += $1 } END { print s / 1024 }' "$work/mem")"
  printf '%s, host used: %.0f MiB, %.0f MiB more than before the sessions: %.1f MiB a session\n' "$label" \
    "$(echo "$used" | mib)" "$(echo "$((used - used0))" | mib)" "$(echo "$(((used - used0) / n))" | mib)"
}
echo "== memory (a): as is, KSM run=$(cat /sys/kernel/mm/ksm/run 2>/dev/null || echo '?')"
memory "as is"

# --- 3c. how guest RAM is backed ------------------------------------------------
echo "== (c) guest RAM's backing, read off one QEMU"
pid=$(qemu_pid "$(head -1 "$work/ids")")
printf 'QEMU (%s, pid %s) command line: %s memory-backend object(s), -machine %s, -m %s\n' \
  "$(cat "/proc/$pid/comm")" "$pid" "$(tr '\0' '\n' <"/proc/$pid/cmdline" | grep -c 'memory-backend' || true)" \
  "$(tr '\0' '\n' <"/proc/$pid/cmdline" | grep -A1 -x -- -machine | tail -1)" \
  "$(tr '\0' '\n' <"/proc/$pid/cmdline" | grep -A1 -x -- -m | tail -1)"
# Guest RAM is the mapping with the most resident memory (the largest one
# by size is TCG's translation buffer, rwx): its path (none = anonymous),
# Rss, Anonymous, and whether it is madvise(MERGEABLE) ("mg" in VmFlags).
awk 'function keep () { if (rss > best) { best = rss; line = hdr; bsize = size; banon = anon; bflags = flags } }
     /^[0-9a-f]+-[0-9a-f]+ / { keep(); hdr = $0; size = 0; rss = 0; anon = 0; flags = "" }
     /^Size:/ { size = $2 } /^Rss:/ { rss = $2 } /^Anonymous:/ { anon = $2 } /^VmFlags:/ { flags = $0; if (/ mg/) mg += size }
     END { keep(); n = split(line, f, " "); path = (n >= 6) ? f[6] : "(anonymous)"
           printf "guest RAM (the most resident mapping): %.0f MiB %s %s, Rss %.1f MiB of which Anonymous %.1f MiB; mergeable (mg): %s; all mg mappings %.0f MiB\n",
                  bsize / 1024, f[2], path, best / 1024, banon / 1024, (bflags ~ / mg/) ? "yes" : "no", mg / 1024 }' "/proc/$pid/smaps"
printf 'boot.state (restored with migrate-incoming from a descriptor, read into that memory): %.1f MiB\n' \
  "$(echo "$(stat -c %s /var/lib/vivarium/images/tiny/boot.state) / 1048576" | bc -l)"

# --- 3b. KSM ------------------------------------------------------------------
echo "== memory (b): KSM on, up to $settle s to settle"
rewrite () { local v; v=$(cat "$1") && echo "$v" >"$1"; } 2>/dev/null  # writable, as it is, without changing it
if rewrite /sys/kernel/mm/ksm/run; then
  ksm=/sys/kernel/mm/ksm
elif [ -d /sys/kernel/mm/ksm ]; then
  # nspawn mounts the container's sysfs read-only, superblock and all. A
  # sysfs of our own, remounted read-write, reaches the same (host-wide) KSM
  # knobs; it is put back read-only and unmounted at exit.
  sysfs_mnt=$work/sysfs
  mkdir -p "$sysfs_mnt"
  if mount -t sysfs sysfs "$sysfs_mnt" 2>/dev/null && mount -o remount,rw "$sysfs_mnt" 2>/dev/null &&
     rewrite "$sysfs_mnt/kernel/mm/ksm/run"; then
    ksm=$sysfs_mnt/kernel/mm/ksm
    echo "/sys is read-only here; KSM switched through a sysfs mounted read-write for this run (KSM is host-wide: the machine outside sees it too)"
  else
    mountpoint -q "$sysfs_mnt" && { mount -o remount,ro "$sysfs_mnt" 2>/dev/null; umount "$sysfs_mnt"; }
    sysfs_mnt=
  fi
fi
if [ -z "$ksm" ]; then
  echo "KSM cannot be switched from inside this host (no /sys/kernel/mm/ksm, or read-only and no writable sysfs): (b) not measured"
else
  ksm_saved="$(cat "$ksm/run") $(cat "$ksm/pages_to_scan") $(cat "$ksm/sleep_millisecs")"
  echo "KSM before: run, pages_to_scan, sleep_millisecs = $ksm_saved; now 1, $ksm_pages, 20"
  scans0=$(cat "$ksm/full_scans")
  echo "$ksm_pages" >"$ksm/pages_to_scan"
  echo 20 >"$ksm/sleep_millisecs"
  echo 1 >"$ksm/run"
  t0=$(now)
  last=-1
  elapsed=0
  while [ "$elapsed" -lt "$settle" ]; do
    sleep 5
    elapsed=$(echo "$(now) $t0" | awk '{ printf "%d", $1 - $2 }')
    sharing=$(cat "$ksm/pages_sharing")
    scans=$(($(cat "$ksm/full_scans") - scans0))
    printf '  %3d s: full scans %d, pages_shared %s, pages_sharing %s, pages_unshared %s, pages_volatile %s\n' "$elapsed" \
      "$scans" "$(cat "$ksm/pages_shared")" "$sharing" "$(cat "$ksm/pages_unshared")" "$(cat "$ksm/pages_volatile")"
    # Settled: two full scans done and sharing grew by less than 1 % since.
    if [ "$scans" -ge 2 ] && [ "$last" -ge 0 ] && [ $((sharing - last)) -le $((last / 100)) ]; then
      break
    fi
    [ "$scans" -ge 2 ] && last=$sharing
  done
  shared=$(cat "$ksm/pages_shared"); sharing=$(cat "$ksm/pages_sharing")
  printf 'KSM after %d s (%d full scans): pages_shared %d (%.1f MiB kept once), pages_sharing %d (%.1f MiB saved, %.1f MiB a session), zero pages %s, general_profit %s\n' \
    "$elapsed" "$(($(cat "$ksm/full_scans") - scans0))" "$shared" "$(echo "$((shared * 4))" | mib)" "$sharing" \
    "$(echo "$((sharing * 4))" | mib)" "$(echo "$((sharing * 4 / n))" | mib)" "$(cat "$ksm/ksm_zero_pages" 2>/dev/null || echo '?')" \
    "$(cat "$ksm/general_profit" 2>/dev/null || echo '?')"
  memory "KSM on"
  printf 'KSM on, per QEMU: ksm_merging_pages median %s (%.1f MiB)\n' "$(awk '{ print $6 }' "$work/mem" | median)" \
    "$(awk '{ print $6 * 4 }' "$work/mem" | median | mib)"
  echo "== exec again with KSM on"
  exec_round "one after another, KSM on" 0
fi
