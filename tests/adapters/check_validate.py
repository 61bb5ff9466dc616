#!/usr/bin/env python3
"""Runs one `ckptcheck validate` command and checks its exit code and JSON report (CTest's adapter tests).

  check_validate.py --table FILE --name TEST -- CKPTCHECK validate ARGS... --out DIR
  check_validate.py [expectations] -- CKPTCHECK validate ARGS... --out DIR

CTest's adapter tests take their expectations from the table tests/adapters/expectations.json: one object per test
name, its keys the options below without the dashes (a flag is true; --case-field and --needs-python-module are
lists). tests/CMakeLists.txt registers the command of each test and refuses, when it configures, a test without a
row or a row without a test.

Expectations:
  --exit N[,M...]            the exit code, or any of several (required)
  --check NAME               a finding or fault of this check exists (bitwise, reference, adapter, ...)
  --tensor REGEX             ... whose first differing tensor matches REGEX (re.search)
  --max-blocks N             ... whose shrunk case has at most N blocks
  --kinds K1,K2              ... whose shrunk case's block kinds are among these
  --message REGEX            ... whose message matches REGEX (re.search); with exit 2 and no report: stderr
  --class C                  ... whose diagnosis class (harness/diagnose.h) is C, in the JSON, and the Markdown
                             report and the summary name it
  --found-in REGEX           ... whose "found in" (which evaluated case showed it first) matches REGEX
  --replay                   ... whose replay command, run too, exits the same way
  --case-field KEY=JSON      ... whose shrunk case has field KEY equal to the JSON value (repeatable; e.g.
                             input='"tokens"', frozen_embedding=true)
  --covered FEATURE[,...]    the report's coverage table counts at least one case with each feature
                             (cases/coverage.h ids: segments_3, width_odd, dropout_small, ...)
  --timed CASE[,...]         the report times each named case (--timing-case): both plain steps, the
                             reference's with and without its results copied out, and both checkpointed steps
                             are positive
  --instruments-changed R    every case's measuring passes changed their runs (instruments_changed.runs is
                             twice the evaluations), the first named matching REGEX R, in the JSON, the Markdown
                             report and the summary (without it, such runs are only printed)
  --needs-python-module M    the adapter Python must import M, else the test fails with a hint (or is skipped,
                             exit 77, when CKPT_SKIP_FRAMEWORK_TESTS=1)
In the command, {python} stands for the Python the built-in adapters use (for --adapter-cmd test adapters).
Prints the report's summary either way, so a CTest log shows the findings.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys


def adapter_python():
    if os.environ.get("CKPT_PYTHON"):
        return os.environ["CKPT_PYTHON"]
    venv = os.path.join(os.path.expanduser("~"), ".cache", "ckptcheck", "venv", "bin", "python")
    return venv if os.path.exists(venv) else "python3"


def require_python_modules(modules):
    """The adapter Python must have each module installed: else fail with a hint, or skip (exit 77) when
    CKPT_SKIP_FRAMEWORK_TESTS=1. It looks the modules up without importing them (importing torch costs two
    seconds, on every one of some hundred tests); one that is installed but fails to import fails the test's own
    run, which quotes the adapter's error."""
    probe = "import importlib.util, sys; sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)"
    for m in modules:
        if subprocess.run([adapter_python(), "-c", probe, m], capture_output=True).returncode != 0:
            if os.environ.get("CKPT_SKIP_FRAMEWORK_TESTS") == "1":
                print("SKIP: %s not importable by %s" % (m, adapter_python()))
                sys.exit(77)
            fail("%s cannot import %s: run ci/setup-python (or set CKPT_PYTHON)" % (adapter_python(), m))


def require_cuda():
    """The adapter Python's torch must see a CUDA device: else skip (exit 77) with the reason, or fail when
    CKPT_REQUIRE_GPU=1 (a GPU machine, where a skip would hide that the GPU tests did not run)."""
    probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
    if subprocess.run([adapter_python(), "-c", probe], capture_output=True).returncode == 0:
        return
    why = "no CUDA device (torch.cuda.is_available() is False in %s)" % adapter_python()
    if os.environ.get("CKPT_REQUIRE_GPU") == "1":
        fail("CKPT_REQUIRE_GPU=1 but " + why)
    print("SKIP: %s: GPU test skipped" % why)
    sys.exit(77)


def check_class_reported(finding, cls, stdout, markdown_path):
    """The class stands next to the raw difference in every report: the JSON (checked by the caller), the
    Markdown report and the printed summary."""
    print("class: %s (%s)" % (cls, finding["diagnosis"].get("why")))
    with open(markdown_path) as f:
        if "- class: **%s**" % cls not in f.read():
            fail("%s does not name the class %s" % (markdown_path, cls))
    if "class " + cls not in stdout:
        fail("the summary does not name the class %s" % cls)


def check_instruments_changed(rep, regex, stdout, markdown_path):
    """The adapter's measuring passes that changed their run (meta.json's instruments_changed), as every report
    shows them, when a regex is expected."""
    changed = rep.get("instruments_changed") or {"runs": 0}
    if changed["runs"]:
        print("instruments changed: %s" % json.dumps(changed))
    if regex is None:
        return
    if changed["runs"] != 2 * rep["evaluations"] or not re.search(regex, changed["first"]):
        fail("expected every run's pass changed (%d), the first matching %r" % (2 * rep["evaluations"], regex))
    with open(markdown_path) as f:
        if "## Measuring passes that changed their run" not in f.read():
            fail("%s does not show the measuring passes that changed their run" % markdown_path)
    if "instruments: %d run(s) whose measuring pass changed" % changed["runs"] not in stdout:
        fail("the summary does not show the measuring passes that changed their run")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def table_expectations(path, name):
    """The expectations of test `name` in the table at `path`, as the options they stand for."""
    with open(path) as f:
        table = json.load(f)
    if name not in table:
        fail("%s has no row for %s" % (path, name))
    argv = []
    for key, value in table[name].items():
        for v in value if isinstance(value, list) else [value]:
            argv += ["--" + key] if v is True else ["--" + key, str(v)]
    return argv


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        fail("usage: check_validate.py [expectations] -- CKPTCHECK validate ...")
    split = argv.index("--")
    if argv[:1] == ["--table"] and split == 4 and argv[2] == "--name":
        argv = table_expectations(argv[1], argv[3]) + argv[split:]
        split = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--exit", required=True)
    p.add_argument("--check")
    p.add_argument("--tensor")
    p.add_argument("--max-blocks", type=int)
    p.add_argument("--kinds")
    p.add_argument("--replay", action="store_true")
    p.add_argument("--message")
    p.add_argument("--class", dest="class_")
    p.add_argument("--found-in")
    p.add_argument("--covered")
    p.add_argument("--case-field", action="append", default=[])
    p.add_argument("--timed")
    p.add_argument("--holds", help="checks (comma-separated) whose status must be holds, whatever the exit code")
    p.add_argument("--instruments-changed")
    p.add_argument("--needs-python-module", action="append", default=[])
    a = p.parse_args(argv[:split])
    cmd = [c.replace("{python}", adapter_python()) for c in argv[split + 1 :]]
    exits = {int(x) for x in a.exit.split(",")}
    out = cmd[cmd.index("--out") + 1]

    require_python_modules(a.needs_python_module)

    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    report_path = os.path.join(out, "validate.json")
    if not os.path.exists(report_path):
        if r.returncode == 2 and 2 in exits:
            if a.message and not re.search(a.message, r.stderr):
                fail("exit 2, but stderr does not match %r" % a.message)
            print("bad input rejected with exit 2, as expected")
            return
        fail("exit code %d and no report at %s" % (r.returncode, report_path))
    with open(report_path) as f:
        rep = json.load(f)
    print(
        "result: %s, exit %d, %s evaluations, %s adapter runs, reference error %s"
        % (
            rep.get("result"),
            r.returncode,
            rep.get("evaluations"),
            rep.get("adapter_runs"),
            json.dumps(rep.get("reference_error")),
        )
    )
    if r.returncode not in exits:
        fail("exit code %d, expected %s" % (r.returncode, a.exit))
    if a.covered:
        features = rep.get("coverage", {}).get("features", {})
        for feature in a.covered.split(","):
            n = features.get(feature, {}).get("cases", 0)
            if n < 1:
                fail("coverage: no checked case had %s (%s)" % (feature, json.dumps(rep.get("coverage"))))
            print("coverage: %d case(s) with %s" % (n, feature))
    if a.timed:
        timed = {t["case"]: t for t in rep.get("timing", [])}
        for case in a.timed.split(","):
            t = timed.get(case)
            if t is None:
                fail("no timing of %s in the report (%s)" % (case, sorted(timed)))
            times = [
                t["framework"]["plain_step_ms"],
                t["framework"]["checkpoint_step_ms"],
                t["ckptcheck"]["plain_step_ms"],
                t["ckptcheck"]["store_all_step_ms"],
                t["ckptcheck"]["checkpoint_step_ms"],
            ]
            if not all(x > 0 for x in times):
                fail("timing of %s has a step time that is not positive: %s" % (case, json.dumps(t)))
            print("timed %s: framework plain %.2f ms, reference plain %.2f ms" % (case, times[0], times[2]))
    check_instruments_changed(rep, a.instruments_changed, r.stdout, os.path.join(out, "validate.md"))
    if a.holds:
        status = {c["name"]: c["status"] for c in rep.get("checks", [])}
        for check in a.holds.split(","):
            if status.get(check) != "holds":
                fail("check %s: %s, expected holds (%s)" % (check, status.get(check), json.dumps(rep.get("checks"))))
            print("check %s holds" % check)
    items = rep["findings"] + ([rep["fault"]] if rep.get("fault") else [])
    if r.returncode == 0:
        if items:
            fail("exit 0 but the report has findings or a fault")
        return
    for f in items:
        print(
            "%s: %s: %s\n  shrunk case: %s"
            % ("finding" if f in rep["findings"] else "fault", f["check"], f["message"], f.get("case_summary"))
        )
    if r.returncode == 3 and not rep.get("fault"):
        fail("exit 3 without a fault in the report")
    if r.returncode == 1 and not rep["findings"]:
        fail("exit 1 without a finding in the report")
    if not items:
        return
    # The expectations hold for one item: the first whose check and first differing tensor match.
    matching = [
        f
        for f in items
        if (not a.check or f["check"] == a.check)
        and (not a.tensor or re.search(a.tensor, f.get("first_difference", {}).get("tensor", "")))
        and (not a.message or re.search(a.message, f.get("message", "")))
        and (not a.found_in or re.search(a.found_in, f.get("found_in", "")))
        and (not a.class_ or f.get("diagnosis", {}).get("class") == a.class_)
    ]
    if not matching:
        fail(
            "no finding or fault with check %r, first differing tensor matching %r, message matching %r, found "
            "in matching %r and class %r" % (a.check, a.tensor, a.message, a.found_in, a.class_)
        )
    f = matching[0]
    if a.class_:
        check_class_reported(f, a.class_, r.stdout, os.path.join(out, "validate.md"))
    if "case" not in f:
        return  # a fault before any case (the adapter's capabilities, a --timing-case): no case to check
    blocks = f["case"]["blocks"]
    n = sum(b.get("repeat", 1) for b in blocks)
    if a.max_blocks is not None and n > a.max_blocks:
        fail("shrunk case has %d blocks, expected at most %d" % (n, a.max_blocks))
    if a.kinds:
        allowed = set(a.kinds.split(","))
        if any(b["kind"] not in allowed for b in blocks):
            fail("shrunk case has block kinds %s, expected only %s" % ([b["kind"] for b in blocks], sorted(allowed)))
    for kv in a.case_field:
        key, value = kv.split("=", 1)
        if f["case"].get(key) != json.loads(value):
            fail(
                "shrunk case has %s = %s, expected %s (%s)"
                % (key, json.dumps(f["case"].get(key)), value, json.dumps(f["case"]))
            )
    if a.replay:
        replay = shlex.split(f["replay"])
        replay[0] = cmd[0]
        print("$ " + " ".join(shlex.quote(c) for c in replay), flush=True)
        rr = subprocess.run(replay, capture_output=True, text=True)
        if rr.returncode != r.returncode:
            fail("replay exited %d, expected %d\n%s%s" % (rr.returncode, r.returncode, rr.stdout, rr.stderr))
        print("replay: exit %d as expected" % rr.returncode)


if __name__ == "__main__":
    main()
