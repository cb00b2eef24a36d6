#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Runs inside the systemd host booted by tools/demo.sh: everything here goes
# through vivariumctl and the D-Bus API, as a script or an assistant would.
# The whole story: an image, a project, a task handed to a script worker, a
# DONE outcome and a signed report whose facts the daemon, not the worker,
# established.
set -euo pipefail

ctl () { vivariumctl --no-interaction "$@"; }
out=${VIVARIUM_TEST_BUILD_DIR:?run me through tools/demo.sh}
step () { printf '\n== %s\n' "$*"; }
work=$(mktemp -d /var/tmp/vivarium-demo.XXXXXX)
trap 'rm -rf -- "$work"' EXIT

step "Daemon (activated by this call)"
ctl status

image=${VIVARIUM_TEST_DEMO_IMAGE:-tiny}
if [ "$image" = debian ]; then
  step "Building and freezing the debian image (debootstrap, from the packages tools/demo.sh downloaded)"
  # The builder finds them here by the name --make-tarball gave them.
  install -d /var/cache/vivarium/debootstrap
  ln -sf "${VIVARIUM_TEST_DEBIAN_PACKAGES:?run me through tools/demo.sh --image debian}"/debian-*.tgz /var/cache/vivarium/debootstrap/
else
  step "Building and freezing the tiny image from host packages"
fi
ctl image list --json | grep -q "\"name\" *: *\"$image\"" || ctl image build "$image" "$image"
ctl image freeze "$image" 2>/dev/null || true
ctl image verify "$image"

step "A project: a 64 MiB dataset whose git repository stays on the host"
ctl project show demo >/dev/null 2>&1 || ctl project create demo --quota 64M
ctl project show demo

step "A worker script: it acts only through its own task"
cat > "$work/worker.sh" <<'WORKER'
#!/bin/sh
set -e
vivariumctl worker exec --cwd /project -- sh -c 'printf "hello from a throwaway machine\n" > hello.txt'
vivariumctl worker exec --cwd /project -- sh -c 'printf "#!/bin/sh\necho 42\n" > answer.sh && chmod +x answer.sh'
vivariumctl worker finish --summary "Added hello.txt and answer.sh, which prints 42." --verify "./answer.sh | grep -qx 42"
WORKER

step "Handing the task over; the caller's verification is re-run in a fresh machine"
tid=$(ctl task submit demo "$image" --script "$work/worker.sh" \
        --instructions "Add hello.txt and a script answer.sh that prints 42." \
        --verify "test -f hello.txt && ./answer.sh | grep -qx 42")
printf 'task %s\n' "$tid"
ctl task wait "$tid" --timeout 900

step "The report: trusted facts first, the worker's words as a claim"
ctl task report "$tid"
ctl task report "$tid" --json > "$out/demo-report.json"

step "Anyone holding the file can check the signature offline"
ctl report verify "$out/demo-report.json"
ctl project log demo -n 3
