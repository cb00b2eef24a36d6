#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every relative link in README.md and docs/*.md names a file that exists
(the reference moves between files; a link left behind fails here).

Usage: test-doc-links.py SRCDIR"""
import glob
import os
import re
import sys


def main():
    src = sys.argv[1]
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    broken = n = 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        # Links and images outside code: ](target) or ](target#anchor).
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            n += 1
            if not os.path.exists(os.path.join(os.path.dirname(page), target)):
                print(f"not ok: {os.path.relpath(page, src)} links to {target}, which does not exist")
                broken += 1
    print(f"# {n} links in {len(pages)} pages, {broken} broken")
    sys.exit(1 if broken or n == 0 else 0)


if __name__ == "__main__":
    main()
