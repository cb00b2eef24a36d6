#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# One owner per interface (docs/architecture.md): the table there names, for
# every method of dbus/org.vivarium.Vivarium1.xml, the file that handles it.
# This checks the table against the code: every method is in exactly one row,
# and the row's first file connects that method's handler ("handle-<method>").
# A handler moved without the table, or a method added without a row, fails.
#
#   check-interface-owners.py SOURCE_ROOT     (TAP on stdout; exit status 1 on a mismatch)

import os
import re
import sys
import xml.etree.ElementTree as ET

PREFIX = 'org.vivarium.Vivarium1.'
ROW = re.compile(r'^\|\s*([A-Za-z]+):\s*([^|]+)\|\s*`([^`]+)`')


def kebab(name):
    return re.sub(r'(?<!^)(?=[A-Z])', '-', name).lower()


def methods_of(xml_path):
    out = {}
    for iface in ET.parse(xml_path).getroot().iter('interface'):
        name = iface.get('name')
        if name.startswith(PREFIX):
            out[name[len(PREFIX):]] = [m.get('name') for m in iface.iter('method')]
    return out


def table_rows(doc_path):
    rows = []
    with open(doc_path, encoding='utf-8') as fh:
        for line in fh:
            m = ROW.match(line)
            if m:
                names = [n.strip() for n in m.group(2).split(',')]
                rows.append((m.group(1), names, m.group(3)))
    return rows


def main():
    if len(sys.argv) != 2:
        print('Bail out! usage: check-interface-owners.py SOURCE_ROOT')
        return 2
    root = sys.argv[1]
    methods = methods_of(os.path.join(root, 'dbus', 'org.vivarium.Vivarium1.xml'))
    rows = table_rows(os.path.join(root, 'docs', 'architecture.md'))
    owners = {}
    problems = []
    for iface, names, path in rows:
        for name in names:
            if name not in methods.get(iface, []):
                continue   # properties, signals: not handlers
            if (iface, name) in owners:
                problems.append('%s.%s is in two rows' % (iface, name))
            owners[(iface, name)] = path
    for iface, names in sorted(methods.items()):
        for name in names:
            path = owners.get((iface, name))
            if path is None:
                problems.append('%s.%s has no row in the table' % (iface, name))
                continue
            with open(os.path.join(root, 'service', path), encoding='utf-8') as fh:
                text = fh.read()
            if '"handle-%s"' % kebab(name) not in text:
                problems.append('%s.%s: the table says %s, which connects no "handle-%s"'
                                % (iface, name, path, kebab(name)))
    print('1..1')
    if not problems:
        print('ok 1 - every method of %d interfaces has its one owner in the table' % len(methods))
        return 0
    print('not ok 1 - docs/architecture.md and service/ disagree')
    for p in problems:
        print('# %s' % p)
    return 1


if __name__ == '__main__':
    sys.exit(main())
