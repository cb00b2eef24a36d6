#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The clients (app/, cli/) have one call path and typed states:
#  - every method of vivariumd is called through the generated proxies
#    (vivarium_dbus_*_call_*), which carry the call flags and the timeout;
#    only the bus's own methods and org.freedesktop.DBus.Properties are
#    called by name;
#  - no state word of common/vivarium-state.h is compared as a string: it
#    is parsed once where it is read and compared as an enum.
#
#   check-client-calls.py DIR...     (TAP on stdout; exit status 1 on a finding)

import os
import re
import sys

# A call by method name: the name is the argument right after the proxy or
# the connection's destination, path and interface.
BY_NAME = re.compile(r'\bg_dbus_(?:proxy_call(?:_sync|_with_unix_fd_list(?:_sync)?)?|'
                     r'connection_call(?:_sync|_with_unix_fd_list(?:_sync)?)?)\s*\(([^;]*?);', re.S)
BUS_OWN = re.compile(r'"org\.freedesktop\.DBus(?:\.Properties)?"')
STATES = ('starting', 'running', 'paused', 'stopping', 'stopped', 'failed', 'succeeded',
          'cancelled', 'off', 'IN_PROGRESS', 'NEEDS_INPUT', 'DONE', 'FAILED', 'never-run',
          'pass', 'fail', 'inconclusive')
COMPARED = re.compile(r'\b(?:g_strcmp0|g_str_equal|strcmp)\s*\([^;{}]*?"(%s)"' % '|'.join(STATES))


def findings(path):
    with open(path, encoding='utf-8') as fh:
        text = fh.read()
    for m in BY_NAME.finditer(text):
        if not BUS_OWN.search(m.group(1)):
            line = text.count('\n', 0, m.start()) + 1
            yield '%s:%d: a method called by name, not through its generated proxy' % (path, line)
    for m in COMPARED.finditer(text):
        line = text.count('\n', 0, m.start()) + 1
        yield '%s:%d: the state "%s" compared as a string' % (path, line, m.group(1))


def main(dirs):
    files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d) if f.endswith('.c'))
    print('1..%d' % len(files))
    failed = False
    for i, path in enumerate(files, 1):
        found = list(findings(path))
        for f in found:
            print('# ' + f)
        print('%s %d %s' % ('not ok' if found else 'ok', i, os.path.basename(path)))
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
