#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Secrets stay on the host (docs/secrets.md), from inside real guests on a
# real systemd host, against the pretend internet (lib.sh) whose HTTPS and
# HTTP servers write down the Authorization header each request arrived
# with ($PI_DIR/auth.log). An administrator stores TOKEN (for allowed.test)
# and OTHER (for other.test) with vivariumctl; a session and a task's guest
# hold only placeholders; a request to allowed.test over TLS with the
# placeholder reaches the server with the real value in its place; the
# placeholder anywhere else (another host, over HTTP and HTTPS, the URL, a
# body, a DNS name) is refused and logged; the real value is found nowhere
# but in the store: not in the guest, the worker's output, the command
# logs, the report, the decision logs, the daemon's state, any process's
# argv or environment, the journal. A secret whose host is not allowed, or
# allowed only with no-intercept, refuses the start; a removed one is gone.
#   VIVARIUM_TEST_BTRFS=512M tests/system/vivarium-test-host run --build BUILDDIR -- tests/system/test-secrets.sh

# shellcheck disable=SC2317
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/lib.sh"
# shellcheck source=SCRIPTDIR/task-lib.sh
source "$(dirname -- "$(readlink -f -- "$0")")/task-lib.sh"

readonly CONF=/etc/vivarium/conf.d/50-test-secrets.conf
# The proxy runs as its own uid: the CA it checks upstream certificates
# against must be readable by it, so not in the root-only scratch directory.
readonly UPSTREAM_CA=/etc/vivarium/test-secrets-upstream-ca.pem
readonly SECRETS_DIR=$STATE/secrets
readonly PLACEHOLDER_RE='^vivarium-secret-[0-9a-f]{32}$'

require_systemd_host vivariumctl gdbus busctl jq systemctl journalctl base64 "$PY"
others=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -v -e '^lo$' -e '^vv-')
[ -z "$others" ] || bail_out "this host has network links ($others); run me through tests/system/vivarium-test-host"
[ "$(stat -f -c %T "$STATE/projects" 2>/dev/null)" = btrfs ] ||
  bail_out "$STATE/projects is not btrfs: run with VIVARIUM_TEST_BTRFS=SIZE"

tmpd=$(mktemp -d /var/tmp/test-secrets.XXXXXX) || bail_out "cannot create a scratch directory"
at_exit rm -rf "$tmpd"
journal_at_exit vivariumd.service 'vivarium-egress-*' 'vivarium-worker-*'

pretend_internet_up "$tmpd"

# The real values, each in a file the test alone reads: they never go into
# an argv (grep -f reads them), so any copy found later is the product's.
VALUE=vt-real-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
OTHER_VALUE=vt-other-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077
 printf '%s\n' "$VALUE" > "$tmpd/value"            # a trailing newline, which the daemon drops
 printf '%s' "$OTHER_VALUE" > "$tmpd/other-value"
 # Each value as it is and base64-encoded at each of the three alignments
 # (the middle of the encoding, which does not depend on what surrounds it):
 # a copy kept encoded (the store keeps one so) is found too.
 "$PY" - "$VALUE" "$OTHER_VALUE" > "$tmpd/values" <<'PYEOF'
import base64, sys
for v in sys.argv[1:]:
    print(v)
    for k in range(3):
        enc = base64.b64encode(b'\0' * k + v.encode()).decode()
        print(enc[(4 * k + 2) // 3 + 1:-4])
PYEOF
)
# found FILE...: which of them hold either real value (grep -a: binary too).
found () { grep -a -l -F -f "$tmpd/values" "$@" 2>/dev/null; }
# found_tree DIR...: the files under them that hold a real value.
found_tree () { grep -r -a -l -F -f "$tmpd/values" "$@" 2>/dev/null; }

session_path () { printf '%s/sessions/%s' "$OBJ" "$1"; }
sprop () { prop "$(session_path "$1")" Session "$2"; }
stop_quietly () { ctl session stop "$1" >/dev/null 2>&1 || true; }
stop_all_sessions () {
  local id
  for id in $(ctl session list --json 2>/dev/null | jq -r '.[].Id // empty' 2>/dev/null); do
    stop_quietly "$id"
  done
}
remove_all_secrets () {
  local name
  for name in $(ctl secret list --json 2>/dev/null | jq -r '.[].name // empty' 2>/dev/null); do
    ctl secret remove "$name" >/dev/null 2>&1
  done
}
restart_daemon () {
  systemctl stop "$UNIT" >/dev/null 2>&1
  retry_until 40 0.5 busctl call "$BUS" "$OBJ" "$MGR" ListSessions
}

install -D -m 0644 "$PI_CA" "$UPSTREAM_CA" || bail_out "cannot install the pretend internet's CA as $UPSTREAM_CA"
at_exit rm -f "$UPSTREAM_CA"
mkdir -p "$(dirname "$CONF")"
at_exit rm -f "$CONF"
printf '[Egress]\nUpstreamCAFile=%s\n' "$UPSTREAM_CA" > "$CONF"
at_exit systemctl stop "$UNIT"
at_exit remove_all_secrets
at_exit stop_all_sessions
restart_daemon || bail_out "vivariumd does not start"

# add_secret NAME HOSTS OPTIONS_JSON FILE: Manager.AddSecret with FILE's
# descriptor (GUnixFDList), straight on the bus; prints "ok" or the error.
add_secret () {
  "$PY" - "$@" <<'PYEOF' 2>&1
import json, os, sys
from gi.repository import Gio, GLib
name, hosts, options, path = sys.argv[1], sys.argv[2].split(','), json.loads(sys.argv[3]), sys.argv[4]
opts = {k: GLib.Variant('b' if isinstance(v, bool) else 's', v) for k, v in options.items()}
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
fds = Gio.UnixFDList.new()
fd = os.open(path, os.O_RDONLY)
fds.append(fd)
os.close(fd)
try:
    bus.call_with_unix_fd_list_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1',
                                    'org.vivarium.Vivarium1.Manager', 'AddSecret',
                                    GLib.Variant('(sasa{sv}h)', (name, hosts, opts, 0)), None, 0, 30000, fds, None)
    print('ok')
except GLib.Error as e:
    print(e.message)
PYEOF
}
# start_with MODE ALLOW SECRETS: StartSession with egress MODE, egress_allow
# and secrets (comma-separated, "" for none); prints the session's path or
# the error (its D-Bus name and sentence).
start_with () {
  "$PY" - "$@" <<'PYEOF' 2>&1
import sys
from gi.repository import Gio, GLib
mode, allow, secrets = sys.argv[1:4]
opts = {'egress': GLib.Variant('s', mode)}
if allow:
    opts['egress_allow'] = GLib.Variant('as', allow.split(','))
if secrets:
    opts['secrets'] = GLib.Variant('as', secrets.split(','))
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
try:
    r = bus.call_sync('org.vivarium.Vivarium1', '/org/vivarium/Vivarium1', 'org.vivarium.Vivarium1.Manager',
                      'StartSession', GLib.Variant('(ssa{sv})', ('', 'tiny', opts)), None, 0, 120000, None)
    print(r.unpack()[0])
except GLib.Error as e:
    print(e.message)
PYEOF
}
n_sessions () { ctl session list --json 2>/dev/null | jq length 2>/dev/null; }
# In the guest, with the Exec's own environment (where $TOKEN is the
# placeholder): stdout and stderr together.
guest () { ctl session exec "$1" --timeout 60 -- sh -c "$2" 2>&1; }
token_line () { tr -d '\r' <<<"$1" | grep -o "${PI_TOKEN}.*" | head -n 1; }
# auth_seen SCHEME HOST VALUE: the server got a request for HOST over SCHEME
# with "Authorization: VALUE" (an exact match of the whole header).
auth_seen () { awk -v s="$1" -v h="$2" -v v="$3" '$1 == s && $2 == h { $1 = $2 = $3 = ""; sub(/^ +/, ""); if ($0 == v) n++ } END { exit n ? 0 : 1 }' "$PI_DIR/auth.log"; }
auth_lines () { wc -l < "$PI_DIR/auth.log"; }
# egress_json ID OUT: the CLI's decision log (vivariumctl session egress-log --json).
egress_json () { ctl session egress-log "$1" --json > "$2" 2>&1; }
# refusal OUT NAME HOST:PORT WHERE: the reason of the first denied entry
# naming the placeholder of NAME sent to HOST:PORT in WHERE, or "none".
refusal () {
  jq -r --arg n "$2" --arg d "$3" --arg w "$4" '[.[] | select(.verdict == "denied" and (.reason | contains("placeholder (" + $n + ")")) and (.reason | contains($d)) and (.reason | contains($w)))][0].reason // "none"' "$1" 2>&1
}

# --- 0. a frozen tiny image ----------------------------------------------------

build_out=$(ctl image build "$IMAGE" "$IMAGE" 2>&1)
assert_eq "0" "$?" "build the tiny image" "$build_out"
assert_success "freeze it" -- ctl image freeze "$IMAGE"

# --- 1. storing secrets: the administrator's verbs ------------------------------

out=$(ctl secret add TOKEN --host allowed.test --value-file "$tmpd/value" 2>&1)
assert_eq 0 "$?" "vivariumctl secret add TOKEN --host allowed.test --value-file FILE ($out)"
out=$(ctl secret add OTHER --host other.test --header Authorization --format 'Bearer {}' < "$tmpd/other-value" 2>&1)
assert_eq 0 "$?" "vivariumctl secret add OTHER --host other.test, the value on standard input ($out)"
list=$(ctl secret list 2>&1)
diag "secret list:
$list"
assert_contains "$list" "TOKEN" "secret list names TOKEN"
assert_contains "$(grep TOKEN <<<"$list")" "allowed.test" "with its host"
assert_contains "$(grep TOKEN <<<"$list")" "Bearer {}" "and the default format"
assert_contains "$(grep OTHER <<<"$list")" "other.test" "and OTHER with other.test"
ctl secret list --json > "$tmpd/list.json" 2>&1
assert_eq "TOKEN allowed.test Authorization Bearer {} yes" \
  "$(jq -r '.[] | select(.name == "TOKEN") | "\(.name) \(.hosts | join(",")) \(.header) \(.format) \(if .added_at > 1700000000 then "yes" else "no" end)"' "$tmpd/list.json" 2>&1)" \
  "secret list --json: name, hosts, header, format and when it was added"
listed=$(call "$OBJ" Manager.ListSecrets 2>&1)
assert_contains "$listed" "'added_at'" "Manager.ListSecrets says when each was added ($listed)"
printf '%s\n' "$list" > "$tmpd/list.txt"
assert_eq "" "$(found "$tmpd/list.txt" "$tmpd/list.json"; found <(printf '%s' "$listed"))" \
  "no listing holds a value (table, --json, ListSecrets)"
assert_eq "700 0" "$(stat -c '%a %u' "$SECRETS_DIR" 2>&1)" "$SECRETS_DIR is root's alone (0700)"
assert_eq "600 0" "$(stat -c '%a %u' "$SECRETS_DIR/TOKEN.secret" 2>&1)" "TOKEN.secret is root's alone (0600)"
assert_eq "$SECRETS_DIR/OTHER.secret
$SECRETS_DIR/TOKEN.secret" "$(found_tree "$SECRETS_DIR" | sort)" \
  "(positive control of the searches below: the store holds both values)"

out=$(ctl secret add TOKEN --host allowed.test --value-file "$tmpd/value" 2>&1)
assert_contains "$out" "$ERR.Exists" "a second add of TOKEN without --replace: Exists ($out)"
out=$(ctl secret add TOKEN --host allowed.test --replace --value-file "$tmpd/value" 2>&1)
assert_eq 0 "$?" "with --replace it is stored again ($out)"

# The daemon's own refusals, straight on the bus (the CLI refuses these
# before the bus, below).
out=$(add_secret 1BAD allowed.test '{}' "$tmpd/value")
assert_contains "$out" "$ERR.InvalidArgument" "AddSecret with the name 1BAD: InvalidArgument ($out)"
assert_contains "$out" "secret's name" "saying what a name is"
out=$(add_secret BADHOST 203.0.113.10 '{}' "$tmpd/value")
assert_contains "$out" "$ERR.InvalidArgument" "an IP address as the host: InvalidArgument ($out)"
assert_contains "$out" "BADHOST" "naming the secret"
out=$(add_secret BADHOST allowed.test:443 '{}' "$tmpd/value")
assert_contains "$out" "$ERR.InvalidArgument" "a host with a port: InvalidArgument ($out)"
out=$(add_secret BADFORMAT allowed.test '{"format": "Bearer"}' "$tmpd/value")
assert_contains "$out" "$ERR.InvalidArgument" "a format without {}: InvalidArgument ($out)"
assert_contains "$out" "format" "saying it is the format"
out=$(add_secret BADHEADER allowed.test '{"header": "X Bad"}' "$tmpd/value")
assert_contains "$out" "$ERR.InvalidArgument" "a header that is no field name: InvalidArgument ($out)"
head -c $((16 * 1024 + 1)) /dev/zero | tr '\0' a > "$tmpd/big-value"
out=$(add_secret BIG allowed.test '{}' "$tmpd/big-value")
assert_contains "$out" "$ERR.TooLarge" "a value of 16 KiB + 1: TooLarge ($out)"
: > "$tmpd/empty-value"
out=$(add_secret EMPTY allowed.test '{}' "$tmpd/empty-value")
assert_contains "$out" "$ERR.InvalidArgument" "an empty value: InvalidArgument ($out)"
assert_eq "" "$(found <(printf '%s' "$out"))" "(no refusal holds a value)"
assert_eq "OTHER TOKEN" "$(ctl secret list --json 2>&1 | jq -r '[.[].name] | sort | join(" ")' 2>&1)" \
  "the refused adds stored nothing"

out=$(ctl secret add 1BAD --host allowed.test --value-file "$tmpd/value" 2>&1)
assert_eq 2 "$?" "vivariumctl secret add 1BAD: a usage error, before the bus"
assert_contains "$out" "environment variable" "with the sentence ($out)"
out=$(ctl secret add NOHOST --value-file "$tmpd/value" 2>&1)
assert_eq 2 "$?" "secret add without --host: a usage error ($out)"

create_test_user user
user_value=$(mktemp /var/tmp/test-secrets-user.XXXXXX) || bail_out "cannot create a file for the user"
at_exit rm -f "$user_value"
printf 'vt-user-value\n' > "$user_value" && chmod 0644 "$user_value"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction secret list
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction secret add MINE --host allowed.test --value-file "$user_value"
assert_dbus_error "$ERR.NotAuthorized" -- run_as_user "$user" vivariumctl --no-interaction secret remove TOKEN
assert_eq "OTHER TOKEN" "$(ctl secret list --json 2>&1 | jq -r '[.[].name] | sort | join(" ")' 2>&1)" \
  "an ordinary user neither added nor removed anything"

# --- 2. a session that holds TOKEN and OTHER --------------------------------------

sid=$(ctl session start "$IMAGE" --egress allowlist --allow allowed.test --allow other.test --allow big.test \
        --secret TOKEN --secret OTHER 2>&1)
[[ $sid =~ ^[0-9a-f]+$ ]] || bail_out "vivariumctl session start --secret TOKEN --secret OTHER: $sid"
at_exit stop_quietly "$sid"
ok "vivariumctl session start … --secret TOKEN --secret OTHER starts a session"
show=$(ctl session show "$sid" 2>&1)
assert_contains "$(grep '^Secrets:' <<<"$show")" "TOKEN" "session show prints Secrets: with TOKEN ($(grep '^Secrets:' <<<"$show"))"
assert_contains "$(grep '^Secrets:' <<<"$show")" "OTHER" "and OTHER"
assert_contains "$(busctl get-property "$BUS" "$(session_path "$sid")" "$IFACE.Session" Secrets 2>&1)" '"TOKEN"' \
  "Session.Secrets names TOKEN"

# shellcheck disable=SC2016  # expanded in the guest
ph=$(guest "$sid" 'printf "%s" "$TOKEN"')
# shellcheck disable=SC2016
other_ph=$(guest "$sid" 'printf "%s" "$OTHER"')
diag "placeholders: TOKEN=$ph OTHER=$other_ph"
assert_success "the guest's \$TOKEN is a placeholder ($ph)" -- grep -Eq "$PLACEHOLDER_RE" <<<"$ph"
assert_success "so is its \$OTHER" -- grep -Eq "$PLACEHOLDER_RE" <<<"$other_ph"
assert_ne "$ph" "$other_ph" "one placeholder per secret"
assert_eq "$ph" "$(guest "$sid" 'cat /run/vivarium-secrets/TOKEN')" "/run/vivarium-secrets/TOKEN holds the same placeholder"
ca=$(guest "$sid" 'cat /usr/local/share/ca-certificates/vivarium-session-ca.crt')
assert_contains "$ca" "BEGIN CERTIFICATE" "the session CA's certificate is in the guest"
assert_contains "$(guest "$sid" 'cat /etc/ssl/certs/ca-certificates.crt')" "$(sed -n 2p <<<"$ca")" \
  "and in its trust store (/etc/ssl/certs/ca-certificates.crt)"

# The secret's own host over TLS: the server sees the value, the guest the page.
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" https://allowed.test/token')
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(token_line "$out")" \
  "the guest gets https://allowed.test/token with Authorization: Bearer \$TOKEN" "$out"
assert_success "the server saw Authorization: Bearer <the real value>, its file's newline dropped" -- \
  auth_seen https allowed.test "Bearer $VALUE"
assert_eq "" "$(grep -F -e "$ph" "$PI_DIR/auth.log")" "and never the placeholder"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $OTHER" https://other.test/token')
assert_eq "$PI_TOKEN scheme=https host=other.test sni=other.test addr=$PI_ADDR" "$(token_line "$out")" \
  "OTHER's placeholder to other.test: the page" "$out"
assert_success "other.test saw OTHER's value (the stdin-added secret, no newline to drop)" -- \
  auth_seen https other.test "Bearer $OTHER_VALUE"

# Positive controls for the refusals below: the same requests without the
# placeholder go through, so a refusal is the placeholder's doing.
out=$(guest "$sid" 'timeout 30 wget -q -O - "https://allowed.test/token?key=nothing"')
assert_ne "" "$(token_line "$out")" "(control: a URL with a query, no placeholder, gets the page)" "$out"
out=$(guest "$sid" 'timeout 30 wget -q -O - --post-data "key=nothing" https://allowed.test/token')
assert_ne "" "$(token_line "$out")" "(control: a POST with a body, no placeholder, gets the page)" "$out"
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer nothing" http://other.test/token')
assert_ne "" "$(token_line "$out")" "(control: plain HTTP to other.test with an Authorization header gets the page)" "$out"

# The placeholder anywhere else: refused before any server sees it.
before=$(auth_lines)
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" http://allowed.test/token')
assert_eq "" "$(token_line "$out")" "TOKEN's placeholder to its own host over plain HTTP: no page (the value goes only inside TLS)" "$out"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" https://other.test/token')
assert_eq "" "$(token_line "$out")" "TOKEN's placeholder to other.test over HTTPS: no page" "$out"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" http://other.test/token')
assert_eq "" "$(token_line "$out")" "over plain HTTP: no page" "$out"
assert_contains "$out" "403" "but a 403" "$out"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - "https://allowed.test/token?key=$TOKEN"')
assert_eq "" "$(token_line "$out")" "the placeholder in the URL, to its own host: no page" "$out"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --post-data "key=$TOKEN" https://allowed.test/token')
assert_eq "" "$(token_line "$out")" "the placeholder in a body, to its own host: no page" "$out"
ph_b64=$(printf 'user:%s' "$ph" | base64 -w0)
out=$(guest "$sid" "timeout 30 wget -q -O - --post-data '{\"auth\": \"$ph_b64\"}' https://allowed.test/token")
assert_eq "" "$(token_line "$out")" "base64-encoded in a body: no page" "$out"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - "http://$TOKEN.allowed.test/token"')
assert_eq "" "$(token_line "$out")" "in a DNS name: no page" "$out"
new=$(tail -n +$((before + 1)) "$PI_DIR/auth.log")
diag "what the servers saw of those requests: $new"
assert_eq "" "$new" \
  "the servers saw none of those requests, not even the heads of the two POSTs (a body is scanned before its head goes on)"
diag "the bodies: $(cat "$PI_DIR/bodies.log")"
assert_eq "" "$(grep -F -e "$ph" -e "$ph_b64" -e "${ph_b64:8:40}" "$PI_DIR/auth.log" "$PI_DIR/requests.log" "$PI_DIR/dns.log" "$PI_DIR/bodies.log")" \
  "the placeholder (as it is or base64-encoded) reached no server, in no header, URL or body, and no resolver"
# What is not protected (docs/secrets.md): a host without a secret is
# tunnelled untouched, so the placeholder (worth nothing there) goes as it is.
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" https://big.test/token')
assert_eq "$PI_TOKEN scheme=https host=big.test sni=big.test addr=$PI_ADDR" "$(token_line "$out")" \
  "big.test (allowed, no secret: tunnelled, never decrypted) gets the request" "$out"
assert_success "with the placeholder as the guest sent it, not the value" -- auth_seen https big.test "Bearer $ph"

sleep 1  # a connection is logged when it ends
egress_json "$sid" "$tmpd/session-log.json"
diag "the decision log:
$(jq -r '.[] | "\(.host):\(.port) \(.verdict): \(.reason)"' "$tmpd/session-log.json" 2>&1 | head -n 40)"
r=$(refusal "$tmpd/session-log.json" TOKEN other.test:443 "header Authorization")
assert_ne none "$r" "egress-log --json: TOKEN's placeholder sent to other.test:443 in the header Authorization ($r)"
assert_contains "$r" "refused" "(says refused)"
r=$(refusal "$tmpd/session-log.json" TOKEN other.test:80 "Authorization")
assert_ne none "$r" "to other.test:80 ($r)"
r=$(refusal "$tmpd/session-log.json" TOKEN allowed.test:80 "Authorization")
assert_ne none "$r" "to allowed.test:80, plain HTTP ($r)"
assert_success "the value never went over plain HTTP" -- sh -c "! grep -a -F -f '$tmpd/values' '$PI_DIR/auth.log' | grep -q '^http '"
r=$(refusal "$tmpd/session-log.json" TOKEN allowed.test:443 URL)
assert_ne none "$r" "in the URL ($r)"
r=$(refusal "$tmpd/session-log.json" TOKEN allowed.test:443 body)
assert_ne none "$r" "in a body ($r)"
n_body=$(jq '[.[] | select(.verdict == "denied" and (.reason | contains("placeholder (TOKEN)")) and (.reason | contains("body")))] | length' "$tmpd/session-log.json" 2>&1)
assert_eq 2 "$n_body" "both bodies (plain and base64) are logged as refused"
r=$(refusal "$tmpd/session-log.json" TOKEN "" "DNS name")
assert_ne none "$r" "in a DNS name ($r)"
assert_eq "" "$(found "$tmpd/session-log.json")" "the decision log holds no value"

# The guest's view: placeholders only, in the environment, every process's
# environment, /etc, /run, /tmp, /root. The guest is never given the value
# to look for: it sends its files out and the search happens here.
# shellcheck disable=SC2016
guest "$sid" 'env > /tmp/vt-env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done > /tmp/vt-proc 2>/dev/null
tar cf /tmp/vt-dump.tar /etc /run /tmp/vt-env /tmp/vt-proc /root 2>/dev/null; ls -l /tmp/vt-dump.tar' >/dev/null
assert_success "copy the guest's /etc, /run, environment and processes out" -- ctl session cp "$sid:/tmp/vt-dump.tar" "$tmpd/dump.tar"
mkdir -p "$tmpd/dump" && tar xf "$tmpd/dump.tar" -C "$tmpd/dump" 2>/dev/null
assert_contains "$(cat "$tmpd/dump/tmp/vt-env" 2>&1)" "TOKEN=$ph" "the guest's environment has TOKEN=<placeholder>"
assert_contains "$(cat "$tmpd/dump/run/vivarium-secrets/TOKEN" 2>&1)" "$ph" "(its dump has /run/vivarium-secrets/TOKEN)"
assert_ne 0 "$(find "$tmpd/dump/etc" -type f | wc -l)" "(and /etc: $(find "$tmpd/dump/etc" -type f | wc -l) files)"
assert_eq "" "$(found_tree "$tmpd/dump")" "no value anywhere in the guest's environment, /proc/*/environ, cmdline, /etc, /run, /root"

"$PY" - "$(session_path "$sid")" > "$tmpd/session-commands.json" 2>&1 <<'PYEOF'
import json, sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM)
r = bus.call_sync('org.vivarium.Vivarium1', sys.argv[1], 'org.vivarium.Vivarium1.Session', 'GetCommandLog',
                  GLib.Variant('(tu)', (0, 200)), None, 0, 30000, None)
print(json.dumps(r.unpack(), default=repr))
PYEOF
assert_contains "$(cat "$tmpd/session-commands.json")" "wget" "Session.GetCommandLog has the session's commands"
ctl session log "$sid" > "$tmpd/session-log.txt" 2>&1
assert_eq "" "$(found "$tmpd/session-commands.json" "$tmpd/session-log.txt")" \
  "neither Session.GetCommandLog nor vivariumctl session log holds a value"

# Removed while the session runs: the session keeps what it was given.
out=$(ctl secret remove OTHER 2>&1)
assert_eq 0 "$?" "vivariumctl secret remove OTHER ($out)"
assert_eq "no" "$([ -e "$SECRETS_DIR/OTHER.secret" ] && echo yes || echo no)" "OTHER.secret is gone from the store"
assert_not_contains "$(ctl secret list 2>&1)" "OTHER" "secret list no longer names it"
# shellcheck disable=SC2016
out=$(guest "$sid" 'timeout 30 wget -q -O - --header "Authorization: Bearer $OTHER" https://other.test/token')
assert_ne "" "$(token_line "$out")" "a running session that holds OTHER still uses it" "$out"
out=$(ctl secret remove OTHER 2>&1)
assert_contains "$out" "$ERR.NotFound" "removing it again: NotFound ($out)"
stop_quietly "$sid"

# --- 3. starts refused: a placeholder is never let out unswapped -----------------

before=$(n_sessions)
out=$(start_with allowlist 'allowed.test:443 no-intercept' TOKEN)
assert_contains "$out" "$ERR.InvalidArgument" "TOKEN with allowed.test allowed only with no-intercept: InvalidArgument ($out)"
assert_contains "$out" "TOKEN" "naming the secret"
assert_contains "$out" "allowed.test" "and the host"
out=$(start_with allowlist other.test TOKEN)
assert_contains "$out" "$ERR.InvalidArgument" "TOKEN when allowed.test is not allowed at all: InvalidArgument ($out)"
assert_contains "$out" "TOKEN" "naming the secret"
assert_contains "$out" "allowed.test" "and the host"
out=$(start_with allowlist allowed.test:80 TOKEN)
assert_contains "$out" "$ERR.InvalidArgument" "TOKEN when allowed.test is allowed on port 80 only: InvalidArgument ($out)"
out=$(start_with open '' TOKEN)
assert_contains "$out" "$ERR.InvalidArgument" "secrets with egress open: InvalidArgument ($out)"
out=$(start_with allowlist other.test OTHER)
assert_contains "$out" "OTHER" "the removed OTHER: refused, naming it ($out)"
assert_success "(with NotFound or InvalidArgument)" -- grep -Eq "${ERR}[.](NotFound|InvalidArgument)" <<<"$out"
out=$(ctl session start "$IMAGE" --egress allowlist --allow 'allowed.test:443 no-intercept' --secret TOKEN 2>&1)
assert_contains "$out" "$ERR.InvalidArgument" "vivariumctl session start with a no-intercept rule and --secret: InvalidArgument ($out)"
assert_eq "$before" "$(n_sessions)" "no refused start left a session behind"

# --- 4. a task whose worker uses TOKEN ---------------------------------------------

assert_contains "$(call "$OBJ" Manager.CreateProject stest "uint64 $((32 * MIB))" "{}" 2>&1)" \
  "$(project_path stest)" "create the project stest"
# The task names no secret: it gets the project's default (Project.SetSecrets).
out=$(ctl project set stest secrets=NOPE 2>&1)
assert_contains "$out" "$ERR.NotFound" "a project default secret that is not stored: NotFound ($out)"
out=$(ctl project set stest secrets=TOKEN 2>&1)
assert_eq "Project “stest”: secrets TOKEN." "$out" "project set stest secrets=TOKEN"
assert_contains "$(busctl get-property "$BUS" "$(project_path stest)" "$IFACE.Project" Secrets 2>&1)" '1 "TOKEN"' \
  "Project.Secrets is [TOKEN]"
# The worker prints what it got (its output goes to the journal, searched
# below) and leaves the guest's view in /project/out for this test.
# shellcheck disable=SC2016  # expanded in the guest
pyworker secrets '
s, out, err = exec_guest("mkdir -p out && "
    "wget -q -O - --header \"Authorization: Bearer $TOKEN\" https://allowed.test/token > out/page.txt 2>&1; "
    "wget -q -O - --header \"Authorization: Bearer $TOKEN\" http://other.test/token > out/refused.txt 2>&1; "
    "env > out/env.txt; cat /run/vivarium-secrets/TOKEN > out/secret-file.txt; "
    "for f in /proc/[0-9]*/environ; do cat $f; echo; done > out/environ.txt 2>/dev/null; "
    "tar cf out/etc.tar /etc 2>/dev/null; cat out/page.txt")
print("worker: the guest said (%d): %r %r" % (s, out, err), flush=True)
finish("Fetched the token page; the request to other.test was refused.",
       "test -z \"$TOKEN\" && test ! -e /run/vivarium-secrets/TOKEN")'
task=$(submit_allowlist stest "$tmpd/secrets.py" "Fetch the token page." allowed.test other.test)
assert_contains "$task" "$OBJ/tasks/" "submit a task, no secrets named (egress allowlist allowed.test, other.test)"
before=$(auth_lines)
assert_eq DONE "$(wait_outcome "$task" 300)" "the task ends DONE"
work=$STATE/projects/stest/work
task_ph=$(cat "$work/out/secret-file.txt" 2>&1)
assert_success "the task's guest held a placeholder in /run/vivarium-secrets/TOKEN ($task_ph)" -- grep -Eq "$PLACEHOLDER_RE" <<<"$task_ph"
assert_ne "$ph" "$task_ph" "a new one, not the earlier session's"
assert_contains "$(cat "$work/out/env.txt" 2>&1)" "TOKEN=$task_ph" "and \$TOKEN in its Exec's environment"
assert_contains "$(cat "$work/out/page.txt" 2>&1)" "$PI_TOKEN scheme=https host=allowed.test" "its wget got the token page"
assert_success "the server saw the task's request with the real value" -- auth_seen https allowed.test "Bearer $VALUE"
assert_ne "$before" "$(auth_lines)" "(a new request since the task began)"
assert_eq "" "$(token_line "$(cat "$work/out/refused.txt" 2>&1)")" "its request with the placeholder to other.test got no page"
assert_eq "" "$(found_tree "$work"; tar xOf "$work/out/etc.tar" 2>/dev/null | found /dev/stdin)" \
  "no value in the task's guest: environment, /proc/*/environ, /etc, the project's files"
assert_eq "" "$(grep -F -e "$task_ph" "$PI_DIR/auth.log")" "no server saw the task's placeholder"

report=$(task_prop "$task" Report)
get_json "$report" "$tmpd/report.json"
get_text "$report" "$tmpd/report.txt"
assert_success "vivariumctl report verify accepts the task's report" -- vivariumctl report verify "$tmpd/report.json"
assert_eq "pass worker" "$(report_field "$tmpd/report.json" "r['verification']['verdict'] + ' ' + r['verification']['whose']")" \
  "the verification re-run (the worker's command) passes: it had no \$TOKEN and no /run/vivarium-secrets/TOKEN"
policy=$(report_field "$tmpd/report.json" "r['egress']['policy']")
assert_contains "$policy" "secrets TOKEN for allowed.test" "the signed report names the secret the session held and its host ($policy)"
summary=$(report_field "$tmpd/report.json" "r['egress']['summary']")
assert_contains "$summary" "placeholder" "the report's Egress summary quotes the placeholder's refusal ($summary)"
assert_contains "$summary" "other.test" "naming other.test"
assert_contains "$(grep -A3 '^Egress: ' "$tmpd/report.txt")" "placeholder" "so does the report's text"
assert_eq "" "$(found "$tmpd/report.json" "$tmpd/report.txt")" "the report holds no value"
egress_log_task=$(ctl task egress-log "${task##*/}" --json 2>&1)
assert_contains "$egress_log_task" "placeholder (TOKEN)" "task egress-log names the refusal"
printf '%s' "$egress_log_task" > "$tmpd/task-log.json"
ctl task transcript "${task##*/}" > "$tmpd/transcript.txt" 2>&1
diag "task transcript: $(head -c 300 "$tmpd/transcript.txt")"
journalctl --no-pager -u "vivarium-worker-*" -o cat > "$tmpd/worker-journal.txt" 2>&1
assert_contains "$(cat "$tmpd/worker-journal.txt")" "worker: the guest said" "(the worker's output is in the journal)"
assert_eq "" "$(found "$tmpd/task-log.json" "$tmpd/worker-journal.txt" "$tmpd/transcript.txt")" \
  "no value in the task's decision log, transcript or the worker's output"

# --- 5. nowhere on the host but the store ---------------------------------------

assert_eq "" "$(found_tree "$STATE" | grep -v "^$SECRETS_DIR/")" \
  "no file under $STATE but the store holds a value (command logs, reports, decision logs, sessions, tasks, projects)"
assert_eq "" "$(found_tree /run/vivarium /var/log /etc/vivarium)" "nor under /run/vivarium, /var/log, /etc/vivarium"
assert_eq "" "$(found_tree "$tmpd/secrets.py" "$PI_DIR/requests.log" "$PI_DIR/server.out")" "nor in the worker's script"
"$PY" - "$tmpd/values" > "$tmpd/proc.txt" 2>&1 <<'PYEOF'
import glob, sys
values = [v.encode() for v in open(sys.argv[1]).read().split()]
for path in glob.glob('/proc/[0-9]*/cmdline') + glob.glob('/proc/[0-9]*/environ'):
    try:
        data = open(path, 'rb').read()
    except OSError:
        continue
    if any(v in data for v in values):
        print(path, open(path.rsplit('/', 1)[0] + '/comm').read().strip())
PYEOF
assert_eq "" "$(cat "$tmpd/proc.txt")" "no process on the host has a value in its argv or environment"
marker=vt-journal-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
logger -t test-secrets "$marker"
retry_until 20 0.25 sh -c "journalctl --no-pager -o export | grep -q -a -F '$marker'"
assert_success "(positive control: the journal search finds a line logged just now)" -- \
  sh -c "journalctl --no-pager -o export | grep -q -a -F '$marker'"
journalctl --no-pager -o export > "$tmpd/journal.export" 2>&1
assert_eq "" "$(found "$tmpd/journal.export")" "the journal (every field of every entry) holds no value"

# --- 6. the host's own trust store (no UpstreamCAFile=) ----------------------------

# Without UpstreamCAFile= the proxy trusts what the host trusts, read inside
# its sandbox: first without the pretend internet's CA there (refused as
# untrusted: the control), then with it added to the host's store.
https_token () {  # SESSION: the token page through TOKEN's interception, or nothing
  # shellcheck disable=SC2016
  token_line "$(guest "$1" 'timeout 30 wget -q -O - --header "Authorization: Bearer $TOKEN" https://allowed.test/token')"
}
readonly HOST_CA=/usr/local/share/ca-certificates/vivarium-test-pretend-internet.crt
printf '[Egress]\n' > "$CONF"
restart_daemon || bail_out "vivariumd does not start without UpstreamCAFile="
out=$(ctl session start "$IMAGE" --egress allowlist --allow allowed.test --secret TOKEN 2>&1)
tsid=$(tail -n 1 <<<"$out")
[[ $tsid =~ ^[0-9a-f]+$ ]] || bail_out "session start without UpstreamCAFile=: $out"
assert_eq "" "$(https_token "$tsid")" "without UpstreamCAFile= and the CA not in the host's store: no page"
egress_json "$tsid" "$tmpd/trust-log.json"
assert_contains "$(jq -r '.[] | select(.verdict == "denied") | .reason' "$tmpd/trust-log.json" 2>&1)" \
  "not signed by an authority the proxy trusts" "the decision log says allowed.test's certificate is not trusted"
stop_quietly "$tsid"
at_exit update-ca-certificates --fresh
at_exit rm -f "$HOST_CA"
install -D -m 0644 "$PI_CA" "$HOST_CA" && update-ca-certificates >/dev/null 2>&1
assert_success "the pretend internet's CA is in the host's trust store" -- \
  sh -c "openssl verify -CApath /etc/ssl/certs '$PI_CA' >/dev/null"
out=$(ctl session start "$IMAGE" --egress allowlist --allow allowed.test --secret TOKEN 2>&1)
tsid=$(tail -n 1 <<<"$out")
[[ $tsid =~ ^[0-9a-f]+$ ]] || bail_out "session start with the CA in the host's store: $out"
before=$(auth_lines)
assert_eq "$PI_TOKEN scheme=https host=allowed.test sni=allowed.test addr=$PI_ADDR" "$(https_token "$tsid")" \
  "with the CA in the host's store, and still no UpstreamCAFile=: the page"
assert_success "the server saw the real value" -- auth_seen https allowed.test "Bearer $VALUE"
assert_ne "$before" "$(auth_lines)" "(a new request)"
stop_quietly "$tsid"

# --- 7. TOKEN removed: a session naming it is refused ------------------------------

out=$(ctl secret remove TOKEN 2>&1)
assert_eq 0 "$?" "vivariumctl secret remove TOKEN ($out)"
assert_eq "No secrets." "$(ctl secret list 2>&1)" "secret list: none left"
assert_eq "" "$(ls -A "$SECRETS_DIR" 2>&1)" "the store is empty"
out=$(ctl session start "$IMAGE" --egress allowlist --allow allowed.test --secret TOKEN 2>&1)
assert_success "session start --secret TOKEN after its removal: refused ($out)" -- \
  grep -Eq "${ERR}[.](NotFound|InvalidArgument)" <<<"$out"
assert_contains "$out" "TOKEN" "the sentence names the secret"

done_testing
