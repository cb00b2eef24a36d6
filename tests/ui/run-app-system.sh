#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-app-system.sh BUILDDIR SRCDIR LOGDIR [SCRIPT]: SCRIPT (by default
# test-app-system.sh) in the systemd test host; the screenshots it prints as
# "# png NAME BASE64" are written to LOGDIR (the container's files vanish
# with it).
set -u
build=$1 src=$2 logdir=$3 script=${4:-test-app-system.sh}
mkdir -p "$logdir"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$src/tests/system/vivarium-test-host" run --build "$build" -- "$src/tests/ui/$script" >"$out" 2>&1
rc=$?
grep -v '^# png ' "$out"
grep '^# png ' "$out" | while read -r _ _ name data; do
  case "$name" in *[!A-Za-z0-9._-]*) continue ;; esac
  base64 -d <<<"$data" >"$logdir/$name" && echo "# screenshot $logdir/$name"
done
exit $rc
