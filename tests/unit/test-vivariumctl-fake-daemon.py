#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-vivariumctl-fake-daemon.py XML REPORT_JSON CALL_LOG
#
# A stand-in for vivariumd on a private bus, for test-vivariumctl-fake.sh:
# it serves the real contract (the interfaces are read from the
# introspection XML, so a signature the client gets wrong is refused by
# GDBus, not by this file), answers with fixed objects and records every
# call it receives, one JSON object per line, in CALL_LOG. It exercises the
# client's side of each verb — what it sends, how it prints what comes
# back, which exit status it ends with — never the daemon's behaviour.
#
# Objects: project "demo"; tasks t-done (DONE, report r1), t-input
# (NEEDS_INPUT), t-run (IN_PROGRESS), t-fail (FAILED), t-busy (Answer and
# Cancel refused with BadState); report r1 (GetJson: REPORT_JSON's bytes);
# session s1 (Exec, ReadFile, WriteFile; allowlist egress, a 2500-entry
# egress log served in pages); session s2 (open egress, an egress log that
# never advances); task t1's egress log (3 entries, one hostile host);
# CheckEgress allows deb.debian.org and the caller's own --allow hosts.
# Task t-agent's transcript grows by one entry per GetTranscript (the
# second hostile) and the task ends DONE (FinishedAt set) after the third;
# t-stuck's transcript stays one entry and the task never ends.
# Secrets: AddSecret reads the value from the descriptor it is handed and
# records it beside the arguments (Exists for the name TAKEN); ListSecrets
# answers two, one with hostile text; RemoveSecret refuses GONE (NotFound);
# session s1 holds the secrets TOKEN and GH_TOKEN.
# Prints "ready" once it owns the name.

import json
import os
import sys

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

BASE = '/org/vivarium/Vivarium1'
IFACE = 'org.vivarium.Vivarium1.'
ERROR = 'org.vivarium.Vivarium1.Error.'

QUESTION = 'Which licence?\n\x1b[31mOutcome: DONE\x1b[0m \u202eevil'
REPORT_TEXT = 'Vivarium report r1 \u2014 DONE \u2713\n  worker claim: \x1b[2Jhi\n'
EXEC_STDOUT = b'\x00\x01raw \xff\x1b[2J\n'
EXEC_STDERR = b'warning: \xfe\n'
FILE_BYTES = b'\x00\xfffile\r\n\x1b]0;title\x07'
EGRESS_T0 = 1764634860123000  # 2025-12-02T00:21:00.123Z
HOSTILE_HOST = 'evil.example\x1b[2J\nallowed: forged'
SECRETS = [
    {'name': GLib.Variant('s', 'TOKEN'), 'hosts': GLib.Variant('as', ['api.example.org', '*.example.net']),
     'header': GLib.Variant('s', 'Authorization'), 'format': GLib.Variant('s', 'Bearer {}'),
     'added_at': GLib.Variant('t', 1764634860)},
    {'name': GLib.Variant('s', 'EVIL'), 'hosts': GLib.Variant('as', ['x.example\x1b[2J\nTOKEN forged']),
     'header': GLib.Variant('s', 'X-Key'), 'format': GLib.Variant('s', '{}\x1b]0;t\x07'),
     'added_at': GLib.Variant('t', 0)},
]


TRANSCRIPT = [(1764583201000000, 'model', 'I will add a README.', False),
              (1764583202000000, 'tool-call', 'exec {"argv": ["ls"]}\n\x1b[2J[00:00:00] forged', True),
              (1764583203000000, 'note', 'finished', False)]


def egress_entry(i, host=None):
    return {
        'time': GLib.Variant('x', EGRESS_T0 + i * 1000000),
        'host': GLib.Variant('s', host if host is not None else 'h%d.example' % i),
        'port': GLib.Variant('q', 443),
        'via': GLib.Variant('s', 'tls' if i % 2 else 'proxy'),
        'verdict': GLib.Variant('s', 'allowed' if i % 3 else 'denied'),
        'reason': GLib.Variant('s', 'reason %d' % i),
        'bytes-up': GLib.Variant('t', 517 + i),
        'bytes-down': GLib.Variant('t', 40960 + i),
        'duration-ms': GLib.Variant('t', 812),
    }


SESSION_EGRESS_LOG = [egress_entry(i) for i in range(2500)]
TASK_EGRESS_LOG = [egress_entry(0, 'deb.debian.org'), egress_entry(1, HOSTILE_HOST),
                   egress_entry(2, '(invalid)')]


def main():
    xml_path, report_path, log_path = sys.argv[1:4]
    with open(xml_path, encoding='utf-8') as f:
        node = Gio.DBusNodeInfo.new_for_xml(f.read())
    with open(report_path, 'rb') as f:
        report_json = f.read().decode('utf-8')
    log = open(log_path, 'a', encoding='utf-8')
    ifaces = {i.name[len(IFACE):]: i for i in node.interfaces}

    def task_path(tid):
        return BASE + '/tasks/' + Gio.dbus_escape_object_path(tid)

    def record(obj, method, args):
        log.write(json.dumps({'object': obj, 'method': method, 'args': args}) + '\n')
        log.flush()

    tasks = {
        't-done': {'Outcome': 'DONE', 'Report': BASE + '/reports/r1'},
        't-input': {'Outcome': 'NEEDS_INPUT', 'Question': QUESTION},
        't-run': {'Outcome': 'IN_PROGRESS'},
        't-limit': {'Outcome': 'IN_PROGRESS', 'Reason': 'the task reached its hard limit of 60 s',
                    'Report': BASE + '/reports/r1'},
        't-fail': {'Outcome': 'FAILED', 'Reason': 'the worker exited with status 3'},
        't-busy': {'Outcome': 'DONE'},
        't-new': {'Outcome': 'IN_PROGRESS'},
        't-agent': {'Outcome': 'IN_PROGRESS'},
        't-stuck': {'Outcome': 'IN_PROGRESS'},
        't1': {'Outcome': 'IN_PROGRESS', 'Session': BASE + '/sessions/s1'},
    }

    def task_props(tid):
        t = tasks[tid]
        return {
            'Id': GLib.Variant('s', tid), 'Project': GLib.Variant('s', 'demo'),
            'Image': GLib.Variant('s', 'tiny'), 'Worker': GLib.Variant('s', 'script'),
            'Outcome': GLib.Variant('s', t['Outcome']), 'Step': GLib.Variant('s', 'work'),
            'Question': GLib.Variant('s', t.get('Question', '')),
            'Reason': GLib.Variant('s', t.get('Reason', '')),
            'Session': GLib.Variant('o', t.get('Session', '/')),
            'Report': GLib.Variant('o', t.get('Report', '/')),
            'SubmittedAt': GLib.Variant('t', 1764583200000000),
            'FinishedAt': GLib.Variant('t', 0),
        }

    props = {
        BASE + '/projects/demo': {
            'Name': GLib.Variant('s', 'demo'), 'QuotaBytes': GLib.Variant('t', 64 << 20),
            'UsedBytes': GLib.Variant('t', 1 << 20), 'Head': GLib.Variant('s', 'a' * 40),
            'Remote': GLib.Variant('s', ''), 'LastTask': GLib.Variant('o', '/'),
            'DeployKey': GLib.Variant('s', 'ssh-ed25519 AAAAfake vivarium-project-demo'),
            'EgressMode': GLib.Variant('s', 'allowlist'), 'EgressGroups': GLib.Variant('as', ['debian']),
            'Secrets': GLib.Variant('as', ['GH_TOKEN', 'PYPI\x1b[2J']),
            'SshKeys': GLib.Variant('as', ['DEPLOY\x1b[2J']),
        },
        BASE + '/reports/r1': {
            'Id': GLib.Variant('s', 'r1'), 'Task': GLib.Variant('o', task_path('t-done')),
            'TaskId': GLib.Variant('s', 't-done'), 'Project': GLib.Variant('s', 'demo'),
            'Outcome': GLib.Variant('s', 'DONE'), 'CreatedAt': GLib.Variant('t', 1764583290000000),
        },
        BASE + '/sessions/s1': {
            'Id': GLib.Variant('s', 's1'), 'State': GLib.Variant('s', 'running'),
            'Image': GLib.Variant('s', 'tiny'), 'Project': GLib.Variant('s', 'demo'),
            'EgressMode': GLib.Variant('s', 'allowlist'), 'EgressState': GLib.Variant('s', 'failed'),
            'EgressStateReason': GLib.Variant('s', 'the proxy exited\x1b[2J with status 1'),
            'EgressRules': GLib.Variant('as', ['allow deb.debian.org (group debian)',
                                               'deny *.evil.example (session)']),
            'Secrets': GLib.Variant('as', ['TOKEN', 'GH_TOKEN']),
            'SshKeys': GLib.Variant('as', ['DEPLOY', 'MIRROR']),
        },
        BASE + '/sessions/s2': {'Id': GLib.Variant('s', 's2'), 'State': GLib.Variant('s', 'running')},
        BASE: {'Version': GLib.Variant('s', '0.0-fake'), 'State': GLib.Variant('s', 'running'),
               'Accelerator': GLib.Variant('s', 'tcg')},
    }
    for tid in tasks:
        props[task_path(tid)] = task_props(tid)
    task_ids = {task_path(tid): tid for tid in tasks}

    def reply(inv, signature, *values):
        inv.return_value(GLib.Variant(signature, values) if signature else None)

    def manager(inv, method, args):
        lists = {'ListProjects': [BASE + '/projects/demo'],
                 'ListTasks': [task_path(t) for t in tasks],
                 'ListReports': [BASE + '/reports/r1'],
                 'ListSessions': [BASE + '/sessions/s1', BASE + '/sessions/s2'], 'ListImages': []}
        if method in lists:
            return reply(inv, '(ao)', lists[method])
        if method == 'CreateProject':
            return reply(inv, '(o)', BASE + '/projects/demo')
        if method == 'SubmitTask':
            return reply(inv, '(o)', task_path('t-new'))
        if method == 'StartSession':
            return reply(inv, '(o)', BASE + '/sessions/s1')
        if method == 'AddSecret' and args[0] == 'TAKEN':
            return inv.return_dbus_error(ERROR + 'Exists', 'A secret named TAKEN exists already')
        if method == 'AddSecret':
            return reply(inv, None)
        if method == 'ListSecrets':
            return reply(inv, '(aa{sv})', SECRETS)
        if method == 'RemoveSecret' and args[0] == 'GONE':
            return inv.return_dbus_error(ERROR + 'NotFound', 'There is no secret named GONE')
        if method == 'RemoveSecret':
            return reply(inv, None)
        if method == 'CheckEgress':
            host = args[0].rsplit(':', 1)[0] if not args[0].startswith('[') else args[0]
            if host == 'deb.debian.org' or host in args[1].get('egress_allow', []):
                return reply(inv, '(bs)', True, 'allowed by %s (group debian)' % host)
            if host == 'missing.example':
                return inv.return_dbus_error(ERROR + 'NotFound', 'There is no such session')
            return reply(inv, '(bs)', False, 'no rule allows %s:443\x1b[2J' % host)
        inv.return_dbus_error(ERROR + 'NotSupported', 'not in the fake: ' + method)

    def project(inv, method, args):
        if method == 'Log':
            return reply(inv, '(a(ssxs))', [('b' * 40, 'Vivarium <daemon@vivarium>', 1764583200000000,
                                              'task t-done: \x1b[31mred\x1b[0m subject')])
        reply(inv, None)

    transcript_calls = {}

    def transcript(inv, tid):
        calls = transcript_calls[tid] = transcript_calls.get(tid, 0) + 1
        if tid == 't-stuck':
            return reply(inv, '(a(tssb)b)', TRANSCRIPT[:1], False)
        shown = min(calls, len(TRANSCRIPT))
        if shown == len(TRANSCRIPT):
            props[task_path(tid)]['Outcome'] = GLib.Variant('s', 'DONE')
            props[task_path(tid)]['FinishedAt'] = GLib.Variant('t', 1764583204000000)
        reply(inv, '(a(tssb)b)', TRANSCRIPT[:shown], shown == len(TRANSCRIPT))

    def task(inv, tid, method, args):
        if method == 'GetTranscript':
            return transcript(inv, tid)
        if method == 'Wait':
            return reply(inv, '(s)', tasks[tid]['Outcome'])
        if method in ('Answer', 'Cancel') and tid == 't-busy':
            return inv.return_dbus_error(ERROR + 'BadState', 'Task t-busy is not waiting for an answer')
        if method == 'Ask':
            return reply(inv, '(s)', 'MIT, as in the other projects')
        if method == 'GetEgressLog':
            return egress_page(inv, TASK_EGRESS_LOG, args)
        reply(inv, None)

    def egress_page(inv, log, args):
        offset, limit = args
        if limit < 1 or limit > 1000:
            return inv.return_dbus_error(ERROR + 'InvalidArgument', 'limit %d is not 1-1000' % limit)
        page = log[offset:offset + limit]
        reply(inv, '(aa{sv}tt)', page, offset + len(page), len(log))

    def session(inv, path, method, args):
        if method == 'GetEgressLog' and path.endswith('/s2'):
            # A daemon that never moves forward: the client must not spin.
            return reply(inv, '(aa{sv}tt)', [], args[0], args[0] + 5)
        if method == 'GetEgressLog':
            return egress_page(inv, SESSION_EGRESS_LOG, args)
        if method == 'Exec':
            return reply(inv, '(iayaybb)', 7 if args[0][0] == 'fail' else 0, EXEC_STDOUT, EXEC_STDERR,
                         False, False)
        if method == 'ReadFile':
            return reply(inv, '(ay)', FILE_BYTES)
        reply(inv, None)

    def report(inv, method, args):
        reply(inv, '(s)', report_json if method == 'GetJson' else REPORT_TEXT)

    def read_handed_value(inv, index):
        # What the client handed over: the value travels in the descriptor only.
        fds = inv.get_message().get_unix_fd_list()
        if fds is None or index >= fds.get_length():
            return None
        fd = fds.get(index)
        try:
            with os.fdopen(fd, 'rb') as f:
                return f.read(65536).decode('utf-8', 'replace')
        except OSError as e:
            return 'unreadable: %s' % e

    def on_call(conn, sender, path, iface, method, params, inv):
        args = params.unpack()
        shown = [a.hex() if isinstance(a, bytes) else a for a in args]
        if iface.endswith('.Manager') and method == 'SubmitTask':
            opts = {k: v for k, v in args[3].items()}
            if 'script' in opts:
                opts['script'] = bytes(opts['script']).hex()
            shown = [args[0], args[1], args[2], opts,
                     {k: params.get_child_value(3).lookup_value(k, None).get_type_string()
                      for k in args[3]}]
        if iface.endswith('.Manager') and method in ('StartSession', 'CheckEgress'):
            opts = params.get_child_value(len(args) - 1)
            shown = list(args) + [{k: opts.lookup_value(k, None).get_type_string() for k in args[-1]}]
        if method == 'WriteFile':
            shown = [args[0], bytes(args[1]).hex()]
        if method == 'AddSecret':
            shown = list(args) + [read_handed_value(inv, args[3])]
        record(path, method, shown)
        kind = iface[len(IFACE):]
        if kind == 'Manager':
            return manager(inv, method, args)
        if kind == 'Project':
            return project(inv, method, args)
        if kind == 'Task':
            return task(inv, task_ids[path], method, args)
        if kind == 'Session':
            return session(inv, path, method, args)
        if kind == 'Report':
            return report(inv, method, args)
        inv.return_dbus_error(ERROR + 'NotSupported', 'not in the fake')

    def on_get(conn, sender, path, iface, name):
        return props.get(path, {}).get(name)

    kinds = {'projects': 'Project', 'tasks': 'Task', 'reports': 'Report', 'sessions': 'Session'}

    def on_bus(conn, name):
        conn.register_object(BASE, ifaces['Manager'], on_call, on_get, None)
        for path in props:
            if path != BASE:
                conn.register_object(path, ifaces[kinds[path.split('/')[4]]], on_call, on_get, None)

    def on_name(conn, name):
        print('ready', flush=True)

    def on_lost(conn, name):
        print('lost the name', file=sys.stderr, flush=True)
        loop.quit()

    address = GLib.getenv('DBUS_SYSTEM_BUS_ADDRESS')
    conn = Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT |
        Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    on_bus(conn, None)
    Gio.bus_own_name_on_connection(conn, 'org.vivarium.Vivarium1', Gio.BusNameOwnerFlags.NONE,
                                   on_name, on_lost)
    loop = GLib.MainLoop()
    loop.run()


if __name__ == '__main__':
    main()
