"""Two report sections (reports/make_report.py): the time model per case x policy (bench_engine's
predicted_time_overhead next to the measured one, bench/time_model.h says how it is predicted), and the
reference's plain step next to another framework's, both timed in one `ckptcheck validate --timing-case` run.
"""

from __future__ import annotations

import math
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
    "*predicted time overhead* = a_tape × the CPU time of every op forward the policy recomputes with a tape in a "
    "block recompute + a_advance × the CPU time of those it recomputes keeping nothing + a_rebuild × that of the "
    "op-level rebuilds of the contexts its selective masks drop (as often as it recomputes each), each op timed "
    "on the case's own inputs during instrumented store-all steps, ÷ the store-all step's time (bench/time_model.h). "
    "The weights are the case's, fitted by least squares on its calibration schedules, each timed side by side "
    "with store-all as the policies are: full recomputation, and schedules no catalogue policy runs (blocks "
    "recomputed in segments of two; pairs rebuilt by advancing their first block; revolve twice, with other numbers "
    "of slots; for a_rebuild, two of those with selective's masks; bench/time_model_fit.h). Where the fit leaves a "
    "schedule more than 0.02 from its measurement, every schedule is timed again, up to three times, and the fit "
    "is made on each one's median (*passes* in the weights table). "
    "A weight below 1 is what a recomputation really costs next to the same op "
    "repeated inside a store-all step: the policy's first forward keeps nothing and runs in recycled memory, and the "
    "backward right after a recompute finds its context in cache. Full recomputation is a calibration schedule, so "
    "its rows are marked *calibration* and left out of the count. The FLOP overhead weighs the same ops by FLOPs "
    "instead. *measured* = time ratio − 1 (median over repetitions, interquartile range in brackets). "
    "*time-model tax* = measured − predicted. It splits in two by an instrumented run of the policy that clocks "
    "its recomputed op forwards (bench/recompute_profile.h): *recomputed ops' own time* = their measured time (time "
    "ratio × their share of the policy's step) − their time in the store-all repeats, where a recompute ran faster "
    "or slower than the same op repeated inside a store-all step; *rest of the step* = the rest of the tax: what "
    "the policy's first forward, backward, executor and update spend beyond store-all's, less the weights' credit."
)

WEIGHTS_HEADER = ["case", "a_tape", "a_advance", "a_rebuild", "worst calibration residual", "passes"]


def predicted(row: StepRow) -> float | None:
    """The time model's predicted time overhead of a step row (None: not predicted)."""
    return row.predicted_time_overhead


def time_model_tax(row: StepRow) -> float | None:
    """Measured minus predicted time overhead (None: not predicted)."""
    p = predicted(row)
    return None if p is None else (row.time_ratio - 1.0) - p


def meets_goal(tax: float) -> bool:
    """Whether a time-model tax is within TIME_MODEL_TAX_GOAL."""
    return abs(tax) <= TIME_MODEL_TAX_GOAL


def ops_error(row: StepRow) -> float | None:
    """The tax's part in the recomputed ops' own time: their measured time (time ratio × their share) − their time
    in the store-all repeats (the prediction itself in older JSON, whose model had no weights)."""
    p = row.repeat_share if row.repeat_share is not None else predicted(row)
    return None if p is None or row.recompute_share is None else row.time_ratio * row.recompute_share - p


def rest_error(row: StepRow) -> float | None:
    """The rest of the tax (tax − ops_error)."""
    tax, ops = time_model_tax(row), ops_error(row)
    return None if tax is None or ops is None else tax - ops


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
                    opt_tax(rest_error(r)),
                    "calibration" if r.calibration_row else ("yes" if meets_goal(tax) else "no"),
                ]
            )
    return out


def weights_rows(steps_by_case: dict[str, list[StepRow]]) -> list[list[str]]:
    """Per case, the time model's fitted weights (WEIGHTS_HEADER's columns); empty for older JSON."""
    out = []
    for case, rows in steps_by_case.items():
        w = next((r.weights for r in rows if r.weights is not None), None)
        if w is not None:
            a_rebuild = "—" if w[2] is None else f"{w[2]:.3f}"
            out.append(
                [case, f"{w[0]:.3f}", f"{w[1]:.3f}", a_rebuild, f"{w[3]:.3f}", "—" if w[4] is None else str(w[4])]
            )
    return out


def time_model_headline(steps_by_case: dict[str, list[StepRow]]) -> str | None:
    """The section's one-line result over every predicted row (calibration rows apart); None when no row has a
    prediction (older bench_engine)."""
    every = [r for rs in steps_by_case.values() for r in rs if time_model_tax(r) is not None]
    rows = [r for r in every if not r.calibration_row]
    if not rows:
        return None
    taxes = [time_model_tax(r) for r in rows]
    worst = max(rows, key=lambda r: abs(time_model_tax(r)))
    within = sum(1 for t in taxes if meets_goal(t))
    misses = [r for r in rows if not meets_goal(time_model_tax(r)) and ops_error(r) is not None]
    ops_led = sum(1 for r in misses if abs(ops_error(r)) > abs(rest_error(r)))
    split = (
        f" Of the {len(misses)} outside, {ops_led} mostly in the recomputed ops' own time, "
        f"{len(misses) - ops_led} mostly in the rest of the step."
        if misses
        else ""
    )
    # A calibration row is a schedule the weights were fitted on, timed again as a policy: how far it lands from its
    # own calibration is how closely this run's timing repeats, which every other row's tax carries too.
    repeats = [time_model_tax(r) for r in every if r.calibration_row]
    runs, policies, they, their = (
        ("run is", "a policy", "it", "its") if len(repeats) == 1 else ("runs are", "policies", "they", "their")
    )
    cal = (
        f" ({len(repeats)} full-recomputation {runs} calibration, not counted; timed again as {policies}, {they} came "
        f"within ±{TIME_MODEL_TAX_GOAL} of {their} own calibration on "
        f"{sum(1 for t in repeats if meets_goal(t))} of {len(repeats)}, root mean square "
        f"{math.sqrt(statistics.fmean(t * t for t in repeats)):.3f}: how closely this run's timing repeats)"
        if repeats
        else ""
    )
    return (
        f"Time model (time overhead predicted from the store-all step's per-op times and each case's calibration "
        f"schedules): time-model tax median {fmt_tax(statistics.median(taxes))}, worst "
        f"{fmt_tax(time_model_tax(worst))} ({worst.case}, {worst.display}); within ±{TIME_MODEL_TAX_GOAL} on "
        f"{within} of {len(rows)} case × policy runs{cal}.{split}"
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
