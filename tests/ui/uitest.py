# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What the UI tests share: TAP, bounded polls, finding things in the app's
# AT-SPI tree (dogtail), screenshots. No timed assertions: every wait polls
# a condition a bounded number of times.
import os
import subprocess
import time

from dogtail.config import config
config.checkForA11y = False
config.searchShowingOnly = False
config.logDebugToStdOut = False
config.logDebugToFile = False
from dogtail import tree  # noqa: E402
from dogtail.predicate import GenericPredicate  # noqa: E402

LOGDIR = os.environ['VIVARIUM_UI_LOGDIR']
POLL_INTERVAL = 0.2
results = []


START = time.monotonic()


def tap(ok, name):
    results.append(bool(ok))
    print('%s %d - %s  # at %.0f s' % ('ok' if ok else 'not ok', len(results), name, time.monotonic() - START),
          flush=True)
    return ok


def diag(text):
    for line in str(text).splitlines():
        print('# ' + line, flush=True)


def poll(condition, seconds=60):
    """Asks until the condition holds or the deadline passes: a bound on the
    wait, never an assertion about speed (a walk of the tree may itself take
    seconds on a busy machine)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return True
        except Exception:  # the tree changes under us; ask again
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL)


def find_app(seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for app in tree.root.applications():
            if app.name in ('vivarium', 'Vivarium'):
                return app
        time.sleep(POLL_INTERVAL)
    return None


def nodes(app, role, name=None):
    if name is None:
        return app.findChildren(GenericPredicate(roleName=role))
    return app.findChildren(GenericPredicate(name=name, roleName=role))


def has_label(app, text):
    return len(nodes(app, 'label', text)) > 0


def label_starting(app, prefix):
    for n in nodes(app, 'label'):
        if n.name.startswith(prefix):
            return n.name
    return None


def labels_containing(app, text):
    return [n.name for n in nodes(app, 'label') if text in n.name]


def plain(name):
    return name.replace('_', '')


def buttons(app, text):
    """Push buttons named text (GTK 4.8 may name a mnemonic one '_Text Text')."""
    return [b for b in nodes(app, 'push button') if plain(b.name) in (text, text + ' ' + text)]


def click(app, text):
    """Clicks the last button so named (a dialog's is the newest); False if none."""
    found = buttons(app, text)
    if not found:
        return False
    return found[-1].doActionNamed('click')


def click_until(app, text, effect, seconds=30, settle=3):
    """Clicks the button so named until the effect shows. A click on a
    button whose window or page is not mapped yet returns True and does
    nothing (FIELD-NOTES), so a click alone proves nothing: wait up to
    settle seconds for its effect before clicking again."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if click(app, text) and poll(effect, settle):
                return True
        except Exception:
            pass
        time.sleep(POLL_INTERVAL)
    return False


def respond(app, text, seconds=30):
    """Clicks a dialog's response button until the dialog is gone.
    libadwaita 1.2's message dialog holds each response twice (a wide and
    a narrow layout, one of them unmapped): each is tried in turn."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for b in buttons(app, text):
            try:
                b.doActionNamed('click')
            except Exception:
                pass
            if poll(lambda: not buttons(app, text), 2):
                return True
        time.sleep(POLL_INTERVAL)
    return False


def poll_click(app, text, seconds=30):
    return poll(lambda: click(app, text), seconds)


def set_text(app, accessible_name, text):
    """Types into the entry so named, through AT-SPI EditableText."""
    for role in ('text', 'entry', 'password text'):
        for n in nodes(app, role, accessible_name):
            n.queryEditableText().setTextContents(text)
            return True
    return False


def switch_to(app, page):
    tabs = nodes(app, 'page tab', page)
    for t in tabs:
        t.doActionNamed('click')
    return len(tabs) > 0


def select_first(app, list_name):
    lists = nodes(app, 'list', list_name)
    for lst in lists:
        lst.querySelection().selectChild(0)
    return len(lists) > 0


def screenshot(name):
    time.sleep(1.5)  # let the last frame reach the X server (FIELD-NOTES)
    path = os.path.join(LOGDIR, name)
    subprocess.run(['import', '-window', 'root', path], check=False)
    diag('screenshot %s' % path)
    # Inside the test host the files vanish with it, even when it times
    # out: the picture leaves at once, on the TAP stream as a comment.
    if os.environ.get('VIVARIUM_UI_EMIT_PNG') and os.path.exists(path):
        import base64
        with open(path, 'rb') as f:
            print('# png %s %s' % (name, base64.b64encode(f.read()).decode('ascii')), flush=True)


def app_window(pid):
    """The app's X window (xdotool waits for it, at most 30 s)."""
    out = subprocess.run(['timeout', '30', 'xdotool', 'search', '--sync', '--onlyvisible', '--pid', str(pid)],
                         capture_output=True, text=True)
    ids = out.stdout.split()
    return ids[0] if ids else None


def window_size(window):
    out = subprocess.run(['xwininfo', '-id', window], capture_output=True, text=True)
    size = {}
    for line in out.stdout.splitlines():
        key, _, value = line.strip().partition(':')
        if key in ('Width', 'Height'):
            size[key] = int(value)
    return size.get('Width'), size.get('Height')


def window_width(window):
    return window_size(window)[0]


def resize(window, width, height, seconds=50):
    """Asked again on every poll: a resize that lands while the window is
    still settling (the polkit banner arriving, say) is undone by GTK's own
    allocation; a window whose minimum is larger never gets there."""
    def sized():
        subprocess.run(['xdotool', 'windowmove', window, '0', '0'], check=False)
        subprocess.run(['xdotool', 'windowsize', window, str(width), str(height)], check=False)
        return window_size(window) == (width, height)
    return window is not None and poll(sized, seconds)


def host_rows(app):
    """The rows of the header bar's host list (in the tree once its popover opened)."""
    lists = nodes(app, 'list', 'Hosts')
    return [c.name for c in lists[0].children] if lists else []


def open_hosts(app):
    return click_until(app, 'Hosts', lambda: len(nodes(app, 'list', 'Hosts')) > 0)


def close_popover(app, text):
    """Closes the popover of the menu button so named (its toggle, pressed, is the open one)."""
    import pyatspi
    for b in buttons(app, text):
        try:
            state = b.getState()
            if state.contains(pyatspi.STATE_CHECKED) or state.contains(pyatspi.STATE_PRESSED):
                b.doActionNamed('click')
        except Exception:
            pass
    return True


def close_hosts(app):
    return close_popover(app, 'Hosts')


def add_host(app, user, host):
    """Add Host… from the host list's popover, its fields filled, Add clicked."""
    if not open_hosts(app) or not click_until(app, 'Add Host…', lambda: len(nodes(app, 'text', 'Host name')) > 0):
        return False
    return set_text(app, 'User name', user) and set_text(app, 'Host name', host) and click(app, 'Add')


def select_host(app, name):
    """Picks the host so named in the host list (its Selection interface)."""
    if not open_hosts(app):
        return False
    rows = host_rows(app)
    if name not in rows:
        return False
    nodes(app, 'list', 'Hosts')[0].querySelection().selectChild(rows.index(name))
    return True


def menu_items(app, text):
    return nodes(app, 'menu item', text)


def main_menu(app, item):
    """Main Menu opened, then its ITEM clicked (False if it is not there or insensitive)."""
    if not click_until(app, 'Main Menu', lambda: len(menu_items(app, item)) > 0):
        return False
    found = menu_items(app, item)
    return bool(found) and found[-1].sensitive and found[-1].doActionNamed('click')


def frame_names(app):
    return [f.name for f in app.children]


def ctl(*args):
    return subprocess.run(['vivariumctl', '--no-interaction'] + list(args), capture_output=True, text=True)


def finish():
    print('1..%d' % len(results), flush=True)
    return 0 if results and all(results) else 1
