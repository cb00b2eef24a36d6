#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-completion.sh VIVARIUMCTL COMPLETION FAKE_DAEMON XML BUILDDIR DATADIR
#
# The bash completion of vivariumctl, driven as bash drives it (COMP_WORDS,
# COMP_CWORD, the function `complete -p` names): every group, verb and
# option it offers is checked against vivariumctl's own --help (read here
# with awk, apart from the completion's own reading); names and IDs against
# the stand-in daemon of the unit tests (tests/unit/test-vivariumctl-fake-
# daemon.py) on a private bus; with no daemon it offers nothing, at once.
# bash-completion's own loader must find the file under the name it is
# installed with, in the directory meson installs it to.
# Needs bash-completion, dbus-daemon and /usr/bin/python3 with GObject
# introspection; without them it fails, it does not skip.
set -u

ctl=${1:-} completion=${2:-} fake=${3:-} xml=${4:-} builddir=${5:-} datadir=${6:-}
[ -x "$ctl" ] && [ -f "$completion" ] && [ -f "$fake" ] && [ -f "$xml" ] && [ -d "$builddir" ] && [ -n "$datadir" ] ||
  { echo "FAIL: usage: $0 VIVARIUMCTL COMPLETION FAKE_DAEMON XML BUILDDIR DATADIR" >&2; exit 1; }
loader=/usr/share/bash-completion/bash_completion
for need in "$loader" dbus-daemon /usr/bin/python3 pkg-config; do
  [ -e "$need" ] || command -v "$need" >/dev/null ||
    { echo "FAIL: $need is needed and missing (tools/install-deps.sh)" >&2; exit 1; }
done

export LC_ALL=C.UTF-8
unset DBUS_SYSTEM_BUS_ADDRESS
tmp=$(mktemp -d)
bus_pid= fake_pid=
cleanup() {
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null
  [ -n "$bus_pid" ] && kill "$bus_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

failures=0 checks=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# same WHAT EXPECTED GOT: both as sorted sets of words.
same() {
  checks=$((checks + 1))
  local want got
  want=$(tr ' ' '\n' <<<"$2" | sed '/^$/d' | sort -u | tr '\n' ' ')
  got=$(tr ' ' '\n' <<<"$3" | sed '/^$/d' | sort -u | tr '\n' ' ')
  [ "$want" = "$got" ] || fail "$1: expected [$want], completion offered [$got]"
}

# complete WORD… : what TAB offers after the words (the last one is being
# typed), in a fresh bash that sourced the file as bash-completion would.
complete_words() {
  bash -c '
    source "$1"; shift
    spec=$(complete -p vivariumctl) || exit 3
    func=$(sed -n "s/.*-F \([^ ]*\) .*/\1/p" <<<"$spec")
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    "$func" vivariumctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$ctl" "$@" | tr '\n' ' '
}

# --- registered, and found by bash-completion's loader ---
checks=$((checks + 1))
spec=$(bash -c 'source "$1" && complete -p vivariumctl' _ "$completion")
[[ $spec == "complete -F _vivariumctl vivariumctl" ]] || fail "complete -p vivariumctl: '$spec'"
checks=$((checks + 1))
mkdir -p "$tmp/data/bash-completion/completions"
ln -s "$(realpath "$completion")" "$tmp/data/bash-completion/completions/vivariumctl"
spec=$(XDG_DATA_DIRS=$tmp/data BASH_COMPLETION_USER_DIR=$tmp/none bash -c \
  'source "$1"; _completion_loader vivariumctl; complete -p vivariumctl' _ "$loader" 2>&1)
[[ $spec == *"-F _vivariumctl vivariumctl" ]] || fail "bash-completion's loader did not load it: '$spec'"
checks=$((checks + 1))
installed=$(meson introspect "$builddir" --installed | /usr/bin/python3 -c '
import json, sys
print("\n".join(d for s, d in json.load(sys.stdin).items() if s.endswith("shell-completion/bash/vivariumctl")))')
want="$(pkg-config --define-variable=datadir="$datadir" --variable=completionsdir bash-completion)/vivariumctl"
[ "$installed" = "$want" ] || fail "installed as '$installed', bash-completion looks in '$want'"

# --- verbs and options, against --help ---
help=$("$ctl" --help)
commands=$(awk '/^Commands:$/ { on = 1; next }
  on && /^  [a-z]/ { sub(/^  /, ""); split($0, part, "  "); n = split(part[1], w, " ");
                     if (n > 1 && w[2] ~ /^[a-z][a-z-]*$/) print w[1] " " w[2]; else print w[1] }' <<<"$help")
[ "$(wc -l <<<"$commands")" -ge 10 ] || { echo "FAIL: read only: $commands" >&2; exit 1; }
options_of() { awk '/^  (-[a-zA-Z], )?--[a-z]/ { for (i = 1; i <= 2; i++) { o = $i; sub(/[,=].*/, "", o);
                 if (o ~ /^-/ && o != "--help" && o != "-h") print o } }'; }

same "vivariumctl TAB" "$(cut -d' ' -f1 <<<"$commands")" "$(complete_words "")"
same "vivariumctl -TAB" "$(options_of <<<"$help") --help" "$(complete_words -)"
for group in $(awk 'NF == 2 { print $1 }' <<<"$commands" | sort -u); do
  same "vivariumctl $group TAB" "$(awk -v g="$group" '$1 == g { print $2 }' <<<"$commands")" \
    "$(complete_words "$group" "")"
done
while read -r command; do
  # shellcheck disable=SC2086
  same "vivariumctl $command -TAB" "$("$ctl" $command --help | options_of)" "$(complete_words $command -)"
done <<<"$commands"
same "after --no-interaction" "$(awk -v g=task '$1 == g { print $2 }' <<<"$commands")" \
  "$(complete_words --no-interaction task "")"
same "an option's value" "none allowlist open" "$(complete_words session start tiny --egress "")"
same "--tool's verbs" "exec read-file write-file screenshot ask" "$(complete_words task submit demo tiny --tool "")"
same "the guest's words after --" "" "$(complete_words session exec s1 -- "")"
groups=$(VIVARIUM_DATA_DIR=$(realpath "$(dirname "$0")/../../service") VIVARIUM_CONFIG_DIR=$tmp/none \
  "$ctl" config show | sed -n 's/^\[EgressGroup \([^]]*\)\].*/\1/p' | sort -u)
[ "$(wc -w <<<"$groups")" -ge 2 ] || { echo "FAIL: config show listed no egress groups" >&2; exit 1; }
same "--group's rule groups" "$groups" "$(VIVARIUM_DATA_DIR=$(realpath "$(dirname "$0")/../../service") \
  VIVARIUM_CONFIG_DIR=$tmp/none complete_words session start tiny --group "")"

# --- names and IDs: nothing with no daemon, and at once ---
cat >"$tmp/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$tmp/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_type="method_call"/>
    <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
dbus-daemon --config-file="$tmp/bus.conf" --nofork 2>"$tmp/bus.err" &
bus_pid=$!
for _ in $(seq 50); do [ -S "$tmp/bus" ] && break; sleep 0.1; done
[ -S "$tmp/bus" ] || { echo "FAIL: the private bus did not start: $(cat "$tmp/bus.err")" >&2; exit 1; }
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$tmp/bus"

start=$(date +%s%N)
same "session IDs with no daemon" "" "$(complete_words session stop "")"
elapsed=$((($(date +%s%N) - start) / 1000000))
checks=$((checks + 1))
[ "$elapsed" -lt 2500 ] || fail "with no daemon a TAB took $elapsed ms"

echo '{}' >"$tmp/report.json"
/usr/bin/python3 "$fake" "$xml" "$tmp/report.json" "$tmp/calls" >"$tmp/fake.out" 2>"$tmp/fake.err" &
fake_pid=$!
for _ in $(seq 100); do grep -q ready "$tmp/fake.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$tmp/fake.out" || { echo "FAIL: the stand-in daemon did not start: $(cat "$tmp/fake.err")" >&2; exit 1; }

same "session IDs" "s1 s2" "$(complete_words session stop "")"
same "session IDs, a prefix" "s1" "$(complete_words session show s1)"
same "task IDs" "$("$ctl" task list | awk 'NR > 1 { print $1 }')" "$(complete_words task wait "")"
same "report IDs" "r1" "$(complete_words report show "")"
same "project names" "demo" "$(complete_words project log "")"
same "--project's value" "demo" "$(complete_words session start tiny --project "")"
same "--session's value" "s1 s2" "$(complete_words egress check --session "")"
same "secret names" "$("$ctl" secret list | awk 'NR > 1 { print $1 }')" "$(complete_words secret remove "")"
same "a new project's name" "" "$(complete_words project create "")"
same "past the last placeholder" "" "$(complete_words session stop s1 "")"
checks=$((checks + 1))
grep -q 'ListSessions' "$tmp/calls" || fail "the IDs did not come from the daemon: it saw no ListSessions"

echo "# $checks checks, $failures failed"
[ "$failures" -eq 0 ]
