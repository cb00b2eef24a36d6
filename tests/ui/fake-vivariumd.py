#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# fake-vivariumd.py XML
#
# A stand-in for vivariumd on the private system bus of the UI test, so the
# test can see the app recover when the service appears and follow signals.
# It serves the real contract (interfaces read from the introspection XML)
# with fixed objects: session s1, frozen image tiny, a self-test result.
# Commands on stdin, one a line: "add ID" (a new running session and its
# SessionAdded), "remove ID" (SessionRemoved), "quit". Prints "ready" once
# it owns the name. It tests the app's side only, never the daemon's.

import json
import sys

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

BASE = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.'
DIGEST = 'sha256:' + '5b1d' * 16
RESULT = json.dumps({
    'schema': 'https://vivarium.org/schemas/selftest-result-1.json', 'verdict': 'pass',
    'started-at': '2026-12-01T10:00:00Z', 'finished-at': '2026-12-01T10:01:10Z',
    'image': 'tiny', 'image-digest': DIGEST, 'configurations': ['both', 'layer1-only', 'layer2-only'],
    'host-checks': [],
    'probes': [{'probe': p, 'configuration': c, 'transport': t, 'address': a, 'expected': e,
                'observed': e, 'outcome': 'pass', 'pass': True, 'evidence': {'canary-seen': 0}}
               for (p, a, e) in [('private-10', '10.255.255.254', 'blocked'),
                                 ('positive-control', '198.51.100.1', 'reached')]
               for c in ['both', 'layer1-only', 'layer2-only'] for t in ['tcp', 'udp']],
})


def session_props(sid, uid):
    return {
        'Id': GLib.Variant('s', sid), 'State': GLib.Variant('s', 'running'),
        'StateReason': GLib.Variant('s', ''), 'Image': GLib.Variant('s', 'tiny'),
        'ImageDigest': GLib.Variant('s', DIGEST), 'Project': GLib.Variant('s', ''),
        'StartedAt': GLib.Variant('t', GLib.get_real_time()), 'Accelerator': GLib.Variant('s', 'tcg'),
        'Uid': GLib.Variant('u', uid), 'Unit': GLib.Variant('s', 'vivarium-session-%s.service' % sid),
        'Leftovers': GLib.Variant('as', []),
        'StartupTimings': GLib.Variant('a{st}', {'image-check': 101, 'agent-ready': 5071940}),
    }


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        node = Gio.DBusNodeInfo.new_for_xml(f.read())
    ifaces = {i.name[len(IFACE):]: i for i in node.interfaces}
    props = {
        (BASE, 'Manager'): {'Version': GLib.Variant('s', '0.1.0'), 'State': GLib.Variant('s', 'running'),
                            'Accelerator': GLib.Variant('s', 'tcg'), 'PublicKey': GLib.Variant('s', ''),
                            'KeyFingerprint': GLib.Variant('s', '')},
        (BASE, 'Guard'): {'DenyList': GLib.Variant('as', ['10.0.0.0/8']), 'Layer1': GLib.Variant('s', 'enforced'),
                          'Layer2': GLib.Variant('s', 'enforced'), 'Verdict': GLib.Variant('s', 'pass'),
                          'LastRunAt': GLib.Variant('t', 0), 'LastResult': GLib.Variant('s', RESULT),
                          'Job': GLib.Variant('o', '/')},
        (BASE + '/images/tiny', 'Image'): {
            'Name': GLib.Variant('s', 'tiny'), 'Frozen': GLib.Variant('b', True), 'Digest': GLib.Variant('s', DIGEST),
            'Size': GLib.Variant('t', 41943040), 'VirtualSize': GLib.Variant('t', 1073741824),
            'Format': GLib.Variant('s', 'qcow2'), 'Recipe': GLib.Variant('s', 'tiny'),
            'CreatedAt': GLib.Variant('t', 0), 'FrozenAt': GLib.Variant('t', 0),
            'InUseBy': GLib.Variant('ao', [BASE + '/sessions/s1'])},
        (BASE + '/sessions/s1', 'Session'): session_props('s1', 2147000000),
    }
    registrations = {}
    conn = Gio.DBusConnection.new_for_address_sync(
        GLib.getenv('DBUS_SYSTEM_BUS_ADDRESS'), Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
        Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)

    def paths(collection):
        return sorted({p for (p, _) in props if p.startswith(BASE + '/' + collection + '/')})

    def on_call(conn, sender, path, iface, method, params, inv):
        answers = {'ListSessions': ('(ao)', (paths('sessions'),)), 'ListImages': ('(ao)', (paths('images'),)),
                   'ListRecipes': ('(as)', (['tiny'],)),
                   'GetCommandLog': ('(aa{sv}ttt)', ([], 0, 0, 0))}
        if method in answers:
            inv.return_value(GLib.Variant(*answers[method]))
        else:
            inv.return_dbus_error(IFACE + 'Error.NotAuthorized', 'the fake refuses %s' % method)

    def on_get(conn, sender, path, iface, name):
        return props.get((path, iface[len(IFACE):]), {}).get(name)

    def register(path, kind):
        registrations[path] = conn.register_object(path, ifaces[kind], on_call, on_get, None)

    def on_line(source, condition):
        line = sys.stdin.readline()
        words = line.split()
        if not line or words == ['quit']:
            loop.quit()
            return False
        path = BASE + '/sessions/' + words[1]
        if words[0] == 'add':
            props[(path, 'Session')] = session_props(words[1], 2147000001)
            register(path, 'Session')
            conn.emit_signal(None, BASE, IFACE + 'Manager', 'SessionAdded', GLib.Variant('(o)', (path,)))
        elif words[0] == 'remove':
            conn.emit_signal(None, BASE, IFACE + 'Manager', 'SessionRemoved', GLib.Variant('(o)', (path,)))
            conn.unregister_object(registrations.pop(path))
            del props[(path, 'Session')]
        print('done', line.strip(), flush=True)
        return True

    for (path, kind) in list(props):
        register(path, kind)
    Gio.bus_own_name_on_connection(conn, 'org.vivarium.Vivarium1', Gio.BusNameOwnerFlags.NONE,
                                   lambda c, n: print('ready', flush=True), lambda c, n: loop.quit())
    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, on_line)
    loop = GLib.MainLoop()
    loop.run()


if __name__ == '__main__':
    main()
