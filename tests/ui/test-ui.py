#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Drives the app through AT-SPI (run by run-ui-test.sh, which provides Xvfb
# and the buses). TAP on stdout. Cases, in order:
#   1. vivariumd absent from the system bus: the status page says so;
#   2. the service appears (a stand-in owning the name): the app recovers
#      by itself and lists the session and the image;
#   3. SessionAdded / SessionRemoved: a row appears, then vanishes;
#   4. the Images and Self-test pages show their data;
#   5. the service goes away: the status page is back.
# Every wait polls a condition a bounded number of times.
import os
import subprocess
import sys
import time

from dogtail.config import config
config.checkForA11y = False
config.searchShowingOnly = False
config.logDebugToStdOut = False
config.logDebugToFile = False
from dogtail import tree  # noqa: E402
from dogtail.predicate import GenericPredicate  # noqa: E402

LOGDIR = os.environ['VIVARIUM_UI_LOGDIR']
POLLS = 150          # × 0.2 s between polls
results = []


def tap(ok, name):
    results.append(ok)
    print('%s %d - %s' % ('ok' if ok else 'not ok', len(results), name), flush=True)


def poll(condition):
    for _ in range(POLLS):
        try:
            if condition():
                return True
        except Exception:  # the tree changes under us; ask again
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


def labels(app, text):
    return app.findChildren(GenericPredicate(name=text, roleName='label'))


def has_label(app, text):
    return len(labels(app, text)) > 0


def screenshot(name):
    time.sleep(1.5)  # let the last frame reach the X server (FIELD-NOTES)
    path = os.path.join(LOGDIR, name)
    subprocess.run(['import', '-window', 'root', path], check=False)
    print('# screenshot %s' % path, flush=True)


def switch_to(app, page):
    buttons = app.findChildren(GenericPredicate(name=page, roleName='page tab'))
    for b in buttons:
        b.doActionNamed('click')
    return len(buttons) > 0


def select_first(app, list_name):
    lists = app.findChildren(GenericPredicate(name=list_name, roleName='list'))
    for lst in lists:
        lst.querySelection().selectChild(0)
    return len(lists) > 0


def main():
    appproc = subprocess.Popen([os.environ['VIVARIUM_UI_APP']])
    fake = None
    try:
        app = find_app()
        tap(app is not None, 'the app is on the accessibility bus')
        if app is None:
            return
        tap(poll(lambda: has_label(app, 'Vivarium Is Not Installed')),
            'daemon absent: the status page says Vivarium is not installed')
        tap(poll(lambda: len(app.findChildren(GenericPredicate(name='Try Again', roleName='push button'))) > 0),
            'the status page offers Try Again')
        screenshot('01-daemon-absent.png')

        fake = subprocess.Popen(['/usr/bin/python3', os.environ['VIVARIUM_UI_FAKE'], os.environ['VIVARIUM_UI_XML']],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        tap(fake.stdout.readline().strip() == 'ready', 'the stand-in service owns the name')
        tap(poll(lambda: has_label(app, 's1')), 'the service appeared: the app recovered and lists session s1')
        tap(poll(lambda: not has_label(app, 'Vivarium Is Not Installed')), 'the status page is gone')
        screenshot('02-sessions.png')
        tap(select_first(app, 'Sessions'), 'selected s1 through the list\'s Selection interface')
        tap(poll(lambda: has_label(app, 'vivarium-session-s1.service')), 'the detail shows the unit of s1')
        tap(poll(lambda: has_label(app, 'No commands yet.')), 'the detail read the (empty) command log')
        screenshot('02-session-detail.png')

        fake.stdin.write('add s2\n')
        fake.stdin.flush()
        tap(fake.stdout.readline().startswith('done'), 'the service announced s2')
        tap(poll(lambda: has_label(app, 's2')), 'SessionAdded: s2 appears in the Sessions page')
        fake.stdin.write('remove s2\n')
        fake.stdin.flush()
        tap(fake.stdout.readline().startswith('done'), 'the service removed s2')
        tap(poll(lambda: not has_label(app, 's2')), 'SessionRemoved: s2 vanishes from the Sessions page')

        tap(switch_to(app, 'Images'), 'switched to the Images page')
        tap(poll(lambda: has_label(app, 'tiny') and has_label(app, 'Frozen')), 'the Images page shows tiny, frozen')
        screenshot('03-images.png')
        tap(switch_to(app, 'Self-Test'), 'switched to the Self-test page')
        tap(poll(lambda: has_label(app, 'Verdict: Pass')), 'the Self-test page shows the last verdict')
        screenshot('04-selftest.png')
        switch_to(app, 'Sessions')

        fake.stdin.write('quit\n')
        fake.stdin.flush()
        fake.wait()
        fake = None
        tap(poll(lambda: has_label(app, 'Vivarium Is Not Installed') or has_label(app, 'Reconnecting')),
            'the service went away: the status page is back')
        screenshot('05-daemon-gone.png')
    finally:
        if fake is not None:
            fake.kill()
        appproc.terminate()
        appproc.wait()
    print('1..%d' % len(results))


if __name__ == '__main__':
    main()
    sys.exit(0 if results and all(results) else 1)
