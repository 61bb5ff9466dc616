#!/usr/bin/env python3
"""The overhead report: bench_engine's Google Benchmark JSON (and optionally `ckptcheck verify --json`) into
DIR/report.md, a self-contained DIR/report.html and the figures (DIR/fig-*.svg, embedded in the HTML). The plans
`ckptcheck report --costs` makes for a profiled model (--costs-plans, costs_report.py) add a predicted section
each, with or without any --bench.

`ckptcheck report` runs this module; it can also be run directly, from the source root (the `reports` package):
    /usr/bin/python3 -m reports.make_report [--bench bench.json ...] [--verify verify.json]
        [--costs-plans plans.json ...] --out DIR [--print-summary]

Deterministic: the same inputs give byte-identical outputs (no timestamps, fixed SVG ids and metadata, inputs
read in order). Every file is written to a temporary name and renamed into place. The inputs are read by
report_data.py and the figures drawn by report_figures.py, modules of this package.
Exit codes as ckptcheck's: 0 written, 1 written but --check found a failed verification, 2 bad input (one line
naming what), 3 missing dependency or I/O error.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

from . import (
    baseline,
    costs_figures,
    costs_report,
    overview,
    plan_checks,
    report_html,
    report_markdown,
    time_model,
    user_models,
)
from .atomic_write import write_atomic
from .report_data import ENGINE_TAX_GOAL, FULL_RECOMPUTE_THEORY, BadInput, Bench, Frameworks, Verify, load_json
from .report_figures import figures
from .report_format import DocBlock, Figure, evals_text, fmt_bytes, fmt_overhead, fmt_pct, fmt_ratio, fmt_tax, opt_tax
from .report_model import Report
from .report_tables import (
    FRAMEWORK_HEADER,
    FULL_HEADER,
    KIND_HEADER,
    STEP_HEADER,
    TAX_HEADER,
    TAX_NOTE,
    case_summary,
    context_lines,
    framework_rows,
    full_recompute_rows,
    planner_rows,
    recompute_kind_rows,
    step_cells,
    step_class,
    tax_class,
    tax_rows,
)

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3


# ---------------------------------------------------------------------------------------------------------------
# Verdicts: each BM_Step run checks its own step bitwise (counter bitwise_equal); `ckptcheck verify --json` adds
# every step, every property, random cases, and a finding when one breaks.


# ---------------------------------------------------------------------------------------------------------------
# Text: tables and the summary


def cost_lines(rep: Report) -> list[str]:
    """Where the time goes, one line each: the engine tax, the time model, full recomputation."""
    lines = []
    rows = list(rep.all_rows())
    if rows:
        worst = max(rows, key=lambda r: r.engine_tax)
        over = [r for r in rows if r.engine_tax > ENGINE_TAX_GOAL]
        s = (
            f"Engine tax over {len(rows)} case × policy runs: median "
            f"{fmt_tax(statistics.median([r.engine_tax for r in rows]))}, worst {fmt_tax(worst.engine_tax)} "
            f"({worst.display} on {worst.case}); goal ≤ {ENGINE_TAX_GOAL}: "
            + ("met everywhere." if not over else f"not met in {len(over)} of {len(rows)}.")
        )
        ops = [r.op_cost_tax for r in rows if r.op_cost_tax is not None]
        if ops:
            rest = [r.rest_tax for r in rows if r.rest_tax is not None]
            store = [r for r in rows if r.policy == "store-all"]
            s += (
                " Split: recomputed ops costing more time than their FLOP share, "
                f"median {fmt_tax(statistics.median(ops))}; "
                f"everything else (executor, allocation, cache), median {fmt_tax(statistics.median(rest))}"
            )
            if store:
                s += "; the executor running store-all's own schedule: " + ", ".join(
                    f"{fmt_tax(r.engine_tax)} ({r.case})" for r in store
                )
            s += "."
        lines.append(s)
    tm = time_model.time_model_headline(rep.steps)
    if tm:
        lines.append(tm)
    fr = [r for r in rows if r.is_full_recompute]
    if fr:
        lines.append(
            "Full recomputation (a checkpoint at every block boundary, every block recomputed once) costs "
            + ", ".join(f"{fmt_pct(r.time_ratio - 1.0)} on {r.case} (FLOPs: {fmt_pct(r.flop_overhead)})" for r in fr)
            + f", against the textbook {fmt_pct(FULL_RECOMPUTE_THEORY)}."
        )
    return lines


def check_lines(rep: Report) -> list[str]:
    """Whether what was measured can be trusted: bitwise verdicts, verify, measured against planned."""
    lines = []
    rows = list(rep.all_rows())
    checked = [r for r in rows if r.verdict is not None]
    if checked:
        differs = [r for r in checked if r.verdict.startswith("DIFFERS")]
        s = (
            f"Bitwise: {len(checked) - len(differs)} of {len(checked)} benchmarked case × policy steps equal to the "
            "reference"
        )
        s += (", DIFFERS: " + ", ".join(f"{r.case}/{r.display}" for r in differs) + ".") if differs else "."
        lines.append(s)
    if rep.verify is not None:
        lines.append(rep.verify.summary_line())
    bad = [r for r in rows if not r.planned_ok]
    if bad:
        lines.append("Measured ≠ planned in: " + ", ".join(f"{r.case}/{r.display}" for r in bad) + ".")
    return lines


def findings_lines(rep: Report) -> list[str]:
    """One line per verify finding: property, origin, policy, message, replay (none without a verify JSON)."""
    out = []
    if rep.verify is None:
        return out
    for f in rep.verify.findings:
        parts = [
            f"property {f.get('property', '?')} ({f.get('property_id', '')})",
            str(f.get("origin", "")),
            f"policy {f.get('policy', '?')}",
            str(f.get("message", "")),
        ]
        if f.get("replay"):
            parts.append(f"replay: {f['replay']}")
        out.append("; ".join(p for p in parts if p))
    return out


DEFINITIONS = (
    "The words used from here on: *FLOP overhead* = recompute FLOPs / (forward + backward FLOPs of the "
    "store-all step), what recomputation costs if time followed FLOPs; *time ratio* = policy step time / "
    "reference store-all step time (thread CPU time, median over repetitions of interleaved steps; IQR in "
    "brackets), so the step time paid is time ratio − 1; *engine tax* = time ratio − (1 + FLOP "
    "overhead), what a policy costs beyond its FLOPs, split into *recomputed ops* (their time beyond "
    "their FLOP share) and *rest* (everything else: executor, allocation, cache; see Engine tax per "
    "policy); *time-model tax* = measured − predicted time overhead, the prediction coming from the "
    "store-all step's own per-op times (see the time model's section); *frontier*: on = no more recompute "
    "than the optimal policy at the same budget; *bitwise*: loss, every gradient and all state after the "
    "step bitwise equal to the reference (the bench's own step and, when given, `ckptcheck verify`)."
)
FRONTIER_NOTE = (
    "Which policy is on the memory/recompute frontier at which budget (FLOP overheads in brackets; the "
    "optimal policy at a policy's own peak is the comparison), and every policy's measured numbers."
)


def case_blocks(rep: Report) -> list[DocBlock]:
    """One section per benchmarked case: its summary sentences and its step table."""
    d = []
    for case in rep.cases:
        inner = []
        text = case_summary(rep, case)
        if text:
            inner.append(("p", text))
        rows = rep.steps.get(case, [])
        if rows:
            inner.append(("table", STEP_HEADER, [step_cells(rep, r) for r in rows], step_class))
        if inner:
            d.append(("details", f"**{case}**" + (f": {len(rows)} policies" if rows else ""), inner))
    return [("h2", "Per case"), ("p", FRONTIER_NOTE)] + d if d else []


def analysis_blocks(rep: Report) -> list[DocBlock]:
    """The engine tax, the time model and full recomputation: tables collapsed under their summary lines."""
    d = []
    if rep.steps:
        d += [
            ("h2", "Engine tax per policy"),
            ("details", "The table", [("table", TAX_HEADER, tax_rows(rep), tax_class), ("p", TAX_NOTE)]),
        ]
    tm = time_model.time_model_rows(rep.steps)
    if tm:
        d += [
            ("h2", "Time model: predicted vs measured time overhead"),
            ("p", time_model.time_model_headline(rep.steps)),
            (
                "details",
                "Per case × policy, with the tax split",
                [("table", time_model.TIME_MODEL_HEADER, tm, None), ("p", time_model.TIME_MODEL_NOTE)],
            ),
        ]
        weights = time_model.weights_rows(rep.steps)
        if weights:
            d += [("details", "The fitted weights per case", [("table", time_model.WEIGHTS_HEADER, weights, None)])]
    fr = full_recompute_rows(rep)
    if fr:
        d += [
            ("h2", "Full recomputation vs the 33% theory"),
            ("table", FULL_HEADER, fr, None),
            (
                "p",
                "The textbook 33% assumes a backward costs twice a forward and time follows FLOPs; the FLOP column "
                "is this model's own ratio, *time in recomputed ops* what recomputing its blocks took, in "
                "reference steps.",
            ),
        ]
        kinds = recompute_kind_rows(rep)
        if kinds:
            d.append(
                (
                    "details",
                    "Where full recomputation's time goes, per op kind",
                    [
                        ("table", KIND_HEADER, kinds, None),
                        (
                            "p",
                            "A time ÷ FLOP share above 1 means the op kind costs more time per FLOP than the step's "
                            "average, so recomputing it costs more than its FLOPs predict.",
                        ),
                    ],
                )
            )
    if rep.planner:
        header, rows = planner_rows(rep)
        d += [
            ("h2", "Planner scaling"),
            (
                "details",
                "Homogeneous chains, planner only. Each cell: peak activation / forward evaluations / "
                "planner run time (schedule + plan).",
                [("table", header, rows, None)],
            ),
        ]
    return d


def other_blocks(rep: Report) -> list[DocBlock]:
    """The sections of other frameworks side by side and of the user's own models (each only when given)."""
    d = []
    if rep.frameworks:
        d += [
            ("h2", "Side by side with other frameworks"),
            (
                "p",
                "The same case and segmenting, timed in the same run on this machine: the framework's own plain "
                "and checkpointed steps (through its adapter), and ckptcheck's store-all reference and "
                "`uniform:k=K` engine. Step times are the fastest of 3 rounds of each run's median step. "
                "*bitwise* says whether the framework's checkpointed run equalled its plain one.",
            ),
            ("table", FRAMEWORK_HEADER, framework_rows(rep), None),
            ("h3", "Reference step vs the framework's step"),
            ("p", time_model.SPEED_NOTE),
            ("table", time_model.SPEED_HEADER, time_model.speed_rows(rep.frameworks), None),
        ]
    if rep.user_models:
        d += [
            ("h2", "Your own models: plain vs checkpointed"),
            ("p", user_models.NOTE),
            ("table", user_models.HEADER, user_models.cells(rep.user_models, fmt_bytes), None),
        ]
    for plans in rep.costs:
        d += costs_report.section_blocks(plans)
    return d


def document(
    rep: Report, figs: list[Figure], summary_fig: Figure | None = None, comparison: baseline.Comparison | None = None
) -> list[DocBlock]:
    """The report as blocks both renderers share: (kind, ...) with kind h1, h2, h3, p, ul, table, figure and
    details (a summary line and the blocks it folds). The first screen answers what checkpointing saves and costs
    (overview.py); the jargon, the per-case tables and the time model follow, collapsed where they are long."""
    d = [("h1", "ckptcheck overhead report")] + overview.blocks(rep, summary_fig)
    checks = check_lines(rep)
    if checks:
        d.append(("ul", checks))
    if comparison is not None:
        d += baseline.blocks(comparison)
    costs = cost_lines(rep) + costs_report.summary_lines(rep.costs)
    if costs:
        d += [("h2", "Where the time goes")] + ([("p", DEFINITIONS)] if rep.has_bench else []) + [("ul", costs)]
    d += case_blocks(rep) + analysis_blocks(rep) + other_blocks(rep)
    if figs:
        d.append(("h2", "Figures"))
    for name, title, caption, svg in figs:
        d.append(("figure", name, title, caption, svg))
    fl = findings_lines(rep)
    if fl:
        d += [("h2", "Findings"), ("ul", fl)]
    if rep.bench.errors:
        d += [("h2", "Benchmarks that reported an error"), ("ul", [f"{n}: {m}" for n, m in rep.bench.errors])]
    if rep.has_bench:
        d += [("h2", "Run"), ("ul", context_lines(rep))]
    return d


def terminal_table(rep: Report) -> str:
    """--print-summary's text: a table of every step row, each subject in plain words, the cost and check lines."""
    header = [
        "case",
        "policy",
        "peak",
        "×store-all",
        "fwd evals",
        "FLOP ovh",
        "time ratio",
        "engine tax",
        "ops",
        "rest",
        "bitwise",
    ]
    rows = []
    for r in rep.all_rows():
        rows.append(
            [
                r.case,
                r.display,
                fmt_bytes(r.peak),
                fmt_ratio(r.memory_ratio),
                evals_text(r),
                fmt_overhead(r.flop_overhead),
                fmt_ratio(r.time_ratio),
                fmt_tax(r.engine_tax),
                opt_tax(r.op_cost_tax),
                opt_tax(r.rest_tax),
                (r.verdict or "—") + ("" if r.planned_ok else " (measured≠planned)"),
            ]
        )
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(widths[i]) if i < 2 or i == len(cells) - 1 else c.rjust(widths[i]) for i, c in enumerate(cells)
        ).rstrip()

    out = [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]
    words = [f"{sub.name}: {overview.sentence(sub)}" for sub in overview.subjects(rep)]
    return "\n".join(out + [""] + words + [re.sub(r"[*`]", "", line) for line in cost_lines(rep) + check_lines(rep)])


def main(argv: list[str]) -> int:
    """`ckptcheck report`'s entry: parse argv, read the inputs, write the report; the exit code (EXIT_*)."""
    ap = argparse.ArgumentParser(description="ckptcheck overhead report")
    ap.add_argument("--bench", action="append", default=[], help="bench_engine JSON (repeatable)")
    ap.add_argument("--verify", help="ckptcheck verify --json output")
    ap.add_argument(
        "--frameworks",
        action="append",
        default=[],
        help="ckptcheck validate --timing-case ... --json output (repeatable)",
    )
    ap.add_argument(
        "--costs-plans",
        action="append",
        default=[],
        help="`ckptcheck report --costs` plans of a profiled model (repeatable; no --bench needed)",
    )
    ap.add_argument(
        "--plan-loop",
        action="append",
        default=[],
        help="check_plan_loop.py's plan-loop.json: a profiled model's placements applied and checked",
    )
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--print-summary", action="store_true", help="print the per-case summary table")
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="compare with an earlier report's runs (DIR/runs.json): a section, exit 1 on a regression",
    )
    ap.add_argument("--junit", metavar="FILE", help="with --baseline: the comparison as a JUnit report")
    ap.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a benchmarked step is not bitwise equal, its measurements differ from the plan, "
        "a benchmark reported an error, or the verify JSON has a finding",
    )
    a = ap.parse_args(argv)
    try:
        if not a.bench and not a.costs_plans:
            raise BadInput("no input: give --bench (bench_engine JSON) or --costs-plans (ckptcheck report --costs)")
        bench = Bench()
        for b in a.bench:
            bench.add_file(b)
        verify = Verify(load_json(a.verify, "verify JSON"), a.verify) if a.verify else None
        frameworks = Frameworks()
        for f in a.frameworks:
            frameworks.add(load_json(f, "frameworks JSON"), f)
        costs = [costs_report.load(c) for c in a.costs_plans]
        costs_report.attach_checks(costs, [plan_checks.load(p) for p in a.plan_loop])
        rep = Report(bench, verify, frameworks, costs)
        if a.junit and not a.baseline:
            raise BadInput("--junit needs --baseline (the JUnit report is the comparison's)")
        comparison = baseline.Comparison(baseline.load(a.baseline), baseline.runs_doc(rep)) if a.baseline else None
    except BadInput as e:
        print(f"ckptcheck report: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        figs = figures(rep)
        summary_fig = overview.figure(rep)
        costs_figures.draw_figures(rep.costs)
        os.makedirs(a.out, exist_ok=True)
        for name, _, _, svg in figs + [c.figure for c in rep.costs] + ([summary_fig] if summary_fig else []):
            write_atomic(os.path.join(a.out, name + ".svg"), svg)
        blocks = document(rep, figs, summary_fig, comparison)
        write_atomic(os.path.join(a.out, "report.md"), report_markdown.render(blocks))
        write_atomic(os.path.join(a.out, "report.html"), report_html.render(blocks))
        if rep.steps:
            write_atomic(os.path.join(a.out, baseline.FILE), baseline.runs_text(rep))
        if a.junit:
            write_atomic(a.junit, baseline.junit(comparison))
    except BadInput as e:  # an output path that is not a regular file
        print(f"ckptcheck report: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, RuntimeError) as e:
        print(f"ckptcheck report: {e}", file=sys.stderr)
        return EXIT_INFRA
    if a.print_summary:
        lines = ([terminal_table(rep)] if rep.has_bench else []) + costs_report.terminal_lines(rep.costs)
        print("\n".join(lines))
    nfig = len(figs) + len(rep.costs) + (summary_fig is not None)
    print(
        f"ckptcheck report: wrote {os.path.join(a.out, 'report.md')} and {os.path.join(a.out, 'report.html')} "
        f"({nfig} figure{'' if nfig == 1 else 's'})",
        file=sys.stderr,
    )
    if comparison is not None and comparison.regressed:
        print(
            "ckptcheck report: regressions against the baseline: "
            + "; ".join(f"{c.case}/{c.policy}: {', '.join(c.regressions)}" for c in comparison.regressed),
            file=sys.stderr,
        )
    if a.check:
        failed = [
            f"{r.case}/{r.display}"
            for r in rep.all_rows()
            if (r.verdict or "").startswith("DIFFERS") or not r.planned_ok
        ]
        failed += [n for n, _ in bench.errors]
        if verify is not None and verify.findings:
            failed.append(f"{len(verify.findings)} verify finding(s)")
        if failed:
            print("ckptcheck report: verification failed: " + ", ".join(failed), file=sys.stderr)
            return EXIT_FINDING
    return EXIT_FINDING if comparison is not None and comparison.regressed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
