#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The app as an unprivileged user whose only polkit rule lets it read
# (test-app-system.sh writes it), against the real daemon after
# test-app-system.py left the project "demo": the lists load, and Publish —
# an admin action, with no rule and no polkit agent to ask — is refused:
# a toast says what was refused and why.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uitest import (tap, diag, poll, find_app, has_label, labels_containing,  # noqa: E402
                    switch_to, select_first, click_until, screenshot, finish)


def main():
    app_cmd = os.environ['VIVARIUM_UI_APP']
    import subprocess
    appproc = subprocess.Popen([app_cmd])
    try:
        app = find_app()
        if not tap(app is not None, 'the app (an ordinary user) is on the accessibility bus'):
            return
        tap(poll(lambda: switch_to(app, 'Projects') and has_label(app, 'demo')), 'reading is allowed: demo is listed')
        refused = 'Could not publish the project: You are not allowed to do this.'
        tap(select_first(app, 'Projects') and click_until(app, 'Publish', lambda: labels_containing(app, refused), 60, 5),
            'Publish is refused: the toast says what and why')
        diag(labels_containing(app, refused))
        screenshot('refused.png')
    finally:
        appproc.terminate()
        appproc.wait()


if __name__ == '__main__':
    main()
    sys.exit(finish())
