#!/usr/bin/env python3
"""Runs Python scripts in processes forked from one interpreter that has already imported the heavy modules, so
each run skips their import (two seconds for torch, more with transformers) yet starts as a fresh process would:
the parent imports and never runs anything, every run is a new child of that untouched parent.

    fork_server.py [--preload-script FILE.py]... [--preload-imports-of FILE.py]...

--preload-script imports a driver script of ours as a module (not as __main__, so it only defines and imports),
with its folder first on sys.path as when it runs; a child that runs it finds everything it imports loaded.
--preload-imports-of imports the installed modules a user's file imports at its top level (not the file itself,
and nothing of its folder: only modules found in site-packages / dist-packages), so the user's file, imported in a
child, finds them loaded. A preload that fails is skipped: the child imports it again and reports the error.

Requests on stdin, one JSON line each; one JSON line answers each on stdout (harness/user_model/fork_server.h):
    {"argv": ["SCRIPT.py", "ARG", ...], "stdout": "PATH", "stderr": "PATH", "timeout": SECONDS}
    {"exit": N, "seconds": S} | {"signal": N, "seconds": S} | {"timed_out": true, "seconds": S}
    | {"error": "why the child could not start"}          (S: from the fork to the child's end)
The child runs SCRIPT as __main__ (sys.argv = argv, sys.path[0] its folder), stdin /dev/null, stdout and stderr
appended to the files, in a process group of its own; on timeout the group gets SIGTERM, then SIGKILL two seconds
later; after it exits, anything it left in its group is killed (as the harness's runProcess does). End of stdin
means exit.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any, NoReturn


def installed_imports(path: str) -> list[str]:
    """The modules `path` imports at module level (dotted: `import a.b`, `from a.b import c` gives a.b and a.b.c)
    whose top-level package is installed (site-packages / dist-packages)."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [node.module + "." + a.name for a in node.names if a.name != "*"]
    found = []
    for n in dict.fromkeys(names):
        try:
            spec = importlib.util.find_spec(n.split(".")[0])
        except (ImportError, ValueError):
            continue
        origin = (spec.origin or "") if spec else ""
        if "site-packages" in origin or "dist-packages" in origin:
            found.append(n)
    return found


def preload(argv: list[str]) -> None:
    """Import what the --preload-* arguments name, their output to stderr (stdout carries the replies)."""
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the replies only
        _preload(argv)


def _preload(argv: list[str]) -> None:
    it = iter(argv)
    for a in it:
        try:
            if a == "--preload-script":
                path = os.path.abspath(next(it))
                sys.path[0] = os.path.dirname(path)
                spec = importlib.util.spec_from_file_location("_preloaded_" + os.path.basename(path)[:-3], path)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            elif a == "--preload-imports-of":
                for m in installed_imports(next(it)):
                    try:
                        importlib.import_module(m)
                    except ImportError:
                        pass  # `from a import name` where name is no module
            else:
                sys.exit("fork_server.py: unknown argument %r" % a)
        except Exception as e:  # the child imports it again and reports the error where it belongs
            print("fork_server.py: preloading (%s) failed: %s" % (a, e), file=sys.stderr)


def child(req: dict[str, Any]) -> NoReturn:
    """In the forked child: never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, key in ((1, "stdout"), (2, "stderr")):
            out = os.open(req[key] or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, fd)
        script = req["argv"][0]
        sys.argv = list(req["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()  # what a fresh interpreter runs at exit
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def kill_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group `pid` leads (gone already: nothing to do)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait(pid: int, timeout: float) -> int | None:
    """The child's wait status, or None when it outlived the timeout (its group then killed)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    kill_group(pid, signal.SIGTERM)
    grace = time.monotonic() + 2.0
    while time.monotonic() < grace:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return None
        time.sleep(0.01)
    kill_group(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def serve() -> None:
    """Answer the requests on stdin, one child each, until end of input."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            argv, timeout = req["argv"], float(req["timeout"])
            if not argv or not isinstance(argv, list):
                raise ValueError("argv must be a non-empty list")
        except (ValueError, KeyError, TypeError) as e:
            reply = {"error": "bad request: %s" % e}
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            t0 = time.monotonic()
            try:
                pid = os.fork()
            except OSError as e:
                reply = {"error": "fork: %s" % e}
            else:
                if pid == 0:
                    child(req)
                try:
                    os.setpgid(pid, pid)  # as the child does, so a timeout cannot find it still in ours
                except OSError:
                    pass  # it did so already, or has exited
                status = wait(pid, timeout)
                kill_group(pid, signal.SIGKILL)  # anything the run left in its group
                if status is None:
                    reply = {"timed_out": True}
                elif os.WIFSIGNALED(status):
                    reply = {"signal": os.WTERMSIG(status)}
                else:
                    reply = {"exit": os.WEXITSTATUS(status)}
                reply["seconds"] = time.monotonic() - t0
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    preload(sys.argv[1:])
    serve()
