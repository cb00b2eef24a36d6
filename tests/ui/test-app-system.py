#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The app against the real daemon (inside the systemd test host, as root, so
# polkit allows every action): a session started by `vivariumctl session
# start tiny` appears in the Sessions page and vanishes after `vivariumctl
# session stop`. TAP on stdout; every wait is a bounded poll.
import os
import subprocess
import sys
import time

from dogtail.config import config
config.checkForA11y = False
config.searchShowingOnly = False
config.logDebugToStdOut = False
from dogtail import tree  # noqa: E402
from dogtail.predicate import GenericPredicate  # noqa: E402

LOGDIR = os.environ['VIVARIUM_UI_LOGDIR']
POLLS = 300
results = []


def tap(ok, name):
    results.append(ok)
    print('%s %d - %s' % ('ok' if ok else 'not ok', len(results), name), flush=True)


def poll(condition):
    for _ in range(POLLS):
        try:
            if condition():
                return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def find_app():
    for _ in range(POLLS):
        for app in tree.root.applications():
            if app.name in ('vivarium', 'Vivarium'):
                return app
        time.sleep(0.2)
    return None


def has_label(app, text):
    return len(app.findChildren(GenericPredicate(name=text, roleName='label'))) > 0


def screenshot(name):
    time.sleep(1.5)
    subprocess.run(['import', '-window', 'root', os.path.join(LOGDIR, name)], check=False)


def switch_to(app, page):
    for b in app.findChildren(GenericPredicate(name=page, roleName='page tab')):
        b.doActionNamed('click')


def ctl(*args):
    return subprocess.run(['vivariumctl', '--no-interaction'] + list(args), capture_output=True, text=True)


def main():
    appproc = subprocess.Popen([os.environ['VIVARIUM_UI_APP']])
    try:
        app = find_app()
        tap(app is not None, 'the app is on the accessibility bus')
        if app is None:
            return
        tap(poll(lambda: has_label(app, 'No Sessions')), 'connected to the real daemon: no sessions yet')
        out = ctl('session', 'start', 'tiny')
        sid = out.stdout.strip().split()[-1] if out.returncode == 0 and out.stdout.strip() else ''
        sid = sid.rsplit('/', 1)[-1]
        tap(sid != '', 'vivariumctl session start tiny: %r' % (out.stdout.strip() or out.stderr.strip()))
        tap(poll(lambda: has_label(app, sid)), 'the session appears in the Sessions page')
        screenshot('10-real-sessions.png')
        for lst in app.findChildren(GenericPredicate(name='Sessions', roleName='list')):
            lst.querySelection().selectChild(0)
        tap(poll(lambda: has_label(app, 'vivarium-session-%s.service' % sid)), 'the detail shows the session\'s unit')
        tap(poll(lambda: has_label(app, 'Refreshed every few seconds while shown.')),
            'the detail shows the guest\'s screen (Session.Screenshot)')
        screenshot('10-real-session-detail.png')
        switch_to(app, 'Images')
        tap(poll(lambda: has_label(app, 'tiny') and has_label(app, 'Frozen')), 'the Images page shows tiny, frozen')
        screenshot('11-real-images.png')
        switch_to(app, 'Self-Test')
        screenshot('12-real-selftest.png')
        switch_to(app, 'Sessions')
        out = ctl('session', 'stop', sid)
        tap(out.returncode == 0, 'vivariumctl session stop %s' % sid)
        tap(poll(lambda: not has_label(app, sid)), 'the session vanishes from the Sessions page')
        screenshot('13-real-stopped.png')
    finally:
        appproc.terminate()
        appproc.wait()
    print('1..%d' % len(results))


if __name__ == '__main__':
    main()
    sys.exit(0 if results and all(results) else 1)
