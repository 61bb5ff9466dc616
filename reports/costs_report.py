"""The report's "Profiled model" sections (reports/make_report.py --costs-plans FILE): the plans `ckptcheck report
--costs costs.json [--budget B]` makes from a user's model's chain costs (harness/engine/COSTS.md), read from its
file (format "ckptcheck-costs-plans", version 1) and rendered like a catalogue case: a table of policies, the
memory/recompute frontier figure with every policy placed on it, the cheapest policy under the budget and the
smallest feasible budget. Every number is a prediction (the planner's peak and FLOPs, the time overhead from the
blocks' measured forward times): nothing here ran checkpointed, and the text says so.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from . import plan_checks
from .report_data import BadInput, load_json
from .report_format import DocBlock, Figure, fmt_bytes, fmt_overhead, fmt_pct, fmt_ratio, fmt_time

FORMAT = "ckptcheck-costs-plans"
VERSION = 1
WHY_NOT_CHARS = 80  # the placement column's reason, shortened past this


# ---------------------------------------------------------------------------------------------------------------
# Reading and checking the file: one line naming the field, as every reader of ckptcheck's files does.


class _Fields:
    """Typed getters over one JSON object; a bad field raises BadInput naming the file and the field's path."""

    def __init__(self, path: str, obj: dict[str, Any], where: str = "") -> None:
        self.path, self.obj, self.where = path, obj, where

    def fail(self, key: str, what: str) -> NoReturn:
        raise BadInput(f"costs plans '{self.path}': {self.where}{key}: {what}")

    def get(self, key: str, nullable: bool = False) -> tuple[Any, bool]:
        if key not in self.obj:
            self.fail(key, "missing")
        v = self.obj[key]
        return v, (v is None and nullable)

    def integer(self, key: str, least: int = 0, nullable: bool = False) -> Any:
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            kind = "a non-negative integer" if least == 0 else f"an integer >= {least}"
            self.fail(key, f"must be {kind}" + (" or null" if nullable else ""))
        return v

    def number(self, key: str, nullable: bool = False) -> Any:
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            self.fail(key, "must be a non-negative number" + (" or null" if nullable else ""))
        return float(v)

    def string(self, key: str) -> str:
        v, _ = self.get(key)
        if not isinstance(v, str):
            self.fail(key, "must be a string")
        return v

    def boolean(self, key: str) -> bool:
        v, _ = self.get(key)
        if not isinstance(v, bool):
            self.fail(key, "must be true or false")
        return v

    def array(self, key: str) -> list[Any]:
        v, _ = self.get(key)
        if not isinstance(v, list):
            self.fail(key, "must be an array")
        return v

    def object(self, key: str, nullable: bool = False) -> _Fields | None:
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, dict):
            self.fail(key, "must be an object" + (" or null" if nullable else ""))
        return _Fields(self.path, v, f"{self.where}{key}.")

    def element(self, key: str, i: int, v: Any) -> _Fields:
        if not isinstance(v, dict):
            raise BadInput(f"costs plans '{self.path}': {self.where}{key}[{i}]: must be an object")
        return _Fields(self.path, v, f"{self.where}{key}[{i}].")


@dataclass(frozen=True)
class Policy:
    """One policy planned on the profiled chain: its planned peak and recompute, and whether PyTorch's per-module
    `torch.utils.checkpoint` can apply it (with the bytes that placement would save) or why not."""

    policy: str
    family: str
    peak: int
    forward_evals: int
    flop_overhead: float
    time_overhead: float | None  # None: not predicted
    expressible: bool
    why_not: str
    saved_bytes: int | None  # None exactly when not expressible

    @classmethod
    def read(cls, f: _Fields) -> Policy:
        """The policy of one `policies[i]` object; BadInput naming the field."""
        policy, family = f.string("policy"), f.string("family")
        peak, forward_evals = f.integer("peak_activation_bytes"), f.integer("forward_evals")
        flop_overhead = f.number("flop_overhead")
        time_overhead = f.number("time_overhead", nullable=True)
        expressible, why_not = f.boolean("expressible"), f.string("why_not")
        if expressible:
            v, _ = f.get("saved_bytes")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                f.fail("saved_bytes", "must be a non-negative integer (the policy is expressible)")
            saved = v
        else:
            if f.get("saved_bytes")[0] is not None:
                f.fail("saved_bytes", "must be null (the policy is not expressible)")
            saved = None
        return cls(policy, family, peak, forward_evals, flop_overhead, time_overhead, expressible, why_not, saved)


@dataclass(frozen=True)
class FrontierPoint:
    """The optimal policy at one swept budget: its planned peak and recompute."""

    budget: int
    peak: int
    forward_evals: int
    flop_overhead: float
    time_overhead: float | None  # None: not predicted

    @classmethod
    def read(cls, f: _Fields) -> FrontierPoint:
        """The point of one `frontier[i]` object; BadInput naming the field."""
        return cls(
            f.integer("budget"),
            f.integer("peak_activation_bytes"),
            f.integer("forward_evals"),
            f.number("flop_overhead"),
            f.number("time_overhead", nullable=True),
        )


@dataclass(frozen=True)
class Cheapest:
    """The cheapest policy under the given budget."""

    policy: str
    peak: int
    flop_overhead: float
    time_overhead: float | None  # None: not predicted

    @classmethod
    def read(cls, f: _Fields) -> Cheapest:
        """The `cheapest` object; BadInput naming the field."""
        return cls(
            f.string("policy"),
            f.integer("peak_activation_bytes"),
            f.number("flop_overhead"),
            f.number("time_overhead", nullable=True),
        )


@dataclass
class Plans:
    """One `ckptcheck report --costs` plans file. `figure` is set by draw_figures, `checks` by attach_checks."""

    path: str
    model: str
    framework: str
    batch_size: int
    layers: int
    step_seconds: float
    store_all_peak: int
    min_feasible: int
    budget: int | None
    cheapest: Cheapest | None
    policies: list[Policy]
    frontier: list[FrontierPoint]  # by budget
    figure: Figure | None = None
    checks: list[plan_checks.PlanCheckRow] = field(default_factory=list)  # the placements applied and checked

    @classmethod
    def from_doc(cls, doc: Any, path: str) -> Plans:
        """The plans of a parsed file; BadInput naming the first bad field (format and version first)."""
        if not isinstance(doc, dict):
            raise BadInput(f"costs plans '{path}': not a JSON object")
        f = _Fields(path, doc)
        fmt = f.string("format")
        if fmt != FORMAT:
            hint = (
                " (this is a chain-costs file: make the plans with `ckptcheck report --costs FILE`)"
                if fmt == "ckptcheck-chain-costs"
                else ""
            )
            f.fail("format", f'must be "{FORMAT}", not "{fmt}"{hint}')
        v, _ = f.get("version")
        if v != VERSION or isinstance(v, bool):
            f.fail("version", f"must be {VERSION}, not {json.dumps(v)} (this report reads version {VERSION})")
        model, framework = f.string("model"), f.string("framework")
        batch_size, layers = f.integer("batch_size", least=1), f.integer("layers", least=1)
        step_seconds = f.number("step_seconds")
        store_all_peak, min_feasible = f.integer("store_all_peak_bytes"), f.integer("min_feasible_budget")
        budget = f.integer("budget", nullable=True)
        c = f.object("cheapest", nullable=True)
        cheapest = Cheapest.read(c) if c is not None else None
        policies = [Policy.read(f.element("policies", i, p)) for i, p in enumerate(f.array("policies"))]
        frontier = [FrontierPoint.read(f.element("frontier", i, p)) for i, p in enumerate(f.array("frontier"))]
        frontier.sort(key=lambda p: p.budget)  # stable: the file's order among equal budgets
        return cls(
            path,
            model,
            framework,
            batch_size,
            layers,
            step_seconds,
            store_all_peak,
            min_feasible,
            budget,
            cheapest,
            policies,
            frontier,
        )

    @property
    def short_model(self) -> str:
        """The model spec without the adapter and the directories: `gpt2.py:plan`."""
        return self.model.split("module=", 1)[-1].split("/")[-1]

    def optimal_at(self, peak: int) -> tuple[FrontierPoint | None, bool]:
        """The frontier point at the largest budget <= peak, and whether that budget is exactly peak."""
        best = None
        for p in self.frontier:
            if p.budget <= peak:
                best = p
        return best, best is not None and best.budget == peak


def load(path: str) -> Plans:
    """The plans file at `path`; BadInput of one line naming the file and the field."""
    return Plans.from_doc(load_json(path, "costs plans"), path)


# ---------------------------------------------------------------------------------------------------------------
# Text


HEADER = [
    "policy",
    "peak activation (planned)",
    "bytes",
    "× store-all",
    "forward evals",
    "FLOP overhead",
    "predicted time overhead",
    "frontier",
    "per-module placement",
    "predicted saved bytes",
]

NOTE = (
    "Predicted, not measured: this table comes from the chain costs alone. *peak activation (planned)* is the "
    "planner's peak for the schedule on the profiled chain costs (harness/engine/COSTS.md); *FLOP overhead* "
    "= recomputed FLOPs / (forward + backward FLOPs of the plain step); *predicted time overhead* = the "
    "measured forward time of the blocks the policy recomputes (as often as it recomputes them) ÷ the plain "
    "step's time; *frontier*: on = no more recompute than the optimal policy at the same budget (the "
    "frontier's point at the largest swept budget at or below the policy's peak); *per-module placement*: "
    "whether PyTorch's per-module `torch.utils.checkpoint` can apply it (`ckptcheck plan --costs ... "
    "--placement`), else why not; *predicted saved bytes*: what that placement's forward would leave saved "
    "for backward, each storage once, which `ckptcheck validate --plan` measures."
)


def _time(x: float | None) -> str:
    return "—" if x is None else fmt_overhead(x)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WHY_NOT_CHARS else text[: WHY_NOT_CHARS - 1].rstrip() + "…"


def frontier_flag(plans: Plans, p: Policy) -> bool | None:
    """True (on, or below the sampled block-level frontier), False (off), None (no frontier point at or below)."""
    opt, _ = plans.optimal_at(p.peak)
    if opt is None:
        return None
    # Optimal's recompute never grows with the budget, so a policy above the sampled point is above optimal at
    # its own peak too; at or below it, it is on the frontier (below: op-level recompute, outside the DP's family).
    return p.flop_overhead <= opt.flop_overhead + 1e-9 * max(1.0, opt.flop_overhead)


def is_cheapest(plans: Plans, p: Policy) -> bool:
    """Whether `p` is the cheapest policy under the given budget (False when no budget was given)."""
    return plans.budget is not None and plans.cheapest is not None and plans.cheapest.policy == p.policy


def policy_cells(plans: Plans, p: Policy) -> list[str]:
    """The policy table's row of `p`, as strings (HEADER's columns)."""
    ratio = fmt_ratio(p.peak / plans.store_all_peak) if plans.store_all_peak else "—"
    placement = "yes" if p.expressible else ("no: " + _short(p.why_not) if p.why_not.strip() else "no")
    saved = f"{fmt_bytes(p.saved_bytes)} ({p.saved_bytes})" if p.saved_bytes is not None else "—"
    name = p.policy + (" (cheapest under the budget)" if is_cheapest(plans, p) else "")
    return [
        name,
        fmt_bytes(p.peak),
        str(p.peak),
        ratio,
        str(p.forward_evals),
        fmt_overhead(p.flop_overhead),
        _time(p.time_overhead),
        {True: "on", False: "off", None: "—"}[frontier_flag(plans, p)],
        placement,
        saved,
    ]


def _share(plans: Plans, b: int) -> str:
    return f", {fmt_pct(b / plans.store_all_peak)} of store-all" if plans.store_all_peak else ""


def budget_line(plans: Plans) -> str:
    """The cheapest policy under the budget (when one is given) and the smallest feasible budget, one line."""
    s = (
        f"Smallest feasible budget: {fmt_bytes(plans.min_feasible)} ({plans.min_feasible} bytes"
        f"{_share(plans, plans.min_feasible)}). "
    )
    if plans.budget is None:
        return s + "No budget given (`ckptcheck report --costs FILE --budget B` names the cheapest policy under B)."
    under = f"the budget of {fmt_bytes(plans.budget)} ({plans.budget} bytes)"
    c = plans.cheapest
    if c is None:
        return s + f"No policy fits under {under}."
    return (
        s + f"Cheapest policy under {under}: **{c.policy}**, planned peak {fmt_bytes(c.peak)} ({c.peak} bytes), "
        f"FLOP overhead {fmt_overhead(c.flop_overhead)}, predicted time overhead {_time(c.time_overhead)}."
    )


def summary_lines(plans_list: list[Plans]) -> list[str]:
    """One line per profiled model for the report's summary."""
    out = []
    for pl in plans_list:
        n = sum(1 for p in pl.policies if p.expressible)
        s = (
            f"Profiled model **{pl.model}** ({pl.framework}, batch {pl.batch_size}, {pl.layers} blocks; predicted "
            f"from its chain costs, not measured): store-all peak {fmt_bytes(pl.store_all_peak)}, smallest feasible "
            f"budget {fmt_bytes(pl.min_feasible)}"
        )
        s += f" ({fmt_pct(pl.min_feasible / pl.store_all_peak)} of it)" if pl.store_all_peak else ""
        if pl.budget is not None and pl.cheapest is not None:
            c = pl.cheapest
            s += (
                f"; cheapest under {fmt_bytes(pl.budget)}: {c.policy} "
                f"(FLOP overhead {fmt_overhead(c.flop_overhead)}, "
                f"predicted time overhead {_time(c.time_overhead)})"
            )
        elif pl.budget is not None:
            s += f"; no policy fits under {fmt_bytes(pl.budget)}"
        s += f"; {n} of {len(pl.policies)} policies can be applied as a per-module placement."
        out.append(s)
    return out


def section_blocks(plans: Plans) -> list[DocBlock]:
    """The section of one profiled model, as make_report.document's blocks."""
    pl = plans
    intro = (
        f"{pl.framework}, batch {pl.batch_size}, {pl.layers} blocks, plain step {fmt_time(pl.step_seconds)} "
        f"(measured by `ckptcheck profile`); store-all peak {fmt_bytes(pl.store_all_peak)} "
        f"({pl.store_all_peak} bytes). Every other number here is **predicted** from the chain costs."
    )
    d = [
        ("h2", f"Profiled model: {pl.model}"),
        ("p", intro),
        ("p", budget_line(pl)),
        ("table", HEADER, [policy_cells(pl, p) for p in pl.policies], None),
        ("p", NOTE),
    ]
    if pl.checks:
        d += plan_checks.blocks(pl.checks)
    if pl.figure is not None:
        d.append(("figure",) + pl.figure)
    return d


def attach_checks(plans_list: list[Plans], loops: list[tuple[str, list[plan_checks.PlanCheckRow]]]) -> None:
    """Each plan loop's rows to the section of its model; a loop of a model without a section is bad input."""
    for adapter, rows in loops:
        matches = [pl for pl in plans_list if pl.model == adapter]
        if not matches:
            raise BadInput(f"plan loop of '{adapter}': no --costs-plans of that model")
        matches[0].checks = rows


def terminal_lines(plans_list: list[Plans]) -> list[str]:
    """One line per profiled model for the terminal summary (markdown marks removed)."""
    out = []
    for pl in plans_list:
        out.append(f"Profiled model {pl.model} (predicted): " + re.sub(r"[*`]", "", budget_line(pl)))
    return out
