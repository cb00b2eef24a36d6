#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Installs, from Debian's archive, everything Vivarium needs to build, to run
# its tests and its demo on a fresh Debian 12 machine. Idempotent.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config gcc binutils gettext libglib2.0-dev libglib2.0-dev-bin libglib2.0-bin
  libjson-glib-dev libgnutls28-dev libgit2-dev libpolkit-gobject-1-dev libpolkit-agent-1-dev libnftnl-dev libmnl-dev
  libsystemd-dev libdbus-1-dev libgtk-4-dev libadwaita-1-dev libsoup-3.0-dev libslirp-dev
  # run: the service and what it drives
  dbus dbus-daemon polkitd pkexec systemd systemd-container nftables iproute2 git
  qemu-system-x86 qemu-utils
  # project datasets: btrfs subvolumes + qgroups, ext4 images, deploy keys
  btrfs-progs e2fsprogs openssh-client
  # tests: publishing over ssh (an sshd of the test's own on 127.0.0.1)
  openssh-server
  # the tiny guest image, built from host packages
  linux-image-amd64 busybox-static qemu-guest-agent e2fsprogs cpio gzip kmod xz-utils zstd debootstrap
  # docs: man pages from docs/man/*.scd, the bash completion's install directory
  scdoc bash-completion
  # tests
  python3 python3-gi bc jq file libxml2-utils desktop-file-utils appstream xvfb util-linux passwd
  # the app's UI test: Xvfb, AT-SPI through dogtail, screenshots
  python3-pyatspi python3-dogtail at-spi2-core imagemagick xauth dbus-x11 xdotool gdb
  # the sanitizer build, and the fuzz harnesses (clang's libFuzzer)
  libclang-rt-14-dev clang
  # system-mcp: the real MCP SDK client (tests/mcp/install-sdk.sh runs npm ci)
  nodejs
)

if [ "$(id -u)" != 0 ]; then
  echo "install-deps: run as root (apt-get install)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${packages[@]}"
# Debian's nodejs has npm apart; a nodejs that brings its own conflicts with it.
command -v npm >/dev/null || apt-get install -y -q --no-install-recommends npm
# openssh-server is there for the tests' own sshd (127.0.0.1, a free port,
# stopped by PID); the machine's sshd unit is not wanted, nor in test hosts
# that overlay this root.
systemctl disable ssh.service >/dev/null 2>&1 || true
