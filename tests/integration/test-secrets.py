#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Manager.AddSecret / ListSecrets / RemoveSecret on the real daemon, through
# a private bus (run-in-private-bus.sh), with values passed as descriptors
# the way a client must: the store's files and modes, every refusal typed,
# the size bound, a value that never ends held against its own call only
# (the daemon answers others meanwhile), and no value in any reply. TAP.

import fcntl
import os
import stat
import struct
import termios
import time
import sys
import threading

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

from vivtap import bail, finish, ok  # noqa: E402

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.Manager'
ERR = 'org.vivarium.Vivarium1.Error.'
VALUE = 'vivarium-test-value-' + os.urandom(8).hex()



def pipe_with(data, close=True):
    r, w = os.pipe()
    os.write(w, data)
    if close:
        os.close(w)
        return r, None
    return r, w


def add_secret(bus, name, hosts, options, value, close=True, timeout=30000):
    """Returns (error name or None, message, writer fd left open)."""
    r, w = pipe_with(value, close)
    fds = Gio.UnixFDList.new()
    index = fds.append(r)
    os.close(r)
    args = GLib.Variant('(sasa{sv}h)', (name, hosts, options, index))
    try:
        bus.call_with_unix_fd_list_sync(BUS, OBJ, IFACE, 'AddSecret', args, None,
                                        Gio.DBusCallFlags.NONE, timeout, fds, None)
        return None, '', w
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e), e.message, w


def call(bus, method, args=None, reply=None):
    try:
        return None, bus.call_sync(BUS, OBJ, IFACE, method, args, reply, Gio.DBusCallFlags.NONE, 30000, None), ''
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e), None, e.message


def main():
    state = os.environ.get('VIVARIUM_STATE_DIR')
    if os.getuid() != 0 or not state:
        bail('run me as root through tests/integration/run-in-private-bus.sh')
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    store = os.path.join(state, 'secrets')

    err, msg, _ = add_secret(bus, 'GH_TOKEN', ['api.github.example', '*.forge.example'],
                             {'header': GLib.Variant('s', 'Authorization'),
                              'format': GLib.Variant('s', 'token {}')}, (VALUE + '\n').encode())
    ok(err is None, 'AddSecret stores a secret from a pipe (%s)' % msg)
    st = os.stat(store)
    ok(stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0, 'the store is root 0700')
    path = os.path.join(store, 'GH_TOKEN.secret')
    st = os.stat(path)
    ok(stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0, 'the secret file is root 0600')
    with open(path, 'rb') as f:
        ok(VALUE.encode() not in f.read(), 'the value is not in the file as it was given')

    err, msg, _ = add_secret(bus, 'GH_TOKEN', ['api.github.example'], {}, b'other')
    ok(err == ERR + 'Exists' and 'GH_TOKEN' in msg, 'a second AddSecret of the name is Exists: ' + msg)
    err, msg, _ = add_secret(bus, 'GH_TOKEN', ['api.github.example', '*.forge.example'],
                             {'replace': GLib.Variant('b', True), 'format': GLib.Variant('s', 'token {}')},
                             VALUE.encode())
    ok(err is None, 'replace=true replaces it')

    bad = [
        ('1BAD', ['a.example'], {}, b'v', 'a name that is not a variable name'),
        ('BAD_HOST', ['10.0.0.1'], {}, b'v', 'an IP address as a host'),
        ('BAD_HOST', ['a.example:443'], {}, b'v', 'a host with a port'),
        ('BAD_HOST', [], {}, b'v', 'no host'),
        ('BAD_FORMAT', ['a.example'], {'format': GLib.Variant('s', 'no placeholder')}, b'v', 'a format without {}'),
        ('BAD_HEADER', ['a.example'], {'header': GLib.Variant('s', 'Two Words')}, b'v', 'a header that is no token'),
        ('BAD_OPTION', ['a.example'], {'colour': GLib.Variant('s', 'red')}, b'v', 'an unknown option'),
        ('BAD_VALUE', ['a.example'], {}, b'two\nlines', 'a value of two lines'),
        ('BAD_VALUE', ['a.example'], {}, b'', 'an empty value'),
    ]
    for name, hosts, options, value, what in bad:
        err, msg, _ = add_secret(bus, name, hosts, options, value)
        ok(err == ERR + 'InvalidArgument' and 'v' * 3 not in msg, 'refused, InvalidArgument: %s (%s)' % (what, msg))

    err, msg, _ = add_secret(bus, 'TOO_LARGE', ['a.example'], {}, b'x' * 16385)
    ok(err == ERR + 'TooLarge', 'a value over 16384 bytes is TooLarge: ' + msg)
    err, msg, _ = add_secret(bus, 'JUST_FITS', ['a.example'], {}, b'x' * 16384 + b'\n')
    ok(err is None, '16384 bytes and a newline fit (%s)' % msg)

    # A value whose writer never closes: the call waits its 10 s out, and
    # the daemon answers other calls meanwhile.
    result = {}

    r, w = os.pipe()
    os.write(w, b'partial')

    def hanging():
        fds = Gio.UnixFDList.new()
        index = fds.append(r)
        try:
            bus.call_with_unix_fd_list_sync(BUS, OBJ, IFACE, 'AddSecret', GLib.Variant(
                '(sasa{sv}h)', ('HANGING', ['a.example'], {}, index)), None, Gio.DBusCallFlags.NONE, 60000, fds, None)
            result['add'] = (None, '')
        except GLib.Error as e:
            result['add'] = (Gio.DBusError.get_remote_error(e), e.message)

    t = threading.Thread(target=hanging)
    t.start()
    # The daemon has the call once it has read what the pipe held (FIONREAD
    # sees the pipe's buffer from either end); only then ask it something.
    for _ in range(200):
        if struct.unpack('i', fcntl.ioctl(w, termios.FIONREAD, b'\0' * 4))[0] == 0:
            break
        time.sleep(0.05)
    os.close(r)
    try:
        listed = bus.call_sync(BUS, OBJ, IFACE, 'ListSecrets', None, GLib.VariantType('(aa{sv})'),
                               Gio.DBusCallFlags.NONE, 5000, None)
        err = None
    except GLib.Error as e:
        listed, err = None, e.message
    ok(err is None and t.is_alive(), 'ListSecrets is answered while an AddSecret waits for its value (%s)' % err)
    t.join(60)
    os.close(w)
    herr, hmsg = result.get('add', (None, ''))
    ok(herr == ERR + 'InvalidArgument' and 'did not end' in hmsg, 'a value that never ends is refused: ' + hmsg)

    secrets = listed.unpack()[0] if listed is not None else []
    names = [s['name'] for s in secrets]
    ok(names == ['GH_TOKEN', 'JUST_FITS'], 'ListSecrets lists the stored secrets by name: %s' % names)
    gh = secrets[0] if secrets else {}
    ok(gh.get('hosts') == ['api.github.example', '*.forge.example'] and gh.get('format') == 'token {}' and
       gh.get('header') == 'Authorization' and gh.get('added_at', 0) > 0, 'with hosts, header, format, time')
    ok(VALUE not in str(listed), 'and never a value')

    err, _, msg = call(bus, 'RemoveSecret', GLib.Variant('(s)', ('GH_TOKEN',)))
    ok(err is None and not os.path.exists(path), 'RemoveSecret removes the file')
    err, _, msg = call(bus, 'RemoveSecret', GLib.Variant('(s)', ('GH_TOKEN',)))
    ok(err == ERR + 'NotFound' and 'GH_TOKEN' in msg, 'removing it again is NotFound: ' + msg)
    err, _, msg = call(bus, 'RemoveSecret', GLib.Variant('(s)', ('../escape',)))
    ok(err == ERR + 'InvalidArgument', 'a path as a name is InvalidArgument: ' + msg)
    err, _, msg = call(bus, 'StartSession', GLib.Variant('(ssa{sv})', ('', 'none', {
        'egress': GLib.Variant('s', 'open'), 'secrets': GLib.Variant('as', ['JUST_FITS'])})))
    ok(err is not None and err.endswith('InvalidArgument') or err.endswith('NotFound'),
       'StartSession refuses secrets before anything boots: ' + msg)

    # The store's bound: JUST_FITS and the FILL_ secrets make 256; the next
    # is NoSpace, a replacement still fits, and a removal makes room.
    filled = all(add_secret(bus, 'FILL_%d' % i, ['a.example'], {}, b'v')[0] is None for i in range(255))
    ok(filled and len([f for f in os.listdir(store) if f.endswith('.secret')]) == 256,
       'the store takes 256 secrets')
    err, msg, _ = add_secret(bus, 'ONE_MORE', ['a.example'], {}, b'v')
    ok(err == ERR + 'NoSpace' and '256 secrets' in msg and 'ONE_MORE' in msg,
       'a 257th secret is NoSpace: ' + msg)
    ok(not os.path.exists(os.path.join(store, 'ONE_MORE.secret')), 'and nothing of it is stored')
    err, msg, _ = add_secret(bus, 'FILL_0', ['a.example'], {'replace': GLib.Variant('b', True)}, b'w')
    ok(err is None, 'replacing one of the 256 still fits (%s)' % msg)
    call(bus, 'RemoveSecret', GLib.Variant('(s)', ('FILL_0',)))
    err, msg, _ = add_secret(bus, 'ONE_MORE', ['a.example'], {}, b'v')
    ok(err is None, 'after a removal there is room again (%s)' % msg)

    return finish()


sys.exit(main())
