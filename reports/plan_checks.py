"""The "applied in PyTorch and checked" table of a profiled model's section: tests/adapters/check_plan_loop.py's
plan-loop.json (the loop of harness/engine/COSTS.md run on the model: each budget's placement applied with
`validate --plan`), one row per budget — the policy the planner picked, predicted vs measured saved bytes,
step-time overhead and peak (COSTS.md, "The peak of a placement"). Rows join the section whose model is the
file's adapter."""

from __future__ import annotations

from dataclasses import dataclass

from .report_data import BadInput, load_json
from .report_format import DocBlock, fmt_bytes

FORMAT = "ckptcheck-plan-loop"
VERSION = 1

HEADER = [
    "budget",
    "bytes",
    "policy picked",
    "saved predicted",
    "saved measured",
    "equal",
    "plain saved",
    "time overhead predicted",
    "time overhead measured",
    "peak predicted",
    "peak measured",
]

NOTE = (
    "Each placement was applied to the model in PyTorch (`validate --plan`) and trained next to the plain "
    "model: every row is bitwise equal to the plain run (else the loop fails), *saved* bytes are what the "
    "forward of step 0 left for backward as saved-tensor hooks count them, and the measured time overhead "
    "is the median ratio of plain and checkpointed steps run side by side in one process, with the middle half "
    "of those ratios in brackets: a gap to the prediction inside it is within the timing's own spread. The peak: the "
    "planner's peak plus what the part before the chain saves, against torch.profiler's peak of the step's "
    "tensors that are neither parameters, their gradients nor optimizer state (op workspace left out); more "
    "than 25% above is a finding."
)


@dataclass(frozen=True)
class PlanCheckRow:
    """One budget of the plan loop: the policy the planner picked, its saved bytes predicted and measured (and the
    plain run's), its time overhead predicted and measured (None where not measured)."""

    budget_label: str
    budget: int
    policy: str
    predicted_saved_bytes: int
    measured_saved_bytes: int
    plain_saved_bytes: int | None
    predicted_time_overhead: float | None
    measured_time_overhead: float | None
    predicted_peak_bytes: int | None = None  # None: a plan loop written before the peak was checked
    measured_peak_bytes: int | None = None
    measured_time_overhead_middle_half: tuple[float, float] | None = None  # the timed pairs' 25th and 75th percentiles


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:+.1f}%"


def load(path: str) -> tuple[str, list[PlanCheckRow]]:
    """(adapter, rows) of one plan-loop.json; BadInput names the field."""
    doc = load_json(path, "plan loop")
    where = f"plan loop '{path}'"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise BadInput(f'{where}: format/version must be "{FORMAT}" / {VERSION} (check_plan_loop.py\'s output)')
    rows = doc.get("rows")
    if not isinstance(doc.get("adapter"), str) or not isinstance(rows, list) or not rows:
        raise BadInput(f"{where}: needs an adapter and a non-empty rows array")
    ints = ("budget", "predicted_saved_bytes", "measured_saved_bytes")
    for i, r in enumerate(rows):
        for k in ints:
            if not isinstance(r.get(k), int) or isinstance(r.get(k), bool) or r[k] < 0:
                raise BadInput(f"{where}: rows[{i}].{k}: must be a non-negative integer")
        for k in ("budget_label", "policy"):
            if not isinstance(r.get(k), str):
                raise BadInput(f"{where}: rows[{i}].{k}: must be a string")
        for k in ("predicted_peak_bytes", "measured_peak_bytes"):
            v = r.get(k)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise BadInput(f"{where}: rows[{i}].{k}: must be a non-negative integer or null")
        for k in ("predicted_time_overhead", "measured_time_overhead"):
            if r.get(k) is not None and not isinstance(r.get(k), (int, float)):
                raise BadInput(f"{where}: rows[{i}].{k}: must be a number or null")
        half = r.get("measured_time_overhead_middle_half")
        if half is not None and not (
            isinstance(half, list) and len(half) == 2 and all(isinstance(x, (int, float)) for x in half)
        ):
            raise BadInput(f"{where}: rows[{i}].measured_time_overhead_middle_half: must be two numbers or null")
    return doc["adapter"], [
        PlanCheckRow(
            r["budget_label"],
            r["budget"],
            r["policy"],
            r["predicted_saved_bytes"],
            r["measured_saved_bytes"],
            r.get("plain_saved_bytes"),
            r.get("predicted_time_overhead"),
            r.get("measured_time_overhead"),
            r.get("predicted_peak_bytes"),
            r.get("measured_peak_bytes"),
            tuple(r["measured_time_overhead_middle_half"]) if r.get("measured_time_overhead_middle_half") else None,
        )
        for r in rows
    ]


def cells(rows: list[PlanCheckRow]) -> list[list[str]]:
    """The table's cells, one list of strings per budget."""
    out = []
    for r in rows:
        equal = "yes" if r.predicted_saved_bytes == r.measured_saved_bytes else "**NO**"
        plain = r.plain_saved_bytes
        out.append(
            [
                r.budget_label,
                str(r.budget),
                r.policy,
                str(r.predicted_saved_bytes),
                str(r.measured_saved_bytes),
                equal,
                fmt_bytes(plain) if isinstance(plain, int) else "—",
                _pct(r.predicted_time_overhead),
                _measured_time(r),
                str(r.predicted_peak_bytes) if r.predicted_peak_bytes is not None else "—",
                _peak(r.predicted_peak_bytes, r.measured_peak_bytes),
            ]
        )
    return out


def _measured_time(r: PlanCheckRow) -> str:
    """The median, and the middle half of the timed pairs when the loop recorded it."""
    if r.measured_time_overhead is None or r.measured_time_overhead_middle_half is None:
        return _pct(r.measured_time_overhead)
    lo, hi = r.measured_time_overhead_middle_half
    return f"{_pct(r.measured_time_overhead)} (middle half {_pct(lo)} to {_pct(hi)})"


def _peak(predicted: int | None, measured: int | None) -> str:
    if measured is None:
        return "—"
    if not predicted:
        return str(measured)
    return f"{measured} ({_pct(measured / predicted - 1)})"


def blocks(rows: list[PlanCheckRow]) -> list[DocBlock]:
    """The sub-section of a profiled model's section: heading, table, note."""
    return [("h3", "Applied in PyTorch and checked"), ("table", HEADER, cells(rows), None), ("p", NOTE)]
