"""The report's inputs: bench_engine's Google Benchmark JSON (repetitions folded, GB's q1/q3 aggregates read),
`ckptcheck verify --json` and `ckptcheck validate --timing-case` results, as rows the report renders
(reports/make_report.py).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from typing import Any

from . import user_models

ENGINE_TAX_GOAL = 0.03  # the goal for every policy on the catalogue: the executor's own cost under 3%
FULL_RECOMPUTE_THEORY = 1.0 / 3  # recomputing every forward once: F / (F + B) with B = 2F
MIB = 1024.0 * 1024.0


class BadInput(Exception):
    """A bad input file or option: its message is the one line the report prints before exiting 2."""


MAX_JSON_BYTES = 64 << 20  # as ckptcheck's own readers (cases/user_file.h)


def load_json(path: str, what: str) -> Any:
    """A JSON input, read up to MAX_JSON_BYTES (a pipe too: endless input is refused, not waited out); nesting
    past Python's recursion limit is refused too. BadInput of one line otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise BadInput(f"{what} '{path}': no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{what} '{path}': is a directory") from None
    except OSError as e:
        raise BadInput(f"{what} '{path}': {e.strerror}") from None
    if len(data) > MAX_JSON_BYTES:
        raise BadInput(f"{what} '{path}': more than {MAX_JSON_BYTES >> 20} MiB")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{what} '{path}': not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{what} '{path}': not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise BadInput(f"{what} '{path}': nested too deeply") from None


def base_name(name: str) -> str:
    """A benchmark's name without Google Benchmark's suffixes (manual_time, aggregates)."""
    for suffix in ("_mean", "_median", "_stddev", "_cv"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return re.sub(
        r"/(manual_time|real_time|process_time|(repeats|iterations|threads):\d+|min_time:[0-9.]+s?|"
        r"min_warmup_time:[0-9.]+s?)(?=/|$)",
        "",
        name,
    )


def counter(entry: dict[str, Any], key: str, default: Any = None) -> Any:
    """entry[key], or `default` when it is absent or null."""
    v = entry.get(key, default)
    if v is None:
        return default
    return v


class Bench:
    """Benchmark runs grouped by name; repetitions are folded into the median of each field."""

    def __init__(self) -> None:
        self.files: list[str] = []  # the paths read, in order
        self.context: dict[str, Any] = {}
        self.runs: dict[str, dict[str, Any]] = {}  # base name -> merged entry
        self.order: list[str] = []  # base names in first-seen order
        self.errors: list[tuple[str, str]] = []  # (name, message)

    def add_file(self, path: str) -> None:
        """Read one bench_engine JSON: its context (first file wins per key), its runs folded by base name (a later
        file's run of the same name replaces the earlier), its errored runs. BadInput on a malformed file."""
        doc = load_json(path, "benchmark JSON")
        self.files.append(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
            raise BadInput(
                f"benchmark JSON '{path}': no 'benchmarks' list (was it written with --benchmark_out_format=json?)"
            )
        ctx = doc.get("context", {})
        if isinstance(ctx, dict):
            for k, v in ctx.items():
                self.context.setdefault(k, v)
        grouped = {}
        # base name -> {"q1": aggregate entry, "q3": ...}: Google Benchmark's statistics over repetitions
        quartiles = {}
        for i, b in enumerate(doc["benchmarks"]):
            if not isinstance(b, dict) or not isinstance(b.get("name"), str):
                raise BadInput(f"benchmark JSON '{path}': benchmarks[{i}] has no name")
            if b.get("run_type", "iteration") != "iteration":
                # The median is recomputed below from the repetitions; the quartiles are bench_engine's own.
                if b.get("aggregate_name") in ("q1", "q3"):
                    quartiles.setdefault(base_name(b.get("run_name", b["name"])), {})[b["aggregate_name"]] = b
                continue
            name = base_name(b.get("run_name", b["name"]))
            if b.get("error_occurred"):
                self.errors.append((name, str(b.get("error_message", "error"))))
                continue
            grouped.setdefault(name, []).append(b)
        for name, entries in grouped.items():
            merged = dict(entries[0])
            for k, v in entries[0].items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and len(entries) > 1:
                    vals = [e[k] for e in entries if isinstance(e.get(k), (int, float))]
                    merged[k] = statistics.median(vals)
            merged["repetitions_folded"] = len(entries)
            # Each repetition's time ratio: the spread a comparison with a baseline run judges against (baseline.py).
            merged["time_overhead_repetitions"] = [
                e["time_overhead"] for e in entries if isinstance(e.get("time_overhead"), (int, float))
            ]
            # BM_Step's interquartile range of the time ratio over repetitions (older JSON: counters of one run).
            for q, agg in quartiles.get(name, {}).items():
                if isinstance(agg.get("time_overhead"), (int, float)):
                    merged["time_overhead_" + q] = agg["time_overhead"]
            if name not in self.runs:
                self.order.append(name)
            self.runs[name] = merged

    def policy_family(self, policy: str) -> str:
        """The family bench_engine files a BM_Step policy under (its context entry "policy_family:<policy>",
        ckptcheck's policyFamily()): the report reads no policy string itself."""
        fam = self.context.get("policy_family:" + policy)
        if not isinstance(fam, str) or not fam:
            raise BadInput(
                f"benchmark JSON: no 'policy_family:{policy}' in its context (written by a bench_engine "
                f"older than this report?)"
            )
        return fam

    def family(self, prefix: str) -> list[tuple[str, str, dict[str, Any]]]:
        """(second, third name part, entry) of every run named <prefix>/<a>/<b>, in first-seen order."""
        out = []
        for name in self.order:
            parts = name.split("/", 2)
            if parts[0] == prefix and len(parts) == 3:
                out.append((parts[1], parts[2], self.runs[name]))
        return out


def need(entry: dict[str, Any], key: str, name: str) -> int | float:
    """The numeric counter entry[key]; BadInput naming the benchmark `name` when missing or not a number."""
    v = entry.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise BadInput(f"benchmark '{name}': counter '{key}' missing or not a number")
    return v


@dataclass
class StepRow:
    """One BM_Step run: a case stepped under a policy, its measured peak, FLOPs and time against store-all.
    `verdict` is filled in by the report from the verify JSON (None: not checked)."""

    case: str
    policy: str  # as registered (defaultPolicies' string); the label has the schedule's own
    family: str  # policyFamily(), from the benchmark's context
    display: str
    layers: int
    peak: int
    store_all_peak: int
    forward_evals: int  # the step's: every micro-batch's
    micro_batches: int
    flops_forward: int
    flops_recompute: int
    flops_backward: int
    flop_overhead: float
    time_ratio: float
    q1: float
    q3: float
    time_repetitions: list[float]
    step_seconds: float
    store_all_seconds: float
    samples: int  # repetitions (older JSON: samples)
    planned_ok: bool
    bitwise: Any  # bench_engine's bitwise_equal counter; None: not checked by this bench
    predicted_time_overhead: float | None  # the time model (bench/time_model.h); absent in older JSON
    recompute_share: float | None
    # Per op kind: (recompute time as a fraction of the reference step, recompute FLOP share).
    recompute_kinds: dict[str, tuple[float, float]]
    verdict: str | None = None
    # The time model's inputs (bench/time_model.h); None in older JSON: the per-op repeats' share of the step of
    # what the policy recomputes (weights 1), the case's fitted weights (a_tape, a_advance, a_rebuild: None before
    # bench_engine fitted it), worst calibration residual and how often each calibration schedule was timed (None
    # before bench_engine timed it again), and whether this policy is one of the calibration schedules (full
    # recomputation).
    repeat_share: float | None = None
    weights: tuple[float, float, float | None, float, int | None] | None = None
    calibration_row: bool = False

    @classmethod
    def from_entry(cls, case: str, policy: str, e: dict[str, Any], family: str) -> StepRow:
        """The row of the folded benchmark entry `e` of BM_Step/<case>/<policy>; BadInput on a missing counter."""
        name = f"BM_Step/{case}/{policy}"
        label = e.get("label", "")
        # The counters in the order a missing one is reported.
        layers, peak, store_all_peak, forward_evals = (
            int(need(e, k, name))
            for k in ("layers", "peak_activation_bytes", "store_all_peak_activation_bytes", "forward_evals")
        )
        micro_batches = int(e.get("micro_batches", 1))
        flops_forward, flops_recompute, flops_backward = (
            int(need(e, k, name)) for k in ("flops_forward", "flops_recompute", "flops_backward")
        )
        flop_overhead = float(need(e, "flop_overhead", name))
        time_ratio = float(need(e, "time_overhead", name))
        pred = e.get("predicted_time_overhead")
        share = e.get("recompute_time_share")
        kinds = {}
        for k, v in e.items():
            if k.startswith("recompute_time_share."):
                kind = k.split(".", 1)[1]
                kinds[kind] = (float(v) * time_ratio, float(e.get("recompute_flop_share." + kind, 0.0)))
        return cls(
            case=case,
            policy=policy,
            family=family,
            display=label.split(" ", 1)[1] if label.startswith(case + " ") else policy,
            layers=layers,
            peak=peak,
            store_all_peak=store_all_peak,
            forward_evals=forward_evals,
            micro_batches=micro_batches,
            flops_forward=flops_forward,
            flops_recompute=flops_recompute,
            flops_backward=flops_backward,
            flop_overhead=flop_overhead,
            time_ratio=time_ratio,
            q1=float(e.get("time_overhead_q1", time_ratio)),
            q3=float(e.get("time_overhead_q3", time_ratio)),
            time_repetitions=[float(x) for x in e.get("time_overhead_repetitions") or [time_ratio]],
            step_seconds=float(e.get("step_seconds", 0.0)),
            store_all_seconds=float(e.get("store_all_step_seconds", 0.0)),
            samples=int(e.get("samples", e.get("repetitions_folded", 0))),
            planned_ok=e.get("planned_equals_measured", 1) == 1,
            bitwise=e.get("bitwise_equal"),
            predicted_time_overhead=None if pred is None else float(pred),
            recompute_share=None if share is None else float(share),
            recompute_kinds=kinds,
            repeat_share=opt_float(e.get("time_model_recompute_share")),
            weights=(
                (
                    float(e["time_model_tape_weight"]),
                    float(e["time_model_advance_weight"]),
                    opt_float(e.get("time_model_rebuild_weight")),
                    float(e.get("time_model_calibration_residual", 0.0)),
                    None if e.get("time_model_calibration_passes") is None else int(e["time_model_calibration_passes"]),
                )
                if "time_model_tape_weight" in e and "time_model_advance_weight" in e
                else None
            ),
            calibration_row=e.get("time_model_calibration_row", 0) == 1,
        )

    @property
    def memory_ratio(self) -> float:
        """Peak activation bytes as a fraction of store-all's (NaN when store-all saved nothing)."""
        return self.peak / self.store_all_peak if self.store_all_peak else float("nan")

    @property
    def engine_tax(self) -> float:
        """Measured time ratio minus what the recomputed FLOPs alone would cost (1 + FLOP overhead)."""
        return self.time_ratio - (1.0 + self.flop_overhead)

    @property
    def op_cost_tax(self) -> float | None:
        """Engine tax from the recomputed ops themselves: their time (in reference steps) minus their FLOP share."""
        return None if self.recompute_share is None else self.time_ratio * self.recompute_share - self.flop_overhead

    @property
    def rest_tax(self) -> float | None:
        """Engine tax from everything but the recomputed ops: executor bookkeeping, allocation, cache effects."""
        return None if self.recompute_share is None else self.time_ratio * (1.0 - self.recompute_share) - 1.0

    @property
    def is_full_recompute(self) -> bool:
        """Whether the policy recomputes every block (uniform:k=L)."""
        return self.display == f"uniform:k={self.layers}" or self.policy == f"uniform:k={self.layers}"


def opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(frozen=True)
class FrontierPoint:
    """One BM_Frontier run: the optimal planner's schedule for a case at one memory budget."""

    case: str
    budget: int
    peak: int
    flops_recompute: int
    flop_overhead: float
    forward_evals: int
    store_all_peak: int
    seconds: float

    @classmethod
    def from_entry(cls, case: str, e: dict[str, Any], name: str) -> FrontierPoint:
        """The point of benchmark entry `e` (named `name` in errors); BadInput on a missing counter."""
        return cls(
            case=case,
            budget=int(need(e, "budget_bytes", name)),
            peak=int(need(e, "peak_activation_bytes", name)),
            flops_recompute=int(need(e, "flops_recompute", name)),
            flop_overhead=float(need(e, "flop_overhead", name)),
            forward_evals=int(need(e, "forward_evals", name)),
            store_all_peak=int(e.get("store_all_peak_activation_bytes", 0)),
            seconds=seconds_of(e),
        )


@dataclass(frozen=True)
class PlannerPoint:
    """One BM_Planner run: a planner family's schedule for a chain of `layers` blocks and its planning time."""

    family: str
    policy: str
    layers: int
    peak: int
    forward_evals: int
    flop_overhead: float
    seconds: float

    @classmethod
    def from_entry(cls, fam: str, e: dict[str, Any], name: str) -> PlannerPoint:
        """The point of benchmark entry `e` (named `name` in errors); BadInput on a missing counter."""
        return cls(
            family=fam,
            policy=e.get("label") or fam,
            layers=int(need(e, "layers", name)),
            peak=int(need(e, "peak_activation_bytes", name)),
            forward_evals=int(need(e, "forward_evals", name)),
            flop_overhead=float(e.get("flop_overhead", 0.0)),
            seconds=seconds_of(e),
        )


def seconds_of(e: dict[str, Any]) -> float:
    """A benchmark entry's real time in seconds (its time_unit applied; ns when absent)."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}.get(e.get("time_unit", "ns"), 1e-9)
    return float(e.get("real_time", 0.0)) * scale


class Verify:
    """A `ckptcheck verify --json` result: its findings and the properties it checked."""

    def __init__(self, doc: Any, path: str) -> None:
        if not isinstance(doc, dict) or not isinstance(doc.get("findings", []), list):
            raise BadInput(f"verify JSON '{path}': not the output of `ckptcheck verify --json` (no 'findings' list)")
        self.doc: dict[str, Any] = doc
        self.findings: list[dict[str, Any]] = [f for f in doc.get("findings", []) if isinstance(f, dict)]
        self.ok = bool(doc.get("ok", not self.findings))
        self.catalogue_cases = doc.get("catalogue_cases")

    def finding_for(self, case: str, family: str) -> dict[str, Any] | None:
        """The finding on this catalogue case and policy family (verify's "policy_family"), if any."""
        for f in self.findings:
            origin = str(f.get("origin", ""))
            if origin == f"catalogue case {case}" and f.get("policy_family") == family:
                return f
        return None

    def summary_line(self) -> str:
        """One sentence: the seed, the cases and runs, each property held or violated, the number of findings."""
        d = self.doc
        props = d.get("properties", [])
        held = [p for p in props if isinstance(p, dict) and p.get("holds")]
        engine = d.get("engine", "correct")
        s = "`ckptcheck verify`" + ("" if engine == "correct" else f" of the broken engine '{engine}'")
        s += (
            f": seed {d.get('seed', '?')}, {d.get('cases_run', '?')} cases ({d.get('random_cases', '?')} random, "
            f"{d.get('catalogue_cases', '?')} catalogue), {d.get('policy_runs', '?')} case × policy runs"
        )
        cpm = d.get("cases_per_minute")
        if isinstance(cpm, (int, float)):
            s += f", {cpm:.0f} random cases per minute"
        if props:
            s += "; properties " + ", ".join(
                f"{p.get('number')} {p.get('id', '')} {'held' if p.get('holds') else 'VIOLATED'} "
                f"({p.get('checked', '?')} checked)"
                for p in props
                if isinstance(p, dict)
            )
        s += f"; {len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}"
        if len(held) == len(props) and not self.findings:
            s += " — all hold"
        return s + "."


@dataclass(frozen=True)
class FrameworkRow:
    """One `validate --timing-case` timing entry: another framework's plain and checkpointed step times (ms) and
    ckptcheck's engine's with the same segmenting, measured in the same run."""

    case: str
    blocks: int
    segments: int
    framework: str  # name and adapter version
    options: str  # the framework's options as k=v,... ("" when none)
    fw_plain: float
    fw_ckpt: float
    fw_overhead: float
    fw_bitwise: bool
    policy: str
    ck_plain: float
    ck_ckpt: float
    ck_overhead: float


class Frameworks:
    """`ckptcheck validate --timing-case ... --json` outputs: another framework's step-time overhead of
    checkpointing next to ckptcheck's own engine with the same segmenting, measured in the same run."""

    def __init__(self) -> None:
        self.rows: list[FrameworkRow] = []
        # `validate --adapter torch:module=...` reports (reports/user_models.py)
        self.user_rows: list[user_models.UserModelRow] = []

    def add(self, doc: Any, path: str) -> None:
        """Add one --frameworks JSON (a timing-case result or a user-model report); BadInput when it is neither."""
        if user_models.is_user_model(doc):
            self.user_rows += user_models.rows(doc, path, BadInput)
            return
        if not isinstance(doc, dict) or not isinstance(doc.get("timing"), list):
            raise BadInput(
                f"frameworks JSON '{path}': not the output of `ckptcheck validate --timing-case ... --json` "
                f"(no 'timing' list)"
            )
        version = str(doc.get("adapter", {}).get("version", "")) if isinstance(doc.get("adapter"), dict) else ""
        for t in doc["timing"]:
            try:
                fw, ck = t["framework"], t["ckptcheck"]
                row = FrameworkRow(
                    case=str(t["case"]),
                    blocks=int(t["blocks"]),
                    segments=int(t["segments"]),
                    framework=f"{fw['name']} {version}".strip(),
                    options=",".join(f"{k}={v}" for k, v in sorted(fw.get("options", {}).items())),
                    fw_plain=float(fw["plain_step_ms"]),
                    fw_ckpt=float(fw["checkpoint_step_ms"]),
                    fw_overhead=float(fw["overhead"]),
                    fw_bitwise=bool(fw.get("bitwise_equal", False)),
                    policy=str(ck["policy"]),
                    ck_plain=float(ck["plain_step_ms"]),
                    ck_ckpt=float(ck["checkpoint_step_ms"]),
                    ck_overhead=float(ck["overhead"]),
                )
            except (KeyError, TypeError, ValueError) as e:
                raise BadInput(f"frameworks JSON '{path}': a timing entry lacks or mistypes {e}") from None
            self.rows.append(row)


def median_of(xs: list[float | None]) -> float | None:
    """The median of the values that are not None (None when there are none)."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def policy_family(row: StepRow) -> str:
    """The family a step row is grouped under in the report: full recompute apart from its planner's family."""
    if row.is_full_recompute:
        return "full recompute (uniform:k=L)"
    return row.family
