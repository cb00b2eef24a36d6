#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The test command: installs what is needed, builds, and runs every suite:
# unit, docs (man pages, completion, the D-Bus reference), integration
# (private bus + real polkitd), system (a real systemd host with real QEMU
# guests), slow (the debian image built, frozen and given two tasks), then the unit and integration suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Needs root. Fails loudly.
set -uo pipefail

src=$(cd -- "$(dirname -- "$(readlink -f -- "$0")")/.." && pwd -P)
build=${VIVARIUM_BUILD_DIR:-$src/build}
asan=${VIVARIUM_ASAN_BUILD_DIR:-$src/build-asan}
failed=0

"$src/tools/install-deps.sh" || { echo "run-tests: installing dependencies failed" >&2; exit 1; }

suite () {  # BUILDDIR SUITE [TIMEOUT-MULTIPLIER]
  meson test -C "$1" --suite "$2" --print-errorlogs --timeout-multiplier "${3:-1}" || failed=1
  "$src/tools/summarize-tests.py" "$1/meson-logs/testlog.json" "$2" >>"$src/.test-summary" || failed=1
}

rm -f "$src/.test-summary"
[ -d "$build" ] || meson setup "$build" "$src" --prefix=/usr || exit 1
meson compile -C "$build" || exit 1
suite "$build" unit
# Man pages, completion and docs/dbus-api.md against the programs and the XML.
suite "$build" docs
suite "$build" integration
suite "$build" system
# The debian image: its packages downloaded from the Debian mirror, then
# built, frozen and given a script task and an agent task (about 10 min).
suite "$build" slow
# The app: where the daemon is not installed, then against the real one.
suite "$build" ui
suite "$build" ui-system

[ -d "$asan" ] || meson setup "$asan" "$src" --prefix=/usr -Db_sanitize=address,undefined -Db_lundef=false \
  -Dapp=disabled || exit 1
meson compile -C "$asan" || exit 1
# Full stacks on malloc: libgit2, libssh2 and pcre2 are stripped, and their
# known leaks are suppressed by function (tests/lsan.supp).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$src/tests/lsan.supp:print_suppressions=0
suite "$asan" unit 3
suite "$asan" integration 3

# Every parser of untrusted bytes under libFuzzer from its seed corpus (the
# regression inputs of what it found among them): a short run, the whole of
# VIVARIUM_FUZZ_TOTAL_SECONDS (210) shared out among the harnesses, so that
# with the clang build and each harness's start the fuzzing stays within 5
# minutes of CI time; bench/fuzz.sh for long runs.
# The counts are run-fuzz.sh's own (its harness table), not written here.
fuzz_log=$(mktemp) || exit 1
"$src/tools/run-fuzz.sh" --total "${VIVARIUM_FUZZ_TOTAL_SECONDS:-210}" 2>&1 | tee "$fuzz_log"
fuzz_rc=${PIPESTATUS[0]}
read -r fuzz_passed fuzz_failed < <(sed -nE 's/^run-fuzz: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$fuzz_log" | tail -1)
rm -f "$fuzz_log"
if [ -z "${fuzz_passed:-}" ]; then
  # It stopped before running any harness (no clang, a build that failed).
  fuzz_passed=0 fuzz_failed=$("$src/tools/run-fuzz.sh" --list | wc -l)
fi
echo "fuzz $fuzz_passed $fuzz_failed 0" >>"$src/.test-summary"
[ "$fuzz_rc" -eq 0 ] && [ "$fuzz_failed" -eq 0 ] || failed=1

"$src/tools/summarize-tests.py" --total "$src/.test-summary" || failed=1
rm -f "$src/.test-summary"
exit $failed
