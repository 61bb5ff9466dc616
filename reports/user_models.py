"""The "Your own models" table of the report: `ckptcheck validate --adapter torch:module=... --json` outputs (or
their OUT/validate.json), one row per seed — verdicts, saved activation bytes plain vs checkpointed, and step
times, all measured in the same run (harness/user_model/torch/USER_MODEL.md). Kept apart from make_report.py,
which feeds it through `--frameworks`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HEADER = [
    "setup",
    "seed",
    "batch",
    "bitwise",
    "class",
    "first difference",
    "memory",
    "saved plain",
    "saved checkpointed",
    "placement bound",
    "saving",
    "compiled temp plain",
    "compiled temp checkpointed",
    "plain ms",
    "checkpointed ms",
    "time overhead",
    "activation plain",
    "activation checkpointed",
]

NOTE = (
    "Each row trains the user's model plain and with the user's checkpointing for the same seed, steps and "
    "batches, in the same run on this machine: *bitwise* compares loss, gradients, buffers, parameters after "
    "the step and the generator state; *saved* bytes are what the forward of step 0 left for backward (each "
    "storage once, parameters excluded; for a JAX model the residuals JAX's autodiff saves, the step's "
    "arguments excluded); the *placement bound* is what the plain run saves outside the "
    "modules the checkpointed run recomputes, plus their inputs; *compiled temp* (JAX only) is XLA's memory "
    "analysis of the compiled step, what the compiler kept (harness/user_model/jax/USER_MODEL.md); step times "
    "are the median of the steps after the first; *activation* bytes (torch) are what the forward left allocated "
    "for the backward, from torch.profiler's memory timeline in a measuring pass of its own, which holds under "
    "torch.compile too: the memory property's figure. A JAX seed within its default tolerance is "
    "rounding-accepted, not holds."
)


@dataclass(frozen=True)
class UserModelRow:
    """One seed of a user-model report: its verdicts, saved bytes, compiled temp bytes, step seconds and profiled
    activation bytes (None where the run did not measure them)."""

    setup: str  # the model spec without the adapter and directories
    seed: int
    batch: int
    bitwise: str
    diagnosis: str  # the diagnosis class ("" when none)
    first: str  # the first differing tensor or the error, shortened
    memory: str
    plain_b: int | None
    ckpt_b: int | None
    bound_b: int | None
    saving: float | None
    temp_plain: int | None
    temp_ckpt: int | None
    plain_s: float | None
    ckpt_s: float | None
    act_plain: int | None
    act_ckpt: int | None


def is_user_model(doc: Any) -> bool:
    """Whether a --frameworks JSON is a user-model report (its "kind" is "user-model")."""
    return isinstance(doc, dict) and doc.get("kind") == "user-model"


def rows(doc: dict[str, Any], path: str, bad_input: Callable[[str], Exception]) -> list[UserModelRow]:
    """Rows of one report; raises bad_input(message) for a malformed one."""
    out = []
    setup = str(doc.get("adapter", "")).split("module=")[-1].split("/")[-1]
    try:
        for s in doc["seeds"]:
            mem, t = s.get("memory") or {}, s.get("step_seconds") or {}
            compiled = s.get("compiled_memory") or {}
            prof = mem.get("profiler") or {}
            first = str((s.get("first_difference") or {}).get("tensor", s.get("error", "")))
            first = first if len(first) <= 120 else first[:117] + "..."  # an exception's text can be a paragraph
            out.append(
                UserModelRow(
                    setup=setup,
                    seed=int(s["seed"]),
                    batch=int(s.get("batch_size", 0)),
                    bitwise=str(s.get("bitwise", s["status"])),
                    diagnosis=str((s.get("diagnosis") or {}).get("class", "")),
                    first=first,
                    memory=str(mem.get("result", "")),
                    plain_b=mem.get("plain_bytes"),
                    ckpt_b=mem.get("checkpoint_bytes"),
                    bound_b=mem.get("placement_bound_bytes"),
                    saving=mem.get("saving"),
                    temp_plain=(compiled.get("plain") or {}).get("temp"),
                    temp_ckpt=(compiled.get("checkpoint") or {}).get("temp"),
                    plain_s=t.get("plain"),
                    ckpt_s=t.get("checkpoint"),
                    act_plain=(prof.get("plain") or {}).get("activation_bytes"),
                    act_ckpt=(prof.get("checkpoint") or {}).get("activation_bytes"),
                )
            )
    except (KeyError, TypeError, ValueError) as e:
        raise bad_input(f"frameworks JSON '{path}': a user-model seed entry lacks or mistypes {e}") from None
    return out


def cells(rows_: list[UserModelRow], fmt_bytes: Callable[[float], str]) -> list[list[str]]:
    """The table's cells, one list of strings per row ("-" where a figure is absent)."""

    def ms(x: Any) -> str:
        return f"{1e3 * x:.2f}" if isinstance(x, (int, float)) and x > 0 else "-"

    def over(r: UserModelRow) -> str:
        p, c = r.plain_s, r.ckpt_s
        return f"{c / p - 1:+.0%}" if isinstance(p, (int, float)) and isinstance(c, (int, float)) and p > 0 else "-"

    def size(b: Any) -> str:
        return fmt_bytes(b) if b is not None else "-"

    return [
        [
            r.setup,
            str(r.seed),
            str(r.batch),
            r.bitwise,
            r.diagnosis or "-",
            r.first or "-",
            r.memory or "-",
            size(r.plain_b),
            size(r.ckpt_b),
            size(r.bound_b),
            f"{100 * r.saving:.1f}%" if r.saving is not None else "-",
            size(r.temp_plain),
            size(r.temp_ckpt),
            ms(r.plain_s),
            ms(r.ckpt_s),
            over(r),
            size(r.act_plain),
            size(r.act_ckpt),
        ]
        for r in rows_
    ]
