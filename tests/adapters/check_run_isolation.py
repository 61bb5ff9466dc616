#!/usr/bin/env python3
"""What one `ckptcheck validate` run may not leave to, or take from, another (tests/run_robustness.cmake).

  check_run_isolation.py escaped-children CKPTCHECK FACTORY_FILE OUT
      validate on tests/adapters/user_models.py:escapes_setsid, whose every run forks a grandchild that calls
      setsid() and sleeps: validate holds (exit 0), and once it has exited none of those grandchildren is left
      (runner.h: ckptcheck is the child subreaper of what it starts and ends every stray when a run ends).
  check_run_isolation.py shared-out CKPTCHECK EXAMPLES_DIR OUT
      1. with OUT's lock held here, validate (built-in and user model) is refused at once: exit 2, one line naming
         --out and the lock;
      2. two user-model runs started together on one OUT, a model that holds and one with a finding: one is
         refused (exit 2, one line), the other ends with its own verdict, and OUT's report is that run's.
Exit 77 when torch is missing and CKPT_SKIP_FRAMEWORK_TESTS=1 (check_validate.require_python_modules).
"""

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_validate import fail, require_python_modules  # noqa: E402

BUSY = "another ckptcheck validate is using it"


def running(pid):
    """Alive and not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def escaped_children(ckptcheck, factories, out):
    pid_file = out + ".pids"
    if os.path.exists(pid_file):
        os.remove(pid_file)
    env = dict(os.environ, CKPT_TEST_PID_FILE=pid_file)
    cmd = [
        ckptcheck,
        "validate",
        "--adapter",
        "torch:module=%s:escapes_setsid" % factories,
        "--seeds",
        "1",
        "--steps",
        "1",
        "--out",
        out,
    ]
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    sys.stdout.write(r.stdout + r.stderr)
    with open(pid_file) as f:
        pids = [int(line) for line in f if line.strip()]
    left = [p for p in pids if running(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)  # do not leave them to the next test
    if r.returncode != 0:
        fail("exit code %d, expected 0 (the setup holds)" % r.returncode)
    if len(pids) < 2:
        fail("the factory recorded %d grandchildren, expected one per run (plain and checkpointed)" % len(pids))
    if left:
        fail("%d of %d setsid() grandchildren outlived validate: %s" % (len(left), len(pids), left))
    print("all %d setsid() grandchildren ended with their runs" % len(pids))


def one_line(r, what):
    lines = r.stderr.splitlines()
    if r.returncode != 2 or len(lines) != 1 or BUSY not in lines[0] or r.stdout:
        fail(
            "%s: expected exit 2 and one line saying '%s', got exit %d, stderr %r, stdout %r"
            % (what, BUSY, r.returncode, r.stderr, r.stdout[:200])
        )
    print("%s: refused: %s" % (what, lines[0]))


def shared_out(ckptcheck, examples, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    mlp = os.path.join(examples, "mlp.py")
    # 1. A run holds OUT (its lock, taken here as validate takes it): a second is refused before it runs anything.
    with open(os.path.join(out, ".ckptcheck.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for what, args in (
            ("built-in", ["--adapter", "numpy", "--cases", "1"]),
            ("user model", ["--adapter", "torch:module=%s:correct" % mlp]),
        ):
            t0 = time.monotonic()
            one_line(
                subprocess.run(
                    [ckptcheck, "validate"] + args + ["--out", out], capture_output=True, text=True, timeout=60
                ),
                what + " with OUT held",
            )
            if time.monotonic() - t0 > 10:
                fail("%s: the refusal took %.1f s: it must come before any run" % (what, time.monotonic() - t0))
    if os.path.exists(os.path.join(out, "validate.json")):
        fail("a refused run wrote OUT/validate.json")
    # 2. Two runs started together: one holds the lock for its whole run, the other is refused.
    # factory -> its own verdict's exit code, at mlp.py's own batch: at a batch of 2 each checkpoint's saved generator
    # state outweighs a block's activations, and `correct` is then rightly a memory finding (USER_MODEL.md).
    runs = {"correct": 0, "rng_not_preserved": 1}
    procs = {}
    for factory in runs:
        cmd = [
            ckptcheck,
            "validate",
            "--adapter",
            "torch:module=%s:%s" % (mlp, factory),
            "--seeds",
            "1",
            "--steps",
            "1",
            "--no-shrink",
            "--json",
            "--out",
            out,
        ]
        procs[factory] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = {}
    for factory, p in procs.items():
        stdout, stderr = p.communicate(timeout=600)
        done[factory] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    refused = [f for f, r in done.items() if r.returncode == 2]
    ran = [f for f in runs if f not in refused]
    if len(refused) != 1:
        fail(
            "expected exactly one of the two runs refused, got exits %s\n%s"
            % ({f: r.returncode for f, r in done.items()}, {f: r.stderr for f, r in done.items()})
        )
    one_line(done[refused[0]], refused[0] + " started beside " + ran[0])
    r = done[ran[0]]
    if r.returncode != runs[ran[0]]:
        fail("%s exited %d, its own verdict is exit %d\n%s" % (ran[0], r.returncode, runs[ran[0]], r.stderr))
    with open(os.path.join(out, "validate.json")) as f:
        rep = json.load(f)
    if not rep["adapter"].endswith(":" + ran[0]) or rep["exit_code"] != runs[ran[0]]:
        fail("OUT/validate.json is not %s's: adapter %s, exit %s" % (ran[0], rep["adapter"], rep["exit_code"]))
    print("%s ran (exit %d, its own verdict); %s was refused" % (ran[0], r.returncode, refused[0]))


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("escaped-children", "shared-out"):
        fail(__doc__)
    require_python_modules(["torch"])
    mode, ckptcheck, path, out = sys.argv[1:]
    if mode == "escaped-children":
        escaped_children(ckptcheck, path, out)
    else:
        shared_out(ckptcheck, path, out)


if __name__ == "__main__":
    main()
