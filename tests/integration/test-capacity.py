#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Manager.GetCapacity on the real daemon through a private bus
# (run-in-private-bus.sh): the slots and the queue are the configured
# bounds with nothing in use, the host's figures agree with the kernel's
# as read here, and `vivariumctl status` shows them. (Refused to a caller
# polkit does not allow: integration-boundary calls every method so.)
# TAP.

import json
import os
import subprocess
import sys

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

from vivtap import bail, finish, ok  # noqa: E402

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.'



def meminfo():
    fields = {}
    with open('/proc/meminfo') as f:
        for line in f:
            key, _, rest = line.partition(':')
            fields[key] = int(rest.split()[0]) * 1024
    return fields


def main():
    config = os.environ.get('VIVARIUM_CONFIG_DIR')
    daemon = os.environ.get('VIVARIUM_TEST_DAEMON')
    if os.getuid() != 0 or not config or not daemon:
        bail('run me as root through tests/integration/run-in-private-bus.sh')
    d = os.path.join(config, 'conf.d')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, '50-test-capacity.conf'), 'w') as f:
        f.write('[Sessions]\nMaxSessions=3\n[Tasks]\nMaxQueuedTasks=5\n')

    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    try:
        r = bus.call_sync(BUS, OBJ, IFACE + 'Manager', 'GetCapacity', None, GLib.VariantType('(a{sv})'),
                          Gio.DBusCallFlags.NONE, 30000, None)
    except GLib.Error as e:
        bail('GetCapacity failed: %s' % e.message)
    cap = r.unpack()[0]
    types = {k: r.get_child_value(0).lookup_value(k, None).get_type_string() for k in cap}
    want = {'slots': 'u', 'slots-free': 'u', 'queued': 'u', 'queue-free': 'u', 'memory-total': 't',
            'memory-available': 't', 'load': 'd', 'cpus': 'u'}
    ok(types == want, 'the keys and types are the documented ones: %s' % sorted(types.items()))
    if types != want:
        bail('nothing more to check')
    ok(cap['slots'] == 3 and cap['slots-free'] == 3, 'slots: MaxSessions=3, all free (%d, %d)'
       % (cap['slots'], cap['slots-free']))
    ok(cap['queued'] == 0 and cap['queue-free'] == 5, 'queue: none waiting, room for MaxQueuedTasks=5 (%d, %d)'
       % (cap['queued'], cap['queue-free']))
    mem = meminfo()
    ok(cap['memory-total'] == mem['MemTotal'], 'memory-total is the kernel MemTotal (%d)' % cap['memory-total'])
    ok(0 < cap['memory-available'] <= cap['memory-total'] and
       abs(cap['memory-available'] - mem['MemAvailable']) < 2 * 1024 ** 3,
       'memory-available is near the kernel MemAvailable read here (%d, %d)'
       % (cap['memory-available'], mem['MemAvailable']))
    ok(cap['cpus'] == len(os.sched_getaffinity(0)), 'cpus: the CPUs a process may run on (%d)' % cap['cpus'])
    load = os.getloadavg()[0]
    ok(0 <= cap['load'] and abs(cap['load'] - load) < 2, 'load: the 1-minute load average (%.2f, %.2f here)'
       % (cap['load'], load))

    ctl = os.path.join(os.path.dirname(os.path.dirname(daemon)), 'cli', 'vivariumctl')
    out = subprocess.run([ctl, 'status'], capture_output=True, text=True, env=dict(os.environ, LC_ALL='C'))
    ok(out.returncode == 0 and 'Slots:' in out.stdout and '3 of 3 free' in out.stdout and
       '0 (room for 5 more)' in out.stdout and 'CPUs' in out.stdout,
       'vivariumctl status shows the slots and the queue:\n# ' + out.stdout.replace('\n', '\n# ') + out.stderr)
    out = subprocess.run([ctl, 'status', '--json'], capture_output=True, text=True)
    try:
        js = json.loads(out.stdout)
    except ValueError:
        js = {}
    ok(js.get('Capacity', {}).get('slots') == 3 and js['Capacity'].get('queue-free') == 5,
       'vivariumctl status --json carries Capacity: %s' % js.get('Capacity'))

    return finish()


sys.exit(main())
