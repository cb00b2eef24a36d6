#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Fuzzes every parser of untrusted bytes (tests/fuzz): sets up a clang build
# with -Dfuzz=enabled (libFuzzer + AddressSanitizer + UBSan), builds only
# the harnesses, and runs each from its seed corpus. Fails on any crash,
# leak, timeout or broken invariant, naming the input libFuzzer kept;
# prints executions per second and coverage per harness.
#
#   tools/run-fuzz.sh [SECONDS] [HARNESS...]   each harness SECONDS (default 60)
#   tools/run-fuzz.sh --total SECONDS          SECONDS shared out among all of them
#   tools/run-fuzz.sh --list                   the harnesses, one a line
#
# The last line says "run-fuzz: P passed, F failed" (tools/run-tests.sh
# counts from it). Reproduce a crash:
#   build-fuzz/tests/fuzz/HARNESS build-fuzz/fuzz/HARNESS/artifacts/crash-…
set -uo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_FUZZ_BUILD_DIR:-$src/build-fuzz}

# harness, its -max_len and its dictionary (tests/fuzz/*.dict, or -). The
# max_len is a little past each parser's own bound, so the refusals at the
# bound are reached too; where the daemon's bound is far larger, the harness
# picks smaller ones from its input (the code at the bound is the same).
harnesses=(
  "fuzz-egress-sni 17000 -"          # VIVARIUM_SNI_MAX_HELLO 16 KiB
  "fuzz-egress-dns 600 -"            # VIVARIUM_DNS_MAX_QUERY 512
  "fuzz-egress-request 17000 -"      # VIVARIUM_EGRESS_MAX_HEAD 16 KiB
  "fuzz-egress-placeholder 70000 -"  # a body chunk is at most 64 KiB
  "fuzz-egress-rule 4096 -"          # 64 lines of rules (a rule is at most 300 bytes)
  "fuzz-egress-log 8192 -"           # lines of at most 4096 bytes; one page holds them all
  "fuzz-json-stream 17000 json"      # the harness's message caps, up to 16 KiB
  "fuzz-agent-exec 6000 json"        # caps up to 4096 bytes of output (5464 of base64)
  "fuzz-report-verify 20000 json"    # one string past each report cap (4096 bytes)
  "fuzz-report-render 20000 -"       # likewise, in every place a report holds text
  "fuzz-mcp 70000 json"              # the largest argument, instructions: 64 KiB
  "fuzz-gateway-chat 17000 json"     # no byte bound of its own (depth 64); 4 KiB is the least MaxRequestBytes
  "fuzz-config 20000 -"              # the shipped defaults (9.4 KiB) and two layers
  "fuzz-command-log 20000 -"         # argv 4096, cwd 4096, error 1024, stderr 512 bytes per command
)

die () { echo "run-fuzz: $*" >&2; exit 1; }

if [ "${1:-}" = --list ]; then
  for h in "${harnesses[@]}"; do echo "${h%% *}"; done
  exit 0
fi
total=
if [ "${1:-}" = --total ]; then
  total=${2:-}
  seconds=1
  shift 2
else
  seconds=${1:-60}
  shift $(($# > 0 ? 1 : 0))
fi
[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || die "SECONDS must be a positive number, not '$seconds'"
# Only the harnesses named, when some are.
if [ $# -gt 0 ]; then
  chosen=()
  for name in "$@"; do
    found=
    for h in "${harnesses[@]}"; do [ "${h%% *}" = "$name" ] && chosen+=("$h") && found=1; done
    [ -n "$found" ] || die "no harness named '$name' (tools/run-fuzz.sh --list)"
  done
  harnesses=("${chosen[@]}")
fi
if [ -n "$total" ]; then
  [[ $total =~ ^[0-9]+$ ]] && [ "$total" -ge "${#harnesses[@]}" ] \
    || die "--total needs at least one second per harness (${#harnesses[@]}), not '$total'"
  seconds=$((total / ${#harnesses[@]}))
fi
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
passed=0
summary=()
# The same figures as tab-separated values, for bench/fuzz.sh's table.
tsv=$build/fuzz/summary.tsv
mkdir -p "$build/fuzz"
printf 'harness\tresult\tseconds\texecs\texecs_per_s\tedges\tfeatures\tcorpus\n' >"$tsv"
for h in "${harnesses[@]}"; do
  read -r name max_len dict <<<"$h"
  dict_arg=()
  [ "$dict" = - ] || dict_arg=(-dict="$src/tests/fuzz/$dict.dict")
  work=$build/fuzz/$name
  log=$work.log
  # New inputs go to a corpus in the build directory; the seeds in the
  # tree are only read.
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "run-fuzz: $name for ${seconds} s (max_len $max_len)"
  "$build/tests/fuzz/$name" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 "${dict_arg[@]}" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$src/tests/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  read -r edges features < <(grep -oE '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 \
    | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+)/\1 \2/')
  cov="${edges:-?} edges, ${features:-?} features"
  corpus=$(find "$work/corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "run-fuzz: $name FAILED (exit $rc); its output is in $log" >&2
    grep -E 'ERROR: |SUMMARY: |assertion|Test unit written|ERROR:' "$log" | head -20 >&2
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$seconds" \
    "${execs:-?}" "${rate:-?}" "${edges:-?}" "${features:-?}" "$corpus" >>"$tsv"
  summary+=("$(printf '%-24s %s  %10s execs  %7s execs/s  cov %s  corpus %s' "$name" \
    "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$corpus")")
done

echo
printf '%s\n' "${summary[@]}"
[ $failed -eq 0 ] || echo "run-fuzz: a harness failed; the inputs are under $build/fuzz/*/artifacts/" >&2
[ $failed -ne 0 ] || echo "run-fuzz: every harness ran ${seconds} s without a failure"
echo "run-fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
