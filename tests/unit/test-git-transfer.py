#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vivarium-git-transfer, the program vivariumd runs in
# vivarium-git-transfer-<project>.service, run here directly on real git
# repositories: its standard output holds exactly one serialized GVariant
# (bsss) in normal form, also when its stderr is the same pipe; errors carry
# the daemon's D-Bus error names; it checks its arguments again.
import os
import shutil
import subprocess
import sys
import tempfile

import gi
gi.require_version("GLib", "2.0")
from gi.repository import GLib  # noqa: E402

PROGRAM = sys.argv[1]
ERR = "org.vivarium.Vivarium1.Error."
n = 0
failed = False
last_stderr = b""


def check(ok, what, detail=""):
    global n, failed
    n += 1
    print(("ok" if ok else "not ok") + f" {n} - {what}")
    if not ok:
        failed = True
        print("# " + str(detail).replace("\n", "\n# "))


def program_env():
    """As the unit has it: a PATH and HOME=/nonexistent, nothing of ours; the
    sanitizers' options pass (an ASan build reads its suppressions there)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
    for name in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def run(*args, stderr_into_stdout=False):
    p = subprocess.run([PROGRAM, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if stderr_into_stdout else subprocess.PIPE,
                       env=program_env())
    global last_stderr
    last_stderr = p.stderr
    v = GLib.Variant.new_from_bytes(GLib.VariantType("(bsss)"), GLib.Bytes.new(p.stdout), False)
    return p.returncode, v, p.stdout


def git(*args, cwd=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


tmp = tempfile.mkdtemp()
try:
    src = os.path.join(tmp, "src")
    git("init", "-q", "-b", "trunk", src)
    with open(os.path.join(src, "README"), "w") as f:
        f.write("hello\n")
    git("add", "README", cwd=src)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one", cwd=src)
    remote = os.path.join(tmp, "remote.git")
    git("clone", "-q", "--bare", src, remote)
    key = os.path.join(tmp, "key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)

    gitdir = os.path.join(tmp, "clone")
    os.mkdir(gitdir, 0o700)
    rc, v, raw = run("clone", "file://" + remote, gitdir, key)
    check(v.is_normal_form() and v.unpack() == (True, "", "", ""), "clone: one (bsss), ok", (rc, raw))
    check(rc == 0, "clone: exit status 0", (rc, last_stderr))
    head = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    want = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    check(head == want, "clone: the git directory has the remote's HEAD", (head, want))
    bare = subprocess.run(["git", "--git-dir", gitdir, "config", "core.bare"], capture_output=True, text=True).stdout.strip()
    check(bare == "true", "clone: bare, no checkout (the daemon checks out)", bare)
    check(not os.path.exists(os.path.join(gitdir, "README")), "clone: no file of the tree in the git directory")

    # A push of a new commit to the same remote.
    work = os.path.join(tmp, "work")
    git("clone", "-q", remote, work)
    git("remote", "set-url", "origin", "file://" + remote, cwd=work)
    with open(os.path.join(work, "README"), "a") as f:
        f.write("more\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "two", cwd=work)
    rc, v, raw = run("push", os.path.join(work, ".git"), key, "-")
    check(v.is_normal_form() and v.unpack()[0] is True, "push: ok", raw)
    pushed = subprocess.run(["git", "--git-dir", remote, "rev-parse", "trunk"], capture_output=True, text=True).stdout.strip()
    mine = subprocess.run(["git", "-C", work, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    check(pushed == mine, "push: the remote has the commit", (pushed, mine))

    # Errors, named as on the bus; the result alone on stdout even when stderr is the same pipe.
    nogit = os.path.join(tmp, "noremote")
    git("init", "-q", nogit)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", cwd=nogit)
    rc, v, raw = run("push", os.path.join(nogit, ".git"), key, "-", stderr_into_stdout=True)
    check(v.is_normal_form(), "push without a remote, stderr into the same pipe: still one (bsss)", raw)
    if v.is_normal_form():
        ok, name, message, seen = v.unpack()
        check((ok, name) == (False, ERR + "BadState"), "push without a remote: BadState", v)
        check(message == "The project has no remote to publish to", "with the daemon's sentence", message)
    check(rc == 1, "push without a remote: exit status 1", rc)

    rejected = os.path.join(tmp, "ahead")
    git("clone", "-q", remote, rejected)
    git("remote", "set-url", "origin", "file://" + remote, cwd=rejected)
    git("reset", "-q", "--hard", "HEAD~1", cwd=rejected)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "other", cwd=rejected)
    rc, v, raw = run("push", os.path.join(rejected, ".git"), key, "-")
    check(v.is_normal_form() and v.unpack()[1] == ERR + "BadState", "a push that is not a fast-forward: BadState", raw)

    for args, what in [(["clone", "http://example.com/x.git", gitdir, key], "a plain http URL"),
                       (["clone", "file://" + remote, "relative/dir", key], "a relative git directory"),
                       (["push", gitdir, key, "xyz"], "a pin that is not 64 hex digits"),
                       (["fetch", "a", "b", "c"], "an unknown verb"),
                       ([], "no arguments")]:
        rc, v, raw = run(*args)
        check(v.is_normal_form() and v.unpack()[:2] == (False, ERR + "InvalidArgument"),
              f"{what}: InvalidArgument", raw)
finally:
    shutil.rmtree(tmp)
print(f"1..{n}")
sys.exit(1 if failed else 0)
