"""Two report sections (reports/make_report.py): the time model per case x policy (bench_engine's
predicted_time_overhead next to the measured one, bench/time_model.h says how it is predicted), and the
reference's plain step next to another framework's, both timed in one `ckptcheck validate --timing-case` run.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from .report_data import FrameworkRow, StepRow
from .report_format import fmt_overhead, fmt_ratio, fmt_tax, opt_tax

TIME_MODEL_TAX_GOAL = 0.03  # measured - predicted time overhead, on every catalogue case x policy
SPEED_RATIO_GOAL = 0.9  # reference plain step / framework plain step: the reference is to be faster

TIME_MODEL_HEADER = [
    "case",
    "policy",
    "FLOP overhead",
    "predicted time overhead",
    "measured time overhead (IQR)",
    "time-model tax",
    "of it: recomputed ops' own time",
    "of it: rest of the step",
    f"≤ {TIME_MODEL_TAX_GOAL}",
]

TIME_MODEL_NOTE = (
    "*predicted time overhead* = the CPU time of every op forward the policy recomputes (as often as it recomputes "
    "it, with or without saving a context as it does), each timed on the case's own inputs during instrumented "
    "store-all steps, ÷ the store-all step's time, plus what the policy's first forwards that keep nothing save by "
    "running in recycled memory, plus what its backwards save by finding a recomputed context in cache where "
    "store-all's is read from beyond the L2 cache (bench/time_model.h); "
    "the FLOP overhead weighs the same ops by FLOPs instead. *measured* = time ratio − 1 (median over "
    "repetitions, interquartile range in brackets). *time-model tax* = measured − predicted: what the policy costs "
    "beyond re-running those ops (executor bookkeeping, allocation, cache effects of another order of work). "
    "The tax splits in two by an instrumented run of the policy that clocks its recomputed op forwards "
    "(bench/recompute_profile.h): *recomputed ops' own time* = their measured time (time ratio × their share of the "
    "policy's step) − the predicted overhead, where the model misjudged the ops themselves (a recompute in a "
    "policy's small working set runs faster than the same op repeated inside a store-all step); *rest of the step* "
    "= everything else the policy's step spends beyond store-all's (its first forward and backward, executor, "
    "update): negative where the policy's smaller working set makes its own forward and backward faster than "
    "store-all's, more than the model's cache credits allow."
)


def predicted(row: StepRow) -> float | None:
    """The time model's predicted time overhead of a step row (None: not predicted)."""
    return row.predicted_time_overhead


def time_model_tax(row: StepRow) -> float | None:
    """Measured minus predicted time overhead (None: not predicted)."""
    p = predicted(row)
    return None if p is None else (row.time_ratio - 1.0) - p


def ops_error(row: StepRow) -> float | None:
    """The tax's part in the recomputed ops' own time: measured (time ratio × their share) − predicted."""
    p = predicted(row)
    return None if p is None or row.recompute_share is None else row.time_ratio * row.recompute_share - p


def time_model_rows(steps_by_case: dict[str, list[StepRow]]) -> list[list[str]]:
    """The time-model table (TIME_MODEL_HEADER's columns), rows with a prediction only."""
    out = []
    for case, rows in steps_by_case.items():
        for r in rows:
            tax = time_model_tax(r)
            if tax is None:
                continue
            out.append(
                [
                    case,
                    r.display,
                    fmt_overhead(r.flop_overhead),
                    fmt_overhead(predicted(r)),
                    f"{fmt_overhead(r.time_ratio - 1.0)} ({fmt_overhead(r.q1 - 1.0)}–{fmt_overhead(r.q3 - 1.0)})",
                    fmt_tax(tax),
                    opt_tax(ops_error(r)),
                    opt_tax(r.rest_tax),
                    "yes" if abs(tax) <= TIME_MODEL_TAX_GOAL else "no",
                ]
            )
    return out


def time_model_headline(steps_by_case: dict[str, list[StepRow]]) -> str | None:
    """The section's one-line result over every predicted row; None when no row has a prediction."""
    """One summary line, or None when the benchmark JSON has no time model (older bench_engine)."""
    rows = [r for rs in steps_by_case.values() for r in rs if time_model_tax(r) is not None]
    if not rows:
        return None
    taxes = [time_model_tax(r) for r in rows]
    worst = max(rows, key=lambda r: abs(time_model_tax(r)))
    within = sum(1 for t in taxes if abs(t) <= TIME_MODEL_TAX_GOAL)
    misses = [r for r in rows if abs(time_model_tax(r)) > TIME_MODEL_TAX_GOAL and ops_error(r) is not None]
    ops_led = sum(1 for r in misses if abs(ops_error(r)) > abs(r.rest_tax))
    split = (
        f" Of the {len(misses)} outside, {ops_led} mostly in the recomputed ops' own time, "
        f"{len(misses) - ops_led} mostly in the rest of the step."
        if misses
        else ""
    )
    return (
        f"Time model (time overhead predicted from the store-all step's per-op times): time-model tax median "
        f"{fmt_tax(statistics.median(taxes))}, worst {fmt_tax(time_model_tax(worst))} ({worst.case}, "
        f"{worst.display}); within ±{TIME_MODEL_TAX_GOAL} on {within} of {len(rows)} case × policy runs.{split}"
    )


SPEED_HEADER = [
    "case",
    "blocks",
    "framework",
    "framework plain step ms",
    "reference plain step ms",
    "reference ÷ framework",
    f"≤ {SPEED_RATIO_GOAL}",
]

SPEED_NOTE = (
    "The plain (store-everything) training step of the same case, single-threaded, timed in the same "
    "`ckptcheck validate --timing-case` run: the framework through its adapter, ckptcheck's reference "
    "trainer in-process; each the fastest of 3 rounds of its median step (wall time). A ratio below 1 "
    "means the reference is faster."
)


def speed_rows(frameworks: Iterable[FrameworkRow]) -> list[list[str]]:
    """The reference's plain step against each framework's (SPEED_HEADER's columns)."""
    return [
        [
            r.case,
            str(r.blocks),
            r.framework,
            f"{r.fw_plain:.2f}",
            f"{r.ck_plain:.2f}",
            fmt_ratio(r.ck_plain / r.fw_plain) if r.fw_plain > 0 else "—",
            "yes" if r.fw_plain > 0 and r.ck_plain / r.fw_plain <= SPEED_RATIO_GOAL else "no",
        ]
        for r in frameworks
    ]
