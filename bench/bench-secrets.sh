#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The cost of interception (issue 17: "the cost of interception vs
# tunnelling, side by side"), printed as figures (nothing here asserts a
# speed). The egress proxy as built (worker/vivarium-egress), with a session
# CA and a secret for api.test, in front of an HTTPS server of the test's
# own on 127.0.0.1:443 — all inside the network and mount namespace that
# tests/unit/test-egress.c makes for itself, so nothing leaves this host.
# Each round, side by side: 5 connections with a small request each
# (set-up + request, mean ms) and one 8 MiB download (MiB/s), to plain.test
# (tunnelled: the proxy never decrypts) and to api.test (intercepted:
# terminated with a minted certificate, the header swapped, re-originated).
#   sudo bench/bench-secrets.sh [BUILDDIR]   (VIVARIUM_BENCH_RUNS, default 3)
set -euo pipefail

build=${1:-build}
runs=${VIVARIUM_BENCH_RUNS:-3}
[ "$(id -u)" = 0 ] || { echo "bench-secrets: run as root (the test makes namespaces)" >&2; exit 1; }
test_egress=$build/tests/unit/test-egress
proxy=$build/worker/vivarium-egress
for f in "$test_egress" "$proxy"; do
  [ -x "$f" ] || { echo "bench-secrets: $f is not built" >&2; exit 1; }
done

printf '%-6s %-28s %-28s\n' round "set-up + request (ms)" "8 MiB down (MiB/s)"
printf '%-6s %-13s %-14s %-13s %-14s\n' "" tunnelled intercepted tunnelled intercepted
for round in $(seq 1 "$runs"); do
  out=$(VIVARIUM_EGRESS=$(readlink -f "$proxy") timeout 300 "$test_egress" --tap -p /egress/proxy/secret-cost 2>&1) ||
    { echo "bench-secrets: the measuring test failed:" >&2; echo "$out" >&2; exit 1; }
  setup=$(sed -n 's/^# set-up and a small request: tunnelled \([0-9.]*\) ms, intercepted \([0-9.]*\) ms$/\1 \2/p' <<<"$out")
  down=$(sed -n 's/^# 8 MiB down: tunnelled \([0-9.]*\) MiB\/s, intercepted \([0-9.]*\) MiB\/s$/\1 \2/p' <<<"$out")
  [ -n "$setup" ] && [ -n "$down" ] || { echo "bench-secrets: no figures in the test's output" >&2; exit 1; }
  read -r ts is <<<"$setup"
  read -r td id <<<"$down"
  printf '%-6s %-13s %-14s %-13s %-14s\n' "$round" "$ts" "$is" "$td" "$id"
done
