# SPDX-License-Identifier: LGPL-2.1-or-later
#
# TAP for the integration tests in Python: one numbering and one count of
# failures per test process, the plan printed last (finish()).

import sys

BUS = 'org.vivarium.Vivarium1'
OBJ = '/org/vivarium/Vivarium1'
ERR = 'org.vivarium.Vivarium1.Error.'

_count = 0
_failed = 0


def ok(cond, what):
    global _count, _failed
    _count += 1
    if not cond:
        _failed += 1
    print(('ok' if cond else 'not ok') + ' %d - %s' % (_count, what), flush=True)


def bail(why):
    print('Bail out! ' + why, flush=True)
    sys.exit(1)


def finish():
    """Prints the plan; the exit status: 1 when a check failed."""
    print('1..%d' % _count, flush=True)
    return 1 if _failed else 0
