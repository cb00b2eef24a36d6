#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Fuzzes the egress parsers (tests/fuzz): sets up a clang build with
# -Dfuzz=enabled (libFuzzer + AddressSanitizer + UBSan), builds only the
# harnesses, and runs each for SECONDS (default 60) from its seed corpus.
# Fails on any crash, leak, timeout or broken invariant, naming the input
# libFuzzer kept; prints executions per second and coverage per harness.
#
#   tools/run-fuzz.sh [SECONDS]
#
# Reproduce a crash: build-fuzz/tests/fuzz/HARNESS build-fuzz/fuzz/HARNESS/crash-…
set -uo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_FUZZ_BUILD_DIR:-$src/build-fuzz}
seconds=${1:-60}

# harness and its -max_len: a little past each parser's own bound, so the
# refusals at the bound are reached too.
harnesses=(
  "fuzz-egress-sni 17000"      # VIVARIUM_SNI_MAX_HELLO 16 KiB
  "fuzz-egress-dns 600"        # VIVARIUM_DNS_MAX_QUERY 512
  "fuzz-egress-request 17000"  # VIVARIUM_EGRESS_MAX_HEAD 16 KiB
  "fuzz-egress-placeholder 70000"  # a body chunk is at most 64 KiB
  "fuzz-egress-rule 4096"      # 64 lines of rules (a rule is at most 300 bytes)
  "fuzz-egress-log 8192"       # lines of at most 4096 bytes; one page holds them all
)

die () { echo "run-fuzz: $*" >&2; exit 1; }

[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || die "SECONDS must be a positive number, not '$seconds'"
command -v clang >/dev/null || die "clang is not installed (libFuzzer is clang's): apt-get install clang"

if [ ! -f "$build/build.ninja" ]; then
  # Only what the harnesses link: no app, no tests or benchmarks.
  CC=clang meson setup "$build" "$src" -Dfuzz=enabled -Dapp=disabled -Dtests=false \
    || die "meson setup of $build failed"
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("tests/fuzz/${h%% *}"); done
meson compile -C "$build" "${targets[@]}" || die "building the harnesses failed"

# fuzz-egress-rule saves a policy per run: on tmpfs, where a flush costs
# nothing; a crashed harness leaves its files there, removed at the end.
scratch=$(mktemp -d "$([ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/vivarium-run-fuzz-XXXXXX") \
  || die "cannot make a scratch directory"
trap 'rm -rf -- "$scratch"' EXIT
export TMPDIR=$scratch

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
summary=()
for h in "${harnesses[@]}"; do
  name=${h%% *} max_len=${h##* }
  work=$build/fuzz/$name
  log=$work.log
  # New inputs go to a corpus in the build directory; the seeds in the
  # tree are only read.
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "run-fuzz: $name for ${seconds} s (max_len $max_len)"
  "$build/tests/fuzz/$name" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$src/tests/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+)/\1 edges, \2 features/')
  corpus=$(find "$work/corpus" -type f | wc -l)
  if [ $rc -ne 0 ]; then
    failed=1
    echo "run-fuzz: $name FAILED (exit $rc); its output is in $log" >&2
    grep -E 'ERROR: |SUMMARY: |assertion|Test unit written|ERROR:' "$log" | head -20 >&2
  fi
  summary+=("$(printf '%-20s %s  %10s execs  %7s execs/s  cov %s  corpus %s' "$name" \
    "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$corpus")")
done

echo
printf '%s\n' "${summary[@]}"
[ $failed -eq 0 ] || die "a harness failed; the inputs are under $build/fuzz/*/artifacts/"
echo "run-fuzz: every harness ran ${seconds} s without a failure"
