"""The report's tables (reports/make_report.py): per case x policy, engine tax per policy, full recomputation,
planner scaling, the run's context and other frameworks side by side; rows of strings both renderers share, and the
cell classes the HTML colours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report_model import Report
import statistics

from .report_data import ENGINE_TAX_GOAL, FULL_RECOMPUTE_THEORY, StepRow, median_of
from .report_format import evals_text, fmt_bytes, fmt_overhead, fmt_pct, fmt_ratio, fmt_tax, fmt_time, opt_tax

STEP_HEADER = [
    "policy",
    "peak activation",
    "bytes",
    "× store-all",
    "forward evals",
    "FLOP overhead",
    "time ratio (IQR)",
    "engine tax",
    "recomputed ops",
    "rest",
    "frontier",
    "bitwise",
]


def step_cells(rep: Report, r: StepRow) -> list[str]:
    """A step row's cells (STEP_HEADER's columns)."""
    flag = rep.frontier_status(r)[1] if rep.frontier.get(r.case) else None
    frontier = {True: "on", False: "off", None: "—"}[flag]
    bitwise = r.verdict if r.verdict is not None else "—"
    if not r.planned_ok:
        bitwise += " (measured ≠ planned)"
    name = r.display + (" (full recompute)" if r.is_full_recompute else "")
    return [
        name,
        fmt_bytes(r.peak),
        str(r.peak),
        fmt_ratio(r.memory_ratio),
        evals_text(r),
        fmt_overhead(r.flop_overhead),
        f"{fmt_ratio(r.time_ratio)} ({fmt_ratio(r.q1)}–{fmt_ratio(r.q3)})",
        fmt_tax(r.engine_tax),
        opt_tax(r.op_cost_tax),
        opt_tax(r.rest_tax),
        frontier,
        bitwise,
    ]


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; | and newlines in cells escaped."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", "<br>") for c in row) + " |")
    return "\n".join(out)


def case_summary(rep: Report, case: str) -> str:
    """Sentences with numbers: where the frontier runs and which policy is on it at which budget. Numbers in
    brackets are FLOP overheads."""
    rows = rep.steps.get(case, [])
    pts = rep.frontier.get(case, [])
    parts = []
    head = []
    if rows:
        head.append(f"{rows[0].layers} blocks, store-all {fmt_bytes(rows[0].store_all_peak)}")
    if pts:
        least = pts[0]
        share = f" ({fmt_pct(least.budget / least.store_all_peak)} of store-all)" if least.store_all_peak else ""
        head.append(
            f"the optimal frontier runs from {fmt_bytes(least.budget)}{share} at "
            f"{fmt_overhead(least.flop_overhead)} to no recompute at {fmt_bytes(pts[-1].budget)}"
        )
        free = next((p for p in pts if p.flops_recompute == 0), None)
        if free is not None and free.store_all_peak and free.budget < free.store_all_peak:
            head.append(f"recompute is free from {fmt_bytes(free.budget)}")
    if head:
        parts.append("; ".join(head) + ".")
    on, below, off = [], [], []
    for r in rows if pts else []:
        opt, exact = rep.optimal_at(r.case, r.peak)
        if opt is None:
            continue
        item = f"{r.display} at {fmt_bytes(r.peak)} ({fmt_overhead(r.flop_overhead)}"
        if r.flops_recompute == opt.flops_recompute and exact:
            on.append(item + ")")
        elif r.flops_recompute < opt.flops_recompute:
            below.append(item + f" vs optimal's {fmt_overhead(opt.flop_overhead)})")
        else:
            off.append(item + f" vs optimal's {'≤ ' if not exact else ''}{fmt_overhead(opt.flop_overhead)})")
    if on:
        parts.append("On the frontier: " + ", ".join(on) + ".")
    if below:
        parts.append(
            "Below the block-level frontier (op-level recompute, outside the optimal DP's family): "
            + ", ".join(below)
            + "."
        )
    if off:
        parts.append("Off it, recomputing more than optimal at the same budget: " + ", ".join(off) + ".")
    return " ".join(parts)


def tax_rows(rep: Report) -> list[list[str]]:
    """Engine tax per policy family over the cases (TAX_HEADER's columns)."""
    out = []
    for fam, rs in rep.tax_by_policy().items():
        worst = max(rs, key=lambda r: r.engine_tax)
        ok = all(r.engine_tax <= ENGINE_TAX_GOAL for r in rs)
        out.append(
            [
                fam,
                str(len(rs)),
                fmt_tax(statistics.median([r.engine_tax for r in rs])),
                f"{fmt_tax(worst.engine_tax)} ({worst.case})",
                "yes" if ok else "no",
                opt_tax(median_of([r.op_cost_tax for r in rs])),
                opt_tax(median_of([r.rest_tax for r in rs])),
            ]
        )
    return out


TAX_HEADER = [
    "policy",
    "cases",
    "median engine tax",
    "worst (case)",
    f"≤ {ENGINE_TAX_GOAL} everywhere",
    "median recomputed-ops part",
    "median rest",
]

TAX_NOTE = (
    "The engine tax splits exactly in two. bench_engine clocks, in separate instrumented steps, the time spent "
    "inside the forward calls of recomputed ops (share *s* of the policy's step). *Recomputed ops* = time "
    "ratio × s − FLOP overhead: what the recomputation costs beyond its FLOP share, because element-wise ops "
    "(Philox dropout, libm GELU/tanh, attention's softmax) take far more time per FLOP than the matrix "
    "products that dominate the FLOP count. *Rest* = time ratio × (1 − s) − 1: everything else the step "
    "spends beyond the reference step — the executor's bookkeeping, allocation and page faults, and cache "
    "effects (a recomputed tape is hot in cache when its backward runs, which can make this negative). The "
    "store-all row runs the reference's own instructions through the executor: its tax is the executor's "
    "fixed cost."
)


def full_recompute_rows(rep: Report) -> list[list[str]]:
    """Full recomputation per case against its theory (FULL_HEADER's columns)."""
    out = []
    for r in rep.all_rows():
        if r.is_full_recompute:
            ops = "—" if r.recompute_share is None else fmt_pct(r.time_ratio * r.recompute_share)
            out.append(
                [
                    r.case,
                    fmt_pct(r.time_ratio - 1.0),
                    ops,
                    fmt_pct(r.flop_overhead),
                    fmt_pct(FULL_RECOMPUTE_THEORY),
                    fmt_tax(r.engine_tax),
                ]
            )
    return out


FULL_HEADER = [
    "case",
    "measured overhead",
    "time in recomputed ops",
    "FLOP overhead (this model)",
    "textbook theory",
    "engine tax",
]


def recompute_kind_rows(rep: Report) -> list[list[str]]:
    """Recompute time and FLOP share per op kind (KIND_HEADER's columns)."""
    """Per case, the full-recompute row's recompute time and FLOPs per op kind."""
    out = []
    for r in rep.all_rows():
        if not r.is_full_recompute or not r.recompute_kinds:
            continue
        for kind, (t, f) in sorted(r.recompute_kinds.items(), key=lambda kv: -kv[1][0]):
            per = f"{t / f:.1f}" if f > 0 else "—"
            out.append([r.case, kind, fmt_pct(t), fmt_pct(f), per])
    return out


KIND_HEADER = [
    "case",
    "op kind",
    "recompute time (% of reference step)",
    "recompute FLOPs (% of step FLOPs)",
    "time ÷ FLOP share",
]


def planner_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of planning time per planner family and chain length."""
    layers = sorted({p.layers for pts in rep.planner.values() for p in pts})
    fams = list(rep.planner)
    rows = []
    for L in layers:
        row = [str(L)]
        for f in fams:
            p = next((p for p in rep.planner[f] if p.layers == L), None)
            row.append(f"{fmt_bytes(p.peak)} / {p.forward_evals} / {fmt_time(p.seconds)}" if p else "—")
        rows.append(row)
    return ["L"] + fams, rows


def context_lines(rep: Report) -> list[str]:
    """The benchmark run's context, one item each: commit, mode, compiler, build, CPU, cores, then the load."""
    c = rep.bench.context
    keys = [
        ("git_commit", "commit"),
        ("ckpt_mode", "benchmark mode"),
        ("compiler", "compiler"),
        ("build_type", "build"),
        ("cpu", "CPU"),
        ("num_cpus", "cores"),
    ]
    out = [f"{label}: {c[k]}" for k, label in keys if k in c]
    load = c.get("load_avg")
    if isinstance(load, list) and load:
        cores = c.get("num_cpus") or 1
        note = f"load average at start: {', '.join(f'{x:.2f}' for x in load)}"
        if load[0] > cores:
            note += (
                f" (above the {cores} cores: other work shared the machine; steps are timed in thread CPU time "
                f"and interleaved, which cancels being descheduled and slow drift, but not the cache and memory "
                f"bandwidth other work takes, so ratios are noisier than on an idle machine)"
            )
        out.append(note)
    return out


FRAMEWORK_HEADER = [
    "case",
    "blocks",
    "K",
    "framework",
    "options",
    "plain ms",
    "checkpointed ms",
    "overhead",
    "bitwise",
    "ckptcheck policy",
    "reference ms",
    "engine ms",
    "ckptcheck overhead",
]


def framework_rows(rep: Report) -> list[list[str]]:
    """Other frameworks side by side (FRAMEWORK_HEADER's columns)."""
    return [
        [
            r.case,
            str(r.blocks),
            str(r.segments),
            r.framework,
            r.options or "-",
            f"{r.fw_plain:.2f}",
            f"{r.fw_ckpt:.2f}",
            fmt_overhead(r.fw_overhead),
            "equal" if r.fw_bitwise else "DIFFERS",
            r.policy,
            f"{r.ck_plain:.2f}",
            f"{r.ck_ckpt:.2f}",
            fmt_overhead(r.ck_overhead),
        ]
        for r in rep.frameworks
    ]


def step_class(column: str, c: str) -> str:
    """The CSS class of a step table cell: bad (differs, tax over the goal), good (equal) or none."""
    if column == "bitwise":
        return "bad" if "DIFFERS" in c or "≠" in c else ("good" if c == "equal" else "")
    if column in ("engine tax", "rest"):
        try:
            return "bad" if float(c) > ENGINE_TAX_GOAL else ""
        except ValueError:
            return ""
    return ""


def tax_class(column: str, c: str) -> str:
    """The CSS class of a tax table cell: bad where the goal is missed."""
    return "bad" if column.startswith("≤") and c == "no" else ""
