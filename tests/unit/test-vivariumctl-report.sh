#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivariumctl report verify|render on real signed files, offline: a good
# file verifies (exit 0, the fingerprint printed), a tampered one does not
# (exit 1, one line naming DigestMismatch), render refuses a tampered file
# unless --no-verify, and says so when it shows one. The system bus address
# points nowhere: these verbs must not need it.
set -u

ctl=${1:-}
maker=${2:-}
for prog in "$ctl" "$maker"; do
  if [ -z "$prog" ] || [ ! -x "$prog" ]; then
    echo "FAIL: usage: $0 PATH/TO/vivariumctl PATH/TO/make-signed-report (got '$prog')" >&2
    exit 1
  fi
done

export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/vivarium-test-bus
export LC_ALL=C.UTF-8
unset DBUS_SESSION_BUS_ADDRESS

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect STATUS ARGS... : runs vivariumctl, checks the exit status.
expect() {
  local want=$1 got
  shift
  checks=$((checks + 1))
  "$ctl" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  got=$?
  [ "$got" -eq "$want" ] || fail "vivariumctl $* exited $got, expected $want: $(cat "$tmp/err")"
}

# one_error NAME : stderr is one "vivariumctl: " line ending in [NAME], stdout empty.
one_error() {
  checks=$((checks + 1))
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "expected one line on stderr: $(cat "$tmp/err")"
  grep -q "^vivariumctl: .*\[$1\]\$" "$tmp/err" || fail "stderr does not name $1: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "unexpected output on stdout: $(cat "$tmp/out")"
}

fp=$("$maker" "$tmp/keys" "$tmp/good.json") || { echo "FAIL: make-signed-report failed" >&2; exit 1; }
other_fp=$("$maker" "$tmp/other-keys" "$tmp/other.json") || { echo "FAIL: make-signed-report failed" >&2; exit 1; }
mode=$(stat -c %a "$tmp/keys/report-signing-key.pem")
checks=$((checks + 1))
[ "$mode" = 600 ] || fail "the key file has mode $mode, expected 600"

# --- good files verify, and say by which key ---
expect 0 report verify "$tmp/good.json"
grep -qF "$fp" "$tmp/out" || fail "report verify does not print the fingerprint $fp: $(cat "$tmp/out")"
expect 0 report verify --fingerprint "$fp" "$tmp/good.json"
expect 0 report verify --fingerprint "sha256:$(echo "${fp#sha256:}" | tr a-f A-F)" "$tmp/good.json"
expect 0 report verify "$tmp/other.json"
grep -qF "$other_fp" "$tmp/out" || fail "report verify does not print the other key's fingerprint"

# --- another key's file, when a key is named ---
expect 1 report verify --fingerprint "$fp" "$tmp/other.json"
one_error org.vivarium.Vivarium1.Error.DigestMismatch

# --- tampered files: one byte, anywhere ---
size=$(stat -c %s "$tmp/good.json")
for pos in 0 10 $((size / 3)) $((size / 2)) $((size - 40)) $((size - 3)); do
  cp "$tmp/good.json" "$tmp/bad.json"
  byte=$(dd if="$tmp/good.json" bs=1 skip="$pos" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  printf "\\$(printf '%03o' $((byte ^ 1)))" | dd of="$tmp/bad.json" bs=1 seek="$pos" conv=notrunc 2>/dev/null
  cmp -s "$tmp/good.json" "$tmp/bad.json" && fail "byte $pos was not changed"
  expect 1 report verify "$tmp/bad.json"
  checks=$((checks + 1))
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^vivariumctl: .*\[org\.vivarium\.Vivarium1\.Error\.' "$tmp/err" \
    || fail "report verify of a file changed at byte $pos: $(cat "$tmp/err")"
done
# The summary: the worker's claim changed to say something else.
sed 's/All tests pass/All tests PASS/' "$tmp/good.json" >"$tmp/bad.json"
cmp -s "$tmp/good.json" "$tmp/bad.json" && fail "the summary was not changed"
expect 1 report verify "$tmp/bad.json"
one_error org.vivarium.Vivarium1.Error.DigestMismatch
# The verdict: fail made pass.
sed 's/"verdict":"fail"/"verdict":"pass"/' "$tmp/good.json" >"$tmp/bad.json"
expect 1 report verify "$tmp/bad.json"
one_error org.vivarium.Vivarium1.Error.DigestMismatch
expect 1 report render "$tmp/bad.json"
one_error org.vivarium.Vivarium1.Error.DigestMismatch

# --- render: verified, then shown; the forged lines stay quoted ---
expect 0 report render "$tmp/good.json"
grep -qx "Signature: valid, made with the key $fp" "$tmp/out" || fail "render does not say the signature is valid"
grep -qx "Verification: fail (the caller's command, exit status 2 in a fresh session)" "$tmp/out" \
  || fail "render does not show the verdict"
grep -q "^Warning: the verification re-run FAILED" "$tmp/out" || fail "render does not warn of the failed re-run"
grep -qx "> Verification: pass" "$tmp/out" || fail "render does not quote the worker's forged line"
grep -q "^Verification: pass" "$tmp/out" && fail "a forged line reached column 0"
grep -qx '  path: "evil\\u{000A}Outcome: DONE"' "$tmp/out" || fail "render does not escape the file name"
LC_ALL=C grep -q $'[^\t -~]' "$tmp/out" && fail "render printed a byte outside printable ASCII"
expect 0 report render --no-verify "$tmp/bad.json"
grep -qx "Signature: NOT VERIFIED" "$tmp/out" || fail "render --no-verify does not say it did not verify"

# --- usage and files ---
expect 2 report verify
expect 2 report verify a b
expect 2 report verify --fingerprint md5:00 "$tmp/good.json"
expect 2 report render --no-verify --fingerprint "$fp" "$tmp/good.json"
expect 1 report verify "$tmp/missing.json"
grep -qF "missing.json" "$tmp/err" || fail "a missing file is not named: $(cat "$tmp/err")"
: >"$tmp/empty.json"
expect 1 report verify "$tmp/empty.json"
one_error org.vivarium.Vivarium1.Error.InvalidArgument
expect 1 report verify /dev/zero
one_error org.vivarium.Vivarium1.Error.TooLarge
expect 0 --help
grep -q "^  report verify\b" "$tmp/out" || fail "--help does not list report verify"
grep -q "^  report render\b" "$tmp/out" || fail "--help does not list report render"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures in $checks checks" >&2
  exit 1
fi
echo "all $checks checks passed"
