#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Each built man page documents everything its program has. The truth is
taken from the programs themselves, never from a list kept here:
vivariumctl's --help and each verb's --help, vivariumd's --help,
vivarium-mcp's --help and its tools/list answer, the keys `vivariumctl config
show` reads from the shipped defaults.conf plus every key the daemon's
parser (service/vd-config.c) and vivarium-mcp's manifest reader ask for.

Usage: test-man-pages.py MANDIR SRCDIR VIVARIUMCTL VIVARIUMD VIVARIUM-MCP
(MANDIR holds the pages as meson built them: roff, from docs/man/*.scd)."""
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def fail(page, what):
    failures.append(f"{page}: {what}")


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, **kw)
    if r.returncode != 0:
        sys.exit(f"test-man-pages: {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


# --- the pages: roff split into (level, title, text) ---------------------

def unroff(s):
    s = re.sub(r"\\f[BIRP]", "", s)
    return s.replace("\\&", "").replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")


def sections(path):
    """[(level, title, body)] where level is 'SH' or 'SS'; an SS body is its
    own text, an SH body holds its SS subsections too."""
    if not os.path.exists(path):
        sys.exit(f"test-man-pages: {path} was not built (is scdoc installed? tools/install-deps.sh)")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\.(SH|SS) (.*)$", line)
            if m:
                out.append([m.group(1), unroff(m.group(2)).strip('"'), ""])
                continue
            if line.startswith(".") and not line.startswith(".\\\""):
                continue
            if out:
                out[-1][2] += unroff(line)
                if out[-1][0] == "SS":
                    for s in reversed(out[:-1]):
                        if s[0] == "SH":
                            s[2] += unroff(line)
                            break
    return out


def mentions(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def section(secs, level, title):
    for lv, t, body in secs:
        if lv == level and (t == title or t.startswith(title + " ")):
            return body
    return None


# --- the truth: --help -----------------------------------------------------

def help_options(text):
    """Long and short options of a GOption --help, without --help itself."""
    opts = []
    for line in text.splitlines():
        m = re.match(r"^  (?:(-\w), )?(--[\w-]+)", line)
        if m and m.group(2) != "--help":
            opts.append([o for o in m.groups() if o])
    return opts


def ctl_verbs(ctl):
    top = run([ctl, "--help"])
    verbs = []
    for line in top.split("Commands:\n", 1)[1].splitlines():
        if not re.match(r"^  [a-z]", line):
            continue
        words = line[2:].split("  ")[0].split()
        verb = words[:1] + [w for w in words[1:2] if re.fullmatch(r"[a-z][a-z-]*", w)]
        verbs.append(" ".join(verb))
    if len(verbs) < 10:
        sys.exit(f"test-man-pages: read only {len(verbs)} commands from {ctl} --help")
    return top, verbs


def check_vivariumctl(page, ctl):
    secs = sections(page)
    top, verbs = ctl_verbs(ctl)
    options = section(secs, "SH", "OPTIONS") or ""
    top_opts = help_options(top.split("Commands:", 1)[0])
    for names in top_opts:
        for o in names:
            if not mentions(options, o):
                fail(page, f"OPTIONS does not document {o}")
    per_verb = {v: help_options(run([ctl, *v.split(), "--help"])) for v in verbs}
    # An option every verb takes is documented once, under OPTIONS.
    common = set.intersection(*(set(o[-1] for o in opts) for opts in per_verb.values()))
    for v, opts in per_verb.items():
        body = section(secs, "SS", v)
        if body is None:
            fail(page, f"no subsection for the command “{v}”")
            continue
        for names in opts:
            if names[-1] in common:
                if not mentions(options, names[-1]):
                    fail(page, f"OPTIONS does not document {names[-1]}, which every command takes")
                continue
            for o in names:
                if not mentions(body, o):
                    fail(page, f"“{v}” does not document its option {o}")
    # And nothing documented that the program no longer has.
    for lv, title, _ in secs:
        if lv == "SS" and not any(title == v or title.startswith(v + " ") for v in verbs):
            fail(page, f"documents “{title}”, which vivariumctl --help does not list")
    return len(verbs)


def check_vivariumd(page, daemon):
    secs = sections(page)
    options = section(secs, "SH", "OPTIONS") or ""
    opts = help_options(run([daemon, "--help"]))
    for names in opts:
        for o in names:
            if not mentions(options, o):
                fail(page, f"OPTIONS does not document {o}")
    return len(opts)


def mcp_tools(mcp):
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test-man-pages", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    out = run([mcp, "--config", "/dev/null"], input="".join(json.dumps(m) + "\n" for m in msgs))
    for line in out.splitlines():
        reply = json.loads(line)
        if reply.get("id") == 2:
            return reply["result"]["tools"]
    sys.exit("test-man-pages: vivarium-mcp did not answer tools/list")


def check_vivarium_mcp(page, mcp, srcdir):
    secs = sections(page)
    options = section(secs, "SH", "OPTIONS") or ""
    for names in help_options(run([mcp, "--help"])):
        for o in names:
            if not mentions(options, o):
                fail(page, f"OPTIONS does not document {o}")
    tools = mcp_tools(mcp)
    for tool in tools:
        body = section(secs, "SS", tool["name"])
        if body is None:
            fail(page, f"no subsection for the tool {tool['name']}")
            continue
        for arg in tool["inputSchema"].get("properties", {}):
            if not mentions(body, arg):
                fail(page, f"{tool['name']} does not document its argument {arg}")
    manifest = section(secs, "SH", "THE MANIFEST") or ""
    with open(os.path.join(srcdir, "cli", "vivarium-mcp-manifest.c"), encoding="utf-8") as f:
        keys = re.findall(r'read_\w+ \(kf, group, "(\w+)"', f.read())
    if not keys:
        sys.exit("test-man-pages: found no manifest keys in cli/vivarium-mcp-manifest.c")
    for key in keys:
        if not mentions(manifest, key + "="):
            fail(page, f"THE MANIFEST does not document {key}=")
    return len(tools)


def config_keys(ctl, srcdir):
    """{group: {keys}}: the shipped layer as vivariumctl reads it, and every
    key the daemon's and the gateway's parsers ask for by name."""
    keys = {}
    with tempfile.TemporaryDirectory() as empty:
        # Only absolute directories count (common/vivarium-config-layers.c).
        env = dict(os.environ, VIVARIUM_DATA_DIR=os.path.abspath(os.path.join(srcdir, "service")),
                   VIVARIUM_CONFIG_DIR=empty)
        for line in run([ctl, "config", "show"], env=env).splitlines():
            m = re.match(r"^\[([^\]]+)\] ([^=]+)=", line)
            if m:
                keys.setdefault(m.group(1), set()).add(m.group(2))
    if len(keys) < 5:
        sys.exit(f"test-man-pages: vivariumctl config show read only {len(keys)} groups from defaults.conf")
    with open(os.path.join(srcdir, "service", "vd-config.c"), encoding="utf-8") as f:
        for g, k in re.findall(r'\(self(?:->merged)?, "(\w+)", "(\w+)"', f.read()):
            keys.setdefault(g, set()).add(k)
    with open(os.path.join(srcdir, "worker", "vivarium-gateway.c"), encoding="utf-8") as f:
        for k in re.findall(r'get_(?:uint|required|optional) \(kf, "(\w+)"', f.read()):
            keys.setdefault("Agent", set()).add(k)
    return keys


def check_vivarium_conf(page, ctl, srcdir):
    secs = sections(page)
    keys = config_keys(ctl, srcdir)
    n = 0
    for group, names in sorted(keys.items()):
        rule_group = group.startswith("EgressGroup ")
        body = section(secs, "SH", "[EgressGroup NAME]" if rule_group else f"[{group}]")
        if body is None:
            fail(page, f"no section for [{group}]")
            continue
        if rule_group and not mentions(body, group.split(" ", 1)[1]):
            fail(page, f"[EgressGroup NAME] does not name the shipped group {group.split(' ', 1)[1]}")
        for key in sorted(names):
            n += 1
            if not mentions(body, key + "="):
                fail(page, f"[{group}] does not document {key}=")
    return n


def main():
    mandir, srcdir, ctl, daemon, mcp = sys.argv[1:6]
    counts = {
        "vivariumctl.1 commands": check_vivariumctl(os.path.join(mandir, "vivariumctl.1"), ctl),
        "vivariumd.8 options": check_vivariumd(os.path.join(mandir, "vivariumd.8"), daemon),
        "vivarium-mcp.1 tools": check_vivarium_mcp(os.path.join(mandir, "vivarium-mcp.1"), mcp, srcdir),
        "vivarium.conf.5 keys": check_vivarium_conf(os.path.join(mandir, "vivarium.conf.5"), ctl, srcdir),
    }
    for what, n in counts.items():
        print(f"# checked {n} {what}")
    for f in failures:
        print(f"not ok: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
