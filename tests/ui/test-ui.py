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
#   3. at 360 px wide the status page still fits;
#   4. Ctrl+? opens the shortcuts window, which shows the accelerators the
#      app really bound (Ctrl+1 Sessions, Ctrl+N New Task…), and Escape
#      closes it;
#   5. Ctrl+Q quits, and the next start opens at the size the window had.
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uitest import (tap, poll, find_app, has_label, buttons, click,  # noqa: E402
                    screenshot, finish, app_window, resize, window_size, diag,
                    add_host, open_hosts, close_hosts, close_popover, host_rows, main_menu, menu_items,
                    labels_containing, respond, nodes)
from dogtail.predicate import GenericPredicate  # noqa: E402


def key(window, keys):
    """Keys typed into the app's window (XTEST: GTK ignores sent events)."""
    subprocess.run(['xdotool', 'windowfocus', '--sync', window], check=False)
    subprocess.run(['xdotool', 'key', '--clearmodifiers', keys], check=False)


def shortcuts_window(app):
    found = [f for f in app.children if f.name == 'Keyboard Shortcuts']
    return found[0] if found else None


def shown_shortcuts(window):
    """The shortcuts window's labels in order: keys, then what they do."""
    return [n.name for n in window.findChildren(GenericPredicate(roleName='label'))]


def has_run(names, run):
    return any(names[i:i + len(run)] == run for i in range(len(names)))


def shortcuts(app, window):
    key(window, 'ctrl+question')
    if not tap(poll(lambda: shortcuts_window(app) is not None, 20), 'Ctrl+? opens the Keyboard Shortcuts window'):
        diag('the app\'s windows: %r' % [f.name for f in app.children])
        return
    names = shown_shortcuts(shortcuts_window(app))
    for run in (['Ctrl', '+', '?', 'Show Shortcuts'], ['Ctrl', '+', '1', 'Sessions'],
                ['Ctrl', '+', '6', 'Self-Test'], ['Ctrl', '+', 'N', 'New Task…'], ['Ctrl', '+', 'Q', 'Quit']):
        if not tap(has_run(names, run), 'the shortcuts window shows %s' % ' '.join(run)):
            diag('its labels: %r' % names)
    screenshot('shortcuts.png')
    key(window, 'Escape')
    tap(poll(lambda: shortcuts_window(app) is None, 20), 'Escape closes it')


def add_host_refused(app):
    """Add Host… with what ssh would take as an option: refused in the
    dialog with the reason, the list unchanged. (Reaching a real host is
    tests/ui/test-app-remote.sh's, through a real sshd.)"""
    if not tap(add_host(app, '', '-oProxyCommand=sh'), 'Add Host… with "-oProxyCommand=sh"'):
        return
    tap(poll(lambda: labels_containing(app, 'is not a host to reach over SSH'), 20),
        'the dialog says it is not a host to reach over SSH')
    respond(app, 'Cancel')
    tap(poll(lambda: len(nodes(app, 'text', 'Host name')) == 0, 20), 'Cancel closes the dialog')
    tap(open_hosts(app) and host_rows(app) == ['This Computer'], 'the host list holds this computer only')
    close_hosts(app)
    tap(not os.path.exists(os.path.join(os.environ['XDG_CONFIG_HOME'], 'vivarium', 'hosts.ini')),
        'and nothing was written')
    tap(has_label(app, 'Vivarium Is Not Installed'), 'this computer\'s status page is still shown')
    tap(not main_menu(app, 'Remove This Host') and menu_items(app, 'Remove This Host'),
        'Remove This Host is in the main menu, not offered for this computer')
    close_popover(app, 'Main Menu')


def remembered_size(appproc, window):
    """Resized to 500x400 (not the size it opens at the first time), Ctrl+Q,
    then a new start: the window opens as it was left."""
    tap(resize(window, 500, 400), 'the window is 500x400')
    key(window, 'ctrl+q')
    if not tap(poll(lambda: appproc.poll() is not None, 30), 'Ctrl+Q quits the app'):
        return None
    path = os.path.join(os.environ['XDG_STATE_HOME'], 'vivarium', 'window.ini')
    saved = open(path).read() if os.path.exists(path) else ''
    tap('width=500\n' in saved and 'height=400\n' in saved,
        'it remembered its size in $XDG_STATE_HOME/vivarium/window.ini: %r' % saved)
    again = subprocess.Popen([os.environ['VIVARIUM_UI_APP']])
    window = app_window(again.pid)
    tap(window is not None and poll(lambda: window_size(window) == (500, 400), 30),
        'started again, the window opens at 500x400')
    return again


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
        add_host_refused(app)
        if window is not None:
            shortcuts(app, window)
            appproc = remembered_size(appproc, window) or appproc
    finally:
        appproc.terminate()
        appproc.wait()


if __name__ == '__main__':
    main()
    sys.exit(finish())
