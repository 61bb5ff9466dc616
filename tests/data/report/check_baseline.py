#!/usr/bin/env python3
"""`ckptcheck report --baseline DIR` (reports/baseline.py) on two real bench_engine runs of the same catalogue cases
(tiny and mlp-deep under every policy, short mode, 7 repetitions), made one after the other with the same binary
on this 2-core machine at load 11-17 (bench_catalogue_small.json, then bench_catalogue_rerun.json, the first and
third of five such runs: the pair where the runs differ most against their spreads; trim_bench.py says what was
kept):

- the first run's report writes runs.json (format "ckptcheck-runs", version 1), one entry per case x policy with
  every repetition's time overhead;
- the rerun, unchanged code on a busy machine, is not flagged against the first run nor the first against the
  rerun (exit 0, "no regression", a JUnit report with no failure), and neither is every repetition shifted by the
  smallest spread; mlp-deep/recursive is 9.1 points slower in the first run than in the rerun, 1.01 times the
  larger spread (9.0 points), which a rule of one spread would flag;
- a deliberately slowed policy (the noisiest case x policy, mlp-deep/recursive, every repetition of the rerun 30
  points slower: 21 points over the first run, more than twice either run's spread) and a deliberately larger
  peak (one policy's peak 64 bytes more) are each caught: exit 1, the report written with the regression in its
  section, one line on stderr, a JUnit failure for that policy alone; every policy slowed so is caught (the
  smallest slowdown this pair catches is 4-27 points, median 8); a smaller peak is listed as improved, exit 0; the
  slowed policy on another CPU model is listed, not judged;
- a bad baseline (no runs.json, version 2, a case missing, no such directory) exits 2 with one line naming it and
  writes no report; --junit without --baseline exits 2.

    check_baseline.py CKPTCHECK

Exit 0 when every check holds, 1 otherwise (each failed check printed).
"""

import copy
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from check_harness import Checks  # noqa: E402

FIRST = os.path.join(HERE, "bench_catalogue_small.json")
RERUN = os.path.join(HERE, "bench_catalogue_rerun.json")
SLOWER = 0.30  # step time added to every repetition of the slowed policy (30 points)
SPREADS = 2.0  # reports/baseline.py's factor
PEAK_MORE = 64  # bytes added to the larger peak

check = Checks("check_baseline")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Cli:
    def __init__(self, binary, tmp):
        self.binary, self.tmp = binary, tmp

    def report(self, bench, out, *extra):
        r = subprocess.run(
            [self.binary, "report", "--bench", bench, "--out", os.path.join(self.tmp, out), "--quiet"] + list(extra),
            capture_output=True,
            text=True,
            timeout=300,
        )
        return r.returncode, r.stderr

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


def steps(doc):
    """(case, policy as the report names it) -> the BM_Step repetitions of a bench JSON (its entries, to edit in
    place). The report names a policy by its label's schedule ("uniform:k=8"), not the registered string."""
    out = {}
    for b in doc["benchmarks"]:
        parts = b["name"].split("/")
        if parts[0] == "BM_Step" and b.get("run_type") == "iteration":
            out.setdefault((parts[1], b.get("label", "").split(" ", 1)[-1] or parts[2]), []).append(b)
    return out


def spread(entries):
    xs = [e["time_overhead"] for e in entries]
    return max(xs) - min(xs)


def write(cli, doc, name):
    path = cli.path(name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def junit_counts(path):
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    failed = [f"{c.get('classname')}/{c.get('name')}" for c in suite.iter("testcase") if c.find("failure") is not None]
    return int(suite.get("tests")), failed


def run(cli):
    rc, err = cli.report(FIRST, "first")
    if not check(rc == 0, f"first run's report: exit {rc}: {err}"):
        return
    runs = json.loads(read(cli.path("first", "runs.json")))
    first_steps = steps(json.loads(read(FIRST)))
    check(runs["format"] == "ckptcheck-runs" and runs["version"] == 1, f"runs.json header: {runs.get('format')}")
    check(
        len(runs["runs"]) == len(first_steps), f"runs.json has {len(runs['runs'])} runs, the bench {len(first_steps)}"
    )
    check(all(len(r["time_overhead_repetitions"]) == 7 for r in runs["runs"]), "runs.json lacks the 7 repetitions")
    base = cli.path("first")

    # The unchanged rerun, against the first run and the other way round.
    rc, err = cli.report(RERUN, "rerun", "--baseline", base, "--junit", cli.path("rerun.xml"))
    md = read(cli.path("rerun", "report.md")) if rc == 0 else ""
    check(rc == 0, f"the unchanged rerun is flagged: exit {rc}: {err}")
    check("## Changes since the baseline" in md and "no regression" in md, "rerun's report has no verdict section")
    tests, failed = junit_counts(cli.path("rerun.xml"))
    check(tests == len(first_steps) and not failed, f"rerun's JUnit: {tests} tests, failed {failed}")
    rc, err = cli.report(FIRST, "first-again", "--baseline", cli.path("rerun"))
    check(rc == 0, f"the first run against the rerun is flagged: exit {rc}: {err}")

    rerun = json.loads(read(RERUN))
    reps = steps(rerun)
    both = {k: max(spread(v), spread(first_steps[k])) for k, v in reps.items() if k in first_steps}
    noisiest = max(both, key=both.get)
    check(
        SPREADS * both[noisiest] < SLOWER,
        f"twice the noisiest run's spread, {both[noisiest]:.3f}, is not below the {SLOWER} slowdown",
    )
    print(
        f"check_baseline: {len(both)} runs compared; spreads (max - min of 7 repetitions, the larger of the two "
        "runs) "
        f"median {sorted(both.values())[len(both) // 2]:.4f}, largest {both[noisiest]:.4f} ({'/'.join(noisiest)})"
    )

    # Every repetition shifted by less than the smallest spread: within the noise, not flagged.
    shifted = copy.deepcopy(rerun)
    least = min(both.values())
    for entries in steps(shifted).values():
        for e in entries:
            e["time_overhead"] += least
    rc, err = cli.report(write(cli, shifted, "shifted.json"), "shifted", "--baseline", base)
    check(rc == 0, f"a shift of {least:.4f} (the smallest spread) is flagged: exit {rc}: {err}")

    # The slowed policy.
    slowed = copy.deepcopy(rerun)
    for e in steps(slowed)[noisiest]:
        e["time_overhead"] += SLOWER
    rc, err = cli.report(
        write(cli, slowed, "slowed.json"), "slowed", "--baseline", base, "--junit", cli.path("slowed.xml")
    )
    name = "/".join(noisiest)
    check(rc == 1, f"the slowed policy {name} is not caught: exit {rc}: {err}")
    check(err.count("\n") == 2 and f"{name}: time overhead" in err, f"slowed: stderr {err!r}")
    md = read(cli.path("slowed", "report.md")) if os.path.isfile(cli.path("slowed", "report.md")) else ""
    check("**1 regressed**" in md and "| REGRESSION |" in md, "slowed: the report's section lacks the regression")
    _, failed = junit_counts(cli.path("slowed.xml"))
    check(failed == [f"ckptcheck.overhead.{noisiest[0]}/{noisiest[1]}"], f"slowed: JUnit failures {failed}")
    every = copy.deepcopy(rerun)
    for entries in steps(every).values():
        for e in entries:
            e["time_overhead"] += SLOWER
    rc, err = cli.report(write(cli, every, "every.json"), "every", "--baseline", base, "--junit", cli.path("every.xml"))
    _, failed = junit_counts(cli.path("every.xml"))
    check(rc == 1 and len(failed) == len(both), f"every policy slowed: exit {rc}, {len(failed)} of {len(both)} caught")
    elsewhere = dict(slowed, context=dict(slowed["context"], cpu="another CPU"))
    rc, err = cli.report(write(cli, elsewhere, "elsewhere.json"), "elsewhere", "--baseline", base)
    md = read(cli.path("elsewhere", "report.md")) if rc == 0 else ""
    check(rc == 0 and "time not judged: the baseline ran on" in md, f"slowed on another CPU: exit {rc}: {err}")

    # A larger peak, and a smaller one.
    key = next(k for k in reps if k[1] != "store-all")
    for delta, want in ((PEAK_MORE, 1), (-PEAK_MORE, 0)):
        doc = copy.deepcopy(rerun)
        for e in steps(doc)[key]:
            e["peak_activation_bytes"] += delta
        rc, err = cli.report(write(cli, doc, f"peak{delta}.json"), f"peak{delta}", "--baseline", base)
        check(rc == want, f"peak {delta:+d} bytes on {'/'.join(key)}: exit {rc}, not {want}: {err}")
        md = read(cli.path(f"peak{delta}", "report.md")) if rc in (0, 1) else ""
        if want:
            check(f"{'/'.join(key)}: peak activation" in err, f"larger peak: stderr {err!r}")
        else:
            check("1 improved" in md and "| improved |" in md, "smaller peak: not listed as improved")

    bad_baselines(cli, runs)


def bad_baselines(cli, runs):
    v2 = cli.path("v2")
    os.makedirs(v2)
    with open(os.path.join(v2, "runs.json"), "w", encoding="utf-8") as f:
        json.dump(dict(runs, version=2), f)
    lacking = cli.path("lacking")
    os.makedirs(lacking)
    gone = runs["runs"][0]["case"]
    with open(os.path.join(lacking, "runs.json"), "w", encoding="utf-8") as f:
        json.dump(dict(runs, runs=[r for r in runs["runs"] if r["case"] != gone]), f)
    empty = cli.path("empty")
    os.makedirs(empty)
    for d, want in (
        (v2, "version 2, this report reads version 1"),
        (lacking, f"has no runs of case {gone}"),
        (empty, "no runs.json"),
        (cli.path("nowhere"), "no such directory"),
    ):
        rc, err = cli.report(RERUN, "bad", "--baseline", d)
        check(rc == 2 and err.count("\n") == 1 and want in err and d in err, f"baseline {d}: exit {rc}, {err!r}")
        check(not os.path.exists(cli.path("bad", "report.md")), f"baseline {d}: a report was written")
    rc, err = cli.report(RERUN, "bad", "--junit", cli.path("x.xml"))
    check(rc == 2 and "--junit needs --baseline" in err, f"--junit alone: exit {rc}, {err!r}")


def main():
    return check.run("ckpt_report_baseline_", lambda tmp: run(Cli(sys.argv[1], tmp)))


if __name__ == "__main__":
    sys.exit(main())
