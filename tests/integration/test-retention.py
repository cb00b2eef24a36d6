#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Retention at start, on the real daemon through a private bus
# (run-in-private-bus.sh): [Tasks] MaxReports= and MaxFinishedTasks= lowered
# between two runs of the daemon make the second prune while it loads, and
# what it prunes must leave the bus as well as the disk — no object left
# behind whose file is gone. Tasks and reports are made the one way a
# private bus can make them: records of tasks a killed daemon left running
# (TASKS/<id>.json), which the next start reports FAILED. A bound out of
# range or not a number is ignored for its default. (Pruning while clients listen, and who
# hears TaskRemoved / ReportRemoved, needs real tasks: system-retention.)
# TAP.

import json
import os
import signal
import sys
import time

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

from vivtap import bail, finish, ok  # noqa: E402

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.'
ERR = 'org.vivarium.Vivarium1.Error.'
TASK_IDS = ['0a11ce01', '0a11ce02', '0a11ce03', '0a11ce04']
MORE_IDS = ['0a11ce05', '0a11ce06']



def call(bus, path, iface, method, args=None, dest=BUS):
    try:
        r = bus.call_sync(dest, path, iface, method, args, None, Gio.DBusCallFlags.NONE, 30000, None)
        return None, r.unpack()
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e), e.message


def listed(bus, method):
    err, r = call(bus, OBJ, IFACE + 'Manager', method)
    if err is not None:
        bail('%s failed: %s' % (method, r))
    return sorted(r[0])


def children(bus, collection):
    err, r = call(bus, OBJ + '/' + collection, 'org.freedesktop.DBus.Introspectable', 'Introspect')
    if err is not None:
        bail('Introspect failed: %s' % r)
    return sorted(n.path for n in Gio.DBusNodeInfo.new_for_xml(r[0]).nodes)


def write_conf(config_dir, reports, tasks):
    d = os.path.join(config_dir, 'conf.d')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, '50-test-retention.conf'), 'w') as f:
        f.write('[Tasks]\nMaxReports=%s\nMaxFinishedTasks=%s\n' % (reports, tasks))


def stop_daemon(bus):
    """SIGTERM to the daemon the bus started for us; waits until its name is gone."""
    err, r = call(bus, '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetConnectionUnixProcessID',
                  GLib.Variant('(s)', (BUS,)), 'org.freedesktop.DBus')
    if err is not None:
        bail('no daemon to stop: %s' % r)
    os.kill(r[0], signal.SIGTERM)
    for _ in range(300):
        err, r = call(bus, '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'NameHasOwner',
                      GLib.Variant('(s)', (BUS,)), 'org.freedesktop.DBus')
        if err is None and not r[0]:
            return
        time.sleep(0.1)
    bail('the daemon did not leave the bus within 30 s of SIGTERM')


def plant(state, ids, first):
    """The records of tasks that were running when the daemon was killed."""
    os.makedirs(os.path.join(state, 'tasks'), exist_ok=True)
    for i, tid in enumerate(ids):
        with open(os.path.join(state, 'tasks', tid + '.json'), 'w') as f:
            json.dump({'id': tid, 'project': 'demo', 'image': 'tiny', 'image-digest': 'sha256:00',
                       'submitted-at': 1796112000000000 + first + i}, f)


def main():
    state = os.environ.get('VIVARIUM_STATE_DIR')
    config = os.environ.get('VIVARIUM_CONFIG_DIR')
    if os.getuid() != 0 or not state or not config:
        bail('run me as root through tests/integration/run-in-private-bus.sh')
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    reports_dir = os.path.join(state, 'reports')
    done_dir = os.path.join(state, 'tasks', 'done')

    # --- a first run: four interrupted tasks, every one kept -------------------
    write_conf(config, 10, 10)
    plant(state, TASK_IDS, 0)
    reports = listed(bus, 'ListReports')
    tasks = listed(bus, 'ListTasks')
    ok(len(reports) == 4 and len(tasks) == 4, 'the first run reports the four interrupted tasks FAILED: '
       '%d reports, %d tasks' % (len(reports), len(tasks)))
    if len(reports) != 4 or len(tasks) != 4:
        bail('nothing to prune')

    # --- a second run with bounds of 1, and one out of range ------------------
    stop_daemon(bus)
    write_conf(config, 1, 1)
    kept_reports = listed(bus, 'ListReports')
    kept_tasks = listed(bus, 'ListTasks')
    ok(len(kept_reports) == 1 and kept_reports[0] in reports, 'MaxReports=1: ListReports has one of them')
    ok(len(kept_tasks) == 1 and kept_tasks[0] in tasks, 'MaxFinishedTasks=1: ListTasks has one of them')
    on_disk = sorted(f for f in os.listdir(reports_dir) if f.endswith('.json'))
    ok(on_disk == [kept_reports[0].rsplit('/', 1)[1] + '.json'], 'one report file is left: %s' % on_disk)
    on_disk = sorted(f for f in os.listdir(done_dir) if f.endswith('.json'))
    ok(on_disk == [kept_tasks[0].rsplit('/', 1)[1] + '.json'], 'one task record is left: %s' % on_disk)

    # What the load pruned must not be served: the tree and the objects agree
    # with the lists.
    ok(children(bus, 'reports') == [p.rsplit('/', 1)[1] for p in kept_reports],
       'the tree under reports/ holds only the kept report: %s' % children(bus, 'reports'))
    ok(children(bus, 'tasks') == [p.rsplit('/', 1)[1] for p in kept_tasks],
       'the tree under tasks/ holds only the kept task: %s' % children(bus, 'tasks'))
    for path in reports:
        if path in kept_reports:
            continue
        err, msg = call(bus, path, 'org.freedesktop.DBus.Properties', 'GetAll',
                        GLib.Variant('(s)', (IFACE + 'Report',)))
        ok(err == ERR + 'NotFound', 'the pruned report %s is NotFound, not served stale (%s)' % (path, err or msg))
    for path in tasks:
        if path in kept_tasks:
            continue
        err, msg = call(bus, path, 'org.freedesktop.DBus.Properties', 'GetAll',
                        GLib.Variant('(s)', (IFACE + 'Task',)))
        ok(err == ERR + 'NotFound', 'the forgotten task %s is NotFound (%s)' % (path, err or msg))
    err, r = call(bus, kept_reports[0], IFACE + 'Report', 'GetJson')
    ok(err is None and '"outcome"' in r[0], 'the kept report still reads (GetJson)')

    # --- bounds that are no bounds: the defaults (200, 50) apply ---------------
    stop_daemon(bus)
    write_conf(config, 0, 'many')
    plant(state, MORE_IDS, 10)
    reports3 = listed(bus, 'ListReports')
    tasks3 = listed(bus, 'ListTasks')
    ok(len(reports3) == 3 and kept_reports[0] in reports3,
       'MaxReports=0 is out of range (1-2000): the default keeps all 3 reports, not 1 (%d)' % len(reports3))
    ok(len(tasks3) == 3 and kept_tasks[0] in tasks3,
       'MaxFinishedTasks=many is no number: the default keeps all 3 tasks (%d)' % len(tasks3))

    return finish()


sys.exit(main())
