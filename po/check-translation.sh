#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# check-translation.sh SOURCE_ROOT LANG.po
#
# Fails unless LANG.po translates every string in po/POTFILES.in, with no
# fuzzy entry and valid format strings. The template is extracted afresh
# (the one in the tree may be stale), into a temporary directory that is
# removed on exit; nothing in the source tree is written.
set -eu

XGETTEXT=${XGETTEXT:-xgettext}
MSGMERGE=${MSGMERGE:-msgmerge}
MSGATTRIB=${MSGATTRIB:-msgattrib}
MSGFMT=${MSGFMT:-msgfmt}

if [ $# -ne 2 ]; then
    echo "usage: $0 SOURCE_ROOT LANG.po" >&2
    exit 2
fi
srcroot=$1
po=$2
[ -f "$po" ] || { echo "FAIL: $po does not exist" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Same keywords as meson's 'glib' gettext preset, so C sources added to
# POTFILES.in later are extracted the way vivarium-pot extracts them.
grep -v -e '^#' -e '^[[:space:]]*$' "$srcroot/po/POTFILES.in" > "$tmp/files"
"$XGETTEXT" --directory="$srcroot" --files-from="$tmp/files" \
    --from-code=UTF-8 --add-comments \
    --keyword=_ --keyword=N_ --keyword=C_:1c,2 --keyword=NC_:1c,2 \
    --keyword=g_dcgettext:2 --keyword=g_dngettext:2,3 --keyword=g_dpgettext2:2c,3 \
    --flag=N_:1:pass-c-format --flag=C_:2:pass-c-format --flag=NC_:2:pass-c-format \
    --flag=g_dngettext:2:pass-c-format --flag=g_strdup_printf:1:c-format \
    --flag=g_string_printf:2:c-format --flag=g_string_append_printf:2:c-format \
    --flag=g_error_new:3:c-format --flag=g_set_error:4:c-format \
    --package-name=vivarium --output="$tmp/template.pot"
[ -s "$tmp/template.pot" ] || { echo "FAIL: no strings extracted from POTFILES.in" >&2; exit 1; }

# Merging against the fresh template turns strings missing from $po into
# untranslated entries and changed ones into fuzzy entries.
"$MSGMERGE" --quiet --no-wrap --output-file="$tmp/merged.po" "$po" "$tmp/template.pot"
"$MSGFMT" --check --statistics --output-file=/dev/null "$tmp/merged.po"

status=0
"$MSGATTRIB" --untranslated --no-obsolete --no-wrap "$tmp/merged.po" > "$tmp/untranslated.po"
if grep -q '^msgid ' "$tmp/untranslated.po"; then
    echo "FAIL: untranslated entries in $po:" >&2
    grep -A1 '^msgid ' "$tmp/untranslated.po" >&2
    status=1
fi
"$MSGATTRIB" --only-fuzzy --no-obsolete --no-wrap "$tmp/merged.po" > "$tmp/fuzzy.po"
if grep -q '^msgid ' "$tmp/fuzzy.po"; then
    echo "FAIL: fuzzy entries in $po:" >&2
    grep -A1 '^msgid ' "$tmp/fuzzy.po" >&2
    status=1
fi
[ $status -eq 0 ] && echo "PASS: $po translates every string in POTFILES.in"
exit $status
