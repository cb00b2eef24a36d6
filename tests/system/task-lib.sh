# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The bus-side helpers of the task system tests (test-tasks.sh,
# test-task-hostile.sh, test-task-isolation.sh): one definition of how a test calls the daemon,
# reads a property, fetches a signed report and waits for an outcome.
# Sourced after lib.sh, whose constants (BUS, OBJ, IFACE, STATE, PY...) it uses.

ctl () { vivariumctl --no-interaction "$@"; }
call () {  # PATH METHOD ARGS...
  local path=$1 method=$2
  shift 2
  gdbus call --system --dest "$BUS" --object-path "$path" --method "$IFACE.$method" "$@"
}
prop () {  # PATH INTERFACE PROPERTY
  busctl get-property "$BUS" "$1" "$IFACE.$2" "$3" | cut -d' ' -f2- | tr -d '"'
}
project_path () { printf '%s/projects/%s' "$OBJ" "$1"; }
task_prop () { prop "$1" Task "$2"; }
get_json () {  # REPORT_PATH OUT: the signed file exactly as GetJson returns it
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Report', 'GetJson',
                  None, None, 0, 30000, None)
open(sys.argv[2], 'w').write(r.unpack()[0])
PYEOF
}
get_text () {  # REPORT_PATH OUT: the rendered text exactly as GetText returns it
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Report', 'GetText',
                  None, None, 0, 30000, None)
open(sys.argv[2], 'w').write(r.unpack()[0])
PYEOF
}
# check_command_log REPORT_PATH JSON_FILE WHAT: the full log beside the
# report is root's own, and its bytes are what the signed digest says.
check_command_log () {
  local f="$STATE/reports/${1##*/}.commands.jsonl"
  assert_eq "600:0" "$(stat -c %a:%u "$f" 2>&1)" "$3: the command log beside the report is root's alone"
  assert_eq "$(report_field "$2" "r['command-log']['digest']")" "sha256:$(sha256sum < "$f" | cut -d' ' -f1)" \
    "$3: its sha256 is the digest the report's signature covers"
  assert_eq "$(report_field "$2" "r['command-log']['entries']")" "$(wc -l < "$f" | tr -d ' ')" \
    "$3: it holds as many commands as the report says"
}
report_field () {  # FILE PYEXPR over r (the report)
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1]))['report']; print($2)" "$1" 2>&1
}
wait_outcome () {  # TASK SECONDS: gdbus's own timeout (25 s by default) must outlast the Wait
  gdbus call --system --dest "$BUS" --object-path "$1" --method "$IFACE.Task.Wait" --timeout $(($2 + 30)) \
    "uint32 $2" 2>&1 | grep -o "'[A-Z_]*'" | tr -d "'"
}

# Needs $tmpd (the sourcing test's scratch directory) for the workers' scripts.
submit () {  # PROJECT SCRIPT [VERIFY]: prints the task's path, or the error
  "$PY" - "$@" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'script': GLib.Variant('ay', open(sys.argv[2], 'rb').read())}
if len(sys.argv) > 3 and sys.argv[3]:
    opts['verify'] = GLib.Variant('s', sys.argv[3])
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'SubmitTask', GLib.Variant('(sssa{sv})', (sys.argv[1], 'tiny', 'Be hostile.', opts)),
                      None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
PYEOF
}
no_worker_unit () { [ -z "$(systemctl list-units --all --plain --no-legend 'vivarium-worker-*' | head -1)" ]; }

# Python workers: the guest commands below need no shell quoting on the
# host. exec_guest(script) runs `sh -c script` in /project and returns
# (exit status, stdout, stderr); finish(summary, verify).
_worker_lib () {
  cat <<'PYEOF'
import os
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
def _call(path, iface, method, args, sig):
    return bus.call_sync('org.vivarium.Vivarium1', path, 'org.vivarium.Vivarium1.' + iface, method,
                         GLib.Variant(sig, args) if sig else None, None, 0, 300000, None)
def exec_guest(script):
    r = _call(os.environ['VIVARIUM_SESSION'], 'Session', 'Exec',
              (['sh', '-c', 'cd /project && ' + script], [], '', 240), '(asassu)')
    status, out, err = r.unpack()[:3]
    return status, bytes(out), bytes(err)
def finish(summary, verify=''):
    _call(os.environ['VIVARIUM_TASK'], 'Task', 'Finish', (summary, verify), '(ss)')
def finish_error(summary, verify=''):
    try:
        finish(summary, verify)
        return 'accepted'
    except GLib.Error as e:
        return Gio.DBusError.get_remote_error(e) or e.message
PYEOF
}
pyworker () {  # NAME BODY: a Python worker script, its helpers inline (its /var/tmp is private)
  { printf '#!/usr/bin/python3\n'; _worker_lib; printf '%s\n' "$2"; } > "$tmpd/$1.py"
}


# submit_allowlist PROJECT SCRIPT INSTRUCTIONS HOST...: a script task whose
# sessions reach only HOST... (egress allowlist); prints the task's path, or
# the error and fails.
submit_allowlist () {
  "$PY" - "$@" <<'PYEOF' 2>&1
import sys
from gi.repository import Gio, GLib
project, script, instructions, hosts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'script': GLib.Variant('ay', open(script, 'rb').read()),
        'egress': GLib.Variant('s', 'allowlist'), 'egress_allow': GLib.Variant('as', hosts)}
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'SubmitTask', GLib.Variant('(sssa{sv})', (project, 'tiny', instructions, opts)),
                      None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
PYEOF
}

# The agent tests' helpers (test-gateway.sh; test-agent.sh still has its own).
submit_agent () {  # CONVERSATION [VERIFY]: prints the task's path, or the error
  "$PY" - "$@" <<'PYEOF'
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
opts = {'worker': GLib.Variant('s', 'agent'), 'timeout': GLib.Variant('u', 900)}
if len(sys.argv) > 2 and sys.argv[2]:
    opts['verify'] = GLib.Variant('s', sys.argv[2])
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'SubmitTask', GLib.Variant('(sssa{sv})', ('demo', 'tiny',
                      'Do the task. [conversation: %s]' % sys.argv[1], opts)), None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
    sys.exit(1)
PYEOF
}
# gw_request UID SOCKET METHOD PATH [BODY]: one HTTP request on a task's model
# socket as UID; prints the status, then (GW_BODY=1) a space and the body.
gw_request () {
  GW_BODY=${GW_BODY:-0} setpriv --reuid="$1" --regid="$1" --clear-groups "$PY" - "$2" "$3" "$4" "${5:-}" <<'PYEOF' 2>&1
import os, socket, sys
sock, method, path, body = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
except OSError as e:
    print('connect: %s' % e.strerror); sys.exit(0)
b = body.encode()
s.sendall(('%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n' % (method, path, len(b))).encode() + b)
reply = b''
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    reply += chunk
head, _, rest = reply.partition(b'\r\n\r\n')
status = head.split(b'\r\n')[0].split(b' ')[1].decode()
print(status + (' ' + rest.decode(errors='replace') if os.environ.get('GW_BODY') == '1' else ''))
PYEOF
}

# For retry_until: the task has a work session (each try reads afresh).
has_session () { [ "$(task_prop "$1" Session 2>/dev/null)" != "/" ]; }
