#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Lists shrink as well as grow (issue 19): with [Tasks] MaxFinishedTasks=2
# and MaxReports=2, a third finished task makes the daemon forget the first
# task and delete the first report, from the bus and the disk, and announce
# both: Manager.TaskRemoved and ReportRemoved with their paths. Who hears
# them is what polkit allows for the list they belong to: root (the
# positive control) hears both; a reader polkit allows read-status (ListTasks)
# but not read-reports (ListReports) hears the tasks come and go and nothing
# of the reports, not even ReportAdded; a user polkit refuses everything
# hears nothing at all. Tasks need a real systemd (the guard inspects the
# slices) and a real guest: no private-bus test can make one.
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-retention.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly CONF=/etc/vivarium/conf.d/50-test-retention.conf
readonly READ_STATUS=org.vivarium.vivarium1.read-status

require_systemd_host vivariumctl gdbus busctl setpriv "$PY"
"$PY" -c 'from gi.repository import Gio' 2>/dev/null || bail_out "python3-gi is not installed"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/vivarium-retention.XXXXXX) || bail_out "cannot create a scratch directory"
chmod 0755 "$tmpd"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service

install -d -m 0755 /etc/vivarium/conf.d
printf '[Tasks]\nMaxFinishedTasks=2\nMaxReports=2\n' > "$CONF"
at_exit rm -f "$CONF"
systemctl stop vivariumd.service 2>/dev/null   # the next call starts it with the bounds

# --- an image, a project, the users -------------------------------------------

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1) || bail_out "cannot build $IMAGE: $build_out"
out=$(ctl image freeze "$IMAGE" 2>&1) || bail_out "cannot freeze $IMAGE: $out"
out=$(call "$OBJ" Manager.CreateProject demo "uint64 $((64 * MIB))" "{}" 2>&1)
assert_contains "$out" "$(project_path demo)" "create a project"

reader='' stranger=''
create_test_user reader || bail_out "cannot create a test user"
create_test_user stranger || bail_out "cannot create a second test user"
write_polkit_rule "50-vivarium-retention-$reader" "polkit.addRule(function(action, subject) {
  if (action.id == \"$READ_STATUS\" && subject.user == \"$reader\")
    return polkit.Result.YES;
});" || bail_out "cannot write the polkit rule"
as_user () {  # USER CMD...
  local u=$1
  shift
  setpriv --reuid "$u" --regid "$u" --init-groups env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$@"
}
retry_until 40 0.5 as_user "$reader" gdbus call --system --dest "$BUS" --object-path "$OBJ" \
  --method "$IFACE.Manager.ListTasks" || bail_out "polkit did not load the reader's rule"

# --- listeners ------------------------------------------------------------------

# Subscribes to the manager's signals, then makes the calls a client makes
# (ListTasks, ListReports; a refused one is only printed), which is what the
# daemon sends signals after; prints "Signal path" per signal.
cat > "$tmpd/listener.py" <<'EOF'
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
def on_signal(conn, sender, obj, iface, name, params):
    print(name, params.unpack()[0] if params.n_children() else '', flush=True)
bus.signal_subscribe('org.vivarium.Vivarium1', 'org.vivarium.Vivarium1.Manager', None, None, None,
                     Gio.DBusSignalFlags.NONE, on_signal)
for method in ('ListTasks', 'ListReports'):
    try:
        bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      method, None, None, Gio.DBusCallFlags.NONE, 30000, None)
        print('LISTED', method, flush=True)
    except GLib.Error as e:
        print('REFUSED', method, Gio.DBusError.get_remote_error(e), flush=True)
print('READY', flush=True)
GLib.MainLoop().run()
EOF
chmod 0644 "$tmpd/listener.py"

listeners=()
stop_listeners () {
  local pid
  for pid in "${listeners[@]}"; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  listeners=()
}
at_exit stop_listeners   # after the users: cleanups run last registered first
"$PY" "$tmpd/listener.py" > "$tmpd/root.txt" 2>&1 &
listeners+=($!)
setpriv --reuid "$reader" --regid "$reader" --init-groups \
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$PY" "$tmpd/listener.py" > "$tmpd/reader.txt" 2>&1 &
listeners+=($!)
setpriv --reuid "$stranger" --regid "$stranger" --init-groups \
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ LANG=C.UTF-8 "$PY" "$tmpd/listener.py" > "$tmpd/stranger.txt" 2>&1 &
listeners+=($!)
for who in root reader stranger; do
  retry_until 300 0.1 grep -q READY "$tmpd/$who.txt" || bail_out "the $who listener did not start: $(cat "$tmpd/$who.txt")"
done
assert_contains "$(cat "$tmpd/root.txt")" "LISTED ListReports" "root may list the reports"
assert_contains "$(cat "$tmpd/reader.txt")" "LISTED ListTasks" "the reader may list the tasks"
assert_contains "$(cat "$tmpd/reader.txt")" "REFUSED ListReports $ERR.NotAuthorized" "the reader may not list the reports"
assert_contains "$(cat "$tmpd/stranger.txt")" "REFUSED ListTasks $ERR.NotAuthorized" "the stranger may not list the tasks"

# --- three tasks, one after the other (one task per project at a time) -------------

cat > "$tmpd/worker.sh" <<'EOF'
#!/bin/sh
vivariumctl worker finish --summary "Nothing to do." --verify "true"
EOF
chmod 0755 "$tmpd/worker.sh"
tasks=() reports=()
for n in 1 2 3; do
  tid=$(ctl task submit demo "$IMAGE" --script "$tmpd/worker.sh" 2>&1)
  tpath=$OBJ/tasks/$tid
  outcome=$(wait_outcome "$tpath" 300)
  assert_eq "DONE" "$outcome" "task $n ($tid) is DONE" "$(task_prop "$tpath" Reason 2>&1)"
  tasks+=("$tpath")
  reports+=("$(task_prop "$tpath" Report 2>&1)")
done
diag "tasks: ${tasks[*]}; reports: ${reports[*]}"
assert_contains "${reports[0]}" "$OBJ/reports/" "the first task has a report (${reports[0]})"
rid=${reports[0]##*/}
tid=${tasks[0]##*/}

# --- the first task and report are gone ---------------------------------------------

retry_until 100 0.1 grep -q "ReportRemoved ${reports[0]}\$" "$tmpd/root.txt"
retry_until 100 0.1 grep -q "TaskRemoved ${tasks[0]}\$" "$tmpd/root.txt"
retry_until 100 0.1 grep -q "TaskRemoved ${tasks[0]}\$" "$tmpd/reader.txt"
sleep 1   # whatever was sent to the others has long arrived
stop_listeners
diag "root heard: $(grep -v '^[A-Z]* List' "$tmpd/root.txt" | tr '\n' ';')"
diag "the reader heard: $(grep -v '^[A-Z]* List' "$tmpd/reader.txt" | tr '\n' ';')"

tasks_now=$(call "$OBJ" Manager.ListTasks 2>&1)
reports_now=$(call "$OBJ" Manager.ListReports 2>&1)
assert_not_contains "$tasks_now" "${tasks[0]}" "ListTasks no longer has the first task"
assert_contains "$tasks_now" "${tasks[2]}" "ListTasks has the third task"
assert_not_contains "$reports_now" "${reports[0]}" "ListReports no longer has the first report"
assert_contains "$reports_now" "${reports[2]}" "ListReports has the third report"
assert_dbus_error "$ERR.NotFound" -- call "${tasks[0]}" Task.Wait "uint32 0"
assert_dbus_error "$ERR.NotFound" -- call "${reports[0]}" Report.GetJson
assert_eq "absent absent absent" \
  "$(for f in "$STATE/tasks/done/$tid.json" "$STATE/reports/$rid.json" "$STATE/reports/$rid.commands.jsonl"; do
       [ -e "$f" ] && printf 'present ' || printf 'absent '; done | sed 's/ $//')" \
  "the first task's record, its report and its command log are deleted"
count () { printf '%s' "$#"; }   # the files a glob matched (nullglob)
shopt -s nullglob
assert_eq "2 2" "$(count "$STATE"/tasks/done/*.json) $(count "$STATE"/reports/*.json)" \
  "two task records and two reports are left"
shopt -u nullglob

root=$(cat "$tmpd/root.txt")
assert_contains "$root" "TaskRemoved ${tasks[0]}" "root hears TaskRemoved with the first task's path (positive control)"
assert_contains "$root" "ReportRemoved ${reports[0]}" "root hears ReportRemoved with the first report's path (positive control)"
assert_eq "1 1" "$(grep -c '^TaskRemoved ' <<<"$root") $(grep -c '^ReportRemoved ' <<<"$root")" \
  "root hears exactly one of each: the second and third stay"
assert_eq "3" "$(grep -c '^ReportAdded ' <<<"$root")" "root heard the three reports come"

reader_out=$(cat "$tmpd/reader.txt")
assert_eq "3" "$(grep -c '^TaskAdded ' <<<"$reader_out")" "the reader (read-status) heard the three tasks come"
assert_contains "$reader_out" "TaskRemoved ${tasks[0]}" "the reader heard the first task go"
assert_not_contains "$reader_out" "ReportRemoved" "the reader (refused read-reports, ListReports's action) hears no ReportRemoved"
assert_not_contains "$reader_out" "ReportAdded" "... nor any ReportAdded"
assert_not_contains "$reader_out" "/reports/" "... nor any report's path"

stranger_out=$(cat "$tmpd/stranger.txt")
assert_eq "" "$(grep -v '^REFUSED \|^READY$' <<<"$stranger_out")" "the stranger (refused everything) heard nothing at all"

left=$(pgrep -a -u "$reader" 2>/dev/null; pgrep -a -u "$stranger" 2>/dev/null)
assert_eq "" "$left" "no process of the test users is left"

done_testing
