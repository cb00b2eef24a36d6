#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The app where vivariumd is not installed (run by run-ui-test.sh, which
# provides Xvfb, a session bus and a private system bus: a real dbus-daemon
# with no Vivarium service on it). Nothing stands in for the daemon: the app
# against the real one, its recovery included, is test-app-system.py. TAP on
# stdout; every wait is a bounded poll.
#   1. the status page says Vivarium is not installed, offers Try Again, and
#      no page switcher (there is nothing to switch to);
#   2. Try Again asks the bus again and says the same, without a crash;
#   3. at 360 px wide the status page still fits.
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uitest import (tap, poll, find_app, has_label, buttons, click,  # noqa: E402
                    screenshot, finish, app_window, resize)


def main():
    appproc = subprocess.Popen([os.environ['VIVARIUM_UI_APP']])
    try:
        app = find_app()
        if not tap(app is not None, 'the app is on the accessibility bus'):
            return
        tap(poll(lambda: has_label(app, 'Vivarium Is Not Installed')),
            'daemon absent: the status page says Vivarium is not installed')
        tap(poll(lambda: has_label(app, 'The system bus knows no Vivarium service. '
                                        'Install vivariumd (see the README), then try again.')),
            'it says what to do')
        tap(poll(lambda: len(buttons(app, 'Try Again')) > 0), 'the status page offers Try Again')
        screenshot('status-not-installed.png')
        tap(click(app, 'Try Again'), 'Try Again')
        tap(poll(lambda: has_label(app, 'Vivarium Is Not Installed')), 'asked again: still not installed, still said')
        window = app_window(appproc.pid)
        tap(window is not None, 'found the app\'s X window')
        tap(resize(window, 360, 600), 'the window is 360 px wide')
        tap(has_label(app, 'Vivarium Is Not Installed') and len(buttons(app, 'Try Again')) > 0,
            'at 360 px the status page still shows its title and Try Again')
        screenshot('status-narrow.png')
    finally:
        appproc.terminate()
        appproc.wait()


if __name__ == '__main__':
    main()
    sys.exit(finish())
