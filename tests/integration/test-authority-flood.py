#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Many calls at once must not turn into refusals (issue 18, "Load"): every
# call the daemon authorizes is one polkit check on the daemon's polkit
# connection, and a bus allows a connection only 128 calls awaiting a reply
# (dbus-daemon's max_replies_per_connection, also this private bus's): past
# that the bus answers LimitsExceeded, which the daemon used to take for a
# refusal — 400 calls at once from root got most of them NotAuthorized. On
# the real daemon and a real polkitd (run-in-private-bus.sh), 400 calls
# sent together on four connections (100 each: a caller's own connection
# has the same bound) and 50 on a fifth are all answered, none refused. TAP.

import sys

import gi
gi.require_version('Gio', '2.0')
from gi.repository import Gio, GLib  # noqa: E402

from vivtap import finish, ok  # noqa: E402

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
MANAGER = 'org.vivarium.Vivarium1.Manager'
FLOOD = 100   # on each of four connections, under the bus's 128 per connection
OTHERS = 50


def flood(connections_and_counts, seconds=120):
    """Sends every call at once; returns {error name or 'ok': count}."""
    loop = GLib.MainLoop()
    outcomes = {}
    pending = [sum(c for _, c in connections_and_counts)]

    def done(conn, res, _):
        try:
            conn.call_finish(res)
            key = 'ok'
        except GLib.Error as e:
            key = Gio.DBusError.get_remote_error(e) or e.message
        outcomes[key] = outcomes.get(key, 0) + 1
        pending[0] -= 1
        if pending[0] == 0:
            loop.quit()

    for conn, count in connections_and_counts:
        for _ in range(count):
            conn.call(BUS, OBJ, MANAGER, 'ListSessions', None, None, Gio.DBusCallFlags.NONE, 60000, None, done, None)
    GLib.timeout_add_seconds(seconds, loop.quit)   # a bound, not a speed check
    loop.run()
    return outcomes


def main():
    address = Gio.dbus_address_get_for_bus_sync(Gio.BusType.SYSTEM, None)
    conns = [Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None) for _ in range(5)]
    # The daemon is activated and answers one call before the flood.
    try:
        conns[0].call_sync(BUS, OBJ, MANAGER, 'ListSessions', None, None, Gio.DBusCallFlags.NONE, 60000, None)
        ok(True, 'the daemon answers ListSessions')
    except GLib.Error as e:
        ok(False, 'the daemon answers ListSessions: %s' % e.message)
        finish()
        return 1
    total = 4 * FLOOD + OTHERS
    outcomes = flood([(c, FLOOD) for c in conns[:4]] + [(conns[4], OTHERS)])
    print('# outcomes: %r' % outcomes, flush=True)
    ok(sum(outcomes.values()) == total, 'all %d calls were answered' % total)
    ok(outcomes.get('ok', 0) == total,
       'and every one allowed: none refused for the number of polkit checks under way (%r)' % outcomes)
    return finish()


if __name__ == '__main__':
    sys.exit(main())
