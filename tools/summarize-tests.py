#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Counts meson test results: per suite from testlog.json, or adds up the
per-suite lines into the closing line CI reads ("N passed, N failed")."""
import json
import sys


def count(testlog):
    # Each `meson test --suite S` run rewrites testlog.json with only S.
    passed = failed = skipped = 0
    with open(testlog, encoding="utf-8") as f:
        for line in f:
            result = json.loads(line)
            if result["result"] in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result["result"] == "SKIP":
                skipped += 1
            else:
                failed += 1
    return passed, failed, skipped


def main():
    if sys.argv[1] == "--total":
        totals = [0, 0, 0]
        with open(sys.argv[2], encoding="utf-8") as f:
            for line in f:
                for i, n in enumerate(line.split()[1:4]):
                    totals[i] += int(n)
        print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")
        return 1 if totals[1] or totals[2] else 0
    passed, failed, skipped = count(sys.argv[1])
    print(f"{sys.argv[2]} {passed} {failed} {skipped}")
    if passed + failed == 0:
        print(f"summarize-tests: no test ran in suite {sys.argv[2]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
