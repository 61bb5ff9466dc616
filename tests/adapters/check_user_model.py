#!/usr/bin/env python3
"""Runs one `ckptcheck validate --adapter torch:module=...` command and checks its exit code, its stderr and its
JSON report (CTest's user-model tests; harness/user_model/torch/USER_MODEL.md).

  check_user_model.py [expectations] -- CKPTCHECK validate ARGS... --out DIR

Expectations:
  --exit N                   the exit code (required)
  --bitwise R[,R2]           every compared seed's bitwise result is R (holds, finding, rounding-accepted), or one
                             of the comma-separated results where the machine decides (XLA's CPU code)
  --memory R                 every compared seed's memory result is R (holds, finding)
  --class C                  the first bitwise finding's diagnosis class
  --tensor REGEX             ... whose first differing tensor matches REGEX (re.search)
  --shrunk-batch N           the shrunk finding's batch is at most N
  --stderr REGEX             stderr is exactly one line, matching REGEX (exit 2 and 3)
  --seed-status S:STATUS     seed S has this status in the report (kept although another seed failed)
  --replay                   the shrunk finding's replay command, run too, exits the same way
  --needs-python-module M    the Python of the built-in adapters must import M, else fail with a hint (or skip,
                             exit 77, when CKPT_SKIP_FRAMEWORK_TESTS=1)
  --needs-cuda               that Python's torch must see a CUDA device, else skip (exit 77, "no CUDA device");
                             with CKPT_REQUIRE_GPU=1 fail instead
  --generators A,B           every run the driver wrote (compared runs and passes) dumped the state of exactly these
                             generators after every step (cpu, cuda:0, ...): all of them were compared
  --changed INSTRUMENT:MODE  the report says this measuring pass changed its run (user_model_instruments.h); every
                             pass not named must have changed nothing (--changed none: no pass changed its run)
  --profiled-step N          every compared seed's profiler figures (both modes) come from dumped step N, the
                             last one, which the memory pass's comparison with the untouched run covers
  --max-seconds S            the command took at most S seconds of wall time (printed either way)
  --ranks N                  a distributed run: the memory pass gave every one of N ranks its figures, and each
                             rank's checkpointed activation bytes are below its plain ones
Prints every seed's figures (saved bytes, step times) so the CTest log shows them.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_validate import fail, require_cuda, require_python_modules  # noqa: E402


def check_seeds(rep, a):
    compared = [s for s in rep["seeds"] if s["status"] in ("holds", "finding")]
    for s in rep["seeds"]:
        mem = s.get("memory", {})
        prof = mem.get("profiler")
        if prof:
            print(
                "seed %d: profiler activation bytes plain %d, checkpointed %d; step peak %d / %d"
                % (
                    s["seed"],
                    prof["plain"]["activation_bytes"],
                    prof["checkpoint"]["activation_bytes"],
                    prof["plain"]["peak_bytes"],
                    prof["checkpoint"]["peak_bytes"],
                )
            )
        t = s.get("step_seconds", {})
        print(
            "seed %d: %s, bitwise %s, memory %s (plain %s B, checkpointed %s B), step %s / %s s%s"
            % (
                s["seed"],
                s["status"],
                s["bitwise"],
                mem.get("result"),
                mem.get("plain_bytes"),
                mem.get("checkpoint_bytes"),
                t.get("plain"),
                t.get("checkpoint"),
                ", " + s["error"] if "error" in s else "",
            )
        )
    if (a.bitwise or a.memory) and not compared:
        fail("no seed was compared")
    for s in compared:
        if a.bitwise and s["bitwise"] not in a.bitwise.split(","):
            fail("seed %d: bitwise %s, expected %s" % (s["seed"], s["bitwise"], a.bitwise))
        if a.memory and s.get("memory", {}).get("result") != a.memory:
            fail("seed %d: memory %s, expected %s" % (s["seed"], s.get("memory"), a.memory))
    if a.changed is not None:
        want = {c for c in a.changed if c != "none"}  # --changed none: every pass changed nothing
        for s in compared:
            got = {"%s:%s" % (c["instrument"], c["mode"]) for c in s.get("instruments", []) if c["changed"]}
            if not s.get("instruments"):
                fail("seed %d: no measuring pass in the report" % s["seed"])
            if got != want:
                fail(
                    "seed %d: the passes that changed their run are %s, expected %s"
                    % (s["seed"], sorted(got) or "none", sorted(want) or "none")
                )
            if any(g.startswith("memory:") for g in got) and s.get("memory", {}).get("profiler"):
                fail("seed %d: a memory pass changed its run, yet its figures are in the report" % s["seed"])
    if a.profiled_step is not None:
        for s in compared:
            prof = s.get("memory", {}).get("profiler")
            steps = prof and {prof[m]["step"] for m in ("plain", "checkpoint")}
            if steps != {a.profiled_step}:
                fail("seed %d: profiled step(s) %s, expected %d" % (s["seed"], steps, a.profiled_step))
    for s in compared if a.ranks else []:
        prof = s.get("memory", {}).get("profiler") or {}
        per = [prof.get(m, {}).get("per_rank", []) for m in ("plain", "checkpoint")]
        print(
            "seed %d: per rank activation bytes plain %s, checkpointed %s"
            % (s["seed"], [r["activation_bytes"] for r in per[0]], [r["activation_bytes"] for r in per[1]])
        )
        if len(per[0]) != a.ranks or len(per[1]) != a.ranks:
            fail(
                "seed %d: %d / %d ranks with memory figures, expected %d"
                % (s["seed"], len(per[0]), len(per[1]), a.ranks)
            )
        for r, (p, c) in enumerate(zip(*per, strict=True)):  # both lengths checked equal above
            if not 0 < c["activation_bytes"] < p["activation_bytes"]:
                fail(
                    "seed %d rank %d: activation bytes plain %d, checkpointed %d"
                    % (s["seed"], r, p["activation_bytes"], c["activation_bytes"])
                )
    for want in a.seed_status:
        seed, status = want.split(":")
        got = [s["status"] for s in rep["seeds"] if s["seed"] == int(seed)]
        if got != [status]:
            fail("seed %s has status %s in the report, expected %s" % (seed, got, status))


def check_finding(rep, a, cmd, code):
    findings = [s for s in rep["seeds"] if s["bitwise"] == "finding"]
    if not findings:
        fail("no bitwise finding in the report")
    f = rep.get("shrunk") or findings[0]
    first = f.get("first_difference", {}).get("tensor", f.get("error", ""))
    print(
        "finding: %s; class %s; shrunk to seed %d, batch %d, %d step(s)"
        % (first, f.get("diagnosis", {}).get("class"), f["seed"], f["batch_size"], f["steps"])
    )
    if a.class_ and f.get("diagnosis", {}).get("class") != a.class_:
        fail("class %s, expected %s" % (f.get("diagnosis"), a.class_))
    if a.tensor and not re.search(a.tensor, first):
        fail("first differing tensor %r does not match %r" % (first, a.tensor))
    if a.shrunk_batch is not None and f["batch_size"] > a.shrunk_batch:
        fail("shrunk batch %d, expected at most %d" % (f["batch_size"], a.shrunk_batch))
    if a.replay:
        replay = shlex.split(f["replay"])
        replay[0] = cmd[0]
        replay += ["--out", rep_dir(cmd) + "-replay"]
        print("$ " + " ".join(shlex.quote(c) for c in replay), flush=True)
        rr = subprocess.run(replay, capture_output=True, text=True)
        if rr.returncode != code:
            fail("replay exited %d, expected %d\n%s%s" % (rr.returncode, code, rr.stdout, rr.stderr))
        print("replay: exit %d as expected" % rr.returncode)


def check_generators(out, want):
    """Every index.json under the validate output lists, for each dumped step, the generators `want`."""
    runs = 0
    for root, _dirs, files in os.walk(out):
        if "index.json" not in files:
            continue
        with open(os.path.join(root, "index.json")) as f:
            tensors = json.load(f).get("tensors", [])
        by_step = {}
        for t in tensors:
            if t.get("kind") == "rng":
                by_step.setdefault(t["step"], set()).add(t["name"])
        for step, names in sorted(by_step.items()):
            if names != set(want):
                fail("%s: step %d dumped generators %s, expected %s" % (root, step, sorted(names), sorted(want)))
        runs += bool(by_step)
    if not runs:
        fail("no run under %s dumped a generator state" % out)
    print("generators compared: %s (%d runs)" % (", ".join(want), runs))


def rep_dir(cmd):
    return cmd[cmd.index("--out") + 1]


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        fail("usage: check_user_model.py [expectations] -- CKPTCHECK validate ...")
    split = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--exit", type=int, required=True)
    p.add_argument("--bitwise")
    p.add_argument("--memory")
    p.add_argument("--class", dest="class_")
    p.add_argument("--tensor")
    p.add_argument("--shrunk-batch", type=int)
    p.add_argument("--stderr")
    p.add_argument("--seed-status", action="append", default=[])
    p.add_argument("--replay", action="store_true")
    p.add_argument("--needs-python-module", action="append", default=[])
    p.add_argument("--needs-cuda", action="store_true")
    p.add_argument("--generators")
    p.add_argument("--changed", action="append", default=None)
    p.add_argument("--profiled-step", type=int)
    p.add_argument("--max-seconds", type=float)
    p.add_argument("--ranks", type=int)
    a = p.parse_args(argv[:split])
    cmd = argv[split + 1 :]
    require_python_modules(a.needs_python_module)
    if a.needs_cuda:
        require_cuda()
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    sys.stdout.write(r.stdout)
    print("wall time: %.1f s" % seconds)
    if a.max_seconds is not None and seconds > a.max_seconds:
        fail("took %.1f s, more than --max-seconds %g" % (seconds, a.max_seconds))
    print("stderr: " + r.stderr.strip().replace("\n", "\n        "))
    if r.returncode != a.exit:
        fail("exit code %d, expected %d" % (r.returncode, a.exit))
    if a.stderr:
        lines = r.stderr.splitlines()
        if len(lines) != 1 or not re.search(a.stderr, lines[0]):
            fail("stderr must be one line matching %r, got %r" % (a.stderr, r.stderr))
    report = os.path.join(rep_dir(cmd), "validate.json")
    if a.exit == 2 and not a.seed_status:
        return  # bad input: the line is the whole answer
    with open(report) as f:
        rep = json.load(f)
    if rep["exit_code"] != r.returncode:
        fail("report says exit %d, the process exited %d" % (rep["exit_code"], r.returncode))
    check_seeds(rep, a)
    if a.generators:
        check_generators(rep_dir(cmd), a.generators.split(","))
    if a.bitwise == "finding" or a.class_ or a.tensor:
        check_finding(rep, a, cmd, r.returncode)


if __name__ == "__main__":
    main()
