"""Regressions between two runs (reports/make_report.py --baseline DIR): every report writes DIR/runs.json (format
"ckptcheck-runs", version 1: per case x policy the step's peak activation bytes, forward evaluations, FLOPs and
each repetition's time ratio), and a later report compares its own runs with the baseline's.

The rule, per case x policy:
- peak activation bytes, forward evaluations and FLOPs (forward, recompute, backward; so the FLOP overhead) are
  exact: any change is reported, an increase is a regression;
- the time overhead (policy step / store-all step - 1, the median over repetitions) is a regression only when it
  grew by more than SPREADS times each run's own spread: median_new - median_old > SPREADS x (max(reps_old) -
  min(reps_old)) and > SPREADS x (max(reps_new) - min(reps_new)). The spread is the full range of the
  repetitions, not the interquartile range; the factor is there because the repetitions of one run share the
  machine's state, so two runs differ by more than one run's repetitions do: five reruns of tiny and mlp-deep
  (16 policies) on this 2-core machine at load 13-17 differed, over all 320 ordered pairs, by up to 1.76 times the
  larger spread (mlp-deep/recursive: +63.0% in one run, +68-75% in the others), so a factor of 1 flagged 7 of
  them and 2 flags none. Both runs must have MIN_REPETITIONS repetitions and ran on the same CPU model (the bench
  context's "cpu"), else the time is listed but not judged: another CPU changes what an op costs.

A baseline that is not such a file, has another version, or lacks a case this run benchmarks is bad input (one
line, exit 2). Policies new in this run are listed as new; cases or policies gone are listed as gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from .report_format import DocBlock

if TYPE_CHECKING:
    from .report_model import Report
import json
import os

from .report_data import BadInput, load_json
from .report_format import fmt_bytes

FORMAT = "ckptcheck-runs"
VERSION = 1
FILE = "runs.json"
MIN_REPETITIONS = 3
SPREADS = 2.0  # how many times each run's spread a time overhead must grow by to be a regression
EXACT = (
    ("peak_activation_bytes", "peak activation"),
    ("forward_evals", "forward evaluations"),
    ("flops_forward", "forward FLOPs"),
    ("flops_recompute", "recompute FLOPs"),
    ("flops_backward", "backward FLOPs"),
)
CONTEXT = ("git_commit", "ckpt_mode", "cpu", "num_cpus", "date")


def runs_doc(rep: Report) -> dict[str, Any]:
    """This report's runs as the next report's baseline (deterministic: the bench JSON's order)."""
    runs = []
    for r in rep.all_rows():
        runs.append(
            {
                "case": r.case,
                "policy": r.display,
                "peak_activation_bytes": r.peak,
                "forward_evals": r.forward_evals,
                "flops_forward": r.flops_forward,
                "flops_recompute": r.flops_recompute,
                "flops_backward": r.flops_backward,
                "flop_overhead": r.flop_overhead,
                "time_overhead": r.time_ratio - 1.0,
                "time_overhead_repetitions": [x - 1.0 for x in r.time_repetitions],
            }
        )
    ctx = {k: rep.bench.context[k] for k in CONTEXT if k in rep.bench.context}
    return {"format": FORMAT, "version": VERSION, "context": ctx, "runs": runs}


def runs_text(rep: Report) -> str:
    """runs_doc as the text of DIR/runs.json."""
    return json.dumps(runs_doc(rep), indent=1) + "\n"


def _fail(path: str, what: str) -> NoReturn:
    raise BadInput(f"baseline '{path}': {what}")


def _check_run(path: str, i: int, r: Any) -> None:
    if not isinstance(r, dict) or not isinstance(r.get("case"), str) or not isinstance(r.get("policy"), str):
        _fail(path, f"runs[{i}]: needs a string case and policy")
    for key, _ in EXACT:
        v = r.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            _fail(path, f"runs[{i}].{key}: must be a non-negative integer")
    reps = r.get("time_overhead_repetitions")
    if (
        not isinstance(r.get("time_overhead"), (int, float))
        or not isinstance(reps, list)
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in reps)
    ):
        _fail(path, f"runs[{i}]: time_overhead must be a number and time_overhead_repetitions a list of numbers")


def load(directory: str) -> dict[str, Any]:
    """The baseline run of DIR/runs.json (a previous report's --out), checked; BadInput naming what is wrong."""
    path = os.path.join(directory, FILE)
    if not os.path.isfile(path):
        raise BadInput(f"baseline '{directory}': no {FILE} (give the --out directory of an earlier `ckptcheck report`)")
    doc = load_json(path, "baseline")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        stated = doc.get("format") if isinstance(doc, dict) else None
        _fail(path, f'not a "{FORMAT}" file (format {json.dumps(stated)})')
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        _fail(path, f"version {json.dumps(doc.get('version'))}, this report reads version {VERSION}")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        _fail(path, "'runs' must be a list")
    for i, r in enumerate(runs):
        _check_run(path, i, r)
    if not isinstance(doc.get("context", {}), dict):
        _fail(path, "'context' must be an object")
    doc["path"] = path
    return doc


class Change:
    """One case x policy in both runs: what changed, and whether it is a regression."""

    def __init__(self, old: dict[str, Any], new: dict[str, Any], same_cpu: bool) -> None:
        self.case, self.policy = new["case"], new["policy"]
        self.old, self.new = old, new
        self.exact = [(label, old[k], new[k]) for k, label in EXACT if old[k] != new[k]]
        self.delta = new["time_overhead"] - old["time_overhead"]
        self.spread_old = _spread(old["time_overhead_repetitions"])
        self.spread_new = _spread(new["time_overhead_repetitions"])
        judged = same_cpu and self.spread_old is not None and self.spread_new is not None
        self.time_judged = judged
        self.time_slower = judged and self.delta > SPREADS * max(self.spread_old, self.spread_new)
        self.time_faster = judged and -self.delta > SPREADS * max(self.spread_old, self.spread_new)

    @property
    def regressions(self) -> list[str]:
        """What got worse, one text each: an exact figure that grew, a time overhead past the spreads."""
        out = [f"{label} {fmt_exact(label, a)} -> {fmt_exact(label, b)}" for label, a, b in self.exact if b > a]
        if self.time_slower:
            out.append(
                f"time overhead {pct(self.old['time_overhead'])} -> {pct(self.new['time_overhead'])} "
                f"(+{100 * self.delta:.1f} points; spreads {100 * self.spread_old:.1f} and "
                f"{100 * self.spread_new:.1f} points)"
            )
        return out

    @property
    def changed(self) -> bool:
        """Whether an exact figure changed or the time moved past the spreads either way."""
        return bool(self.exact) or self.time_slower or self.time_faster


def _spread(reps: list[float]) -> float | None:
    return max(reps) - min(reps) if len(reps) >= MIN_REPETITIONS else None


def pct(x: float) -> str:
    """A signed percentage, one decimal."""
    return f"{100 * x:+.1f}%"


def fmt_exact(label: str, v: int) -> str:
    """An exact figure as the regression text shows it (a peak in bytes and units)."""
    return f"{fmt_bytes(v)} ({v} bytes)" if label == "peak activation" else str(v)


class Comparison:
    """A run (runs_doc) against a baseline (load): the changes of the runs in both, the runs new and gone."""

    def __init__(self, baseline: dict[str, Any], current: dict[str, Any]) -> None:
        self.baseline = baseline
        self.current = current
        old = {(r["case"], r["policy"]): r for r in baseline["runs"]}
        new = {(r["case"], r["policy"]): r for r in current["runs"]}
        old_cases = {c for c, _ in old}
        missing = sorted({c for c, _ in new} - old_cases)
        if missing:
            _fail(
                baseline["path"],
                f"has no runs of case {', '.join(missing)} (benchmarked with another catalogue or "
                f"filter? refresh the baseline)",
            )
        cpus = (baseline.get("context", {}).get("cpu"), current.get("context", {}).get("cpu"))
        self.same_cpu = cpus[0] == cpus[1]
        self.changes = [Change(old[k], new[k], self.same_cpu) for k in new if k in old]
        self.added = [k for k in new if k not in old]
        self.gone = [k for k in old if k not in new]

    @property
    def regressed(self) -> list[Change]:
        """The compared runs with a regression."""
        return [c for c in self.changes if c.regressions]


RULE = (
    "Peak activation bytes, forward evaluations and FLOPs are exact: any change is listed, an increase is a "
    "regression. The time overhead is a regression only when its median over repetitions grew by more than "
    f"{SPREADS:g} times the spread (largest − smallest repetition) of each run: two runs differ by more than one "
    "run's repetitions do, and an unchanged rerun on a busy machine is not a regression. Runs of fewer than "
    f"{MIN_REPETITIONS} repetitions, or on another CPU model, are listed, not judged."
)
HEADER = [
    "case",
    "policy",
    "change",
    "peak activation",
    "forward evals",
    "FLOP overhead",
    "time overhead before",
    "time overhead after",
    "spreads (points)",
]


def _row(c: Change) -> list[str]:
    o, n = c.old, c.new
    mark = "REGRESSION" if c.regressions else ("improved" if c.changed else "same")
    peak = (
        fmt_bytes(n["peak_activation_bytes"])
        if o["peak_activation_bytes"] == n["peak_activation_bytes"]
        else f"{o['peak_activation_bytes']} → {n['peak_activation_bytes']} bytes"
    )
    evals = (
        str(n["forward_evals"])
        if o["forward_evals"] == n["forward_evals"]
        else f"{o['forward_evals']} → {n['forward_evals']}"
    )
    flops = (
        f"{o['flop_overhead']:.4f}"
        if o["flop_overhead"] == n["flop_overhead"]
        else f"{o['flop_overhead']:.4f} → {n['flop_overhead']:.4f}"
    )
    spreads = "—" if not c.time_judged else f"{100 * c.spread_old:.1f} / {100 * c.spread_new:.1f}"
    return [c.case, c.policy, mark, peak, evals, flops, pct(o["time_overhead"]), pct(n["time_overhead"]), spreads]


def summary_line(cmp: Comparison) -> str:
    """One line: what was compared, the regressions named, improvements, new and gone runs."""
    ctx = cmp.baseline.get("context", {})
    base = f"baseline {ctx.get('git_commit', '?')}" + (f" ({ctx['date']})" if "date" in ctx else "")
    reg = cmp.regressed
    s = f"Against the {base}: {len(cmp.changes)} case × policy runs compared, "
    s += (
        f"**{len(reg)} regressed**: " + "; ".join(f"{c.case}/{c.policy}: {', '.join(c.regressions)}" for c in reg)
        if reg
        else "no regression"
    )
    changed = [c for c in cmp.changes if c.changed and not c.regressions]
    if changed:
        s += f"; {len(changed)} improved"
    if cmp.added:
        s += f"; new (no baseline): {', '.join(f'{c}/{p}' for c, p in cmp.added)}"
    if not cmp.same_cpu:
        s += (
            f"; time not judged: the baseline ran on {ctx.get('cpu', '?')}, this run on "
            f"{cmp.current.get('context', {}).get('cpu', '?')}"
        )
    if cmp.gone:
        s += f"; gone since the baseline: {', '.join(f'{c}/{p}' for c, p in cmp.gone)}"
    return s + "."


def blocks(cmp: Comparison) -> list[DocBlock]:
    """The report's section: the verdict, the rule, and every run that changed (all runs in a collapsed table)."""
    changed = [c for c in cmp.changes if c.changed]
    d = [("h2", "Changes since the baseline"), ("p", summary_line(cmp)), ("p", RULE)]
    if changed:
        d.append(("table", HEADER, [_row(c) for c in changed], change_class))
    d.append(
        (
            "details",
            f"All {len(cmp.changes)} compared runs",
            [("table", HEADER, [_row(c) for c in cmp.changes], change_class)],
        )
    )
    return d


def change_class(column: str, c: str) -> str:
    """The CSS class of a comparison cell: bad (regression), good (improved) or none."""
    if column == "change":
        return "bad" if c == "REGRESSION" else ("good" if c == "improved" else "")
    return ""


def _xml(s: Any) -> str:
    s = "".join(ch if ch in "\t\n\r" or ord(ch) >= 0x20 else "?" for ch in str(s))
    return (
        s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&apos;")
    )


def junit(cmp: Comparison) -> str:
    """The comparison as JUnit, in the shape of harness/text_format.cpp's junitXml (verify's and validate's): one
    test case per case x policy, a failure per regression, new runs skipped."""
    cases = []
    for c in cmp.changes:
        body = ""
        if c.regressions:
            msg = "; ".join(c.regressions)
            body = f'      <failure message="{_xml(msg)}" type="regression">{_xml(msg)}</failure>\n'
        cases.append((c.case, c.policy, body))
    for case, policy in cmp.added:
        cases.append((case, policy, '      <skipped message="no baseline run of this policy"/>\n'))
    failures = sum(1 for c in cmp.changes if c.regressions)
    name = "ckptcheck overhead vs baseline"
    counts = f'tests="{len(cases)}" failures="{failures}" errors="0"'
    ctx_old, ctx_new = cmp.baseline.get("context", {}), cmp.current.get("context", {})
    props = [
        ("baseline_commit", ctx_old.get("git_commit", "")),
        ("commit", ctx_new.get("git_commit", "")),
        ("rule", RULE),
    ]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="{name}" {counts} time="0.000">',
        f'  <testsuite name="{name}" {counts} skipped="{len(cmp.added)}" time="0.000">',
        "    <properties>",
    ]
    out += [f'      <property name="{_xml(k)}" value="{_xml(v)}"/>' for k, v in props]
    out.append("    </properties>")
    for case, policy, body in cases:
        out.append(f'    <testcase classname="ckptcheck.overhead.{_xml(case)}" name="{_xml(policy)}" time="0">')
        if body:
            out.append(body.rstrip("\n"))
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"
