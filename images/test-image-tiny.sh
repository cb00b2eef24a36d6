#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-image-tiny.sh BUILDER RECIPE_DIR BOOT_SCRIPT
#
# The image suite: builds the tiny recipe for real, checks what the daemon
# relies on (exactly four files, a qcow2 without backing file, progress lines,
# nothing left behind on failure), refuses the recipes this machine cannot
# build, then boots the image with boot-tiny-by-hand.sh --checks.
# Needs root (the builder does) and QEMU; fails loudly without them.

set -euo pipefail

builder=${1:?usage: test-image-tiny.sh BUILDER RECIPE_DIR BOOT_SCRIPT}
recipes=${2:?usage: test-image-tiny.sh BUILDER RECIPE_DIR BOOT_SCRIPT}
boot=${3:?usage: test-image-tiny.sh BUILDER RECIPE_DIR BOOT_SCRIPT}
tmp=""

fail() {
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}

pass() {
	printf 'ok: %s\n' "$*"
}

cleanup() {
	[[ -n $tmp ]] && rm -rf --one-file-system -- "$tmp"
}

# Runs the builder with its own scratch area, so a test can see that a failed
# build left nothing there either.
run_builder() {
	TMPDIR=$tmp/scratch "$builder" "$@"
}

scratch_is_empty() {
	[[ -z $(find "$tmp/scratch" -mindepth 1 -print -quit) ]]
}

test_build() {
	local out=$tmp/tiny percent last=-1 names
	run_builder --recipe "$recipes/tiny.recipe" --output "$out" --progress-fd 3 \
		3>"$tmp/progress" >"$tmp/build.log" 2>&1 || {
		cat "$tmp/build.log" >&2
		fail "building tiny"
	}
	names=$(cd "$out" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')
	[[ $names == "cmdline disk.qcow2 initrd.img vmlinuz " ]] || fail "output holds: $names"
	pass "tiny build produced exactly cmdline disk.qcow2 initrd.img vmlinuz"

	qemu-img info --output=json "$out/disk.qcow2" >"$tmp/info.json"
	grep -q '"format": "qcow2"' "$tmp/info.json" || fail "disk.qcow2 is not qcow2"
	! grep -q '"backing-filename"' "$tmp/info.json" || fail "disk.qcow2 has a backing file"
	pass "disk.qcow2 is qcow2 without backing file"

	[[ $(wc -l <"$out/cmdline") -eq 1 ]] || fail "cmdline is not one line"
	grep -q 'root=/dev/vda' "$out/cmdline" || fail "cmdline has no root=/dev/vda"
	gzip -t "$out/initrd.img" || fail "initrd.img is not gzip"
	pass "cmdline and initrd.img look right"

	while read -r percent _; do
		if ! [[ $percent =~ ^[0-9]+$ ]] || ((percent < last || percent > 100)); then
			fail "bad progress line: $percent"
		fi
		last=$percent
	done <"$tmp/progress"
	((last == 100)) || fail "progress did not reach 100"
	grep -q '^[0-9]\+ Copying guest agent libraries$' "$tmp/progress" || fail "no agent step in progress"
	scratch_is_empty || fail "scratch left behind after a good build"
	pass "progress lines rise to 100; scratch removed"
}

test_refuses_existing_output() {
	mkdir "$tmp/exists"
	touch "$tmp/exists/keep"
	if run_builder --recipe "$recipes/tiny.recipe" --output "$tmp/exists" >/dev/null 2>&1; then
		fail "builder accepted an existing output directory"
	fi
	[[ -e $tmp/exists/keep ]] || fail "builder touched an existing output directory"
	pass "existing output directory refused and left alone"
}

test_failure_removes_output() {
	sed 's/^Modules=/Modules=no_such_module_vivarium;/' "$recipes/tiny.recipe" >"$tmp/broken.recipe"
	if run_builder --recipe "$tmp/broken.recipe" --output "$tmp/broken" >"$tmp/broken.log" 2>&1; then
		fail "builder succeeded with a module that does not exist"
	fi
	grep -q 'no_such_module_vivarium' "$tmp/broken.log" || fail "failure does not name the module"
	[[ ! -e $tmp/broken ]] || fail "failed build left its output directory"
	scratch_is_empty || fail "failed build left its scratch directory"
	pass "a failure after the output was created removes it and the scratch"
}

test_unbuildable_recipes() {
	local name msg
	for name in ubuntu windows; do
		if run_builder --recipe "$recipes/$name.recipe" --output "$tmp/$name" >/dev/null 2>"$tmp/$name.err"; then
			fail "$name recipe did not fail"
		fi
		[[ ! -e $tmp/$name ]] || fail "$name recipe left an output directory"
		msg=$(cat "$tmp/$name.err")
		[[ $(wc -l <"$tmp/$name.err") -eq 1 && $msg == *"$name:"* ]] || fail "$name reason is not one line: $msg"
		pass "$name refused: $msg"
	done
	grep -q 'archive.ubuntu.com' "$tmp/ubuntu.err" || fail "ubuntu reason does not name the archive"
	grep -q -- '--iso' "$tmp/windows.err" || fail "windows reason does not name --iso"
}

test_boot() {
	"$boot" --checks "$tmp/tiny" || fail "booting tiny"
	pass "tiny boots and its guest agent answers"
}

main() {
	[[ $EUID -eq 0 ]] || fail "the image suite must run as root (the builder makes root-owned filesystems)"
	[[ -x $builder && -x $boot ]] || fail "builder or boot script not executable"
	trap cleanup EXIT
	tmp=$(mktemp -d /tmp/vivarium-image-test.XXXXXX)
	mkdir "$tmp/scratch"
	test_build
	test_refuses_existing_output
	test_failure_removes_output
	test_unbuildable_recipes
	test_boot
}

main "$@"
