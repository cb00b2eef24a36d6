#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivarium-image-builder: makes a base image from a recipe.
#
#   vivarium-image-builder --recipe FILE --output OUTDIR [--progress-fd N]
#                          [--iso FILE] [--drivers FILE]
#   vivarium-image-builder --recipe FILE --make-tarball DIR
#
# vivariumd runs it as root in a transient unit. OUTDIR must not exist; on
# success it holds exactly disk.qcow2 (no backing file), vmlinuz, initrd.img
# and cmdline. On any failure OUTDIR is removed, so no half-built image is
# ever mistaken for a real one. Progress lines "PERCENT STEP-TEXT" go to fd N;
# human-readable lines go to stdout (the daemon keeps them as the build log).
#
# A debootstrap recipe downloads from the Debian mirror, unless a tarball of
# exactly its packages is in $DEBOOTSTRAP_CACHE (/var/cache/vivarium/debootstrap):
# --make-tarball DIR downloads one there (on a host that reaches the mirror),
# so that a host without a network, the tests' systemd host among them, can
# build the image from it.

set -euo pipefail
shopt -s nullglob

readonly PROG=vivarium-image-builder
readonly DEBOOTSTRAP_CACHE=/var/cache/vivarium/debootstrap

RECIPE_FILE=""
OUTDIR=""
PROGRESS_FD=""
ISO_FILE=""
DRIVERS_FILE=""
TARBALL_DIR=""
OUT_CREATED=0
WORKDIR=""
declare -A RECIPE=()

log() {
	printf '[%4ds] %s\n' "$SECONDS" "$*"
}

die() {
	printf '%s: error: %s\n' "$PROG" "$*" >&2
	exit 1
}

progress() {
	local percent=$1
	shift
	log "$*"
	if [[ -n $PROGRESS_FD ]]; then
		printf '%d %s\n' "$percent" "$*" >&"$PROGRESS_FD"
	fi
}

usage() {
	cat <<EOF
Usage: $PROG --recipe FILE --output OUTDIR [--progress-fd N] [--iso FILE] [--drivers FILE]
       $PROG --recipe FILE --make-tarball DIR

Builds the base image described by the recipe FILE into OUTDIR, which must not
exist yet. OUTDIR then holds disk.qcow2, vmlinuz, initrd.img and cmdline.

--make-tarball downloads the packages of a debootstrap recipe into DIR as one
tarball (debootstrap --make-tarball) and prints its path; a build finds it in
$DEBOOTSTRAP_CACHE and needs no network.
EOF
}

# --- cleanup ---------------------------------------------------------------

# Lazily unmounts everything below $1, deepest first: a failed debootstrap can
# leave proc or sys mounted in the target, and rm must never walk into them.
unmount_below() {
	local dir=$1 mnt
	awk -v d="$dir/" '{ m = $5; gsub(/\\040/, " ", m); if (index(m, d) == 1) print m }' \
		/proc/self/mountinfo | sort -r | while IFS= read -r mnt; do
		umount -l -- "$mnt" || printf '%s: warning: could not unmount %s\n' "$PROG" "$mnt" >&2
	done
}

remove_tree() {
	local dir=$1
	[[ -n $dir && -e $dir ]] || return 0
	unmount_below "$dir"
	rm -rf --one-file-system -- "$dir"
}

on_exit() {
	local status=$?
	trap - EXIT INT TERM HUP
	set +e
	remove_tree "$WORKDIR"
	if [[ $status -ne 0 && $OUT_CREATED -eq 1 ]]; then
		remove_tree "$OUTDIR"
		log "build failed (status $status); removed $OUTDIR"
	fi
	exit "$status"
}

# --- arguments and recipe --------------------------------------------------

parse_args() {
	while [[ $# -gt 0 ]]; do
		case $1 in
		--recipe) RECIPE_FILE=${2:?--recipe needs a file}; shift 2 ;;
		--output) OUTDIR=${2:?--output needs a directory}; shift 2 ;;
		--progress-fd) PROGRESS_FD=${2:?--progress-fd needs a number}; shift 2 ;;
		--iso) ISO_FILE=${2:?--iso needs a file}; shift 2 ;;
		--drivers) DRIVERS_FILE=${2:?--drivers needs a file}; shift 2 ;;
		--make-tarball) TARBALL_DIR=${2:?--make-tarball needs a directory}; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) usage >&2; die "unknown argument: $1" ;;
		esac
	done
	[[ -n $RECIPE_FILE ]] || die "--recipe is required"
	if [[ -n $TARBALL_DIR ]]; then
		[[ -z $OUTDIR ]] || die "--make-tarball and --output exclude each other"
		[[ -d $TARBALL_DIR ]] || die "$TARBALL_DIR is not a directory"
	else
		[[ -n $OUTDIR ]] || die "--output is required"
	fi
	[[ -f $RECIPE_FILE && -r $RECIPE_FILE ]] || die "cannot read recipe $RECIPE_FILE"
	if [[ -n $PROGRESS_FD ]]; then
		[[ $PROGRESS_FD =~ ^[0-9]{1,4}$ ]] || die "--progress-fd must be a descriptor number"
		[[ -e /proc/self/fd/$PROGRESS_FD ]] || die "--progress-fd $PROGRESS_FD is not open"
	fi
}

# Reads the GKeyFile-style recipe without evaluating anything in it: every
# line is a comment, the [Recipe] group header, or a known Key=Value.
parse_recipe() {
	local file=$1 line key value group="" lineno=0
	while IFS= read -r line || [[ -n $line ]]; do
		lineno=$((lineno + 1))
		line=${line%$'\r'}
		[[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
		if [[ $line =~ ^\[([^]]+)\][[:space:]]*$ ]]; then
			group=${BASH_REMATCH[1]}
			[[ $group == Recipe ]] || die "$file:$lineno: unknown group [$group]"
			continue
		fi
		[[ $group == Recipe ]] || die "$file:$lineno: key outside the [Recipe] group"
		[[ $line =~ ^([A-Za-z][A-Za-z0-9]*)[[:space:]]*=[[:space:]]*(.*)$ ]] ||
			die "$file:$lineno: not a Key=Value line"
		key=${BASH_REMATCH[1]}
		value=${BASH_REMATCH[2]}
		case $key in
		Name | Description | Method | DiskSizeMiB | KernelCommandLine | Modules | Suite | Variant | Mirror | Include) ;;
		*) die "$file:$lineno: unknown key $key" ;;
		esac
		[[ -z ${RECIPE[$key]+set} ]] || die "$file:$lineno: $key given twice"
		RECIPE[$key]=$value
	done <"$file"
	[[ -n ${RECIPE[Name]:-} ]] || die "$file: Name= is missing"
	[[ -n ${RECIPE[Method]:-} ]] || die "$file: Method= is missing"
}

recipe_get() {
	local key=$1
	[[ -n ${RECIPE[$key]:-} ]] || die "recipe ${RECIPE[Name]}: $key= is missing"
	printf '%s' "${RECIPE[$key]}"
}

# Splits a GKeyFile list ("a;b;c;") into one item per line.
recipe_list() {
	local item raw=${RECIPE[$1]:-}
	local -a items
	[[ -n $raw ]] || die "recipe ${RECIPE[Name]}: $1= is missing"
	IFS=';' read -r -a items <<<"$raw"
	for item in "${items[@]}"; do
		item=${item//[[:space:]]/}
		[[ -n $item ]] && printf '%s\n' "$item"
	done
	return 0
}

disk_size_mib() {
	local size
	size=$(recipe_get DiskSizeMiB)
	if ! [[ $size =~ ^[0-9]+$ ]] || ((size < 64 || size > 1048576)); then
		die "DiskSizeMiB must be a number of MiB between 64 and 1048576"
	fi
	printf '%s' "$size"
}

kernel_cmdline() {
	local cmdline
	cmdline=$(recipe_get KernelCommandLine)
	[[ $cmdline != *$'\n'* ]] || die "KernelCommandLine must be one line"
	printf '%s' "$cmdline"
}

# --- helpers shared by the recipes -----------------------------------------

require_tools() {
	local spec tool pkg missing=()
	for spec in "$@"; do
		tool=${spec%%:*}
		pkg=${spec#*:}
		command -v "$tool" >/dev/null 2>&1 || missing+=("$tool (Debian package $pkg)")
	done
	((${#missing[@]} == 0)) || die "missing tools: ${missing[*]}"
}

make_outdir() {
	local parent
	parent=$(dirname -- "$OUTDIR")
	[[ -d $parent ]] || die "parent of $OUTDIR does not exist"
	[[ ! -e $OUTDIR && ! -L $OUTDIR ]] || die "$OUTDIR already exists"
	mkdir -m 0755 -- "$OUTDIR"
	OUT_CREATED=1
	OUTDIR=$(cd -- "$OUTDIR" && pwd -P)
	WORKDIR=$(mktemp -d "${TMPDIR:-/var/tmp}/vivarium-build.XXXXXX")
	log "output $OUTDIR, scratch $WORKDIR"
}

# Makes an ext4 filesystem holding the tree $1 and stores it as a qcow2 with
# no backing file: the daemon later puts a per-session overlay on top of it.
make_disk() {
	local rootdir=$1 size_mib=$2 label=$3 raw info
	raw=$(scratch disk.raw)
	progress 80 "Making a ${size_mib} MiB ext4 filesystem"
	truncate -s "${size_mib}M" "$raw"
	mkfs.ext4 -q -F -L "$label" -E root_owner=0:0 -d "$rootdir" "$raw"
	progress 90 "Converting the disk to qcow2"
	qemu-img convert -f raw -O qcow2 "$raw" "$OUTDIR/disk.qcow2"
	rm -f -- "$raw"
	qemu-img check -q "$OUTDIR/disk.qcow2"
	info=$(qemu-img info --output=json "$OUTDIR/disk.qcow2")
	[[ $info != *'"backing-filename"'* ]] || die "disk.qcow2 unexpectedly has a backing file"
}

# A path in the scratch directory; refuses to hand out a path before the
# scratch directory exists, which would otherwise land in /.
scratch() {
	[[ -n $WORKDIR && -d $WORKDIR ]] || die "internal error: no scratch directory yet"
	printf '%s/%s' "$WORKDIR" "$1"
}

write_cmdline() {
	printf '%s\n' "$1" >"$OUTDIR/cmdline"
}

# The daemon relies on OUTDIR holding these four files and nothing else.
check_outdir() {
	local f names
	for f in disk.qcow2 vmlinuz initrd.img cmdline; do
		[[ -s $OUTDIR/$f && ! -L $OUTDIR/$f ]] || die "$f was not produced"
	done
	names=$(cd -- "$OUTDIR" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | tr '\n' ' ')
	[[ $names == "cmdline disk.qcow2 initrd.img vmlinuz " ]] || die "unexpected files in $OUTDIR: $names"
	chmod 0644 -- "$OUTDIR"/*
}

report_sizes() {
	local f
	for f in disk.qcow2 vmlinuz initrd.img; do
		log "$f: $(du -k --apparent-size -- "$OUTDIR/$f" | cut -f1) KiB"
	done
	log "disk virtual size: $(qemu-img info --output=json "$OUTDIR/disk.qcow2" | awk -F'[:,]' '/"virtual-size"/ { gsub(/ /, "", $2); print $2; exit }') bytes"
}

# --- tiny ------------------------------------------------------------------

# The newest kernel in /boot that has its modules installed.
tiny_pick_kernel() {
	local img ver best=""
	for img in /boot/vmlinuz-*; do
		ver=${img#/boot/vmlinuz-}
		[[ -f /lib/modules/$ver/modules.dep ]] || continue
		best=$(printf '%s\n%s\n' "$best" "$ver" | sed '/^$/d' | sort -V | tail -n1)
	done
	[[ -n $best ]] || die "no /boot/vmlinuz-* with modules in /lib/modules (install linux-image-amd64)"
	printf '%s' "$best"
}

# One merged directory for programs and one for libraries, so that every
# program is found whatever PATH a guest-exec caller passes.
tiny_layout() {
	local root=$1 d
	for d in usr/bin usr/lib usr/lib64 etc root tmp proc sys dev run var/lib mnt project \
		usr/share/udhcpc; do
		mkdir -p -- "$root/$d"
	done
	ln -s usr/bin "$root/bin"
	ln -s usr/bin "$root/sbin"
	ln -s bin "$root/usr/sbin"
	ln -s usr/lib "$root/lib"
	ln -s usr/lib64 "$root/lib64"
	ln -s ../run "$root/var/run"
	chmod 1777 "$root/tmp"
	chmod 0700 "$root/root"
}

# Installs the static busybox and one symlink per applet; files already
# present (our own init, shutdown) win over the applets of the same name.
tiny_install_busybox() {
	local root=$1 applet name
	install -m 0755 /bin/busybox "$root/usr/bin/busybox"
	while IFS= read -r applet; do
		name=${applet##*/}
		[[ -e $root/usr/bin/$name || -L $root/usr/bin/$name ]] && continue
		ln -s busybox "$root/usr/bin/$name"
	done < <(/bin/busybox --list-full)
}

# Copies qemu-ga and every shared library ldd names for it, at the paths the
# dynamic loader will look for them.
tiny_install_agent() {
	local root=$1 lib libs
	install -m 0755 /usr/sbin/qemu-ga "$root/usr/bin/qemu-ga"
	# Collected first: a failing ldd must stop the build, which it would not
	# do inside a process substitution.
	libs=$(ldd /usr/sbin/qemu-ga | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
	[[ -n $libs ]] || die "ldd named no libraries for qemu-ga"
	for lib in $libs; do
		mkdir -p -- "$root$(dirname -- "$lib")"
		cp -L -- "$lib" "$root$lib"
		log "  library $lib"
	done
	ldconfig -r "$root"
}

# Prints the module names to load, each after its dependencies.
tiny_module_order() {
	local kver=$1 mod
	local -A seen=()
	visit() {
		local m=$1 dep deps
		[[ -z ${seen[$m]:-} ]] || return 0
		seen[$m]=1
		deps=$(modinfo -k "$kver" -F depends "$m") || die "kernel $kver has no module $m"
		for dep in ${deps//,/ }; do
			visit "$dep"
		done
		printf '%s\n' "$m"
	}
	for mod in $(recipe_list Modules); do
		visit "$mod"
	done
}

# Copies the modules (decompressed: busybox insmod takes plain .ko) into the
# initrd with a load-order file, and skips those built into this kernel.
tiny_install_modules() {
	local root=$1 kver=$2 mod path order n=0
	order=$(tiny_module_order "$kver")
	mkdir -p -- "$root/lib/modules"
	: >"$root/lib/modules/load-order"
	for mod in $order; do
		path=$(modinfo -k "$kver" -n "$mod")
		case $path in
		"(builtin)" | "") log "  module $mod is built in"; continue ;;
		*.ko) cp -- "$path" "$root/lib/modules/$mod.ko" ;;
		*.ko.xz) xz -dc -- "$path" >"$root/lib/modules/$mod.ko" ;;
		*.ko.zst) zstd -qdc -- "$path" >"$root/lib/modules/$mod.ko" ;;
		*.ko.gz) gzip -dc -- "$path" >"$root/lib/modules/$mod.ko" ;;
		*) die "unexpected module file $path" ;;
		esac
		printf '%s\n' "$mod" >>"$root/lib/modules/load-order"
		n=$((n + 1))
	done
	log "  $n modules: $(tr '\n' ' ' <"$root/lib/modules/load-order")"
}

# The initrd's /init: loads the drivers the root disk needs, mounts it and
# hands PID 1 over to the disk's own init.
tiny_write_initrd_init() {
	cat >"$1/init" <<'EOF'
#!/bin/sh
# vivarium tiny initrd
export PATH=/usr/bin

fail() {
	echo "vivarium-initrd: $*; powering off" >/dev/console
	poweroff -f
	# PID 1 must not exit (the kernel would panic and, with panic=-1, reboot
	# in a loop), so wait here if power-off did not happen.
	while :; do sleep 3600; done
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r mod; do
	insmod "/lib/modules/$mod.ko" || echo "vivarium-initrd: could not load $mod" >/dev/console
done </lib/modules/load-order

root=/dev/vda
fstype=ext4
mode=rw
init=/sbin/init
for arg in $(cat /proc/cmdline); do
	case $arg in
	root=*) root=${arg#root=} ;;
	rootfstype=*) fstype=${arg#rootfstype=} ;;
	init=*) init=${arg#init=} ;;
	ro) mode=ro ;;
	rw) mode=rw ;;
	esac
done

# The disk appears asynchronously once virtio_blk has probed; wait at most 10 s.
tries=0
while [ ! -b "$root" ]; do
	tries=$((tries + 1))
	[ "$tries" -le 100 ] || fail "no root device $root"
	sleep 0.1
done

mkdir -p /newroot
mount -t "$fstype" -o "$mode" "$root" /newroot || fail "cannot mount $root"
[ -x "/newroot$init" ] || fail "no $init on $root"

umount /proc /sys /dev
exec switch_root /newroot "$init"
EOF
	chmod 0755 "$1/init"
}

# The disk's /sbin/init (PID 1 for the guest's whole life).
tiny_write_disk_init() {
	cat >"$1/usr/bin/init" <<'EOF'
#!/bin/sh
# PID 1 of the vivarium tiny guest: set up the machine, then keep the guest
# agent running for ever. It never exits.
export PATH=/usr/bin
export HOME=/root
umask 022

log() {
	echo "vivarium-init: $*" >/dev/console
}

mount_basics() {
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mkdir -p /dev/pts /dev/shm
	mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
	mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
	mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
	mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
	ln -sf /proc/self/fd /dev/fd
}

bring_up_network() {
	hostname -F /etc/hostname
	ip link set lo up
	if [ ! -e /sys/class/net/eth0 ]; then
		log "no eth0; continuing without network"
		return 0
	fi
	ip link set eth0 up
	# Waits for the first lease (at most 10 tries), then keeps renewing in the
	# background.
	udhcpc -i eth0 -s /usr/share/udhcpc/default.script -t 10 -T 1 -A 3 -b -p /run/udhcpc.eth0.pid ||
		log "udhcpc failed on eth0"
}

mount_project() {
	local tagfile tag
	for tagfile in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
		[ -r "$tagfile" ] || continue
		tag=$(tr -d '\000\n' <"$tagfile")
		if [ "$tag" = project ]; then
			mkdir -p /project
			mount -t 9p -o trans=virtio,version=9p2000.L project /project ||
				log "cannot mount the project share"
			return 0
		fi
	done
}

# Without udev nobody names the virtio-serial ports: make the
# /dev/virtio-ports/<name> links udev would. A port's name arrives from the
# host shortly after the driver probes, so wait for the agent's (at most 10 s).
map_virtio_ports() {
	local tries=0 port name found
	mkdir -p /dev/virtio-ports
	while :; do
		found=0
		for port in /sys/class/virtio-ports/*; do
			[ -r "$port/name" ] || continue
			name=$(cat "$port/name")
			[ -n "$name" ] || continue
			ln -sfn "../${port##*/}" "/dev/virtio-ports/$name"
			[ "$name" = org.qemu.guest_agent.0 ] && found=1
		done
		[ "$found" = 1 ] && return 0
		tries=$((tries + 1))
		[ "$tries" -le 100 ] || return 1
		sleep 0.1
	done
}

run_agent_forever() {
	local status
	while :; do
		if map_virtio_ports; then
			qemu-ga -m virtio-serial -p /dev/virtio-ports/org.qemu.guest_agent.0
			status=$?
			log "qemu-ga exited with status $status; restarting it"
		else
			log "no org.qemu.guest_agent.0 port yet"
		fi
		sleep 1
	done
}

mount_basics
bring_up_network
mount_project
log "ready"
run_agent_forever
EOF
	chmod 0755 "$1/usr/bin/init"
}

# busybox udhcpc only reports the lease; this script applies it.
tiny_write_udhcpc_script() {
	cat >"$1/usr/share/udhcpc/default.script" <<'EOF'
#!/bin/sh
# udhcpc calls this with deconfig|bound|renew|leasefail|nak and the lease in
# the environment ($interface, $ip, $mask, $router, $dns, $domain).
export PATH=/usr/bin

apply_address() {
	if ! ip -4 addr show dev "$interface" | grep -q "inet $ip/${mask:-24} "; then
		ip -4 addr flush dev "$interface"
		ip -4 addr add "$ip/${mask:-24}" dev "$interface"
	fi
}

apply_route() {
	local r
	[ -n "$router" ] || return 0
	while ip -4 route del default dev "$interface" 2>/dev/null; do :; done
	for r in $router; do
		ip -4 route add default via "$r" dev "$interface" && break
	done
}

apply_dns() {
	local d tmp=/etc/resolv.conf.udhcpc
	{
		[ -n "$domain" ] && echo "search $domain"
		for d in $dns; do echo "nameserver $d"; done
	} >"$tmp"
	mv -f "$tmp" /etc/resolv.conf
}

case "$1" in
deconfig)
	ip -4 addr flush dev "$interface"
	ip link set "$interface" up
	;;
bound | renew)
	apply_address
	apply_route
	apply_dns
	echo "udhcpc: $interface is $ip/${mask:-24} via ${router:-none}, dns ${dns:-none}" >/dev/console
	;;
esac
exit 0
EOF
	chmod 0755 "$1/usr/share/udhcpc/default.script"
}

# qemu-ga's guest-shutdown runs /sbin/shutdown, which busybox lacks.
tiny_write_shutdown() {
	cat >"$1/usr/bin/shutdown" <<'EOF'
#!/bin/sh
# What qemu-ga's guest-shutdown calls: "-r" reboots, anything else powers off.
export PATH=/usr/bin
sync
for arg in "$@"; do
	[ "$arg" = -r ] && exec reboot -f
done
exec poweroff -f
EOF
	chmod 0755 "$1/usr/bin/shutdown"
}

tiny_write_etc() {
	local root=$1
	echo vivarium-tiny >"$root/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tvivarium-tiny\n::1\tlocalhost\n' >"$root/etc/hosts"
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\ntty:x:5:\n' >"$root/etc/group"
	# Locked: nobody logs in; the daemon works through the guest agent.
	printf 'root:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
	chmod 0600 "$root/etc/shadow"
	: >"$root/etc/resolv.conf"
	printf 'PRETTY_NAME="Vivarium tiny"\nID=vivarium-tiny\n' >"$root/etc/os-release"
}

tiny_make_initrd() {
	local initrd=$1
	mkdir -p -- "$initrd"/{usr/bin,usr/lib/modules,proc,sys,dev,newroot}
	ln -s usr/bin "$initrd/bin"
	ln -s usr/bin "$initrd/sbin"
	ln -s usr/lib "$initrd/lib"
	tiny_install_busybox "$initrd"
	tiny_write_initrd_init "$initrd"
}

build_tiny() {
	local kver cmdline size rootfs initrd
	progress 5 "Checking host tools"
	require_tools mkfs.ext4:e2fsprogs qemu-img:qemu-utils cpio:cpio gzip:gzip modinfo:kmod \
		ldd:libc-bin ldconfig:libc-bin xz:xz-utils zstd:zstd
	if [[ ! -x /bin/busybox ]] || ! /bin/busybox --list-full >/dev/null; then
		die "missing /bin/busybox (Debian package busybox-static)"
	fi
	[[ -x /usr/sbin/qemu-ga ]] || die "missing /usr/sbin/qemu-ga (Debian package qemu-guest-agent)"
	size=$(disk_size_mib)
	cmdline=$(kernel_cmdline)
	recipe_list Modules >/dev/null

	progress 10 "Choosing the kernel"
	kver=$(tiny_pick_kernel)
	log "kernel $kver ($(dpkg-query -S "/boot/vmlinuz-$kver" 2>/dev/null | cut -d: -f1 || echo 'no package'))"

	make_outdir
	rootfs=$(scratch rootfs)
	initrd=$(scratch initrd)

	progress 20 "Laying out the root filesystem"
	mkdir -- "$rootfs"
	tiny_layout "$rootfs"
	tiny_write_disk_init "$rootfs"
	tiny_write_shutdown "$rootfs"
	tiny_write_udhcpc_script "$rootfs"
	tiny_write_etc "$rootfs"

	progress 30 "Installing BusyBox"
	tiny_install_busybox "$rootfs"

	progress 40 "Copying guest agent libraries"
	tiny_install_agent "$rootfs"

	progress 55 "Collecting kernel modules"
	mkdir -- "$initrd"
	tiny_make_initrd "$initrd"
	tiny_install_modules "$initrd" "$kver"

	progress 65 "Writing the initrd"
	(cd -- "$initrd" && find . -mindepth 1 | LC_ALL=C sort |
		cpio --quiet --reproducible -o -H newc -R 0:0) | gzip -9n >"$OUTDIR/initrd.img"
	install -m 0644 "/boot/vmlinuz-$kver" "$OUTDIR/vmlinuz"
	write_cmdline "$cmdline"

	make_disk "$rootfs" "$size" vivarium-root
}

# --- debian ----------------------------------------------------------------

# The first URI in this machine's apt sources that serves the suite, from
# deb822 .sources files or one-line .list files.
debian_find_mirror() {
	local suite=$1 mirror=""
	local -a sources=(/etc/apt/sources.list.d/*.sources) lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
	if ((${#sources[@]} > 0)); then
		mirror=$(awk -v s="$suite" '
			BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^#/ || !match($i, /^[A-Za-z-]+:/)) continue
					key = tolower(substr($i, 1, RLENGTH - 1)); val = substr($i, RLENGTH + 1)
					gsub(/^[ \t]+|[ \t]+$/, "", val)
					if (key == "types") types = val
					else if (key == "uris") uris = val
					else if (key == "suites") suites = val
					else if (key == "enabled") enabled = tolower(val)
				}
				if (enabled == "no" || (" " types " ") !~ / deb /) next
				n = split(suites, a, /[ \t]+/)
				for (j = 1; j <= n; j++) if (a[j] == s) { split(uris, u, /[ \t]+/); print u[1]; exit }
			}' "${sources[@]}")
	fi
	if [[ -z $mirror ]]; then
		mirror=$(awk -v s="$suite" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == s) { print $i; exit }
			}' "${lists[@]}" 2>/dev/null || true)
	fi
	[[ -n $mirror ]] || die "no apt source in /etc/apt serves $suite; set Mirror= in the recipe"
	printf '%s' "$mirror"
}

debian_configure() {
	local target=$1 mirror=$2 suite=$3
	echo vivarium-debian >"$target/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tvivarium-debian\n::1\tlocalhost\n' >"$target/etc/hosts"
	cat >"$target/etc/fstab" <<'EOF'
/dev/vda / ext4 rw,errors=remount-ro 0 1
project /project 9p trans=virtio,version=9p2000.L,nofail 0 0
EOF
	mkdir -p "$target/project"
	printf '9pnet_virtio\n9p\n' >"$target/etc/modules-load.d/vivarium.conf"
	mkdir -p "$target/etc/systemd/network"
	cat >"$target/etc/systemd/network/80-vivarium.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
	# QEMU's user-mode network always answers DNS on 10.0.2.3.
	printf 'nameserver 10.0.2.3\n' >"$target/etc/resolv.conf"
	printf 'deb %s %s main\n' "$mirror" "$suite" >"$target/etc/apt/sources.list"
	systemctl --root="$target" enable systemd-networkd.service >/dev/null
	# The daemon reaches the guest only through the agent, and takes its
	# first answer to mean "ready": as in the tiny image, start it once the
	# network is configured, and bring it back if it dies.
	mkdir -p "$target/etc/systemd/system/qemu-guest-agent.service.d" \
		"$target/etc/systemd/system/systemd-networkd-wait-online.service.d"
	printf '[Unit]\nWants=network-online.target\nAfter=network-online.target\n\n[Service]\nRestart=always\nRestartSec=1\n' \
		>"$target/etc/systemd/system/qemu-guest-agent.service.d/vivarium.conf"
	# Without a network the agent must still come up, so wait briefly.
	printf '[Service]\nExecStart=\nExecStart=/lib/systemd/systemd-networkd-wait-online --any --timeout=20\n' \
		>"$target/etc/systemd/system/systemd-networkd-wait-online.service.d/vivarium.conf"
	# Every machine booted from the image makes its own machine id.
	: >"$target/etc/machine-id"
	rm -f "$target/var/lib/dbus/machine-id"
	rm -f "$target"/var/cache/apt/archives/*.deb
	rm -rf "$target"/var/lib/apt/lists/*
}

debian_extract_kernel() {
	local target=$1 img ver="" v list
	for img in "$target"/boot/vmlinuz-*; do
		v=${img##*/vmlinuz-}
		ver=$(printf '%s\n%s\n' "$ver" "$v" | sed '/^$/d' | sort -V | tail -n1)
	done
	[[ -n $ver ]] || die "debootstrap installed no kernel in /boot"
	[[ -f $target/boot/initrd.img-$ver ]] || die "no initrd.img-$ver in the target's /boot"
	if command -v lsinitramfs >/dev/null 2>&1; then
		# Listed to a file first: "lsinitramfs | grep -q" fails under
		# pipefail whenever grep stops reading early.
		list=$(scratch initrd.list)
		lsinitramfs "$target/boot/initrd.img-$ver" >"$list"
		grep -q '/virtio_blk\.ko' "$list" ||
			die "the target's initrd has no virtio_blk; it could not mount /dev/vda"
	else
		log "lsinitramfs not on the host; not checking the initrd for virtio_blk"
	fi
	install -m 0644 "$target/boot/vmlinuz-$ver" "$OUTDIR/vmlinuz"
	install -m 0644 "$target/boot/initrd.img-$ver" "$OUTDIR/initrd.img"
	log "kernel $ver"
}

# What debootstrap is asked for, from the recipe: sets DEB_SUITE, DEB_VARIANT,
# DEB_INCLUDE (comma-separated) and DEB_MIRROR.
debian_settings() {
	DEB_SUITE=$(recipe_get Suite)
	DEB_VARIANT=$(recipe_get Variant)
	DEB_INCLUDE=$(recipe_list Include | paste -sd, -)
	[[ $DEB_SUITE =~ ^[a-z]+$ ]] || die "Suite must be a codename like bookworm"
	[[ $DEB_VARIANT =~ ^[a-z]+$ ]] || die "Variant must be a debootstrap variant like minbase"
	DEB_MIRROR=$(recipe_get Mirror)
	[[ $DEB_MIRROR != auto ]] || DEB_MIRROR=$(debian_find_mirror "$DEB_SUITE")
	[[ $DEB_MIRROR =~ ^https?://[A-Za-z0-9./_~:-]+$ ]] || die "mirror $DEB_MIRROR is not an http(s) URL"
}

# The tarball's name says which packages it holds: a recipe whose suite,
# variant or package list changed never picks up a stale one.
debian_tarball_name() {
	local key
	key=$(printf '%s\n%s\n%s\n' "$DEB_SUITE" "$DEB_VARIANT" "$DEB_INCLUDE" | sha256sum | cut -c1-16)
	printf '%s-%s-%s-%s.tgz' "${RECIPE[Name]}" "$DEB_SUITE" "$DEB_VARIANT" "$key"
}

# Downloads (and checks, as debootstrap does) every package the build needs,
# into one tarball made beside its final name and renamed when complete.
make_debian_tarball() {
	local name dir partial scratchdir
	require_tools debootstrap:debootstrap
	debian_settings
	name=$(debian_tarball_name)
	dir=$(cd -- "$TARBALL_DIR" && pwd -P)
	if [[ -f $dir/$name ]]; then
		log "$dir/$name is there already (its name covers the recipe's packages)"
		printf '%s\n' "$dir/$name"
		return 0
	fi
	partial="$dir/.$name.partial"
	scratchdir=$(mktemp -d "${TMPDIR:-/var/tmp}/vivarium-tarball.XXXXXX")
	WORKDIR=$scratchdir
	log "downloading the packages of ${RECIPE[Name]} from $DEB_MIRROR into $dir/$name"
	rm -f -- "$partial"
	if ! debootstrap --variant="$DEB_VARIANT" --components=main --include="$DEB_INCLUDE" \
		--make-tarball="$partial" "$DEB_SUITE" "$scratchdir/target" "$DEB_MIRROR"; then
		rm -f -- "$partial"
		die "debootstrap could not download the packages"
	fi
	mv -f -- "$partial" "$dir/$name"
	log "tarball $(du -k -- "$dir/$name" | cut -f1) KiB"
	printf '%s\n' "$dir/$name"
}

build_debian() {
	local size cmdline target tarball
	local -a source_args=()
	progress 5 "Checking host tools"
	require_tools debootstrap:debootstrap mkfs.ext4:e2fsprogs qemu-img:qemu-utils systemctl:systemd
	size=$(disk_size_mib)
	cmdline=$(kernel_cmdline)

	progress 8 "Finding the Debian mirror"
	debian_settings
	log "mirror $DEB_MIRROR"
	tarball="$DEBOOTSTRAP_CACHE/$(debian_tarball_name)"
	if [[ -f $tarball ]]; then
		log "packages from $tarball (made by --make-tarball); no download"
		source_args=(--unpack-tarball="$(readlink -f -- "$tarball")")
	fi

	make_outdir
	target=$(scratch target)

	progress 10 "Running debootstrap $DEB_SUITE ($DEB_VARIANT); this takes a while"
	debootstrap --variant="$DEB_VARIANT" --components=main --include="$DEB_INCLUDE" "${source_args[@]}" \
		"$DEB_SUITE" "$target" "$DEB_MIRROR"

	progress 70 "Configuring the guest"
	debian_configure "$target" "$DEB_MIRROR" "$DEB_SUITE"

	progress 75 "Extracting the kernel and initrd"
	debian_extract_kernel "$target"
	write_cmdline "$cmdline"

	make_disk "$target" "$size" vivarium-root
}

# --- recipes that cannot be built here ---------------------------------------

build_ubuntu() {
	die "ubuntu: this recipe needs archive.ubuntu.com, which this machine cannot reach (only Debian's archive); not attempted"
}

build_windows() {
	if [[ -z $ISO_FILE || -z $DRIVERS_FILE ]]; then
		die "windows: needs a Windows installation ISO (--iso FILE), the virtio-win drivers (--drivers FILE) and a licence you hold; none can come from this machine"
	fi
	die "windows: unattended installation from $ISO_FILE is not implemented by this builder"
}

# --- main ------------------------------------------------------------------

main() {
	local method started=$SECONDS
	parse_args "$@"
	[[ $EUID -eq 0 ]] || die "must run as root: the image's files must be owned by root"
	trap on_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	parse_recipe "$RECIPE_FILE"
	method=${RECIPE[Method]}
	log "recipe ${RECIPE[Name]} (method $method) from $RECIPE_FILE"
	if [[ -n $TARBALL_DIR ]]; then
		[[ $method == debootstrap ]] || die "--make-tarball is for debootstrap recipes; ${RECIPE[Name]} is $method"
		make_debian_tarball
		return 0
	fi
	case $method in
	tiny) build_tiny ;;
	debootstrap) build_debian ;;
	ubuntu) build_ubuntu ;;
	windows) build_windows ;;
	*) die "recipe ${RECIPE[Name]}: unknown Method=$method" ;;
	esac
	check_outdir
	report_sizes
	progress 100 "Done in $((SECONDS - started)) s"
}

main "$@"
