#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Manager.AddSshKey / ListSshKeys / RemoveSshKey on the real daemon, through
# a private bus (run-in-private-bus.sh): a key made here with ssh-keygen,
# passed as a descriptor; the store's file and mode; the public key and the
# fingerprint ssh-keygen itself prints; every refusal typed (a passphrase
# key, not a key, too large, a bad name, an unknown option, twice); the
# private key in no reply; "ssh_keys" refused outside allowlist. TAP.

import os
import stat
import subprocess
import sys
import tempfile

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

from vivtap import bail, finish, ok  # noqa: E402

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.Manager'
ERR = 'org.vivarium.Vivarium1.Error.'



def add_key(bus, name, options, data):
    r, w = os.pipe()
    # A pipe holds 64 KiB: enough for the largest refusal here.
    os.write(w, data)
    os.close(w)
    fds = Gio.UnixFDList.new()
    index = fds.append(r)
    os.close(r)
    try:
        bus.call_with_unix_fd_list_sync(BUS, OBJ, IFACE, 'AddSshKey', GLib.Variant('(sa{sv}h)', (name, options, index)),
                                        None, Gio.DBusCallFlags.NONE, 30000, fds, None)
        return None, ''
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e), e.message


def call(bus, method, args=None, reply=None):
    try:
        return None, bus.call_sync(BUS, OBJ, IFACE, method, args, reply, Gio.DBusCallFlags.NONE, 30000, None), ''
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e), None, e.message


def keygen(path, passphrase=''):
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', passphrase, '-C', 'test', '-f', path], check=True)
    with open(path, 'rb') as f:
        private = f.read()
    with open(path + '.pub') as f:
        public = ' '.join(f.read().split()[:2])
    fp = subprocess.run(['ssh-keygen', '-l', '-E', 'sha256', '-f', path + '.pub'], check=True,
                        capture_output=True, text=True).stdout.split()[1]
    return private, public, fp


def main():
    state = os.environ.get('VIVARIUM_STATE_DIR')
    if os.getuid() != 0 or not state:
        bail('run me as root through tests/integration/run-in-private-bus.sh')
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    store = os.path.join(state, 'secrets')
    tmp = tempfile.mkdtemp()
    private, public, fp = keygen(os.path.join(tmp, 'a'))
    locked, _, _ = keygen(os.path.join(tmp, 'locked'), 'a passphrase')
    body = private.split(b'\n')[1]

    err, msg = add_key(bus, 'DEPLOY', {}, private)
    ok(err is None, 'AddSshKey stores a key from a pipe (%s)' % msg)
    path = os.path.join(store, 'DEPLOY.sshkey')
    st = os.stat(path)
    ok(stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0, 'the key file is root 0600')
    ok(not [f for f in os.listdir(store) if '.check-' in f], 'no check copy is left in the store')

    err, msg = add_key(bus, 'DEPLOY', {}, private)
    ok(err == ERR + 'Exists' and 'DEPLOY' in msg, 'a second AddSshKey of the name is Exists: ' + msg)
    err, msg = add_key(bus, 'DEPLOY', {'replace': GLib.Variant('b', True)}, private)
    ok(err is None, 'replace=true replaces it (%s)' % msg)

    bad = [
        ('LOCKED', {}, locked, 'InvalidArgument', 'a key with a passphrase'),
        ('NOT_A_KEY', {}, b'-----BEGIN OPENSSH PRIVATE KEY-----\nnonsense\n-----END OPENSSH PRIVATE KEY-----\n',
         'InvalidArgument', 'armour around nonsense'),
        ('NOT_A_KEY', {}, b'hello', 'InvalidArgument', 'not a key at all'),
        ('TOO_LARGE', {}, private + b'x' * 16384, 'TooLarge', 'over 16384 bytes'),
        ('1BAD', {}, private, 'InvalidArgument', 'a name that is not a variable name'),
        ('BAD_OPTION', {'colour': GLib.Variant('s', 'red')}, private, 'InvalidArgument', 'an unknown option'),
    ]
    for name, options, data, error, what in bad:
        err, msg = add_key(bus, name, options, data)
        ok(err == ERR + error and body.decode() not in msg, 'refused, %s: %s (%s)' % (error, what, msg))
    ok(sorted(f for f in os.listdir(store) if f.endswith('.sshkey')) == ['DEPLOY.sshkey'],
       'nothing refused was stored')

    err, listed, msg = call(bus, 'ListSshKeys', None, GLib.VariantType('(aa{sv})'))
    keys = listed.unpack()[0] if listed is not None else []
    ok(err is None and [k['name'] for k in keys] == ['DEPLOY'], 'ListSshKeys lists the key (%s)' % msg)
    k = keys[0] if keys else {}
    ok(k.get('public_key') == public, 'with its public key as ssh-keygen wrote it')
    ok(k.get('fingerprint') == fp, 'and the fingerprint ssh-keygen -l prints: %s' % k.get('fingerprint'))
    ok(k.get('added_at', 0) > 0, 'and when it was added')
    ok(body.decode() not in str(listed) and 'PRIVATE' not in str(listed), 'never the private key')

    err, _, msg = call(bus, 'StartSession', GLib.Variant('(ssa{sv})', ('', 'none', {
        'egress': GLib.Variant('s', 'open'), 'ssh_keys': GLib.Variant('as', ['DEPLOY'])})))
    ok(err == ERR + 'InvalidArgument' and 'allowlist' in msg, 'ssh_keys outside allowlist is refused: ' + msg)

    # The store's bound: DEPLOY and the FILL_ keys make 64; the next is
    # NoSpace, a replacement still fits.
    filled = all(add_key(bus, 'FILL_%d' % i, {}, private)[0] is None for i in range(63))
    ok(filled and len([f for f in os.listdir(store) if f.endswith('.sshkey')]) == 64, 'the store takes 64 keys')
    err, msg = add_key(bus, 'ONE_MORE', {}, private)
    ok(err == ERR + 'NoSpace' and '64 SSH keys' in msg, 'a 65th key is NoSpace: ' + msg)
    ok(not os.path.exists(os.path.join(store, 'ONE_MORE.sshkey')), 'and nothing of it is stored')
    err, msg = add_key(bus, 'FILL_0', {'replace': GLib.Variant('b', True)}, private)
    ok(err is None, 'replacing one of the 64 still fits (%s)' % msg)
    for i in range(63):
        call(bus, 'RemoveSshKey', GLib.Variant('(s)', ('FILL_%d' % i,)))

    err, _, msg = call(bus, 'RemoveSshKey', GLib.Variant('(s)', ('DEPLOY',)))
    ok(err is None and not os.path.exists(path), 'RemoveSshKey removes the file')
    err, _, msg = call(bus, 'RemoveSshKey', GLib.Variant('(s)', ('DEPLOY',)))
    ok(err == ERR + 'NotFound' and 'DEPLOY' in msg, 'removing it again is NotFound: ' + msg)
    err, _, msg = call(bus, 'RemoveSshKey', GLib.Variant('(s)', ('../escape',)))
    ok(err == ERR + 'InvalidArgument', 'a path as a name is InvalidArgument: ' + msg)

    return finish()


sys.exit(main())
