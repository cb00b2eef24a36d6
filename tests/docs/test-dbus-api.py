#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""docs/dbus-api.md is what tools/dbus-api-doc.py makes of the XML now (a
changed XML without a regenerated reference fails, with the diff), and it
has a heading for every interface, method, property and signal that GDBus's
own parser (GDBusNodeInfo) finds in the XML.

Usage: test-dbus-api.py XML GENERATOR DOC"""
import difflib
import os
import subprocess
import sys

import gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio  # noqa: E402


def main():
    xml, generator, doc = (os.path.normpath(p) for p in sys.argv[1:4])
    fresh = subprocess.run([sys.executable, generator, xml], capture_output=True, text=True, check=True).stdout
    with open(doc, encoding="utf-8") as f:
        kept = f.read()
    failed = False
    if fresh != kept:
        sys.stdout.writelines(difflib.unified_diff(kept.splitlines(True), fresh.splitlines(True),
                                                   doc, "regenerated from " + xml))
        print(f"not ok: {doc} does not match the XML; run tools/dbus-api-doc.py {xml} > {doc}")
        failed = True
    with open(xml, encoding="utf-8") as f:
        info = Gio.DBusNodeInfo.new_for_xml(f.read())
    headings = {line.rstrip("\n") for line in kept.splitlines(True) if line.startswith("#")}
    n = 0
    for iface in info.interfaces:
        want = [f"## {iface.name}"] + [f"#### {m.name}" for m in
                                        list(iface.methods) + list(iface.properties) + list(iface.signals)]
        for h in want:
            n += 1
            if h not in headings:
                print(f"not ok: {doc} has no heading “{h}” ({iface.name})")
                failed = True
    print(f"# {len(info.interfaces)} interfaces, {n} headings checked")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
