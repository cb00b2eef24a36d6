#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# vivariumd parses no guest byte: the guest-facing parsers (static library
# vivarium-guest) are linked into vivarium-session-helper and never into the
# daemon. Checked on the binaries' symbol tables; the helper must have them,
# so a renamed parser cannot make this pass by matching nothing.
#   check-daemon-symbols.sh VIVARIUMD SESSION_HELPER
set -eu
daemon=$1
helper=$2
parsers='vd_json_stream_|vd_qmp_client_|vd_agent_client_|vd_agent_exec_parse_status'
command -v nm >/dev/null || { echo "Bail out! nm (binutils) is needed"; exit 1; }
echo "1..2"
found=$(nm "$daemon" | grep -E " [TtDdBb] ($parsers)" || true)
if [ -z "$found" ]; then
  echo "ok 1 - vivariumd links no guest parser"
else
  echo "not ok 1 - vivariumd links no guest parser"
  echo "$found" | head -5 | sed 's/^/# /'
fi
n=$(nm "$helper" | grep -cE " [Tt] ($parsers)" || true)
if [ "$n" -ge 4 ]; then
  echo "ok 2 - vivarium-session-helper has the parsers ($n symbols)"
else
  echo "not ok 2 - vivarium-session-helper has the parsers (found $n)"
fi
