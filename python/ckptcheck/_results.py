"""Typed results, read from the CLI's own report files (validate's validate.json, plan's --json output).

The fields follow harness/user_model/user_model_report.cpp and harness/cli/cmd_plan.cpp; `raw` keeps the whole
record for anything not lifted into a field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class Difference:
    """The first tensor that differs between the plain and the checkpointed run."""

    step: int
    tensor: str  # as the CLI names it: "grad blocks.0.fc1.weight", "buffer 0.1.running_mean", "loss", ...
    count: int  # elements that differ
    ulp_distance: int  # at the first differing element
    max_ulp_distance: int
    expected: str  # the plain run's value at the first differing element
    actual: str  # the checkpointed run's
    first_index: int

    @property
    def kind(self) -> str:
        """grad, buffer, param, loss, ...: the first word of `tensor`."""
        return self.tensor.split(" ", 1)[0]

    @property
    def module(self) -> str:
        """The module path that owns the tensor ("blocks.0.fc1" for "grad blocks.0.fc1.weight"); "" at the top."""
        parts = self.tensor.split(" ", 1)
        name = parts[1] if len(parts) > 1 else ""
        return name.rpartition(".")[0]

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> Difference:
        return cls(
            step=j["step"],
            tensor=j["tensor"],
            count=j.get("count", 0),
            ulp_distance=j.get("ulp_distance", 0),
            max_ulp_distance=j.get("max_ulp_distance", 0),
            expected=str(j.get("expected", "")),
            actual=str(j.get("actual", "")),
            first_index=j.get("first_index", 0),
        )


@dataclass(frozen=True)
class Memory:
    """The memory property of one seed: saved-tensor bytes (hooks) and torch.profiler's activation bytes."""

    holds: bool
    plain_bytes: Optional[int]  # saved for backward, plain
    checkpoint_bytes: Optional[int]  # saved for backward, checkpointed
    saving: Optional[float]  # 1 - checkpoint/plain
    placement_bound_bytes: Optional[int]  # what the checkpoint placement implies at most
    profiler_activation_saving: Optional[float]
    why: str  # the finding's reason, "" when it holds

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> Memory:
        prof = j.get("profiler") or {}
        return cls(
            holds=j.get("result") == "holds",
            plain_bytes=j.get("plain_bytes"),
            checkpoint_bytes=j.get("checkpoint_bytes"),
            saving=j.get("saving"),
            placement_bound_bytes=j.get("placement_bound_bytes"),
            profiler_activation_saving=prof.get("activation_saving"),
            why=j.get("why", ""),
        )


@dataclass(frozen=True)
class SeedResult:
    """One seed's (or the shrunk case's) runs."""

    seed: int
    steps: int
    batch_size: int
    status: str  # holds, finding, bad-input, fault
    bitwise: str  # holds, finding, rounding-accepted, ...
    first_difference: Optional[Difference]
    differing_tensors: int
    finding_class: Optional[str]  # state-updated-twice, rng-desync, missing-gradient, rounding, semantic, ...
    why: str  # the class's evidence
    memory: Optional[Memory]
    replay: Optional[str]  # the command line that reruns this finding
    error: str
    step_seconds: Optional[dict[str, float]]
    directory: str  # its runs (kept with --keep-work, and for the shrunk case)

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> SeedResult:
        diag = j.get("diagnosis") or {}
        first = j.get("first_difference")
        return cls(
            seed=j["seed"],
            steps=j["steps"],
            batch_size=j["batch_size"],
            status=j["status"],
            bitwise=j.get("bitwise", ""),
            first_difference=Difference.from_json(first) if first else None,
            differing_tensors=j.get("differing_tensors", 0),
            finding_class=diag.get("class"),
            why=diag.get("why", ""),
            memory=Memory.from_json(j["memory"]) if "memory" in j else None,
            replay=j.get("replay"),
            error=j.get("error", ""),
            step_seconds=j.get("step_seconds"),
            directory=j.get("dir", ""),
        )


@dataclass(frozen=True)
class ValidateResult:
    """`ckptcheck validate --adapter torch:module=...` (or jax:): the verdict and what it rests on."""

    verdict: str  # holds or finding (bad input and adapter faults raise CkptcheckError instead)
    adapter: str  # torch:module=PATH.py:NAME
    seeds: list[SeedResult]
    shrunk: Optional[SeedResult]  # the smallest case that still shows the first finding
    findings: list[dict[str, Any]]  # one per finding: check (bitwise, memory, plan), seed, tensor, class or why
    summary: str  # the CLI's printed summary, as a user of the CLI reads it
    report: Path  # validate.json
    raw: dict[str, Any] = field(repr=False)

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    def _finding_seed(self) -> Optional[SeedResult]:
        if self.shrunk is not None:
            return self.shrunk
        return next((s for s in self.seeds if s.status == "finding"), None)

    @property
    def first_difference(self) -> Optional[Difference]:
        s = self._finding_seed()
        return s.first_difference if s else None

    @property
    def finding_class(self) -> Optional[str]:
        s = self._finding_seed()
        return s.finding_class if s else None

    @property
    def replay(self) -> Optional[str]:
        s = self._finding_seed()
        return s.replay if s else None

    @property
    def memory(self) -> Optional[Memory]:
        """The first seed's memory property (every seed's is in `seeds`)."""
        return next((s.memory for s in self.seeds if s.memory is not None), None)

    def message(self) -> str:
        """What a failed test shows: the finding in one line, then the CLI's summary."""
        head = "ckptcheck: %s: %s" % (self.adapter, self.verdict)
        s = self._finding_seed()
        if s is not None and s.first_difference is not None:
            d = s.first_difference
            head += " -- %s at step %d, module '%s': %d element(s) differ, %d ulp" % (
                d.tensor,
                d.step,
                d.module,
                d.count,
                d.ulp_distance,
            )
            if s.finding_class:
                head += "; class %s" % s.finding_class
        elif s is not None and s.memory is not None and not s.memory.holds:
            head += " -- memory: %s" % s.memory.why
        if s is not None and s.replay:
            head += "\nreplay: %s" % s.replay
        return head + "\n\n" + self.summary.rstrip()

    @classmethod
    def from_json(cls, j: dict[str, Any], summary: str, report: Path) -> ValidateResult:
        return cls(
            verdict=j["result"],
            adapter=j["adapter"],
            seeds=[SeedResult.from_json(s) for s in j["seeds"]],
            shrunk=SeedResult.from_json(j["shrunk"]) if "shrunk" in j else None,
            findings=list(j.get("findings", [])),
            summary=summary,
            report=report,
            raw=j,
        )


@dataclass(frozen=True)
class PlanResult:
    """`ckptcheck plan --json`: a policy's predicted peak, evaluations, FLOPs (and on a profiled model, time)."""

    policy: str
    peak_activation_bytes: int
    forward_evals: int
    flops: dict[str, int]  # forward, recompute, backward
    flop_overhead: float
    time_overhead: Optional[float]  # predicted, for a profiled model (--costs)
    saved_bytes: Optional[int]  # predicted as PyTorch counts them, for a placement
    expressible: Optional[bool]  # as one checkpoint per recomputed segment (--costs)
    why_not: str
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, j: dict[str, Any]) -> PlanResult:
        return cls(
            policy=j["policy"],
            peak_activation_bytes=j["peak_activation_bytes"],
            forward_evals=j["forward_evals"],
            flops=dict(j.get("flops", {})),
            flop_overhead=j.get("flop_overhead", 0.0),
            time_overhead=j.get("time_overhead"),
            saved_bytes=j.get("saved_bytes"),
            expressible=j.get("expressible"),
            why_not=j.get("why_not", ""),
            raw=j,
        )
