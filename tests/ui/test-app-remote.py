#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The app with another host (issue 21), run by test-app-remote.sh inside
# the systemd test host as root: $VIVARIUM_UI_REMOTE is reached over a real
# sshd, $VIVARIUM_UI_DOWN refuses ssh's connection; the session
# $VIVARIUM_UI_SESSION was started over SSH before the app opened.
#   1. this computer first, its pages shown;
#   2. Add Host… root@REMOTE: in the list, in hosts.ini, the window named
#      for it, its pages over ssh (a child of the app, through sshd) with
#      the session; Import… refused with the sentence; the report of the
#      task handed over by SSH, its signature verified against the key
#      fingerprint that host's daemon gives ($VIVARIUM_UI_FINGERPRINT);
#   3. Add Host… root@DOWN: its status page with ssh's reason, while this
#      computer, picked again, shows its pages;
#   4. back on REMOTE: its ssh killed (sshd stopped too, so the status page
#      stays until it is back): the status page for REMOTE, then, sshd
#      started again, the app reconnects by itself (a new ssh);
#   5. DOWN picked and removed (Main Menu, Remove This Host): off the list
#      and hosts.ini, this computer shown.
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from uitest import (tap, diag, poll, find_app, has_label, labels_containing, click, add_host,  # noqa: E402
                    open_hosts, close_hosts, host_rows, select_host, frame_names, switch_to,
                    main_menu, select_first, screenshot, finish)

REMOTE = 'root@' + os.environ['VIVARIUM_UI_REMOTE']
DOWN = 'root@' + os.environ['VIVARIUM_UI_DOWN']
SESSION = os.environ['VIVARIUM_UI_SESSION']
SSHD_LOG = os.environ['VIVARIUM_UI_SSHD_LOG']


def ssh_children(pid):
    """The app's ssh processes to HOST (pid → command line), from /proc."""
    found = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                stat = f.read()
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                argv = f.read().split(b'\0')
        except OSError:
            continue
        fields = stat[stat.rindex(')') + 2:].split()
        if int(fields[1]) == pid and b'ssh' in argv[0]:
            found[int(entry)] = b' '.join(argv).decode('utf-8', 'replace')
    return found


def ssh_to(pid, host):
    return [p for p, cmd in ssh_children(pid).items() if host in cmd.split()]


def status_shown(app, host):
    return has_label(app, 'Cannot Reach %s' % host)


def pages_shown(app):
    """The session's row, and no status page over it."""
    return (has_label(app, SESSION) and not labels_containing(app, 'Cannot Reach')
            and not has_label(app, 'Connecting to Vivarium'))


def accepted():
    with open(SSHD_LOG) as f:
        return f.read().count('Accepted publickey for root')


def local_first(app):
    tap(poll(lambda: pages_shown(app), 90), 'this computer: its pages show the session %s' % SESSION)
    tap(open_hosts(app) and host_rows(app) == ['This Computer'], 'the host list starts with This Computer only')
    close_hosts(app)
    tap('Vivarium' in frame_names(app), 'the window is called Vivarium')


def remote_added(app, pid):
    before = accepted()
    tap(add_host(app, 'root', os.environ['VIVARIUM_UI_REMOTE']), 'Add Host… root, %s' % os.environ['VIVARIUM_UI_REMOTE'])
    tap(poll(lambda: '%s — Vivarium' % REMOTE in frame_names(app), 30), 'the window is named for %s' % REMOTE)
    tap(poll(lambda: pages_shown(app) and ssh_to(pid, REMOTE), 90),
        'its pages show the session over ssh (the app\'s child %s)' % ssh_to(pid, REMOTE))
    tap(accepted() > before, 'sshd accepted root\'s key for it')
    tap(open_hosts(app) and host_rows(app) == ['This Computer', REMOTE], 'the host list: This Computer, %s' % REMOTE)
    close_hosts(app)
    saved = os.path.join(os.environ['XDG_CONFIG_HOME'], 'vivarium', 'hosts.ini')
    text = open(saved).read() if os.path.exists(saved) else ''
    tap(REMOTE in text, 'it is kept in hosts.ini: %r' % text)
    screenshot('remote-sessions.png')
    switch_to(app, 'Images')
    tap(poll(lambda: click(app, 'Import…') and labels_containing(app, 'cannot travel over SSH'), 30),
        'Import… on it says a descriptor cannot travel over SSH')
    fpr = os.environ['VIVARIUM_UI_FINGERPRINT']
    tap(switch_to(app, 'Reports') and poll(lambda: select_first(app, 'Reports') and
                                           labels_containing(app, 'Signature verified'), 60),
        'its report opens with the signature verified')
    tap(any(fpr in t for t in labels_containing(app, 'Signature verified')),
        'against that host\'s key %s: %r' % (fpr, labels_containing(app, 'Signature verified')))
    screenshot('remote-report.png')
    switch_to(app, 'Sessions')


def down_host(app):
    tap(add_host(app, 'root', os.environ['VIVARIUM_UI_DOWN']), 'Add Host… root, %s' % os.environ['VIVARIUM_UI_DOWN'])
    tap(poll(lambda: status_shown(app, DOWN), 60), 'its status page: Cannot Reach %s' % DOWN)
    tap(poll(lambda: labels_containing(app, 'Connection refused'), 30),
        'with ssh\'s reason: %r' % labels_containing(app, 'Cannot reach'))
    screenshot('remote-down.png')
    tap(select_host(app, 'This Computer'), 'This Computer picked again')
    tap(poll(lambda: pages_shown(app) and 'Vivarium' in frame_names(app), 60),
        'it shows its pages, no status page, while %s cannot be reached' % DOWN)


def reconnects(app, pid):
    tap(select_host(app, REMOTE), '%s picked again' % REMOTE)
    tap(poll(lambda: pages_shown(app) and '%s — Vivarium' % REMOTE in frame_names(app), 60),
        'its pages again, its link kept meanwhile')
    old = ssh_to(pid, REMOTE)
    if not tap(len(old) == 1, 'one ssh to it: %r' % old):
        return
    # sshd stopped first, so the status page stays until it is started again.
    os.kill(int(os.environ['VIVARIUM_UI_SSHD_PID']), signal.SIGTERM)
    time.sleep(0.5)
    os.kill(old[0], signal.SIGTERM)
    tap(poll(lambda: status_shown(app, REMOTE), 60), 'its ssh killed: the status page for %s' % REMOTE)
    diag('it says: %r' % (labels_containing(app, 'Cannot reach') + labels_containing(app, 'was lost')))
    screenshot('remote-lost.png')
    sshd = subprocess.Popen(['/usr/sbin/sshd', '-D', '-f', os.environ['VIVARIUM_UI_SSHD_CONFIG'], '-E', SSHD_LOG])
    try:
        tap(poll(lambda: pages_shown(app), 120), 'sshd back: it reconnected by itself and shows the session')
        new = ssh_to(pid, REMOTE)
        tap(len(new) == 1 and new != old, 'over a new ssh: %r' % new)
    finally:
        sshd.terminate()
        sshd.wait()


def hosts_ini():
    saved = os.path.join(os.environ['XDG_CONFIG_HOME'], 'vivarium', 'hosts.ini')
    return open(saved).read() if os.path.exists(saved) else ''


def removed(app):
    tap(select_host(app, DOWN) and poll(lambda: status_shown(app, DOWN), 60), '%s picked again' % DOWN)
    tap(main_menu(app, 'Remove This Host'), 'Main Menu, Remove This Host')
    tap(poll(lambda: 'Vivarium' in frame_names(app) and pages_shown(app), 60), 'this computer is shown')
    tap(open_hosts(app) and host_rows(app) == ['This Computer', REMOTE], 'the list: This Computer, %s' % REMOTE)
    close_hosts(app)
    text = hosts_ini()
    tap(REMOTE in text and DOWN not in text, 'hosts.ini keeps %s only: %r' % (REMOTE, text))


def main():
    appproc = subprocess.Popen([os.environ['VIVARIUM_UI_APP']])
    try:
        app = find_app()
        if not tap(app is not None, 'the app is on the accessibility bus'):
            return
        local_first(app)
        remote_added(app, appproc.pid)
        down_host(app)
        reconnects(app, appproc.pid)
        removed(app)
    finally:
        appproc.terminate()
        appproc.wait()


if __name__ == '__main__':
    main()
    sys.exit(finish())
