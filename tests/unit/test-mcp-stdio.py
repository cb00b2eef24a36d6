#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-mcp-stdio.py VIVARIUM_MCP: the binary over real pipes, as an MCP
# client starts it. No daemon, and the system bus is pointed at nothing:
# every line must still get its answer, stdout must hold nothing but
# JSON-RPC messages, and the process must end cleanly at end of input.
# TAP on stdout.

import json
import os
import subprocess
import sys
import tempfile

MCP = sys.argv[1]
ENV = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/vivarium-test-bus")
LINE_MAX = 1024 * 1024
count = 0
failed = 0


def ok(cond, desc, diag=""):
    global count, failed
    count += 1
    if not cond:
        failed += 1
        print(f"not ok {count} - {desc}")
        for line in str(diag).splitlines()[:20]:
            print(f"# {line}")
    else:
        print(f"ok {count} - {desc}")


def run(data, args=(), timeout=30):
    p = subprocess.run([MCP, *args], input=data, capture_output=True, env=ENV, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def req(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    return json.dumps(m).encode() + b"\n"


INIT = req(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}) + \
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def replies(out):
    msgs = []
    for line in out.split(b"\n")[:-1]:
        msgs.append(json.loads(line))  # raises: stdout held a non-message
    return msgs


# 1. An oversize line: answered with an error (id null), dropped, and the
# next message is served. Also one of exactly the cap less the newline.
big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (2 * LINE_MAX) + b'"}}\n'
rc, out, err = run(INIT + big + req(2, "ping"))
msgs = replies(out)
ok(rc == 0, "exits 0 at end of input after an oversize line", err)
ok(len(msgs) == 3, "three answers: initialize, the oversize line, ping", out[:500])
if len(msgs) == 3:
    ok(msgs[1].get("id") is None and msgs[1]["error"]["code"] == -32600,
       "the oversize line gets -32600 with id null", msgs[1])
    ok(msgs[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}, "the next message is served", msgs[2])
ok(len(out) < 4096, "nothing of the oversize line is echoed", len(out))

fits = b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"'
fits += b"a" * (LINE_MAX - len(fits) - 3) + b'"}}\n'
rc, out, err = run(INIT + fits)
msgs = replies(out)
ok(len(msgs) == 2 and msgs[1].get("result") == {}, "a line of exactly the cap is a message", out[-300:])

# 2. Malformed input: each line its own JSON-RPC error, never a crash.
lines = [b"{", b"\xff\xfe", b"[" * 200000, b'{"jsonrpc":"2.0","id":4,"method":"nope"}',
         b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"vm_images"}}']
rc, out, err = run(INIT + b"\n".join(lines) + b"\n")
msgs = replies(out)
ok(rc == 0, "malformed lines: exits 0", err)
codes = [m.get("error", {}).get("code") for m in msgs[1:]]
ok(codes[:4] == [-32700, -32700, -32700, -32601], "parse errors, then method not found", codes)
if len(msgs) == 6:
    res = msgs[5].get("result", {})
    sc = res.get("structuredContent", {})
    ok(res.get("isError") is True and sc.get("error", {}).get("name") == "org.vivarium.Vivarium1.Error.Failed"
       and "identity" in sc, "no daemon: vm_images is an isError result with the identity block", msgs[5])

# 3. A blank line and a last message without its newline.
rc, out, err = run(INIT + b"\n\r\n" + req(6, "ping").rstrip(b"\n"))
msgs = replies(out)
ok(len(msgs) == 2 and msgs[1]["id"] == 6, "blank lines carry nothing; a last line without newline counts", out)

# 4. The manifest fails loudly: nothing on stdout, the reason on stderr.
with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
    f.write("[Client a]\nTools=vm_task;vm_rm\n")
for args, what in ((["--client", "a", "--config", f.name], "an unknown tool in the manifest"),
                   (["--client", "b", "--config", f.name], "a client with no group"),
                   (["--client", "a", "--config", "/nonexistent/mcp.conf"], "a missing configuration")):
    rc, out, err = run(INIT, args)
    ok(rc == 1 and out == b"" and b"vivarium-mcp:" in err, f"{what}: exit 1, the reason on stderr", (rc, out, err))
os.unlink(f.name)

# 5. --client narrows tools/list.
with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
    f.write("[Client ro]\nTools=vm_images;vm_projects\n")
rc, out, err = run(INIT + req(7, "tools/list"), ["--client", "ro", "--config", f.name])
os.unlink(f.name)
msgs = replies(out)
names = [t["name"] for t in msgs[1]["result"]["tools"]] if len(msgs) == 2 else None
ok(names == ["vm_images", "vm_projects"], "the manifest narrows tools/list", names)

print(f"1..{count}")
sys.exit(1 if failed else 0)
