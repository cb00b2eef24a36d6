#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Fuzzing benchmark (issue 18's "Fuzzing"), printed as figures: every
# harness of tests/fuzz for VIVARIUM_BENCH_FUZZ_SECONDS (default 600, ten
# minutes) each, one after another, through tools/run-fuzz.sh (the same
# build, seeds, bounds and dictionaries as the short run of
# tools/run-tests.sh), then a table of what each did: executions, their rate,
# coverage (edges of our code that ran, and libFuzzer's features) and the
# corpus it grew. A crash, leak or broken invariant fails it like the short
# run; its input is under build-fuzz/fuzz/<harness>/artifacts/. Needs clang.
# Nothing here needs root, a guest or a network.
#
#   bench/fuzz.sh [HARNESS...]     all of them by default (tools/run-fuzz.sh --list)
#   VIVARIUM_BENCH_FUZZ_SECONDS=60 bench/fuzz.sh fuzz-mcp
set -uo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_FUZZ_BUILD_DIR:-$src/build-fuzz}
seconds=${VIVARIUM_BENCH_FUZZ_SECONDS:-600}

[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] \
  || { echo "bench/fuzz.sh: VIVARIUM_BENCH_FUZZ_SECONDS must be a positive number, not '$seconds'" >&2; exit 1; }

start=$(date +%s)
"$src/tools/run-fuzz.sh" "$seconds" "$@"
rc=$?
tsv=$build/fuzz/summary.tsv
[ -f "$tsv" ] || { echo "bench/fuzz.sh: run-fuzz.sh wrote no $tsv" >&2; exit 1; }

echo
echo "Fuzzing, $seconds s a harness ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg) at the end," \
  "$(( $(date +%s) - start )) s in all):"
echo
printf '| %-24s | %-6s | %12s | %9s | %7s | %9s | %7s |\n' harness result executions "execs/s" edges features corpus
printf '|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..26})" "$(printf -- '-%.0s' {1..8})" \
  "$(printf -- '-%.0s' {1..14})" "$(printf -- '-%.0s' {1..11})" "$(printf -- '-%.0s' {1..9})" \
  "$(printf -- '-%.0s' {1..11})" "$(printf -- '-%.0s' {1..9})"
tail -n +2 "$tsv" | while IFS=$'\t' read -r name result secs execs rate edges features corpus; do
  printf '| %-24s | %-6s | %12s | %9s | %7s | %9s | %7s |\n' "$name" "$result" "$execs" "$rate" "$edges" "$features" "$corpus"
done
exit $rc
