#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# boot-tiny-by-hand.sh [--accel tcg|kvm:tcg|kvm] [--cpu MODEL] [--checks] IMAGE_DIR
#
# Boots a built image (disk.qcow2, vmlinuz, initrd.img, cmdline) the way the
# daemon will, but by hand: a throwaway overlay, the same QEMU device set,
# then waits for the guest agent (at most 120 s), runs `uname -r` in the
# guest through guest-exec, prints it with the time it took, and quits QEMU.
# Everything it made (QEMU, the temp dir) is gone when it returns, also on
# failure. Exit status 0 only when the agent ran the command with status 0.
#
# --checks also shares a directory as the 9p tag "project" and checks, through
# the agent, what the tiny image promises: /project is mounted and readable,
# DHCP configured the address, default route and resolv.conf, wget reaches a
# one-shot HTTP server on the host's loopback through QEMU's gateway
# 10.0.2.2, the applets are there, and a killed qemu-ga is respawned.
#
# Output lines meant for scripts (bench/ reads them):
#   accel=kvm|tcg  uname_r=...  agent_sync_after_s=...  ready_after_s=...
#   qemu_peak_rss_kib=...

set -euo pipefail

readonly AGENT_TIMEOUT_S=120
readonly PYTHON=/usr/bin/python3

# TCG by default: on these machines /dev/kvm exists but is nested and does
# not run a Linux guest (see --accel below and the field notes).
accel=${VIVARIUM_ACCEL:-tcg}
cpu=${VIVARIUM_CPU:-}
checks=0
image_dir=""
tmp=""
qemu_pid=""

die() {
	printf 'boot-tiny-by-hand: %s\n' "$*" >&2
	exit 1
}

usage() {
	printf 'Usage: %s [--accel tcg|kvm:tcg|kvm] [--cpu MODEL] [--checks] IMAGE_DIR\n' "$0"
}

# Stops our QEMU (only the PID we started): a polite wait first, since QMP
# quit was normally sent already, then TERM, then KILL.
stop_qemu() {
	local i
	[[ -n $qemu_pid ]] || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$qemu_pid" 2>/dev/null; then
		printf 'boot-tiny-by-hand: QEMU %s still running; sending TERM\n' "$qemu_pid" >&2
		kill -TERM "$qemu_pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$qemu_pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	if kill -0 "$qemu_pid" 2>/dev/null; then
		printf 'boot-tiny-by-hand: QEMU %s ignored TERM; sending KILL\n' "$qemu_pid" >&2
		kill -KILL "$qemu_pid" 2>/dev/null || true
	fi
	wait "$qemu_pid" 2>/dev/null || true
	qemu_pid=""
}

cleanup() {
	local status=$?
	trap - EXIT INT TERM HUP
	set +e
	stop_qemu
	if [[ $status -ne 0 && -n $tmp && -s $tmp/serial.log ]]; then
		printf 'boot-tiny-by-hand: last lines of the serial console:\n' >&2
		tail -n 40 "$tmp/serial.log" >&2
	fi
	if [[ $status -ne 0 && -n $tmp && -s $tmp/qemu.log ]]; then
		printf 'boot-tiny-by-hand: QEMU said:\n' >&2
		tail -n 20 "$tmp/qemu.log" >&2
	fi
	[[ -n $tmp ]] && rm -rf --one-file-system -- "$tmp"
	exit "$status"
}

parse_args() {
	while [[ $# -gt 0 ]]; do
		case $1 in
		--accel) accel=${2:?--accel needs a value}; shift 2 ;;
		--cpu) cpu=${2:?--cpu needs a value}; shift 2 ;;
		--checks) checks=1; shift ;;
		-h | --help) usage; exit 0 ;;
		-*) usage >&2; die "unknown option $1" ;;
		*) [[ -z $image_dir ]] || die "only one IMAGE_DIR"; image_dir=$1; shift ;;
		esac
	done
	[[ -n $image_dir ]] || { usage >&2; exit 2; }
	case $accel in
	kvm:tcg | kvm) ;;
	tcg) ;;
	*) die "--accel must be kvm:tcg, kvm or tcg" ;;
	esac
	# Under KVM, QEMU 7.2 with plain "max" aborts on these machines: it
	# cannot set MSR 0x10a (IA32_ARCH_CAPABILITIES) and asserts.
	if [[ -z $cpu ]]; then
		if [[ $accel == tcg ]]; then
			cpu=max
		else
			cpu=max,-arch-capabilities
		fi
	fi
}

check_prerequisites() {
	local f tool
	for f in disk.qcow2 vmlinuz initrd.img cmdline; do
		[[ -s $image_dir/$f ]] || die "$image_dir/$f is missing"
	done
	for tool in qemu-system-x86_64 qemu-img; do
		command -v "$tool" >/dev/null || die "$tool is not installed"
	done
	[[ -x $PYTHON ]] || die "$PYTHON is not installed (Debian package python3)"
	if [[ $accel == kvm ]] && [[ ! -r /dev/kvm || ! -w /dev/kvm ]]; then
		die "--accel kvm needs a usable /dev/kvm"
	fi
}

start_qemu() {
	local disk
	local -a share=()
	disk=$(realpath -- "$image_dir/disk.qcow2")
	if ((checks)); then
		mkdir -- "$tmp/share"
		printf 'vivarium-9p-%s\n' "$$" >"$tmp/share/hello.txt"
		share=(-virtfs "local,path=$tmp/share,mount_tag=project,security_model=none,id=project")
	fi
	qemu-img create -q -f qcow2 -F qcow2 -b "$disk" "$tmp/overlay.qcow2"
	qemu-system-x86_64 \
		-machine "q35,accel=$accel" -cpu "$cpu" -m 512 -smp 1 \
		-nodefaults -no-user-config -display none \
		-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny \
		-kernel "$image_dir/vmlinuz" -initrd "$image_dir/initrd.img" \
		-append "$(cat -- "$image_dir/cmdline")" \
		-drive "file=$tmp/overlay.qcow2,if=none,id=disk0,format=qcow2" \
		-device virtio-blk-pci,drive=disk0 \
		-device virtio-serial-pci \
		-chardev "socket,id=qga0,path=$tmp/qga.sock,server=on,wait=off" \
		-device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0 \
		-netdev user,id=net0 -device virtio-net-pci,netdev=net0 \
		-qmp "unix:$tmp/qmp.sock,server=on,wait=off" \
		-device VGA \
		-serial "file:$tmp/serial.log" \
		"${share[@]}" \
		</dev/null >"$tmp/qemu.log" 2>&1 &
	qemu_pid=$!
}

# The guest agent and QMP conversations; prints key=value lines.
talk_to_guest() {
	"$PYTHON" - "$tmp" "$AGENT_TIMEOUT_S" "$qemu_pid" "$start_ns" "$checks" <<'EOF'
import base64, http.server, json, os, random, socket, sys, threading, time

tmp, agent_timeout, qemu_pid, start_ns = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
checks = sys.argv[5] == "1"
start = start_ns / 1e9

def qemu_alive():
    try:
        os.kill(qemu_pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: QEMU is our parent's child, not ours.
    with open(f"/proc/{qemu_pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"

def fail(msg):
    print(f"boot-tiny-by-hand: {msg}", file=sys.stderr)
    sys.exit(1)

class Channel:
    """Newline-delimited JSON over a unix socket, with deadlines."""
    def __init__(self, path, deadline):
        self.buf = b""
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                return
            except (FileNotFoundError, ConnectionRefusedError):
                self.sock.close()
                if time.monotonic() > deadline or not qemu_alive():
                    fail(f"cannot connect to {path}")
                time.sleep(0.05)

    def send(self, data):
        self.sock.sendall(data)

    def line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                if not qemu_alive():
                    fail("QEMU exited")
                continue
            if not chunk:
                fail("socket closed by QEMU")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def command(self, cmd, args, deadline):
        msg = {"execute": cmd}
        if args is not None:
            msg["arguments"] = args
        self.send(json.dumps(msg).encode() + b"\n")
        while True:
            reply = json.loads(self.line(deadline))
            if "event" in reply:
                continue
            if "error" in reply:
                fail(f"{cmd}: {reply['error']}")
            return reply["return"]

def agent_sync(agent, overall_deadline):
    """0xFF resets the agent's parser; the reply to guest-sync-delimited is
    preceded by 0xFF, and anything before it (stale replies) is dropped.
    Until qemu-ga runs, nothing answers: retry with a fresh id each time."""
    while time.monotonic() < overall_deadline:
        sync_id = random.randint(1, 2**31 - 1)
        agent.send(b"\xff" + json.dumps({"execute": "guest-sync-delimited",
                                         "arguments": {"id": sync_id}}).encode() + b"\n")
        attempt_deadline = min(time.monotonic() + 2.0, overall_deadline)
        try:
            while True:
                line = agent.line(attempt_deadline)
                if b"\xff" not in line:
                    continue
                try:
                    reply = json.loads(line.rsplit(b"\xff", 1)[1])
                except ValueError:
                    continue
                if reply.get("return") == sync_id:
                    return
        except TimeoutError:
            if not qemu_alive():
                fail("QEMU exited before the guest agent answered")
    fail(f"the guest agent did not answer within {agent_timeout:.0f} s")

def agent_exec(agent, path, args, deadline):
    pid = agent.command("guest-exec", {"path": path, "arg": args, "capture-output": True}, deadline)["pid"]
    for _ in range(600):
        status = agent.command("guest-exec-status", {"pid": pid}, deadline)
        if status["exited"]:
            return status
        time.sleep(0.05)
    fail(f"{path} did not finish")

def guest_output(agent, argv, deadline):
    status = agent_exec(agent, argv[0], argv[1:], deadline)
    out = base64.b64decode(status.get("out-data", "")).decode(errors="replace")
    if status.get("exitcode") != 0:
        err = base64.b64decode(status.get("err-data", "")).decode(errors="replace")
        fail(f"{' '.join(argv)}: exit {status.get('exitcode')}, signal {status.get('signal')}: {err.strip()!r}")
    return out

def expect(what, ok):
    print(f"check {what}: {'ok' if ok else 'FAILED'}")
    if not ok:
        fail(f"check failed: {what}")

def run_checks(agent):
    deadline = time.monotonic() + 60
    hello = open(f"{tmp}/share/hello.txt").read()
    mounts = guest_output(agent, ["cat", "/proc/mounts"], deadline)
    expect("9p share mounted at /project",
           any(l.split()[1:3] == ["/project", "9p"] for l in mounts.splitlines()))
    expect("9p share readable", guest_output(agent, ["cat", "/project/hello.txt"], deadline) == hello)
    expect("DHCP address on eth0", "inet 10.0.2.15/24" in guest_output(agent, ["ip", "-4", "addr", "show", "eth0"], deadline))
    expect("default route via 10.0.2.2", "default via 10.0.2.2" in guest_output(agent, ["ip", "-4", "route"], deadline))
    expect("resolv.conf from DHCP", "nameserver 10.0.2.3" in guest_output(agent, ["cat", "/etc/resolv.conf"], deadline))
    for tool in ("sh", "nc", "wget", "ip", "udhcpc", "qemu-ga"):
        expect(f"{tool} on PATH", guest_output(agent, ["which", tool], deadline).strip() != "")

    # One-shot HTTP server on the host's loopback only; the guest reaches it
    # as 10.0.2.2 through QEMU's user-mode network.
    token = f"vivarium-http-{random.randint(1, 2**31)}"
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = token.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 30
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    port = server.server_address[1]
    # busybox 1.35's "wget -T" segfaults; bound it with timeout(1) instead.
    got = guest_output(agent, ["timeout", "20", "wget", "-q", "-O", "-", f"http://10.0.2.2:{port}/"], deadline)
    thread.join(timeout=5)
    server.server_close()
    expect("wget through the user-mode gateway", got == token)

    # The agent kills itself (a moment later, so this call is answered) and
    # init must start a new one.
    old_pid = guest_output(agent, ["pidof", "qemu-ga"], deadline).strip()
    agent.command("guest-exec", {"path": "sh", "arg": ["-c", "sleep 1; killall qemu-ga"]}, deadline)
    killed = time.monotonic()
    time.sleep(2)
    agent_sync(agent, time.monotonic() + 30)
    new_pid = guest_output(agent, ["pidof", "qemu-ga"], deadline).strip()
    expect(f"qemu-ga respawned (pid {old_pid} -> {new_pid})", new_pid not in ("", old_pid))
    print(f"agent_respawn_s={time.monotonic() - killed:.2f}")

def peak_rss_kib():
    with open(f"/proc/{qemu_pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1

deadline = start + agent_timeout
agent = Channel(f"{tmp}/qga.sock", deadline)
agent_sync(agent, deadline)
synced = time.monotonic()
status = agent_exec(agent, "uname", ["-r"], deadline)
ready = time.monotonic()
out = base64.b64decode(status.get("out-data", "")).decode(errors="replace").strip()
err = base64.b64decode(status.get("err-data", "")).decode(errors="replace").strip()
if checks:
    run_checks(agent)

qmp = Channel(f"{tmp}/qmp.sock", time.monotonic() + 10)
qmp_deadline = time.monotonic() + 10
json.loads(qmp.line(qmp_deadline))  # greeting
qmp.command("qmp_capabilities", None, qmp_deadline)
kvm = qmp.command("query-kvm", None, qmp_deadline)
rss = peak_rss_kib()
qmp.command("quit", None, qmp_deadline)

print(f"accel={'kvm' if kvm.get('enabled') else 'tcg'}")
print(f"uname_r={out}")
print(f"agent_sync_after_s={synced - start:.2f}")
print(f"ready_after_s={ready - start:.2f}")
print(f"qemu_peak_rss_kib={rss}")
if status.get("exitcode") != 0 or not out:
    fail(f"uname -r in the guest: exit {status.get('exitcode')}, stderr {err!r}")
EOF
}

main() {
	local start_ns
	parse_args "$@"
	check_prerequisites
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	tmp=$(mktemp -d /tmp/vivarium-boot.XXXXXX)
	# CLOCK_MONOTONIC, read just before QEMU starts, so the times printed
	# include QEMU's own start-up.
	start_ns=$("$PYTHON" -c 'import time; print(time.monotonic_ns())')
	start_qemu
	talk_to_guest
}

main "$@"
