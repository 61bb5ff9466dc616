"""Every input of one report, read (make_report.py renders it): step rows by case with their verdicts, frontier
and planner points, verify's findings, other frameworks, user models and profiled models' plans."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .report_data import BadInput, Bench, Frameworks, FrontierPoint, PlannerPoint, StepRow, Verify, policy_family
from .report_format import fmt_overhead

if TYPE_CHECKING:
    from . import costs_report


class Report:
    """Every input of one report, read: step rows by case, frontier and planner points, verify, other frameworks,
    user models and profiled models' plans. BadInput when a benchmark JSON has no run the report reads."""

    def __init__(
        self,
        bench: Bench,
        verify: Verify | None,
        frameworks: Frameworks | None = None,
        costs: Iterable[costs_report.Plans] = (),
    ) -> None:
        self.costs = list(costs)  # costs_report.Plans, one per --costs-plans file
        self.frameworks = frameworks.rows if frameworks is not None else []
        self.user_models = frameworks.user_rows if frameworks is not None else []
        self.bench = bench
        self.verify = verify
        self.cases = []  # names in bench order
        self.steps = {}  # case -> [StepRow]
        for case, policy, e in bench.family("BM_Step"):
            row = StepRow.from_entry(case, policy, e, bench.policy_family(policy))
            row.verdict = verdict(row, verify)
            if case not in self.steps:
                self.cases.append(case)
                self.steps[case] = []
            self.steps[case].append(row)
        self.frontier = {}
        for case, _, e in bench.family("BM_Frontier"):
            self.frontier.setdefault(case, []).append(FrontierPoint.from_entry(case, e, f"BM_Frontier/{case}"))
        for pts in self.frontier.values():
            pts.sort(key=lambda p: p.budget)
        for c in self.frontier:
            if c not in self.steps:
                self.cases.append(c)
        self.planner = {}
        for fam, layers, e in bench.family("BM_Planner"):
            self.planner.setdefault(fam, []).append(PlannerPoint.from_entry(fam, e, f"BM_Planner/{fam}/{layers}"))
        for pts in self.planner.values():
            pts.sort(key=lambda p: p.layers)
        if not self.has_bench and (bench.files or not self.costs):
            raise BadInput("benchmark JSON: no BM_Step, BM_Planner or BM_Frontier runs (is it bench_engine's output?)")

    @property
    def has_bench(self) -> bool:
        """Whether the benchmark JSON had any BM_Step, BM_Frontier or BM_Planner run."""
        return bool(self.steps or self.frontier or self.planner)

    def optimal_at(self, case: str, budget: int) -> tuple[FrontierPoint | None, bool]:
        """Optimal's point at this budget: exact when the bench swept it, else the largest budget below (an upper
        bound on optimal's recompute at `budget`). Returns (point, exact) or (None, False)."""
        best = None
        for p in self.frontier.get(case, []):
            if p.budget <= budget:
                best = p
        if best is None:
            return None, False
        return best, best.budget == budget

    def frontier_status(self, row: StepRow) -> tuple[str, bool | None]:
        """(text, on_frontier) for a step row against the optimal policy at the row's own peak."""
        opt, exact = self.optimal_at(row.case, row.peak)
        if opt is None:
            return "no optimal point at or below its peak", None
        diff = row.flops_recompute - opt.flops_recompute
        if diff == 0 and exact:
            return "on the frontier", True
        if diff <= 0 and exact:
            by = fmt_overhead(-diff / max(1, row.flops_forward + row.flops_backward))
            return (
                f"below the block-level frontier by {by} FLOP overhead (op-level recompute is outside the DP's family)"
            ), True
        if diff <= 0:
            return "at or below the sampled frontier", True
        base = max(1, row.flops_forward + row.flops_backward)
        return (
            f"{fmt_overhead(diff / base)} FLOP overhead above optimal at the same budget "
            f"({fmt_overhead(opt.flop_overhead)})"
        ), False

    def all_rows(self) -> Iterator[StepRow]:
        """Every step row, case by case in bench order."""
        for c in self.cases:
            for r in self.steps.get(c, []):
                yield r

    def tax_by_policy(self) -> dict[str, list[StepRow]]:
        """policy family -> [engine tax over cases], in first-seen order."""
        out = {}
        for r in self.all_rows():
            out.setdefault(policy_family(r), []).append(r)
        return out


def verdict(row: StepRow, verify: Verify | None) -> str | None:
    """'equal', 'DIFFERS (...)' or None (nothing checked it)."""
    f = verify.finding_for(row.case, row.family) if verify is not None else None
    if f is not None:
        return f"DIFFERS (verify: property {f.get('property', '?')})"
    if row.bitwise is not None and not row.bitwise:
        return "DIFFERS (step 0)"
    if row.bitwise is None and verify is None:
        return None
    return "equal"
